"""``rosetrain train sft|grpo --recipe R.yaml [--set key=value ...]``.

Also runs under ``accelerate launch [--config_file recipes/accelerate/X.yaml]
-m rosetrain train ...``: accelerate starts one process per GPU and the
trainers pick the distributed setup up from the environment.
"""

from __future__ import annotations

import argparse
import logging

from rosetrain.commands import path
from rosetrain.core.verbosity import add_verbose_argument
from rosetrain.train.recipe import METHODS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("method", choices=METHODS, help="sft (SFTTrainer) or grpo (GRPOTrainer)")
    parser.add_argument(
        "--recipe",
        "--config",  # what TRL's scripts call it (trl sft --config x.yaml)
        type=path("config"),
        required=True,
        help="a recipe YAML file, or the name of a shipped one (rosetrain configs list recipe); "
        "--config is the same option, as in TRL's scripts",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe key, nested with dots (lora.r=8, data.folder=DIR); "
        "the value is YAML (5e-7, null, true, [a, b]), or the text as written for a key "
        "that takes only text; repeatable",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate the recipe, model path and data, then stop before training",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar (the trainer's; --set trl.disable_tqdm=true)"
    )
    parser.epilog = recipe_keys_epilog()
    add_verbose_argument(parser)  # a model through transformers: its own output is off unless asked


def recipe_keys_epilog() -> str:
    """The recipe keys --set takes, in one paragraph (recipes/README.md and the
    shipped recipes give each one's default and help)."""
    from rosetrain.core.config import valid_keys
    from rosetrain.train.recipe import NOT_KEYS, SECTIONS, Recipe

    keys = []
    for name in valid_keys(Recipe, NOT_KEYS):
        if name == "trl":  # said last: it takes any TRL field
            continue
        section = SECTIONS.get(name)
        keys.append(f"{name}.{{{', '.join(valid_keys(section))}}}" if section else name)
    return (
        f"recipe keys (a recipe's YAML, or --set KEY=VALUE): {'; '.join(keys)}; "
        "trl.KEY: any other TRL SFTConfig / GRPOConfig field (--set trl.optim=adafactor). "
        "Each key's default and meaning: recipes/README.md, or a shipped recipe "
        "(rosetrain configs copy recipe tiny-sft .)."
    )


# TRL's own names for what a recipe key says otherwise
TRL_ALIASES = {"resume_from_checkpoint": "resume", "model_name_or_path": "model"}


def rewrite_argv(argv: list[str]) -> list[str]:
    """TRL's scripts take each config field as a flag (``--learning_rate 1e-4``,
    ``--max-steps=10``, ``--bf16``); here such a flag is the ``--set`` that does
    the same: a recipe key, else ``trl.KEY`` (a TRL field, checked with the recipe).
    A flag without a value is ``true``. The command's own options are left as they are."""
    own = {option for action in _own_parser()._actions for option in action.option_strings}
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        flag, sep, value = token.partition("=")
        key = flag[2:].replace("-", "_")
        named = bool(key) and all(part.isidentifier() for part in key.split("."))
        if not (token.startswith("--") and named and flag not in own):
            out.append(token)
            i += 1
            continue
        if not sep:
            following = argv[i + 1] if i + 1 < len(argv) else None
            if following is not None and not following.startswith("--"):
                value, i = following, i + 1
            else:
                value = "true"
        out += ["--set", f"{recipe_key(key)}={value}"]
        i += 1
    return out


def recipe_key(name: str) -> str:
    """The recipe key a TRL field name sets: itself, its alias, else ``trl.NAME``."""
    from rosetrain.core.config import valid_keys
    from rosetrain.train.recipe import NOT_KEYS, Recipe

    name = TRL_ALIASES.get(name, name)
    known = name.split(".")[0] in valid_keys(Recipe, NOT_KEYS)  # lora.r: a recipe section's key
    return name if known else f"trl.{name}"


def _own_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=True)
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from rosetrain.core.resources import find as find_config
    from rosetrain.core.resources import shipped as shipped_config
    from rosetrain.core.resources import shipped_path
    from rosetrain.train.recipe import load_recipe

    recipe_path = find_config("recipe", args.recipe)  # a path, or a shipped recipe's name
    overrides = [*args.overrides, *(["trl.disable_tqdm=true"] if args.quiet else [])]
    recipe = load_recipe(recipe_path, overrides, method=args.method)  # fails in < 1 s
    recipe.model = shipped_path(recipe.model)  # a shipped recipe's base model, from any directory
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
        loss, seconds = summary.get("train_loss"), summary.get("train_runtime")
        print(
            f"trained {summary['global_step']} steps"
            + (f" in {duration(seconds)}" if isinstance(seconds, (int, float)) else "")
            + (f", mean loss {loss:.4f}" if isinstance(loss, float) else "")
            + f"; final model: {summary['final']}"
            + (f"; merged: {summary['merged']}" if "merged" in summary else "")
        )
    return 0


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"
