"""Every summary of a scored run, computed in one pass: the main summary
(``evaluation_summary.json``, ``metrics.py``) and the official analyses (the
two bridges and scene consistency, ``analyses.py``) that it carries. Nothing
here writes; ``writer.py`` writes every file from what this returns."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rosetrain.scoring.analyses import Analyses, analyze
from rosetrain.scoring.bridges import RowAt
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
    row_at: RowAt,
    run: RunInfo | None = None,
    data_fingerprint: str | None = None,
    main_eval: str | None = None,
) -> RunSummaries:
    """The summaries of scored rows given as a frame (``row_at(i)``: the row at
    frame position ``i``, which the bridge analyses read). ``data_fingerprint``
    (of the split scored) goes into the summary, so that ``rosetrain compare``
    can refuse runs of different data; ``main_eval``: the path the analyses
    name as the main per-item file."""
    summary = summarize_frame(expected, frame, run)
    analyses = analyze(expected, frame, row_at, run, main_eval)
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
    return summarize_run(expected, Frame.from_rows(results), results.__getitem__, run).summary
