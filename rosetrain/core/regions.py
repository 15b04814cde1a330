"""Region membership: which grid cells a task's region covers.

``region_params`` use the ROSE release spelling (1-based, inclusive bounds):
ROW_RANGE ``r1, r2``; COL_RANGE ``c1, c2``; RECTANGLE and VISUAL_REGION
``r1, r2, c1, c2``; EXCLUSION ``{"exclude_type": ..., "exclude_params": {...}}``
(every cell *outside* the excluded region); GLOBAL ``{}`` (every cell).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from rosetrain.core.errors import RosetrainError
from rosetrain.core.memo import memo_table
from rosetrain.core.protocol import COL_RANGE, EXCLUSION, GLOBAL, RECTANGLE, ROW_RANGE, VISUAL_REGION, Cell

_UNBOUNDED = (1, 10**9)
# region type -> (row bound keys, column bound keys); None: unbounded on that axis
_BOUNDS = {
    ROW_RANGE: (("r1", "r2"), None),
    COL_RANGE: (None, ("c1", "c2")),
    RECTANGLE: (("r1", "r2"), ("c1", "c2")),
    VISUAL_REGION: (("r1", "r2"), ("c1", "c2")),
}


def _range(region_type: str, region_params: Mapping, keys: tuple[str, str] | None) -> tuple[int, int]:
    if keys is None:
        return _UNBOUNDED
    try:
        return int(region_params[keys[0]]), int(region_params[keys[1]])
    except (KeyError, TypeError, ValueError):
        raise RosetrainError(
            f"region_params of a {region_type} region need integers "
            f"{keys[0]!r} and {keys[1]!r}, got {region_params!r}"
        ) from None


def _box(region_type: str, region_params: Mapping) -> tuple[tuple[int, int], tuple[int, int]]:
    """Inclusive (row range, column range) of a non-exclusion region."""
    if region_type == GLOBAL:
        return _UNBOUNDED, _UNBOUNDED
    if region_type not in _BOUNDS:
        raise RosetrainError(f"unknown region_type {region_type!r}")
    if not isinstance(region_params, (dict, Mapping)):  # dict first: the abc check is slow
        raise RosetrainError(
            f"region_params of a {region_type} region must be an object, got {region_params!r}"
        )
    row_keys, col_keys = _BOUNDS[region_type]
    return (_range(region_type, region_params, row_keys), _range(region_type, region_params, col_keys))


def _excluded(region_params: Mapping) -> tuple[str, Mapping]:
    if not isinstance(region_params, (dict, Mapping)) or "exclude_type" not in region_params:
        raise RosetrainError(
            f"EXCLUSION region_params need 'exclude_type' and 'exclude_params', got {region_params!r}"
        )
    return region_params["exclude_type"], region_params.get("exclude_params") or {}


def region_contains(region_type: str, region_params: Mapping, cell: Cell) -> bool:
    """True when ``cell`` (row, col) lies in the region (grid bounds not checked)."""
    if region_type == EXCLUSION:
        return not region_contains(*_excluded(region_params), cell)
    (r1, r2), (c1, c2) = _box(region_type, region_params)
    return r1 <= cell[0] <= r2 and c1 <= cell[1] <= c2


def grid_cells(rows: int, cols: int) -> list[Cell]:
    """Every cell (1-based row, col) of a ``rows`` x ``cols`` grid, row by row."""
    return [(r, c) for r in range(1, rows + 1) for c in range(1, cols + 1)]


def cells_in_region(region_type: str, region_params: Mapping, rows: int, cols: int) -> set[Cell]:
    """Every grid cell (1-based) of a ``rows`` x ``cols`` grid inside the region."""
    if region_type == EXCLUSION:
        excluded = cells_in_region(*_excluded(region_params), rows, cols)
        return set(grid_cells(rows, cols)) - excluded
    (r1, r2), (c1, c2) = _box(region_type, region_params)
    return {
        (r, c) for r in range(max(r1, 1), min(r2, rows) + 1) for c in range(max(c1, 1), min(c2, cols) + 1)
    }


class Box(NamedTuple):
    """A region as bounds, for membership and size without building its cell set:
    the inclusive box ``r1..r2`` x ``c1..c2``, or (``outside``) the grid minus it."""

    r1: int
    r2: int
    c1: int
    c2: int
    outside: bool = False

    def contains(self, cell: Cell) -> bool:
        return (self.r1 <= cell[0] <= self.r2 and self.c1 <= cell[1] <= self.c2) != self.outside

    def holds(self, cells: Iterable[Cell]) -> set[Cell]:
        """The cells of ``cells`` inside the region (``contains`` inlined: a
        split asks it for every target of every task)."""
        r1, r2, c1, c2, outside = self
        return {cell for cell in cells if (r1 <= cell[0] <= r2 and c1 <= cell[1] <= c2) != outside}

    def size(self, rows: int, cols: int) -> int:
        """How many cells of a ``rows`` x ``cols`` grid the region holds."""
        height = max(0, min(self.r2, rows) - max(self.r1, 1) + 1)
        width = max(0, min(self.c2, cols) - max(self.c1, 1) + 1)
        return rows * cols - height * width if self.outside else height * width


_BOXES: dict[tuple, Box] = memo_table()  # (type, params) -> Box: a split repeats a few hundred regions


def region_box(region_type: str, region_params: Mapping) -> Box:
    """The region as a :class:`Box` (errors as :func:`cells_in_region`)."""
    try:
        key = (region_type, tuple(region_params.items()))
        box = _BOXES.get(key)
    except (AttributeError, TypeError):  # not a mapping, or nested params (EXCLUSION)
        return _region_box(region_type, region_params)
    if box is None:
        box = _region_box(region_type, region_params)
        if len(_BOXES) < 100_000:
            _BOXES[key] = box
    return box


def _region_box(region_type: str, region_params: Mapping) -> Box:
    if region_type == EXCLUSION:
        inner = _region_box(*_excluded(region_params))
        return inner._replace(outside=not inner.outside)
    (r1, r2), (c1, c2) = _box(region_type, region_params)
    return Box(r1, r2, c1, c2)
