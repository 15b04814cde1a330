"""Files every part of rosetrain writes and reads: atomic writes, JSONL, YAML
mappings. Standard library and msgspec only (``yaml`` is imported when a YAML
file is read), so the fast commands can use it."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import msgspec

from rosetrain.core.errors import RosetrainError


def temp_path(path: str | os.PathLike) -> Path:
    """The temp name beside ``path`` that every atomic write of rosetrain uses:
    ``.<name>.<pid>-<thread>.tmp``, one per process and thread, so concurrent
    writers never share one. In a folder held with :func:`output_lock` its name
    is recorded in the marker before it is made, so :func:`remove_atomic_temps`
    removes it after a kill by that record, never by the look of a name."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path beside ``path`` for the caller to write (a file, or a
    folder it makes); on leaving the block the temp is renamed into place, so a
    reader sees the old ``path`` or the new one, never part of one. An error in
    the block removes the temp and leaves ``path`` as it was. A folder replaces
    an old one by a rename too; the old one is removed after. In a folder held
    with :func:`output_lock`, the temps of a file its marker names are recorded
    there while they exist (:func:`remove_atomic_temps`)."""
    path = Path(path)
    _refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    owned = _recording_holder(path)
    if owned is not None:
        owned.record_temps(tmp.name)  # before the temp exists: a kill leaves none unnamed
    try:
        yield tmp
        if tmp.is_dir() and path.is_dir():
            # two renames, as no OS renames a folder over a full one; the old one is removed after
            old = temp_path(path.with_name(f"{path.name}.old"))
            if owned is not None:
                owned.record_temps(old.name)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        _remove_entry(tmp)
        if owned is not None:
            with suppress(OSError):  # the error that stopped the write is the one to tell
                owned.forget_temps()
        raise
    if owned is not None:
        owned.forget_temps()


def _remove_entry(path: Path) -> None:
    """Remove a file, a link (never what it points to) or a folder with its contents."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _refuse_special(path: Path) -> None:
    """A rename over /dev/null, a pipe or a socket would replace it (as root, the
    system's /dev/null): refused. So is a link, dangling or not: a rename would
    replace the user's link with a file (the "exists" check of a dangling one is
    false), and what it points to is not rosetrain's to write."""
    try:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise RosetrainError(
                f"{path}: a symbolic link (to {os.readlink(path)}); rosetrain never writes an "
                f"output over or through a link: remove it, or choose another path"
            )
    except FileNotFoundError:
        return
    except OSError as err:  # ENOTDIR: a file where a folder is
        raise RosetrainError(f"{path}: cannot write there ({err.strerror or err})") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise RosetrainError(
            f"{path}: not a regular file or folder (a device, a pipe or a socket); not replaced"
        )


# A file's content: text (written as UTF-8, newlines as given), bytes, or a
# list or tuple of either (or of views of bytes), written one piece after
# another. Pieces spare the copy a join would make: for score's per-item files
# (150 MB at 51,000 items), memory the process has not touched before costs far
# more than the write itself on a virtual machine (docs/benchmarks.md, score).
Content = (
    str
    | bytes
    | list[str]
    | list[bytes]
    | list[str | bytes]
    | list[bytes | memoryview]
    | tuple[str | bytes, ...]
)
# Pieces gathered into 1 MB writes, not the default 8 KB: each write lets go of
# the interpreter lock, and a thread writing 150 MB in 8 KB writes beside a
# busy one waits to get it back at every one of them (score writes its
# per-item files in a thread while the summaries are computed).
WRITE_BUFFER = 1 << 20


def atomic_write(path: str | os.PathLike, data: Content) -> Path:
    """Write ``data`` (:data:`Content`) to a temp file beside
    ``path``, then rename it into place (:func:`atomic_path`): a reader sees the
    old file or the new one, never part of one. A failed write leaves no temp
    file behind. Into a folder this process holds with :func:`output_lock`,
    only a file rosetrain wrote is replaced (see there)."""
    atomic_writes({path: data})
    return Path(path)


def _pieces(data: Content) -> Iterator[bytes | memoryview]:
    for piece in data if isinstance(data, (list, tuple)) else (data,):
        yield piece.encode("utf-8") if isinstance(piece, str) else piece


