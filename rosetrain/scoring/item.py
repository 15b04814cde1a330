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

OFFICIAL_FIELDS = (
    "item_id",
    "scene_id",
    "image_id",
    "model",
    "rose_subset",
    "rose_split",
    "primitive_type",
    "task_template",
    "task_mode",
    "region_type",
    "region_case",
    "cue_type",
    "difficulty",
    "rows",
    "cols",
    "region_cell_count",
    "raw_text",
    "api_error",
    "api_error_text",
    "format_valid",
    "format_error",
    "parse_error",
    "invalid_action_tokens",
    "pass",
    "unified_soft",
    "count_applicable",
    "click_applicable",
    "submit_applicable",
    "gt_count",
    "pred_count",
    "count_exact",
    "count_mae",
    "count_bias",
    "count_soft",
    "gt_clicks",
    "pred_clicks_all",
    "pred_clicks_valid",
    "pred_clicks_valid_unique",
    "pred_clicks_invalid",
    "pred_click_count_raw",
    "pred_click_count_valid",
    "pred_click_count_unique",
    "invalid_coordinate_count",
    "duplicate_click_count",
    "click_exact_set",
    "click_exact_set_strict",
    "click_precision",
    "click_recall",
    "click_f1",
    "click_f1_strict",
    "click_iou",
    "click_iou_strict",
    "submit_count",
    "submit_exact",
    "click_submit_consistency",
    "region_violation_count",
    "region_ok",
    "outside_distractor_hit_count",
    "missed_target_count",
    "false_positive_count",
    "over_click_count",
    "under_click_count",
    "near_miss_count",
    "near_miss_rate",
    "global_default_error",
    "exclusion_failure",
    "all_target_cells",
    "region_target_cells",
    "out_region_target_cells",
    "ground_truth_formal_answer",
)
EXTRA_FIELDS = (
    "template_short",
    "bridge",
    "paired_item_id",
    "family",
    "heldout_family",
    "region_case_group",
    "grid_size_profile",
    "target_count",
    "parse_error_detail",
    "raw_text_chars",
    "true_positive_clicks",
    "click_precision_strict",
    "click_recall_strict",
    "wrong_clicks_next_to_missed",
)
RESULT_FIELDS = OFFICIAL_FIELDS + EXTRA_FIELDS


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


def _count_fields(gold: Gold, parsed: ParsedAnswer) -> dict[str, Any]:
    """pred_count .. count_soft; COUNT and CLICK_COUNT only (None for CLICK)."""
    if gold.mode == CLICK:
        return {
            "pred_count": None,
            "count_exact": None,
            "count_mae": None,
            "count_bias": None,
            "count_soft": None,
        }
    pred = parsed.count
    if pred is None:
        return {
            "pred_count": None,
            "count_exact": 0,
            "count_mae": None,
            "count_bias": None,
            "count_soft": 0.0,
        }
    bias = pred - gold.gold_count
    return {
        "pred_count": pred,
        "count_exact": int(bias == 0),
        "count_mae": abs(bias),
        "count_bias": bias,
        "count_soft": 1.0 / (1.0 + float(abs(bias))),
    }


def _official_span(first: str, last: str) -> dict[str, Any]:
    """The official fields from ``first`` to ``last`` (in order), each set to None."""
    start, end = OFFICIAL_FIELDS.index(first), OFFICIAL_FIELDS.index(last) + 1
    return dict.fromkeys(OFFICIAL_FIELDS[start:end])


# Null on items that have no clicks / no region to check (counting templates)
_NO_CLICK_FIELDS = _official_span("invalid_coordinate_count", "click_iou_strict")
_NO_REGION_FIELDS = _official_span("region_violation_count", "near_miss_rate")


