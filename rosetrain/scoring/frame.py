"""Per-item rows as columns, for summaries: numbers in numpy arrays, labels as lists.

Every figure of ``evaluation_summary.json`` is a mean of one per-item field
over a group of rows (a subset, a template, a breakdown cell, ...). A summary
has hundreds of them over tens of thousands of rows; looping over the row
dicts for each cost more than scoring the items. Here the rows are read field
by field once, and each figure is one weighted ``np.bincount`` per grouping.

``np.bincount`` adds each group's values one at a time in row order, as a
Python ``sum`` over the group's rows does, so every mean is the same float the
plain loops (and the official evaluator) give, bit for bit.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

# per-item fields read as numbers (None -> NaN: "not set on this row")
NUMBER_FIELDS = (
    "pass",
    "unified_soft",
    "format_valid",
    "format_error",
    "api_error",
    "count_exact",
    "count_mae",
    "count_bias",
    "count_soft",
    "click_applicable",
    "click_exact_set",
    "click_exact_set_strict",
    "click_precision",
    "click_recall",
    "click_f1",
    "click_f1_strict",
    "click_iou",
    "click_iou_strict",
    "region_ok",
    "region_violation_count",
    "invalid_coordinate_count",
    "duplicate_click_count",
    "over_click_count",
    "under_click_count",
    "near_miss_count",
    "near_miss_rate",
    "outside_distractor_hit_count",
    "submit_exact",
    "click_submit_consistency",
    "global_default_error",
    "exclusion_failure",
    "gt_count",
    "pred_click_count_unique",
)
# per-item fields kept as they are (group keys, ids, texts)
LABEL_FIELDS = (
    "item_id",
    "scene_id",
    "paired_item_id",
    "rose_subset",
    "task_template",
    "task_mode",
    "region_type",
    "region_case_group",
    "grid_size_profile",
    "target_count",
    "heldout_family",
    "api_error_text",
    "model",  # the official analysis scripts keep one model's rows
    "rose_split",
)
_ROW = {field: i for i, field in enumerate(NUMBER_FIELDS)}
Codes = tuple[np.ndarray, list]  # (group number of each row, the group keys in order of first use)


NUMBERS_OF = operator.itemgetter(*NUMBER_FIELDS)  # a scored row -> its numbers, as a tuple
LABELS_OF = operator.itemgetter(*LABEL_FIELDS)


def _numbers(table: Sequence[Sequence]) -> np.ndarray:
    """A (field, row) float array of rows of numbers (None -> NaN)."""
    try:
        return np.array(table, dtype=np.float64).T.copy()
    except OverflowError:  # an integer past float range (no scored row has one)
        return np.array([[_finite(v) for v in values] for values in table], dtype=np.float64).T.copy()


def _finite(value: Any) -> float:
    try:
        return np.nan if value is None else float(value)
    except OverflowError:
        return np.inf if value > 0 else -np.inf


class Frame:
    """The rows of a run, field by field. Group codes are computed once per frame."""

    __slots__ = ("n", "numbers", "labels", "_codes", "_derived")

    def __init__(self, numbers: np.ndarray, labels: Mapping[str, Sequence]):
        self.n = numbers.shape[1]
        self.numbers = numbers
        self.labels = dict(labels)
        self._codes: dict[tuple, Codes] = {}
        self._derived: dict[Hashable, Any] = {}

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> Frame:
        try:
            return cls.from_tuples(list(map(NUMBERS_OF, rows)), list(map(LABELS_OF, rows)))
        except KeyError:  # rows without some field: it reads as None there
            return cls.from_tuples(
                [tuple(row.get(f) for f in NUMBER_FIELDS) for row in rows],
                [tuple(row.get(f) for f in LABEL_FIELDS) for row in rows],
            )

    @classmethod
    def from_tuples(cls, numbers: Sequence[Sequence], labels: Sequence[Sequence]) -> Frame:
        """Rows given as ``NUMBERS_OF(row)`` and ``LABELS_OF(row)``."""
        if not labels:
            return cls(np.zeros((len(NUMBER_FIELDS), 0)), {field: [] for field in LABEL_FIELDS})
        return cls(_numbers(numbers), dict(zip(LABEL_FIELDS, zip(*labels, strict=True))))

    def __getitem__(self, field: str) -> np.ndarray:
        """A number field's values (NaN where not set)."""
        return self.numbers[_ROW[field]]

    def label(self, field: str) -> Sequence:
        return self.labels[field]

    def take(self, at: np.ndarray | Sequence[int]) -> Frame:
        """The rows at positions ``at``, in that order."""
        at = np.asarray(at, dtype=np.intp)
        picked = operator.itemgetter(*at.tolist()) if len(at) > 1 else None
        labels = {
            field: (picked(values) if picked else [values[i] for i in at.tolist()])
            for field, values in self.labels.items()
        }
        return Frame(self.numbers[:, at], labels)

    def codes(self, *fields: str, key: Callable[[Any], Hashable] | None = None) -> Codes:
        """Each row's group, numbered in order of first use, and the groups' keys.

        Rows are grouped by the value of ``fields`` (a tuple for several), or by
        ``key(value)``: ``key`` is called once per distinct value, not per row."""
        known = self._codes.get((fields, key))
        if known is not None:
            return known
        if key is None:
            values = self.labels[fields[0]] if len(fields) == 1 else list(zip(*map(self.labels.get, fields)))
            known = factorize(values)
        else:
            codes, distinct = self.codes(*fields)
            mapped, keys = factorize([key(value) for value in distinct])
            known = (mapped[codes] if len(codes) else codes), keys
        self._codes[(fields, key)] = known
        return known

    def rows_of(self, field: str, value: Any) -> np.ndarray:
        """Whether each row's ``field`` is ``value``."""
        codes, keys = self.codes(field)
        return codes == keys.index(value) if value in keys else np.zeros(self.n, dtype=bool)

    def id_order(self) -> list[int]:
        """Row positions sorted by item id (as text): the official files' order."""
        return self.derived("id_order", _id_order)

    def derived(self, key: Hashable, make: Callable[[Frame], Any]) -> Any:
        """A value computed from this frame once (``make(frame)``), kept under ``key``."""
        value = self._derived.get(key)
        if value is None:
            value = self._derived[key] = make(self)
        return value


