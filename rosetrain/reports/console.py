"""The terminal summary of a scored run."""

from __future__ import annotations

from rosetrain.core.formats import pct
from rosetrain.core.protocol import SHORT_NAME


def print_summary(summary: dict, out: str) -> None:
    """The per-template PASS/VALID/SOFT table and the gap (what ``rosetrain score`` and ``rosetrain eval`` print)."""

    print(f"scored {summary['n']} items (coverage {pct(summary['coverage_rate'])}%) -> {out}")
    if summary.get("n_errors"):
        first = summary["error_examples"][0]
        print(
            f"  ERRORS: {summary['n_errors']} items have no answer (the request failed) and "
            f"are left out of every figure below; first: {first['item_id']}: {first['error']}"
        )
    for template, stats in summary["templates"].items():
        print(
            f"  {SHORT_NAME.get(template, template):8s} n={stats['n']:<6d} "
            f"PASS {pct(stats['pass']):>5s}  VALID {pct(stats['valid']):>5s}  "
            f"SOFT {pct(stats['soft']):>5s}"
        )
    print(
        f"  Avg {pct(summary['avg_pass'])}  Counting {pct(summary['counting_avg'])}  "
        f"Action {pct(summary['action_avg'])}  Gap {pct(summary['gap'])}"
    )
    if summary.get("headline_note"):
        print(f"  note: {summary['headline_note']}")
    for name, paper in (summary.get("bridges") or {}).items():
        shown = "  ".join(f"{k} {'-' if v is None else v}" for k, v in paper.items() if k != "Model")
        print(f"  {name} bridge (official paper table, %): {shown}")
