"""Paired figures of two runs over the same items: pairing the rows, and the
paired scene bootstrap that gives each figure's interval in each run and the
interval of the difference.

A figure is a ``Column``: one value per row (None where the figure does not
count the row), averaged per subset and then over the subsets, as the
official tables average (or pooled over every row). The bootstrap resamples
*scenes* (all items of a scene move together, both runs with the same draw),
stratified by subset, so every resample keeps the subset sizes that ROSE's
per-subset averaging assumes. ``compare.py`` (the main figures) and
``compare_analyses.py`` (the official analyses') build on it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rosetrain.core.errors import RosetrainError
from rosetrain.core.formats import ci, pct
from rosetrain.core.protocol import ACTION_TEMPLATES, COUNTING_TEMPLATES, MAIN_TEMPLATES
from rosetrain.scoring.errored import is_errored

SHOWN_IDS = 5


CHUNK = 250  # resamples per matrix product: bounds memory on large splits


def pair_runs(before: Sequence[Mapping], after: Sequence[Mapping]) -> list[tuple[Mapping, Mapping]]:
    """(before row, after row) per item, in the before run's order; a mismatch is an error."""
    before_by_id = _by_id(before, "before")
    after_by_id = _by_id(after, "after")
    only_before = [i for i in before_by_id if i not in after_by_id]
    only_after = [i for i in after_by_id if i not in before_by_id]
    if only_before or only_after:
        raise RosetrainError(
            f"the runs cover different items: before has {len(before_by_id)}, after has "
            f"{len(after_by_id)}; only in before: {len(only_before)} "
            f"(first: {', '.join(only_before[:SHOWN_IDS]) or '-'}); only in after: "
            f"{len(only_after)} (first: {', '.join(only_after[:SHOWN_IDS]) or '-'})"
        )
    pairs = []
    for item_id, row in before_by_id.items():
        other = after_by_id[item_id]
        if row["task_template"] != other["task_template"]:
            raise RosetrainError(
                f"item {item_id!r} is {row['task_template']} in before but "
                f"{other['task_template']} in after: not the same split"
            )
        pairs.append((row, other))
    return pairs


def drop_errored(
    pairs: Sequence[tuple[Mapping, Mapping]],
) -> tuple[list[tuple[Mapping, Mapping]], dict[str, int]]:
    """The pairs where both runs have an answer, and how many errored items were left out.

    An item whose request failed in either run says nothing about the model, so
    it leaves the paired comparison (``rosetrain.scoring.errored``)."""
    kept = [(b, a) for b, a in pairs if not is_errored(b) and not is_errored(a)]
    excluded = {
        "before": sum(is_errored(b) for b, _ in pairs),
        "after": sum(is_errored(a) for _, a in pairs),
        "pairs": len(pairs) - len(kept),
    }
    return kept, excluded


def _by_id(rows: Sequence[Mapping], name: str) -> dict[str, Mapping]:
    by_id: dict[str, Mapping] = {}
    for row in rows:
        if row["item_id"] in by_id:
            raise RosetrainError(f"the {name} run lists item {row['item_id']!r} twice")
        by_id[row["item_id"]] = row
    return by_id


@dataclasses.dataclass(frozen=True)
class Column:
    """One figure the bootstrap recomputes: each row's value (None where the
    figure does not count the row), averaged per subset and then over the
    subsets (``macro``, as the official tables do), or over every row."""

    name: str
    label: str  # what a person reads
    value: Callable[[Mapping], float | None]
    macro: bool = True


