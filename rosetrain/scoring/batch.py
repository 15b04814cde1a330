"""Scoring predictions against golds held in memory and the coverage checks
(``split.py`` scores a split from its files, ``summaries.py`` computes the
summaries, ``writer.py`` writes the run's folder)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.scoring.gold import Gold, prepare_gold
from rosetrain.scoring.item import score_item

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
