"""Writing a scored run's folder: every file of the official evaluator
(per_item_eval.jsonl, error_cases.jsonl, evaluation_summary.json,
summary_by_subset.csv, summary_by_template.csv,
coverage_by_subset_template.csv, table1_row.txt, table2_row.txt), of the
official analysis scripts (bridges, scene consistency) and rosetrain's own
(summary.md, CSV breakdowns), from the summaries ``summaries.py`` computed
and the analyses ``analyses.py`` computed. Every file is written whole or not
at all (``atomic_write``)."""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core.cpus import meanwhile
from rosetrain.core.io import atomic_writes
from rosetrain.core.jsonio import json_text, jsonl_line
from rosetrain.scoring.analyses import Analyses, analyze
from rosetrain.scoring.bridges import RowLines, RowsInMemory, ScoredRows
from rosetrain.scoring.files import PER_ITEM_FILE, SUMMARY_FILE
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.gold import Gold
from rosetrain.scoring.lines import in_order
from rosetrain.scoring.metrics import joined_summary, own_figures
from rosetrain.scoring.official_files import (
    ERROR_CASES_FILE,
    Expected,
    RunInfo,
    expected_items,
    official_files,
    official_summary,
)
from rosetrain.scoring.summaries import with_analyses
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
        out_dir,
        expected_items(golds),
        Frame.from_rows(rows),
        lines,
        run,
        data_fingerprint,
        RowsInMemory(rows),
    )


# Rows from which half the summaries go to a process of their own: the
# official summary costs some 3 microseconds a row, the matched-count bridge
# some 30 a bridge row, forking and sending them back some 30 ms
FORKED_ROWS = 20_000


def write_scored_split(
    out_dir: str | os.PathLike,
    expected: Expected,
    frame: Frame,
    lines: Sequence[bytes],
    run: RunInfo | None = None,
    data_fingerprint: str | None = None,
    rows: ScoredRows | None = None,
    processes: int = 1,
) -> dict[str, Any]:
    """Summarize scored rows given as a frame and their JSON lines, in the
    frame's order (``rows``: the rows themselves, else they are read from
    their lines: the bridge analyses read only a few fields of their rows and
    the rows they pair with), and write every file of the run; return the
    summary. Three things go on at once, each about a third of the work: the
    official part of the main summary and the second part of the analyses
    (``analyses.PARTS``), in a forked process where ``processes`` allows and
    the rows are many; rosetrain's part of the main summary and the first part
    of the analyses; and, in a thread, the per-item files (rows sorted by item
    id, as the official files are), as that writing is mostly the system's,
    outside the interpreter lock. This process alone writes, as it alone keeps
    the folder's record of what rosetrain wrote (``output_lock``)."""
    out = Path(out_dir)
    frame.id_order()  # every process and thread uses it: computed once, before they start
    rows = rows or RowLines(lines)
    main_eval = str((out / PER_ITEM_FILE).absolute())
    with (
        meanwhile(
            lambda: (
                official_summary(expected, frame, run),
                analyze(expected, frame, rows, run, main_eval, part=1),
            ),
            fork=processes > 1 and frame.n >= FORKED_ROWS,
            what="the official summary and bridge analyses",
        ) as forked,
        concurrent.futures.ThreadPoolExecutor(1) as thread,  # after the fork (see ``meanwhile``)
    ):
        written = thread.submit(_write_rows, out, frame, lines)
        own, first_part = own_figures(expected, frame), analyze(expected, frame, rows, run, main_eval, part=0)
        official, second_part = forked()
        summary, found = joined_summary(official, own, frame), first_part + second_part
        written.result()
    summary = with_analyses(summary, found.summary(), run, data_fingerprint)
    write_summaries(out, summary, found, run)
    return summary


def write_summaries(
    out: Path, summary: dict[str, Any], analyses: Analyses, run: RunInfo | None = None
) -> None:
    """Every file of the run but the per-item ones, from its summary and analyses."""
    files = {
        SUMMARY_FILE: json_text(summary),
        **official_files(summary, run),
        **analyses.files(),
        "summary.md": summary_markdown(summary),
        **csv_tables(summary),
    }
    atomic_writes({out / name: text for name, text in files.items()})


def _write_rows(out: Path, frame: Frame, lines: Sequence[bytes]) -> None:
    order, failed = frame.id_order(), (frame["pass"] != 1).tolist()
    atomic_writes(
        {
            out / PER_ITEM_FILE: in_order(lines, order),
            out / ERROR_CASES_FILE: in_order(lines, [i for i in order if failed[i]]),
        }
    )
