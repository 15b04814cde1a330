"""Checks on one gold record of a metadata file, before anything scores or reads it.

A gold record is trusted by every number rosetrain reports, so a record that
contradicts itself (a click outside the grid, a count that disagrees with the
targets in its region, a template the scorer does not know) is an error naming
the file, the line and the field, never a silent score. Its image paths must
stay inside the folder of the metadata file. Standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rosetrain.core import protocol as P
from rosetrain.core.errors import RosetrainError
from rosetrain.core.memo import memo_table
from rosetrain.core.regions import Box, region_box
from rosetrain.data.paths import check_confined

IMAGE_FIELDS = ("image", "base_image")


# not a NamedTuple, whose ``count`` would shadow tuple.count; not frozen, which
# would make building one per gold record four times slower
@dataclasses.dataclass(slots=True)
class CheckedRecord:
    """What checking a record parsed, so that the scorer need not parse it again.
    The region's targets are the gold clicks: the check proved them equal."""

    rows: int
    cols: int
    count: int
    clicks: frozenset[P.Cell]
    targets: frozenset[P.Cell]
    region: Box


def check_record(
    record: Mapping[str, Any],
    path: Path,
    number: int,
    images_checked: set[str] | None = None,
    training: bool = False,
) -> CheckedRecord:
    """Raise naming ``path:number`` and the field when the gold record is
    inconsistent; else return what the checks parsed.

    ``images_checked``: image paths of the same file already found inside its
    folder (the tasks of one scene share an image), added to as checked.
    ``training``: the record may also be of a training-only template (V-Cnt, Excl-Cnt),
    which a training split holds and no release does."""
    where = f"{path}:{number}"
    template = record.get("task_template")
    if template not in P.TEMPLATES and not (training and template in P.TRAINING_TEMPLATES):
        raise RosetrainError(f"{where}: task_template: {_unknown_template(template)}")
    mode = record.get("task_mode")
    if mode is not None and mode != P.TASK_MODE[template]:  # the scorer would grade it in that mode
        raise RosetrainError(
            f"{where}: task_mode: {mode!r:.100} contradicts task_template {template} "
            f"(a {P.TASK_MODE[template]} task)"
        )
    rows, cols = (_whole(record, field, where, minimum=1) for field in ("rows", "cols"))
    count = _whole(record, "ground_truth_count", where, minimum=0)
    clicks = _cells(record, "ground_truth_clicks", where, rows, cols)
    targets = _cells(record, "all_target_cells", where, rows, cols)
    if count != len(clicks):
        raise RosetrainError(
            f"{where}: ground_truth_count: {count} disagrees with the "
            f"{len(clicks)} cell(s) of ground_truth_clicks"
        )
    region = _check_region(record, where, rows, cols, clicks, targets)
    for field in IMAGE_FIELDS:
        image = record.get(field)
        # a path not yet checked (a list or an object is no path: check_confined says so)
        if image is not None and (
            images_checked is None or type(image) is not str or image not in images_checked
        ):
            check_confined(str(path.parent), image, f"{where}: {field}")
            if images_checked is not None:
                images_checked.add(image)
    return CheckedRecord(rows, cols, count, clicks, targets, region)


def _unknown_template(template: object) -> str:
    if template in P.TRAINING_TEMPLATES:  # a training split's row, met where ROSE items are scored
        return (
            f"{template} ({P.SHORT_NAME[template]}) is a training-only template, which no ROSE "
            "release holds: eval and score grade the ROSE templates; rosetrain signal "
            "and preview read it"
        )
    return f"unknown template {template!r:.100}; known: {', '.join(P.TEMPLATES)}"


def _whole(record: Mapping[str, Any], field: str, where: str, minimum: int) -> int:
    value = record.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RosetrainError(f"{where}: {field}: expected an integer >= {minimum}, got {value!r:.100}")
    return value


# cell list -> (its cells, no cell twice, lowest and highest row, lowest and
# highest column): a split repeats the same lists (a scene's targets) in every
# task of the scene, so each is parsed once
_PARSED: dict[tuple, tuple[frozenset[P.Cell], bool, int, int, int, int]] = memo_table()
_PARSED_MAX = 200_000


