"""Learning curves of SFT designs: does the action carry beyond the palette it
was taught on?

For each design (a generator spec) and seed, SFT from ``--base`` with the
demo's SFT recipe (``--steps`` steps, a checkpoint every ``--every``), every
run in its own process, side by side. Each checkpoint is then evaluated on
every ``--split`` (a folder made by ``rosetrain generate``, release format),
and the table gives Counting and Action Avg per step beside each split's
majority-answer level (always giving each template's most common gold
answer). Runs on the CPU (one thread a run) or, where CUDA is seen, on the GPU.

``--deadline`` (minutes) stops the training of every run that is still going
at that time, so a call with a time limit still returns the checkpoints it
made; rerun the same command to resume them (the trainer resumes exactly).
``--train-only`` evaluates nothing (a GPU call whose checkpoints the CPU evaluates).
``--cores N`` trains each run on N CPU processes (the larger stand-in's seeds,
one at a time on the two cores: about 1.45x one core).

    python benchmarks/transfer_curves.py --base runs/base-palettes/checkpoint-1500 \\
        --design staged=experiments/transfer/staged.yaml --seeds 0 1 \\
        --split id=data/heldout --split v=data/heldout-varied --split r=data/heldout-palette \\
        --steps 3000 --every 500 --out runs/curves

Writes OUT/curves.json and OUT/curves.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rosetrain.core import protocol as P  # noqa: E402
from rosetrain.core.errors import RosetrainError  # noqa: E402
from rosetrain.core.io import atomic_write  # noqa: E402
from rosetrain.demo.pipeline import RECIPES  # noqa: E402
from rosetrain.demo.report import majority_baseline  # noqa: E402
from rosetrain.train.launch import core_overrides  # noqa: E402
from rosetrain.train.launch import train_command as launch_command  # noqa: E402
from rosetrain.train.recipe import load_recipe  # noqa: E402


def pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def train_command(args: argparse.Namespace, name: str, spec: str, seed: int, out: Path) -> list[str]:
    sets = {
        "model": str(Path(args.base).absolute()),
        "output_dir": str(out),
        "data.spec": str(Path(spec).absolute()),
        "seed": str(seed),
        "data.seed": str(seed),
        "max_steps": str(args.steps),
        "save_steps": str(args.every),
        "save_total_limit": "100",
        "logging_steps": "100",
    }
    sets.update(dict(args.set))
    if args.workers is not None:
        sets["dataloader_num_workers"] = str(args.workers)
    lr = dict(args.lr_for).get(name, args.lr)
    if lr is not None:
        sets["learning_rate"] = str(lr)
    overrides = [f"{key}={value}" for key, value in sets.items()]
    if args.cores > 1:  # the recipe's global batch, split over the processes
        overrides += core_overrides(load_recipe(args.recipe, overrides).train_batch_size, args.cores)
    return launch_command("sft", args.recipe, overrides, args.cores)


def checkpoints(run: Path) -> dict[int, Path]:
    found = {}
    for folder in run.glob("checkpoint-*"):
        step = folder.name.removeprefix("checkpoint-")
        if step.isdigit() and (folder / "config.json").exists() and (folder / "model.safetensors").exists():
            found[int(step)] = folder
    return found


def evaluate_one(job: tuple[str, str, str, int, int]) -> dict:
    model, data, out, batch, max_new_tokens = job
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from rosetrain.evaluation.evaluate import evaluate

    summary = evaluate(
        model, data, "test", out, batch_size=batch, max_new_tokens=max_new_tokens, progress=False
    )
    return {
        "counting": 100 * summary["counting_avg"],
        "action": 100 * summary["action_avg"],
        "templates": {t: 100 * v["pass"] for t, v in summary["templates"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the model every run starts from")
    parser.add_argument("--design", type=pair, action="append", required=True, help="NAME=SPEC (repeatable)")
    parser.add_argument("--split", type=pair, action="append", default=[], help="NAME=DATA_DIR (repeatable)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--lr", type=float, help="learning rate (default: the recipe's)")
    parser.add_argument(
        "--lr-for", type=pair, action="append", default=[], help="NAME=LR: one design's learning rate"
    )
    parser.add_argument("--recipe", type=Path, default=RECIPES / "demo-sft.yaml")
    parser.add_argument(
        "--set", type=pair, action="append", default=[], help="KEY=VALUE for every run's recipe"
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="DataLoader workers per run (default: the recipe's; on a GPU set it so "
        "that runs x (workers + 1) fits the CPUs)",
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=1,
        help="CPU processes per run, the recipe's batch split among them (torchrun, gloo; "
        "a run resumes only on the number it started with)",
    )
    parser.add_argument("--deadline", type=float, help="minutes after which training stops")
    parser.add_argument(
        "--train-only",
        action="store_true",
        help="evaluate nothing: a GPU call returns the checkpoints, the CPU evaluates them",
    )
    parser.add_argument("--eval-jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--eval-every", type=int, help="evaluate every Nth step only (default: --every)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=40,
        help="greedy answer length (a 3x3 answer fits 40; with data.reasoning set, 96)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/curves"))
    args = parser.parse_args()
    if not args.split and not args.train_only:
        parser.error("give at least one --split, or --train-only")
    if args.cores < 1:
        parser.error(f"--cores must be at least 1, got {args.cores}")
    try:  # with --cores: a recipe that does not load, or a batch that does not split
        train_command(args, *args.design[0], args.seeds[0], args.out)
    except RosetrainError as err:
        parser.error(str(err))

    start = time.monotonic()
    runs = {(name, seed): args.out / f"{name}-seed{seed}" for name, _ in args.design for seed in args.seeds}
    specs = dict(args.design)
    # the runs import this checkout's rosetrain but keep the caller's working
    # directory, so that relative --out, --set and --recipe paths mean what they say
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    procs = {}
    for (name, seed), folder in runs.items():
        if (folder / "checkpoint-final").exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        log = open(folder.with_suffix(".log"), "a")
        command = train_command(args, name, specs[name], seed, folder)
        procs[(name, seed)] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    stopped = []
    for key, proc in procs.items():
        left = None if args.deadline is None else max(1.0, args.deadline * 60 - (time.monotonic() - start))
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            proc.terminate()  # the trainer's checkpoints so far stay whole
            proc.wait()
            stopped.append(key)
    print(f"training: {time.monotonic() - start:.0f} s; stopped at the deadline: {stopped}", flush=True)
    if args.train_only:
        return

    every = args.eval_every or args.every
    jobs, where = [], []
    for (name, seed), folder in runs.items():
        for step, checkpoint in sorted(checkpoints(folder).items()):
            if step % every and step != args.steps:
                continue
            for split, data in args.split:
                out = args.out / "eval" / f"{name}-seed{seed}-{step}-{split}"
                jobs.append((str(checkpoint), data, str(out), args.batch_size, args.max_new_tokens))
                where.append((name, seed, step, split))
    for split, data in args.split:  # the base as step 0
        jobs.append(
            (args.base, data, str(args.out / "eval" / f"base-{split}"), args.batch_size, args.max_new_tokens)
        )
        where.append(("base", -1, 0, split))
    with ProcessPoolExecutor(args.eval_jobs) as pool:
        results = list(pool.map(evaluate_one, jobs))
    figures = [dict(zip(("design", "seed", "step", "split"), w), **r) for w, r in zip(where, results)]
    majority = {}
    for split, data in args.split:
        level = majority_baseline(Path(data) / "metadata_test.jsonl")
        majority[split] = {
            "counting": 100 * sum(level[t] for t in P.COUNTING_TEMPLATES) / len(P.COUNTING_TEMPLATES),
            "action": 100 * sum(level[t] for t in P.ACTION_TEMPLATES) / len(P.ACTION_TEMPLATES),
        }
    report = {"figures": figures, "majority": majority, "args": {k: str(v) for k, v in vars(args).items()}}
    atomic_write(args.out / "curves.json", json.dumps(report, indent=2))
    splits = [s for s, _ in args.split]
    lines = [
        "| design | seed | step | " + " | ".join(f"{s} Counting / Action" for s in splits) + " |",
        "|---|---|---|" + "---|" * len(splits),
        "| majority level | | | "
        + " | ".join(f"{majority[s]['counting']:.1f} / {majority[s]['action']:.1f}" for s in splits)
        + " |",
    ]
    rows: dict[tuple, dict[str, dict]] = {}
    for f in figures:
        rows.setdefault((f["design"], f["seed"], f["step"]), {})[f["split"]] = f
    for (design, seed, step), by_split in sorted(rows.items(), key=lambda kv: (kv[0][0] != "base", kv[0])):
        cells = [
            f"{by_split[s]['counting']:.1f} / {by_split[s]['action']:.1f}" if s in by_split else "-"
            for s in splits
        ]
        lines.append(f"| {design} | {'' if seed < 0 else seed} | {step} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    atomic_write(args.out / "curves.md", table + "\n")
    print(table)
    print(f"total: {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