def _id_order(frame: Frame) -> list[int]:
    ids = list(map(str, frame.labels["item_id"]))
    return sorted(range(frame.n), key=ids.__getitem__)


def factorize(keys: Sequence[Hashable]) -> Codes:
    """Each key's number (in order of first use) and the distinct keys."""
    numbers = dict.fromkeys(keys)  # C loops throughout: no Python call per key
    distinct = list(numbers)
    numbers.update(zip(distinct, range(len(distinct))))
    return np.fromiter(map(numbers.__getitem__, keys), dtype=np.intp, count=len(keys)), distinct


def is_set(values: np.ndarray) -> np.ndarray:
    return ~np.isnan(values)


def group_counts(codes: np.ndarray, groups: int, where: np.ndarray | None = None) -> list[int]:
    """Rows per group (those where ``where`` is true)."""
    return np.bincount(codes if where is None else codes[where], minlength=groups).tolist()


def group_sums(values: np.ndarray, codes: np.ndarray, groups: int) -> tuple[list[float], list[int]]:
    """Per group: the sum of the set values (added in row order) and how many were set."""
    kept = is_set(values)
    if not kept.all():  # most fields are set on every row: no copy of them then
        codes, values = codes[kept], values[kept]
    return (
        np.bincount(codes, weights=values, minlength=groups).tolist(),
        np.bincount(codes, minlength=groups).tolist(),
    )


def group_means(values: np.ndarray, codes: np.ndarray, groups: int) -> list[float | None]:
    """Per group: the mean of the set values, None where none is set."""
    sums, counts = group_sums(values, codes, groups)
    return [total / count if count else None for total, count in zip(sums, counts)]


def mean_of(values: np.ndarray) -> float | None:
    """The mean of the set values (added in order), None when none is set."""
    (result,) = group_means(values, np.zeros(len(values), dtype=np.intp), 1)
    return result


def first_use_order(codes: np.ndarray) -> list[int]:
    """The distinct codes in order of first appearance."""
    distinct, first = np.unique(codes, return_index=True)
    return distinct[np.argsort(first, kind="stable")].tolist()


def concat(frames: Sequence[Frame]) -> Frame:
    """One frame of the rows of ``frames``, in order."""
    if len(frames) == 1:
        return frames[0]
    labels = {field: [v for frame in frames for v in frame.labels[field]] for field in LABEL_FIELDS}
    return Frame(np.concatenate([frame.numbers for frame in frames], axis=1), labels)
