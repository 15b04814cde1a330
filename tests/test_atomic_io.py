"""rosetrain.core.io.atomic_path: the one temp-file-and-rename of rosetrain, for files and folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import (
    MARKER_NAME,
    atomic_path,
    atomic_write,
    output_lock,
    remove_atomic_temps,
    temp_path,
)


def test_a_file_is_replaced_whole_and_no_temp_is_left(tmp_path):
    target = tmp_path / "sub" / "a.txt"
    atomic_write(target, "old")
    with atomic_path(target) as tmp:
        tmp.write_text("new")
        assert target.read_text() == "old"  # readers see the old file until the rename
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.txt"]


def test_an_error_keeps_the_old_file_and_removes_the_temp(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write(target, b"old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed midway")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_a_folder_replaces_an_old_one_which_is_removed_after(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.bin").write_text("old")
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "new.bin").write_text("new")
        assert (target / "old.bin").exists()
    assert [p.name for p in target.iterdir()] == ["new.bin"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # neither temp nor old folder left


def test_a_failed_folder_leaves_the_old_one(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.bin").write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "half.bin").write_text("half")
        raise RuntimeError("save failed")
    assert [p.name for p in target.iterdir()] == ["old.bin"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def killed_while_writing(folder, body: str) -> None:
    """Run ``body`` in a process of its own holding ``folder`` with output_lock, where
    ``die()`` ends it as SIGKILL would: no cleanup, no finally blocks."""
    script = textwrap.dedent("""
        import os, sys
        from pathlib import Path
        from rosetrain.core.io import atomic_path, atomic_write, claim_outputs, output_lock
        def die():
            os._exit(9)
        folder = Path(sys.argv[1])
        with output_lock(folder):
    """) + textwrap.indent(textwrap.dedent(body), "    ")
    done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr


def users_temp_lookalikes(folder):
    """Files of the user's named as a temp could be (``.<name>.<digits>-<digits>.tmp``)."""
    (folder / ".notes.2024-06.tmp").write_text("the user's notes")
    (folder / ".backup.2024-06.tmp").mkdir()
    (folder / ".backup.2024-06.tmp" / "data.csv").write_text("the user's backup")
    (folder / "keep.tmp").write_text("not ours")
    return {".notes.2024-06.tmp", ".backup.2024-06.tmp", "keep.tmp"}


def test_cleanup_removes_the_temps_the_marker_names_and_no_lookalike(tmp_path):
    mine = users_temp_lookalikes(tmp_path)
    killed_while_writing(
        tmp_path,
        """
        real_replace = os.replace
        os.replace = lambda src, dst: die() if Path(dst).name == "metadata.jsonl" else real_replace(src, dst)
        atomic_write(folder / "metadata.jsonl", "half")
    """,
    )
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".metadata.jsonl.")]
    assert len(left) == 1  # the kill left the temp, recorded in the marker
    assert json.loads((tmp_path / MARKER_NAME).read_text())["temps"] == [left[0].name]
    with output_lock(tmp_path):
        assert remove_atomic_temps(tmp_path) == left
    assert {p.name for p in tmp_path.iterdir()} == mine | {MARKER_NAME}
    assert (tmp_path / ".backup.2024-06.tmp" / "data.csv").read_text() == "the user's backup"
    assert "temps" not in json.loads((tmp_path / MARKER_NAME).read_text())


def test_a_killed_folder_write_is_cleaned_up_by_name(tmp_path):
    """A folder written whole (the demo's base model) that a kill cut short is a
    temp folder; cleanup by name removes it and leaves other temps alone (of
    ``base.json`` too, whose temp's name begins as ``base``'s does)."""
    killed_while_writing(
        tmp_path,
        """
        claim_outputs(folder / "base", folder / "base.json")
        with atomic_path(folder / "base") as half, atomic_path(folder / "base.json") as other:
            half.mkdir()
            (half / "model.safetensors").write_bytes(b"half")
            other.write_text("half")
            die()
    """,
    )
    half, other = (next(tmp_path.glob(f".{name}.[0-9]*.tmp")) for name in ("base", "base.json"))
    with output_lock(tmp_path):
        assert remove_atomic_temps(tmp_path, "base") == [half]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([MARKER_NAME, other.name])
        assert remove_atomic_temps(tmp_path) == [other]
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER_NAME]


def test_a_completed_write_leaves_no_temp_named(tmp_path):
    with output_lock(tmp_path):
        atomic_write(tmp_path / "a.txt", "x")
        with pytest.raises(RuntimeError), atomic_path(tmp_path / "a.txt") as tmp:
            tmp.write_text("half")
            raise RuntimeError("failed midway")
    assert json.loads((tmp_path / MARKER_NAME).read_text()) == {"written_by": "rosetrain", "files": ["a.txt"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER_NAME, "a.txt"]


def test_outside_a_held_folder_nothing_is_recorded_so_nothing_is_removed(tmp_path):
    left = temp_path(tmp_path / "metadata.jsonl")
    left.write_text("a temp no record names, or the user's file of that name")
    assert remove_atomic_temps(tmp_path) == []
    assert left.exists()


@pytest.mark.parametrize("link", ["dangling", "to a file"])
def test_a_link_is_never_replaced_by_a_write(tmp_path, link):
    target = tmp_path / ("missing.txt" if link == "dangling" else "real.txt")
    if link != "dangling":
        target.write_text("the user's")
    (tmp_path / "out.txt").symlink_to(target)
    with pytest.raises(RosetrainError, match=r"out.txt: a symbolic link .*never writes an output over"):
        atomic_write(tmp_path / "out.txt", "rosetrain's")
    assert (tmp_path / "out.txt").is_symlink() and os.readlink(tmp_path / "out.txt") == str(target)
    assert not target.exists() if link == "dangling" else target.read_text() == "the user's"
