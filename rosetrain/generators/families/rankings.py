"""Pair rankings kept on disk between runs.

Ranking a font's candidate pairs renders every character at every checked
cell size: about 0.7 s of CPU for the default glyph fonts and 0.35 s for the
colour emoji font. `generate` ranks before its workers fork, on one core while
the other waits, so each run paid it, as a test suite or a sweep of small
splits pays it in every process. A ranking depends only on the font file, the
candidate pairs, the rendering settings, Pillow's and FreeType's versions and
the code that ranks, so it is kept under the user's cache folder, keyed by all
of them: a run with any of them changed ranks afresh, and reads the same pairs
either way (the bytes written never depend on the cache).

The folder is ``$ROSETRAIN_CACHE_DIR``, else ``$XDG_CACHE_HOME/rosetrain``,
else ``~/.cache/rosetrain``; ``ROSETRAIN_CACHE_DIR=off`` keeps nothing. A file
that does not read back as a ranking of the candidates is ranked again and
replaced; a folder that cannot be written leaves the run uncached.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import atomic_write

Pairs = tuple[tuple[str, str], ...]

# The modules whose code decides a ranking: an edit to any of them is a new key.
_RANKING_CODE = ("common.py", "fonts.py", "glyph.py", "emoji.py", "rankings.py")


def cache_dir() -> Path | None:
    """Where rankings are kept, or None when ``ROSETRAIN_CACHE_DIR=off``."""
    chosen = os.environ.get("ROSETRAIN_CACHE_DIR")
    if chosen:
        return None if chosen == "off" else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rosetrain"


@functools.lru_cache(maxsize=1)
def _code_and_libraries() -> str | None:
    """A digest of the ranking code and the libraries that draw; None (no
    caching) where the code's source cannot be read, as in a bytecode-only install."""
    from PIL import __version__ as pillow
    from PIL import features

    digest = hashlib.sha256(f"pillow {pillow} freetype {features.version('freetype2')}".encode())
    here = Path(__file__).parent
    try:
        for name in _RANKING_CODE:
            digest.update((here / name).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _font_identity(file: str) -> dict:
    """The font file as the cache sees it: its real path, size and change time."""
    stat = os.stat(file)
    return {"file": os.path.realpath(file), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def cached_ranking(
    kind: str,
    font_file: str,
    settings: dict,
    candidates: Sequence[tuple[str, str]],
    rank: Callable[[], Pairs],
) -> Pairs:
    """``rank()``, or what it returned for the same inputs in an earlier run.
    ``settings``: everything besides the font and the candidates that the
    ranking depends on (the face index, cell sizes, glyph ratio...)."""
    folder, code = cache_dir(), _code_and_libraries()
    if folder is None or code is None:
        return rank()
    key = json.dumps(
        {
            "kind": kind,
            "font": _font_identity(font_file),
            "settings": settings,
            "candidates": list(candidates),
            "code": code,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    path = folder / "rankings" / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"
    cached = _read(path, set(candidates))
    if cached is not None:
        return cached
    ranked = rank()
    try:
        atomic_write(path, json.dumps([list(pair) for pair in ranked], ensure_ascii=False))
    except (OSError, RosetrainError):  # a read-only home, a full disk: the run goes on uncached
        pass
    return ranked


MAX_BYTES = 1 << 22  # a ranking of every candidate is tens of KB; a larger file is not one


def _read(path: Path, candidates: set[tuple[str, str]]) -> Pairs | None:
    try:
        if path.is_symlink() or not path.is_file():  # /dev/zero behind a link would never end
            return None
        with open(path, "rb") as handle:
            found = json.loads(handle.read(MAX_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, too long or deep
        return None
    if not isinstance(found, list) or not all(isinstance(pair, list) for pair in found):
        return None
    pairs = tuple(tuple(pair) for pair in found)
    if not all(isinstance(part, str) for pair in pairs for part in pair):
        return None
    if len(set(pairs)) != len(pairs) or not all(pair in candidates for pair in pairs):
        return None
    return pairs
