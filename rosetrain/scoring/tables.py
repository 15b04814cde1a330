"""The summary as tables a person reads: Markdown and CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from rosetrain.core.formats import pct
from rosetrain.core.protocol import MAIN_TEMPLATES, SHORT_NAME
from rosetrain.scoring.metrics import BREAKDOWNS, DIAGNOSTICS

HEADLINE = (
    ("avg_pass", "Avg PASS"),
    ("counting_avg", "Counting Avg"),
    ("action_avg", "Action Avg"),
    ("gap", "Gap (counting - action)"),
    ("valid", "VALID"),
    ("soft", "SOFT"),
    ("c_f1", "C-F1"),
    ("r_ok", "R-OK"),
    ("coverage_rate", "Coverage"),
)
# the files the official bridge scripts write their paper-table row to
BRIDGE_TABLES = {
    "global_click": "global_click_paper_table.csv",
    "matched_count": "matched_count_paper_table.csv",
}


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(["" if c is None else c for c in row] for row in rows)
    return buffer.getvalue()


def template_rows(summary: Mapping) -> tuple[list[str], list[list]]:
    header = ["template", "short", "n", "pass", "valid", "soft"]
    rows = [
        [t, s["short"], s["n"], s["pass"], s["valid"], s["soft"]] for t, s in summary["templates"].items()
    ]
    return header, rows


def diagnostic_rows(summary: Mapping) -> tuple[list[str], list[list]]:
    header = ["template", *DIAGNOSTICS]
    rows = [[t, *(s["diagnostics"][d] for d in DIAGNOSTICS)] for t, s in summary["templates"].items()]
    return header, rows


def breakdown_rows(summary: Mapping, name: str) -> tuple[list[str], list[list]]:
    header = ["group", "n", "pass", "valid", "soft", "avg_pass", *(SHORT_NAME[t] for t in MAIN_TEMPLATES)]
    rows = []
    for group, stats in summary[name].items():
        per_template = [stats["templates"].get(t, {}).get("pass") for t in MAIN_TEMPLATES]
        rows.append(
            [
                group,
                stats["n"],
                stats["pass"],
                stats["valid"],
                stats["soft"],
                stats["avg_pass"],
                *per_template,
            ]
        )
    return header, rows


def csv_tables(summary: Mapping) -> dict[str, str]:
    """File name -> CSV text (fractions in [0, 1], empty cells where undefined)."""
    tables = {
        "templates.csv": _csv(*template_rows(summary)),
        "diagnostics.csv": _csv(*diagnostic_rows(summary)),
    }
    for name in BREAKDOWNS:
        tables[f"{name}.csv"] = _csv(*breakdown_rows(summary, name))
    return tables


def _as_pct(rows: list[list], first_numeric: int, skip: Sequence[int] = ()) -> list[list]:
    return [[c if i < first_numeric or i in skip else pct(c) for i, c in enumerate(row)] for row in rows]


def _errors_note(summary: Mapping) -> str:
    """A line naming the items whose request failed (left out of every figure)."""
    if not summary.get("n_errors"):
        return ""
    shown = "; ".join(f"`{e['item_id']}`: {e['error']}" for e in summary["error_examples"])
    return (
        f"**{summary['n_errors']} items errored** (no answer: the request failed); "
        f"they are left out of every figure below. First: {shown}\n\n"
    )


def summary_markdown(summary: Mapping) -> str:
    """summary.md: headline, templates, diagnostics and breakdowns (PASS etc. in %)."""
    parts = [
        "# Evaluation summary\n\n",
        f"{summary['n']} items scored of {summary['n_expected']} "
        f"(coverage {pct(summary['coverage_rate'])}%). Figures in %.\n\n",
        _errors_note(summary),
        _markdown_table(["figure", "value"], [[label, pct(summary.get(key))] for key, label in HEADLINE]),
    ]
    if summary.get("headline_note"):
        parts.append(f"\n**Note:** {summary['headline_note']}.\n")
    header, rows = template_rows(summary)
    parts += ["\n## Templates\n\n", _markdown_table(header, _as_pct(rows, 3))]
    parts += _analyses_markdown(summary)
    scenes = summary.get("t1_passed_scenes")
    if scenes:
        parts += [
            f"\n## PASS on the scenes whose T1 passed, pooled (rosetrain's; {scenes['n_scenes']} scenes)\n\n",
            _markdown_table(
                ["template", "n", "pass"],
                [[SHORT_NAME[t], v["n"], pct(v["pass"])] for t, v in scenes["templates"].items()],
            ),
        ]
    header, rows = diagnostic_rows(summary)
    parts += ["\n## Diagnostics (share of items)\n\n", _markdown_table(header, _as_pct(rows, 1))]
    for name in BREAKDOWNS:
        header, rows = breakdown_rows(summary, name)
        parts += [
            f"\n## {name.replace('_', ' ').capitalize()}\n\n",
            _markdown_table(header, _as_pct(rows, 2)),
        ]
    return "".join(parts)


def _analyses_markdown(summary: Mapping) -> list[str]:
    """The official analysis scripts' figures, under their names (bridge rows in %,
    as their ``*_paper_table.csv``)."""
    parts = []
    for name, paper in (summary.get("bridges") or {}).items():
        parts += [
            f"\n## Bridge: {name.replace('_', ' ')} ({BRIDGE_TABLES[name]}, %)\n\n",
            _markdown_table(
                ["figure", "value"], [[k, "-" if v is None else v] for k, v in paper.items() if k != "Model"]
            ),
        ]
    for model, macro in (summary.get("scene_consistency") or {}).items():
        parts += [
            f"\n## Same-scene consistency ({model}; scene_consistency_<split>.csv)\n\n",
            _markdown_table(["figure", "value"], [[k, pct(v)] for k, v in macro.items()]),
        ]
    return parts