def _cells(record: Mapping[str, Any], field: str, where: str, rows: int, cols: int) -> frozenset[P.Cell]:
    """A list of distinct ``"R4,C11"`` cells (or ``[4, 11]`` pairs) inside the grid."""
    value = record.get(field)
    key = None
    if type(value) is list:
        try:
            key = tuple(value)
            known = _PARSED.get(key)
        except TypeError:  # [4, 11] pairs: a list is not hashable
            key = known = None
        if known is not None:
            cells, distinct, low_row, high_row, low_col, high_col = known
            if distinct and low_row >= 1 and low_col >= 1 and high_row <= rows and high_col <= cols:
                return cells
    parsed = _parse_cells(value, field, where)
    if key is not None and len(_PARSED) < _PARSED_MAX:
        row_numbers, col_numbers = [r for r, _ in parsed] or [1], [c for _, c in parsed] or [1]
        _PARSED[key] = (
            frozenset(parsed),
            len(set(parsed)) == len(parsed),
            min(row_numbers),
            max(row_numbers),
            min(col_numbers),
            max(col_numbers),
        )
    for cell in parsed:
        if not (1 <= cell[0] <= rows and 1 <= cell[1] <= cols):
            raise RosetrainError(f"{where}: {field}: {P.cell_str(cell)} lies outside the {rows}x{cols} grid")
    if len(set(parsed)) != len(parsed):
        raise RosetrainError(f"{where}: {field}: lists a cell twice")
    return frozenset(parsed)


def _parse_cells(value: object, field: str, where: str) -> list[P.Cell]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # nested too deep: no JSON we read
            raise RosetrainError(f"{where}: {field}: a string that is not a JSON list") from None
    if not isinstance(value, list):
        raise RosetrainError(f"{where}: {field}: expected a list of cells like 'R4,C11', got {value!r:.100}")
    return [_cell(item, field, where) for item in value]


def _cell(item: object, field: str, where: str) -> P.Cell:
    try:
        if isinstance(item, str):
            return P.parse_cell_str(item)
        if isinstance(item, Iterable):  # a [4, 11] pair
            row, col = item
            if (
                isinstance(row, int)
                and isinstance(col, int)
                and not isinstance(row, bool)
                and not isinstance(col, bool)
            ):
                return row, col
    except (TypeError, ValueError):
        pass
    raise RosetrainError(f"{where}: {field}: {item!r:.50} is not a cell like 'R4,C11'")


def _check_region(
    record: Mapping[str, Any],
    where: str,
    rows: int,
    cols: int,
    clicks: frozenset[P.Cell],
    targets: frozenset[P.Cell],
) -> Box:
    """The gold clicks are exactly the scene's targets inside the task's region
    (returned)."""
    params = record.get("region_params")
    if params is None:
        params = record.get("region_params_json") or {}
    if isinstance(params, str):
        try:
            params = json.loads(params) if params.strip() else {}
        except (ValueError, RecursionError):  # nested too deep: no JSON we read
            raise RosetrainError(f"{where}: region_params_json: not valid JSON") from None
    if not isinstance(params, (dict, Mapping)):  # dict first: the abc check is slow
        raise RosetrainError(f"{where}: region_params: expected an object, got {params!r:.100}")
    try:
        region = region_box(str(record.get("region_type")), params)
    except RosetrainError as err:
        raise RosetrainError(f"{where}: region_type/region_params: {err}") from None
    expected = region.holds(targets)
    if clicks != expected:
        wrong = sorted(clicks ^ expected)[0]
        raise RosetrainError(
            f"{where}: ground_truth_clicks: {len(clicks)} cell(s), but the region "
            f"holds {len(expected)} of all_target_cells (they differ at "
            f"{P.cell_str(wrong)})"
        )
    if (
        "region_target_cells" in record
        and _cells(record, "region_target_cells", where, rows, cols) != expected
    ):
        raise RosetrainError(f"{where}: region_target_cells: disagrees with the targets in the region")
    return region
