"""``rosetrain tiny-model --out models/tiny [--size tiny|small|medium] [--family qwen2-vl|qwen2.5-vl|qwen3-vl] [--seed 0]``."""

from __future__ import annotations

import argparse

from rosetrain.commands import SEED_NUMPY, check_out_folder, path, seed
from rosetrain.core.verbosity import add_verbose_argument
from rosetrain.models.tiny import MODEL_FAMILIES, SIZES  # no torch at import: the CLI starts fast


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=path("out-folder"),
        required=True,
        help="folder to write (a model folder rosetrain wrote there is replaced; anything else is refused)",
    )
    parser.add_argument(
        "--size",
        choices=list(SIZES),
        default="tiny",
        help="tiny: for tests (<1M parameters); small: for the demo (~2.5M); medium: a larger "
        "stand-in (~12M, a CPU step about 5x small's)",
    )
    parser.add_argument(
        "--family",
        choices=MODEL_FAMILIES,
        default="qwen2-vl",
        help="qwen2.5-vl: the architecture of the Qwen2.5-VL recipes (windowed vision "
        "attention); qwen3-vl gives each vision token an absolute position (the "
        "demo's); its images should be multiples of 32 px, Qwen2(.5)-VL's of 28 px",
    )
    parser.add_argument(
        "--seed", type=seed(SEED_NUMPY), default=0, help="seed of the weights and tokenizer corpus"
    )
    add_verbose_argument(parser)  # a model through transformers: its own output is off unless asked


def run(args: argparse.Namespace) -> int:
    from rosetrain.models.tiny import build_tiny_model, describe

    check_out_folder(args.out, "--out")  # before the build: a folder it cannot write is refused at once
    path = build_tiny_model(args.out, size=args.size, seed=args.seed, family=args.family)
    counts = describe(path)
    print(
        f"wrote {path} ({args.family} {args.size}, seed {args.seed}): {counts['parameters']:,} parameters "
        f"({counts['vision_parameters']:,} vision, {counts['language_parameters']:,} language)"
    )
    return 0
