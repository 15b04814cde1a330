"""Scratch folders (rosetrain/core/scratch.py): removed on the way out, and one a
killed process left is removed by the next, never a folder rosetrain did not make."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rosetrain.core import scratch


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))  # what gettempdir() answers
    return root


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def left_behind(root, pid: int, marker: bool = True, age_s: float = 3600):
    folder = root / f"{scratch.PREFIX}{pid}-abc123"
    (folder / "work" / "images").mkdir(parents=True)
    (folder / "work" / "images" / "half.png.tmp").write_bytes(b"\x89PNG")
    if marker:
        (folder / scratch.MARKER).touch()
        old = os.stat(folder / scratch.MARKER).st_mtime - age_s
        os.utime(folder / scratch.MARKER, (old, old))
    return folder


def test_a_scratch_folder_is_empty_and_gone_afterwards(temp_root):
    with scratch.scratch_folder() as work:
        assert work.is_dir() and list(work.iterdir()) == []
        (work / "file").write_text("x")
    assert list(temp_root.iterdir()) == []


def test_a_scratch_folder_is_removed_when_its_work_fails(temp_root):
    with pytest.raises(KeyError), scratch.scratch_folder() as work:
        (work / "file").write_text("x")
        raise KeyError("boom")
    assert list(temp_root.iterdir()) == []


def test_the_folder_of_a_killed_process_is_removed_by_the_next(temp_root):
    orphan = left_behind(temp_root, dead_pid())
    with scratch.scratch_folder():
        assert not orphan.exists()


def test_the_folder_of_a_zombie_is_an_orphan(temp_root):
    """A killed cluster's workers go to PID 1, which in a container may never reap them."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 60
    while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline  # exited, not yet waited for: a zombie
        time.sleep(0.01)
    try:
        orphan = left_behind(temp_root, child.pid)
        assert scratch.remove_orphans() == [orphan]
    finally:
        child.wait()


def test_what_is_not_an_orphan_of_ours_is_kept(temp_root):
    kept = [
        left_behind(temp_root, os.getpid()),  # its process runs
        left_behind(temp_root, dead_pid(), age_s=0),  # too recent to judge
        left_behind(temp_root, dead_pid() + 1_000_000, marker=False),  # no marker: not ours
    ]
    foreign = temp_root / f"{scratch.PREFIX}notapid-x"
    foreign.mkdir()
    (foreign / scratch.MARKER).touch()
    os.utime(foreign / scratch.MARKER, (0, 0))
    (temp_root / "rosetrain-scratch-1-plain-file").write_text("a user's file")
    link = temp_root / f"{scratch.PREFIX}{dead_pid()}-link"
    link.symlink_to(left_behind(temp_root / "..", dead_pid()), target_is_directory=True)

    assert scratch.remove_orphans() == []
    for path in [*kept, foreign, link, temp_root / "rosetrain-scratch-1-plain-file"]:
        assert path.exists()
    assert scratch.remove_orphans(min_age_s=0) == [kept[1]]


def test_a_ray_task_renders_in_a_scratch_folder_it_removes(temp_root, small_spec):
    from rosetrain.data.generate import make_job, render_shard_files
    from rosetrain.generators.spec import load_spec

    orphan = left_behind(temp_root, dead_pid())
    job = make_job(load_spec(small_spec), temp_root.parent / "out", "test", scenes=4, shard_size=2)
    files = render_shard_files(job, 1)
    assert any(name.endswith(".png") for name in files) and scratch.MARKER not in str(files)
    assert list(temp_root.iterdir()) == []
    assert not orphan.exists()
