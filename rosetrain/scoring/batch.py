"""Scoring predictions against golds held in memory, the coverage checks, and
writing a scored run's folder (``split.py`` scores a split from its files)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import atomic_write
from rosetrain.core.jsonio import json_text, jsonl_line
from rosetrain.scoring.analyses import analyze
from rosetrain.scoring.bridges import RowAt
from rosetrain.scoring.files import PER_ITEM_FILE, SUMMARY_FILE
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.gold import Gold, prepare_gold
from rosetrain.scoring.item import score_item
from rosetrain.scoring.metrics import summarize_frame
from rosetrain.scoring.official_files import (
    ERROR_CASES_FILE,
    Expected,
    RunInfo,
    expected_items,
    official_files,
)
from rosetrain.scoring.tables import csv_tables, summary_markdown

MISSING_SHOWN = 10


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a while. Scoring a split builds
    millions of dicts, lists and strings that form no reference cycles, and
    the collector's repeated passes over them took about a third of a run."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def check_coverage(gold_ids: Sequence[str], predictions: Mapping[str, Any], allow_partial: bool) -> None:
    """A gold item without a prediction is an error listing the first missing
    ids, unless ``allow_partial``; a prediction for an id outside the split is
    an error too (it usually means the wrong split or file)."""
    missing = [i for i in gold_ids if i not in predictions]
    if missing and not allow_partial:
        shown = ", ".join(missing[:MISSING_SHOWN])
        raise RosetrainError(
            f"{len(missing)} of {len(gold_ids)} items have no prediction (first: {shown}); "
            f"allow_partial scores the {len(gold_ids) - len(missing)} that do",
            argument="allow_partial",
        )
    unknown = sorted(set(predictions) - set(gold_ids))
    if unknown:
        raise RosetrainError(
            f"{len(unknown)} predictions name items not in the split "
            f"(first: {', '.join(unknown[:MISSING_SHOWN])})"
        )


def score_prediction(gold: Gold, prediction: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    """The per-item row of one prediction row (``model``: the row's when it has none)."""
    return score_item(
        gold, prediction.get("raw_text"), prediction.get("model", model), prediction.get("error")
    )


def score_predictions(
    golds: Sequence[Mapping[str, Any] | Gold],
    predictions: Mapping[str, Mapping],
    allow_partial: bool = False,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """Per-item rows, in split order, for every gold item that has a prediction
    (``check_coverage`` first). A prediction without a ``model`` key gets
    ``model`` (the official evaluator's default)."""
    gold_ids = [g.item_id if isinstance(g, Gold) else str(g["item_id"]) for g in golds]
    check_coverage(gold_ids, predictions, allow_partial)
    return [
        score_prediction(prepare_gold(gold), predictions[item_id], model)
        for gold, item_id in zip(golds, gold_ids)
        if item_id in predictions
    ]


def write_scored_run(
    out_dir: str | os.PathLike,
    golds: Sequence[Mapping[str, Any] | Gold],
    rows: Sequence[Mapping[str, Any]],
    run: RunInfo | None = None,
    data_fingerprint: str | None = None,
) -> dict[str, Any]:
    """Write every file of the official evaluator (per_item_eval.jsonl,
    error_cases.jsonl, evaluation_summary.json, summary_by_subset.csv,
    summary_by_template.csv, coverage_by_subset_template.csv, table1_row.txt,
    table2_row.txt) and rosetrain's own (summary.md, CSV breakdowns); return
    the summary.

    ``data_fingerprint`` (of the split scored) goes into the summary, so that
    ``rosetrain compare`` can refuse runs of different data.
    """
    lines = [jsonl_line(row) for row in rows]
    return write_scored_split(
        out_dir, expected_items(golds), Frame.from_rows(rows), lines, run, data_fingerprint, rows.__getitem__
    )


def write_scored_split(
    out_dir: str | os.PathLike,
    expected: Expected,
    frame: Frame,
    lines: Sequence[bytes],
    run: RunInfo | None = None,
    data_fingerprint: str | None = None,
    row_at: RowAt | None = None,
) -> dict[str, Any]:
    """``write_scored_run`` of scored rows given as a frame and their JSON lines
    (in the frame's order; ``row_at(i)``: row ``i`` itself, else its line is
    read back). The per-item files (rows sorted by item id, as the official
    files are) are written by a thread while the summary is computed: the
    writing is mostly the system's, outside the interpreter lock. The official
    analysis scripts' files (bridges, scene consistency) come with them."""
    out = Path(out_dir)
    frame.id_order()  # both threads use it: computed once, before they start
    with concurrent.futures.ThreadPoolExecutor(1) as writer:
        written = writer.submit(_write_rows, out, frame, lines)
        # only bridge rows and the main rows they pair with are read back
        analyses = analyze(
            expected,
            frame,
            row_at or (lambda i: orjson.loads(lines[i])),
            run,
            str((out / PER_ITEM_FILE).absolute()),
        )
        summary = {**summarize_frame(expected, frame, run, analyses), "data_fingerprint": data_fingerprint}
        if run is not None and run.data is not None:
            summary["data"] = {**run.data, "fingerprint": data_fingerprint}
        written.result()
    atomic_write(out / SUMMARY_FILE, json_text(summary))
    for name, text in {**official_files(summary, run), **analyses.files()}.items():
        atomic_write(out / name, text)
    atomic_write(out / "summary.md", summary_markdown(summary))
    for name, text in csv_tables(summary).items():
        atomic_write(out / name, text)
    return summary


def _write_rows(out: Path, frame: Frame, lines: Sequence[bytes]) -> None:
    order, failed = frame.id_order(), (frame["pass"] != 1).tolist()
    atomic_write(out / PER_ITEM_FILE, b"".join([lines[i] for i in order]))
    atomic_write(out / ERROR_CASES_FILE, b"".join([lines[i] for i in order if failed[i]]))
