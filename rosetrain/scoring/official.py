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
other subsets leave their cells at ``--``.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence

from rosetrain.protocol import MAIN_TEMPLATES, T1, T3, T4, T5

Row = Mapping[str, Any]

ROSE_SUBSETS = ("ROSE-ChineseGlyph", "ROSE-EmojiStyle", "ROSE-EmojiContent", "ROSE-PixelEdit",
                "ROSE-PixelContent")
TABLE_SHORT = {T1: "G-Cnt", "T2_COUNT_LOCAL_NUMERIC": "L-Cnt", T3: "L-Clk", T4: "V-Clk",
               T5: "Excl. C+S"}
# Keys whose values are rates (shown as percentages in ``paper_metrics_percent``).
PERCENT_KEYS = frozenset({"PASS", "SOFT", "VALID", "Avg. PASS", "Avg. SOFT", "C-F1", "R-OK",
                          *TABLE_SHORT.values(), "Action Avg."})


def mean(values: Iterable[Any]) -> float | None:
    """Mean of the values that are not None (as floats); None when there are none."""
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _any(field: str) -> Callable[[Row], int]:
    return lambda r: int((r.get(field) or 0) > 0)


def group_figures(rows: Sequence[Row]) -> dict[str, Any]:
    """The official figures of one group of rows (``{"n": 0}`` for none)."""
    if not rows:
        return {"n": 0}
    count = [r for r in rows if r["count_applicable"] == 1]
    click = [r for r in rows if r["click_applicable"] == 1]
    submit = [r for r in rows if r["submit_applicable"] == 1]
    exclusion = [r for r in rows if r["region_type"] == "EXCLUSION"]
    parsed = [r for r in count if r["pred_count"] is not None]

    def over(group, field):
        return mean(r[field] for r in group)

    def share(group, test):
        return mean(test(r) for r in group)

    return {
        "n": len(rows), "pass_rate": over(rows, "pass"), "unified_soft": over(rows, "unified_soft"),
        "valid_rate": over(rows, "format_valid"), "format_error_rate": over(rows, "format_error"),
        "api_error_rate": over(rows, "api_error"),
        "n_count_applicable": len(count), "count_exact_rate": over(count, "count_exact"),
        "count_mae_parsed": over(parsed, "count_mae"), "count_bias_parsed": over(parsed, "count_bias"),
        "count_soft": over(count, "count_soft"),
        "n_click_applicable": len(click), "click_exact_set_rate": over(click, "click_exact_set"),
        "click_exact_set_strict_rate": over(click, "click_exact_set_strict"),
        "click_precision": over(click, "click_precision"), "click_recall": over(click, "click_recall"),
        "click_f1": over(click, "click_f1"), "click_f1_strict": over(click, "click_f1_strict"),
        "click_iou": over(click, "click_iou"), "click_iou_strict": over(click, "click_iou_strict"),
        "region_ok_rate": over(click, "region_ok"),
        "region_violation_sample_rate": share(click, _any("region_violation_count")),
        "invalid_coordinate_sample_rate": share(click, _any("invalid_coordinate_count")),
        "duplicate_click_sample_rate": share(click, _any("duplicate_click_count")),
        "over_click_sample_rate": share(click, _any("over_click_count")),
        "under_click_sample_rate": share(click, _any("under_click_count")),
        "near_miss_rate": over(click, "near_miss_rate"),
        "n_submit_applicable": len(submit), "submit_exact_rate": over(submit, "submit_exact"),
        "click_submit_consistency_rate": over(submit, "click_submit_consistency"),
        "global_default_error_rate": mean(r["global_default_error"] for r in rows
                                          if r["task_template"] != T1),
        "n_exclusion": len(exclusion), "exclusion_failure_rate": over(exclusion, "exclusion_failure"),
    }


