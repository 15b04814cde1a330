"""From a model's measured errors to its next training data.

``make_curriculum`` reads a scored run (``eval`` or ``score``), weights a
generator spec's axes by the failures it measured (``weights.py``: smoothed,
floored, capped; or balanced) and writes the new spec, checked by the same
loader as hand-written specs, with a report of the cells and the weights.
``signal.py`` is the pre-RL check: would GRPO's groups have any signal?

The layer sits between ``reports`` and ``demo``: it reads per-item results as
``reports.compare`` does, and the demo may call it.
"""

from __future__ import annotations

import os
from pathlib import Path

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import MARKER_NAME, atomic_write, claim_outputs, output_lock
from rosetrain.curriculum.build import Plan, check_out_path, plan_curriculum, spec_yaml
from rosetrain.curriculum.cells import read_run
from rosetrain.curriculum.report import PLOT, plot_png, report_markdown
from rosetrain.curriculum.weights import Rule
from rosetrain.generators.spec import load_spec

REPORT_FILE = "report.md"


def default_report_dir(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.with_name(f"{out.stem}-report")


def check_apart(out: Path, report: Path) -> None:
    """Refuse an ``out`` that is a file this command writes into the report folder
    (or the folder itself): the spec would replace the report just written."""
    report_path = os.path.realpath(report)
    ours = {report_path, *(os.path.join(report_path, name) for name in (PLOT, REPORT_FILE, MARKER_NAME))}
    if os.path.realpath(out) in ours:
        raise RosetrainError(
            f"out {out}: is the report folder {report} or a file written into it; "
            "give the spec another path, or the report another folder",
            argument="out",
        )


def make_curriculum(
    run: str | os.PathLike,
    spec: str | os.PathLike,
    out: str | os.PathLike,
    rule: Rule | None = None,
    report_dir: str | os.PathLike | None = None,
) -> Plan:
    """Write the curriculum spec ``out`` and its report (``report_dir``, by default
    ``<out's stem>-report/`` beside it); return the plan."""
    out = Path(out)
    check_out_path(out)
    report = Path(report_dir) if report_dir is not None else default_report_dir(out)
    check_apart(out, report)
    plan = plan_curriculum(read_run(run), load_spec(Path(spec)), rule or Rule(), out)
    with output_lock(report, "this curriculum report") as folder:
        claim_outputs(folder / PLOT, folder / REPORT_FILE)
        atomic_write(folder / PLOT, plot_png(plan))
        image = os.path.relpath(folder / PLOT, folder)
        atomic_write(folder / REPORT_FILE, report_markdown(plan, str(out), image))
    atomic_write(out, spec_yaml(plan))
    load_spec(out)  # what was written reads back through the loader
    return plan
