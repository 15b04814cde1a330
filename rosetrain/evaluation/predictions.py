"""Append-only ``predictions.jsonl`` for runs that survive interrupts.

Each row ``{"item_id", "raw_text", "model", "error", "data_fingerprint"}`` is
written as one whole line and flushed to the operating system before the next
item, so a killed or interrupted process loses at most the items in flight; the
file is fsync'd at most once a second and on close, so a machine crash loses at
most the last second's answers (an fsync per line made every item wait on the
disk: on the benchmark's tiny model, 0.84 of the bare loop's wall-clock speed,
against 1.05 with one fsync a second). A write cut short leaves a last line without its newline:
:func:`repair_tail` truncates it, and the item is simply asked again. After
that repair the file is read with the scorer's reader
(``rosetrain.data.release.read_predictions``), so both agree on what is valid.

``data_fingerprint`` (``rosetrain.data.release.split_fingerprint``) names the
data the answer belongs to: item ids repeat across specs and seeds, so a
prediction is only ever reused or scored against the same metadata bytes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import atomic_write
from rosetrain.core.jsonio import jsonl_text
from rosetrain.data.release import read_predictions, short_fingerprint

PREDICTION_FIELDS = ("item_id", "raw_text", "model", "error", "data_fingerprint")
SYNC_SECONDS = 1.0  # fsync a predictions file at most this often (and on close)


def prediction_row(
    item_id: str,
    raw_text: str | None,
    model: str | None,
    error: str | None = None,
    data_fingerprint: str | None = None,
) -> dict[str, Any]:
    row = {"item_id": item_id, "raw_text": raw_text, "model": model, "error": error}
    if data_fingerprint is not None:  # without one, exactly the official four fields
        row["data_fingerprint"] = data_fingerprint
    return row


def check_same_data(
    rows: Mapping[str, Mapping[str, Any]], fingerprint: str, source: Path, data: str, *, require: bool = False
) -> None:
    """Refuse predictions made on other data than ``fingerprint`` (the split ``data``).

    Rows without a fingerprint (written by other tools) are accepted unless
    ``require`` (a run folder rosetrain resumes must prove what data it holds).
    """
    for row in rows.values():
        made_on = row.get("data_fingerprint")
        if made_on == fingerprint or (made_on is None and not require):
            continue
        made = (
            "no data fingerprint (an older rosetrain or another tool)"
            if made_on is None
            else f"data {short_fingerprint(made_on)}"
        )
        raise RosetrainError(
            f"{source} holds predictions made on {made} (item {row['item_id']!r}), but {data} "
            f"is data {short_fingerprint(fingerprint)}: the data changed or this is another "
            "dataset (or its bridge files were read one time and not the other); use another "
            "output folder, or the data and bridges setting they were made with",
            argument="bridges",
        )


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


class PredictionWriter:
    """Appends prediction rows, each one flushed before the next (see the module doc).

    Opening repairs a torn last line. With ``retry_errors`` (the default), rows
    that recorded an error are dropped (the file is rewritten atomically without
    them) so a rerun asks those items again; :attr:`done` holds the ids that
    already have an answer and need no model call.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        retry_errors: bool = True,
        data_fingerprint: str | None = None,
        data: str = "the data",
    ):
        """With ``data_fingerprint``, rows made on other data (or on unknown data)
        are refused before anything in the file changes."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.truncated_bytes = repair_tail(self.path)
        # Once the torn tail is gone the file is a plain predictions file: the
        # scorer's strict reader applies (bad line -> its number, duplicate id -> error).
        rows = read_predictions(self.path) if self.path.exists() else {}
        if data_fingerprint is not None:
            check_same_data(rows, data_fingerprint, self.path, data, require=True)
        kept = {i: row for i, row in rows.items() if not (retry_errors and row.get("error"))}
        if len(kept) != len(rows):
            atomic_write(self.path, jsonl_text(kept.values()))
        self.rows: dict[str, dict[str, Any]] = kept
        self.data_fingerprint = data_fingerprint
        self._handle = open(self.path, "ab")
        self._synced_at = time.monotonic()

    @property
    def done(self):
        """Item ids that have a row (a live view: it grows as rows are written)."""
        return self.rows.keys()

    def write(self, row: Mapping[str, Any]) -> None:
        row = prediction_row(
            row["item_id"],
            row.get("raw_text"),
            row.get("model"),
            row.get("error"),
            row.get("data_fingerprint") or self.data_fingerprint,
        )
        if row["item_id"] in self.rows:  # a second row would make the file unreadable
            raise ValueError(f"item {row['item_id']!r} already has a prediction")
        line = json.dumps(row, ensure_ascii=False) + "\n"
        self._handle.write(line.encode("utf-8"))
        self._handle.flush()  # in the kernel: survives the process
        self.rows[row["item_id"]] = row
        if time.monotonic() - self._synced_at >= SYNC_SECONDS:
            self._sync()

    def _sync(self) -> None:
        os.fsync(self._handle.fileno())  # on the disk: survives the machine
        self._synced_at = time.monotonic()

    def close(self) -> None:
        if not self._handle.closed:
            self._sync()
            self._handle.close()

    def __enter__(self) -> PredictionWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
