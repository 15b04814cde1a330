"""The training step against its floor: does a step wait on the data side?

One process builds the trainer exactly as ``rosetrain train sft`` does (the
recipe's stream, DataLoader workers, collator, optimizer) and alternates two
phases on the same batches, in blocks:

- **real**: the next batch from the trainer's DataLoader (its workers generate,
  render and collate rows while the model trains), then forward, backward and
  the optimizer step;
- **floor**: the same collated batches again, already in memory: forward,
  backward and the optimizer step alone.

It prints ms per step of each phase (data wait, forward, backward, optimizer),
real/floor (target: at most 1.10 on one CPU core, 1.2 on a GPU), and the data
side measured alone: rows generated and rendered, the PNG round trip a typed
``Image`` feature would add, and collation, per batch.

``--cores 1 2`` then measures what the demo gets from the machine's cores:
``rosetrain train sft`` runs of ``--run-steps`` steps at the same global batch,
on 1 process and on N processes (torchrun, gloo; each process one thread,
pinned to its own core), steps/s from the trainer's own ``train_runtime``
(target: 2 cores at least 1.7x one). ``--repeat`` alternates the counts
round by round and prints each round's ratio and their median.

    python benchmarks/train_step.py                       # one pinned core (or CUDA if seen)
    python benchmarks/train_step.py --cores 1 2           # and steps/s on 1 and 2 cores
    python benchmarks/train_step.py --cores 1 2 --repeat 5  # five rounds, 1 and 2 alternating
    python benchmarks/train_step.py --device cuda --workers 4

Runs on CUDA when it is there (``--device auto``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rosetrain.demo.pipeline import ASSET_BASE_PALETTES, RECIPES  # noqa: E402
from rosetrain.train.launch import train_command  # noqa: E402

RECIPE = RECIPES / "demo-sft-transfer.yaml"


def pin(core: int | None) -> None:
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


def build_trainer(args: argparse.Namespace, out: Path):
    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.recipe import load_recipe

    sets = [
        f"model={args.model}",
        f"output_dir={out}",
        "max_steps=100000",
        "eval.folder=null",
        "resume=never",
        f"per_device_train_batch_size={args.batch}",
    ]
    if args.workers is not None:
        sets.append(f"dataloader_num_workers={args.workers}")
    if args.device == "cpu":
        sets.append("cpu_threads=1")
    recipe = load_recipe(args.recipe, [*sets, *args.set], method="sft")
    return build(check(recipe))


class Clock:
    """Wall time of a phase, with the device drained first (CUDA runs async)."""

    def __init__(self, cuda: bool):
        import torch

        self.sync = torch.cuda.synchronize if cuda else (lambda: None)

    def __call__(self) -> float:
        self.sync()
        return time.perf_counter()


def model_step(trainer, model, batch, clock: Clock) -> tuple[float, float, float]:
    """Forward, backward, optimizer: the trainer's own loss and optimizer."""
    import torch

    t0 = clock()
    inputs = trainer._prepare_inputs(batch)
    loss = trainer.compute_loss(model, inputs)
    t1 = clock()
    loss.backward()
    t2 = clock()
    torch.nn.utils.clip_grad_norm_(model.parameters(), trainer.args.max_grad_norm)
    trainer.optimizer.step()
    trainer.lr_scheduler.step()
    trainer.optimizer.zero_grad(set_to_none=True)
    t3 = clock()
    return t1 - t0, t2 - t1, t3 - t2


def interleaved(args: argparse.Namespace) -> dict:
    import torch

    built = build_trainer(args, Path(tempfile.mkdtemp(prefix="train_step-")))
    trainer = built.trainer
    model = trainer.model
    model.train()
    if args.compile:  # what `trl.torch_compile=true` does to the trainer's model (through accelerate)
        model = torch.compile(model)
    trainer.create_optimizer_and_scheduler(num_training_steps=100000)
    clock = Clock(args.device == "cuda")
    batches = iter(trainer.get_train_dataloader())
    for _ in range(args.warmup):  # workers started, allocator warm
        model_step(trainer, model, next(batches), clock)
    phases: dict[str, list[float]] = {
        k: [] for k in ("real", "data", "floor", "forward", "backward", "optimizer")
    }
    for _ in range(args.blocks):
        kept = []
        for _ in range(args.block):
            t0 = clock()
            batch = next(batches)
            t1 = clock()
            model_step(trainer, model, batch, clock)
            phases["real"].append(clock() - t0)
            phases["data"].append(t1 - t0)
            kept.append(batch)
        for batch in kept:
            t0 = clock()
            forward, backward, optimizer = model_step(trainer, model, batch, clock)
            phases["floor"].append(clock() - t0)
            phases["forward"].append(forward)
            phases["backward"].append(backward)
            phases["optimizer"].append(optimizer)
    ms = {k: 1000 * statistics.fmean(v) for k, v in phases.items()}
    ms["ratio"] = ms["real"] / ms["floor"]
    ms["block_ratios"] = [
        statistics.fmean(phases["real"][i : i + args.block])
        / statistics.fmean(phases["floor"][i : i + args.block])
        for i in range(0, len(phases["real"]), args.block)
    ]
    ms["workers"] = trainer.args.dataloader_num_workers
    ms["device"] = str(trainer.args.device)
    ms["torch_threads"] = torch.get_num_threads()
    return ms


