"""Names and paths that come from users or from metadata files, checked before
rosetrain reads or writes anything with them.

A split name becomes part of file names (``metadata_<split>.jsonl``,
``hf/<split>/``): it must be a plain name, or ``--split ..`` would point the
writer (and ``--overwrite``) at the folder above. An ``image`` path in a
metadata file is data, not an instruction: it must stay inside the dataset
folder, or a crafted file could make ``eval`` send any file on the machine to
an endpoint. One exception, for every caller: a dataset in the Hugging Face
Hub cache (``.../datasets--OWNER--NAME/snapshots/<rev>/``) is a folder of
symlinks into the same repo's ``blobs/``, so there a link may resolve into that
repo's ``blobs/`` (never its ``refs/``, another repo, or outside the cache).
Standard library only.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from rosetrain.core.errors import RosetrainError
from rosetrain.core.memo import memo_table

# letters, digits, '_', '-', '.'; starts with a letter, digit or '_' (so never '.', '..' or a flag)
_SPLIT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
MAX_SPLIT_NAME = 100


def check_split_name(split: object, what: str = "--split") -> str:
    """``split`` if it is a plain name; otherwise an error naming ``what``."""
    if not isinstance(split, str) or not _SPLIT_NAME.match(split) or len(split) > MAX_SPLIT_NAME:
        raise RosetrainError(
            f"{what}: {split!r} is not a plain split name (letters, digits, '_', '-' and '.', "
            f"starting with a letter, digit or '_'; no '/', not empty, not '.' or '..')"
        )
    return split


def confined_path(root: str | Path, relative: object, where: str) -> Path:
    """``root / relative`` when it stays inside ``root``; an error naming ``where``
    (file, line, field) when ``relative`` is absolute, climbs out with ``..``,
    or resolves outside ``root`` through a symlink (in the Hub cache: outside
    its repo's blobs/)."""
    root = Path(root)
    check_confined(str(root), relative, where)
    return root / relative  # type: ignore[operator]  # a str: checked above


def check_confined(root: str, relative: object, where: str) -> None:
    """:func:`confined_path`'s checks alone, on strings: a split runs them for
    every image it lists, and building the path objects cost most of it."""
    if not isinstance(relative, str) or not relative.strip():
        raise RosetrainError(f"{where}: expected a relative path inside {root}, got {relative!r:.200}")
    # string tests, as PurePosixPath would judge: absolute; a '..' part
    if relative.startswith("/") or os.path.isabs(relative) or ".." in relative.split("/"):
        raise RosetrainError(
            f"{where}: {relative!r:.200} leaves the dataset folder {root} "
            "(paths must be relative, without '..')"
        )
    try:
        inside = _resolves_inside(root, relative)
    except (OSError, ValueError) as err:  # a symlink loop, an embedded NUL byte
        raise RosetrainError(f"{where}: {relative!r:.200} is not a usable path ({err})") from None
    if not inside:
        raise RosetrainError(
            f"{where}: {relative!r:.200} resolves outside the dataset folder "
            f"{root} (through a symlink); rosetrain reads a dataset's files only inside it"
        )


def _resolves_inside(root: str, relative: str) -> bool:
    """Whether ``root/relative``, symlinks followed, lies inside ``root`` (or, for
    a root in the Hub cache, inside its repo's blobs/). A split has
    thousands of images in a few folders: each folder is resolved once, then
    only the file itself is looked at (is it a symlink?), where the folder is there."""
    real_root = _real_folder(root)
    folder, name = os.path.split(os.path.join(root, relative))
    real_folder = _real_folder(folder)
    real = os.path.join(real_folder, name)
    there = _FOLDER_THERE.get(real_folder)
    if there is None:
        there = _FOLDER_THERE[real_folder] = os.path.isdir(real_folder)
    # a folder that is not there holds no link (scoring against the metadata alone)
    if there and os.path.islink(real):
        real = os.path.realpath(real)
    if _inside(real, real_root):
        return True
    repo = _hub_repo_folder(real_root)  # a snapshot's files are links into its repo's blobs/, only
    return repo is not None and _inside(real, os.path.join(repo, "blobs"))


def _inside(real: str, folder: str) -> bool:
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


# real folder -> whether it is there, looked at once while a split is read
_FOLDER_THERE: dict[str, bool] = memo_table()


@functools.lru_cache(maxsize=4096)
def _real_folder(folder: str) -> str:
    return os.path.realpath(folder)


# A dataset repo's folder in the Hub cache: huggingface_hub names it
# datasets--OWNER--NAME and keeps refs/, blobs/ and snapshots/<rev>/ in it
_HUB_DATASET_FOLDER = re.compile(r"datasets--[^/]+--[^/]+\Z")


@functools.lru_cache(maxsize=256)
def _hub_repo_folder(real_root: str) -> str | None:
    """The ``datasets--OWNER--NAME`` folder of the Hub cache whose
    ``snapshots/<rev>/`` holds ``real_root`` (a real path), if any."""
    parts = real_root.split(os.sep)
    for i in range(len(parts) - 2, 0, -1):  # parts[i + 1] is the revision
        if parts[i] == "snapshots" and parts[i + 1] and _HUB_DATASET_FOLDER.match(parts[i - 1]):
            repo = os.sep.join(parts[:i])
            return repo if os.path.isdir(os.path.join(repo, "blobs")) else None
    return None


def in_hub_snapshot(folder: str | Path) -> bool:
    """Whether ``folder`` (symlinks followed) lies in a snapshot of the Hub cache:
    then every file read in it must resolve inside its repo's blobs/."""
    return _hub_repo_folder(_real_folder(str(folder))) is not None
