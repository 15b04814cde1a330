"""Scorer throughput: items/s of rosetrain.scoring on 100,000 predictions.

The predictions are built from the real ROSE v0.1 rows vendored in tests/data/rose-v0.1
(or --data): a deterministic mix of gold answers, wrong answers (a click
dropped, moved or added, a count off by one, a duplicate click) and malformed
ones (prose around the answer, empty, None, truncated, unicode, a long ramble).

The floor, measured in the same run on the same inputs, is the least a PASS
checker can do: one regex pass pulling CLICK cells and the COUNT/SUBMIT number,
then a set comparison against the gold set (golds prepared beforehand for both).
Prints: figure (scorer items/s), floor (items/s), ratio (figure / floor;
target >= 0.5).

    python benchmarks/score.py [--n 100000] [--data DIR_OR_JSONL ...] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rosetrain.protocol import CLICK_COUNT, COUNT, format_answer  # noqa: E402
from rosetrain.scoring import prepare_gold, score_item  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "rose-v0.1"


def load_golds(paths: list[Path]) -> list[dict]:
    files = [p for path in paths
             for p in (sorted(path.glob("*.jsonl")) if path.is_dir() else [path])]
    golds = [json.loads(line) for f in files for line in f.open(encoding="utf-8") if line.strip()]
    if not golds:
        raise SystemExit(f"no gold rows found in {[str(p) for p in paths]}")
    return golds


def _wrong_answer(gold, rng: random.Random) -> str:
    clicks = sorted(gold.gold_clicks)
    if gold.mode == COUNT:
        return format_answer(COUNT, count=max(0, gold.gold_count + rng.choice((-1, 1, 2))))
    choice = rng.randrange(4)
    if choice == 0 and clicks:
        clicks = clicks[1:]                                      # a target missed
    elif choice == 1 and clicks:
        r, c = clicks[0]
        clicks[0] = (r, c + 1 if c < gold.cols else c - 1)       # a near miss
    elif choice == 2:
        clicks.append((rng.randint(1, gold.rows), rng.randint(1, gold.cols)))  # an extra
    else:
        tokens = [f"CLICK(R{r},C{c})" for r, c in clicks + clicks[:1]]  # a duplicate
        tokens.append("DONE" if gold.mode != CLICK_COUNT else f"SUBMIT({len(clicks)})")
        return "; ".join(tokens)
    return format_answer(gold.mode, clicks)


def _malformed_answer(answer: str, rng: random.Random) -> str | None:
    choice = rng.randrange(7)
    return [
        f"The answer is {answer}.",
        "",
        None,
        answer[: max(1, len(answer) // 2)],
        answer.lower().replace(",", " , ").replace("(", "( "),   # valid: case and spaces
        "答案：" + answer + " ✅",
        "I think there are several odd cells here; " * 20,
    ][choice]


def build_predictions(golds: list[dict], n: int, seed: int) -> list[tuple[object, object]]:
    """(prepared gold, raw_text) pairs: 50% gold answers, 25% wrong, 25% malformed."""
    rng = random.Random(seed)
    prepared = [prepare_gold(g) for g in golds]
    pairs = []
    for i in range(n):
        k = rng.randrange(len(golds))
        gold, answer = prepared[k], golds[k]["answer"]
        roll = rng.random()
        if roll < 0.5:
            text = answer
        elif roll < 0.75:
            text = _wrong_answer(gold, rng)
        else:
            text = _malformed_answer(answer, rng)
        pairs.append((gold, text))
    return pairs


_FLOOR_CELL = re.compile(r"CLICK\(R(\d+),C(\d+)\)", re.IGNORECASE)
_FLOOR_NUMBER = re.compile(r"(?:COUNT|SUBMIT)\((\d+)\)", re.IGNORECASE)


def floor_pass(pairs) -> int:
    """A bare regex parse plus set comparison: the least a PASS check can do."""
    passed = 0
    for gold, text in pairs:
        if not text:
            continue
        number = _FLOOR_NUMBER.search(text)
        if gold.mode == COUNT:
            passed += number is not None and int(number.group(1)) == gold.gold_count
            continue
        cells = {(int(r), int(c)) for r, c in _FLOOR_CELL.findall(text)}
        passed += (cells == gold.gold_clicks
                   and (number is None or int(number.group(1)) == gold.gold_count))
    return passed


def scorer_pass(pairs) -> int:
    return sum(score_item(gold, text)["pass"] for gold, text in pairs)


def best_rate(fn, pairs, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(pairs)
        best = min(best, time.perf_counter() - start)
    return len(pairs) / best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--data", type=Path, nargs="+", default=[DEFAULT_DATA])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    golds = load_golds(args.data)
    start = time.perf_counter()
    pairs = build_predictions(golds, args.n, args.seed)
    print(f"built {len(pairs)} predictions over {len(golds)} gold rows "
          f"in {time.perf_counter() - start:.1f}s")
    start = time.perf_counter()
    for gold in golds:
        prepare_gold(gold)
    prepare_rate = len(golds) / (time.perf_counter() - start)
    passed = scorer_pass(pairs)
    print(f"scorer PASS on {passed / len(pairs):.1%} of predictions; "
          f"floor PASS on {floor_pass(pairs) / len(pairs):.1%} (it accepts prose)")
    # alternate the two so machine load hits both alike
    figure = floor = 0.0
    for _ in range(args.repeat):
        floor = max(floor, best_rate(floor_pass, pairs, 1))
        figure = max(figure, best_rate(scorer_pass, pairs, 1))
    print(f"gold preparation: {prepare_rate:,.0f} golds/s (once per gold, not in the figure)")
    print(f"figure: {figure:,.0f} items/s (rosetrain.scoring.score_item, full row)")
    print(f"floor:  {floor:,.0f} items/s (bare regex parse + set comparison)")
    print(f"ratio:  {figure / floor:.2f} (target >= 0.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
