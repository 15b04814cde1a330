"""The official ROSE evaluator's summary figures, from rosetrain's per-item rows.

These fill the official keys of ``evaluation_summary.json`` and the official
files (``summary_by_subset.csv``, ``summary_by_template.csv``,
``coverage_by_subset_template.csv``, ``table1_row.txt``, ``table2_row.txt``),
with the official names, orders and aggregation:

- group figures (overall, per subset, template, mode, region type) are plain
  item means over the rows that define them;
- Table 1: per subset the item means of PASS, SOFT, VALID; Avg. PASS, Avg.
  SOFT and VALID the mean over the five ROSE subsets present;
- Table 2: each template's PASS, and C-F1 / R-OK over all click rows, as the
  mean per ROSE subset then over subsets; Avg. PASS the mean of the five
  template PASS values;
- scene-conditioned action: T3-T5 PASS on scenes whose T1 passed, per subset,
  then over subsets.

Only rows of the five ROSE subsets (``ROSE_SUBSETS``) enter the paper tables;
other subsets leave their cells at ``--``. The rows come sorted by item id, the
official evaluator's order of addition, so every mean is its float exactly
(``rosetrain.scoring.frame``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rosetrain.core.protocol import MAIN_TEMPLATES, T1, T3, T4, T5
from rosetrain.scoring.frame import Frame, group_counts, group_means, is_set, mean_of

ROSE_SUBSETS = (
    "ROSE-ChineseGlyph",
    "ROSE-EmojiStyle",
    "ROSE-EmojiContent",
    "ROSE-PixelEdit",
    "ROSE-PixelContent",
)
TABLE_SHORT = {T1: "G-Cnt", "T2_COUNT_LOCAL_NUMERIC": "L-Cnt", T3: "L-Clk", T4: "V-Clk", T5: "Excl. C+S"}
# Keys whose values are rates (shown as percentages in ``paper_metrics_percent``).
PERCENT_KEYS = frozenset(
    {"PASS", "SOFT", "VALID", "Avg. PASS", "Avg. SOFT", "C-F1", "R-OK", *TABLE_SHORT.values(), "Action Avg."}
)


def mean(values: Iterable[Any]) -> float | None:
    """Mean of the values that are not None (as floats); None when there are none."""
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


# The figures of a group, in the official order: (name, per-item field, how).
# "mean": mean of the field over the rows where it is set (the official
# evaluator's applicable rows: click fields are set on click rows only, ...);
# "any": share of those rows where it is above 0; "n": rows where it is set.
FIGURES = (
    ("pass_rate", "pass", "mean"),
    ("unified_soft", "unified_soft", "mean"),
    ("valid_rate", "format_valid", "mean"),
    ("format_error_rate", "format_error", "mean"),
    ("api_error_rate", "api_error", "mean"),
    ("n_count_applicable", "count_exact", "n"),
    ("count_exact_rate", "count_exact", "mean"),
    ("count_mae_parsed", "count_mae", "mean"),
    ("count_bias_parsed", "count_bias", "mean"),
    ("count_soft", "count_soft", "mean"),
    ("n_click_applicable", "click_exact_set", "n"),
    ("click_exact_set_rate", "click_exact_set", "mean"),
    ("click_exact_set_strict_rate", "click_exact_set_strict", "mean"),
    ("click_precision", "click_precision", "mean"),
    ("click_recall", "click_recall", "mean"),
    ("click_f1", "click_f1", "mean"),
    ("click_f1_strict", "click_f1_strict", "mean"),
    ("click_iou", "click_iou", "mean"),
    ("click_iou_strict", "click_iou_strict", "mean"),
    ("region_ok_rate", "region_ok", "mean"),
    ("region_violation_sample_rate", "region_violation_count", "any"),
    ("invalid_coordinate_sample_rate", "invalid_coordinate_count", "any"),
    ("duplicate_click_sample_rate", "duplicate_click_count", "any"),
    ("over_click_sample_rate", "over_click_count", "any"),
    ("under_click_sample_rate", "under_click_count", "any"),
    ("near_miss_rate", "near_miss_rate", "mean"),
    ("n_submit_applicable", "submit_exact", "n"),
    ("submit_exact_rate", "submit_exact", "mean"),
    ("click_submit_consistency_rate", "click_submit_consistency", "mean"),
    ("global_default_error_rate", "global_default_error", "mean"),
    ("n_exclusion", "exclusion_failure", "n"),
    ("exclusion_failure_rate", "exclusion_failure", "mean"),
)


def _counted(frame: Frame, field: str) -> np.ndarray:
    """``field`` as the official figures count it: NaN (not counted) on the rows
    a field set on every row does not apply to (the official evaluator's
    global default error is a local task's, its exclusion failure an exclusion's)."""
    values = frame[field]
    if field == "global_default_error":
        return np.where(frame.rows_of("task_template", T1), np.nan, values)
    if field == "exclusion_failure":
        return np.where(frame.rows_of("region_type", "EXCLUSION"), values, np.nan)
    return values


def figures(frame: Frame, codes: np.ndarray, groups: int) -> list[dict[str, Any]]:
    """The official figures of each group (rows numbered by ``codes``); a group
    without rows is ``{"n": 0}``."""
    sizes = group_counts(codes, groups)
    out: list[dict[str, Any]] = [{"n": size} for size in sizes]
    for name, field, how in FIGURES:
        values = frame.derived(("official", field), lambda f: _counted(f, field))
        if how == "mean":
            results: list = group_means(values, codes, groups)
        else:
            counts = group_counts(codes, groups, is_set(values))
            if how == "n":
                results = counts
            else:  # non-negative counts: > 0 means not 0
                positive = group_counts(codes, groups, is_set(values) & (values != 0))
                results = [p / c if c else None for p, c in zip(positive, counts)]
        for figures_of, size, result in zip(out, sizes, results):
            if size:
                figures_of[name] = result
    return out


def overall(frame: Frame) -> dict[str, Any]:
    (result,) = figures(frame, np.zeros(frame.n, dtype=np.intp), 1)
    return result


def grouped(frame: Frame, field: str) -> dict[str, dict]:
    """The official figures per value of ``field`` (as text, sorted)."""
    codes, names = frame.codes(field, key=str)
    per_group = figures(frame, codes, len(names))
    return {name: per_group[names.index(name)] for name in sorted(names)}


def _per_subset(frame: Frame, field: str, where: np.ndarray | None = None) -> dict[str, float | None]:
    """The mean of ``field`` per ROSE subset (over the rows ``where`` is true)."""
    codes, names = frame.codes("rose_subset", key=str)
    values = frame[field] if where is None else np.where(where, frame[field], np.nan)
    means = group_means(values, codes, len(names))
    return {subset: means[names.index(subset)] if subset in names else None for subset in ROSE_SUBSETS}


def table1(frame: Frame) -> dict[str, Any]:
    codes, names = frame.codes("rose_subset", key=str)
    sizes = group_counts(codes, len(names))
    figures_of = {key: _per_subset(frame, field) for key, field in TABLE1_FIGURES.items()}
    by_subset = {
        subset: {
            "n": sizes[names.index(subset)] if subset in names else 0,
            **{key: figures_of[key][subset] for key in TABLE1_FIGURES},
        }
        for subset in ROSE_SUBSETS
    }
    return {
        "by_subset": by_subset,
        "Avg. PASS": mean(s["PASS"] for s in by_subset.values()),
        "Avg. SOFT": mean(s["SOFT"] for s in by_subset.values()),
        "VALID": mean(s["VALID"] for s in by_subset.values()),
    }


TABLE1_FIGURES = {"PASS": "pass", "SOFT": "unified_soft", "VALID": "format_valid"}


def table2(frame: Frame) -> dict[str, Any]:
    passes = {}
    for template, short in TABLE_SHORT.items():
        passes[short] = mean(_per_subset(frame, "pass", frame.rows_of("task_template", template)).values())
    # click_f1_strict and region_ok are set on click rows only: over a subset's
    # rows they are the mean over its click rows
    return {
        **passes,
        "C-F1": mean(_per_subset(frame, "click_f1_strict").values()),
        "R-OK": mean(_per_subset(frame, "region_ok").values()),
        "Avg. PASS": mean(passes.values()),
    }


def scene_conditioned(frame: Frame) -> dict[str, Any]:
    """T3-T5 PASS on the scenes whose T1 passed (rows present in this run only)."""
    scenes, names = frame.codes("scene_id", key=str)
    passes = frame["pass"]
    by_subset = {}
    for subset in ROSE_SUBSETS:
        in_subset = frame.rows_of("rose_subset", subset)
        passed = np.zeros(len(names), dtype=bool)
        passed[scenes[in_subset & frame.rows_of("task_template", T1) & (passes == 1)]] = True
        record: dict[str, Any] = {"n_t1_correct_scenes": int(passed.sum())}
        on_passed_scene = in_subset & passed[scenes]
        for wanted in (T3, T4, T5):
            kept = passes[on_passed_scene & frame.rows_of("task_template", wanted)]
            record[TABLE_SHORT[wanted]] = {"n": len(kept), "pass_rate": mean_of(kept)}
        by_subset[subset] = record
    macro = {
        TABLE_SHORT[t]: mean(s[TABLE_SHORT[t]]["pass_rate"] for s in by_subset.values()) for t in (T3, T4, T5)
    }
    return {
        "by_subset": by_subset,
        "macro": {**macro, "Action Avg.": mean(macro.values())},
        "note": "From the scenes whose T1 row and action rows are both in this run; "
        "a partial run may rest on few scenes.",
    }


def in_percent(value: Any) -> Any:
    """A copy with rate values (keys naming a rate) as percentages rounded to 4 places."""
    if isinstance(value, list):
        return [in_percent(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, child in value.items():
        is_rate = "rate" in key.lower() or key in PERCENT_KEYS
        if isinstance(child, (dict, list)):
            out[key] = in_percent(child)
        elif is_rate and isinstance(child, (int, float)) and child is not None:
            out[key] = round(100.0 * float(child), 4)
        else:
            out[key] = child
    return out


def coverage(expected: Mapping[str, Sequence], evaluated: Frame) -> tuple[list[dict], list[dict]]:
    """Expected items (``expected[field]``: one value per item) and evaluated
    rows per ROSE subset and per main template."""

    def entries(field, names, extra):
        want, got = Counter(map(str, expected[field])), Counter(map(str, evaluated.label(field)))
        return [
            {
                field: name,
                **extra(name),
                "expected": want[name],
                "evaluated": got[name],
                "coverage_rate": got[name] / want[name] if want[name] else None,
            }
            for name in names
        ]

    return (
        entries("rose_subset", ROSE_SUBSETS, lambda name: {}),
        entries("task_template", MAIN_TEMPLATES, lambda name: {"task_short": TABLE_SHORT[name]}),
    )


def _pct_cell(value: float | None, digits: int) -> str:
    return "--" if value is None else f"{100.0 * value:.{digits}f}"


def table1_row(name: str, table: Mapping[str, Any], digits: int = 1) -> str:
    """The LaTeX row of Table 1: PASS and SOFT per subset, then Avg. PASS, Avg. SOFT, VALID."""
    cells = [_pct_cell(table["by_subset"][s][k], digits) for s in ROSE_SUBSETS for k in ("PASS", "SOFT")]
    cells += [_pct_cell(table[k], digits) for k in ("Avg. PASS", "Avg. SOFT", "VALID")]
    return name + "\n& " + " & ".join(cells) + " \\\\"


def table2_row(name: str, table: Mapping[str, Any], digits: int = 1) -> str:
    """The LaTeX row of Table 2: the five template PASS values, C-F1, R-OK, Avg. PASS."""
    keys = (*TABLE_SHORT.values(), "C-F1", "R-OK", "Avg. PASS")
    return name + "\n& " + " & ".join(_pct_cell(table[k], digits) for k in keys) + " \\\\"
