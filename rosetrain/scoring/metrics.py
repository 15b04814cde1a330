"""Aggregating per-item rows into ``evaluation_summary.json``: the official
evaluator's keys (``official_files.official_summary``), then rosetrain's own.

ROSE aggregation: a template's PASS (and VALID, SOFT) is the mean per subset,
then the plain mean over subsets; a model's Avg is the mean of the five main
template PASS rates; Counting Avg = mean(T1, T2), Action Avg = mean(T3, T4,
T5), gap = Counting Avg - Action Avg. Overall VALID and SOFT are item means per
subset then over subsets (Table 1's), C-F1 and R-OK over all click rows per
subset then over subsets (Table 2's), on the main templates.
Breakdowns (by subset, region case, ...) are plain item means inside each
group, plus the group's own Avg over the main templates it holds; the region
case breakdown takes only local tasks (a whole-grid task is always "all"). Conditional
figures (action retention, bridges) are plain means over the matched items.
Every figure is None when nothing defines it (no such rows), never NaN.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rosetrain.protocol import (
    ACTION_TEMPLATES,
    COUNTING_TEMPLATES,
    EXCLUSION,
    GLOBAL,
    MAIN_TEMPLATES,
    SHORT_NAME,
    T1,
    T1B,
    T2,
    T2B,
    T3,
    T4,
    T5,
    TEMPLATES,
)
from rosetrain.scoring.errored import error_examples, split_errored
from rosetrain.scoring.gold import Gold
from rosetrain.scoring.official_files import RunInfo, expected_items, official_summary

Row = Mapping[str, Any]


def _positive(field: str) -> Callable[[Row], Any]:
    """``field > 0`` as a flag (None where the field does not apply)."""
    return lambda r: None if r[field] is None else r[field] > 0


# per-template diagnostic rates: name -> value of a row (None: not applicable),
# on the official per-item fields
DIAGNOSTICS: dict[str, Callable[[Row], Any]] = {
    "count_exact": lambda r: r["count_exact"],
    "click_f1": lambda r: r["click_f1"],
    "click_f1_strict": lambda r: r["click_f1_strict"],
    "region_ok": lambda r: r["region_ok"] if r["region_type"] != GLOBAL else None,
    "global_default_error": lambda r: r["global_default_error"] if r["region_type"] != GLOBAL else None,
    "exclusion_failure": lambda r: r["exclusion_failure"] if r["region_type"] == EXCLUSION else None,
    "submit_consistent": lambda r: r["click_submit_consistency"],
    "over_click": _positive("over_click_count"),
    "under_click": _positive("under_click_count"),
    "any_near_miss": _positive("near_miss_count"),
    "any_out_region_target_click": _positive("outside_distractor_hit_count"),
    "any_duplicate_click": _positive("duplicate_click_count"),
    "any_out_of_grid_click": _positive("invalid_coordinate_count"),
}


def mean(values: Iterable[Any]) -> float | None:
    """Mean of the non-None values (bools count as 0/1); None when there are none."""
    kept = [value for value in values if value is not None]
    return sum(kept) / len(kept) if kept else None


def group_by(rows: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    groups: dict[Any, list[Row]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return dict(groups)


def group_by_field(rows: Iterable[Row], field: str) -> dict[Any, list[Row]]:
    """``group_by`` on one field's value (no call per row)."""
    groups: dict[Any, list[Row]] = defaultdict(list)
    for row in rows:
        groups[row[field]].append(row)
    return dict(groups)


def subset_macro(rows: Sequence[Row], field: str) -> float | None:
    """Mean per ``rose_subset``, then the plain mean over subsets (ROSE's aggregation)."""
    per_subset = group_by_field(rows, "rose_subset")
    return mean([mean([r[field] for r in subset_rows]) for subset_rows in per_subset.values()])


def template_order(templates: Iterable[str]) -> list[str]:
    """Known templates in protocol order, then any others sorted."""
    present = set(templates)
    return [t for t in TEMPLATES if t in present] + sorted(present - set(TEMPLATES))


