"""How much of a step is padding, and how much more the slower of two ranks pads.

Builds the demo's SFT trainer as ``rosetrain train sft`` does (one process),
takes ``--batches`` batches of ``--batch`` rows from its DataLoader and prints:

- the share of a batch's text tokens that are padding (every row is padded to
  the batch's longest);
- with the batch split in two halves, as two ranks each collate their own
  rows: the longer half's padded length over the two halves' mean. A
  data-parallel step waits for the rank holding the batch's longest row, so a
  ceiling taken from steps of half a batch each padded to its own longest
  row overstates two processes by about this much (docs/benchmarks.md,
  "Where the two-core step goes").

    python experiments/speed/padding.py [--batches 200] [--batch 16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_step  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16, help="rows a step (global)")
    args = parser.parse_args()
    options = argparse.Namespace(
        model=str(train_step.ASSET_BASE_PALETTES),
        recipe=str(train_step.RECIPE),
        batch=args.batch,
        workers=0,
        device="cpu",
        set=[],
    )
    half = args.batch // 2
    padding, slower, mean = [], [], []
    with tempfile.TemporaryDirectory() as out:
        batches = iter(train_step.build_trainer(options, Path(out)).trainer.get_train_dataloader())
        for _ in range(args.batches):
            lengths = next(batches)["attention_mask"].sum(1).tolist()
            padding.append(1 - sum(lengths) / (max(lengths) * len(lengths)))
            first, second = max(lengths[:half]), max(lengths[half:])
            slower.append(max(first, second))
            mean.append((first + second) / 2)
    print(
        f"{args.batches} batches of {args.batch} rows: padding {100 * statistics.mean(padding):.1f}% of the "
        f"text tokens; the longer half's padded length {statistics.mean(slower) / statistics.mean(mean):.3f} "
        "times the halves' mean"
    )


if __name__ == "__main__":
    main()
