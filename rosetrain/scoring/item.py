"""Scoring one response against one gold task: PASS, VALID, SOFT and diagnostics.

Rules (docs/protocol.md):
- COUNT: PASS when valid and n equals the gold count; SOFT 1/(1+|error|).
- CLICK: PASS when valid, no click outside the grid, no duplicate click, and
  the click set equals the gold set; SOFT is the strict F1 (0 when invalid,
  out-of-grid or duplicated; two empty sets score 1).
- CLICK_COUNT: as CLICK, and SUBMIT equals the gold count and the number of
  distinct clicks; SOFT is the mean of strict F1, count soft and consistency.

Diagnostics, for click answers: precision/recall/F1 over the distinct in-grid
clicks (``click_*``; the ``*_strict`` ones are 0 when PASS is ruled out by
format, grid or duplicates), region violations (clicks outside the region;
``region_ok`` is False for an invalid answer), clicks on targets outside the
region, near misses (a wrong click at L1 distance 1 from a missed target),
over/under clicks (more/fewer distinct clicks than the gold count),
``global_default_error`` (a local task answered with the whole-grid answer:
the count or click set of *all* the scene's targets, when that differs from
the gold), ``exclusion_failure`` (an EXCLUSION task where a target inside the
excluded region was clicked) and ``submit_consistent`` (SUBMIT n equals the
number of distinct clicks). ``pred_count`` is the n of COUNT(n) or SUBMIT(n),
and for CLICK answers the number of distinct clicks (so ``count_exact`` there
means "as many clicks as targets"). Fields that do not apply to a task are None.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from rosetrain.protocol import CLICK_COUNT, COUNT
from rosetrain.scoring.gold import Gold, prepare_gold
from rosetrain.scoring.grammar import ParsedAnswer, parse_answer

# Fields of a per-item row in order (the descriptive fields of Gold.static first).
RESULT_FIELDS = (
    "pass", "format_valid", "parse_error", "unified_soft",
    "pred_count", "count_error", "count_exact", "count_soft",
    "n_clicks", "n_distinct_clicks", "duplicate_clicks", "out_of_grid_clicks",
    "click_precision", "click_recall", "click_f1",
    "click_precision_strict", "click_recall_strict", "click_f1_strict",
    "true_positive_clicks", "false_positive_clicks", "missed_targets",
    "region_ok", "region_violations", "out_region_target_clicks", "near_misses",
    "over_click", "under_click", "global_default_error", "exclusion_failure",
    "submit_consistent",
)


def _soft_count(error: int) -> float:
    return 1.0 / (1.0 + abs(error))


def _prf(true_pos: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    """Precision, recall, F1; an empty prediction of an empty gold is perfect."""
    if n_pred == 0 and n_gold == 0:
        return 1.0, 1.0, 1.0
    if true_pos == 0:
        return 0.0, 0.0, 0.0
    precision, recall = true_pos / n_pred, true_pos / n_gold
    return precision, recall, 2.0 * precision * recall / (precision + recall)


def _near_misses(wrong: set, missed: frozenset) -> int:
    return sum(1 for r, c in wrong
               if (r - 1, c) in missed or (r + 1, c) in missed
               or (r, c - 1) in missed or (r, c + 1) in missed)


def _score_count(gold: Gold, parsed: ParsedAnswer) -> dict[str, Any]:
    if parsed.valid:
        error = parsed.count - gold.gold_count
        soft = _soft_count(error)
        default = (parsed.count == gold.global_count and error != 0) if gold.is_local else None
    else:
        error, soft, default = None, 0.0, (False if gold.is_local else None)
    exact = error == 0
    return {
        **gold.static,
        "pass": exact, "format_valid": parsed.valid, "parse_error": parsed.error,
        "unified_soft": soft, "pred_count": parsed.count, "count_error": error,
        "count_exact": exact, "count_soft": soft,
        "n_clicks": None, "n_distinct_clicks": None, "duplicate_clicks": None,
        "out_of_grid_clicks": None, "click_precision": None, "click_recall": None,
        "click_f1": None, "click_precision_strict": None, "click_recall_strict": None,
        "click_f1_strict": None, "true_positive_clicks": None, "false_positive_clicks": None,
        "missed_targets": None, "region_ok": None, "region_violations": None,
        "out_region_target_clicks": None, "near_misses": None, "over_click": None,
        "under_click": None, "global_default_error": default, "exclusion_failure": None,
        "submit_consistent": None,
    }


def _score_invalid_click(gold: Gold, parsed: ParsedAnswer) -> dict[str, Any]:
    return {
        **gold.static,
        "pass": False, "format_valid": False, "parse_error": parsed.error,
        "unified_soft": 0.0, "pred_count": None, "count_error": None,
        "count_exact": False, "count_soft": 0.0,
        "n_clicks": None, "n_distinct_clicks": None, "duplicate_clicks": None,
        "out_of_grid_clicks": None, "click_precision": 0.0, "click_recall": 0.0,
        "click_f1": 0.0, "click_precision_strict": 0.0, "click_recall_strict": 0.0,
        "click_f1_strict": 0.0, "true_positive_clicks": None, "false_positive_clicks": None,
        "missed_targets": None, "region_ok": False, "region_violations": None,
        "out_region_target_clicks": None, "near_misses": None, "over_click": None,
        "under_click": None,
        "global_default_error": False if gold.is_local else None,
        "exclusion_failure": False if gold.is_exclusion else None,
        "submit_consistent": False if gold.mode == CLICK_COUNT else None,
    }


def _score_click(gold: Gold, parsed: ParsedAnswer) -> dict[str, Any]:
    if not parsed.valid:
        return _score_invalid_click(gold, parsed)
    clicks = parsed.clicks
    distinct = set(clicks)
    n_distinct = len(distinct)
    duplicates = len(clicks) - n_distinct
    in_grid = distinct & gold.grid_cells
    out_of_grid = n_distinct - len(in_grid)
    gold_clicks = gold.gold_clicks
    n_gold = len(gold_clicks)
    true_pos = len(in_grid & gold_clicks)
    precision, recall, f1 = _prf(true_pos, len(in_grid), n_gold)
    if duplicates or out_of_grid:
        strict = (0.0, 0.0, 0.0)
        same_set = False
    else:
        strict = (precision, recall, f1)
        same_set = true_pos == n_gold == n_distinct
    wrong = in_grid - gold_clicks
    missed = gold_clicks - in_grid
    outside = n_distinct - len(distinct & gold.region_cells)
    out_region_targets = len(distinct & gold.out_region_targets) if gold.out_region_targets else 0

    if gold.mode == CLICK_COUNT:
        submitted = parsed.count
        consistent = submitted == n_distinct
        error = submitted - gold.gold_count
        count_soft = _soft_count(error)
        passed = same_set and error == 0 and consistent
        soft = (strict[2] + count_soft + consistent) / 3.0
    else:
        submitted, consistent = n_distinct, None
        error = n_distinct - gold.gold_count
        count_soft = _soft_count(error)
        passed = same_set
        soft = strict[2]
    return {
        **gold.static,
        "pass": passed, "format_valid": True, "parse_error": None,
        "unified_soft": soft, "pred_count": submitted, "count_error": error,
        "count_exact": error == 0, "count_soft": count_soft,
        "n_clicks": len(clicks), "n_distinct_clicks": n_distinct,
        "duplicate_clicks": duplicates, "out_of_grid_clicks": out_of_grid,
        "click_precision": precision, "click_recall": recall, "click_f1": f1,
        "click_precision_strict": strict[0], "click_recall_strict": strict[1],
        "click_f1_strict": strict[2], "true_positive_clicks": true_pos,
        "false_positive_clicks": len(wrong), "missed_targets": len(missed),
        "region_ok": outside == 0, "region_violations": outside,
        "out_region_target_clicks": out_region_targets,
        "near_misses": _near_misses(wrong, missed) if wrong and missed else 0,
        "over_click": n_distinct > n_gold, "under_click": n_distinct < n_gold,
        "global_default_error": (distinct == gold.all_targets and distinct != gold_clicks)
                                if gold.is_local else None,
        "exclusion_failure": out_region_targets > 0 if gold.is_exclusion else None,
        "submit_consistent": consistent,
    }


def _score_fully(gold: Gold, parsed: ParsedAnswer) -> dict[str, Any]:
    return _score_count(gold, parsed) if gold.mode == COUNT else _score_click(gold, parsed)


def score_parsed(gold: Gold, parsed: ParsedAnswer) -> dict[str, Any]:
    """The per-item row for an already parsed answer (the GRPO reward path)."""
    # Gold answers and invalid answers are most rows of a real run, and their
    # rows are fixed per gold (up to the parse error): each is built once by
    # the full path, kept on the Gold, and copied.
    if parsed[0]:  # valid
        if gold.mode == COUNT:
            is_gold = parsed[3] == gold.gold_count
        else:
            clicks = parsed[2]
            is_gold = (len(clicks) == len(gold.gold_clicks) and gold.gold_clicks.issuperset(clicks)
                       and (gold.mode != CLICK_COUNT or parsed[3] == gold.gold_count))
        if not is_gold:
            return _score_fully(gold, parsed)
        key = "gold"
    else:
        key = "invalid"
    row = gold.row_cache.get(key)
    if row is None:
        row = gold.row_cache[key] = _score_fully(gold, parsed)
    row = row.copy()
    if key == "invalid":
        row["parse_error"] = parsed[1]
    return row


def score_item(gold: Mapping[str, Any] | Gold, raw_text: object) -> dict[str, Any]:
    """Score one response. ``gold`` is a release record, an HF row or a ``Gold``.

    Any ``raw_text`` (None, empty, prose, unicode, megabytes) gives a row; only a
    malformed *gold* raises (RosetrainError naming the item and field).
    """
    if type(gold) is not Gold:
        gold = prepare_gold(gold)
    return score_parsed(gold, parse_answer(raw_text, gold.mode))


def score_many(golds: Iterable[Mapping[str, Any] | Gold], raw_texts: Iterable[object]) -> list[dict]:
    """Score responses against golds pairwise; a gold object given many times is prepared once."""
    prepared: dict[int, Gold] = {}
    rows = []
    for gold, text in zip(golds, raw_texts, strict=True):
        ready = prepared.get(id(gold))
        if ready is None:
            ready = prepared[id(gold)] = prepare_gold(gold)
        rows.append(score_item(ready, text))
    return rows
