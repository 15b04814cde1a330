"""Scoring a whole split's predictions: coverage checks and the scored-run folder."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from rosetrain.errors import RosetrainError
from rosetrain.io import atomic_write
from rosetrain.scoring.files import PER_ITEM_FILE, SUMMARY_FILE, json_text, jsonl_text
from rosetrain.scoring.gold import prepare_gold
from rosetrain.scoring.item import score_item
from rosetrain.scoring.metrics import summarize
from rosetrain.scoring.tables import csv_tables, summary_markdown

RAW_TEXT_KEPT = 1000  # characters of each response copied into per_item_eval.jsonl
MISSING_SHOWN = 10


def score_predictions(golds: Sequence[Mapping[str, Any]], predictions: Mapping[str, Mapping],
                      allow_partial: bool = False) -> list[dict[str, Any]]:
    """Per-item rows, in split order, for every gold item that has a prediction.

    A gold item without a prediction is an error listing the first missing ids,
    unless ``allow_partial``. Predictions for ids outside the split are an error
    too (they usually mean the wrong split or file).
    """
    gold_ids = [str(g["item_id"]) for g in golds]
    missing = [i for i in gold_ids if i not in predictions]
    if missing and not allow_partial:
        shown = ", ".join(missing[:MISSING_SHOWN])
        raise RosetrainError(
            f"{len(missing)} of {len(gold_ids)} items have no prediction (first: {shown}); "
            f"pass --allow-partial to score the {len(gold_ids) - len(missing)} that do")
    unknown = sorted(set(predictions) - set(gold_ids))
    if unknown:
        raise RosetrainError(f"{len(unknown)} predictions name items not in the split "
                             f"(first: {', '.join(unknown[:MISSING_SHOWN])})")
    rows = []
    for gold in golds:
        prediction = predictions.get(str(gold["item_id"]))
        if prediction is None:
            continue
        raw_text = prediction.get("raw_text")
        row = score_item(prepare_gold(gold), raw_text)
        row["model"] = prediction.get("model")
        row["prediction_error"] = prediction.get("error")
        text = raw_text if isinstance(raw_text, str) else None
        row["raw_text"] = None if text is None else text[:RAW_TEXT_KEPT]
        row["raw_text_chars"] = None if text is None else len(text)
        rows.append(row)
    return rows


def write_scored_run(out_dir: str | os.PathLike, golds: Sequence[Mapping[str, Any]],
                     rows: Sequence[Mapping[str, Any]],
                     data_fingerprint: str | None = None) -> dict[str, Any]:
    """Write per_item_eval.jsonl, evaluation_summary.json, summary.md and CSV tables.

    ``data_fingerprint`` (of the split scored) goes into the summary, so that
    ``rosetrain compare`` can refuse runs of different data."""
    out = Path(out_dir)
    summary = {**summarize(golds, rows), "data_fingerprint": data_fingerprint}
    atomic_write(out / PER_ITEM_FILE, jsonl_text(rows))
    atomic_write(out / SUMMARY_FILE, json_text(summary))
    atomic_write(out / "summary.md", summary_markdown(summary))
    for name, text in csv_tables(summary).items():
        atomic_write(out / name, text)
    return summary
