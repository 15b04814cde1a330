"""Does training on a model's own errors pay? A second SFT round on the
curriculum made from them, against a second round on the uniform spec.

From the demo's SFT model (``--sft``, e.g. ``runs/demo/sft/checkpoint-final``):

1. evaluate it on a PROBE split: new scenes of the demo's held-out settings in
   a namespace of their own (``probe``), never the held-out split;
2. ``rosetrain curriculum`` from that probe run and the demo's round-2 spec
   (``generators/demo/rl.yaml``, the SFT mixture without its warm-up);
3. per seed, two second rounds of ``--steps`` SFT steps from the same model
   with the demo's SFT recipe, same seed, same steps: one on ``rl.yaml``
   (uniform), one on the curriculum spec;
4. evaluate both on the demo's held-out split (``heldout.yaml``, which the
   curriculum never reads) and pair them item by item with ``compare``'s
   scene bootstrap: the difference in Action Avg and its 95% CI.

``--design transfer`` measures the demo's transfer design instead: round 2 on
its GRPO-stage mixture (``rl-transfer.yaml``: varied palettes outside the
held-out band) with its SFT recipe (``demo-sft-transfer.yaml``), the probe made
from ``heldout-varied.yaml`` (the action data's own distribution, never the
band) and the held-out split the band (``heldout-palette.yaml``).

Prints the per-seed table and writes it to OUT/round2.md and OUT/round2.json.
Everything is resumable (rerun the same command); outputs go under ``--out``.

    nice -n 10 python benchmarks/curriculum_round2.py --sft runs/demo/sft/checkpoint-final \\
        [--design palette|transfer] [--seeds 0-4] [--steps 300] [--mode failures] [--out runs/curriculum-round2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rosetrain.core.formats import ci, pct  # noqa: E402
from rosetrain.core.io import atomic_write  # noqa: E402
from rosetrain.demo.pipeline import GENERATORS, RECIPES, DemoConfig  # noqa: E402

CI_TARGET = 3  # of 5 seeds: positive difference with its CI above 0


# design -> (round-2 spec, SFT recipe, the spec the probe copies, the held-out spec)
DESIGNS = {
    "palette": ("rl.yaml", "demo-sft.yaml", "heldout.yaml", "heldout.yaml"),
    "transfer": ("rl-transfer.yaml", "demo-sft-transfer.yaml", "heldout-varied.yaml", "heldout-palette.yaml"),
}


def parse_seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def log(message: str) -> None:
    print(f"[round2 {time.strftime('%H:%M:%S')}] {message}", flush=True)


def probe_spec(out: Path, source: str = "heldout.yaml", round2: str = "rl.yaml") -> Path:
    """The ``source`` spec's settings in a namespace of its own: same kind of items,
    other scenes. The curriculum reads this split, never the held-out one."""
    raw = yaml.safe_load((GENERATORS / source).read_text())
    for key in ("heldout_family_name", "heldout_scenes"):
        raw.pop(key, None)
    raw.update(name="demo-probe", role="eval", namespace="probe", seed=15)
    # every template the round-2 spec trains, bridges too: a template the probe
    # does not hold could only be weighted by the pooled failure rate
    raw["tasks"] = yaml.safe_load((GENERATORS / round2).read_text())["tasks"]
    path = out / "specs" / "probe.yaml"
    atomic_write(path, yaml.safe_dump(raw, sort_keys=False))
    return path


def generate(spec: Path, folder: Path, scenes: int) -> Path:
    from rosetrain.data.generate import make_job, run_job
    from rosetrain.generators.spec import load_spec

    if not (folder / "metadata_test.jsonl").exists():
        run_job(make_job(load_spec(spec), folder, "test", scenes, formats=("release",)), progress=False)
    return folder


def evaluate(model: Path, data: Path, out: Path) -> dict:
    """As the demo evaluates: its token budget leaves a thinking model room to
    finish (40 tokens, this script's budget before, cut the answers off)."""
    from rosetrain.evaluation.evaluate import evaluate as run_eval

    budget = DemoConfig.max_new_tokens  # the field's default
    return run_eval(str(model), data, "test", out, batch_size=32, max_new_tokens=budget, progress=False)


def train_round(
    sft: Path,
    spec: Path,
    out: Path,
    seed: int,
    steps: int,
    recipe: str = "demo-sft.yaml",
    learning_rate: float | None = None,
) -> tuple[Path, float]:
    from rosetrain.train import train
    from rosetrain.train.recipe import load_recipe

    final = out / "checkpoint-final"
    if final.exists():
        return final, float("nan")
    start = time.perf_counter()
    overrides = [
        f"model={sft}",
        f"output_dir={out}",
        f"seed={seed}",
        f"data.spec={spec}",
        f"data.seed={seed}",
        f"max_steps={steps}",
        "cpu_threads=1",
        "logging_steps=100",
        f"save_steps={steps}",
        *([f"learning_rate={learning_rate}"] if learning_rate is not None else []),
    ]
    result = train(load_recipe(RECIPES / recipe, overrides))
    return Path(result["final"]), time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft", required=True, help="the demo's SFT model (round 1)")
    parser.add_argument("--design", default="palette", choices=sorted(DESIGNS))
    parser.add_argument("--seeds", default="0-4")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--mode", default="failures", choices=("failures", "balanced"))
    parser.add_argument(
        "--learning-rate", type=float, default=None, help="round 2's (default: the SFT recipe's)"
    )
    parser.add_argument("--axes", default=None, help="comma list of axes to weight (default: all)")
    parser.add_argument("--probe-scenes", type=int, default=200)
    parser.add_argument(
        "--heldout-scenes", type=int, default=None, help="default: the demo's (80; the band 100)"
    )
    parser.add_argument("--out", default=str(ROOT / "runs" / "curriculum-round2"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from rosetrain.curriculum import make_curriculum
    from rosetrain.curriculum.weights import Rule
    from rosetrain.reports.compare import compare_runs

    out = Path(args.out).absolute()
    sft = Path(args.sft).absolute()
    round2, recipe, probe_source, heldout_spec = DESIGNS[args.design]
    heldout_scenes = args.heldout_scenes or (100 if args.design == "transfer" else 80)
    uniform = GENERATORS / round2
    probe = generate(probe_spec(out, probe_source, round2), out / "data" / "probe", args.probe_scenes)
    heldout = generate(GENERATORS / heldout_spec, out / "data" / "heldout", heldout_scenes)
    start = time.perf_counter()
    evaluate(sft, probe, out / "eval" / "sft-probe")
    log(f"probe eval of the SFT model: {time.perf_counter() - start:.1f} s")
    axes = None if args.axes is None else tuple(args.axes.split(","))
    label = args.mode + ("" if axes is None else "-" + "+".join(axes))
    curriculum = out / "specs" / f"curriculum-{label}.yaml"
    make_curriculum(out / "eval" / "sft-probe", uniform, curriculum, Rule(mode=args.mode, axes=axes))
    log(f"curriculum spec: {curriculum}")
    sft_heldout = evaluate(sft, heldout, out / "eval" / "sft-heldout")

    rows = []
    for seed in parse_seeds(args.seeds):
        arms = {}
        for arm, spec in (("uniform", uniform), (f"curriculum-{label}", curriculum)):
            final, seconds = train_round(
                sft, spec, out / "train" / f"seed-{seed}" / arm, seed, args.steps, recipe, args.learning_rate
            )
            if seconds == seconds:
                log(
                    f"seed {seed} {arm}: {args.steps} steps in {seconds:.0f} s ({seconds / args.steps:.2f} s/step)"
                )
            arms[arm] = evaluate(final, heldout, out / "eval" / f"seed-{seed}-{arm}-heldout")
        result = compare_runs(
            out / "eval" / f"seed-{seed}-uniform-heldout",
            out / "eval" / f"seed-{seed}-curriculum-{label}-heldout",
            out / "compare" / f"seed-{seed}-{label}",
            plots=False,
        )
        action = result["action_avg"]
        row = {
            "seed": seed,
            "uniform_action": action["before"],
            "curriculum_action": action["after"],
            "delta": action["delta"],
            "ci95": action["ci95"],
            "uniform_counting": result["counting_avg"]["before"],
            "curriculum_counting": result["counting_avg"]["after"],
            "avg_pass_delta": result["avg_pass"]["delta"],
            "avg_pass_ci95": result["avg_pass"]["ci95"],
        }
        rows.append(row)
        log(
            f"seed {seed}: Action {pct(row['uniform_action'])} -> {pct(row['curriculum_action'])}, "
            f"delta {pct(row['delta'], True)} {ci(row['ci95'])}"
        )

    lines = [
        f"Round 2 from {sft} (design {args.design}): {args.steps} SFT steps "
        f"(lr {args.learning_rate or 'of ' + recipe}) on the uniform spec "
        f"({round2}) vs the curriculum ({label}) made from the SFT model's probe errors "
        f"({probe_source} settings); held-out split {heldout_spec} "
        f"({heldout_scenes} scenes x 5 templates). SFT model on held-out: Action "
        f"{pct(sft_heldout['action_avg'])}, Counting {pct(sft_heldout['counting_avg'])}.",
        "",
        "| seed | uniform Action | curriculum Action | delta [95% CI] | CI above 0 | uniform Counting "
        "| curriculum Counting | avg PASS delta [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {pct(r['uniform_action'])} | {pct(r['curriculum_action'])} | "
            f"{pct(r['delta'], True)} {ci(r['ci95'])} | {'yes' if r['ci95'][0] and r['ci95'][0] > 0 else 'no'} | "
            f"{pct(r['uniform_counting'])} | {pct(r['curriculum_counting'])} | "
            f"{pct(r['avg_pass_delta'], True)} {ci(r['avg_pass_ci95'])} |"
        )
    above = sum(1 for r in rows if r["ci95"][0] is not None and r["ci95"][0] > 0)
    lines += ["", f"Positive with CI above 0 on {above} of {len(rows)} seeds (target: {CI_TARGET} of 5)."]
    table = "\n".join(lines)
    print(table)
    atomic_write(out / f"round2-{label}.md", table + "\n")
    atomic_write(
        out / f"round2-{label}.json",
        json.dumps(
            {
                "rows": rows,
                "sft_heldout": {k: sft_heldout[k] for k in ("action_avg", "counting_avg", "avg_pass")},
            },
            indent=2,
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
