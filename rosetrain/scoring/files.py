"""The scored-run folder layout (``per_item_eval.jsonl`` + summary)."""

from __future__ import annotations

import os
from pathlib import Path

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import iter_jsonl

PER_ITEM_FILE = "per_item_eval.jsonl"
SUMMARY_FILE = "evaluation_summary.json"


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
