"""The scored-run folder layout (``per_item_eval.jsonl`` + summary)."""

from __future__ import annotations

import math
import os
import reprlib  # a value in a message, cut short
from pathlib import Path

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import iter_jsonl
from rosetrain.scoring.frame import NUMBER_FIELDS

PER_ITEM_FILE = "per_item_eval.jsonl"
SUMMARY_FILE = "evaluation_summary.json"


def read_scored_rows(run_dir: str | os.PathLike) -> list[dict]:
    """The rows of ``RUN_DIR/per_item_eval.jsonl``: a bad line, or a row whose id or
    figures are not what the scorer writes, fails with its number and field."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / PER_ITEM_FILE
    if not path.is_file():
        raise RosetrainError(f"{path}: no such file (a scored run holds {PER_ITEM_FILE})")
    rows = []
    for number, row in iter_jsonl(path):
        if "item_id" not in row or "pass" not in row:
            raise RosetrainError(f"{path}:{number}: a per-item row needs 'item_id' and 'pass'")
        if problem := _row_problem(row):
            raise RosetrainError(f"{path}:{number}: {problem}")
        rows.append(row)
    return rows


def _row_problem(row: dict) -> str | None:
    """What makes a per-item row unfit for the figures computed from it (a file
    edited by hand, or written by another tool), in words; None when it is fit."""
    if not isinstance(row["item_id"], str) or not row["item_id"]:
        return f"'item_id' is {reprlib.repr(row['item_id'])}, not a non-empty text"
    if type(row["pass"]) not in (int, float, bool) or row["pass"] not in (0, 1):
        return f"'pass' is {reprlib.repr(row['pass'])}, not 0 or 1"
    for field in NUMBER_FIELDS:
        value = row.get(field)
        if value is not None and (
            type(value) not in (int, float, bool) or (type(value) is float and not math.isfinite(value))
        ):
            return f"'{field}' is {reprlib.repr(value)}, not a number"
    return None
