"""JSON and JSONL text as rosetrain writes it: orjson where it writes the same
bytes as the standard library would, the standard library where it cannot;
and a msgspec decoder that reads only the fields asked for."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson


def json_line(row: Mapping[str, Any]) -> bytes:
    """One compact JSON object, UTF-8, without the newline."""
    try:
        return orjson.dumps(row)
    except TypeError:  # what orjson cannot write (an integer past 64 bits, ...)
        return json.dumps(row).encode("ascii")  # ASCII escapes: lone surrogates too


def jsonl_line(row: Mapping[str, Any]) -> bytes:
    """``json_line`` with its newline. (orjson's OPT_APPEND_NEWLINE would save
    the copy, but measured slower: 6.5 against 3.6 microseconds a per-item row.)"""
    return json_line(row) + b"\n"


def jsonl_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """One compact JSON object per line, UTF-8 (orjson: large per-item files
    are most of a scoring run's time)."""
    return b"".join([jsonl_line(row) for row in rows])


_SPACED = json.JSONEncoder(ensure_ascii=False)  # one encoder: json.dumps makes one a call
_INF = float("inf")
_SCALARS = frozenset((str, int, bool, type(None)))
_CONTAINERS = frozenset((dict, list, tuple))


def spaced_line(row: Mapping[str, Any]) -> str:
    """One JSON object as ``json.dumps(row, ensure_ascii=False)`` writes it, with
    its newline. orjson's compact bytes spaced by msgspec are the same text for
    every string and integer, and every float but those under 1e-4 and the
    non-finite (``1e-05``, ``NaN`` against orjson's ``0.00001``, ``null``): a
    row is looked over for those first, and one that holds any, or anything
    orjson cannot write, goes through the standard library. Half the time of the
    standard library on the bridge files' rows, the look included
    (docs/benchmarks.md)."""
    import msgspec  # not at start-up: it brings typing_extensions (25 ms)

    if type(row) is dict and _same_in_orjson(row):
        try:
            return msgspec.json.format(orjson.dumps(row), indent=0).decode() + "\n"
        except TypeError:  # an integer past 64 bits, a lone surrogate, a key not a str
            pass
    return _SPACED.encode(row) + "\n"


def _same_in_orjson(container: Any) -> bool:
    for value in container.values() if type(container) is dict else container:
        kind = type(value)
        if kind in _SCALARS:
            continue
        if kind is float:
            if not (value == 0 or 1e-4 <= abs(value) < _INF):
                return False
        elif kind not in _CONTAINERS or not _same_in_orjson(value):
            return False  # a subclass or another type: the standard library decides
    return True


def jsonl_text(rows: Iterable[Mapping[str, Any]]) -> str:
    """One JSON object per line (``json.dumps`` spacing, non-ASCII kept)."""
    return "".join(map(spaced_line, rows))


def json_text(obj: Any) -> str:
    """An indented JSON document (2 spaces, non-ASCII kept), newline-terminated."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


@functools.lru_cache(maxsize=8)
def fields_decoder(fields: frozenset[str]) -> Any:
    """A msgspec decoder of JSON objects that builds only ``fields`` (each an
    attribute, ``msgspec.UNSET`` where a line lacks it) and skips the rest
    unbuilt: reading two fields of a 3 KB record costs a small part of decoding it."""
    import msgspec

    record = msgspec.defstruct("Record", [(field, Any, msgspec.UNSET) for field in sorted(fields)], gc=False)
    return msgspec.json.Decoder(record)
