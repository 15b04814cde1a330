"""rosetrain generate --spec rose-protocol --out data/rose --split test --scenes 200 --seed 7"""

from __future__ import annotations

import json
import sys

from rosetrain.commands import MAX_PROCESSES, MAX_SCENES, integer, path, seed
from rosetrain.core.cpus import available_cpus


def add_arguments(parser) -> None:
    parser.add_argument(
        "--spec",
        type=path("config"),
        required=True,
        help="generator spec: a YAML file, or the name of a shipped one (rosetrain configs list spec)",
    )
    parser.add_argument(
        "--out", type=path("out-folder"), required=True, help="output folder (ROSE release layout + hf/)"
    )
    parser.add_argument(
        "--split", default="train", help="split name (letters, digits, '_', '-', '.'): metadata_<split>.jsonl"
    )
    parser.add_argument(
        "--scenes",
        type=integer(1, MAX_SCENES),
        required=True,
        help="number of scenes (tasks = scenes x templates)",
    )
    parser.add_argument("--seed", type=seed(), default=None, help="generator seed (default: the spec's)")
    parser.add_argument(
        "--num-proc",
        type=integer(1, MAX_PROCESSES),
        default=available_cpus(),
        help="worker processes (default: the CPUs this process may use)",
    )
    parser.add_argument("--formats", default="release,hf", help="comma list of: release, hf")
    parser.add_argument(
        "--shard-size",
        type=integer(1, MAX_SCENES),
        default=None,
        help="scenes per shard (default: automatic)",
    )
    parser.add_argument(
        "--exclude",
        type=path("file"),
        action="append",
        default=[],
        metavar="METADATA_JSONL",
        help="skip any scene that also appears in this split, as scenes of the spec's heldout_spec are skipped (repeatable)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="remake a split made with other settings: removes only the files its "
        "manifest (.parts/<split>.manifest.json) lists, never anything else",
    )
    parser.add_argument(
        "--shard",
        default=None,
        metavar="K/N",
        help="array job K of N (from 0): make only shards K, K+N, ... into --out "
        "(a folder per job); then join them with the same command and --merge",
    )
    parser.add_argument(
        "--merge",
        type=path("folder"),
        nargs="+",
        default=None,
        metavar="FOLDER",
        help="join the --out folders of all N --shard jobs of this same command into "
        "--out: the bytes a one-machine run writes",
    )
    parser.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: --num-proc processes; ray: one Ray task per shard on the cluster "
        "ray.init() finds (RAY_ADDRESS, else a local one); pip install 'rosetrain[ray]'",
    )
    parser.add_argument(
        "--push-to-hub",
        default=None,
        metavar="OWNER/NAME",
        help="then upload the folder's finished splits and its dataset card (README.md) to this "
        "Hub dataset repo (created if missing); needs a token (HF_TOKEN or `hf auth login`). "
        "Rerunning a finished command with it only pushes",
    )
    parser.add_argument("--private", action="store_true", help="with --push-to-hub: create the repo private")
    parser.add_argument(
        "--hub-revision", default=None, metavar="BRANCH", help="with --push-to-hub: push to this branch"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--json",
        action="store_true",
        help="end with the summary as one JSON object (for scripts), not a sentence",
    )


class _RefusePandas:
    """An import hook that refuses pandas, and only pandas."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas":
            raise ModuleNotFoundError("rosetrain generate does not use pandas", name=name)
        return None


def refuse_pandas() -> None:
    """pyarrow imports pandas (~0.5 CPU s, then inherited by every forked worker)
    the first time it converts a Python list, only to ask whether the list is a
    pandas object; generate never hands it one, and without pandas pyarrow skips
    that check. pyarrow remembers the answer for the life of the process, so this is
    for a process the command owns, never a caller's. (A None in ``sys.modules``
    would not do: pyarrow's compiled import takes the None for the module.)"""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _RefusePandas())


def run(args) -> int:
    from rosetrain.core.errors import RosetrainError
    from rosetrain.core.resources import find as find_config
    from rosetrain.data.generate import make_job, run_job
    from rosetrain.generators.spec import load_spec

    if args.merge is not None and (args.shard or args.engine != "local"):
        raise RosetrainError("--merge joins finished --shard jobs: it takes no --shard or --engine")
    if args.push_to_hub is not None:  # refused before any work: offline, no token, a bad repo id
        from rosetrain.data.publish import check_push

        if args.shard:
            raise RosetrainError(
                "--push-to-hub: a --shard job's folder is part of a split; push with --merge"
            )
        check_push(args.push_to_hub)
    if getattr(args, "owns_process", False) and args.engine == "local":  # Ray's driver may want pandas
        from rosetrain.core.allocator import arrow_on_system_allocator

        refuse_pandas()
        arrow_on_system_allocator()  # the workers fork with it: less kernel time per shard's table
    spec = load_spec(find_config("spec", args.spec))
    job = make_job(
        spec,
        args.out,
        args.split,
        args.scenes,
        args.seed,
        args.num_proc,
        [f.strip() for f in args.formats.split(",") if f.strip()],
        args.shard_size,
        args.exclude,
        shard=args.shard,
        engine=args.engine,
    )
    if args.merge is not None:
        from rosetrain.data.merge import merge

        summary = merge(job, args.merge, overwrite=args.overwrite, progress=not args.quiet)
    else:
        from rosetrain.data.disk import disk_note

        note = disk_note(job, sum(len(job.shard_indices(s)) for s in job.own_shards))
        if note:  # before anything is written: a split that fills the disk hours in helps nobody
            print(f"rosetrain generate: note: {note}", file=sys.stderr)
        summary = run_job(job, overwrite=args.overwrite, progress=not args.quiet)
    if job.shard_of is None:  # a --shard job's folder is a part: its --merge writes the card
        from rosetrain.data.card import card_for_job

        card = card_for_job(job, args.spec, args.out, args.shard_size, args.exclude)
        summary["card"] = None if card.path is None else str(card.path)
        if card.note:
            print(f"rosetrain generate: note: {card.note}", file=sys.stderr)
    if args.push_to_hub is not None:
        from rosetrain.data.publish import push_folder

        summary["pushed"] = push_folder(
            job.out_dir, args.push_to_hub, private=args.private, revision=args.hub_revision
        )
    print(json.dumps(summary) if args.json else summary_line(summary))
    return 0


def summary_line(summary: dict) -> str:
    """What was written, in the sentence style every command ends with."""
    part = f"shard {summary['shard']} of " if "shard" in summary else ""
    line = f"generated {part}split {summary['split']}: {summary['scenes']:,} scenes, {summary['rows']:,} rows in {summary['out']}"
    if summary.get("skipped_scenes"):
        line += f" ({summary['skipped_scenes']:,} scenes skipped)"
    if summary.get("merged"):
        line += f", merged from {summary['merged']} shard folders"
    if summary.get("card"):
        line += f"; card {summary['card']}"
    if summary.get("pushed"):
        line += f"; pushed to {summary['pushed']}"
    return line
