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

import functools
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rosetrain.core.protocol import MAIN_TEMPLATES, T1, T3, T4, T5

Row = Mapping[str, Any]

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
_FIELDS = tuple(dict.fromkeys(field for _, field, _ in FIGURES))
_COUNTED = frozenset(field for _, field, how in FIGURES if how == "any")
# Fields set on every row but counted by the official evaluator on some rows only.
_ONLY = {
    "global_default_error": lambda key: key[1] != T1,
    "exclusion_failure": lambda key: key[3] == "EXCLUSION",
}

Key = tuple  # (rose_subset, task_template, task_mode, region_type): every grouping is a union
# Float-valued fields: their sums depend on the order of addition, so a group's
# mean of them adds its rows one by one in the official order (rows sorted by
# item id), never cell by cell; integer sums are exact in any order.
FLOAT_FIELDS = frozenset(
    {
        "unified_soft",
        "count_soft",
        "click_precision",
        "click_recall",
        "click_f1",
        "click_f1_strict",
        "click_iou",
        "click_iou_strict",
        "near_miss_rate",
    }
)


_IS_SET = functools.partial(operator.is_not, None)


def take_at(values: Sequence, at: Sequence[int]) -> Sequence:
    """The values at positions ``at``, in that order (one C call: itemgetter)."""
    if len(at) > 1:
        return operator.itemgetter(*at)(values)
    return [values[i] for i in at]


class Columns:
    """Rows read field by field in one pass: every figure of every group then loops
    over short lists at C speed, never over the row dicts again (a summary has
    hundreds of figures over tens of thousands of rows)."""

    __slots__ = ("n", "fields", "_positions")

    def __init__(self, rows: Sequence[Row], fields: Sequence[str]):
        self.n = len(rows)
        self._positions: dict[tuple, dict[Any, list[int]]] = {}
        fields = tuple(dict.fromkeys(fields))
        if not rows:
            self.fields: dict[str, Sequence] = {field: () for field in fields}
            return
        try:
            self.fields = dict(zip(fields, zip(*map(operator.itemgetter(*fields), rows), strict=True)))
        except KeyError:  # rows without some field: it reads as None there
            self.fields = {field: [row.get(field) for row in rows] for field in fields}

    def __getitem__(self, field: str) -> Sequence:
        return self.fields[field]

    def take(self, at: Sequence[int]) -> Columns:
        """The rows at positions ``at``, in that order."""
        taken = Columns((), ())
        taken.n = len(at)
        taken._positions = {}
        taken.fields = {field: take_at(column, at) for field, column in self.fields.items()}
        return taken

    def set_values(self, field: str, at: Sequence[int] | None = None) -> list:
        """The values of ``field`` that are set (not None), in row order, at the
        row positions ``at`` (all rows when None)."""
        column = self.fields[field]
        return list(filter(_IS_SET, column if at is None else take_at(column, at)))

    def mean(self, field: str, at: Sequence[int] | None = None) -> float | None:
        """Mean of ``field`` over the rows where it is set, added in row order."""
        values = self.set_values(field, at)
        return sum(values) / len(values) if values else None

    def positions(self, *fields: str, text: bool = False) -> dict[Any, list[int]]:
        """Row positions per value of ``fields`` (a tuple of values for several
        fields; ``str()`` of the value with ``text``), in order of first use.
        Computed once per Columns (the lists are shared: do not change them)."""
        known = self._positions.get((fields, text))
        if known is not None:
            return known
        keys: Iterable = zip(*(self.fields[f] for f in fields)) if len(fields) > 1 else self.fields[fields[0]]
        if text:
            keys = map(str, keys)
        groups: dict[Any, list[int]] = defaultdict(list)
        for index, key in enumerate(keys):
            groups[key].append(index)
        self._positions[(fields, text)] = groups
        return groups


class Sums:
    """Per field: the sum of its set values, how many were set, and how many were > 0."""

    __slots__ = ("n", "sums")

    def __init__(self):
        self.n = 0
        self.sums = {field: [0.0, 0, 0] for field in _FIELDS}

    def add_rows(self, key: Key, columns: Columns, at: Sequence[int]) -> None:
        self.n += len(at)
        for field in _FIELDS:
            only = _ONLY.get(field)
            if only is not None and not only(key):
                continue
            values = columns.set_values(field, at)
            total = self.sums[field]
            total[0] += sum(values)
            total[1] += len(values)
            if field in _COUNTED:  # non-negative counts: truthy means > 0
                total[2] += len(list(filter(None, values)))

    def add(self, other: Sums) -> None:
        self.n += other.n
        for field, (total, count, positive) in other.sums.items():
            mine = self.sums[field]
            mine[0] += total
            mine[1] += count
            mine[2] += positive

    def mean(self, field: str, columns: Columns, at: Sequence[int] | None) -> float | None:
        """The group's mean of ``field``; ``at`` are the group's rows (None: all)."""
        if field in FLOAT_FIELDS:
            return columns.mean(field, at)
        total, count, _ = self.sums[field]
        return total / count if count else None

    def figures(self, columns: Columns, at: Sequence[int] | None = None) -> dict[str, Any]:
        """The official figures of the group whose rows (``at``; None: all) these sum."""
        if not self.n:
            return {"n": 0}
        out: dict[str, Any] = {"n": self.n}
        for name, field, how in FIGURES:
            total, count, positive = self.sums[field]
            if how == "n":
                out[name] = count
            elif how == "any":
                out[name] = positive / count if count else None
            else:
                out[name] = self.mean(field, columns, at)
        return out


