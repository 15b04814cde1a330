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


def spaced_line(row: Mapping[str, Any]) -> str:
    """One JSON object as ``json.dumps(row, ensure_ascii=False)`` writes it, with its newline."""
    return _SPACED.encode(row) + "\n"


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