def score_parsed(
    gold: Gold, parsed: ParsedAnswer, raw_text: object = None, model: object = None, error: object = None
) -> dict[str, Any]:
    """The per-item row of an already parsed answer (``raw_text``, ``model`` and
    ``error`` are copied from the prediction into the row)."""
    mode, rows, cols = gold.mode, gold.rows, gold.cols
    clicks = parsed.clicks
    valid_clicks = [c for c in clicks if 1 <= c[0] <= rows and 1 <= c[1] <= cols]
    invalid_clicks = [c for c in clicks if not (1 <= c[0] <= rows and 1 <= c[1] <= cols)]
    pred_set = set(valid_clicks)
    duplicates = len(valid_clicks) - len(pred_set)
    clean = parsed.valid and not invalid_clicks and not duplicates
    gold_set = gold.gold_clicks
    counts = _count_fields(gold, parsed)
    submit = parsed.count if mode == CLICK_COUNT else None
    consistent = None if mode != CLICK_COUNT else int(submit is not None and submit == len(pred_set))

    if mode == COUNT:
        passed = int(parsed.valid and parsed.count == gold.gold_count)
        click = dict(_NO_CLICK_FIELDS)
        soft = counts["count_soft"]
    else:
        precision, recall, f1 = _prf(pred_set, gold_set)
        iou = _iou(pred_set, gold_set)
        same = pred_set == gold_set
        passed = int(bool(clean and same and (mode == CLICK or (submit == gold.gold_count and consistent))))
        click = {
            "invalid_coordinate_count": len(invalid_clicks),
            "duplicate_click_count": duplicates,
            "click_exact_set": int(same),
            "click_exact_set_strict": int(clean and same),
            "click_precision": precision,
            "click_recall": recall,
            "click_f1": f1,
            "click_f1_strict": f1 if clean else 0.0,
            "click_iou": iou,
            "click_iou_strict": iou if clean else 0.0,
        }
        soft = click["click_f1_strict"]
        if mode == CLICK_COUNT:
            soft = (soft + counts["count_soft"] + float(bool(consistent))) / 3.0

    row = {
        **gold.first,
        "model": model,
        **gold.head,
        "raw_text": raw_text,
        "api_error": _api_error(error),
        "api_error_text": error,
        "format_valid": int(parsed.valid),
        "format_error": int(not parsed.valid),
        "parse_error": parsed.error,
        "invalid_action_tokens": list(parsed.invalid_tokens),
        "pass": passed,
        "unified_soft": soft,
        "count_applicable": int(mode != CLICK),
        "click_applicable": int(mode != COUNT),
        "submit_applicable": int(mode == CLICK_COUNT),
        "gt_count": gold.gold_count,
        **counts,
        "gt_clicks": gold.gt_labels,
        "pred_clicks_all": _labels(clicks),
        "pred_clicks_valid": _labels(valid_clicks),
        "pred_clicks_valid_unique": sorted_labels(pred_set),
        "pred_clicks_invalid": _labels(invalid_clicks),
        "pred_click_count_raw": len(clicks),
        "pred_click_count_valid": len(valid_clicks),
        "pred_click_count_unique": len(pred_set),
        **click,
        "submit_count": submit,
        "submit_exact": None
        if mode != CLICK_COUNT
        else int(submit is not None and submit == gold.gold_count),
        "click_submit_consistency": consistent,
        **(_NO_REGION_FIELDS if mode == COUNT else _region_fields(gold, pred_set)),
        "global_default_error": _global_default(gold, pred_set, counts["pred_count"]),
        "exclusion_failure": _exclusion_failure(gold, pred_set, counts["pred_count"]),
        **gold.tail,
        **gold.extras,
        "parse_error_detail": parsed.detail,
        "raw_text_chars": len(raw_text) if isinstance(raw_text, str) else None,
        **(_NO_EXTRA_CLICK_FIELDS if mode == COUNT else _extra_click_fields(gold, pred_set, clean)),
    }
    return row


_NO_EXTRA_CLICK_FIELDS = dict.fromkeys(EXTRA_FIELDS[-4:])


def _extra_click_fields(gold: Gold, pred_set: set, clean: bool) -> dict[str, Any]:
    """rosetrain's own click diagnostics: hits, strict precision/recall (0 unless
    the answer is valid, in the grid and without duplicates, like the official
    strict F1), and wrong clicks right next to (L1 = 1) a missed target."""
    gold_set = gold.gold_clicks
    hits = len(pred_set & gold_set)
    missed = gold_set - pred_set
    near = (
        sum(1 for r, c in pred_set - gold_set if {(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)} & missed)
        if missed
        else 0
    )
    precision, recall, _ = _prf(pred_set, gold_set)
    return {
        "true_positive_clicks": hits,
        "click_precision_strict": precision if clean else 0.0,
        "click_recall_strict": recall if clean else 0.0,
        "wrong_clicks_next_to_missed": near,
    }


def _region_fields(gold: Gold, pred_set: set) -> dict[str, Any]:
    gold_set = gold.gold_clicks
    missed = gold_set - pred_set
    inside = gold.region.contains
    violations = sum(1 for cell in pred_set if not inside(cell))
    near = _near_misses(missed, pred_set) if missed and pred_set else 0
    return {
        "region_violation_count": violations,
        "region_ok": int(not violations),
        "outside_distractor_hit_count": len(pred_set & gold.out_region_targets),
        "missed_target_count": len(missed),
        "false_positive_count": len(pred_set - gold_set),
        "over_click_count": max(0, len(pred_set) - gold.gold_count),
        "under_click_count": max(0, gold.gold_count - len(pred_set)),
        "near_miss_count": near,
        "near_miss_rate": near / max(1, len(gold_set)),
    }


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
    """Score responses against golds pairwise; a gold object given many times is prepared once."""
    prepared: dict[int, Gold] = {}
    rows = []
    for gold, text in zip(golds, raw_texts, strict=True):
        ready = prepared.get(id(gold))
        if ready is None:
            ready = prepared[id(gold)] = prepare_gold(gold)
        rows.append(score_item(ready, text))
    return rows
