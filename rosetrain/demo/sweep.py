"""The demo over several seeds: one run per seed in ``OUT/seed-<n>/`` (each a
full, resumable demo), then ``OUT/sweep.json`` and ``OUT/sweep.md``: every
seed's figures, how many seeds met every target, and the spread.

One demo run is one draw: which seed (or which CPU, since another CPU rounds
differently) decides how training goes. The sweep is the measurement.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.formats import ci, pct
from rosetrain.core.io import atomic_write

# A demo trains with seed + 1 and seed + 2, which numpy's seeding must take. Each seed
# of a sweep is a full demo: past this many, a typo (0-99999) is more likely than a plan,
# and the list of a huge range alone never finished building.
MAX_SEED = 2**32 - 3
MAX_SWEEP = 1000


def parse_seeds(text: str) -> list[int]:
    """``0-4`` or ``0,2,7`` or ``1-3,9``: distinct seeds, in the order given."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            span = range(int(low), int(high or low) + 1)
            if not span or span[-1] > MAX_SEED:
                raise ValueError(part)
            if len(seeds) + len(span) > MAX_SWEEP:  # checked before the list is built
                raise RosetrainError(f"seeds: {text!r} is more than {MAX_SWEEP} seeds", argument="seeds")
            seeds += [s for s in span if s not in seeds]
    except ValueError:
        raise RosetrainError(
            f"seeds: expected e.g. 0-4 or 0,2,7 (seeds 0 to {MAX_SEED}), got {text!r}", argument="seeds"
        ) from None
    return seeds


def seed_folder(out: Path, seed: int) -> Path:
    return Path(out) / f"seed-{seed}"


def _run_one(config) -> dict[str, Any]:
    from rosetrain.demo.pipeline import run_demo

    return run_demo(config)


def run_sweep(template, seeds: list[int], jobs: int = 1) -> dict[str, Any]:
    """``template`` is a DemoConfig whose ``out`` is the sweep's folder."""
    configs = [
        dataclasses.replace(template, seed=seed, out=seed_folder(template.out, seed)) for seed in seeds
    ]
    if jobs <= 1:
        summaries = [_run_one(c) for c in configs]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: each run gets a fresh interpreter (torch threads, no forked locks)
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            summaries = list(pool.map(_run_one, configs))
    sweep = summarize_sweep(summaries)
    atomic_write(Path(template.out) / "sweep.json", json.dumps(sweep, indent=2))
    atomic_write(Path(template.out) / "sweep.md", sweep_report(sweep))
    return sweep


def seed_row(summary: dict[str, Any]) -> dict[str, Any]:
    from rosetrain.demo.report import majority_action_avg

    stages = summary["stages"]
    final = stages[summary["final_stage"]]
    family = summary["heldout_family"][summary["final_stage"]]
    grpo = summary.get("compare_sft_grpo")
    return {
        "seed": summary["seed"],
        "base_gap": stages["base"]["gap"],
        "sft_action": stages["sft"]["action_avg"],
        "final_action": final["action_avg"],
        "final_counting": final["counting_avg"],
        "final_gap": final["gap"],
        "gap_ratio": summary["targets"]["gap_ratio"]["value"],
        "majority_action": majority_action_avg(summary["majority_baseline"]["heldout"]),
        "min_template_margin": summary["targets"]["templates_over_majority"]["value"],
        "ood_action": family["action_avg"],
        "ood_counting": family["counting_avg"],
        "ood_majority_action": majority_action_avg(summary["majority_baseline"]["heldout-family"]),
        "transfer": {split: transfer_row(summary, split) for split in summary.get("transfer_targets", {})},
        "grpo_vs_sft": None
        if not grpo
        else {"delta": grpo["avg_pass"]["delta"], "ci95": grpo["avg_pass"].get("ci95")},
        "targets_met": sum(t["met"] for t in summary["targets"].values()),
        "targets": len(summary["targets"]),
        "all_met": all(t["met"] for t in summary["targets"].values()),
        "minutes": round(summary["seconds"] / 60, 1),
    }


def transfer_row(summary: dict[str, Any], split: str) -> dict[str, Any]:
    """One seed on one transfer split: base and final figures, the split's
    majority level and the transfer targets it met."""
    from rosetrain.demo.report import majority_action_avg

    stages = summary[split.replace("-", "_")]
    base, final = stages["base"], stages[summary["final_stage"]]
    targets = summary["transfer_targets"][split]
    return {
        "base_counting": base["counting_avg"],
        "base_gap": base["gap"],
        "final_action": final["action_avg"],
        "final_counting": final["counting_avg"],
        "final_gap": final["gap"],
        "majority_action": majority_action_avg(summary["majority_baseline"][split]),
        "targets_met": sum(t["met"] for t in targets.values()),
        "targets": len(targets),
        "all_met": all(t["met"] for t in targets.values()),
    }


