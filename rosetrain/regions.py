"""Region membership: which grid cells a task's region covers.

``region_params`` use the ROSE release spelling (1-based, inclusive bounds):
ROW_RANGE ``r1, r2``; COL_RANGE ``c1, c2``; RECTANGLE and VISUAL_REGION
``r1, r2, c1, c2``; EXCLUSION ``{"exclude_type": ..., "exclude_params": {...}}``
(every cell *outside* the excluded region); GLOBAL ``{}`` (every cell).
"""
from __future__ import annotations

from typing import Mapping

from rosetrain.errors import RosetrainError
from rosetrain.protocol import (COL_RANGE, EXCLUSION, GLOBAL, RECTANGLE, ROW_RANGE,
                                VISUAL_REGION, Cell)

# region type -> (row bound keys, column bound keys); None: unbounded on that axis
_BOUNDS = {
    ROW_RANGE: (("r1", "r2"), None),
    COL_RANGE: (None, ("c1", "c2")),
    RECTANGLE: (("r1", "r2"), ("c1", "c2")),
    VISUAL_REGION: (("r1", "r2"), ("c1", "c2")),
}


def _param(region_params: Mapping, key: str, region_type: str) -> int:
    try:
        return int(region_params[key])
    except (KeyError, TypeError, ValueError):
        raise RosetrainError(
            f"region_params of a {region_type} region need an integer {key!r}, "
            f"got {region_params!r}") from None


def region_contains(region_type: str, region_params: Mapping, cell: Cell) -> bool:
    """True when ``cell`` (row, col) lies in the region (grid bounds not checked)."""
    if region_type == GLOBAL:
        return True
    if region_type == EXCLUSION:
        if not isinstance(region_params, Mapping) or "exclude_type" not in region_params:
            raise RosetrainError(f"EXCLUSION region_params need 'exclude_type' and "
                                 f"'exclude_params', got {region_params!r}")
        inner = region_params.get("exclude_params") or {}
        return not region_contains(region_params["exclude_type"], inner, cell)
    if region_type not in _BOUNDS:
        raise RosetrainError(f"unknown region_type {region_type!r}")
    if not isinstance(region_params, Mapping):
        raise RosetrainError(f"region_params of a {region_type} region must be an object, "
                             f"got {region_params!r}")
    row_keys, col_keys = _BOUNDS[region_type]
    row, col = cell
    if row_keys and not (_param(region_params, row_keys[0], region_type) <= row
                         <= _param(region_params, row_keys[1], region_type)):
        return False
    if col_keys and not (_param(region_params, col_keys[0], region_type) <= col
                         <= _param(region_params, col_keys[1], region_type)):
        return False
    return True


def cells_in_region(region_type: str, region_params: Mapping, rows: int, cols: int) -> set[Cell]:
    """Every grid cell (1-based) of a ``rows`` x ``cols`` grid inside the region."""
    return {(r, c) for r in range(1, rows + 1) for c in range(1, cols + 1)
            if region_contains(region_type, region_params, (r, c))}
