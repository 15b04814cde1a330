"""Scoring one response against one gold task: the per-item row.

A row holds every field of the official ROSE evaluator's ``per_item_eval.jsonl``
row, under the same names and with the same value conventions (0/1 integers
for flags, None where a field does not apply to the task mode, 0 for
``global_default_error`` / ``exclusion_failure`` where they do not apply),
then rosetrain's own fields (``EXTRA_FIELDS``).

Rules (as the official evaluator):
- PASS, COUNT: valid and n equals the gold count.
- PASS, CLICK: valid, no click outside the grid, no duplicate click, and the
  set of clicks equals the gold set; CLICK_COUNT also needs SUBMIT equal to
  the gold count and to the number of distinct clicks.
- SOFT: COUNT 1/(1+|error|) (0 unparsed); CLICK the strict F1 (0 when invalid,
  out-of-grid or duplicated; two empty sets score 1); CLICK_COUNT the mean of
  strict F1, count soft and click-submit consistency. An invalid CLICK_COUNT
  answer whose last part is a valid ``SUBMIT(n)`` keeps count credit.
- The click diagnostics (precision, recall, F1, region violations, near
  misses, ...) are computed on the clicks that could be read, also when the
  answer is invalid; only the ``*_strict`` figures and PASS need validity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rosetrain.core.protocol import CLICK, CLICK_COUNT, COUNT, EXCLUSION, T2, T3, T4, T5
from rosetrain.scoring.gold import CELL_LABELS, Gold, cell_label, prepare_gold, sorted_labels
from rosetrain.scoring.grammar import ParsedAnswer, parse_answer

NEAR_MISS_L1 = 1  # a missed target counts as a near miss with a click this close (L1)
API_OK = (None, "", "None")  # prediction ``error`` values that mean "no API error"


def _prf(pred: set, gold: frozenset) -> tuple[float, float, float]:
    """Precision, recall, F1; two empty sets are perfect, one empty set scores 0."""
    if not pred or not gold:
        return (1.0, 1.0, 1.0) if not pred and not gold else (0.0, 0.0, 0.0)
    overlap = len(pred & gold)
    precision, recall = overlap / len(pred), overlap / len(gold)
    f1 = 2.0 * precision * recall / (precision + recall) if overlap else 0.0
    return precision, recall, f1


def _iou(pred: set, gold: frozenset) -> float:
    if not pred and not gold:
        return 1.0
    return len(pred & gold) / len(pred | gold)


def _near_misses(missed: frozenset, pred: set) -> int:
    return sum(1 for r, c in missed if any(abs(r - pr) + abs(c - pc) <= NEAR_MISS_L1 for pr, pc in pred))


def _labels(cells) -> list[str]:
    return [CELL_LABELS.get(cell) or cell_label(cell) for cell in cells]


def _api_error(error: object) -> int:
    try:
        return int(error not in API_OK)
    except TypeError:  # an unhashable error object is an error
        return 1


_LOCAL_MAIN = frozenset({T2, T3, T4, T5})


def _global_default(gold: Gold, pred_set: set, pred_count: int | None) -> int:
    """A local task answered with the whole grid's answer (count or click set)."""
    if gold.template not in _LOCAL_MAIN:  # T1 and the bridges
        return 0
    count_global = (
        pred_count is not None and gold.gold_count != gold.global_count and pred_count == gold.global_count
    )
    click_global = gold.gold_clicks != gold.all_targets and pred_set == gold.all_targets
    if gold.mode == COUNT:
        return int(count_global)
    if gold.mode == CLICK:
        return int(click_global)
    return int(click_global or count_global)


def _exclusion_failure(gold: Gold, pred_set: set, pred_count: int | None) -> int:
    if gold.region_type != EXCLUSION:
        return 0
    if gold.mode != COUNT:
        return int(bool(pred_set & gold.out_region_targets))
    if pred_count is not None and gold.gold_count != gold.global_count:
        return int(pred_count == gold.global_count)
    return 0


def _set_count_fields(row: dict[str, Any], gold: Gold, count: int | None) -> float:
    """pred_count .. count_soft (COUNT and CLICK_COUNT; None for CLICK); returns count_soft."""
    if count is None:
        row["count_exact"], row["count_soft"] = 0, 0.0
        return 0.0
    bias = count - gold.gold_count
    soft = 1.0 / (1.0 + float(abs(bias)))
    row["pred_count"], row["count_exact"], row["count_mae"] = count, int(bias == 0), abs(bias)
    row["count_bias"], row["count_soft"] = bias, soft
    return soft


