"""Every summary of a scored run: the main summary (``evaluation_summary.json``,
``metrics.py``) with what it carries of the official analyses (the two
bridges and scene consistency, ``analyses.py``). Nothing here writes;
``writer.py`` writes every file from these and from the analyses."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rosetrain.scoring.analyses import analyze
from rosetrain.scoring.bridges import RowsInMemory
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.gold import Gold
from rosetrain.scoring.metrics import summarize_frame
from rosetrain.scoring.official_files import RunInfo, expected_items


def with_analyses(
    summary: dict[str, Any],
    analyses: dict[str, Any],
    run: RunInfo | None = None,
    data_fingerprint: str | None = None,
) -> dict[str, Any]:
    """The main summary (``summarize_frame``'s), completed with what it carries
    of the analyses (``Analyses.summary``) and the data's identity."""
    note = summary.pop("headline_note")  # it closes the summary's own figures
    summary.update(analyses, headline_note=note, data_fingerprint=data_fingerprint)
    if run is not None and run.data is not None:
        summary["data"] = {**run.data, "fingerprint": data_fingerprint}
    return summary


def summarize(
    golds: Iterable[Mapping | Gold], results: Sequence[Mapping[str, Any]], run: RunInfo | None = None
) -> dict[str, Any]:
    """``evaluation_summary.json`` of rows in memory: the official evaluator's
    keys, then rosetrain's (``metrics.summarize_frame``), then the official
    analyses'. ``golds`` only set the expected items (coverage, bridge
    pairing); every figure comes from ``results``."""
    expected, frame = expected_items(golds), Frame.from_rows(results)
    analyses = analyze(expected, frame, RowsInMemory(results), run)
    return with_analyses(summarize_frame(expected, frame, run), analyses.summary(), run)
