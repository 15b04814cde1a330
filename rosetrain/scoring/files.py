"""Atomic writes and the scored-run folder layout (``per_item_eval.jsonl`` + summary)."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from rosetrain.errors import RosetrainError

PER_ITEM_FILE = "per_item_eval.jsonl"
SUMMARY_FILE = "evaluation_summary.json"


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to a temp file beside ``path``, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise RosetrainError(f"{path}:{number}: not valid JSON ({err.msg})") from None
            if not isinstance(row, dict) or "item_id" not in row or "pass" not in row:
                raise RosetrainError(f"{path}:{number}: a per-item row needs 'item_id' and 'pass'")
            rows.append(row)
    return rows
