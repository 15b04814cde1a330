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
case breakdown takes only local tasks (a whole-grid task is always "all").
``t1_passed_scenes`` (rosetrain's own) pools PASS over the scenes whose T1 passed.
The bridge and scene-consistency figures are the official analysis scripts'
(``analyses.py``), added by ``summaries.py`` under their names: ``bridges``,
``scene_consistency``.
Every figure is None when nothing defines it (no such rows), never NaN.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rosetrain.core.protocol import (
    ACTION_TEMPLATES,
    COUNTING_TEMPLATES,
    EXCLUSION,
    GLOBAL,
    MAIN_TEMPLATES,
    SHORT_NAME,
    T1,
    T2,
    T3,
    T4,
    T5,
    TEMPLATES,
)
from rosetrain.scoring.errored import error_examples
from rosetrain.scoring.frame import (
    Frame,
    first_use_order,
    group_counts,
    group_means,
    is_set,
    mean_of,
)
from rosetrain.scoring.headline import headline_note
from rosetrain.scoring.official_files import Expected, RunInfo, official_summary

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


def _diagnostic_column(frame: Frame, how: tuple[str, Callable[[str], bool] | None, str]) -> np.ndarray:
    """One value per row (NaN where it does not apply), computed once for all groups:
    ``how`` is a ``DIAGNOSTICS`` entry."""
    field, applies, kind = how
    values = frame[field]
    if kind == "positive":
        values = np.where(is_set(values), values > 0, np.nan)
    if applies is not None:
        keep = np.fromiter(map(applies, frame.label("region_type")), dtype=bool, count=frame.n)
        values = np.where(keep, values, np.nan)
    return values


def mean(values: Iterable[Any]) -> float | None:
    """Mean of the non-None values (bools count as 0/1); None when there are none."""
    kept = [value for value in values if value is not None]
    return sum(kept) / len(kept) if kept else None


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


def _subset_macro(frame: Frame, values: np.ndarray, rows: np.ndarray | None = None) -> float | None:
    """``subset_macro`` of ``values`` over the rows where ``rows`` is true (all: None),
    subsets taken in order of first appearance."""
    codes, names = frame.codes("rose_subset")
    if rows is not None:
        codes, values = codes[rows], values[rows]
    means = group_means(values, codes, len(names))
    return mean([means[code] for code in first_use_order(codes)])


def template_order(templates: Iterable[str]) -> list[str]:
    """Known templates in protocol order, then any others sorted."""
    present = set(templates)
    return [t for t in TEMPLATES if t in present] + sorted(present - set(TEMPLATES))


def template_table(frame: Frame) -> dict[str, dict[str, Any]]:
    templates = frame.codes("task_template")[1]
    diagnostics = {
        name: frame.derived(("diagnostic", name), functools.partial(_diagnostic_column, how=how))
        for name, how in DIAGNOSTICS.items()
    }
    table = {}
    for template in template_order(templates):
        rows = frame.rows_of("task_template", template)
        table[template] = {
            "short": SHORT_NAME.get(template, template),
            "n": int(rows.sum()),
            "pass": _subset_macro(frame, frame["pass"], rows),
            "valid": _subset_macro(frame, frame["format_valid"], rows),
            "soft": _subset_macro(frame, frame["unified_soft"], rows),
            "diagnostics": {name: mean_of(values[rows]) for name, values in diagnostics.items()},
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


def _overall(frame: Frame) -> dict[str, Any]:
    """VALID and SOFT as Table 1 (item means per subset, then over subsets), C-F1 and
    R-OK as Table 2 (all click rows per subset, then over subsets), on the main
    templates (all rows when there is none)."""
    main_templates = frozenset(MAIN_TEMPLATES)
    main = np.fromiter((t in main_templates for t in frame.label("task_template")), dtype=bool, count=frame.n)
    if not main.any():
        main = np.ones(frame.n, dtype=bool)
    clicks = main & (frame["click_applicable"] == 1)
    return {
        "valid": _subset_macro(frame, frame["format_valid"], main),
        "soft": _subset_macro(frame, frame["unified_soft"], main),
        "c_f1": _subset_macro(frame, frame["click_f1_strict"], clicks),
        "r_ok": _subset_macro(frame, frame["region_ok"], clicks),
    }


def group_stats(frame: Frame, rows: np.ndarray) -> dict[str, Any]:
    """Plain item means inside one breakdown group (the rows where ``rows`` is
    true), and its Avg over main templates."""
    codes, names = frame.codes("task_template")
    codes, passes = codes[rows], frame["pass"][rows]
    sizes, means = group_counts(codes, len(names)), group_means(passes, codes, len(names))
    present = {names[code]: code for code in first_use_order(codes)}
    templates = {t: {"n": sizes[present[t]], "pass": means[present[t]]} for t in template_order(present)}
    return {
        "n": int(rows.sum()),
        "pass": mean_of(passes),
        "valid": mean_of(frame["format_valid"][rows]),
        "soft": mean_of(frame["unified_soft"][rows]),
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


def _part_of(label: Callable[[Any], str], keep: Callable[[str], bool]) -> Callable[[tuple], str | None]:
    """(value, region type) -> the row's group in a breakdown, None if it takes no part."""
    return lambda pair: label(pair[0]) if keep(pair[1]) else None


def breakdowns(frame: Frame) -> dict[str, dict[str, Any]]:
    result = {}
    for name, (field, label, keep) in BREAKDOWNS.items():
        if label is str and keep is _every_row:  # shared with the official figures' groups
            codes, groups = frame.codes(field, key=str)
        else:  # None: the row takes no part
            codes, groups = frame.codes(field, "region_type", key=_part_of(label, keep))
        numbered = {group: i for i, group in enumerate(groups) if group is not None}  # None: no part
        result[name] = {
            group: group_stats(frame, codes == number)
            for group, number in sorted(numbered.items(), key=lambda item: _sort_key(item[0]))
        }
    return result


def t1_passed_scenes(frame: Frame) -> dict[str, Any] | None:
    """rosetrain's own: T2..T5 PASS pooled over the scenes whose T1 (global count)
    passed, every subset together; None without T1 rows. (The paper's Action Ret.
    is the scene-consistency script's, per subset then over subsets: ``scene_consistency``.)"""
    t1 = frame.rows_of("task_template", T1)
    if not t1.any():
        return None
    scenes, names = frame.codes("scene_id")
    passes = frame["pass"]
    passed = np.zeros(len(names), dtype=bool)
    passed[scenes[t1 & (passes != 0)]] = True
    on_passed_scene = passed[scenes]
    templates = {}
    for wanted in (T2, T3, T4, T5):
        rows = frame.rows_of("task_template", wanted) & on_passed_scene
        templates[wanted] = {"n": int(rows.sum()), "pass": mean_of(passes[rows])}
    return {
        "n_scenes": int(passed.sum()),
        "templates": templates,
        "action_templates_mean": mean(templates[t]["pass"] for t in ACTION_TEMPLATES),
    }


def summarize_frame(expected: Expected, every: Frame, run: RunInfo | None = None) -> dict[str, Any]:
    """The main summary of the expected items and the rows of a frame: the
    official evaluator's keys, then rosetrain's (``summaries.with_analyses``
    adds the official analyses' figures).

    The official keys count every row as the official evaluator does;
    rosetrain's own figures leave out rows whose request failed
    (``rosetrain.scoring.errored``), counted in ``n_errors``: ``n`` and
    ``coverage_rate`` count answered items."""
    return joined_summary(official_summary(expected, every, run), own_figures(expected, every), every)


def own_figures(expected: Expected, every: Frame) -> dict[str, Any]:
    """rosetrain's keys of the main summary (``summarize_frame``), without its note."""
    failed = _failed(every)
    errored = np.flatnonzero(failed).tolist()
    frame = _answered(every)
    expected_ids = set(map(str, expected["item_id"]))
    scored_ids = set(map(str, frame.label("item_id")))
    ids, texts = every.label("item_id"), every.label("api_error_text")
    table = template_table(frame)
    return {
        "n": frame.n,
        "n_expected": len(expected_ids),
        "coverage_rate": (len(scored_ids & expected_ids) / len(expected_ids) if expected_ids else None),
        "n_errors": len(errored),
        "error_examples": error_examples({"item_id": ids[i], "api_error_text": texts[i]} for i in errored),
        "templates": table,
        **headline(table),
        **_overall(frame),
        "t1_passed_scenes": t1_passed_scenes(frame),
        **breakdowns(frame),
    }


def joined_summary(official: dict[str, Any], own: dict[str, Any], every: Frame) -> dict[str, Any]:
    """The main summary of its two parts, each computed from ``every``
    (``official_summary``, ``own_figures``: ``write_scored_split`` computes
    them at once, in two processes), and the note on its headline."""
    summary = {**official, **own}
    summary["headline_note"] = headline_note(summary, _answered(every))
    return summary


def _failed(every: Frame) -> np.ndarray:
    api_errors = every["api_error"]
    return is_set(api_errors) & (api_errors != 0)


def _answered(every: Frame) -> Frame:
    """The rows whose request did not fail (taken once)."""
    if not _failed(every).any():
        return every
    return every.derived("answered", lambda f: f.take(np.flatnonzero(~_failed(f))))
