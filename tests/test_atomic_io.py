"""rosetrain.core.io.atomic_path: the one temp-file-and-rename of rosetrain, for files and folders."""

from __future__ import annotations

import pytest

from rosetrain.core.io import atomic_path, atomic_write, remove_atomic_temps, temp_path


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


def test_the_temps_a_kill_leaves_are_the_ones_cleanup_removes(tmp_path):
    left = temp_path(tmp_path / "metadata.jsonl")
    left.write_text("half")
    (tmp_path / "keep.tmp").write_text("not ours")
    assert remove_atomic_temps(tmp_path) == [left]
    assert [p.name for p in tmp_path.iterdir()] == ["keep.tmp"]


def test_a_killed_folder_write_is_cleaned_up_by_name(tmp_path):
    """A folder written whole (the demo's base model) that a kill cut short is a
    temp folder; cleanup by name removes it and leaves other temps alone."""
    half = temp_path(tmp_path / "base")
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"half")
    other = temp_path(tmp_path / "report.md")
    other.write_text("half")
    assert remove_atomic_temps(tmp_path, "base") == [half]
    assert [p.name for p in tmp_path.iterdir()] == [other.name]
