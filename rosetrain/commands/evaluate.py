"""``rosetrain eval``: run a model over a split, writing predictions as it goes, then score.

    rosetrain eval --model Qwen/Qwen2.5-VL-3B-Instruct --data data/heldout --split test --out runs/base
    rosetrain eval --suite eval/heldout.yaml --model runs/sft/checkpoint-final --out runs/sft
    rosetrain eval --runner openai --base-url http://127.0.0.1:8000/v1 --model my-model \\
        --data data/rose --out runs/api

The run folder gets ``predictions.jsonl`` (appended item by item, so a rerun
of the same command skips what is done), ``eval_run.json`` (what ran and how
fast), and what ``rosetrain score`` writes (``per_item_eval.jsonl``,
``evaluation_summary.json``, Markdown and CSV tables). The work is done by
``rosetrain.evaluation``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rosetrain.commands import (
    MAX_PROCESSES,
    MAX_TOKENS,
    add_bridges_flags,
    integer,
    number,
    path,
    resolve_model,
)
from rosetrain.core.errors import RosetrainError
from rosetrain.core.verbosity import add_verbose_argument
from rosetrain.runners import RUNNERS
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        type=path("model"),
        required=True,
        help="Hub id or local folder (a LoRA adapter folder too); for --runner "
        "openai the endpoint's model name",
    )
    parser.add_argument(
        "--suite",
        type=path("config"),
        help="an evaluation suite naming --data and --split: a YAML file, or the name of "
        "a shipped one (rosetrain configs list suite)",
    )
    parser.add_argument(
        "--data",
        type=path("data"),
        help="a ROSE release folder (metadata_<split>.jsonl + images/), "
        "one metadata .jsonl file beside its images/, or a Hub dataset "
        "hf://datasets/OWNER/NAME[@REVISION] (read from the local Hugging Face "
        "cache, downloaded into it when missing; HF_HUB_OFFLINE=1: the cache only)",
    )
    parser.add_argument("--split", help="split name (default: test, or the suite's)")
    parser.add_argument(
        "--out", type=path("out-folder"), required=True, help="run folder (a rerun resumes in it)"
    )
    parser.add_argument(
        "--runner",
        default="transformers",
        choices=RUNNERS.names(),
        help="transformers: the model in this process (CPU or GPU); vllm: a GPU; openai: an "
        "OpenAI-compatible endpoint (--base-url)",
    )
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key (default OPENAI_API_KEY)",
    )
    parser.add_argument(
        "--batch-size",
        type=integer(1, 65536),
        help="items per generate call (default: transformers 8, vllm 256); for openai, "
        "the items a fresh run tries before giving up if all fail (32)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=integer(1, MAX_TOKENS),
        help=f"tokens an answer may take (default: {DEFAULT_MAX_NEW_TOKENS}, or the suite's)",
    )
    parser.add_argument("--limit", type=integer(1, 10**12), help="only the first N items of the split")
    parser.add_argument(
        "--items",
        type=Path,
        metavar="FILE",
        help="only these items: a file of item ids, one a line, or a training run's "
        "heldout_eval.jsonl (the items its held-out evaluation scored)",
    )
    parser.add_argument(
        "--concurrency",
        type=integer(1, MAX_PROCESSES),
        default=8,
        help="requests in flight at once (openai runner)",
    )
    parser.add_argument(
        "--request-timeout",
        type=number(0, 86400, low_open=True),
        default=120.0,
        help="seconds per request before it is retried (openai runner)",
    )
    parser.add_argument(
        "--max-retries",
        type=integer(0, 100),
        default=6,
        help="retries of a request after 429/5xx/timeouts (openai runner)",
    )
    parser.add_argument(
        "--max-error-rate",
        type=number(0, 1),
        default=0.0,
        help="share of items (0 to 1) allowed to end without an answer after "
        "retries; errored items are left out of the figures either way "
        "(default 0: any such item makes eval exit non-zero)",
    )
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow the model's own Python code to run (off by default)",
    )
    parser.add_argument(
        "--threads",
        type=integer(1, MAX_PROCESSES),
        default=None,
        help="torch CPU threads of the transformers runner (default: 1 on a machine without a "
        "CUDA GPU: a small model answers faster on one thread than with OpenMP's default, "
        "140 items of the demo's model: 10-11 s on 1 thread, 19-21 s on 2, on two busy cores; "
        "torch's default with a GPU); give the core count for a large model on a CPU",
    )
    parser.add_argument(
        "--quiet", "--no-progress", action="store_true", help="no progress bar (--no-progress: the same)"
    )
    add_bridges_flags(parser, "run")
    add_verbose_argument(parser)  # a model through transformers: its own output is off unless asked


def resolve_data(args: argparse.Namespace) -> tuple[Path, str, int | None, int]:
    """(data dir, split, limit, max_new_tokens) from the flags and the suite; flags win."""
    from rosetrain.core.resources import find as find_config
    from rosetrain.evaluation.evaluate import load_suite

    suite = load_suite(find_config("suite", args.suite)) if args.suite else None
    if args.data:
        from rosetrain.data.hub import resolve_split

        data = resolve_split(args.data, "--data")
    elif suite:
        data = suite.data_dir()
    else:
        raise RosetrainError("give --data DIR (a ROSE release folder) or --suite eval/X.yaml")
    split = args.split or (suite.split if suite else "test")
    limit = args.limit if args.limit is not None else (suite.limit if suite else None)
    max_new_tokens = (
        args.max_new_tokens or (suite.max_new_tokens if suite else None) or DEFAULT_MAX_NEW_TOKENS
    )
    return data, split, limit, max_new_tokens


def read_item_ids(path: Path) -> list[str]:
    """Item ids from ``--items``: one a line, or the ``item_ids`` of the last
    evaluation a training run logged in its heldout_eval.jsonl."""
    import json

    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as err:
        raise RosetrainError(f"--items {path}: cannot read it ({err})", argument="items") from None
    if lines and lines[-1].startswith("{"):
        try:
            ids = json.loads(lines[-1])["item_ids"]
        except (ValueError, KeyError, TypeError):
            raise RosetrainError(
                f"--items {path}:{len(lines)}: a JSON line without item_ids; give a file of item ids, "
                "one a line, or a training run's heldout_eval.jsonl",
                argument="items",
            ) from None
        lines = [str(i) for i in ids]
    if not lines:
        raise RosetrainError(f"--items {path}: no item ids in it", argument="items")
    return lines


def eval_threads(args: argparse.Namespace) -> int | None:
    """The torch CPU threads to set (None: leave torch's default): --threads, else 1
    for the transformers runner on a machine without a CUDA GPU."""
    if args.threads is not None:
        if args.threads < 1:
            raise RosetrainError(f"--threads must be at least 1, got {args.threads}")
        return args.threads
    if args.runner != "transformers":
        return None
    import torch

    return None if torch.cuda.is_available() else 1


def say_how_the_run_went(out: Path) -> None:
    """What the scores alone would hide: answers the token limit cut off while
    thinking (they score as empty), and a rerun of a finished eval that asked
    the model nothing ("scored 100 items" would read as 100 answered again)."""
    import json

    from rosetrain.evaluation.evaluate import PREDICTIONS_FILE, RUN_FILE

    try:
        stats = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(stats, dict):
        return
    if stats.get("items_cut_thinking"):
        print(
            f"{stats['items_cut_thinking']} answers were cut off while thinking (<think> without "
            f"</think>, scored as empty): raise --max-new-tokens (this run: {stats.get('max_new_tokens')})"
        )
    if stats.get("items_run") != 0 or stats.get("items_failed"):
        return  # the model was asked something this time
    if stats.get("items_skipped"):
        print(
            f"nothing to run: all {stats['items_skipped']} items already have answers in "
            f"{out / PREDICTIONS_FILE}; scored them again (another --out runs the model afresh)"
        )


def run(args: argparse.Namespace) -> int:
    from rosetrain.evaluation.evaluate import check_error_rate, evaluate

    threads = eval_threads(args)
    # a process-wide setting: only in the command line's own process, or when asked for
    if threads is not None and (args.threads is not None or getattr(args, "owns_process", False)):
        import torch

        torch.set_num_threads(threads)
    from rosetrain.reports.console import print_summary

    data, split, limit, max_new_tokens = resolve_data(args)
    if args.runner != "openai":  # a local model that cannot load is refused before the run folder is made
        args.model = resolve_model(args.model)  # a run folder: its final model
    options = (
        {"timeout_s": args.request_timeout, "max_retries": args.max_retries}
        if args.runner == "openai"
        else None
    )
    summary = evaluate(
        args.model,
        data,
        split,
        args.out,
        runner=args.runner,
        limit=limit,
        items=None if args.items is None else read_item_ids(args.items),
        batch_size=args.batch_size,
        max_new_tokens=max_new_tokens,
        concurrency=args.concurrency,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        trust_remote_code=args.trust_remote_code,
        bridges=args.bridges,
        progress=not args.quiet,
        runner_options=options,
        max_error_rate=1.0,
    )  # checked after printing
    say_how_the_run_went(Path(args.out))
    print_summary(summary, args.out)  # the same table `rosetrain score` prints
    check_error_rate(summary, args.max_error_rate, Path(args.out))
    return 0
