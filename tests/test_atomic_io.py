"""rosetrain.core.io.atomic_path: the one temp-file-and-rename of rosetrain, for files and folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import (
    MARKER_NAME,
    atomic_path,
    atomic_write,
    atomic_writes,
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


def test_a_file_given_as_pieces_is_written_as_their_concatenation(tmp_path):
    atomic_writes(
        {
            tmp_path / "lines.jsonl": ['{"a": "é"}\n', b"{}\n", ""],  # text as UTF-8, bytes as they are
            tmp_path / "tuple.txt": (b"x", "y"),
            tmp_path / "none.jsonl": [],
            tmp_path / "bytearray.bin": bytearray(b"ab"),  # one piece, not a sequence of ints
        }
    )
    assert (tmp_path / "lines.jsonl").read_bytes() == '{"a": "é"}\n{}\n'.encode()
    assert (tmp_path / "tuple.txt").read_bytes() == b"xy"
    assert (tmp_path / "none.jsonl").read_bytes() == b""
    assert (tmp_path / "bytearray.bin").read_bytes() == b"ab"


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
        from rosetrain.core.io import atomic_path, atomic_write, atomic_writes, claim_outputs, output_lock
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


def test_several_files_update_the_marker_three_times_not_three_times_each(tmp_path, monkeypatch):
    """Each marker update replaces the marker, which ext4 flushes to disk (about 2 ms):
    a scored run's 30 summary files made 90 of them."""
    import rosetrain.core.io as io

    updates = []
    real = io._write_marker
    monkeypatch.setattr(io, "_write_marker", lambda marker, text: (updates.append(text), real(marker, text)))
    files = {tmp_path / f"f{i}.txt": f"text {i}" for i in range(10)}
    with output_lock(tmp_path):
        updates.clear()
        atomic_writes(files)
        assert len(updates) == 3  # the claims, the temps, the temps gone
        updates.clear()
        atomic_writes(files)  # all claimed already: the temps only
        assert len(updates) == 2
    assert {p.name: p.read_text() for p in files} == {f"f{i}.txt": f"text {i}" for i in range(10)}
    marker = json.loads((tmp_path / MARKER_NAME).read_text())
    assert marker == {"written_by": "rosetrain", "files": sorted(p.name for p in files)}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([MARKER_NAME, *(p.name for p in files)])


def test_several_files_refuse_a_foreign_one_before_writing_any(tmp_path):
    (tmp_path / "b.txt").write_text("the user's")
    with (
        output_lock(tmp_path),
        pytest.raises(RosetrainError, match="b.txt: already exists and rosetrain did not"),
    ):
        atomic_writes({tmp_path / "a.txt": "ours", tmp_path / "b.txt": "ours"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]  # nothing claimed, nothing written
    assert (tmp_path / "b.txt").read_text() == "the user's"


def test_several_files_killed_midway_leave_whole_files_and_named_temps(tmp_path):
    killed_while_writing(
        tmp_path,
        """
        real_replace = os.replace
        os.replace = lambda src, dst: die() if Path(dst).name == "c.txt" else real_replace(src, dst)
        atomic_writes({folder / name: name for name in ("a.txt", "b.txt", "c.txt", "d.txt")})
    """,
    )
    assert (tmp_path / "a.txt").read_text() == "a.txt" and (tmp_path / "b.txt").read_text() == "b.txt"
    assert not (tmp_path / "c.txt").exists() and not (tmp_path / "d.txt").exists()
    left = sorted(p for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
    assert [p.name.split(".")[1] for p in left] == ["c", "d"]
    with output_lock(tmp_path):
        assert sorted(remove_atomic_temps(tmp_path)) == left
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER_NAME, "a.txt", "b.txt"]


def test_several_files_failing_midway_remove_their_temps(tmp_path, monkeypatch):
    import rosetrain.core.io as io

    real = io.os.replace

    def fail_on_c(src, dst):
        if Path(dst).name == "c.txt":
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(io.os, "replace", fail_on_c)
    with output_lock(tmp_path), pytest.raises(OSError, match="No space left"):
        atomic_writes({tmp_path / name: name for name in ("a.txt", "b.txt", "c.txt")})
    monkeypatch.setattr(io.os, "replace", real)
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER_NAME, "a.txt", "b.txt"]
    assert "temps" not in json.loads((tmp_path / MARKER_NAME).read_text())
