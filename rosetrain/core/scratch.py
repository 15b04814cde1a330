"""Scratch folders that a killed process does not leave behind for good.

A Ray task renders its shard into a scratch folder and removes it when done.
A task killed midway cannot: Ctrl-C of a driver that started its own local
cluster shuts the cluster down under its running tasks, and the OOM killer or
a drained node does the same. So each scratch folder's name carries its
process id, and a marker inside it says rosetrain made it; making a scratch
folder first removes, on that machine, those whose process is gone.

Only folders of this user with the marker, whose process no longer runs and
which are older than ``ORPHAN_AGE_S`` are removed: a process id seen from
another PID namespace sharing the temp folder (containers) may look dead, and
age keeps its folder safe while it works.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "rosetrain-scratch-"
MARKER = ".rosetrain-scratch"  # beside the work folder, never in what the caller sees
ORPHAN_AGE_S = 600.0


@contextmanager
def scratch_folder() -> Iterator[Path]:
    """An empty folder of this process's own, removed on the way out."""
    remove_orphans()
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    try:
        (folder / MARKER).touch()
        work = folder / "work"
        work.mkdir()
        yield work
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # our own mkdtemp, nothing else


def remove_orphans(root: str | os.PathLike | None = None, min_age_s: float = ORPHAN_AGE_S) -> list[Path]:
    """Remove the scratch folders under ``root`` (the temp folder) left by processes
    that are gone; return them."""
    removed = []
    now = time.time()
    for folder in Path(root or tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        pid = folder.name[len(PREFIX) :].partition("-")[0]
        marker = folder / MARKER
        try:
            info = marker.lstat()
        except OSError:  # not ours (no marker), or removed meanwhile
            continue
        if (
            folder.is_symlink()
            or not pid.isdigit()
            or info.st_uid != os.getuid()
            or now - info.st_mtime < min_age_s
            or _running(int(pid))
        ):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process: not gone, and not a zombie that nothing
    reaps (a killed cluster's workers are handed to PID 1, which in a container
    may never reap them)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"  # the state, after the name
    except (OSError, IndexError):  # no /proc (macOS): alive, as kill said
        return True
