"""Reading a split in the ROSE release layout (all of it, or its first items with
image paths that open from anywhere). Predictions files are
:mod:`rosetrain.data.predictions`'s.

A split is ``DIR/metadata_<split>.jsonl`` (+ ``DIR/images/...``): a folder
that ``rosetrain generate`` wrote or the official ROSE release. The official
release keeps its bridge controls in separate files beside the main one
(``metadata_<split>_global_click_bridge.jsonl``,
``metadata_<split>_matched_local_count_bridge.jsonl``); they are read when
asked for (``bridges=True``), or when the folder holds only them. A path to a
``.jsonl`` file reads just that file. Only the standard library, orjson and
msgspec are imported. A split can also be read in chunks of whole lines
(``line_chunks``, ``read_chunk``), one process each. A split on the Hub
(``hf://datasets/OWNER/NAME[/PATH]``) is read from its local snapshot
(:func:`rosetrain.data.hub.resolve_split`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import mmap
import os
import re
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import iter_jsonl, not_a_file
from rosetrain.core.jsonio import fields_decoder
from rosetrain.data.bridges import BRIDGE_FILE_TAGS, bridge_paths
from rosetrain.data.hub import is_hub_uri, resolve_data
from rosetrain.data.manifest import image_names, image_names_in
from rosetrain.data.paths import check_confined, check_split_name, confined_path, in_hub_snapshot
from rosetrain.data.validate import IMAGE_FIELDS, CheckedRecord, check_record

# Fields the scorer needs from every record (region_params or region_params_json too).
REQUIRED_FIELDS = (
    "item_id",
    "task_template",
    "region_type",
    "rows",
    "cols",
    "ground_truth_count",
    "ground_truth_clicks",
    "all_target_cells",
)


def split_files(root: str | os.PathLike, split: str, bridges: bool | None = None) -> list[Path]:
    """The metadata files of ``split`` under ``root`` (main file first, then bridges).

    ``bridges``: True adds the bridge files (``metadata_<split>_global_click_bridge.jsonl``,
    ``metadata_<split>_matched_local_count_bridge.jsonl``) beside the main file;
    False never does; None (default) uses them only when there is no main file.
    """
    shown = root if is_hub_uri(root) else Path(root)  # messages name the data as given
    found = _split_files(
        resolve_data(root, "data") if is_hub_uri(root) else Path(root), split, bridges, shown
    )
    for path in found:  # a file of the Hub cache stays in its repo's cache folder, as images do
        if in_hub_snapshot(path.parent):
            check_confined(str(path.parent), path.name, str(shown))
    return found


def _split_files(root: Path, split: str, bridges: bool | None, shown: object) -> list[Path]:
    if root.is_file():
        return [root, *_bridges_beside_file(root)] if bridges else [root]
    check_split_name(split)
    if not root.is_dir():
        raise RosetrainError(f"{shown}: no such folder or .jsonl file")
    for folder in (root, root / split):  # the release layout, or one folder per split
        main = folder / f"metadata_{split}.jsonl"
        if main.is_file():
            return [main] + (_bridge_files(folder, split) if bridges else [])
        extra = _bridge_files(folder, split) if bridges is not False else []
        if extra:
            return extra
    found = sorted(p.name for p in root.glob("metadata_*.jsonl"))
    raise RosetrainError(
        f"{shown}: no metadata_{split}.jsonl (split {split!r}); "
        f"found: {', '.join(found) or 'no metadata_*.jsonl files'}"
    )


def _bridge_files(folder: Path, split: str) -> list[Path]:
    """The split's bridge files in ``folder`` (only the release's two names: a
    split named `<split>_x` is another split); a bridge path that is there but
    is no regular file is an error naming it, never left out in silence."""
    found = []
    for path in bridge_paths(folder, split).values():
        what = not_a_file(path)
        if what is not None:
            raise RosetrainError(f"{path}: a bridge file must be a regular file; this is {what}")
        if path.is_file():
            found.append(path)
    return found


def _bridges_beside_file(main: Path) -> list[Path]:
    """The bridge files beside a main metadata file given by path (bridges asked for)."""
    name = re.fullmatch(r"metadata_(.+)\.jsonl", main.name)
    if name is not None and name[1].endswith(tuple(f"_{tag}" for tag in BRIDGE_FILE_TAGS.values())):
        return []  # a bridge file itself
    if name is None:
        raise RosetrainError(
            f"{main}: bridges: only a file named metadata_<split>.jsonl has bridge files beside it "
            f"(metadata_<split>_global_click_bridge.jsonl, ...); give its folder, or read it without bridges",
            argument="bridges",
        )
    return _bridge_files(main.parent, name[1])


# Fields the checks of every record read (REQUIRED_FIELDS and the optional ones).
CHECKED_FIELDS = (
    *REQUIRED_FIELDS,
    "region_params",
    "region_params_json",
    "region_target_cells",
    *IMAGE_FIELDS,
    "split",  # a row of another split is left out, as the official evaluator leaves it out
)


def load_split(
    root: str | os.PathLike,
    split: str = "test",
    bridges: bool | None = None,
    fields: Collection[str] | None = None,
    build: Callable[[dict[str, Any], CheckedRecord], Any] | None = None,
    training: bool = False,
) -> list[Any]:
    """Every record of ``split`` in file order (see :func:`split_files` for ``bridges``).

    A bad line, a record missing a required field or contradicting itself
    (:func:`rosetrain.data.validate.check_record`: clicks outside the grid, a
    count that disagrees with its targets, an unknown template, an image path
    leaving the folder), or an item id seen twice is an error naming the file
    and line.

    ``fields``: keep only these fields of each record (and those the checks
    read); the others are skipped unread, which makes reading a split with
    long prompts several times faster (``rosetrain score`` reads no prompt).

    ``build``: return ``build(record, checked)`` for each record instead, given
    what the checks parsed (the scorer builds its golds without parsing twice).

    ``training``: a training split's templates are known too (V-Cnt, which
    the signal check and preview read; scoring refuses them).
    """
    paths = split_files(root, split, bridges)
    if fields is not None:
        try:
            return _checked_records(
                ((path, enumerate(_read_fields(path, fields), start=1)) for path in paths),
                build,
                split,
                training,
            )
        except RosetrainError:
            pass  # read it again in full: that error names the file, line and field
    return _checked_records(((path, iter_jsonl(path)) for path in paths), build, split, training)


def _checked_records(
    files: Iterable[tuple[Path, Iterable[tuple[int, dict[str, Any]]]]],
    build: Callable[[dict[str, Any], CheckedRecord], Any] | None,
    split: str | None = None,
    training: bool = False,
) -> list[Any]:
    """The records, checked; with ``split``, only those of that split: a row whose
    ``split`` field names another is skipped unread, exactly as the official
    evaluator skips it (``str(row.get("split", split)) == split``), so a file
    holding two splits scores the one asked for."""
    records: list[Any] = []
    seen: dict[str, tuple[Path, int]] = {}  # item id -> its file and line
    kept = _split_names(split)
    for path, numbered in files:
        images: set[str] = set()
        for number, record in numbered:
            if kept is not None and "split" in record and str(record["split"]) not in kept:
                continue
            if None in map(record.get, REQUIRED_FIELDS) or (
                "region_params" not in record and "region_params_json" not in record
            ):
                _lacking(record, path, number)
            checked = check_record(record, path, number, images, training)
            item_id = str(record["item_id"])
            if item_id in seen:
                first, line = seen[item_id]
                raise RosetrainError(f"{path}:{number}: item_id {item_id!r} already at {first.name}:{line}")
            seen[item_id] = (path, number)
            records.append(record if build is None else build(record, checked))
    return records


def _split_names(split: str | None) -> set[str] | None:
    """The ``split`` field values of the rows a split keeps: its own name, and for a
    release's bridge file read as a split of its own (``test_global_click_bridge``)
    the split it bridges (its rows say ``test``)."""
    if split is None:
        return None
    names = {split}
    for tag in BRIDGE_FILE_TAGS.values():
        if split.endswith(f"_{tag}"):
            names.add(split.removesuffix(f"_{tag}"))
    return names


def _lacking(record: Mapping[str, Any], path: Path, number: int) -> None:
    missing = [f for f in REQUIRED_FIELDS if record.get(f) is None]
    if "region_params" not in record and "region_params_json" not in record:
        missing.append("region_params")
    raise RosetrainError(f"{path}:{number}: record lacks required field(s) {', '.join(missing)}")


def _read_fields(
    path: Path, fields: Collection[str], start: int = 0, end: int | None = None
) -> list[dict[str, Any]]:
    """The records of a JSONL file (of its bytes ``start`` to ``end``: whole
    lines), with only ``fields`` (and those the checks read), decoded by
    msgspec, which skips the other fields without building them. Any problem is
    a RosetrainError without a line number: read the file in full then."""
    import msgspec

    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.read() if end is None else handle.read(end - start)
        if not data.isascii():
            data.decode("utf-8")  # a skipped field is not decoded, but must be UTF-8 too
        decoded = fields_decoder(frozenset(fields) | frozenset(CHECKED_FIELDS)).decode_lines(data)
    except (OSError, ValueError, RecursionError, msgspec.MsgspecError) as err:  # too deep: no JSON we read
        raise RosetrainError(f"{path}: {err}") from None
    return msgspec.to_builtins(decoded)  # dicts without the absent fields


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Whole lines of a metadata file: its bytes ``start`` to ``end``."""

    path: Path
    start: int
    end: int


