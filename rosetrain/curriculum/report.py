"""The curriculum's report: the measured cells, their 95% Wilson intervals and
the weights chosen, as Markdown and one plot, so a person can check and edit
the decision before training on it."""

from __future__ import annotations

import io
import statistics
from typing import Any

from rosetrain.core.formats import pct
from rosetrain.core.protocol import SHORT_NAME
from rosetrain.curriculum.build import Axis, Plan, untaught_summary
from rosetrain.curriculum.cells import AXES, Cell
from rosetrain.curriculum.weights import smoothed_failure

PLOT = "curriculum.png"
SMALL_CELL = 5  # joint cells under this many items: the reason the axes are weighted apart


def wilson(cell: Cell) -> tuple[float, float] | None:
    """95% Wilson interval of the pass rate (scipy's); None for an empty cell."""
    if cell.n == 0:
        return None
    from scipy.stats import binomtest

    interval = binomtest(cell.n - cell.fails, cell.n).proportion_ci(0.95, method="wilson")
    return float(interval.low), float(interval.high)


def label(axis: str, value: Any) -> str:
    if axis == "template":
        return SHORT_NAME.get(value, str(value))
    if axis == "target_count":
        return "0 (negative)" if value == 0 else str(value)
    return str(value)


def axis_rows(plan: Plan, axis: Axis) -> list[str]:
    rows = [
        f"### {axis.name}",
        "",
    ]
    if axis.note:
        rows += [f"Not weighted: {axis.note}.", ""]
    if not axis.cells:
        return rows
    realised = axis.realised is not None
    head = "| value | items | failed | PASS % [95% CI] | smoothed failure | source share | chosen share |"
    rows += [head + (" realised share |" if realised else ""), "|---" * (7 + realised) + "|"]
    for value, cell in axis.cells.items():
        interval = wilson(cell)
        ci = "-" if interval is None else f"{pct(cell.pass_rate)} [{pct(interval[0])}, {pct(interval[1])}]"
        failure = (
            f"{smoothed_failure(cell.n, cell.fails, plan.rule.prior):.3f}"
            if cell.n
            else "- (not measured: the source share, at most a failed cell's)"
        )
        line = (
            f"| {label(axis.name, value)} | {cell.n} | {cell.fails} | {ci} | {failure} | "
            f"{pct(axis.source_shares.get(value, 0.0))} | {pct(axis.shares[value])} |"
        )
        if axis.realised is not None:
            line += f" {pct(axis.realised.get(value, 0.0))} |"
        rows.append(line)
    rows.append("")
    return rows


def report_markdown(plan: Plan, spec_file: str, image: str | None) -> str:
    rule = plan.rule
    joint_sizes = [c.n for c in plan.joint.values()]
    lines = [
        "# Curriculum from measured errors",
        "",
        f"Scored run: `{plan.run.path}` ({len(plan.run.items)} items"
        + (f", {plan.run.errored} errored items left out" if plan.run.errored else "")
        + f"). Source spec: `{plan.spec.path}`. Written spec: `{spec_file}`.",
        "",
        f"Rule: mode **{rule.mode}**; a cell's raw weight is its smoothed failure rate "
        f"(fails + {rule.prior:g}) / (items + {2 * rule.prior:g})"
        + (
            f", counted only where its smoothed PASS rate lies in [{rule.band[0]:g}, {rule.band[1]:g}]"
            if rule.mode == "balanced"
            else ""
        )
        + f"; shares are then held between {rule.floor:g}x and {rule.cap:g}x the uniform share "
        "of the axis. A value the run did not measure keeps the source spec's share, never more "
        "than a measured value that failed. Each axis is weighted on its own: the joint cells "
        f"({len(joint_sizes)} of them, median {statistics.median(joint_sizes):g} items, "
        f"{sum(n < SMALL_CELL for n in joint_sizes)} with fewer than {SMALL_CELL}) are too small to weight by.",
        "",
    ]
    lines += [f"Note: {note}." for note in plan.notes] + ([""] if plan.notes else [])
    if image:
        lines += [f"![cells and weights]({image})", ""]
    for name in AXES:
        lines += axis_rows(plan, plan.axes[name])
    untaught = untaught_summary(plan)
    lines += ["## What this spec cannot teach", ""]
    if untaught:
        lines += ["| axis | what | items | failed |", "|---|---|---|---|"]
        lines += [f"| {u['axis']} | {u['what']} | {u['n']} | {u['fails']} |" for u in untaught]
    else:
        lines.append("Nothing: every measured cell is an axis value of the spec.")
    lines.append("")
    return "\n".join(lines)


def plot_png(plan: Plan) -> bytes:
    """One figure, a panel per weighted axis: PASS rate with its interval (points)
    and the chosen share against the source's (bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [plan.axes[a] for a in AXES if plan.axes[a].cells]
    fig, panels = plt.subplots(1, len(shown), figsize=(3.2 * len(shown) + 1, 3.6), squeeze=False)
    for ax, axis in zip(panels[0], shown):
        values = list(axis.cells)
        xs = list(range(len(values)))
        ax.bar(
            [x - 0.2 for x in xs],
            [axis.source_shares.get(v, 0.0) for v in values],
            0.4,
            color="#c8c8c8",
            label="source share",
        )
        ax.bar(
            [x + 0.2 for x in xs],
            [axis.shares[v] for v in values],
            0.4,
            color="#4c72b0",
            label="chosen share",
        )
        for x, value in zip(xs, values):
            cell = axis.cells[value]
            interval = wilson(cell)
            if interval is not None and cell.pass_rate is not None:
                ax.errorbar(
                    x,
                    cell.pass_rate,
                    yerr=[[cell.pass_rate - interval[0]], [interval[1] - cell.pass_rate]],
                    fmt="o",
                    color="#c44e52",
                    capsize=3,
                )
        ax.set_xticks(xs, [label(axis.name, v) for v in values], rotation=45, ha="right", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(axis.name + ("" if axis.expressible else " (not weighted)"), fontsize=9)
    panels[0][0].set_ylabel("share (bars) / PASS rate, 95% CI (points)", fontsize=8)
    panels[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