def grouped(rows: Sequence[Row], field: str) -> dict[str, dict[str, Any]]:
    """``group_figures`` per value of ``field`` (as text, sorted)."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        groups[str(row.get(field))].append(row)
    return {key: group_figures(groups[key]) for key in sorted(groups)}


def _by_subset(rows: Sequence[Row]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {s: [] for s in ROSE_SUBSETS}
    for row in rows:
        if row.get("rose_subset") in groups:
            groups[row["rose_subset"]].append(row)
    return groups


def _subset_macro(subsets: Mapping[str, list[Row]], keep: Callable[[Row], bool],
                  field: str) -> float | None:
    return mean(mean(r[field] for r in group if keep(r)) for group in subsets.values())


def table1(rows: Sequence[Row]) -> dict[str, Any]:
    subsets = _by_subset(rows)
    by_subset = {name: {"n": len(group), "PASS": mean(r["pass"] for r in group),
                        "SOFT": mean(r["unified_soft"] for r in group),
                        "VALID": mean(r["format_valid"] for r in group)}
                 for name, group in subsets.items()}
    return {"by_subset": by_subset,
            "Avg. PASS": mean(s["PASS"] for s in by_subset.values()),
            "Avg. SOFT": mean(s["SOFT"] for s in by_subset.values()),
            "VALID": mean(s["VALID"] for s in by_subset.values())}


def table2(rows: Sequence[Row]) -> dict[str, Any]:
    subsets = _by_subset(rows)
    passes = {short: _subset_macro(subsets, lambda r, t=template: r["task_template"] == t, "pass")
              for template, short in TABLE_SHORT.items()}
    clicks = lambda r: r["click_applicable"] == 1  # noqa: E731
    return {**passes, "C-F1": _subset_macro(subsets, clicks, "click_f1_strict"),
            "R-OK": _subset_macro(subsets, clicks, "region_ok"),
            "Avg. PASS": mean(passes.values())}


def scene_conditioned(rows: Sequence[Row]) -> dict[str, Any]:
    """T3-T5 PASS on the scenes whose T1 passed (rows present in this run only)."""
    by_subset = {}
    for name, group in _by_subset(rows).items():
        passed = {str(r["scene_id"]) for r in group if r["task_template"] == T1 and r["pass"] == 1}
        record: dict[str, Any] = {"n_t1_correct_scenes": len(passed)}
        for template in (T3, T4, T5):
            kept = [r["pass"] for r in group
                    if r["task_template"] == template and str(r["scene_id"]) in passed]
            record[TABLE_SHORT[template]] = {"n": len(kept), "pass_rate": mean(kept)}
        by_subset[name] = record
    macro = {TABLE_SHORT[t]: mean(s[TABLE_SHORT[t]]["pass_rate"] for s in by_subset.values())
             for t in (T3, T4, T5)}
    return {"by_subset": by_subset, "macro": {**macro, "Action Avg.": mean(macro.values())},
            "note": "From the scenes whose T1 row and action rows are both in this run; "
                    "a partial run may rest on few scenes."}


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


def coverage(expected: Sequence[Row], rows: Sequence[Row]) -> tuple[list[dict], list[dict]]:
    """Expected and evaluated items per ROSE subset and per main template."""
    def entries(field, names, extra):
        want = Counter(str(g.get(field)) for g in expected)
        got = Counter(str(r.get(field)) for r in rows)
        return [{field: name, **extra(name), "expected": want[name], "evaluated": got[name],
                 "coverage_rate": got[name] / want[name] if want[name] else None}
                for name in names]
    return (entries("rose_subset", ROSE_SUBSETS, lambda name: {}),
            entries("task_template", MAIN_TEMPLATES,
                    lambda name: {"task_short": TABLE_SHORT[name]}))


def _pct_cell(value: float | None, digits: int) -> str:
    return "--" if value is None else f"{100.0 * value:.{digits}f}"


def table1_row(name: str, table: Mapping[str, Any], digits: int = 1) -> str:
    """The LaTeX row of Table 1: PASS and SOFT per subset, then Avg. PASS, Avg. SOFT, VALID."""
    cells = [_pct_cell(table["by_subset"][s][k], digits) for s in ROSE_SUBSETS
             for k in ("PASS", "SOFT")]
    cells += [_pct_cell(table[k], digits) for k in ("Avg. PASS", "Avg. SOFT", "VALID")]
    return name + "\n& " + " & ".join(cells) + " \\\\"


def table2_row(name: str, table: Mapping[str, Any], digits: int = 1) -> str:
    """The LaTeX row of Table 2: the five template PASS values, C-F1, R-OK, Avg. PASS."""
    keys = (*TABLE_SHORT.values(), "C-F1", "R-OK", "Avg. PASS")
    return name + "\n& " + " & ".join(_pct_cell(table[k], digits) for k in keys) + " \\\\"