def data_side(args: argparse.Namespace) -> dict:
    """The data work of one batch, measured alone in this process."""
    import itertools

    from transformers import AutoProcessor
    from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling

    from rosetrain.data.hf import hf_features, stream_dataset
    from rosetrain.train.recipe import load_recipe

    recipe = load_recipe(args.recipe, [f"model={args.model}", "output_dir=unused"], method="sft")
    n = args.batch * 10
    stream = stream_dataset(recipe.data.spec, seed=recipe.data.seed)
    next(iter(stream))
    t = time.perf_counter()
    rows = list(itertools.islice(iter(stream), n))
    generated = time.perf_counter() - t
    typed = stream.cast(hf_features())  # what the stream did before: images as datasets.Image
    t = time.perf_counter()
    list(itertools.islice(iter(typed), n))
    round_trip = time.perf_counter() - t - generated
    processor = AutoProcessor.from_pretrained(args.model)
    collator = DataCollatorForVisionLanguageModeling(processor=processor, completion_only_loss=True)
    t = time.perf_counter()
    for i in range(0, n, args.batch):
        collator(rows[i : i + args.batch])
    collated = time.perf_counter() - t
    per = 1000 * args.batch / n
    return {
        "generate_render_ms": generated * per,
        "png_round_trip_ms": round_trip * per,
        "collate_ms": collated * per,
    }


def cores_run(args: argparse.Namespace, procs: int, out: Path) -> dict:
    """``rosetrain train sft`` for --run-steps steps on ``procs`` processes, global batch kept."""
    if args.batch % procs:
        raise SystemExit(f"--batch {args.batch} does not split over {procs} processes")
    sets = {
        "model": args.model,
        "output_dir": str(out),
        "max_steps": args.run_steps,
        "save_steps": 100000,
        "logging_steps": 100000,
        "eval.folder": "null",
        "resume": "never",
        "cpu_threads": 1,
        "dataloader_num_workers": 0,  # as the demo: one core per process, no worker
        "per_device_train_batch_size": args.batch // procs,
    }
    overrides = [f"{key}={value}" for key, value in sets.items()] + args.set
    command = train_command("sft", args.recipe, overrides, procs)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cores = ",".join(str(c) for c in range(procs))
    start = time.perf_counter()
    subprocess.run(["taskset", "-c", cores, *command], check=True, env=env, cwd=ROOT, capture_output=True)
    wall = time.perf_counter() - start
    summary = json.loads((out / "train_summary.json").read_text())
    return {"procs": procs, "steps_per_s": summary["global_step"] / summary["train_runtime"], "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    parser.add_argument("--model", default=str(ASSET_BASE_PALETTES))
    parser.add_argument("--batch", type=int, default=16, help="rows per step (global)")
    parser.add_argument("--workers", type=int, help="DataLoader workers (default: the recipe's)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--core", type=int, default=0, help="the CPU core the CPU run is pinned to")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--block", type=int, default=10, help="steps per phase, alternating")
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument(
        "--cores", type=int, nargs="*", default=[], help="also steps/s on these process counts"
    )
    parser.add_argument("--run-steps", type=int, default=150)
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of the --cores runs, the counts alternating in each"
    )
    parser.add_argument(
        "--compile", action="store_true", help="torch.compile the model of the interleaved steps"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a recipe key of every trainer built (e.g. trl.ddp_bucket_cap_mb=100)",
    )
    args = parser.parse_args()
    import torch

    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        pin(args.core)  # the DataLoader's workers inherit the pin: one core in all
        torch.set_num_threads(1)
    load = os.getloadavg()[0]
    data = data_side(args)
    steps = interleaved(args)
    print(
        f"train step, {args.recipe.name}, batch {args.batch}, {steps['device']}, "
        f"{steps['workers']} DataLoader worker(s), {'compiled, ' if args.compile else ''}torch threads {steps['torch_threads']}, load {load:.2f}"
    )
    print(
        "  data side alone, ms a batch: "
        + ", ".join(f"{k.removesuffix('_ms').replace('_', ' ')} {v:.1f}" for k, v in data.items())
    )
    print(f"  real step  {steps['real']:7.1f} ms  (waiting for data {steps['data']:.1f})")
    print(
        f"  floor step {steps['floor']:7.1f} ms  (forward {steps['forward']:.1f}, backward "
        f"{steps['backward']:.1f}, optimizer {steps['optimizer']:.1f})"
    )
    print(
        f"  real/floor {steps['ratio']:.3f}  (blocks: {', '.join(f'{r:.3f}' for r in steps['block_ratios'])})"
    )
    result = {"data_side": data, "steps": steps, "load": load}
    runs, ratios = [], []
    with tempfile.TemporaryDirectory(prefix="train_step-cores-") as tmp:
        for round_ in range(args.repeat if args.cores else 0):
            # the counts alternate, so a round's ratio compares runs minutes apart on a machine whose speed drifts
            first = len(runs)
            for procs in args.cores:
                runs.append(
                    {**cores_run(args, procs, Path(tmp) / f"r{round_}-procs{procs}"), "round": round_}
                )
                print(
                    f"  {procs} process(es), global batch {args.batch}: {runs[-1]['steps_per_s']:.2f} steps/s"
                )
            if len(args.cores) > 1:
                ratios.append(runs[-1]["steps_per_s"] / runs[first]["steps_per_s"])
                print(f"  {args.cores[-1]} cores / {args.cores[0]}: {ratios[-1]:.2f}x")
    if len(ratios) > 1:
        print(
            f"  {args.cores[-1]} cores / {args.cores[0]}, {len(ratios)} rounds: median {statistics.median(ratios):.2f}x, "
            f"mean {statistics.mean(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f})"
        )
    result["cores"], result["core_ratios"] = runs, ratios
    print(json.dumps(result))


if __name__ == "__main__":
    main()
