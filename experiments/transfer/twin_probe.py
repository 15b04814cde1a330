"""Which region a model that thinks first names for Excl-Cnt, the counting
twin of Excl-CS (docs/experiments.md, round 34).

Greedy answers of MODEL over a training split's items (``rosetrain eval``
grades ROSE items only, so this script decodes them itself), then per
template, in % of items: PASS, and the region its ``cells``/``cells-seen``
thinking names: the task's own (for an EXCLUSION, every cell outside the
excluded part), the excluded part itself (a count *in* the region the prompt
names, the habit of L-Cnt), the whole grid (G-Cnt's), or another.

    python experiments/transfer/twin_probe.py MODEL SPLIT_FOLDER [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reasoning_check import parse  # noqa: E402

from rosetrain.core import protocol as P  # noqa: E402
from rosetrain.core.reasoning import split_reasoning  # noqa: E402
from rosetrain.core.regions import cells_in_region  # noqa: E402
from rosetrain.curriculum.signal import TransformersSampler  # noqa: E402
from rosetrain.data.release import select_records, with_image_paths  # noqa: E402
from rosetrain.scoring import score_item  # noqa: E402
from rosetrain.scoring.gold import Gold  # noqa: E402


def named_region(record: dict, thought: dict | None) -> str:
    if thought is None or "region" not in thought:
        return "unreadable"
    rows, cols = record["rows"], record["cols"]
    if thought["region"] == ["all"]:
        return "the whole grid"
    named = {P.parse_cell_str(c) for c in thought["region"]}
    if named == cells_in_region(record["region_type"], record["region_params"], rows, cols):
        return "the task's"
    if record["region_type"] == P.EXCLUSION:
        params = record["region_params"]
        if named == cells_in_region(params["exclude_type"], params["exclude_params"], rows, cols):
            return "the excluded part"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("split", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    records, root = select_records(args.split, "test", args.limit, training=True)
    with tempfile.TemporaryDirectory() as scratch:
        sampler = TransformersSampler(
            args.model, temperature=1.0, top_p=1.0, max_new_tokens=96, output_dir=scratch
        )
        texts = sampler.greedy(with_image_paths(records, root))
    passed, regions = Counter(), defaultdict(Counter)
    for record, text in zip(records, texts):
        name = P.SHORT_NAME[record["task_template"]]
        reasoning, answer = split_reasoning(text)
        passed[name] += score_item(Gold(record), answer)["pass"]
        regions[name][named_region(record, parse(reasoning))] += 1
    for name, counts in regions.items():
        n = sum(counts.values())
        shares = ", ".join(f"{kind} {100 * c / n:.1f}" for kind, c in counts.most_common())
        print(f"{name}: {n} items, PASS {100 * passed[name] / n:.1f}; region named: {shares}")


if __name__ == "__main__":
    main()
