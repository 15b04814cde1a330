"""Every summary of a scored run, computed in one pass: the main summary
(``evaluation_summary.json``, ``metrics.py``) and the official analyses (the
two bridges and scene consistency, ``analyses.py``) that it carries. Nothing
here writes; ``writer.py`` writes every file from what this returns."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from rosetrain.core.cpus import can_fork, leave_interrupts
from rosetrain.scoring.analyses import Analyses, analyze
from rosetrain.scoring.bridges import Prepared, prepare_row
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.gold import Gold
from rosetrain.scoring.metrics import summarize_frame
from rosetrain.scoring.official_files import Expected, RunInfo, expected_items


@dataclasses.dataclass
class RunSummaries:
    summary: dict[str, Any]  # evaluation_summary.json
    analyses: Analyses  # the official analysis scripts' figures


def summarize_run(
    expected: Expected,
    frame: Frame,
    prepared: Sequence[Prepared | None],
    run: RunInfo | None = None,
    data_fingerprint: str | None = None,
    main_eval: str | None = None,
    fork: bool = False,
) -> RunSummaries:
    """The summaries of scored rows given as a frame and what the bridge analyses
    read of them (``prepare_row``), in the frame's order. ``data_fingerprint``
    (of the split scored) goes into the summary, so that ``rosetrain compare``
    can refuse runs of different data; ``main_eval``: the path the analyses
    name as the main per-item file. ``fork``: the analyses are computed in a
    forked process while this one computes the main summary (on a second core
    a large split's analyses then cost no wall time)."""
    summary, analyses = None, None
    if fork and can_fork():
        with _forked(lambda: analyze(expected, frame, prepared, run, main_eval)) as analyses_later:
            summary = summarize_frame(expected, frame, run)
            try:
                analyses = analyses_later.result()
            except BrokenProcessPool:  # the process was killed: they are computed here instead
                pass
    summary = summary or summarize_frame(expected, frame, run)
    analyses = analyses or analyze(expected, frame, prepared, run, main_eval)
    note = summary.pop("headline_note")  # it closes the summary's own figures
    summary.update(analyses.summary(), headline_note=note, data_fingerprint=data_fingerprint)
    if run is not None and run.data is not None:
        summary["data"] = {**run.data, "fingerprint": data_fingerprint}
    return RunSummaries(summary, analyses)


def summarize(
    golds: Iterable[Mapping | Gold], results: Sequence[Mapping[str, Any]], run: RunInfo | None = None
) -> dict[str, Any]:
    """``evaluation_summary.json`` of rows in memory: the official evaluator's
    keys, then rosetrain's (``metrics.summarize_frame``), then the official
    analyses'. ``golds`` only set the expected items (coverage, bridge
    pairing); every figure comes from ``results``."""
    expected = expected_items(golds)
    return summarize_run(expected, Frame.from_rows(results), prepared_rows(expected, results), run).summary


def prepared_rows(expected: Expected, rows: Sequence[Mapping[str, Any]]) -> list[Prepared | None]:
    """``prepare_row`` of each row held in memory, with its gold's bridge sources."""
    sources = dict(zip(expected["item_id"], expected["sources"]))
    return [prepare_row(row, sources.get(row["item_id"])) for row in rows]


# The job a forked process runs: set before it forks, so that it inherits the
# frame and rows instead of a pickled copy (only the result comes back).
_JOB: Callable[[], Any] | None = None


def _run_job() -> Any:
    assert _JOB is not None
    return _JOB()


@contextlib.contextmanager
def _forked(job: Callable[[], Any]) -> Iterator[concurrent.futures.Future]:
    """``job()`` in one forked process, as a future; the process ends on exit."""
    global _JOB
    pool = concurrent.futures.ProcessPoolExecutor(
        1, multiprocessing.get_context("fork"), initializer=leave_interrupts
    )
    _JOB = job
    try:
        future = pool.submit(_run_job)  # forks now, with _JOB set
    finally:
        _JOB = None
    try:
        yield future
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
