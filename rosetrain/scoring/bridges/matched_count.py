"""The matched-local-count bridge as ``analysis/evaluate_matched_local_count_bridge.py``
of ROSE v0.1 computes it: each T2B row paired with the T3 item whose region it counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rosetrain.core.protocol import T2B, T3
from rosetrain.scoring.bridges.common import Kind, clean_action, difference, mean_of, share

# the per-item fields _pair and _figures read of a T2B row, and _pair of its T3 row
READS = frozenset(("pred_count", "gt_count", "unified_soft", "format_valid", "count_mae", "count_bias"))
BASE_READS = frozenset(
    (
        "item_id",
        "pass",
        "unified_soft",
        "format_valid",
        "invalid_coordinate_count",
        "duplicate_click_count",
        "gt_count",
        "pred_click_count_unique",
        "click_f1_strict",
        "region_violation_count",
    )
)


def _own(row: Mapping, sources: Sequence) -> dict[str, Any]:
    return dict(source_item_id=sources[0], source_click_item_id=sources[1], bridge_type=sources[2])


def _pair(row: dict, base: Mapping | None) -> bool:
    """Fill in the T3 row's figures; False when its target count is not the bridge's."""
    if base is None:
        row["base_lclk_matched"] = 0
        return True
    clean, target = clean_action(base), int(base.get("gt_count") or 0)
    clicks = int(base.get("pred_click_count_unique") or 0)
    counted = row.get("pred_count")
    row.update(
        base_lclk_matched=1,
        base_lclk_item_id=base.get("item_id"),
        base_lclk_pass=int(base.get("pass") or 0),
        base_lclk_soft=base.get("unified_soft"),
        base_lclk_format_valid=int(base.get("format_valid") or 0),
        base_lclk_clean_action=clean,
        base_lclk_gt_count=target,
        base_lclk_pred_click_cardinality=clicks,
        base_lclk_cardinality_exact=int(clean == 1 and clicks == target),
        base_lclk_click_f1_strict=base.get("click_f1_strict"),
        base_lclk_region_violation_count=base.get("region_violation_count"),
        cross_task_cardinality_consistent=(
            int(int(counted) == clicks) if counted is not None and clean == 1 else None
        ),
    )
    return int(row.get("gt_count") or 0) == target


# the T3 figures of a summary without paired rows, in the scripts' order
_UNPAIRED = (
    "lclk_pass_rate",
    "lclk_soft",
    "lclk_valid_rate",
    "lclk_cardinality_exact_rate",
    "lclk_location_exact_given_cardinality",
    "lclk_click_f1_strict",
    "mlcnt_to_lclk_drop",
    "lclk_pass_given_mlcnt_correct",
    "transfer_failure_given_mlcnt_correct",
    "lclk_cardinality_exact_given_mlcnt_correct",
    "lclk_click_f1_given_mlcnt_correct",
    "lclk_location_exact_given_cardinality_and_mlcnt_correct",
    "cross_task_cardinality_consistency_rate",
    "both_correct_rate",
    "mlcnt_correct_lclk_wrong_rate",
)


def _figures(rows: Sequence[Mapping]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    counted = [r for r in rows if r.get("pred_count") is not None]
    paired = [r for r in rows if r.get("base_lclk_matched") == 1]
    right = [r for r in paired if r.get("pass") == 1]
    out: dict[str, Any] = {
        "n": len(rows),
        "mlcnt_pass_rate": mean_of(rows, "pass"),
        "mlcnt_soft": mean_of(rows, "unified_soft"),
        "mlcnt_valid_rate": mean_of(rows, "format_valid"),
        "mlcnt_count_mae": mean_of(counted, "count_mae"),
        "mlcnt_count_bias": mean_of(counted, "count_bias"),
        "n_main_lclk_matched": len(paired),
        "n_mlcnt_correct": len(right),
    }
    if not paired:
        return {**out, **dict.fromkeys(_UNPAIRED)}
    m_cnt, l_clk = mean_of(paired, "pass"), mean_of(paired, "base_lclk_pass")
    exact = [r for r in paired if r.get("base_lclk_cardinality_exact") == 1]
    comparable = [r for r in paired if r.get("cross_task_cardinality_consistent") is not None]
    given = mean_of(right, "base_lclk_pass")
    out.update(
        mlcnt_pass_on_paired=m_cnt,
        lclk_pass_rate=l_clk,
        lclk_soft=mean_of(paired, "base_lclk_soft"),
        lclk_valid_rate=mean_of(paired, "base_lclk_format_valid"),
        lclk_cardinality_exact_rate=mean_of(paired, "base_lclk_cardinality_exact"),
        lclk_location_exact_given_cardinality=mean_of(exact, "base_lclk_pass"),
        lclk_click_f1_strict=mean_of(paired, "base_lclk_click_f1_strict"),
        mlcnt_to_lclk_drop=difference(m_cnt, l_clk),
        both_correct_rate=share(paired, lambda r: r.get("pass") == 1 and r.get("base_lclk_pass") == 1),
        mlcnt_correct_lclk_wrong_rate=share(
            paired, lambda r: r.get("pass") == 1 and r.get("base_lclk_pass") != 1
        ),
        cross_task_cardinality_consistency_rate=mean_of(comparable, "cross_task_cardinality_consistent"),
        lclk_pass_given_mlcnt_correct=given,
        transfer_failure_given_mlcnt_correct=None if given is None else 1.0 - float(given),
        lclk_cardinality_exact_given_mlcnt_correct=mean_of(right, "base_lclk_cardinality_exact"),
        lclk_click_f1_given_mlcnt_correct=mean_of(right, "base_lclk_click_f1_strict"),
        lclk_location_exact_given_cardinality_and_mlcnt_correct=mean_of(
            [r for r in right if r.get("base_lclk_cardinality_exact") == 1], "base_lclk_pass"
        ),
    )
    return out


# its paper-table row: each column's label and the macro figure it shows (in %)
PAPER = (
    ("mL-Cnt", "mlcnt_pass_rate"),
    ("L-Clk", "lclk_pass_rate"),
    ("L-Clk | mL-Cnt correct", "lclk_pass_given_mlcnt_correct"),
    ("Card-Exact", "lclk_cardinality_exact_rate"),
    ("Card-Exact | mL-Cnt correct", "lclk_cardinality_exact_given_mlcnt_correct"),
    ("Loc-Exact | Card-Exact", "lclk_location_exact_given_cardinality"),
    ("Loc-Exact | Card & mL-Cnt", "lclk_location_exact_given_cardinality_and_mlcnt_correct"),
    ("C-F1", "lclk_click_f1_strict"),
    ("mL-Cnt VALID", "mlcnt_valid_rate"),
    ("L-Clk VALID", "lclk_valid_rate"),
    ("mL-Cnt to L-Clk drop", "mlcnt_to_lclk_drop"),
    ("Transfer failure", "transfer_failure_given_mlcnt_correct"),
)


KIND = Kind(
    "matched_count",
    T2B,
    T3,
    (1, 0),
    READS,
    BASE_READS,
    _own,
    _pair,
    _figures,
    PAPER,
    {
        "mL-Cnt": "T2B PASS: the count of the very region and targets of the paired T3 item.",
        "L-Clk|mL-Cnt correct": "The paired T3 item's PASS over the pairs whose matched count passed.",
        "Transfer failure": "1 - L-Clk|mL-Cnt correct.",
    },
)