CHUNK_BYTES = 2 << 20  # small enough that no process idles long at the end, large enough to be worth sending


def line_chunks(paths: Sequence[Path], chunk_bytes: int | None = CHUNK_BYTES) -> list[Chunk]:
    """The files cut into chunks of whole lines of about ``chunk_bytes`` (in
    file order; None: one chunk per file)."""
    chunks = []
    for path in paths:
        size = path.stat().st_size
        cuts = [0]
        if chunk_bytes is not None:
            with open(path, "rb") as handle:
                while (cut := _line_start(handle, cuts[-1] + chunk_bytes)) < size:
                    cuts.append(cut)
        cuts.append(size)
        chunks += [Chunk(path, a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    return chunks


def _line_start(handle: Any, offset: int) -> int:
    """The offset of the first line that starts after ``offset`` (the file's size if none)."""
    handle.seek(offset)
    while block := handle.read(1 << 16):
        newline = block.find(b"\n")
        if newline >= 0:
            return offset + newline + 1
        offset += len(block)
    return offset


def read_chunk(
    chunk: Chunk,
    fields: Collection[str],
    build: Callable[[dict[str, Any], CheckedRecord], Any],
    split: str | None = None,
    images: list[str] | None = None,
) -> list[Any]:
    """``load_split(..., fields, build)`` of one chunk's records (of ``split`` only,
    when given); ``images`` gets the image fields of all its lines, in order
    (``ImagesDigest.add``). Any problem is a RosetrainError without a useful line
    number: ``load_split`` the split in full for the error that names the file,
    line and field."""
    records = _read_fields(chunk.path, fields, chunk.start, chunk.end)
    if images is not None:
        images += image_names(records)
    return _checked_records([(chunk.path, enumerate(records, start=1))], build, split)


def split_fingerprint(root: str | os.PathLike, split: str = "test", bridges: bool | None = None) -> str:
    """``sha256:<hex>`` over the bytes of the split's metadata files, in the order
    read, then, where the images the rows name are on disk, ``;images:<hex>`` over
    each one's name, size and bytes (first use order).

    Results carry it (predictions rows, summaries, eval_run.json, compare.json)
    so they are never scored or compared against other data: item ids repeat
    across specs and seeds, the metadata bytes do not, and an image edited in
    place under the same metadata is other data too. It covers exactly the
    files :func:`load_split` reads with the same ``bridges`` (so a folder and its
    one main ``.jsonl`` file agree). Images that are not there (the metadata
    alone, as ``score`` needs it) are left out: :func:`same_fingerprint`
    compares the image part only when both fingerprints have one.
    """
    images = ImagesDigest()
    files = files_fingerprint(split_files(root, split, bridges), images)
    return images.joined(files)


def files_fingerprint(paths: Iterable[Path], images: ImagesDigest | None = None) -> str:
    """The metadata part of ``split_fingerprint``: ``sha256:<hex>`` over the files'
    bytes; ``images`` gets the image names of their lines, where given (else
    the caller reads them, as ``rosetrain score``'s workers do)."""
    digest = hashlib.sha256()
    for path in paths:
        with _file_bytes(path) as data:
            digest.update(hashlib.sha256(data).digest())  # file boundaries count: a+b != ab
            if images is not None:
                images.add(path.parent, _image_names(data))
    return f"sha256:{digest.hexdigest()}"


class ImagesDigest:
    """The image part of ``split_fingerprint``: each image named, once, in first
    use order, that is on disk, by its name, size and bytes."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self._seen: set[str] = set()
        self._folders: dict[str, bool] = {}  # an image folder that is not there: no open() per image in it

    def add(self, folder: Path, names: Iterable[str]) -> None:
        """The images a metadata file in ``folder`` names (its lines' image fields, in order)."""
        for name in names:
            if name in self._seen:
                continue
            self._seen.add(name)
            where = os.path.join(folder, os.path.dirname(name))
            there = self._folders.get(where)
            if there is None:  # one stat a folder (setdefault would stat every image)
                there = self._folders[where] = os.path.isdir(where)
            if there:
                _hash_image(self._digest, folder, name)

    def joined(self, files: str) -> str:
        """The whole fingerprint of ``files`` (``files_fingerprint``'s) and these images."""
        found = self._digest.digest() != _NO_IMAGES
        return f"{files}{IMAGES_PART}{self._digest.hexdigest()}" if found else files


IMAGES_PART = ";images:"
_NO_IMAGES = hashlib.sha256().digest()


@contextlib.contextmanager
def _file_bytes(path: Path) -> Iterator[bytes | mmap.mmap]:
    """A metadata file's bytes, mapped, not read: hashing and scanning a split's
    150 MB then reads the page cache in place, where a copy would be 150 MB of
    fresh memory to fault in (0.29 -> 0.24 CPU s at 51,000 items). rosetrain
    replaces its files whole (a rename), so a mapped file never shrinks under
    it; an empty file, or one that cannot be mapped, is read."""
    try:
        handle = open(path, "rb")
    except OSError as err:
        raise RosetrainError(f"{path}: cannot read ({err.strerror})") from None
    with handle:
        try:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # empty, or not a regular file
            mapped = None
        if mapped is not None:
            with mapped:
                yield mapped
            return
        try:
            data = handle.read()
        except OSError as err:
            raise RosetrainError(f"{path}: cannot read ({err.strerror})") from None
        yield data


def _image_names(data: bytes | mmap.mmap) -> list[str]:
    """The image fields of every line, in order; lines msgspec cannot read name
    no image here (the loader names them)."""
    try:
        return image_names_in(data)
    except ValueError:  # msgspec's DecodeError: read line by line
        names = []
        for line in bytes(data).splitlines():
            try:
                names += image_names_in(line)
            except ValueError:
                continue
        return names


def _hash_image(images: Any, folder: Path, name: str) -> None:
    """Add an image's name, size and bytes; one that is missing, not a regular
    file, or named outside the folder (the loader refuses those rows) adds nothing."""
    # string tests, not pathlib: this runs once per image of a split (20,000 at 51,000 items)
    if not name or name.startswith("/") or ".." in name.split("/"):
        return
    try:  # without blocking: a FIFO's open would wait for a writer
        with open(os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # a device would never end
                return
            content = hashlib.file_digest(handle, "sha256").digest()
    except OSError:  # not there: the metadata alone, as score needs it
        return
    images.update(hashlib.sha256(name.encode()).digest() + content)


def same_fingerprint(a: str | None, b: str | None) -> bool:
    """Whether two fingerprints name the same data: the same metadata and, where both
    saw the images, the same images (a run scored from the metadata alone matches
    one evaluated with the images)."""
    if a is None or b is None:
        return a is b
    meta_a, _, images_a = a.partition(IMAGES_PART)
    meta_b, _, images_b = b.partition(IMAGES_PART)
    return meta_a == meta_b and (not images_a or not images_b or images_a == images_b)


def short_fingerprint(fingerprint: str | None) -> str:
    """The first 12 hex digits, for messages."""
    return "none" if fingerprint is None else fingerprint.split(":", 1)[-1][:12]


def select_records(
    data_dir: str | Path, split: str, limit: int | None, bridges: bool | None = None, training: bool = False
) -> tuple[list[dict[str, Any]], Path]:
    """The split's records in file order (the first ``limit`` of them), and the
    folder their ``image`` paths are relative to (the metadata file's);
    ``training`` as in :func:`load_split`."""
    records = load_split(data_dir, split, bridges=bridges, training=training)
    if limit is not None:
        if limit < 1:
            raise RosetrainError(f"limit must be at least 1, got {limit}", argument="limit")
        records = records[:limit]
    if not records:
        raise RosetrainError(f"{data_dir}: split {split!r} has no items")
    return records, split_files(data_dir, split, bridges)[0].parent


def with_image_paths(records: Sequence[Mapping[str, Any]], root: Path) -> list[dict[str, Any]]:
    """Copies whose ``image`` (relative to the split folder, and inside it) opens
    from any working dir."""
    return [
        {**r, "image": str(confined_path(root, r.get("image"), f"item {r.get('item_id')!r}: image"))}
        for r in records
    ]
