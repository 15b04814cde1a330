"""Append-only ``predictions.jsonl`` for runs that survive interrupts.

Each row ``{"item_id", "raw_text", "model", "error"}`` is written as one whole
line, flushed and fsync'd before the next item, so an interrupt loses at most
the items in flight. A write cut short leaves a last line without its newline:
:func:`repair_tail` truncates it, and the item is simply asked again.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from rosetrain.errors import RosetrainError

PREDICTION_FIELDS = ("item_id", "raw_text", "model", "error")


def prediction_row(item_id: str, raw_text: str | None, model: str,
                   error: str | None = None) -> dict[str, Any]:
    return {"item_id": item_id, "raw_text": raw_text, "model": model, "error": error}


def repair_tail(path: str | os.PathLike) -> int:
    """Truncate a torn last line (one without its newline); return the bytes cut.

    Every complete row ends in a newline, so anything after the last newline is a
    write that an interrupt cut short.
    """
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        keep = _end_of_last_full_line(handle, size)
        if keep < size:
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    return size - keep


def _end_of_last_full_line(handle, size: int, chunk: int = 1 << 16) -> int:
    """Offset just after the last newline in the file (0 if there is none)."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        handle.seek(start)
        block = handle.read(end - start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def read_prediction_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a predictions file written by :class:`PredictionWriter`.

    A torn last line is ignored (the writer truncates it on open); any other bad
    line is an error naming the file and line.
    """
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")
    for number, line in enumerate(lines[:-1], start=1):  # lines[-1]: "" or a torn line
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise RosetrainError(f"{path}: line {number} is not JSON ({err})") from None
        if not isinstance(row, dict) or not isinstance(row.get("item_id"), str):
            raise RosetrainError(f"{path}: line {number} has no string 'item_id'")
        rows.append(row)
    return rows


class PredictionWriter:
    """Appends prediction rows, each one durable before the next.

    Opening repairs a torn last line. With ``retry_errors`` (the default), rows
    that recorded an error are dropped (the file is rewritten atomically without
    them) so a rerun asks those items again; :attr:`done` holds the ids that
    already have an answer and need no model call.
    """

    def __init__(self, path: str | os.PathLike, *, retry_errors: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.truncated_bytes = repair_tail(self.path)
        rows = read_prediction_rows(self.path)
        kept = _last_row_per_item(rows, retry_errors)
        if len(kept) != len(rows):
            _atomic_write_rows(self.path, kept)
        self.rows: dict[str, dict[str, Any]] = {row["item_id"]: row for row in kept}
        self._handle = open(self.path, "ab")

    @property
    def done(self) -> set[str]:
        return set(self.rows)

    def write(self, row: Mapping[str, Any]) -> None:
        row = {field: row.get(field) for field in PREDICTION_FIELDS}
        line = json.dumps(row, ensure_ascii=False) + "\n"
        self._handle.write(line.encode("utf-8"))
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.rows[row["item_id"]] = row

    def write_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.write(row)

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()

    def __enter__(self) -> "PredictionWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _last_row_per_item(rows: list[dict[str, Any]], drop_errors: bool) -> list[dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        latest.pop(row["item_id"], None)  # re-insert so file order follows the latest write
        latest[row["item_id"]] = row
    return [row for row in latest.values() if not (drop_errors and row.get("error"))]


def _atomic_write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        for row in rows:
            handle.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
