"""``rosetrain curriculum --from RUN --spec SPEC --out NEW.yaml``: the next
round's generator spec, weighted by the failures a scored run measured.

RUN is a folder holding per_item_eval.jsonl (from `rosetrain eval` or
`rosetrain score`: rosetrain's own splits or the real ROSE release); SPEC the
generator spec to reweight. Writes NEW.yaml (it loads like any spec: train
on it with data.spec=NEW.yaml) and a report (NEW-report/report.md and
curriculum.png): the measured cells, their 95% intervals, the weights chosen,
and what the spec cannot teach.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rosetrain.commands import number, path

if TYPE_CHECKING:
    from rosetrain.curriculum.build import Axis


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="run",
        type=path("folder"),
        required=True,
        help="scored run (holds per_item_eval.jsonl)",
    )
    parser.add_argument(
        "--spec",
        type=path("config"),
        required=True,
        help="generator spec to reweight: a YAML file or a shipped spec's name (e.g. demo/rl)",
    )
    parser.add_argument("--out", type=path("out-file"), required=True, help="the new spec to write (YAML)")
    parser.add_argument(
        "--mode",
        choices=("failures", "balanced"),
        default="failures",
        help="failures: weight rises with the smoothed failure rate; balanced: only cells the "
        "model passes sometimes (smoothed PASS in --band) rise, the rest stay at the floor",
    )
    parser.add_argument(
        "--prior",
        type=number(0, 1e6, low_open=True),
        default=1.0,
        help="Beta(prior, prior) smoothing (1: add-one)",
    )
    parser.add_argument(
        "--floor", type=number(0, 1), default=0.5, help="least share, x the uniform share (0.5)"
    )
    parser.add_argument(
        "--cap", type=number(1, 1e6), default=3.0, help="largest share, x the uniform share (3)"
    )
    parser.add_argument(
        "--band",
        type=number(0, 1),
        nargs=2,
        default=(0.1, 0.9),
        metavar=("LOW", "HIGH"),
        help="balanced mode's PASS band",
    )
    parser.add_argument(
        "--axes",
        default=None,
        help="comma list of the axes to weight (default all: template, region_case, family, "
        "profile, target_count; an empty list is refused); the others keep the source spec's shares",
    )
    parser.add_argument(
        "--report",
        type=path("out-folder"),
        default=None,
        help="report folder (default: NEW-report beside NEW.yaml)",
    )


def share_text(axis: Axis, value: Any) -> str:
    """A value's chosen share, and what the written spec realises where that differs
    (templates drawn without replacement cannot exceed 1 / tasks_per_scene)."""
    from rosetrain.core.formats import pct

    chosen = pct(axis.shares[value])
    if axis.realised is None or pct(axis.realised.get(value, 0.0)) == chosen:
        return chosen
    return f"{chosen} (realised {pct(axis.realised.get(value, 0.0))})"


def run(args: argparse.Namespace) -> int:
    from rosetrain.curriculum import default_report_dir, make_curriculum
    from rosetrain.curriculum.build import untaught_summary
    from rosetrain.curriculum.cells import AXES
    from rosetrain.curriculum.report import label
    from rosetrain.curriculum.weights import Rule

    rule = Rule(
        mode=args.mode,
        prior=args.prior,
        floor=args.floor,
        cap=args.cap,
        band=tuple(args.band),
        axes=None if args.axes is None else tuple(a.strip() for a in args.axes.split(",") if a.strip()),
    )
    from rosetrain.core.resources import find as find_config

    spec = find_config("spec", args.spec)  # a path, or a shipped spec's name (demo/rl)
    plan = make_curriculum(args.run, spec, args.out, rule, args.report)
    report = args.report or default_report_dir(args.out)
    print(f"curriculum spec -> {args.out} ({len(plan.run.items)} items of {args.run}); report -> {report}")
    for name in AXES:
        axis = plan.axes[name]
        if not axis.expressible or not axis.shares:
            print(f"  {name}: not weighted ({axis.note})" if axis.note else f"  {name}: not weighted")
            continue
        shares = ", ".join(f"{label(name, v)} {share_text(axis, v)}" for v in axis.shares)
        print(f"  {name}: {shares}")
    for note in plan.notes:
        print(f"  note: {note}")
    for entry in untaught_summary(plan):
        print(f"  cannot teach: {entry['what']} ({entry['n']} items, {entry['fails']} failed)")
    return 0