def atomic_writes(files: Mapping[str | os.PathLike, Content]) -> None:
    """Write several files, each as :func:`atomic_write` writes one (whole, by a
    rename; only files rosetrain wrote replaced in a held folder), with three
    updates of a held folder's marker for them all (the claims, the temps, the
    temps gone) instead of three a file: each update replaces the marker, which
    ext4 then flushes to disk, about 2 ms. A failure removes the temps not yet
    renamed; the files renamed before it are whole and new."""
    paths = [Path(path) for path in files]
    claim_outputs(*paths)
    temps = [temp_path(path) for path in paths]
    recorded: dict[_Owned, list[str]] = {}
    for path, tmp in zip(paths, temps):
        _refuse_special(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        owned = _recording_holder(path)
        if owned is not None:
            recorded.setdefault(owned, []).append(tmp.name)
    for owned, names in recorded.items():
        owned.record_temps(*names)  # before the temps exist
    try:
        for tmp, data in zip(temps, files.values()):
            with open(tmp, "wb", buffering=WRITE_BUFFER) as handle:
                handle.writelines(_pieces(data))
        for tmp, path in zip(temps, paths):
            os.replace(tmp, path)
    except BaseException:
        for tmp in temps:
            _remove_entry(tmp)
        for owned in recorded:
            with suppress(OSError):  # the error that stopped the writes is the one to tell
                owned.forget_temps()
        raise
    for owned in recorded:
        owned.forget_temps()


def _recording_holder(path: Path) -> _Owned | None:
    """The ownership record of the held folder ``path`` is in, where its marker
    names ``path`` (a file it does not name has its temps unrecorded too)."""
    owned = _holder(path)
    return owned if owned is not None and owned.names(path.name) else None


def _loads(data: bytes) -> Any:
    """msgspec's fast reading (of the bytes: no decoding pass of our own); the
    standard library's where msgspec refuses (NaN, lone surrogates), so both
    read the same files, integers past 64 bits exactly as the standard library
    (orjson would read them as floats). Text that is not UTF-8 raises
    UnicodeDecodeError."""
    try:
        return msgspec.json.decode(data)
    except RecursionError:
        raise ValueError("depth limit exceeded: nested too deep") from None
    except ValueError as err:  # msgspec.DecodeError is one
        try:
            return json.loads(data.decode("utf-8"))
        except RecursionError:  # nested too deep for the standard library too: msgspec's reason
            raise err from None


def remove_atomic_temps(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Delete the temps a killed :func:`atomic_path` left in ``folder`` (not below
    it), files and the folders of a folder written whole, and return them; with
    ``name``, only those of ``folder/name``. Only temps the folder's marker names
    are removed (each was recorded before it was made, in a folder this process
    holds with :func:`output_lock`, so no live writer owns one): a file of the
    user's that merely looks like a temp (``.notes.2024-06.tmp``) is never one.
    Outside a held folder nothing is recorded, so nothing is removed."""
    owned = _held.get(os.path.realpath(folder))
    return [] if owned is None else owned.remove_temps(name)


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a line that is not a JSON
    object fails naming the file and the line."""
    path = Path(path)
    try:
        handle = path.open("rb")  # bytes: an undecodable line fails with its number
    except OSError as err:
        raise RosetrainError(f"{path}: cannot read ({err.strerror})") from None
    with handle:
        for number, data in enumerate(handle, start=1):
            if not data.strip():
                continue
            try:
                row = _loads(data)
            except UnicodeDecodeError as err:
                raise RosetrainError(
                    f"{path}:{number}: not UTF-8 text ({err.reason} at byte {err.start} of the line)"
                ) from None
            except ValueError as err:
                raise RosetrainError(f"{path}:{number}: not valid JSON ({err})") from None
            if not isinstance(row, dict):
                raise RosetrainError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            yield number, row


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every object of a JSONL file, in order (errors as :func:`iter_jsonl`)."""
    return [row for _, row in iter_jsonl(path)]


def _yaml_loader() -> Any:
    """``yaml.SafeLoader`` that reads floats as YAML 1.2 does: PyYAML's YAML 1.1
    rules read ``5e-7`` and ``1e9`` as strings, and configs never turn strings
    into numbers. Built once, on first use (yaml is imported only then)."""
    global _LOADER
    if _LOADER is None:
        import yaml

        class Loader(yaml.SafeLoader):
            pass

        Loader.add_implicit_resolver(
            "tag:yaml.org,2002:float",
            re.compile(
                r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""",
                re.X,
            ),
            list("-+0123456789."),
        )
        _LOADER = Loader
    return _LOADER


_LOADER: Any = None


