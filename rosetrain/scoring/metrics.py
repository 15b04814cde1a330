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

from rosetrain.core.protocol import (
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
from rosetrain.scoring.errored import error_examples
from rosetrain.scoring.gold import Gold
from rosetrain.scoring.official import COLUMNS as OFFICIAL_COLUMNS
from rosetrain.scoring.official import Columns, take_at
from rosetrain.scoring.official_files import RunInfo, expected_items, official_summary

Row = Mapping[str, Any]


# per-template diagnostic rates: name -> (per-item field, which rows it applies
# to, how); "value": the field's value, "positive": field > 0 as a flag
# (None where the field does not apply, or on rows the test leaves out)
DIAGNOSTICS: dict[str, tuple[str, Callable[[str], bool] | None, str]] = {
    "count_exact": ("count_exact", None, "value"),
    "click_f1": ("click_f1", None, "value"),
    "click_f1_strict": ("click_f1_strict", None, "value"),
    "region_ok": ("region_ok", lambda region: region != GLOBAL, "value"),
    "global_default_error": ("global_default_error", lambda region: region != GLOBAL, "value"),
    "exclusion_failure": ("exclusion_failure", lambda region: region == EXCLUSION, "value"),
    "submit_consistent": ("click_submit_consistency", None, "value"),
    "over_click": ("over_click_count", None, "positive"),
    "under_click": ("under_click_count", None, "positive"),
    "any_near_miss": ("near_miss_count", None, "positive"),
    "any_out_region_target_click": ("outside_distractor_hit_count", None, "positive"),
    "any_duplicate_click": ("duplicate_click_count", None, "positive"),
    "any_out_of_grid_click": ("invalid_coordinate_count", None, "positive"),
}


def _diagnostic_column(columns: Columns, field: str, applies, how: str) -> Sequence:
    """One value per row (None where it does not apply), computed once for all groups."""
    values = columns[field]
    if how == "positive":
        values = [None if v is None else v > 0 for v in values]
    if applies is not None:
        values = [v if applies(region) else None for v, region in zip(values, columns["region_type"])]
    return values


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


def _subset_macro(columns: Columns, at: Sequence[int], values: Sequence) -> float | None:
    """``subset_macro`` of the rows at ``at``, one value per row in ``values``."""
    per_subset: dict[Any, list] = defaultdict(list)
    for subset, value in zip(map(columns["rose_subset"].__getitem__, at), map(values.__getitem__, at)):
        per_subset[subset].append(value)
    return mean([mean(group) for group in per_subset.values()])


def template_order(templates: Iterable[str]) -> list[str]:
    """Known templates in protocol order, then any others sorted."""
    present = set(templates)
    return [t for t in TEMPLATES if t in present] + sorted(present - set(TEMPLATES))


def template_table(columns: Columns) -> dict[str, dict[str, Any]]:
    groups = columns.positions("task_template")
    diagnostics = {name: _diagnostic_column(columns, *how) for name, how in DIAGNOSTICS.items()}
    table = {}
    for template in template_order(groups):
        at = groups[template]
        table[template] = {
            "short": SHORT_NAME.get(template, template),
            "n": len(at),
            "pass": _subset_macro(columns, at, columns["pass"]),
            "valid": _subset_macro(columns, at, columns["format_valid"]),
            "soft": _subset_macro(columns, at, columns["unified_soft"]),
            "diagnostics": {name: mean(take_at(values, at)) for name, values in diagnostics.items()},
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


def _overall(columns: Columns) -> dict[str, Any]:
    """VALID and SOFT as Table 1 (item means per subset, then over subsets), C-F1 and
    R-OK as Table 2 (all click rows per subset, then over subsets), on the main
    templates (all rows when there is none)."""
    main_templates = frozenset(MAIN_TEMPLATES)
    main = [i for i, t in enumerate(columns["task_template"]) if t in main_templates] or range(columns.n)
    clicked = columns["click_applicable"]
    clicks = [i for i in main if clicked[i] == 1]
    return {
        "valid": _subset_macro(columns, main, columns["format_valid"]),
        "soft": _subset_macro(columns, main, columns["unified_soft"]),
        "c_f1": _subset_macro(columns, clicks, columns["click_f1_strict"]),
        "r_ok": _subset_macro(columns, clicks, columns["region_ok"]),
    }


def group_stats(columns: Columns, at: Sequence[int]) -> dict[str, Any]:
    """Plain item means inside one breakdown group, and its Avg over main templates."""
    passes = take_at(columns["pass"], at)
    per_template: dict[str, list] = defaultdict(list)
    for template, passed in zip(map(columns["task_template"].__getitem__, at), passes):
        per_template[template].append(passed)
    templates = {
        t: {"n": len(per_template[t]), "pass": mean(per_template[t])} for t in template_order(per_template)
    }
    return {
        "n": len(at),
        "pass": mean(passes),
        "valid": mean(take_at(columns["format_valid"], at)),
        "soft": mean(take_at(columns["unified_soft"], at)),
        "avg_pass": mean(templates[t]["pass"] for t in MAIN_TEMPLATES if t in templates),
        "templates": templates,
    }


def _heldout_label(value: Any) -> str:
    return "unknown" if value is None else ("heldout" if value else "seen")


def _every_row(region: str) -> bool:
    return True


BREAKDOWNS: dict[str, tuple[str, Callable[[Any], str], Callable[[str], bool]]] = {
    # name -> (field, its group label, which rows take part (by region type))
    "by_subset_groups": ("rose_subset", str, _every_row),
    # only local tasks have a meaningful zero/partial/all case
    "by_region_case": ("region_case_group", str, lambda region: region != GLOBAL),
    "by_grid_profile": ("grid_size_profile", str, _every_row),
    "by_target_count": ("target_count", str, _every_row),
    "by_heldout_family": ("heldout_family", _heldout_label, _every_row),
}


def _sort_key(key: str) -> tuple:
    return (0, int(key), "") if key.isdigit() else (1, 0, key)


def breakdowns(columns: Columns) -> dict[str, dict[str, Any]]:
    result = {}
    for name, (field, label, keep) in BREAKDOWNS.items():
        if label is str and keep is _every_row:  # shared with the official figures' groups
            groups = columns.positions(field, text=True)
        else:
            groups = defaultdict(list)
            for index, (value, region) in enumerate(zip(columns[field], columns["region_type"])):
                if keep(region):
                    groups[label(value)].append(index)
        result[name] = {k: group_stats(columns, groups[k]) for k in sorted(groups, key=_sort_key)}
    return result


def action_retention(columns: Columns) -> dict[str, Any] | None:
    """T2..T5 PASS on the scenes whose T1 (global count) passed; None without T1 rows."""
    rows = list(zip(columns["task_template"], columns["scene_id"], columns["pass"]))
    t1_rows = [(scene, passed) for template, scene, passed in rows if template == T1]
    if not t1_rows:
        return None
    passed_scenes = {scene for scene, passed in t1_rows if passed}
    templates = {}
    for wanted in (T2, T3, T4, T5):
        kept = [passed for template, scene, passed in rows if template == wanted and scene in passed_scenes]
        templates[wanted] = {"n": len(kept), "pass": mean(kept)}
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


def bridge_figures(rows: Sequence[Row], columns: Columns) -> dict[str, Any] | None:
    """G-Clk, Card, Loc|Card and L-Clk given its own correct click count; None without bridges.

    - g_clk: T1B PASS (click every target of the whole grid).
    - card: T2B PASS (count inside exactly T3's region).
    - loc_given_card: T3 PASS on the items whose matched T2B count was correct
      (L-Clk given a correct matched count).
    - lclk_given_own_count: T3 PASS on the answers whose number of distinct
      clicks equals the gold count (localisation once the cardinality is right).
    """
    positions = columns.positions("task_template")
    if T1B not in positions and T2B not in positions:
        return None
    by_template = {template: [rows[i] for i in positions[template]] for template in positions}
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


# every field the summary reads (the official figures' first)
COLUMNS = (
    *OFFICIAL_COLUMNS,
    "api_error",
    "item_id",
    "scene_id",
    "rose_subset",
    "task_template",
    "region_type",
    "pass",
    "format_valid",
    "unified_soft",
    "click_applicable",
    "click_f1_strict",
    "region_ok",
    *(field for field, _, _ in DIAGNOSTICS.values()),
    *(field for field, _, _ in BREAKDOWNS.values()),
)


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
    every = Columns(results, COLUMNS)  # the one pass over the row dicts
    answered = [i for i, error in enumerate(every["api_error"]) if not error]
    errored = [results[i] for i, error in enumerate(every["api_error"]) if error]
    columns = every.take(answered) if errored else every
    results = [results[i] for i in answered] if errored else results
    expected = expected_items(golds)
    expected_ids = set(map(str, expected["item_id"]))
    scored_ids = set(map(str, columns["item_id"]))
    table = template_table(columns)
    summary: dict[str, Any] = {
        **official_summary(expected, every, run),
        "n": len(results),
        "n_expected": len(expected_ids),
        "coverage_rate": (len(scored_ids & expected_ids) / len(expected_ids) if expected_ids else None),
        "n_errors": len(errored),
        "error_examples": error_examples(errored),
        "templates": table,
        **headline(table),
        **_overall(columns),
        "action_retention": action_retention(columns),
        **breakdowns(columns),
    }
    bridges = bridge_figures(results, columns)
    if bridges is not None:
        summary["bridges"] = bridges
    return summary