class SceneTable:
    """Per-scene sums and counts of each column, for vectorised resampling."""

    def __init__(
        self,
        pairs: Sequence[tuple[Mapping, Mapping]],
        columns: Sequence[Column],
        derived: Mapping[str, tuple[str, Sequence[str]]] | None = None,
    ):
        """``derived``: name -> (label, column names): a figure that is, in each
        subset, the mean of those columns' figures there (then over subsets)."""
        scene_index: dict[str, int] = {}
        scene_subset: list[str] = []
        for before, _ in pairs:
            if before["scene_id"] not in scene_index:
                scene_index[before["scene_id"]] = len(scene_subset)
                scene_subset.append(before["rose_subset"])
        shape = (len(scene_subset), len(columns))
        self.sums = {"before": np.zeros(shape), "after": np.zeros(shape)}
        self.counts = {"before": np.zeros(shape), "after": np.zeros(shape)}
        for pair in pairs:
            scene = scene_index[pair[0]["scene_id"]]
            for run, row in zip(("before", "after"), pair):
                for k, column in enumerate(columns):
                    value = column.value(row)
                    if value is not None:
                        self.sums[run][scene, k] += float(value)
                        self.counts[run][scene, k] += 1
        subsets = np.array(scene_subset)
        self.strata = [np.flatnonzero(subsets == s) for s in sorted(set(scene_subset))]
        names = [column.name for column in columns]
        self.derived = [[names.index(part) for part in parts] for _, parts in (derived or {}).values()]
        self.columns = list(columns) + [
            Column(name, label, lambda row: None) for name, (label, _) in (derived or {}).items()
        ]
        self.macro = np.array([column.macro for column in self.columns])

    def rates(self, weights: Sequence[np.ndarray], run: str) -> np.ndarray:
        """(resamples, columns): per subset, then the mean over subsets (macro
        columns), or the pooled mean (the others).

        ``weights[k]`` holds, per resample, how often each scene of stratum k was drawn.
        """
        per_subset: list[np.ndarray] = []
        sums: np.ndarray | float = 0.0
        counts: np.ndarray | float = 0.0
        for stratum, w in zip(self.strata, weights):
            total, items = w @ self.sums[run][stratum], w @ self.counts[run][stratum]
            sums, counts = sums + total, counts + items
            with np.errstate(invalid="ignore", divide="ignore"):
                per_subset.append(np.where(items > 0, total / items, np.nan))
        by_subset = np.stack(per_subset)  # (subsets, resamples, columns)
        if self.derived:
            means = [_nanmean(by_subset[:, :, parts], axis=2)[:, :, None] for parts in self.derived]
            by_subset = np.concatenate([by_subset, *means], axis=2)
            none = np.zeros((by_subset.shape[1], len(means)))  # derived figures are macro only
            sums, counts = np.concatenate([sums, none], axis=1), np.concatenate([counts, none], axis=1)
        macro = _nanmean(by_subset, axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            pooled = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        return np.where(self.macro, macro, pooled)


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    """Mean over ``axis`` ignoring NaN; NaN where nothing is defined (and no warning)."""
    counted = np.sum(~np.isnan(values), axis=axis)
    total = np.nansum(values, axis=axis)
    return np.where(counted > 0, total / np.maximum(counted, 1), np.nan)


def _headline_arrays(rates: np.ndarray, templates: Sequence[str]) -> dict[str, np.ndarray]:
    """The headline figures per resample from (resamples, templates) rates."""

    def avg(group):
        cols = [templates.index(t) for t in group if t in templates]
        if not cols:
            return np.full(rates.shape[0], np.nan)
        return _nanmean(rates[:, cols], axis=1)

    counting, action = avg(COUNTING_TEMPLATES), avg(ACTION_TEMPLATES)
    return {
        "counting_avg": counting,
        "action_avg": action,
        "avg_pass": avg(MAIN_TEMPLATES),
        "gap": counting - action,
    }


def bootstrap(
    table: SceneTable, templates: Sequence[str], resamples: int = 2000, seed: int = 0
) -> dict[str, dict[str, np.ndarray]]:
    """Resampled values: name -> {"before", "after"} arrays of shape (resamples,),
    for every column of ``table`` and the headline figures (``templates``: the
    names of its leading columns, each template's PASS)."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, list]] = defaultdict(lambda: {"before": [], "after": []})
    for start in range(0, resamples, CHUNK):
        size = min(CHUNK, resamples - start)
        weights = [
            rng.multinomial(len(s), np.full(len(s), 1.0 / len(s)), size=size).astype(float)
            for s in table.strata
        ]
        for run in ("before", "after"):
            rates = table.rates(weights, run)
            for k, column in enumerate(table.columns):
                out[column.name][run].append(rates[:, k])
            if templates:
                for name, values in _headline_arrays(rates[:, : len(templates)], templates).items():
                    out[name][run].append(values)
    return {name: {run: np.concatenate(chunks) for run, chunks in runs.items()} for name, runs in out.items()}


def observed(table: SceneTable) -> dict[str, dict]:
    """Each column's value in each run, on the pairs as they are (every scene once)."""
    weights = [np.ones((1, len(s))) for s in table.strata]
    found = {run: table.rates(weights, run)[0] for run in ("before", "after")}
    return {
        c.name: {run: (None if np.isnan(found[run][k]) else float(found[run][k])) for run in found}
        for k, c in enumerate(table.columns)
    }


NO_INTERVAL = (None, None)


def _interval(values: np.ndarray | None) -> list[float | None]:
    """[low, high] over the resamples where the figure is defined; [None, None]
    when it is defined in none. Always two entries: readers index it."""
    values = np.array([]) if values is None else values[~np.isnan(values)]
    if values.size == 0:
        return list(NO_INTERVAL)
    low, high = np.percentile(values, [2.5, 97.5])
    return [float(low), float(high)]


def paired_entry(before: float | None, after: float | None, samples: Mapping[str, np.ndarray]) -> dict:
    delta = None if before is None or after is None else after - before
    return {
        "before": before,
        "after": after,
        "delta": delta,
        "ci95": _interval(None if delta is None else samples["after"] - samples["before"]),
        "ci95_before": _interval(samples["before"]),
        "ci95_after": _interval(samples["after"]),
    }


def paired_figures(
    pairs: Sequence[tuple[Mapping, Mapping]],
    columns: Sequence[Column],
    resamples: int,
    seed: int,
    derived: Mapping[str, tuple[str, Sequence[str]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each column's (and derived figure's) value in each run with its own and
    the paired 95% interval, by the same scene bootstrap as the main figures."""
    table = SceneTable(pairs, columns, derived)
    samples = bootstrap(table, (), resamples, seed)
    values = observed(table)
    return {
        c.name: {
            "label": c.label,
            **paired_entry(values[c.name]["before"], values[c.name]["after"], samples[c.name]),
        }
        for c in table.columns
    }


def with_interval(value: float | None, interval: Sequence[float | None], signed: bool = False) -> str:
    return f"{pct(value, signed)} {ci(interval, signed)}" if value is not None else pct(value, signed)


def figure_row(label: str, e: Mapping[str, Any], p: str | None = "") -> str:
    """One Markdown row: each side's value with its own interval, the paired delta
    with its, and the McNemar p-value cell (none when ``p`` is None)."""
    row = (
        f"| {label} | {with_interval(e['before'], e['ci95_before'])} | "
        f"{with_interval(e['after'], e['ci95_after'])} | {with_interval(e['delta'], e['ci95'], True)} |"
    )
    return row if p is None else f"{row} {p} |"
