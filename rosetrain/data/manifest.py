"""What ``rosetrain generate`` owns in an output folder, and nothing more.

Each split it writes has a manifest, ``.parts/<split>.manifest.json``: the
settings the split was made with and, once the split is finished, the list of
every file written for it. rosetrain replaces or deletes only the files a
manifest lists (for a split still being written: the shard parts under
``.parts/<split>/`` that the manifest governs, and the files those parts
name). A file found without a manifest is someone else's: a folder holding an
official ROSE release, or any other split rosetrain did not write, is refused,
``--overwrite`` included. A manifest that cannot be read is an error, never a
reason to guess.
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.jsonio import fields_decoder
from rosetrain.data.bridges import split_names
from rosetrain.data.paths import confined_path

PARTS_DIR = ".parts"
IMAGE_FIELDS = ("image", "base_image")


def manifest_path(out_dir: Path, split: str) -> Path:
    return out_dir / PARTS_DIR / f"{split}.manifest.json"


def parts_dir(out_dir: Path, split: str) -> Path:
    return out_dir / PARTS_DIR / split


def metadata_name(split: str) -> str:
    return f"metadata_{split}.jsonl"


def parquet_name(split: str, shard: int, num_shards: int) -> str:
    return f"hf/{split}/shard-{shard:05d}-of-{num_shards:05d}.parquet"


def parquet_files(root: str | os.PathLike, split: str) -> list[str]:
    """The Parquet shards of a generated split (``ROOT/hf/<split>/*.parquet``), sorted."""
    return sorted(glob.glob(os.path.join(root, "hf", split, "*.parquet")))


# ----------------------------------------------------------------- reading


def read_manifest(path: Path, split: str) -> dict[str, Any] | None:
    """The manifest at ``path`` (None when there is none); an unreadable,
    malformed or foreign one is an error naming it."""
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise _corrupt(path, f"cannot be read as JSON: {err}") from None
    if not isinstance(manifest, dict):
        raise _corrupt(path, "not a JSON object")
    if manifest.get("split") != split:
        raise _corrupt(path, f"it names split {manifest.get('split')!r}, not {split!r}")
    files = manifest.get("files")
    if files is not None and not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
        raise _corrupt(path, "'files' must be a list of paths")
    for key in ("scenes", "shard_size"):
        if not _positive_int(manifest.get(key)):
            raise _corrupt(path, f"{key!r} must be a positive integer, got {manifest.get(key)!r}")
    return manifest


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _corrupt(path: Path, problem: str) -> RosetrainError:
    return RosetrainError(
        f"{path}: corrupt rosetrain manifest ({problem}); without it rosetrain cannot tell which "
        f"files it wrote, so it changes nothing: remove that split's files and this manifest "
        f"yourself, or choose another --out"
    )


def part_records(path: Path) -> list[dict[str, Any]]:
    """The records of a shard part; OSError or ValueError when it is not whole
    (cut off mid-line, a line that is not a JSON object). An empty part is a
    shard whose every scene was skipped, or one cut off before its first line:
    the caller tells them apart by the scenes it expected."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        raise ValueError(f"{path}: cut off")
    records = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    if not all(isinstance(record, dict) for record in records):
        raise ValueError(f"{path}: a line is not a JSON object")
    return records


def part_image_names(path: Path) -> list[str]:
    """The image names a part's records hold, in order; OSError or ValueError
    as :func:`part_records` raises them. Finishing a split reads every part for
    them; only the image fields are decoded (msgspec skips the 3 KB of prompt
    text a record holds unbuilt): 0.01 CPU s for a 600-scene split's parts,
    where decoding whole records took 0.08."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        raise ValueError(f"{path}: cut off")
    return image_names_in(data)


def image_names_in(data: bytes | mmap.mmap) -> list[str]:
    """The image names of JSON lines (bytes, or a mapped file), in order;
    ValueError (msgspec's DecodeError) if a line is not a JSON object."""
    rows = fields_decoder(frozenset(IMAGE_FIELDS)).decode_lines(data)
    return [name for row in rows for field in IMAGE_FIELDS if isinstance(name := getattr(row, field), str)]


def image_names(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    for record in records:
        for field in IMAGE_FIELDS:
            if isinstance(record.get(field), str):
                yield record[field]


# ----------------------------------------------------------------- ownership


def owned_files(out_dir: Path, manifest: dict[str, Any]) -> list[Path]:
    """Every file the manifest's split owns, each checked to lie inside ``out_dir``
    (a tampered manifest must not name files elsewhere)."""
    names = manifest.get("files")
    if names is None:
        names = _files_of_unfinished_split(out_dir, manifest)
    where = f"{manifest_path(out_dir, manifest['split'])}: files"
    return [confined_path(out_dir, name, where) for name in names]


def _files_of_unfinished_split(out_dir: Path, manifest: dict[str, Any]) -> list[str]:
    """A split killed before it listed its files: its metadata, its shard parts,
    and the Parquet shards and images on disk that carry its names (images of a
    shard killed midway are named by no part). Files are listed from disk, never
    counted from the settings: a tampered scene count cannot make a huge list."""
    split, scenes = manifest["split"], manifest["scenes"]
    num_shards = -(-scenes // manifest["shard_size"])
    names = [metadata_name(split)]
    names += [
        part.relative_to(out_dir).as_posix()
        for part in sorted(parts_dir(out_dir, split).glob("part-*.jsonl"))
    ]
    shard = re.compile(rf"shard-\d{{5,}}-of-0*{num_shards}\.parquet")
    names += [
        f"hf/{name}/{path.name}"
        for name in split_names(split, rose_layout=True).values()  # a `layout: rose` split's bridge rows too
        for path in sorted((out_dir / "hf" / name).glob("*.parquet"))
        if shard.fullmatch(path.name)
    ]
    # the images on disk with its names, made after its manifest: a file the user moved
    # in later keeps its older time and is left alone (a fresh split refuses any such file)
    started = manifest_path(out_dir, split).stat().st_mtime_ns
    names += [
        path.relative_to(out_dir).as_posix()
        for path, index in _split_images(out_dir, split)
        if index < scenes and path.lstat().st_mtime_ns >= started
    ]
    return names


def _split_images(out_dir: Path, split: str) -> Iterator[tuple[Path, int]]:
    """The files under ``images/*/`` named as this split's images are, with their scene index."""
    image = re.compile(rf"{re.escape(split)}-(\d{{7,}})(-cue)?\.png")  # scene ids: <split>-<index>
    for folder in sorted((out_dir / "images").glob("*/")):
        for path in sorted(folder.iterdir()):
            found = image.fullmatch(path.name)
            if found:
                yield path, int(found.group(1))


def refuse_foreign_images(out_dir: Path, split: str) -> None:
    """A split not started yet: any file under ``images/`` named as one of its images
    would be replaced, so it is someone else's and refused, before anything is written."""
    found = next(_split_images(out_dir, split), None)
    if found is not None:
        raise RosetrainError(
            f"{out_dir}: holds {found[0].relative_to(out_dir).as_posix()}, named as an image of "
            f"split {split!r} but not written by rosetrain generate (no manifest "
            f"{PARTS_DIR}/{split}.manifest.json lists it); rosetrain never replaces or deletes "
            f"it, overwrite included: choose an empty output folder, or move those files away",
            argument="out_dir",
        )


def refuse_links_out(out_dir: Path, split: str) -> None:
    """Refuse a symbolic link where generate writes (``images/``, its subfolders, ``hf/``,
    ``.parts/`` and the split's folders in them): writing through it would change files
    outside ``--out``."""
    places = [out_dir / "images", out_dir / "hf", out_dir / PARTS_DIR]
    places += [out_dir / "hf" / name for name in split_names(split, rose_layout=True).values()]
    places.append(parts_dir(out_dir, split))
    if (out_dir / "images").is_dir() and not (out_dir / "images").is_symlink():
        places += sorted((out_dir / "images").iterdir())
    for path in places:
        if path.is_symlink():
            raise RosetrainError(
                f"{path}: a symbolic link (to {os.readlink(path)}); rosetrain generate writes only "
                f"inside the output folder {out_dir}, never through a link: replace it with a "
                f"folder, or choose another output folder",
                argument="out_dir",
            )


def remove_owned_files(out_dir: Path, manifest: dict[str, Any]) -> None:
    """``--overwrite``: delete the split's own files, its manifest last (a kill
    midway leaves a manifest that still covers what is left). Refused, with
    nothing deleted, when the split's folders also hold files it does not own."""
    owned = owned_files(out_dir, manifest)
    refuse_foreign_files(out_dir, manifest["split"], owned)
    folders = set()
    for path in owned:
        path.unlink(missing_ok=True)
        folders.add(path.parent)
    manifest_path(out_dir, manifest["split"]).unlink()
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        if folder != out_dir and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def refuse_foreign_files(out_dir: Path, split: str, owned: Iterable[Path] = ()) -> None:
    """Refuse a folder holding, besides the ``owned`` files, anything rosetrain
    would replace or mix with this split (a file in its ``hf/`` or parts
    folder, which readers would take for shards) or a metadata file that no
    manifest of the folder claims (a foreign release)."""
    owned = set(owned)
    found = [
        path
        for name in (
            *(f"hf/{name}" for name in split_names(split, rose_layout=True).values()),
            f"{PARTS_DIR}/{split}",
        )
        if (out_dir / name).is_dir()
        for path in sorted((out_dir / name).rglob("*"))
        if path not in owned
    ]
    claimed = _claimed_metadata(out_dir)
    found += [
        path
        for path in sorted(out_dir.glob("metadata_*.jsonl"))
        if path.name not in claimed and path not in owned
    ]
    if found:
        names = ", ".join(path.relative_to(out_dir).as_posix() for path in found[:3])
        raise RosetrainError(
            f"{out_dir}: holds {names}{' ...' if len(found) > 3 else ''}, which rosetrain generate "
            f"did not write (no manifest {PARTS_DIR}/{split}.manifest.json lists it); it may be a "
            f"ROSE release, which rosetrain never replaces or deletes, overwrite included: "
            f"choose an empty output folder, or move those files away",
            argument="out_dir",
        )


def _claimed_metadata(out_dir: Path) -> set[str]:
    claimed = set()
    for path in (out_dir / PARTS_DIR).glob("*.manifest.json"):
        manifest = read_manifest(path, path.name[: -len(".manifest.json")])
        if manifest is None:
            continue
        claimed.add(metadata_name(manifest["split"]))
        claimed.update(
            Path(name).name
            for name in manifest.get("files") or ()
            if "/" not in name and name.startswith("metadata_")
        )
    return claimed


# ----------------------------------------------------------------- temp files


JOURNAL = ".temps"  # a journal's suffix: one temp a line, relative to the output folder


def journal_path(out_dir: Path, split: str, step: str) -> Path:
    """The journal of one step of a split's writing: ``manifest`` (its first
    manifest), ``finish`` (the joined metadata), or ``part-NNNNN`` (a shard)."""
    if step.startswith("part-"):
        return parts_dir(out_dir, split) / f"{step}{JOURNAL}"
    return out_dir / PARTS_DIR / f"{split}.{step}{JOURNAL}"


class TempJournal:
    """The temps a step of ``generate`` makes, recorded before each one exists
    (a kill leaves none unrecorded) in the step's journal, which is removed when
    the step is done. A later run of the split removes what a killed run
    recorded, and nothing else: no file is ever taken for a temp by its name."""

    def __init__(self, out_dir: Path, split: str, step: str) -> None:
        self.out_dir, self.path = out_dir, journal_path(out_dir, split, step)

    def __enter__(self) -> TempJournal:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  # closed on exit
        return self

    def record(self, target: Path) -> None:
        """The temp the atomic write of ``target`` in this thread is about to make."""
        from rosetrain.core.io import temp_path

        self.handle.write(temp_path(target).relative_to(self.out_dir).as_posix() + "\n")
        self.handle.flush()

    def __exit__(self, kind: object, *_: object) -> None:
        self.handle.close()
        if kind is None:  # done: every temp was renamed into place (an error removes its own)
            self.path.unlink()


def remove_stale_temps(out_dir: Path, split: str, started: bool = True) -> None:
    """The temps a killed run of this split recorded in its journals (the caller
    holds the folder's lock, so no live writer owns them), then the journals.
    ``started``: the split has its manifest; without one only the first
    manifest's journal can be ours (anything else in the folder is the user's)."""
    journals = [journal_path(out_dir, split, "manifest")]
    if started:
        journals.append(journal_path(out_dir, split, "finish"))
        folder = parts_dir(out_dir, split)
        if folder.is_dir():
            journals += sorted(p for p in folder.iterdir() if p.name.endswith(JOURNAL))
    for journal in journals:
        if not (journal.is_file() and not journal.is_symlink()):
            continue
        for line in journal.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                temp = confined_path(out_dir, line, str(journal))
            except RosetrainError:
                continue  # a line cut by the kill, or not a path of ours: nothing to remove
            if temp.is_file() and not temp.is_symlink():
                temp.unlink()
        journal.unlink()
