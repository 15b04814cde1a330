"""The table of a GRPO round's rdev curves, and issue 37 item 4's verdict on it.

Reads what ``grpo-vcnt-band.sh`` and ``grpo-curve.sh`` wrote under runs/TAG:
``cmp-sS-N/compare.json`` (checkpoint N against the SFT) and, for the last
step where that is missing, ``cmp-sS/compare.json`` (the final model). Prints one markdown row per
seed and step, GRPO - SFT in PASS points with the paired 95% interval (avg
PASS, then each template), and, with ``--against OTHER``, the paired
difference to another round at the same step (``fvd-sS-N``, written by
``rosetrain compare runs/OTHER/eval-sS-N-rdev runs/TAG/eval-sS-N-rdev --out
runs/TAG/fvd-sS-N``; at the last step ``fvd-sS-LAST`` compares the finals).

Item 4 asks +2 avg PASS with the interval above 0 on 3 of 5 seeds, on the
held-out band; rdev (its development split) decides what goes there. The last
lines count, at each step, the seeds that reach it on rdev
(docs/experiments.md, rounds 20, 22 and 23). ``--heldout`` adds the verdict
where item 4 is judged: the final models on the band's held-out splits, r and
rconf, as ``grpo-heldout.sh`` compared them (``runs/heldout/cmp-TAG-sS-SPLIT``;
round 33).

    python experiments/transfer/grpo_curves.py grpo-r22f 0 1 2 3 4 [--steps 300 600 900 1200 1500 1800] [--frontier] [--heldout]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rosetrain.core.protocol import SHORT_NAME  # noqa: E402
from rosetrain.reports.paired import with_interval  # noqa: E402

TEMPLATES = ("T4_CLICK_VISUAL_REGION", "T5_CLICK_COUNT_EXCLUSION", "T3_CLICK_LOCAL_NUMERIC",
             "T1_COUNT_GLOBAL", "T2_COUNT_LOCAL_NUMERIC")  # fmt: skip
GAIN, SEEDS_NEEDED = 0.02, 3  # item 4: +2 points, the interval above 0, on 3 of 5 seeds


def points(figure: dict) -> str:
    """A compare.json figure's paired difference in points, with its interval."""
    return with_interval(figure["delta"], figure["ci95"], signed=True)


def meets(figure: dict) -> bool:
    return figure["delta"] >= GAIN - 1e-9 and figure["ci95"][0] > 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tag", help="the round's folder under runs/ (TAG of grpo-vcnt-band.sh)")
    parser.add_argument("seeds", nargs="+", type=int)
    parser.add_argument("--steps", nargs="+", type=int, default=[300, 600, 900, 1200, 1500, 1800])
    parser.add_argument("--against", help="another round's TAG: add the paired difference column")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs")
    parser.add_argument(
        "--frontier",
        action="store_true",
        help="also the share of each template's groups passing all 8 samples",
    )
    parser.add_argument(
        "--heldout",
        action="store_true",
        help="also the final models on the held-out splits r and rconf (grpo-heldout.sh)",
    )
    args = parser.parse_args()
    folder, last = args.runs / args.tag, max(args.steps)
    header = ["seed", "step", "avg PASS", *(SHORT_NAME[t] for t in TEMPLATES)]
    if args.against:
        header.append(f"- {args.against}, avg PASS")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    reached: dict[int, list[int]] = {step: [] for step in args.steps}
    for seed in args.seeds:
        for step in args.steps:
            # A checkpoint's own comparison, else (at the last step) the final model's.
            names = [f"cmp-s{seed}-{step}", *([f"cmp-s{seed}"] if step == last else [])]
            path = next((p for n in names if (p := folder / n / "compare.json").is_file()), None)
            if path is None:
                continue
            compare = json.loads(path.read_text())
            cells = [points(compare["avg_pass"]), *(points(compare["templates"][t]) for t in TEMPLATES)]
            if args.against:
                other = folder / f"fvd-s{seed}-{step}" / "compare.json"
                cells.append(points(json.loads(other.read_text())["avg_pass"]) if other.is_file() else "")
            print(f"| {seed} | {step} | " + " | ".join(cells) + " |")
            if meets(compare["avg_pass"]):
                reached[step].append(seed)
    print()
    for step, seeds in reached.items():  # rdev decides which step goes to the held-out band
        verdict = "take it to the held-out band" if len(seeds) >= SEEDS_NEEDED else f"{SEEDS_NEEDED} needed"
        print(f"step {step}: +2 avg PASS, interval above 0, on seeds {seeds or 'none'} ({verdict})")
    if args.frontier:
        print_frontier(folder, args.seeds)
    if args.heldout:
        print_heldout(args.runs / "heldout", args.tag, args.seeds)
    return 0


