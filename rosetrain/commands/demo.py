"""rosetrain demo --out runs/demo: the main job, end to end on the CPU."""
from __future__ import annotations

import json
from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="runs/demo", help="output folder (rerun to resume)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", default=None, help="base model folder (default: the shipped one)")
    parser.add_argument("--sft-steps", type=int, default=None, help="override the SFT recipe's max_steps")
    parser.add_argument("--grpo-steps", type=int, default=None, help="override GRPO's max_steps (0 skips GRPO)")
    parser.add_argument("--heldout-scenes", type=int, default=None)
    parser.add_argument("--family-scenes", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--rebuild-base", action="store_true",
                        help="retrain the shipped base model from scratch (recipes/demo-base-sft.yaml), then stop")
    parser.add_argument("--no-progress", action="store_true")


def run(args) -> int:
    from rosetrain import demo

    if args.rebuild_base:
        out = demo.rebuild_base(Path(args.base) if args.base else demo.ASSET_BASE, threads=args.threads)
        print(f"base model written to {out}")
        return 0
    config = demo.DemoConfig(out=Path(args.out), seed=args.seed, threads=args.threads,
                             progress=not args.no_progress, sft_steps=args.sft_steps,
                             grpo_steps=args.grpo_steps)
    if args.base:
        config.base = Path(args.base)
    if args.heldout_scenes:
        config.heldout_scenes = args.heldout_scenes
    if args.family_scenes:
        config.family_scenes = args.family_scenes
    summary = demo.run_demo(config)
    print(json.dumps({name: t for name, t in summary["targets"].items()}, indent=1))
    return 0