def spread(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
        "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


SPREAD_KEYS = ("final_action", "final_gap", "gap_ratio", "final_counting", "ood_action")


def summarize_sweep(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [seed_row(s) for s in summaries]
    grpo = [r["grpo_vs_sft"] for r in rows if r["grpo_vs_sft"]]
    return {
        "seeds": [r["seed"] for r in rows],
        "per_seed": rows,
        "all_targets_met": sum(r["all_met"] for r in rows),
        "transfer_met": {
            split: sum(r["transfer"][split]["all_met"] for r in rows if split in r["transfer"])
            for split in sorted({split for r in rows for split in r["transfer"]})
        },
        "spread": {
            k: spread([r[k] for r in rows if r[k] is not None])
            for k in SPREAD_KEYS
            if any(r[k] is not None for r in rows)
        },
        "grpo_better": sum(1 for g in grpo if g["ci95"] and g["ci95"][0] > 0),
        "grpo_runs": len(grpo),
    }


def _grpo_cell(g: dict[str, Any] | None) -> str:
    if not g:
        return "skipped"
    return pct(g["delta"], True) + (f" {ci(g['ci95'])}" if g["ci95"] else " [no CI]")


def sweep_report(sweep: dict[str, Any]) -> str:
    n = len(sweep["per_seed"])
    lines = [
        "# rosetrain demo: seed sweep",
        "",
        (
            f"{n} seeds ({', '.join(map(str, sweep['seeds']))}); each row is one full demo run "
            "(`seed-<n>/report.md`). PASS % on the held-out splits; min: minutes the run's stages took."
        ),
        "",
        "In distribution: new scenes of the trained family (`heldout`).",
        "",
        (
            "| seed | base gap | SFT Action | final Action | majority Action | final gap | gap ratio "
            "| Counting | min template margin | targets met | GRPO vs SFT, avg PASS [95% CI] | min |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sweep["per_seed"]:
        ratio = "-" if r["gap_ratio"] is None else f"{r['gap_ratio']:.2f}"
        lines.append(
            f"| {r['seed']} | {pct(r['base_gap'])} | {pct(r['sft_action'])} | "
            f"{pct(r['final_action'])} | {pct(r['majority_action'])} | {pct(r['final_gap'])} | "
            f"{ratio} | {pct(r['final_counting'])} | {pct(r['min_template_margin'], True)} | "
            f"{r['targets_met']}/{r['targets']} | {_grpo_cell(r['grpo_vs_sft'])} | {r['minutes']} |"
        )
    lines += [
        "",
        "Out of distribution: a visual family no training stage shows (`heldout-family`).",
        "",
        "| seed | final Action | majority Action | final Counting |",
        "|---|---|---|---|",
    ]
    for r in sweep["per_seed"]:
        lines.append(
            f"| {r['seed']} | {pct(r['ood_action'])} | {pct(r['ood_majority_action'])} | "
            f"{pct(r['ood_counting'])} |"
        )
    for split, met in sweep.get("transfer_met", {}).items():
        lines += [
            "",
            f"Transfer (`{split}`): Action needs 20 points over the majority level, the gap at most "
            "half the base's, Counting at most 5 points below the base's.",
            "",
            "| seed | base Counting | final Counting | final Action | majority Action | gap ratio | targets met |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in sweep["per_seed"]:
            t = r["transfer"].get(split)
            if t is None:
                continue
            ratio = f"{t['final_gap'] / t['base_gap']:.2f}" if t["base_gap"] > 0 else "-"
            lines.append(
                f"| {r['seed']} | {pct(t['base_counting'])} | {pct(t['final_counting'])} | "
                f"{pct(t['final_action'])} | {pct(t['majority_action'])} | {ratio} | "
                f"{t['targets_met']}/{t['targets']} |"
            )
        lines += ["", f"**{met} of {n} seeds met every transfer target on `{split}`.**"]
    lines += ["", "## Spread over seeds", "", "| figure | mean | min | max | sd |", "|---|---|---|---|---|"]
    for key, s in sweep["spread"].items():
        fmt = (lambda v: f"{v:.2f}") if key == "gap_ratio" else pct
        lines.append(f"| {key} | {fmt(s['mean'])} | {fmt(s['min'])} | {fmt(s['max'])} | {fmt(s['sd'])} |")
    lines += [
        "",
        (
            f"**{sweep['all_targets_met']} of {n} seeds met every target.** "
            f"GRPO improved on SFT (paired CI above 0) on {sweep['grpo_better']} of "
            f"{sweep['grpo_runs']} seeds."
        ),
        "",
    ]
    return "\n".join(lines)
