"""Files every part of rosetrain writes and reads: atomic writes, JSONL, YAML
mappings. Standard library and msgspec only (``yaml`` is imported when a YAML
file is read), so the fast commands can use it."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from rosetrain.core.errors import RosetrainError


def temp_path(path: str | os.PathLike) -> Path:
    """The temp name beside ``path`` that every atomic write of rosetrain uses:
    ``.<name>.<pid>-<thread>.tmp``, one per process and thread, so concurrent
    writers never share one, and :func:`remove_atomic_temps` knows them."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path beside ``path`` for the caller to write (a file, or a
    folder it makes); on leaving the block the temp is renamed into place, so a
    reader sees the old ``path`` or the new one, never part of one. An error in
    the block removes the temp and leaves ``path`` as it was. A folder replaces
    an old one by a rename too; the old one is removed after."""
    path = Path(path)
    _refuse_special(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        if tmp.is_dir() and path.is_dir():
            # two renames, as no OS renames a folder over a full one; the old one is removed after
            old = temp_path(path.with_name(f"{path.name}.old"))
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _refuse_special(path: Path) -> None:
    """A rename over /dev/null, a pipe or a socket would replace it (as root, the
    system's /dev/null), and a symlink loop is no place to write: refused."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as err:  # ELOOP: a symlink loop; ENOTDIR: a file where a folder is
        raise RosetrainError(f"{path}: cannot write there ({err.strerror or err})") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise RosetrainError(
            f"{path}: not a regular file or folder (a device, a pipe or a socket); not replaced"
        )


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, newlines as given) to a temp file beside
    ``path``, then rename it into place (:func:`atomic_path`): a reader sees the
    old file or the new one, never part of one. A failed write leaves no temp
    file behind. Into a folder this process holds with :func:`output_lock`,
    only a file rosetrain wrote is replaced (see there)."""
    _claim(Path(path))  # inside a folder held by output_lock: never a foreign file
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


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


_ATOMIC_TEMP = re.compile(r"^\..+\.\d+-\d+\.tmp$")  # the names temp_path makes


def remove_atomic_temps(folder: str | os.PathLike, name: str | None = None) -> list[Path]:
    """Delete the temps a killed :func:`atomic_path` left in ``folder`` (not below
    it): files, and the folders of a folder written whole; with ``name``, only
    those of ``folder/name``. Return them. Call it only while no live writer can
    own any of them (holding ``folder``'s :func:`output_lock`)."""
    folder = Path(folder)
    pattern = _ATOMIC_TEMP if name is None else re.compile(rf"^\.{re.escape(name)}\.\d+-\d+\.tmp$")
    stale = [p for p in folder.iterdir() if pattern.match(p.name) and not p.is_symlink()]
    for path in stale:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return stale


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

# The folders this process holds with output_lock (real path -> its ownership
# record): atomic_write checks each file it writes directly into one of them.
_held: dict[str, _Owned] = {}


class _Owned:
    """The ownership marker of a held folder: the names of the files rosetrain
    wrote there (claimed before each one is written, so a kill between the two
    never leaves a file of ours that the marker does not name)."""

    def __init__(self, folder: Path, what: str) -> None:
        self.folder, self.what = folder, what
        self.marker = folder / MARKER_NAME
        self.claimed = self._read()

    def _read(self) -> set[str] | None:
        """The claimed names; None for a folder an older rosetrain wrote (its
        lock file and no marker), whose files are all taken as its own."""
        if not self.marker.exists():
            return None if (self.folder / LOCK_NAME).is_file() else set()
        return _read_marker(self.marker)

    def claim(self, path: Path) -> None:
        """Refuse to replace a file rosetrain did not write; record the name first."""
        name = path.name
        if self.claimed is None:  # an older rosetrain's folder: adopt what is there
            self.claimed = {p.name for p in self.folder.iterdir() if p.name != LOCK_NAME}
        if name in self.claimed or name == MARKER_NAME:
            return
        if os.path.lexists(path):
            raise RosetrainError(
                f"{path}: already exists and rosetrain did not write it (its {MARKER_NAME} does not "
                f"name it); rosetrain never replaces files it did not write: move it away or "
                f"choose another folder for {self.what}"
            )
        self.claimed.add(name)
        atomic_write(
            self.marker, json.dumps({"written_by": "rosetrain", "files": sorted(self.claimed)}, indent=1)
        )


def _read_marker(marker: Path) -> set[str]:
    """The names an ownership marker lists; an unreadable one is an error."""
    try:
        found = json.loads(marker.read_text(encoding="utf-8"))
        files = found["files"]
        if not (isinstance(files, list) and all(isinstance(name, str) for name in files)):
            raise ValueError("'files' is not a list of names")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise RosetrainError(
            f"{marker}: corrupt rosetrain marker ({err}); without it rosetrain cannot tell "
            f"which files it wrote, so it changes nothing: choose another output folder"
        ) from None
    return set(files)


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
    entries = {entry.name for entry in path.iterdir()} - {MARKER_NAME}
    if not entries:
        return
    marker = path / MARKER_NAME
    foreign = sorted(entries - _read_marker(marker)) if marker.is_file() else sorted(entries)
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
    atomic_write(path / MARKER_NAME, json.dumps({"written_by": "rosetrain", "files": names}, indent=1))


def _claim(path: Path) -> None:
    if _held:
        owned = _held.get(os.path.realpath(path.parent))
        if owned is not None:
            owned.claim(path)


def holds_output_lock(folder: str | os.PathLike) -> bool:
    """Whether this process holds ``folder`` with :func:`output_lock` (which is not
    re-entrant: a second hold, even from this process, is a second writer)."""
    return os.path.realpath(folder) in _held


def claim_outputs(*paths: str | os.PathLike) -> None:
    """Claim files before writing any of them (inside a folder held with
    :func:`output_lock`), so a foreign one among them is refused before the
    first is written."""
    for path in paths:
        _claim(Path(path))


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
    file is refused, naming it.
    """
    import fcntl

    folder = Path(folder)
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
        try:
            yield folder
        finally:
            _held.pop(key, None)
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)
