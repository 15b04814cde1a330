"""A scored run's items as cells: the axes a generator spec can weight.

Rows come from ``per_item_eval.jsonl`` through the reader ``compare`` uses
(``rosetrain.scoring.files.read_scored_rows``), with items whose request failed
left out as ``compare`` leaves them out. Each item gets five coordinates:

- ``template``: its task template;
- ``region_case``: zero / partial / all targets in the region (local tasks
  only; a ROSE fallback case counts as the case the region really has);
- ``family``: rosetrain's visual family; rows of the real ROSE release carry
  none, and their ``rose_subset`` maps back through
  each family's ``rose_subset`` (ROSE-PixelEdit -> sprite_edit);
- ``profile``: the grid size profile (``custom`` where the spec fixed the grid);
- ``target_count``: the targets in the whole grid (0: a negative scene).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import GLOBAL
from rosetrain.generators.families import rose_subsets
from rosetrain.scoring.errored import is_errored
from rosetrain.scoring.files import read_scored_rows
from rosetrain.scoring.gold import normalize_region_case

AXES = ("template", "region_case", "family", "profile", "target_count")
FAMILY_OF_SUBSET = {subset: family for family, subset in rose_subsets().items()}
OWN_SUBSET = "rosetrain-"  # rosetrain's own layout names a family's subset rosetrain-<family>


@dataclasses.dataclass(frozen=True)
class Item:
    item_id: str
    passed: bool
    template: str
    region_case: str | None  # None for global tasks: they have no region
    family: str | None  # None: neither the row nor its subset names a family
    subset: str
    profile: str
    target_count: int | None

    def value(self, axis: str) -> Any:
        return getattr(self, axis)


@dataclasses.dataclass(frozen=True)
class Cell:
    """``n`` items, ``fails`` of them failed."""

    n: int = 0
    fails: int = 0

    @property
    def pass_rate(self) -> float | None:
        return None if self.n == 0 else 1 - self.fails / self.n


def family_of(row: Mapping[str, Any]) -> str | None:
    """The visual family of a per-item row: its own ``family`` field (rosetrain's
    splits), else what its ROSE subset reproduces."""
    if row.get("family"):
        return str(row["family"])
    subset = str(row.get("rose_subset") or "")
    if subset in FAMILY_OF_SUBSET:
        return FAMILY_OF_SUBSET[subset]
    if subset.startswith(OWN_SUBSET):
        return subset[len(OWN_SUBSET) :]
    return None


def target_count(row: Mapping[str, Any]) -> int | None:
    if isinstance(row.get("target_count"), int):
        return int(row["target_count"])
    cells = row.get("all_target_cells")
    return len(cells) if isinstance(cells, list) else None


def item_of(row: Mapping[str, Any]) -> Item:
    local = row.get("region_type") not in (None, GLOBAL)
    case = row.get("region_case_group") or normalize_region_case(row.get("region_case"))
    return Item(
        item_id=str(row["item_id"]),
        passed=bool(row["pass"]),
        template=str(row.get("task_template")),
        region_case=str(case) if local else None,
        family=family_of(row),
        subset=str(row.get("rose_subset") or "unknown"),
        profile=str(row.get("grid_size_profile") or "unknown"),
        target_count=target_count(row),
    )


@dataclasses.dataclass(frozen=True)
class Run:
    path: str
    items: tuple[Item, ...]
    errored: int  # items whose request failed: left out, as compare leaves them out


def read_run(run: str | os.PathLike) -> Run:
    rows = read_scored_rows(run)
    kept = [row for row in rows if not is_errored(row)]
    if not kept:
        raise RosetrainError(
            f"run {run}: no scored items to learn from" + (f" (all {len(rows)} errored)" if rows else ""),
            argument="run",
        )
    return Run(str(run), tuple(item_of(row) for row in kept), len(rows) - len(kept))


def cells(items: Iterable[Item], axis: str) -> dict[Any, Cell]:
    """``value -> Cell`` on one axis; items without a value on it are not counted."""
    n: Counter = Counter()
    fails: Counter = Counter()
    for item in items:
        value = item.value(axis)
        if value is None:
            continue
        n[value] += 1
        fails[value] += not item.passed
    return {value: Cell(n[value], fails[value]) for value in n}


def joint_cells(items: Sequence[Item]) -> dict[tuple, Cell]:
    """Cells over all five axes at once (shown in the report; too small to weight by)."""
    n: Counter = Counter()
    fails: Counter = Counter()
    for item in items:
        key = tuple(item.value(axis) for axis in AXES)
        n[key] += 1
        fails[key] += not item.passed
    return {key: Cell(n[key], fails[key]) for key in n}
