"""``rosetrain score``: score a predictions file against a split.

    rosetrain score --data DIR --split test --predictions preds.jsonl --out runs/score

Writes every file the official ROSE evaluator writes (per_item_eval.jsonl,
error_cases.jsonl, evaluation_summary.json, summary_by_subset.csv,
summary_by_template.csv, coverage_by_subset_template.csv, table1_row.txt,
table2_row.txt), the official analysis scripts' files (scene_consistency_<split>.*;
with --bridges, global_click_* and matched_count_*: docs/scoring.md) plus
rosetrain's summary.md and CSV breakdowns into --out.
Imports the standard library, orjson, msgspec, numpy and rosetrain's scorer: never
torch, transformers or pandas. A split of 16 MB or more is read and scored in
chunks by --num-proc processes (default: the CPUs), with the same output bytes.
"""

from __future__ import annotations

import argparse
import sys

from rosetrain.commands import MAX_PROCESSES, add_bridges_flags, integer, path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=path("data"),
        required=True,
        help="a ROSE release folder (metadata_<split>.jsonl), a metadata .jsonl, or a Hub "
        "dataset hf://datasets/OWNER/NAME[@REVISION] (read from the local Hugging Face "
        "cache, downloaded into it when missing; HF_HUB_OFFLINE=1: the cache only)",
    )
    parser.add_argument("--split", default="test", help="split name (default: test)")
    parser.add_argument(
        "--predictions",
        type=path("file"),
        required=True,
        help='JSONL rows {"item_id", "raw_text", "model", "error"}',
    )
    parser.add_argument("--out", type=path("out-folder"), required=True, help="folder for the scored run")
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="score the items that have a prediction and report coverage",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="model name for the run (default: the one the predictions name, "
        "else the predictions file's name)",
    )
    parser.add_argument(
        "--display-name",
        default=None,
        help="name at the start of table1_row.txt / table2_row.txt (default: the model name)",
    )
    parser.add_argument(
        "--digits", type=integer(0, 10), default=1, help="decimals of the LaTeX table rows (default: 1)"
    )
    parser.add_argument(
        "--num-proc",
        type=integer(1, MAX_PROCESSES),
        default=None,
        help="processes that read and score the split, in chunks of 2 MB of lines (default: "
        "the CPUs this process may use; a split under 16 MB is scored in one); with 2 or more, "
        "half the summaries and analyses of 20,000 rows or more are computed in a process of "
        "their own",
    )
    add_bridges_flags(parser, "read")


def _check_flags(args: argparse.Namespace) -> None:
    from rosetrain.core.errors import RosetrainError

    if args.num_proc is not None and args.num_proc < 1:
        raise RosetrainError(f"--num-proc must be at least 1, got {args.num_proc}")
    if not 0 <= args.digits <= 10:
        raise RosetrainError(f"--digits must be 0 to 10, got {args.digits}")
    for flag, value in (("--model", args.model), ("--display-name", args.display_name)):
        if value is not None and not value.isprintable():
            raise RosetrainError(f"{flag}: {value!r} is not printable text")


def run(args: argparse.Namespace) -> int:
    import gc

    from rosetrain.core.allocator import numpy_without_huge_pages

    owns_process = getattr(args, "owns_process", False)
    if owns_process:
        numpy_without_huge_pages()  # before anything imports NumPy
    from rosetrain.scoring.batch import collector_paused

    with collector_paused():
        code = _run(args)
    if owns_process:
        # the process ends next, every object with it: its last collection would
        # walk the run's million objects first (0.04-0.08 s at 51,000 items)
        gc.freeze()
    return code


def _run(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from rosetrain.core.cpus import available_cpus
    from rosetrain.core.errors import RosetrainError
    from rosetrain.core.io import output_lock, remove_atomic_temps
    from rosetrain.data.hub import data_identity, resolve_data
    from rosetrain.data.predictions import check_same_data, predictions_model, read_predictions
    from rosetrain.data.release import split_files
    from rosetrain.reports.console import print_summary
    from rosetrain.scoring.batch import check_coverage
    from rosetrain.scoring.official_files import RunInfo
    from rosetrain.scoring.split import score_split
    from rosetrain.scoring.writer import write_scored_split

    _check_flags(args)
    data = resolve_data(args.data)
    metadata = split_files(data, args.split, args.bridges)[0]
    predictions = read_predictions(args.predictions)
    model = args.model or predictions_model(predictions, Path(args.predictions).stem)
    processes = args.num_proc or available_cpus()
    scored = score_split(data, args.split, args.bridges, predictions, model, processes)
    # after scoring, which hashed the files meanwhile: data that is not the
    # predictions' is named as such before any coverage error
    check_same_data(
        predictions, scored.fingerprint, Path(args.predictions), f"--data {args.data} (split {args.split})"
    )
    if not scored.expected["item_id"]:
        raise RosetrainError(f"--data {args.data}: split {args.split!r} has no items")
    if not predictions:  # not a partial run (--allow-partial would not help): no run at all
        raise RosetrainError(f"--predictions {args.predictions}: the file holds no prediction rows")
    check_coverage(scored.expected["item_id"], predictions, args.allow_partial)
    run_info = RunInfo(
        model=model,
        display_name=args.display_name,
        split=args.split,
        # absolute, not resolved: a Hub snapshot's file is a link to a blob with a hash for a name
        metadata_jsonl=os.path.abspath(metadata),
        predictions_jsonl=str(Path(args.predictions).resolve()),
        allow_partial=args.allow_partial,
        num_prediction_rows=len(predictions),
        digits=args.digits,
        data=data_identity(args.data, args.split),
    )
    with output_lock(args.out, "this scored run"):
        remove_atomic_temps(args.out)  # half-written files of a killed run
        try:
            summary = write_scored_split(
                args.out,
                scored.expected,
                scored.frame,
                scored.lines,
                run_info,
                scored.fingerprint,
                processes=processes,
            )
        except OSError as err:  # a folder we may not write, a full disk
            raise RosetrainError(
                f"--out {err.filename or args.out}: cannot write ({err.strerror or err})"
            ) from None
    print_summary(summary, args.out)
    if summary["coverage_rate"] is not None and summary["coverage_rate"] < 1:
        print(f"note: partial run, {summary['n']} of {summary['n_expected']} items scored", file=sys.stderr)
    return 0
