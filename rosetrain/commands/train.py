"""``rosetrain train sft|grpo --recipe R.yaml [--set key=value ...]``.

Also runs under ``accelerate launch [--config_file recipes/accelerate/X.yaml]
-m rosetrain train ...``: accelerate starts one process per GPU and the
trainers pick the distributed setup up from the environment.
"""

from __future__ import annotations

import argparse
import logging

from rosetrain.commands import path
from rosetrain.train.recipe import METHODS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", choices=METHODS, help="sft (SFTTrainer) or grpo (GRPOTrainer)")
    parser.add_argument(
        "--recipe",
        type=path("config"),
        required=True,
        help="a recipe YAML file, or the name of a shipped one (rosetrain configs list recipe)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe key, nested with dots (lora.r=8, data.folder=DIR); "
        "the value is YAML (5e-7, null, true, [a, b]); repeatable",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate the recipe, model path and data, then stop before training",
    )


def run(args: argparse.Namespace) -> int:
    from rosetrain.core.resources import find as find_config
    from rosetrain.core.resources import shipped as shipped_config
    from rosetrain.train.recipe import load_recipe

    recipe_path = find_config("recipe", args.recipe)  # a path, or a shipped recipe's name
    recipe = load_recipe(recipe_path, args.overrides, method=args.method)  # fails in < 1 s
    if recipe.data.spec is not None:  # a spec path that exists wins; else the shipped spec of that name
        shipped_spec = shipped_config("spec", recipe.data.spec)
        if shipped_spec is not None:
            recipe.data.spec = str(shipped_spec)
    logging.basicConfig(format="%(message)s")
    from rosetrain.train.check import check

    checked = check(recipe)
    if args.check:
        print(
            f"recipe {args.recipe}: OK ({recipe.method}, model {recipe.model}, "
            f"{len(checked.heldout)} held-out items); "
            + (
                f"resumes from {checked.resume}"
                if checked.resume
                else f"starts afresh in {recipe.output_dir}"
            )
        )
        return 0
    from rosetrain.train import train

    summary = train(recipe, checked)
    if summary["is_main_process"]:
        loss = summary.get("train_loss")
        print(
            f"trained {summary['global_step']} steps"
            + (f", mean loss {loss:.4f}" if isinstance(loss, float) else "")
            + f"; final model: {summary['final']}"
            + (f"; merged: {summary['merged']}" if "merged" in summary else "")
        )
    return 0
