"""``rosetrain score``: score a predictions file against a split.

    rosetrain score --data DIR --split test --predictions preds.jsonl --out runs/score

Writes per_item_eval.jsonl, evaluation_summary.json, summary.md and CSV tables
into --out. Imports only the standard library and rosetrain's scorer.
"""
from __future__ import annotations

import argparse
import sys

from rosetrain.protocol import SHORT_NAME


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True,
                        help="a ROSE release folder (metadata_<split>.jsonl) or a metadata .jsonl")
    parser.add_argument("--split", default="test", help="split name (default: test)")
    parser.add_argument("--predictions", required=True,
                        help='JSONL rows {"item_id", "raw_text", "model", "error"}')
    parser.add_argument("--out", required=True, help="folder for the scored run")
    parser.add_argument("--allow-partial", action="store_true",
                        help="score the items that have a prediction and report coverage")
    bridges = parser.add_mutually_exclusive_group()
    bridges.add_argument("--bridges", dest="bridges", action="store_true", default=None,
                         help="also read the release's bridge files (metadata_<split>_*.jsonl)")
    bridges.add_argument("--no-bridges", dest="bridges", action="store_false",
                         help="never read bridge files")


def print_headline(summary: dict, out: str) -> None:
    """The per-template PASS/VALID/SOFT table and the gap (also printed by ``rosetrain eval``)."""
    def pct(value):
        return "-" if value is None else f"{100 * value:.1f}"

    print(f"scored {summary['n']} items (coverage {pct(summary['coverage'])}%) -> {out}")
    if summary.get("n_errors"):
        first = summary["error_examples"][0]
        print(f"  ERRORS: {summary['n_errors']} items have no answer (the request failed) and "
              f"are left out of every figure below; first: {first['item_id']}: {first['error']}")
    for template, stats in summary["templates"].items():
        print(f"  {SHORT_NAME.get(template, template):8s} n={stats['n']:<6d} "
              f"PASS {pct(stats['pass']):>5s}  VALID {pct(stats['valid']):>5s}  "
              f"SOFT {pct(stats['soft']):>5s}")
    print(f"  Avg {pct(summary['avg_pass'])}  Counting {pct(summary['counting_avg'])}  "
          f"Action {pct(summary['action_avg'])}  Gap {pct(summary['gap'])}")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rosetrain.data.release import load_split, read_predictions, split_fingerprint
    from rosetrain.io import output_lock
    from rosetrain.predictions import check_same_data
    from rosetrain.scoring.batch import score_predictions, write_scored_run

    golds = load_split(args.data, args.split, bridges=args.bridges)
    fingerprint = split_fingerprint(args.data, args.split, bridges=args.bridges)
    predictions = read_predictions(args.predictions)
    check_same_data(predictions, fingerprint, Path(args.predictions),
                    f"--data {args.data} (split {args.split})")
    rows = score_predictions(golds, predictions, allow_partial=args.allow_partial)
    with output_lock(args.out, "this scored run"):
        summary = write_scored_run(args.out, golds, rows, data_fingerprint=fingerprint)
    print_headline(summary, args.out)
    if summary["coverage"] is not None and summary["coverage"] < 1:
        print(f"note: partial run, {summary['n']} of {summary['n_expected']} items scored",
              file=sys.stderr)
    return 0
