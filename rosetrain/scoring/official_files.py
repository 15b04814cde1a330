"""The official evaluator's outputs: the official keys of ``evaluation_summary.json``
and its other files, with the same names, columns and keys.

The paper figures come from the main tasks: bridge rows (T1B, T2B), which the
release keeps in separate metadata files the official evaluator does not read,
are left out of them (unless a run holds nothing else, as when a bridge file
is scored on its own); rosetrain reports bridges under ``bridges``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rosetrain.core.protocol import BRIDGE_TEMPLATES, MAIN_TEMPLATES
from rosetrain.scoring import official as O
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.gold import BRIDGE_SOURCE_FIELDS, Gold

Row = Mapping[str, Any]

EVALUATOR = "rosetrain (ROSE release evaluator v1 semantics)"
ERROR_CASES_FILE = "error_cases.jsonl"
METRIC_NOTES = {
    "PASS": "1 when the answer follows the formal grammar and its count, click set and "
    "submission are all exactly right, else 0.",
    "VALID": "1 when the answer follows the formal grammar, whatever its content.",
    "SOFT": "COUNT: 1/(1+|count error|); CLICK: strict click-set F1; CLICK_COUNT: mean of "
    "strict click F1, count soft and click-submit consistency.",
    "Table 1": "Item means per ROSE subset; Avg. PASS, Avg. SOFT and VALID are the mean over "
    "the subsets that have rows.",
    "Table 2": "Each template's PASS, C-F1 and R-OK are the mean per ROSE subset, then over "
    "subsets; Avg. PASS is the mean of the five template PASS values.",
}
PARTIAL_NOTE = (
    "A partial run's figures check the pipeline; they are not comparable with results on the full test split."
)


@dataclasses.dataclass
class RunInfo:
    """What the official summary says about the run besides its figures."""

    model: str | None = None
    display_name: str | None = None
    split: str | None = None
    metadata_jsonl: str | None = None
    predictions_jsonl: str | None = None
    allow_partial: bool = False
    num_prediction_rows: int | None = None
    digits: int = 1
    # what the run was computed on (rosetrain.data.hub.data_identity): the official
    # summary's dataset_repo_id for Hub data, and the summary's own "data" record
    data: dict[str, str | None] | None = None

    @property
    def table_name(self) -> str:
        return self.display_name or self.model or ""


# "sources": a bridge item's BRIDGE_SOURCE_FIELDS as a tuple (None for a main item),
# which the official bridge scripts pair it and fill its row with
EXPECTED_FIELDS = ("item_id", "rose_subset", "task_template", "sources")
Expected = dict[str, list]  # field -> one value per expected item


def expected_items(golds: Iterable[Mapping[str, Any] | Gold]) -> Expected:
    """The id, subset, template and bridge sources of each gold item (release
    record, HF row or Gold)."""
    items = [_expected(g) if isinstance(g, Gold) else _expected_record(g) for g in golds]
    return {field: [item[i] for item in items] for i, field in enumerate(EXPECTED_FIELDS)}


def _expected(gold: Gold) -> tuple:
    return gold.item_id, gold.row["rose_subset"], gold.template, gold.sources


def _expected_record(gold: Mapping[str, Any]) -> tuple:
    template = gold.get("task_template")
    sources = tuple(map(gold.get, BRIDGE_SOURCE_FIELDS)) if template in BRIDGE_TEMPLATES else None
    return gold.get("item_id"), gold.get("rose_subset"), template, sources


def _paper_items(expected: Expected) -> Expected:
    """The expected items the official figures cover: the main tasks (all if none)."""
    main = [i for i, t in enumerate(expected["task_template"]) if t not in BRIDGE_TEMPLATES]
    if not main:
        return expected
    return {field: [values[i] for i in main] for field, values in expected.items()}


def _coverage(golds: Expected, rows: Frame, info: RunInfo) -> dict[str, Any]:
    expected_ids, scored_ids = set(map(str, golds["item_id"])), set(map(str, rows.label("item_id")))
    missing, extra = sorted(expected_ids - scored_ids), sorted(scored_ids - expected_ids)
    by_subset, by_template = O.coverage(golds, rows)
    return {
        "complete_submission": not missing and not extra,
        "allow_partial": info.allow_partial,
        "num_expected": len(expected_ids),
        "num_prediction_rows": rows.n if info.num_prediction_rows is None else info.num_prediction_rows,
        "num_evaluated": rows.n,
        "num_missing": len(missing),
        "num_extra": len(extra),
        "coverage_rate": rows.n / len(expected_ids) if expected_ids else None,
        "by_subset": by_subset,
        "by_template": by_template,
        "missing_item_ids": missing,
        "extra_item_ids": extra,
    }


def official_summary(expected: Expected, every: Frame, info: RunInfo | None = None) -> dict[str, Any]:
    """The official keys of ``evaluation_summary.json`` (figures as fractions), from
    the expected items and every per-item row."""
    info = info or RunInfo()
    templates = every.label("task_template")
    # the official order of addition: rows sorted by item id
    order = [i for i in every.id_order() if templates[i] not in BRIDGE_TEMPLATES] or every.id_order()
    rows = every if len(order) == every.n and order == list(range(every.n)) else every.take(order)
    coverage = _coverage(_paper_items(expected), rows, info)
    paper = {
        "table1": O.table1(rows),
        "table2": O.table2(rows),
        "scene_conditioned_action_available_rows": O.scene_conditioned(rows),
    }
    return {
        "evaluator": EVALUATOR,
        "model": info.model,
        "display_name": info.table_name,
        "split": info.split,
        "dataset_repo_id": (info.data or {}).get("repo_id"),
        "metadata_jsonl": info.metadata_jsonl,
        "predictions_jsonl": info.predictions_jsonl,
        "coverage": coverage,
        "overall": O.overall(rows),
        "by_subset": O.grouped(rows, "rose_subset"),
        "by_template": O.grouped(rows, "task_template"),
        "by_task_mode": O.grouped(rows, "task_mode"),
        "by_region_type": O.grouped(rows, "region_type"),
        "paper_metrics": paper,
        "paper_metrics_percent": O.in_percent(paper),
        "metric_notes": {
            **METRIC_NOTES,
            "partial_warning": None if coverage["complete_submission"] else PARTIAL_NOTE,
        },
    }


def official_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV as the official files are: a BOM, CRLF lines, columns in order of first use."""
    if not rows:
        return ""
    fields = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    return "\ufeff" + buffer.getvalue()


def official_files(summary: Mapping[str, Any], info: RunInfo | None = None) -> dict[str, str]:
    """File name -> text of the official CSV and table-row files."""
    info = info or RunInfo()
    subsets = [
        {"rose_subset": s, "subset_short": s.removeprefix("ROSE-"), **summary["by_subset"].get(s, {"n": 0})}
        for s in O.ROSE_SUBSETS
    ]
    templates = [
        {"task_template": t, "task_short": O.TABLE_SHORT[t], **summary["by_template"].get(t, {"n": 0})}
        for t in MAIN_TEMPLATES
    ]
    coverage = summary["coverage"]
    covered = [{"group": "subset", **e} for e in coverage["by_subset"]] + [
        {"group": "template", **e} for e in coverage["by_template"]
    ]
    paper = summary["paper_metrics"]
    name = summary["display_name"] or ""
    return {
        "summary_by_subset.csv": official_csv(subsets),
        "summary_by_template.csv": official_csv(templates),
        "coverage_by_subset_template.csv": official_csv(covered),
        "table1_row.txt": O.table1_row(name, paper["table1"], info.digits) + "\n",
        "table2_row.txt": O.table2_row(name, paper["table2"], info.digits) + "\n",
    }
