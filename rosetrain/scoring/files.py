"""The scored-run folder layout (``per_item_eval.jsonl`` + summary) and its JSON text."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from rosetrain.errors import RosetrainError
from rosetrain.io import iter_jsonl

PER_ITEM_FILE = "per_item_eval.jsonl"
SUMMARY_FILE = "evaluation_summary.json"


def _json_line(row: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(row)
    except TypeError:  # what orjson cannot write (an integer past 64 bits, ...)
        return json.dumps(row).encode("ascii")  # ASCII escapes: lone surrogates too


def jsonl_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """One compact JSON object per line, UTF-8 (orjson: the per-item file is most
    of a scoring run's time)."""
    return b"".join([_json_line(row) + b"\n" for row in rows])


def jsonl_text(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def json_text(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def read_scored_rows(run_dir: str | os.PathLike) -> list[dict]:
    """The rows of ``RUN_DIR/per_item_eval.jsonl`` (a bad line fails with its number)."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / PER_ITEM_FILE
    if not path.is_file():
        raise RosetrainError(f"{path}: no such file (a scored run holds {PER_ITEM_FILE})")
    rows = []
    for number, row in iter_jsonl(path):
        if "item_id" not in row or "pass" not in row:
            raise RosetrainError(f"{path}:{number}: a per-item row needs 'item_id' and 'pass'")
        rows.append(row)
    return rows
