"""Reading a gold task (a release record or an HF row) once into a ``Gold``.

Scoring an item needs sets (the gold clicks, every target of the scene, the
region's cells); building them from ``"R4,C11"`` strings costs more than
scoring, so batch scoring prepares each gold once and reuses it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.memo import memo_table
from rosetrain.core.protocol import (
    BRIDGE_TEMPLATES,
    EXCLUSION,
    GLOBAL,
    SHORT_NAME,
    T1B,
    T2B,
    TASK_MODE,
    TASK_MODES,
    Cell,
    parse_cell_str,
)
from rosetrain.core.regions import region_box
from rosetrain.scoring.fields import EMPTY_ROW

if TYPE_CHECKING:
    from rosetrain.data.validate import CheckedRecord

REQUIRED_GOLD_FIELDS = (
    "item_id",
    "task_template",
    "rows",
    "cols",
    "ground_truth_count",
    "ground_truth_clicks",
    "all_target_cells",
    "region_type",
)

# every field of a gold record that a Gold reads (a reader may skip the others)
GOLD_FIELDS = (
    *REQUIRED_GOLD_FIELDS,
    "task_mode",
    "region_params",
    "region_params_json",
    "region_target_cells",
    "scene_id",
    "image_id",
    "rose_subset",
    "split",
    "primitive_type",
    "region_case",
    "cue_type",
    "difficulty",
    "ground_truth_formal_answer",
    "family",
    "heldout_family",
    "grid_size_profile",
    "source_item_id",
    "source_click_item_id",
    "bridge_type",
)
# what the official bridge scripts copy from a bridge record into its row
BRIDGE_SOURCE_FIELDS = ("source_item_id", "source_click_item_id", "bridge_type")


def normalize_region_case(value: object) -> str:
    """``"fallback_zero_wanted_partial"`` -> ``"zero"``: the case the region really has."""
    if not value:
        return "unknown"
    text = str(value)
    if text.startswith("fallback_"):
        return text.split("_")[1]
    return text


def _fail(item_id: object, field: str, problem: str) -> RosetrainError:
    return RosetrainError(f"gold item {item_id!r}: field {field!r} {problem}")


def _int_field(gold: Mapping, field: str, item_id: object) -> int:
    value: Any = gold.get(field)
    if isinstance(value, bool):
        raise _fail(item_id, field, f"must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _fail(item_id, field, f"must be an integer, got {value!r}") from None


def _cell_set(gold: Mapping, field: str, item_id: object) -> frozenset[Cell]:
    """A list of ``"R4,C11"`` strings or ``[4, 11]`` pairs (a JSON string of either too)."""
    value = gold.get(field)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):  # nested too deep: no JSON we read
            raise _fail(item_id, field, "is a string but not a JSON list") from None
    if value is None:
        raise _fail(item_id, field, "is missing")
    cells = set()
    try:
        for cell in value:
            if isinstance(cell, str):
                cells.add(parse_cell_str(cell))
            else:
                row, col = cell
                cells.add((int(row), int(col)))
    except (TypeError, ValueError):
        raise _fail(item_id, field, f"must list cells like 'R4,C11', got {value!r:.200}") from None
    return frozenset(cells)


def _region_params(gold: Mapping, item_id: object) -> dict:
    value = gold.get("region_params")
    if value is None and "region_params_json" in gold:
        value = gold["region_params_json"]
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except (ValueError, RecursionError):  # nested too deep: no JSON we read
            raise _fail(item_id, "region_params_json", "is not valid JSON") from None
    if value is None:
        value = {}
    if not isinstance(value, (dict, Mapping)):  # dict first: the abc check is slow
        raise _fail(item_id, "region_params", f"must be an object, got {value!r:.200}")
    return dict(value)


def _paired_item_id(gold: Mapping, template: str, item_id: object) -> str | int | None:
    """The main item a bridge row controls: T3 for T2B, T1 for T1B."""
    if template == T2B:
        field = "source_click_item_id" if gold.get("source_click_item_id") else "source_item_id"
    elif template == T1B:
        field = "source_item_id"
    else:
        return None
    return _group_key(gold, field, item_id)


def _group_key(gold: Mapping, field: str, item_id: object) -> str | int | None:
    """A field the summary groups rows by (scene, subset, bridge pair): a string,
    an integer or None. A list or an object cannot key a group, and a NaN
    equals nothing, itself included (each row would be a group of its own)."""
    value = gold.get(field)
    if value is None or type(value) is int:
        return value
    if isinstance(value, str):
        return _text(value, field, item_id)
    raise _fail(item_id, field, f"must be a string, got {value!r:.100}")


def _text(value: str, field: str, item_id: object) -> str:
    """``value``, which the summary shows; evaluation_summary.json is UTF-8,
    which cannot hold a lone surrogate (``"\\ud800"`` in JSON)."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail(item_id, field, "holds a lone surrogate, which UTF-8 text cannot hold") from None
    return value


