"""The global-click bridge as ``analysis/evaluate_global_click_bridge.py`` of
ROSE v0.1 computes it: each T1B row paired with the scene's T1 row."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rosetrain.core.protocol import T1, T1B
from rosetrain.scoring.bridges.common import Kind, clean_action, difference, mean_of, share

# the per-item fields _own and _figures read of a T1B row, and _pair of its T1 row
READS = frozenset(
    (
        "format_valid",
        "invalid_coordinate_count",
        "duplicate_click_count",
        "pred_click_count_unique",
        "gt_count",
        "unified_soft",
        "api_error",
        "click_precision",
        "click_recall",
        "click_f1_strict",
        "click_iou_strict",
    )
)
BASE_READS = frozenset(("item_id", "pass", "unified_soft"))


def _own(row: Mapping, sources: Sequence) -> dict[str, Any]:
    clean, predicted, target = (
        clean_action(row),
        int(row.get("pred_click_count_unique") or 0),
        int(row.get("gt_count") or 0),
    )
    return dict(
        source_item_id=sources[0],
        bridge_type=sources[2],
        clean_action=clean,
        predicted_click_cardinality=predicted,
        target_click_cardinality=target,
        cardinality_error=predicted - target,
        cardinality_abs_error=abs(predicted - target),
        cardinality_exact_nonstrict=int(predicted == target),
        cardinality_exact=int(clean == 1 and predicted == target),
    )


def _pair(row: dict, base: Mapping | None) -> None:
    row.update(
        base_gcnt_matched=int(base is not None),
        base_gcnt_item_id=base.get("item_id") if base else None,
        base_gcnt_pass=int(base.get("pass") or 0) if base else None,
        base_gcnt_soft=base.get("unified_soft") if base else None,
    )


def _figures(rows: Sequence[Mapping]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    exact = [r for r in rows if r.get("cardinality_exact") == 1]
    paired = [r for r in rows if r.get("base_gcnt_matched") == 1]
    counted = [r for r in paired if r.get("base_gcnt_pass") == 1]
    out = {
        "n": len(rows),
        "gclk_pass_rate": mean_of(rows, "pass"),
        "gclk_soft": mean_of(rows, "unified_soft"),
        "valid_rate": mean_of(rows, "format_valid"),
        "api_error_rate": mean_of(rows, "api_error"),
        "cardinality_exact_rate": mean_of(rows, "cardinality_exact"),
        "cardinality_exact_nonstrict_rate": mean_of(rows, "cardinality_exact_nonstrict"),
        "cardinality_mae": mean_of(rows, "cardinality_abs_error"),
        "cardinality_bias": mean_of(rows, "cardinality_error"),
        "location_exact_given_cardinality": mean_of(exact, "pass"),
        "click_precision": mean_of(rows, "click_precision"),
        "click_recall": mean_of(rows, "click_recall"),
        "click_f1_strict": mean_of(rows, "click_f1_strict"),
        "click_iou_strict": mean_of(rows, "click_iou_strict"),
        "invalid_coordinate_sample_rate": share(rows, lambda r: (r.get("invalid_coordinate_count") or 0) > 0),
        "duplicate_click_sample_rate": share(rows, lambda r: (r.get("duplicate_click_count") or 0) > 0),
        "n_cardinality_exact": len(exact),
        "n_main_gcnt_matched": len(paired),
        "n_main_gcnt_correct": len(counted),
    }
    g_cnt, g_clk = mean_of(paired, "base_gcnt_pass"), mean_of(paired, "pass")
    out.update(
        gcnt_pass_rate=g_cnt,
        gclk_pass_on_paired=g_clk,
        gclk_minus_gcnt=difference(g_clk, g_cnt),
        gcnt_to_gclk_drop=difference(g_cnt, g_clk),
        both_correct_rate=share(paired, lambda r: r.get("base_gcnt_pass") == 1 and r.get("pass") == 1),
        gcnt_correct_gclk_wrong_rate=share(
            paired, lambda r: r.get("base_gcnt_pass") == 1 and r.get("pass") != 1
        ),
        gclk_pass_given_gcnt_correct=mean_of(counted, "pass"),
        cardinality_exact_given_gcnt_correct=mean_of(counted, "cardinality_exact"),
        click_f1_given_gcnt_correct=mean_of(counted, "click_f1_strict"),
    )
    return out


# its paper-table row: each column's label and the macro figure it shows (in %)
PAPER = (
    ("G-Cnt", "gcnt_pass_rate"),
    ("G-Clk", "gclk_pass_rate"),
    ("G-Clk | G-Cnt correct", "gclk_pass_given_gcnt_correct"),
    ("Card-Exact", "cardinality_exact_rate"),
    ("Card-Exact | G-Cnt correct", "cardinality_exact_given_gcnt_correct"),
    ("Loc-Exact | Card-Exact", "location_exact_given_cardinality"),
    ("C-F1", "click_f1_strict"),
    ("VALID", "valid_rate"),
    ("G-Cnt to G-Clk drop", "gcnt_to_gclk_drop"),
)


KIND = Kind(
    "global_click",
    T1B,
    T1,
    (0,),
    READS,
    BASE_READS,
    _own,
    _pair,
    _figures,
    PAPER,
    {
        "G-Clk": "T1B PASS: every target of the whole grid clicked, nothing else, a clean action.",
        "Card-Exact": "The distinct valid clicks number the targets, in a clean action.",
        "Loc-Exact|Card-Exact": "T1B PASS over the items whose click cardinality is exact.",
        "G-Clk|G-Cnt correct": "T1B PASS over the scenes whose paired T1 count passed.",
    },
)
