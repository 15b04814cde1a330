"""Writing a scored run's folder: every file of the official evaluator
(per_item_eval.jsonl, error_cases.jsonl, evaluation_summary.json,
summary_by_subset.csv, summary_by_template.csv,
coverage_by_subset_template.csv, table1_row.txt, table2_row.txt), of the
official analysis scripts (bridges, scene consistency) and rosetrain's own
(summary.md, CSV breakdowns), from the summaries ``summaries.py`` computed.
Every file is written whole or not at all (``atomic_write``)."""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from rosetrain.core.io import atomic_writes
from rosetrain.core.jsonio import json_text, jsonl_line
from rosetrain.scoring.bridges import RowAt
from rosetrain.scoring.files import PER_ITEM_FILE, SUMMARY_FILE
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.gold import Gold
from rosetrain.scoring.official_files import (
    ERROR_CASES_FILE,
    Expected,
    RunInfo,
    expected_items,
    official_files,
)
from rosetrain.scoring.summaries import RunSummaries, summarize_run
from rosetrain.scoring.tables import csv_tables, summary_markdown


def write_scored_run(
    out_dir: str | os.PathLike,
    golds: Sequence[Mapping[str, Any] | Gold],
    rows: Sequence[Mapping[str, Any]],
    run: RunInfo | None = None,
    data_fingerprint: str | None = None,
) -> dict[str, Any]:
    """Summarize per-item rows held in memory and write every file of the run
    (``write_scored_split``); return the summary."""
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
    """Summarize scored rows given as a frame and their JSON lines, in the
    frame's order (``row_at(i)``: row ``i`` itself, else its line is read
    back: the bridge analyses read only their rows and the rows they pair
    with), and write every file of the run; return the summary. The per-item files (rows
    sorted by item id, as the official files are) are written by a thread
    while the summaries are computed: that writing is mostly the system's,
    outside the interpreter lock."""
    out = Path(out_dir)
    frame.id_order()  # both threads use it: computed once, before they start
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        written = thread.submit(_write_rows, out, frame, lines)
        summaries = summarize_run(
            expected,
            frame,
            row_at or (lambda i: orjson.loads(lines[i])),
            run,
            data_fingerprint,
            str((out / PER_ITEM_FILE).absolute()),
        )
        written.result()
    write_summaries(out, summaries, run)
    return summaries.summary


def write_summaries(out: Path, summaries: RunSummaries, run: RunInfo | None = None) -> None:
    """Every file of the run but the per-item ones, from its summaries."""
    summary = summaries.summary
    files = {
        SUMMARY_FILE: json_text(summary),
        **official_files(summary, run),
        **summaries.analyses.files(),
        "summary.md": summary_markdown(summary),
        **csv_tables(summary),
    }
    atomic_writes({out / name: text for name, text in files.items()})


def _write_rows(out: Path, frame: Frame, lines: Sequence[bytes]) -> None:
    order, failed = frame.id_order(), (frame["pass"] != 1).tolist()
    atomic_writes(
        {
            out / PER_ITEM_FILE: [lines[i] for i in order],
            out / ERROR_CASES_FILE: [lines[i] for i in order if failed[i]],
        }
    )
