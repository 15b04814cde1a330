"""``rosetrain export-lmms-eval --data DIR --split test --out TASKDIR [--task NAME]``.

Writes an lmms-eval task folder for the split (``lmms-eval --include_path
TASKDIR --tasks NAME``), scored by rosetrain's scorer. With ``--samples``, turns
lmms-eval's ``--log_samples`` output back into a predictions file for
``rosetrain score`` instead. Imports neither lmms-eval nor torch.
"""

from __future__ import annotations

import argparse

from rosetrain.commands import MAX_TOKENS, add_bridges_flags, integer, path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=path("data"),
        help="the split's folder (metadata_<split>.jsonl + images/), a .jsonl, or "
        "hf://datasets/OWNER/NAME[@REVISION] (read from the local Hugging Face cache)",
    )
    parser.add_argument("--split", default="test", help="split name (default: test)")
    parser.add_argument(
        "--out",
        type=path("out-folder"),
        required=True,
        help="task folder to write (or, with --samples, the predictions .jsonl)",
    )
    parser.add_argument(
        "--task", default=None, help="task name for lmms-eval --tasks (default: rosetrain_<split>)"
    )
    parser.add_argument(
        "--max-new-tokens",
        type=integer(1, MAX_TOKENS),
        default=256,
        help="generation limit of the task (default: 256, as rosetrain eval)",
    )
    add_bridges_flags(parser, "read")
    parser.add_argument(
        "--samples",
        type=path("file"),
        default=None,
        metavar="PATH",
        help="an lmms-eval --output_path folder (or one *_samples_<task>.jsonl) of a run of the task "
        "folder --task-dir: write its answers to --out as rosetrain predictions",
    )
    parser.add_argument(
        "--task-dir",
        type=path("folder"),
        default=None,
        help="with --samples: the exported task folder the run used",
    )
    parser.add_argument("--model", default=None, help="with --samples: the model name the predictions carry")


def run(args: argparse.Namespace) -> int:
    from rosetrain.core.errors import RosetrainError
    from rosetrain.data.hub import resolve_split
    from rosetrain.integrations.lmms_eval import export_task

    if args.samples is not None:
        return write_predictions(args)
    if not args.data:
        raise RosetrainError("--data is required (the split to export)")
    if args.max_new_tokens < 1:
        raise RosetrainError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    yaml_path = export_task(
        resolve_split(args.data, "--data"),
        args.split,
        args.out,
        task=args.task,
        bridges=args.bridges,
        max_new_tokens=args.max_new_tokens,
    )
    task = yaml_path.stem
    print(f"wrote {yaml_path}")
    print(
        f"run: lmms-eval --include_path {yaml_path.parent} --tasks {task} --model ... --log_samples --output_path OUT"
    )
    return 0


def write_predictions(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rosetrain.core.errors import RosetrainError
    from rosetrain.core.io import atomic_write, output_lock
    from rosetrain.core.jsonio import jsonl_bytes
    from rosetrain.integrations.lmms_eval import predictions_from_samples

    if not args.task_dir:
        raise RosetrainError("--samples needs --task-dir (the task folder the lmms-eval run used)")
    rows = predictions_from_samples(args.samples, args.task_dir, model=args.model)
    out = Path(args.out)
    if out.is_dir():
        raise RosetrainError(
            f"--out {out}: a folder; with --samples, --out is the predictions .jsonl to write"
        )
    with output_lock(out.parent, "these predictions"):  # replaces only a file rosetrain wrote
        atomic_write(out, jsonl_bytes(rows))
    print(f"wrote {len(rows)} predictions -> {args.out}")
    return 0