KEY_FIELDS = ("rose_subset", "task_template", "task_mode", "region_type")
# every field the official figures read
COLUMNS = (*KEY_FIELDS, "item_id", "scene_id", *_FIELDS)


def cell_sums(columns: Columns) -> dict[Key, Sums]:
    """The rows' sums per (subset, template, mode, region type), in one pass each."""
    cells = {}
    for key, at in columns.positions(*KEY_FIELDS).items():
        cells[key] = Sums()
        cells[key].add_rows(key, columns, at)
    return cells


def total(cells: Mapping[Key, Sums], keep: Callable[[Key], bool] = lambda key: True) -> Sums:
    result = Sums()
    for key, sums in cells.items():
        if keep(key):
            result.add(sums)
    return result


def group_figures(rows: Sequence[Row]) -> dict[str, Any]:
    """The official figures of one group of rows (``{"n": 0}`` for none)."""
    columns = Columns(rows, COLUMNS)
    return total(cell_sums(columns)).figures(columns)


GROUP_KEYS = {"rose_subset": 0, "task_template": 1, "task_mode": 2, "region_type": 3}


def grouped(cells: Mapping[Key, Sums], columns: Columns, field: str) -> dict[str, dict]:
    """The official figures per value of ``field`` (as text, sorted)."""
    at = GROUP_KEYS[field]
    groups = columns.positions(field, text=True)
    return {
        value: total(cells, lambda key: str(key[at]) == value).figures(columns, groups[value])
        for value in sorted(groups)
    }


def table1(
    cells: Mapping[Key, Sums], columns: Columns, by_subset_at: Mapping[str, list[int]]
) -> dict[str, Any]:
    by_subset = {}
    for subset in ROSE_SUBSETS:
        sums, at = total(cells, lambda key: key[0] == subset), by_subset_at.get(subset, [])
        by_subset[subset] = {
            "n": sums.n,
            "PASS": sums.mean("pass", columns, at),
            "SOFT": sums.mean("unified_soft", columns, at),
            "VALID": sums.mean("format_valid", columns, at),
        }
    return {
        "by_subset": by_subset,
        "Avg. PASS": mean(s["PASS"] for s in by_subset.values()),
        "Avg. SOFT": mean(s["SOFT"] for s in by_subset.values()),
        "VALID": mean(s["VALID"] for s in by_subset.values()),
    }


def table2(
    cells: Mapping[Key, Sums], columns: Columns, by_subset_at: Mapping[str, list[int]]
) -> dict[str, Any]:
    def over_subsets(field, keep=lambda key: True):
        return mean(
            total(cells, lambda key, s=subset: key[0] == s and keep(key)).mean(
                field, columns, by_subset_at.get(subset, [])
            )
            for subset in ROSE_SUBSETS
        )

    passes = {
        short: over_subsets("pass", lambda key, t=template: key[1] == t)
        for template, short in TABLE_SHORT.items()
    }
    # click_f1_strict and region_ok are set on click rows only: over a subset's
    # rows they are the mean over its click rows
    return {
        **passes,
        "C-F1": over_subsets("click_f1_strict"),
        "R-OK": over_subsets("region_ok"),
        "Avg. PASS": mean(passes.values()),
    }


_CONDITIONED = frozenset({T1, T3, T4, T5})


def scene_conditioned(columns: Columns) -> dict[str, Any]:
    """T3-T5 PASS on the scenes whose T1 passed (rows present in this run only)."""
    by_subset = {}
    groups: dict[str, list[tuple]] = {name: [] for name in ROSE_SUBSETS}
    for subset, template, scene, passed in zip(
        columns["rose_subset"], columns["task_template"], columns["scene_id"], columns["pass"]
    ):
        if template in _CONDITIONED and subset in groups:
            groups[subset].append((template, str(scene), passed))
    for name, group in groups.items():
        scenes = {scene for template, scene, passed in group if template == T1 and passed == 1}
        record: dict[str, Any] = {"n_t1_correct_scenes": len(scenes)}
        for wanted in (T3, T4, T5):
            kept = [passed for template, scene, passed in group if template == wanted and scene in scenes]
            record[TABLE_SHORT[wanted]] = {"n": len(kept), "pass_rate": mean(kept)}
        by_subset[name] = record
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


def coverage(expected: Columns, evaluated: Columns) -> tuple[list[dict], list[dict]]:
    """Expected and evaluated items per ROSE subset and per main template."""

    def entries(field, names, extra):
        want, got = Counter(map(str, expected[field])), Counter(map(str, evaluated[field]))
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
