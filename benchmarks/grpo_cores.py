"""GRPO on one core against several: steps/s at the same prompts an update.

Runs ``rosetrain train grpo`` (the demo's GRPO recipe, its frontier filter,
``grpo.frontier_reuse`` unless ``--no-reuse``) for ``--steps`` steps on one
process and on N processes (torchrun, gloo; one thread each, pinned to cores
0..N-1), alternated ``--repeat`` times so the machine's load hits both alike.
Each process trains ``num_generations`` rows a step (one prompt's group; M-RoPE
models need it), so the prompts an update are kept by gradient accumulation:
``--prompts`` on one process, ``--prompts / N`` on each of N. Steps/s come from
the trainer's own ``train_runtime``; each run also prints the groups TRL took
from the filter and those it had to sample anew (0 when the repeats are sized
for the shards each process reads: ``rosetrain/train/grpo_trainer.py``).
Prints every run and the ratio of each alternated pair (target, as for SFT in
``train_step.py --cores``: at least 1.7x on two cores).

    python benchmarks/grpo_cores.py [--model DIR] [--spec SPEC] [--steps 40] [--repeat 2] [--procs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rosetrain.demo.pipeline import ASSET_BASE_PALETTES, RECIPES  # noqa: E402
from rosetrain.train.launch import train_command  # noqa: E402

RECIPE = RECIPES / "demo-grpo.yaml"


def grpo_run(args: argparse.Namespace, procs: int, out: Path) -> dict:
    """One ``rosetrain train grpo`` run on ``procs`` processes: steps/s and the filter's groups."""
    if args.prompts % procs:
        raise SystemExit(f"--prompts {args.prompts} does not split over {procs} processes")
    sets = {
        "model": args.model,
        "output_dir": str(out),
        "max_steps": args.steps,
        "save_steps": 100000,
        "logging_steps": 100000,
        "resume": "never",
        "cpu_threads": 1,
        "gradient_accumulation_steps": args.prompts // procs,
        "grpo.frontier_reuse": str(not args.no_reuse).lower(),
        "trl.disable_tqdm": "true",
    }
    if args.spec:
        sets["data.spec"] = args.spec
    overrides = [f"{key}={value}" for key, value in sets.items()] + args.set
    command = train_command("grpo", args.recipe, overrides, procs)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cores = ",".join(str(c) for c in range(procs))
    subprocess.run(["taskset", "-c", cores, *command], check=True, env=env, cwd=ROOT, capture_output=True)
    summary = json.loads((out / "train_summary.json").read_text())
    reused = resampled = 0
    log = out / "frontier.jsonl"  # none with grpo.frontier=false
    for line in log.read_text().splitlines() if log.exists() else []:
        groups = json.loads(line).get("groups")
        if groups:
            reused, resampled = reused + groups["reused"], resampled + groups["resampled"]
    return {
        "procs": procs,
        "steps_per_s": summary["global_step"] / summary["train_runtime"],
        "reused": reused,
        "resampled": resampled,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    parser.add_argument("--model", default=str(ASSET_BASE_PALETTES))
    parser.add_argument("--spec", help="data.spec (default: the recipe's)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts an update (all processes)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--procs", type=int, default=2, help="the processes compared with one")
    parser.add_argument("--no-reuse", action="store_true", help="TRL samples the kept prompts again")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a recipe key")
    args = parser.parse_args()
    print(
        f"GRPO, {args.recipe.name}, {args.model}, {args.prompts} prompts an update, {args.steps} steps a run"
    )
    ratios = []
    with tempfile.TemporaryDirectory(prefix="grpo_cores-") as tmp:
        for round_ in range(args.repeat):
            pair = [grpo_run(args, procs, Path(tmp) / f"r{round_}-p{procs}") for procs in (1, args.procs)]
            for run in pair:
                print(
                    f"  {run['procs']} process(es): {run['steps_per_s']:.3f} steps/s, groups "
                    f"{run['reused']} from the filter, {run['resampled']} sampled anew"
                )
            ratios.append(pair[1]["steps_per_s"] / pair[0]["steps_per_s"])
            print(f"  {args.procs} cores / 1: {ratios[-1]:.2f}x")
    print(f"median {statistics.median(ratios):.2f}x over {len(ratios)} pairs (target >= 1.7)")


if __name__ == "__main__":
    main()
