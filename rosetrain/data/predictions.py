"""The predictions format: ``predictions.jsonl``, one row per item,
``{"item_id", "raw_text", "model", "error"}`` (the official evaluator's four
fields) plus rosetrain's ``data_fingerprint`` and, for a model that thinks
first, its ``reasoning`` (``raw_text`` is then the answer after it:
``rosetrain.core.reasoning``). This module owns it: the row
(:func:`prediction_row`), the strict reader the scorer and a resumed run share
(:func:`read_predictions`), the model a run is named after
(:func:`predictions_model`), the data check (:func:`check_same_data`) and the
append-only writer of runs that survive interrupts (:class:`PredictionWriter`).
Standard library and msgspec only, so ``rosetrain score`` stays light.

The writer writes each row as one whole line and flushes it to the operating
system before the next item, so a killed or interrupted process loses at most
the items in flight; the file is fsync'd at most once a second and on close, so
a machine crash loses at most the last second's answers (an fsync per line made
every item wait on the disk: on the benchmark's tiny model, 0.84 of the bare
loop's wall-clock speed, against 1.05 with one fsync a second). A write cut
short leaves a last line without its newline: :func:`repair_tail` truncates it,
and the item is simply asked again. After that repair the file is read with
:func:`read_predictions`, so the scorer and a resumed run agree on what is valid.

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
from rosetrain.core.io import atomic_write, iter_jsonl
from rosetrain.core.jsonio import jsonl_text
from rosetrain.data.release import IMAGES_PART, same_fingerprint, short_fingerprint

PREDICTION_FIELDS = ("item_id", "raw_text", "model", "error", "data_fingerprint", "reasoning")
SYNC_SECONDS = 1.0  # fsync a predictions file at most this often (and on close)


def prediction_row(
    item_id: str,
    raw_text: str | None,
    model: str | None,
    error: str | None = None,
    data_fingerprint: str | None = None,
    reasoning: str | None = None,
) -> dict[str, Any]:
    row = {"item_id": item_id, "raw_text": raw_text, "model": model, "error": error}
    if data_fingerprint is not None:  # without one, exactly the official four fields
        row["data_fingerprint"] = data_fingerprint
    if reasoning is not None:
        row["reasoning"] = reasoning
    return row


def check_same_data(
    rows: Mapping[str, Mapping[str, Any]], fingerprint: str, source: Path, data: str, *, require: bool = False
) -> None:
    """Refuse predictions made on other data than ``fingerprint`` (the split ``data``).

    Rows without a fingerprint (written by other tools) are accepted unless
    ``require`` (a run folder rosetrain resumes must prove what data it holds).
    The message names the cause: the images changed, the metadata differs (and,
    where the run folder records it, the data they were made on).
    """
    for row in rows.values():
        made_on = row.get("data_fingerprint")
        if same_fingerprint(made_on, fingerprint) or (made_on is None and not require):
            continue
        remedy = (
            "use another output folder for this data, or the data and bridges setting they were made with"
            if require  # a run folder being resumed
            else "score them against the data and bridges setting they were made with"
        )
        raise RosetrainError(
            f"{source} holds predictions made on {made_where(made_on, source)} (item {row['item_id']!r}), "
            f"but {data} is data {short_fingerprint(fingerprint)}: {data_cause(made_on, fingerprint)}; "
            f"{remedy}",
            argument="bridges",
        )


# the record of the eval run beside a predictions file (rosetrain.evaluation.evaluate.RUN_FILE)
EVAL_RUN_FILE = "eval_run.json"


def made_where(made_on: str | None, source: Path) -> str:
    """The data predictions were made on: its fingerprint, and the folder and split
    where the eval run beside them records it."""
    if made_on is None:
        return "unknown data"
    try:
        run = json.loads((source.parent / EVAL_RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        run = None
    if isinstance(run, dict) and run.get("data_fingerprint") == made_on and run.get("data"):
        read = run.get("bridges")
        bridges = ", bridges read" if read is True else ", no bridges" if read is False else ""
        return f"data {short_fingerprint(made_on)} ({run['data']}, split {run.get('split')}{bridges})"
    return f"data {short_fingerprint(made_on)}"


def data_cause(made_on: str | None, fingerprint: str) -> str:
    """Why two fingerprints differ, as far as they tell."""
    if made_on is None:
        return "these rows carry no data fingerprint (an older rosetrain or another tool)"
    if made_on.partition(IMAGES_PART)[0] == fingerprint.partition(IMAGES_PART)[0]:
        return "the same metadata, but the images changed since"
    return (
        "other metadata (another dataset or split, the data regenerated since, "
        "or bridge files read one time and not the other)"
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
            row.get("reasoning"),
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


def read_predictions(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """``item_id -> row`` of a predictions JSONL (rows ``{"item_id", "raw_text", "model", "error"}``).

    A line that is not a JSON object with a string ``item_id`` fails with its
    line number; an item id given twice fails naming the id and both lines; so
    does a ``data_fingerprint`` that is not a string, and a ``model`` or
    ``error`` that the run's JSON files could not hold (see
    :func:`_check_written_fields`).
    """
    path = Path(path)
    if path.is_dir():
        raise RosetrainError(
            f"{path}: is a folder; expected a predictions .jsonl file "
            "(an eval run keeps it as predictions.jsonl)"
        )
    if not path.is_file():
        what = "not a regular file (a device or a pipe)" if path.exists() else "no such predictions file"
        raise RosetrainError(f"{path}: {what}")
    rows = _read_predictions_at_once(path)
    return rows if rows is not None else _read_predictions_by_line(path)


def _read_predictions_at_once(path: Path) -> dict[str, dict[str, Any]] | None:
    """``read_predictions`` of a file without a blank or bad line, decoded in
    one call; None at the first doubt (read it line by line then: its error
    names the line)."""
    import msgspec

    try:
        data = path.read_bytes()
        decoded = msgspec.json.Decoder().decode_lines(data)
    except (OSError, ValueError, RecursionError, msgspec.MsgspecError):
        return None
    if len(decoded) != data.count(b"\n") + (not data.endswith(b"\n")):
        return None  # blank lines: the line numbers would not be the rows'
    rows: dict[str, dict[str, Any]] = {}
    for row in decoded:
        item_id = row.get("item_id") if type(row) is dict else None
        if type(item_id) is not str or not item_id or item_id in rows:
            return None
        try:
            _check_written_fields(row, "")
        except RosetrainError:
            return None
        rows[item_id] = row
    return rows


def _read_predictions_by_line(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    for number, row in iter_jsonl(path):
        item_id = row.get("item_id")
        if not isinstance(item_id, str) or not item_id:
            raise RosetrainError(f"{path}:{number}: a prediction needs a string 'item_id'")
        _check_written_fields(row, f"{path}:{number}")
        if item_id in rows:
            raise RosetrainError(
                f"{path}:{number}: duplicate prediction for item_id "
                f"{item_id!r} (first at line {lines[item_id]})"
            )
        rows[item_id] = row
        lines[item_id] = number
    return rows


def _check_written_fields(row: Mapping[str, Any], where: str) -> None:
    """Refuse the prediction fields a scored run writes as they are into
    evaluation_summary.json (the model's name, error examples) when strict
    UTF-8 JSON cannot hold them: NaN or Infinity (read from a ``NaN`` token), a
    lone surrogate (``"\\ud800"``), nesting too deep to write. A fingerprint
    that is not a string would be no fingerprint."""
    fingerprint = row.get("data_fingerprint")
    if fingerprint is not None and type(fingerprint) is not str:
        raise RosetrainError(f"{where}: field 'data_fingerprint' must be a string, got {fingerprint!r:.100}")
    for field in ("model", "error"):
        value = row.get(field)
        if value is None or (type(value) is str and value.isascii()):  # the usual rows, at once
            continue
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except UnicodeEncodeError:
            raise RosetrainError(
                f"{where}: field {field!r} holds a lone surrogate, which UTF-8 text cannot hold"
            ) from None
        except ValueError:
            raise RosetrainError(
                f"{where}: field {field!r} holds NaN or Infinity, which JSON cannot hold"
            ) from None
        except RecursionError:
            raise RosetrainError(f"{where}: field {field!r} is nested too deeply to write") from None


def predictions_model(predictions: Mapping[str, Mapping[str, Any]], fallback: str | None) -> str | None:
    """The model a run scores, as the official evaluator names it: the one model
    the predictions name, else ``fallback`` (the predictions file's stem). Rows
    naming several models are named together, comma-separated."""
    names = sorted(
        {
            str(p["model"]).strip()
            for p in predictions.values()
            if p.get("model") is not None and str(p["model"]).strip()
        }
    )
    return ",".join(names) if names else fallback
