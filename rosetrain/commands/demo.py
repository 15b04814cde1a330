"""rosetrain demo --out runs/demo: the main job, end to end on the CPU."""

from __future__ import annotations

from pathlib import Path

from rosetrain.commands import MAX_PROCESSES, SEED_NUMPY, integer, path, seed
from rosetrain.core.verbosity import add_verbose_argument

# One option per evaluation split of the demo: (what its scenes show, DemoConfig's default).
SCENE_OPTIONS = {
    "heldout-scenes": ("the trained family, held out", 80),
    "palette-scenes": ("the held-out palette band", 100),
    "family-scenes": ("the held-out visual family", 30),
}


def add_arguments(parser) -> None:
    parser.add_argument(
        "--out",
        type=path("out-folder"),
        default="runs/demo",
        help="output folder (rerun to resume); everything the demo writes goes under it",
    )
    parser.add_argument(
        "--seed",
        type=seed(SEED_NUMPY - 2),  # the demo trains with seed, seed + 1 and seed + 2
        default=0,
        help="seed of the data, training and evaluation",
    )
    parser.add_argument(
        "--seeds",
        default=None,
        help="a seed sweep, e.g. 0-4: one demo per seed in OUT/seed-<n>/, then OUT/sweep.md",
    )
    parser.add_argument(
        "--jobs",
        type=integer(1, MAX_PROCESSES),
        default=1,
        help="seeds run at once in a sweep (each with its own --cores)",
    )
    parser.add_argument(
        "--base", type=path("model"), default=None, help="base model folder (default: the shipped one)"
    )
    parser.add_argument(
        "--sft-steps",
        type=integer(1, 10**9),
        default=None,
        help="optimizer steps of SFT (with --rebuild-base: of the base) (default: the recipe's max_steps)",
    )
    parser.add_argument(
        "--grpo-steps", type=integer(0, 10**9), default=None, help="override GRPO's max_steps (0 skips GRPO)"
    )
    parser.add_argument(
        "--design",
        choices=("transfer", "palette"),
        default="transfer",
        help="transfer: a base that counts every palette and SFT whose action data varies palettes "
        "and roles, built to carry to the held-out palette band; palette: the earlier one-palette "
        "demo, kept for the record (it learns a colour rule: docs/demo.md)",
    )
    for option, (what, default) in SCENE_OPTIONS.items():
        parser.add_argument(
            f"--{option}",
            type=integer(1, 1_000_000),
            default=None,
            help=f"scenes of {what}, x 5 tasks (default: {default})",
        )
    parser.add_argument(
        "--cores",
        type=integer(1, MAX_PROCESSES),
        default=2,
        help="CPU cores each demo trains on: SFT runs this many CPU processes with the batch split "
        "(GRPO and evaluation run on one thread; --cores 1 trains SFT in this process, on a GPU "
        "if there is one); the figures depend on it, so it is fixed rather than read off the "
        "machine (default: 2)",
    )
    parser.add_argument(
        "--rebuild-base",
        action="store_true",
        help="retrain the design's shipped base from scratch into OUT/base, then stop: counting on "
        "the demo's palette (recipes/demo-base-sft.yaml), then, for --design transfer, on every "
        "palette (recipes/demo-base-sft-palettes.yaml); use it with --base OUT/base",
    )
    parser.add_argument(
        "--palette-steps",
        type=integer(0, 10**9),
        default=None,
        help="with --rebuild-base: optimizer steps of the base's every-palette stage (default: the recipe's)",
    )
    parser.add_argument(
        "--quiet", "--no-progress", action="store_true", help="no progress bars (--no-progress: the same)"
    )
    add_verbose_argument(parser)  # a model through transformers: its own output is off unless asked


def demo_config(args):
    from rosetrain.demo import pipeline as demo

    config = demo.DemoConfig(
        out=Path(args.out),
        design=args.design,
        seed=args.seed,
        cores=args.cores,
        progress=not args.quiet,
        sft_steps=args.sft_steps,
        grpo_steps=args.grpo_steps,
    )
    if args.base:
        config.base = Path(args.base)
    for option in SCENE_OPTIONS:  # --heldout-scenes sets DemoConfig.heldout_scenes, ...
        field = option.replace("-", "_")
        if getattr(args, field) is not None:
            setattr(config, field, getattr(args, field))
    config.__post_init__()  # validate the values set above
    return config


def run(args) -> int:
    from rosetrain.core.errors import RosetrainError
    from rosetrain.demo import pipeline as demo

    if args.rebuild_base:
        out = demo.rebuild_base(
            Path(args.out),
            steps=args.sft_steps,
            cores=args.cores,
            palette_steps=args.palette_steps,
            design=args.design,
        )
        print(f"base model written to {out}; use it with: rosetrain demo --base {out}")
        return 0
    config = demo_config(args)
    if args.seeds is not None:
        from rosetrain.demo.sweep import parse_seeds, run_sweep

        if args.jobs < 1:
            raise RosetrainError(f"--jobs: expected >= 1, got {args.jobs}")
        sweep = run_sweep(config, parse_seeds(args.seeds), jobs=args.jobs)
        print(
            f"{sweep['all_targets_met']} of {len(sweep['seeds'])} seeds met every target; "
            f"report: {Path(args.out) / 'sweep.md'}"
        )
        return 0
    summary = demo.run_demo(config)
    from rosetrain.demo.report import final_table

    print("\n".join(final_table(summary, Path(args.out) / "report.md")))  # all figures: summary.json
    return 0