def score_parsed(
    gold: Gold, parsed: ParsedAnswer, raw_text: object = None, model: object = None, error: object = None
) -> dict[str, Any]:
    """The per-item row of an already parsed answer (``raw_text``, ``model`` and
    ``error`` are copied from the prediction into the row).

    The row is a copy of the gold's (every field in order, the gold's own set,
    the others None) with the answer's fields stored one by one: much faster
    than building an 84-key dict from parts."""
    mode, rows, cols, clicks = gold.mode, gold.rows, gold.cols, parsed.clicks
    invalid_clicks = [c for c in clicks if not (1 <= c[0] <= rows and 1 <= c[1] <= cols)]
    valid_clicks = (
        [c for c in clicks if 1 <= c[0] <= rows and 1 <= c[1] <= cols] if invalid_clicks else clicks
    )
    pred_set = set(valid_clicks)
    row = gold.row.copy()
    row["model"] = model
    row["raw_text"] = raw_text
    row["api_error"] = _api_error(error)
    row["api_error_text"] = error
    row["format_valid"] = int(parsed.valid)
    row["format_error"] = int(not parsed.valid)
    row["parse_error"] = parsed.error
    row["invalid_action_tokens"] = list(parsed.invalid_tokens)
    row["count_applicable"] = int(mode != CLICK)
    row["click_applicable"] = int(mode != COUNT)
    row["submit_applicable"] = int(mode == CLICK_COUNT)
    row["pred_clicks_all"] = _labels(clicks)
    row["pred_clicks_valid"] = _labels(valid_clicks)
    row["pred_clicks_valid_unique"] = sorted_labels(pred_set)
    row["pred_clicks_invalid"] = _labels(invalid_clicks)
    row["pred_click_count_raw"] = len(clicks)
    row["pred_click_count_valid"] = len(valid_clicks)
    row["pred_click_count_unique"] = len(pred_set)
    count = parsed.count if mode != CLICK else None
    count_soft = _set_count_fields(row, gold, count) if mode != CLICK else None
    if mode == COUNT:  # the click, submit and region fields stay None
        row["pass"] = int(parsed.valid and parsed.count == gold.gold_count)
        row["unified_soft"] = count_soft
    else:
        _set_click_fields(row, gold, parsed, pred_set, len(valid_clicks), len(invalid_clicks), count_soft)
    row["global_default_error"] = _global_default(gold, pred_set, count)
    row["exclusion_failure"] = _exclusion_failure(gold, pred_set, count)
    row["parse_error_detail"] = parsed.detail
    row["raw_text_chars"] = len(raw_text) if isinstance(raw_text, str) else None
    return row


def _set_click_fields(
    row: dict[str, Any],
    gold: Gold,
    parsed: ParsedAnswer,
    pred_set: set,
    valid: int,
    out_of_grid: int,
    count_soft: float | None,
) -> None:
    """PASS, SOFT and the click, submit and region fields of a CLICK or CLICK_COUNT answer."""
    gold_set, mode = gold.gold_clicks, gold.mode
    duplicates = valid - len(pred_set)
    clean = parsed.valid and not out_of_grid and not duplicates
    precision, recall, f1 = _prf(pred_set, gold_set)
    iou = _iou(pred_set, gold_set)
    same = pred_set == gold_set
    submit = parsed.count if mode == CLICK_COUNT else None
    consistent = int(submit is not None and submit == len(pred_set)) if mode == CLICK_COUNT else None
    passed = clean and same and (mode == CLICK or (submit == gold.gold_count and consistent))
    row["pass"] = int(bool(passed))
    soft = f1 if clean else 0.0
    if mode == CLICK_COUNT:
        row["submit_count"] = submit
        row["submit_exact"] = int(submit is not None and submit == gold.gold_count)
        row["click_submit_consistency"] = consistent
        soft = (soft + (count_soft or 0.0) + float(bool(consistent))) / 3.0
    row["unified_soft"] = soft
    row["invalid_coordinate_count"] = out_of_grid
    row["duplicate_click_count"] = duplicates
    row["click_exact_set"] = int(same)
    row["click_exact_set_strict"] = int(clean and same)
    row["click_precision"], row["click_recall"], row["click_f1"] = precision, recall, f1
    row["click_f1_strict"] = f1 if clean else 0.0
    row["click_iou"] = iou
    row["click_iou_strict"] = iou if clean else 0.0
    _set_region_fields(row, gold, pred_set)
    # rosetrain's own: hits, strict precision/recall (0 unless the answer is
    # valid, in the grid and without duplicates, like the official strict F1),
    # and wrong clicks right next to (L1 = 1) a missed target
    missed = gold_set - pred_set
    row["true_positive_clicks"] = len(pred_set & gold_set)
    row["click_precision_strict"] = precision if clean else 0.0
    row["click_recall_strict"] = recall if clean else 0.0
    row["wrong_clicks_next_to_missed"] = (
        sum(1 for r, c in pred_set - gold_set if {(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)} & missed)
        if missed
        else 0
    )


def _set_region_fields(row: dict[str, Any], gold: Gold, pred_set: set) -> None:
    gold_set = gold.gold_clicks
    missed = gold_set - pred_set
    violations = len(pred_set) - len(gold.region.holds(pred_set))
    near = _near_misses(missed, pred_set) if missed and pred_set else 0
    row["region_violation_count"] = violations
    row["region_ok"] = int(not violations)
    row["outside_distractor_hit_count"] = len(pred_set & gold.out_region_targets)
    row["missed_target_count"] = len(missed)
    row["false_positive_count"] = len(pred_set - gold_set)
    row["over_click_count"] = max(0, len(pred_set) - gold.gold_count)
    row["under_click_count"] = max(0, gold.gold_count - len(pred_set))
    row["near_miss_count"] = near
    row["near_miss_rate"] = near / max(1, len(gold_set))


def score_item(
    gold: Mapping[str, Any] | Gold, raw_text: object, model: object = None, error: object = None
) -> dict[str, Any]:
    """Score one response. ``gold`` is a release record, an HF row or a ``Gold``.

    Any ``raw_text`` (None, empty, prose, unicode, megabytes) gives a row; only a
    malformed *gold* raises (RosetrainError naming the item and field).
    """
    if type(gold) is not Gold:
        gold = prepare_gold(gold)
    return score_parsed(gold, parse_answer(raw_text, gold.mode), raw_text, model, error)


def score_many(golds: Iterable[Mapping[str, Any] | Gold], raw_texts: Iterable[object]) -> list[dict]:
    """Score responses against golds pairwise. Each mapping is read when its
    response is scored: a reader may refill one mapping for every row, so
    nothing parsed from a mapping is kept (a ``Gold`` given many times is
    prepared once by its maker)."""
    return [score_item(gold, text) for gold, text in zip(golds, raw_texts, strict=True)]