def template_table(rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    groups = group_by_field(rows, "task_template")
    table = {}
    for template in template_order(groups):
        template_rows = groups[template]
        table[template] = {
            "short": SHORT_NAME.get(template, template),
            "n": len(template_rows),
            "pass": subset_macro(template_rows, "pass"),
            "valid": subset_macro(template_rows, "format_valid"),
            "soft": subset_macro(template_rows, "unified_soft"),
            "diagnostics": {
                name: mean([test(r) for r in template_rows]) for name, test in DIAGNOSTICS.items()
            },
        }
    return table


def _mean_of(table: Mapping[str, Mapping], templates: Iterable[str], key: str) -> float | None:
    return mean(table[t][key] for t in templates if t in table)


def headline(table: Mapping[str, Mapping]) -> dict[str, Any]:
    """avg_pass, counting_avg, action_avg and gap from a template table's PASS rates."""
    counting = _mean_of(table, COUNTING_TEMPLATES, "pass")
    action = _mean_of(table, ACTION_TEMPLATES, "pass")
    return {
        "avg_pass": _mean_of(table, MAIN_TEMPLATES, "pass"),
        "avg_templates": [t for t in MAIN_TEMPLATES if t in table],
        "counting_avg": counting,
        "action_avg": action,
        "gap": None if counting is None or action is None else counting - action,
    }


def _overall(table: Mapping[str, Mapping], rows: Sequence[Row]) -> dict[str, Any]:
    """VALID and SOFT as Table 1 (item means per subset, then over subsets), C-F1 and
    R-OK as Table 2 (all click rows per subset, then over subsets), on the main
    templates (all rows when there is none)."""
    main = [r for r in rows if r["task_template"] in MAIN_TEMPLATES] or list(rows)
    clicks = [r for r in main if r["click_applicable"] == 1]
    return {
        "valid": subset_macro(main, "format_valid"),
        "soft": subset_macro(main, "unified_soft"),
        "c_f1": subset_macro(clicks, "click_f1_strict"),
        "r_ok": subset_macro(clicks, "region_ok"),
    }


def group_stats(rows: Sequence[Row]) -> dict[str, Any]:
    """Plain item means inside one breakdown group, and its Avg over main templates."""
    per_template = group_by_field(rows, "task_template")
    templates = {
        t: {"n": len(per_template[t]), "pass": mean([r["pass"] for r in per_template[t]])}
        for t in template_order(per_template)
    }
    return {
        "n": len(rows),
        "pass": mean([r["pass"] for r in rows]),
        "valid": mean([r["format_valid"] for r in rows]),
        "soft": mean([r["unified_soft"] for r in rows]),
        "avg_pass": mean(templates[t]["pass"] for t in MAIN_TEMPLATES if t in templates),
        "templates": templates,
    }


def _heldout_label(row: Row) -> str:
    value = row.get("heldout_family")
    return "unknown" if value is None else ("heldout" if value else "seen")


BREAKDOWNS: dict[str, tuple[Callable[[Row], Any], Callable[[Row], bool]]] = {
    # name -> (group key, which rows take part)
    "by_subset_groups": (lambda r: r["rose_subset"], lambda r: True),
    # only local tasks have a meaningful zero/partial/all case
    "by_region_case": (lambda r: r["region_case_group"], lambda r: r["region_type"] != GLOBAL),
    "by_grid_profile": (lambda r: r["grid_size_profile"], lambda r: True),
    "by_target_count": (lambda r: str(r["target_count"]), lambda r: True),
    "by_heldout_family": (_heldout_label, lambda r: True),
}


def _sort_key(key: str) -> tuple:
    return (0, int(key), "") if key.isdigit() else (1, 0, key)


def breakdowns(rows: Sequence[Row]) -> dict[str, dict[str, Any]]:
    result = {}
    for name, (key, keep) in BREAKDOWNS.items():
        groups = group_by((r for r in rows if keep(r)), lambda r: str(key(r)))
        result[name] = {k: group_stats(groups[k]) for k in sorted(groups, key=_sort_key)}
    return result


def action_retention(rows: Sequence[Row]) -> dict[str, Any] | None:
    """T2..T5 PASS on the scenes whose T1 (global count) passed; None without T1 rows."""
    t1_rows = [r for r in rows if r["task_template"] == T1]
    if not t1_rows:
        return None
    passed_scenes = {r["scene_id"] for r in t1_rows if r["pass"]}
    templates = {}
    for template in (T2, T3, T4, T5):
        kept = [r["pass"] for r in rows if r["task_template"] == template and r["scene_id"] in passed_scenes]
        templates[template] = {"n": len(kept), "pass": mean(kept)}
    return {
        "n_scenes": len(passed_scenes),
        "templates": templates,
        "action_avg": mean(templates[t]["pass"] for t in ACTION_TEMPLATES),
    }


def _matched_t3(t2b_row: Row, t3_by_id: Mapping, t3_by_scene: Mapping) -> Row | None:
    """The T3 item whose region a T2B row counts: by its source id, else the scene's only T3."""
    paired = t3_by_id.get(t2b_row.get("paired_item_id"))
    if paired is not None:
        return paired
    candidates = t3_by_scene.get(t2b_row["scene_id"], ())
    return candidates[0] if len(candidates) == 1 else None


def bridge_figures(rows: Sequence[Row]) -> dict[str, Any] | None:
    """G-Clk, Card, Loc|Card and L-Clk given its own correct click count; None without bridges.

    - g_clk: T1B PASS (click every target of the whole grid).
    - card: T2B PASS (count inside exactly T3's region).
    - loc_given_card: T3 PASS on the items whose matched T2B count was correct
      (L-Clk given a correct matched count).
    - lclk_given_own_count: T3 PASS on the answers whose number of distinct
      clicks equals the gold count (localisation once the cardinality is right).
    """
    by_template = group_by(rows, lambda r: r["task_template"])
    if T1B not in by_template and T2B not in by_template:
        return None
    t3_rows = by_template.get(T3, [])
    t3_by_id = {r["item_id"]: r for r in t3_rows}
    t3_by_scene = group_by(t3_rows, lambda r: r["scene_id"])
    given_card = [_matched_t3(r, t3_by_id, t3_by_scene) for r in by_template.get(T2B, []) if r["pass"]]
    given_card = [r["pass"] for r in given_card if r is not None]
    own_count = [
        r["pass"] for r in t3_rows if r["format_valid"] and r["pred_click_count_unique"] == r["gt_count"]
    ]
    return {
        "g_clk": subset_macro(by_template[T1B], "pass") if T1B in by_template else None,
        "g_clk_n": len(by_template.get(T1B, [])),
        "card": subset_macro(by_template[T2B], "pass") if T2B in by_template else None,
        "card_n": len(by_template.get(T2B, [])),
        "loc_given_card": mean(given_card),
        "loc_given_card_n": len(given_card),
        "lclk_given_own_count": mean(own_count),
        "lclk_given_own_count_n": len(own_count),
    }


def summarize(
    golds: Iterable[Mapping | Gold], results: Sequence[Row], run: RunInfo | None = None
) -> dict[str, Any]:
    """``evaluation_summary.json``: the official evaluator's keys, then rosetrain's.

    ``golds`` only set the expected items (coverage); every figure comes from
    ``results``, whose rows carry the descriptive fields to group by. ``run``
    names the model, split and files in the official keys. The official keys
    count every row as the official evaluator does; rosetrain's own figures
    leave out rows whose request failed (``rosetrain.scoring.errored``), counted
    in ``n_errors``: ``n`` and ``coverage_rate`` count answered items.
    """
    all_rows = results
    results, errored = split_errored(results)
    expected = expected_items(golds)
    expected_ids = {g["item_id"] for g in expected}
    scored_ids = {str(r["item_id"]) for r in results}
    table = template_table(results)
    summary: dict[str, Any] = {
        **official_summary(expected, all_rows, run),
        "n": len(results),
        "n_expected": len(expected_ids),
        "coverage_rate": (len(scored_ids & expected_ids) / len(expected_ids) if expected_ids else None),
        "n_errors": len(errored),
        "error_examples": error_examples(errored),
        "templates": table,
        **headline(table),
        **_overall(table, results),
        "action_retention": action_retention(results),
        **breakdowns(results),
    }
    bridges = bridge_figures(results)
    if bridges is not None:
        summary["bridges"] = bridges
    return summary