def load_yaml(text: str) -> Any:
    """YAML text as plain data (safe: no Python objects), floats as in YAML 1.2.
    Bad YAML, or YAML nested too deep to read, raises ValueError with the reason."""
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader)
    except RecursionError:
        raise ValueError("nested too deep to read") from None
    except yaml.YAMLError as err:
        raise ValueError(str(err)) from None


def read_yaml_mapping(
    path: str | os.PathLike,
    what: str,
    error: type[Exception] = RosetrainError,
    expected: str = "a mapping at the top level",
) -> dict[str, Any]:
    """A YAML file (:func:`load_yaml`) whose top level is a mapping. A missing
    file, bad YAML or another top level raises ``error`` naming the file;
    ``what`` names the kind of file ("spec", "recipe")."""
    path = Path(path)
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} file not found: {path}") from None
    except OSError as err:  # a folder, no permission
        raise error(f"{what} file {path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise error(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except ValueError as err:
        raise error(f"{path}: not valid YAML: {' '.join(str(err).split())}") from None
    if not isinstance(raw, Mapping):
        raise error(f"{path}: expected {expected}")
    return dict(raw)


LOCK_NAME = ".rosetrain.lock"  # the lock file of rosetrain before the ownership marker
MARKER_NAME = ".rosetrain.json"  # what rosetrain wrote into a folder it holds
# The marker's own temp: one fixed name, as only the holder of the folder's lock
# writes the marker (a temp named in the marker could not be recorded before it is made).
MARKER_TEMP = ".rosetrain.json.tmp"
MARKER_LIMIT = 16 << 20  # bytes: far above any marker rosetrain writes, so reading one is bounded

# The folders this process holds with output_lock (real path -> its ownership
# record): atomic_write checks each file it writes directly into one of them.
_held: dict[str, _Owned] = {}


class _Owned:
    """The ownership marker of a held folder: the names of the files rosetrain
    wrote there (claimed before each one is written, so a kill between the two
    never leaves a file of ours that the marker does not name), and of the temps
    of those files that exist now (recorded before each is made, so the cleanup
    after a kill removes only them)."""

    def __init__(self, folder: Path, what: str) -> None:
        self.folder, self.what = folder, what
        self.marker = folder / MARKER_NAME
        self.lock = threading.RLock()  # one marker, however many threads write files
        found = _read_marker(self.marker)
        # None: a folder an older rosetrain wrote (its lock file, no marker), all taken as its own
        older = found is None and _is_regular_file(folder / LOCK_NAME)
        self.claimed: set[str] | None = None if older else found[0] if found else set()
        self.temps: set[str] = found[1] if found else set()

    def names(self, name: str) -> bool:
        """Whether the marker names the file ``name``."""
        return self.claimed is not None and name in self.claimed

    def claim(self, *paths: Path) -> None:
        """Refuse to replace a file rosetrain did not write; record the new names
        first, in one update of the marker (none if any is refused)."""
        with self.lock:
            if self.claimed is None:  # an older rosetrain's folder: adopt what is there
                self.claimed = {p.name for p in self.folder.iterdir() if p.name != LOCK_NAME}
            new: set[str] = set()
            for path in paths:
                name = path.name
                if name in self.claimed or name in new or name == MARKER_NAME:
                    continue
                if os.path.lexists(path):
                    raise RosetrainError(
                        f"{path}: already exists and rosetrain did not write it (its {MARKER_NAME} does "
                        f"not name it); rosetrain never replaces files it did not write: move it away or "
                        f"choose another folder for {self.what}"
                    )
                new.add(name)
            if new:
                self.claimed |= new
                self._write()

    def record_temps(self, *names: str) -> None:
        with self.lock:
            self.temps.update(names)
            self._write()

    def forget_temps(self) -> None:
        """The temps recorded that no longer exist (renamed into place, or removed)."""
        with self.lock:
            gone = {name for name in self.temps if not os.path.lexists(self.folder / name)}
            if gone:
                self.temps -= gone
                self._write()

    def remove_temps(self, name: str | None) -> list[Path]:
        """Delete the recorded temps (of ``folder/name`` only, with a name); return those found."""
        with self.lock:
            mine = re.compile(rf"\.{re.escape(name)}(\.old)?\.\d+-\d+\.tmp") if name else None
            stale = sorted(t for t in self.temps if mine is None or mine.fullmatch(t))  # of the recorded only
            found = [self.folder / t for t in stale if os.path.lexists(self.folder / t)]
            for path in found:
                _remove_entry(path)
            if stale:
                self.temps -= set(stale)
                self._write()
        return found

    def _write(self) -> None:
        record: dict[str, Any] = {"written_by": "rosetrain", "files": sorted(self.claimed or ())}
        if self.temps:  # none when no write is under way: the marker reads as before temps were recorded
            record["temps"] = sorted(self.temps)
        _write_marker(self.marker, json.dumps(record, indent=1))


def _is_regular_file(path: Path) -> bool:
    """Whether ``path`` itself is a regular file (a link to one is not)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def not_a_file(path: Path) -> str | None:
    """What stands at ``path`` when it is no regular file to read (a link is
    followed): "a folder", "a named pipe (FIFO)", "a link to nothing", ...;
    None for a regular file and where nothing is."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a link to nothing" if path.is_symlink() else None
    except OSError as err:
        return f"unreadable ({err.strerror})"
    return None if stat.S_ISREG(mode) else _kind(mode)


def _kind(mode: int) -> str:
    kinds = {stat.S_ISLNK: "a symbolic link", stat.S_ISFIFO: "a named pipe (FIFO)"}
    kinds.update({stat.S_ISDIR: "a folder", stat.S_ISSOCK: "a socket"})
    return next((what for test, what in kinds.items() if test(mode)), "a device")


def _marker_bytes(marker: Path) -> bytes | None:
    """The bytes of an ownership marker; None where there is none. Only a regular
    file in the folder itself is one: a link (even to another run's genuine
    marker) would lend that folder's names to this one, a FIFO would block the
    read for ever, and a file above MARKER_LIMIT is not one rosetrain wrote. It
    is opened without following a link and without waiting on a FIFO, then
    checked, so what is read is what was checked."""
    try:
        descriptor = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as err:  # ELOOP: a link; ENXIO: a socket
        try:
            what = _kind(marker.lstat().st_mode)
        except OSError:
            what = err.strerror or str(err)
        raise _not_a_marker(marker, what) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise _not_a_marker(marker, _kind(mode))
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(MARKER_LIMIT + 1)
    finally:
        os.close(descriptor)
    if len(data) > MARKER_LIMIT:
        raise _not_a_marker(marker, f"a file of more than {MARKER_LIMIT} bytes")
    return data


def _not_a_marker(marker: Path, what: str) -> RosetrainError:
    if what == "a symbolic link":
        what += f" (to {os.readlink(marker)})"
    return RosetrainError(
        f"{marker}: {what}, not rosetrain's ownership marker (a regular file in the folder itself); "
        f"rosetrain cannot tell which files it wrote there, so it changes nothing: remove it, "
        f"or choose another output folder"
    )


def _read_marker(marker: Path) -> tuple[set[str], set[str]] | None:
    """The files and the temps an ownership marker names; None where there is
    none. One that is not a marker or cannot be read is an error."""
    data = _marker_bytes(marker)
    if data is None:
        return None
    try:
        found = json.loads(data.decode("utf-8"))
        files, temps = found["files"], found.get("temps", [])
        for what, names in (("files", files), ("temps", temps)):
            if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
                raise ValueError(f"{what!r} is not a list of names")
        if not all(_plain_name(name) for name in temps):  # temps are removed: only names in the folder
            raise ValueError("'temps' names a path that is not a plain name in the folder")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise RosetrainError(
            f"{marker}: corrupt rosetrain marker ({err}); without it rosetrain cannot tell "
            f"which files it wrote, so it changes nothing: choose another output folder"
        ) from None
    return set(files), set(temps)


def _plain_name(name: str) -> bool:
    return name not in ("", ".", "..", MARKER_NAME, MARKER_TEMP, LOCK_NAME) and not set(name) & {"/", "\0"}


def _write_marker(marker: Path, text: str) -> None:
    """Replace ``marker`` whole, through its fixed temp (written only under the
    folder's lock, or into a folder no one else has yet); a temp a kill left is
    replaced, a link or anything but a file there is refused."""
    tmp = marker.with_name(MARKER_TEMP)
    if os.path.lexists(tmp) and not _is_regular_file(tmp):
        raise _not_a_marker(tmp, _kind(tmp.lstat().st_mode))
    tmp.unlink(missing_ok=True)
    try:
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(text.encode("utf-8"))
        os.replace(tmp, marker)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def owned_names(folder: str | os.PathLike) -> set[str] | None:
    """The names ``folder``'s ownership marker lists (empty without one); None
    for a folder an older rosetrain wrote (its lock file and no marker), all of
    whose files are taken as rosetrain's."""
    return _Owned(Path(folder), "this folder").claimed


def check_replaceable_folder(path: str | os.PathLike, argument: str | None = None) -> None:
    """Refuse to replace ``path`` as a whole (a model folder rosetrain builds) unless
    it is missing, an empty folder, or a folder whose every entry its
    ``.rosetrain.json`` names (one :func:`mark_folder` wrote): never a user's
    folder, file or link. ``argument`` names the caller's argument that gave ``path``."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        raise RosetrainError(
            f"{path}: exists and is not a folder; rosetrain never replaces it: choose another folder",
            argument=argument,
        )
    found = _read_marker(path / MARKER_NAME)  # a link, a FIFO or a folder there is refused
    entries = {entry.name for entry in path.iterdir()} - {MARKER_NAME}
    foreign = sorted(entries - (found[0] if found else set()))
    if foreign:
        raise RosetrainError(
            f"{path}: holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, which "
            f"rosetrain did not write (its {MARKER_NAME} does not name it); rosetrain replaces only a "
            f"folder it wrote: choose another folder, or an empty one",
            argument=argument,
        )


def mark_folder(path: str | os.PathLike) -> None:
    """Name every entry of a folder rosetrain has just written, in its ``.rosetrain.json``,
    so a later run may replace it as a whole (:func:`check_replaceable_folder`)."""
    path = Path(path)
    names = sorted(entry.name for entry in path.iterdir() if entry.name != MARKER_NAME)
    _write_marker(path / MARKER_NAME, json.dumps({"written_by": "rosetrain", "files": names}, indent=1))


def _holder(path: Path) -> _Owned | None:
    """The ownership record of the held folder ``path`` is directly in, if any."""
    return _held.get(os.path.realpath(path.parent)) if _held else None


def holds_output_lock(folder: str | os.PathLike) -> bool:
    """Whether this process holds ``folder`` with :func:`output_lock` (which is not
    re-entrant: a second hold, even from this process, is a second writer)."""
    return os.path.realpath(folder) in _held


def claim_outputs(*paths: str | os.PathLike) -> None:
    """Claim files before writing any of them (inside a folder held with
    :func:`output_lock`), so a foreign one among them is refused before the
    first is written; one update of each held folder's marker."""
    held: dict[_Owned, list[Path]] = {}
    for path in map(Path, paths):
        owned = _holder(path)
        if owned is not None:
            held.setdefault(owned, []).append(path)
    for owned, inside in held.items():
        owned.claim(*inside)


@contextmanager
def output_lock(folder: str | os.PathLike, what: str = "this folder") -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` while a command writes into it.

    A second rosetrain process writing the same folder is refused at once with a
    message naming the folder, instead of interleaving its writes with the first
    one. The lock is an OS advisory lock (``fcntl.flock``) on the folder itself,
    so no lock file is left behind; the kernel releases it when the process
    exits, even on SIGKILL (forked workers share it until they end too).

    While it is held, every :func:`atomic_write` directly into ``folder``
    replaces only files that rosetrain wrote: their names are recorded in
    ``folder/.rosetrain.json`` before they are written, and any other existing
    file is refused, naming it. Their temps are recorded there too while they
    exist, and only those are removed after a kill (:func:`remove_atomic_temps`).
    A marker that is not a regular file in the folder itself is refused.
    """
    import fcntl

    folder = Path(folder)
    if folder.is_symlink() and not folder.exists():  # mkdir's "File exists" would not say why
        raise RosetrainError(
            f"{folder}: a symbolic link to nothing (to {os.readlink(folder)}); rosetrain never "
            f"makes {what} through a dangling link: remove it, or choose another folder"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as err:
        raise RosetrainError(f"{folder}: cannot create {what} ({err.strerror})") from None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RosetrainError(
                f"{folder}: another rosetrain process is writing {what}; "
                "wait for it to finish or choose another output folder"
            ) from None
        key = os.path.realpath(folder)
        _held[key] = _Owned(folder, what)
        if _is_regular_file(folder / MARKER_TEMP):  # the marker's own temp, of a writer killed midway
            (folder / MARKER_TEMP).unlink()
        try:
            yield folder
        finally:
            _held.pop(key, None)
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)