HELDOUT_SPLITS = ("r", "rconf")  # 500 and 2,000 items of the band, never used to choose


def print_heldout(folder: Path, tag: str, seeds: list[int]) -> None:
    """The final models against their SFT on each held-out split: avg PASS,
    counting, action, the gap and V-Clk, and item 4's count of seeds there."""
    print("\n| split | seed | items | avg PASS | Counting | Action | Gap | V-Clk |")
    print("|---|---|---|---|---|---|---|---|")
    reached: dict[str, list[int]] = {split: [] for split in HELDOUT_SPLITS}
    for split in HELDOUT_SPLITS:
        for seed in seeds:
            path = folder / f"cmp-{tag}-s{seed}-{split}" / "compare.json"
            if not path.is_file():
                continue
            compare = json.loads(path.read_text())
            figures = [compare[key] for key in ("avg_pass", "counting_avg", "action_avg", "gap")]
            cells = [points(f) for f in [*figures, compare["templates"]["T4_CLICK_VISUAL_REGION"]]]
            print(f"| {split} | {seed} | {compare['n_items']} | " + " | ".join(cells) + " |")
            if meets(compare["avg_pass"]):
                reached[split].append(seed)
    print()
    for split, passing in reached.items():
        verdict = "item 4 met" if len(passing) >= SEEDS_NEEDED else f"{SEEDS_NEEDED} needed"
        print(f"{split}: +2 avg PASS, interval above 0, on seeds {passing or 'none'} ({verdict})")


def print_frontier(folder: Path, seeds: list[int]) -> None:
    """What GRPO learns on its own prompts: per template, the share of the
    groups the frontier filter saw whose 8 samples all passed, in each quarter
    of the run (``sS/frontier.jsonl``)."""
    print("\n| seed | template | groups seen | all pass, quarter 1 | 2 | 3 | 4 |")
    print("|---|---|---|---|---|---|---|")
    for seed in seeds:
        path = folder / f"s{seed}" / "frontier.jsonl"
        if not path.is_file():
            continue
        counts: list[dict] = []
        for line in (json.loads(text) for text in path.read_text().splitlines() if text.strip()):
            if counts and line["step"] < counts[-1]["step"]:  # a resume or a fresh start, logged
                counts = [c for c in counts if c["step"] < line["step"]]  # before rosetrain trimmed it
            if "templates" in line:
                counts.append(line)
        last = max((line["step"] for line in counts), default=0)
        seen: dict[str, list[list[int]]] = {}
        for line in counts:
            quarter = min(3, line["step"] * 4 // (last + 1))
            for template, count in line["templates"].items():
                cells = seen.setdefault(template, [[0, 0] for _ in range(4)])
                cells[quarter][0] += count.get("all_pass", 0)
                cells[quarter][1] += count.get("seen", 0)
        for template, cells in sorted(seen.items()):
            shares = [f"{100 * a / n:.0f}%" if n else "" for a, n in cells]
            print(f"| {seed} | {template} | {sum(n for _, n in cells)} | " + " | ".join(shares) + " |")


if __name__ == "__main__":
    sys.exit(main())
