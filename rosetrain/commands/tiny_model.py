"""``rosetrain tiny-model --out models/tiny [--size tiny|small] [--seed 0]``."""
from __future__ import annotations

import argparse

SIZES = ("tiny", "small")  # mirrors rosetrain.models.tiny.SIZES without importing torch here


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="folder to write (replaced if it exists)")
    parser.add_argument("--size", choices=SIZES, default="tiny",
                        help="tiny: for tests (<1M parameters); small: for the demo (~2M)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and tokenizer corpus")


def run(args: argparse.Namespace) -> int:
    from rosetrain.models.tiny import build_tiny_model, describe

    path = build_tiny_model(args.out, size=args.size, seed=args.seed)
    counts = describe(path)
    print(f"wrote {path} ({args.size}, seed {args.seed}): {counts['parameters']:,} parameters "
          f"({counts['vision_parameters']:,} vision, {counts['language_parameters']:,} language)")
    return 0