# a label's text -> the one string object of that text (see ``shared``); bounded,
# as a training run's rewards make golds of an unlimited stream's new scenes
_SHARED: dict[str, str] = memo_table()
_SHARED_MAX = 100_000


def shared(value: Any) -> Any:
    """``value``, as the one object of its text when it is a string. Rows that
    share a subset, a mode or a scene then hold the same string: the summary's
    columns of a chunk of rows pickle each text once on their way from a worker
    (a sixth of the bytes and of the time at 51,000 items), and grouping by them
    compares objects that are one, not one in memory per row."""
    if type(value) is not str:
        return value
    known = _SHARED.get(value)
    if known is None:
        if len(_SHARED) >= _SHARED_MAX:
            return value
        known = _SHARED[value] = value
    return known


class Gold:
    """Everything score_item needs about one task, with its sets built once."""

    __slots__ = (
        "item_id",
        "template",
        "mode",
        "rows",
        "cols",
        "gold_count",
        "gold_clicks",
        "all_targets",
        "region_targets",
        "region_type",
        "region",
        "out_region_targets",
        "is_local",
        "is_exclusion",
        "global_count",
        "row",
        "sources",
    )

    def __init__(self, gold: Mapping[str, Any], checked: CheckedRecord | None = None):
        """``checked``: what checking the record in its file parsed (see
        ``rosetrain.data.validate``), used instead of parsing the record again."""
        if not isinstance(gold, (dict, Mapping)):  # dict first: the abc check is slow
            raise RosetrainError(f"a gold item must be an object, got {type(gold).__name__}")
        item_id = gold.get("item_id")
        if checked is None:
            for field in REQUIRED_GOLD_FIELDS:
                if gold.get(field) is None:
                    raise _fail(item_id, field, "is missing")
        template = shared(str(gold["task_template"]))
        mode = shared(gold.get("task_mode") or TASK_MODE.get(template))
        if mode not in TASK_MODES:
            raise _fail(item_id, "task_mode", f"must be one of {TASK_MODES}, got {mode!r}")
        self.item_id = _text(str(item_id), "item_id", item_id)
        self.mode = mode
        self.region_type = shared(str(gold["region_type"]))
        if checked is None:
            gold_labels, all_labels, region_labels = self._parse(gold, item_id)
        else:
            self.rows, self.cols, self.gold_count = checked.rows, checked.cols, checked.count
            self.gold_clicks, self.all_targets = checked.clicks, checked.targets
            self.region = checked.region
            # the check proved the region's targets (listed or not) are the gold clicks
            self.region_targets = checked.clicks
            gold_labels = region_labels = labels_of(checked.clicks)
            all_labels = labels_of(checked.targets)
        self.out_region_targets, out_labels = _outside(self.all_targets, self.region_targets)
        self.is_local = self.region_type != GLOBAL
        self.is_exclusion = self.region_type == EXCLUSION
        self.global_count = len(self.all_targets)
        self.template = template
        # a bridge row's pairing fields (BRIDGE_SOURCE_FIELDS), kept apart from the per-item row
        self.sources = tuple(map(gold.get, BRIDGE_SOURCE_FIELDS)) if template in BRIDGE_TEMPLATES else None
        # the item's own fields of its per-item row (score_parsed copies the
        # row and fills in the answer's fields)
        row = self.row = EMPTY_ROW.copy()
        row["item_id"] = self.item_id
        row["scene_id"] = shared(_group_key(gold, "scene_id", item_id))
        row["image_id"] = gold.get("image_id")
        row["rose_subset"] = shared(_group_key(gold, "rose_subset", item_id))
        row["rose_split"] = shared(gold.get("split"))
        row["primitive_type"] = gold.get("primitive_type")
        row["task_template"] = template
        row["task_mode"] = mode
        row["region_type"] = self.region_type
        row["region_case"] = gold.get("region_case")
        row["cue_type"] = gold.get("cue_type")
        row["difficulty"] = gold.get("difficulty")
        row["rows"] = self.rows
        row["cols"] = self.cols
        row["region_cell_count"] = self.region.size(self.rows, self.cols)
        row["gt_count"] = self.gold_count
        row["gt_clicks"] = gold_labels
        row["all_target_cells"] = all_labels
        row["region_target_cells"] = region_labels
        row["out_region_target_cells"] = out_labels
        row["ground_truth_formal_answer"] = gold.get("ground_truth_formal_answer")
        self._extra_fields(gold, row)

    def _parse(self, gold: Mapping[str, Any], item_id: object) -> tuple[list[str], list[str], list[str]]:
        """Sizes, cell sets and region of a record nothing has checked; returns the
        sorted labels of the gold clicks, all targets and the region's targets."""
        self.rows = _int_field(gold, "rows", item_id)
        self.cols = _int_field(gold, "cols", item_id)
        if self.rows < 1 or self.cols < 1:
            raise _fail(item_id, "rows", f"and 'cols' must be positive, got {self.rows}x{self.cols}")
        self.gold_count = _int_field(gold, "ground_truth_count", item_id)
        self.gold_clicks, gold_labels = _labeled_cells(gold, "ground_truth_clicks", item_id)
        self.all_targets, all_labels = _labeled_cells(gold, "all_target_cells", item_id)
        params = _region_params(gold, item_id)
        try:
            self.region = region_box(self.region_type, params)
        except RosetrainError as err:
            raise RosetrainError(f"gold item {item_id!r}: {err}") from None
        # As the official evaluator: the region's targets are the listed ones (the
        # gold clicks when unlisted), and the targets outside it all the others.
        self.region_targets, region_labels = (
            _labeled_cells(gold, "region_target_cells", item_id)
            if gold.get("region_target_cells")
            else (self.gold_clicks, gold_labels)
        )
        return gold_labels, all_labels, region_labels

    def _extra_fields(self, gold: Mapping[str, Any], row: dict[str, Any]) -> None:
        """rosetrain's own descriptive fields (names the official rows do not use)."""
        heldout = gold.get("heldout_family")
        row["template_short"] = SHORT_NAME.get(self.template, self.template)
        row["bridge"] = self.template in BRIDGE_TEMPLATES
        row["paired_item_id"] = shared(_paired_item_id(gold, self.template, self.item_id))
        row["family"] = gold.get("family")
        row["heldout_family"] = None if heldout is None else bool(heldout)
        row["region_case_group"] = shared(
            _text(normalize_region_case(gold.get("region_case")), "region_case", self.item_id)
        )
        row["grid_size_profile"] = shared(
            _text(str(gold.get("grid_size_profile") or "unknown"), "grid_size_profile", self.item_id)
        )
        row["target_count"] = self.global_count


