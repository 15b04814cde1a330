"""``rosetrain signal --model M --data SPLIT``: would GRPO have signal here?

Samples k completions per prompt with a GRPO recipe's sampling settings (by
default the demo's, recipes/demo-grpo.yaml), grades them with the rewards'
scorer, and prints per template pass@1 (greedy), pass@k, the share of prompts
whose k samples all agree (no GRPO signal) and the share that greedy fails
but a sample passes, then what that predicts.
"""

from __future__ import annotations

import argparse

from rosetrain.commands import SEED_NUMPY, check_out_folder, integer, path, resolve_model, seed
from rosetrain.core.verbosity import add_verbose_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        type=path("model"),
        required=True,
        help="model folder or Hub id (the policy GRPO would start from)",
    )
    parser.add_argument(
        "--data",
        type=path("data"),
        required=True,
        help="split folder (release layout, e.g. from rosetrain generate), a metadata .jsonl, "
        "or hf://datasets/OWNER/NAME[@REVISION] (read from the local Hugging Face cache)",
    )
    parser.add_argument("--split", default="test", help="split name")
    parser.add_argument(
        "--recipe",
        type=path("config"),
        default=None,
        help="GRPO recipe whose sampling settings to use (default: the demo's demo-grpo.yaml)",
    )
    parser.add_argument(
        "--k",
        type=integer(1, 65536),
        default=None,
        help="samples per prompt (default: the recipe's num_generations)",
    )
    parser.add_argument("--limit", type=integer(1, 10**12), default=None, help="the first N items only")
    parser.add_argument("--batch-size", type=integer(1, 65536), default=8, help="prompts per generate call")
    parser.add_argument("--seed", type=seed(SEED_NUMPY), default=0, help="sampling seed")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--out", type=path("out-folder"), default=None, help="folder for signal.json and signal.md"
    )
    add_verbose_argument(parser)  # a model through transformers: its own output is off unless asked


def run(args: argparse.Namespace) -> int:
    import json
    import tempfile

    from rosetrain.core.io import atomic_write, output_lock
    from rosetrain.core.resources import find as find_config
    from rosetrain.curriculum.signal import TransformersSampler, signal_check, signal_table
    from rosetrain.data.hub import resolve_split
    from rosetrain.data.release import select_records, with_image_paths
    from rosetrain.demo.pipeline import RECIPES
    from rosetrain.train.recipe import load_recipe

    if args.out is not None:  # before the model runs: the folder is written only at the end
        check_out_folder(args.out, "--out")
    recipe_path = find_config("recipe", args.recipe) if args.recipe else RECIPES / "demo-grpo.yaml"
    grpo = load_recipe(recipe_path, [f"model={args.model}"]).grpo
    k = args.k or grpo.num_generations
    # a GRPO spec may weight a training-only template (V-Cnt, Excl-Cnt): the rewards' scorer grades it
    records, root = select_records(resolve_split(args.data, "--data"), args.split, args.limit, training=True)
    args.model = resolve_model(args.model)  # a run folder: its final model
    import torch

    torch.manual_seed(args.seed)
    with tempfile.TemporaryDirectory() as scratch:
        sampler = TransformersSampler(
            args.model,
            temperature=grpo.temperature,
            top_p=grpo.top_p,
            max_new_tokens=grpo.max_completion_length,
            output_dir=scratch,
        )
        summary = signal_check(
            with_image_paths(records, root), sampler, k, args.batch_size, progress=not args.quiet
        )
    summary["settings"] = {
        "model": args.model,
        "data": args.data,
        "split": args.split,
        "recipe": str(recipe_path),
        "temperature": grpo.temperature,
        "top_p": grpo.top_p,
        "max_completion_length": grpo.max_completion_length,
        "seed": args.seed,
    }
    table = signal_table(summary)
    print(table)
    print()
    print(summary["prediction"])
    if args.out:
        with output_lock(args.out, "this signal check") as out:
            atomic_write(out / "signal.json", json.dumps(summary, indent=2))
            atomic_write(out / "signal.md", f"# Pre-RL signal check\n\n{table}\n\n{summary['prediction']}\n")
    return 0