CELL_LABELS: dict = memo_table()  # cell -> "R4,C11": a split spells the same few hundred cells


def cell_label(cell) -> str:
    label = CELL_LABELS.get(cell)
    if label is None:
        label = f"R{cell[0]},C{cell[1]}"
        if len(CELL_LABELS) < 1_000_000:
            CELL_LABELS[cell] = label
    return label


def sorted_labels(cells) -> list[str]:
    """``"R4,C11"`` labels sorted as strings (the official rows' order)."""
    return sorted([CELL_LABELS.get(cell) or cell_label(cell) for cell in cells])


# A split repeats the same cell lists (a scene's targets in each of its tasks):
# each distinct list is parsed and labelled once. The label lists are shared by
# the rows that show them, as the rows of one Gold always shared them.
_LABELED: dict[Any, tuple[frozenset[Cell], list[str]]] = memo_table()
_LABELED_MAX = 200_000


def _labeled_cells(gold: Mapping, field: str, item_id: object) -> tuple[frozenset[Cell], list[str]]:
    """The cells of a cell-list field and their sorted labels."""
    value = gold.get(field)
    try:
        key = tuple(value) if type(value) is list else None
        known = _LABELED.get(key) if key is not None else None
    except TypeError:  # [4, 11] pairs: a list is not hashable
        key = known = None
    if known is None:
        cells = _cell_set(gold, field, item_id)
        known = (cells, sorted_labels(cells))
        if key is not None and len(_LABELED) < _LABELED_MAX:
            _LABELED[key] = known
    return known


_LABELS: dict[frozenset[Cell], list[str]] = memo_table()  # a frozenset keeps its hash: a cheap key


def labels_of(cells: frozenset[Cell]) -> list[str]:
    """The sorted labels of a cell set, shared by the rows that show them."""
    labels = _LABELS.get(cells)
    if labels is None:
        labels = sorted_labels(cells)
        if len(_LABELS) < _LABELED_MAX:
            _LABELS[cells] = labels
    return labels


def _outside(targets: frozenset[Cell], region: frozenset[Cell]) -> tuple[frozenset[Cell], list[str]]:
    """The targets outside the region, and their sorted labels (frozensets keep
    their hash: the pair is a cheap key)."""
    key = (targets, region)
    known = _LABELED.get(key)
    if known is None:
        cells = targets - region
        known = (cells, sorted_labels(cells))
        if len(_LABELED) < _LABELED_MAX:
            _LABELED[key] = known
    return known


def prepare_gold(gold: Mapping[str, Any] | Gold) -> Gold:
    """A ``Gold`` from a release record or an HF row (a ``Gold`` passes through)."""
    return gold if isinstance(gold, Gold) else Gold(gold)
