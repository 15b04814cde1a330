"""Where a model that thinks first goes wrong: perception or the region test.

Reads an evaluation run of a model trained with ``data.reasoning`` (its
``predictions.jsonl`` keeps each answer's reasoning) beside the split's
metadata, and prints per template, in % of items:

- **odd right**: the listed exception cells are the scene's (perception; of
  the items whose thinking lists them: the ``cells-seen`` style lists none for
  a highlighted region);
- **region right** (``cells`` and ``cells-seen``): the listed region cells are the task's;
- **test right**: the cells listed as in the region are exactly those of the
  model's *own* odd list that lie in the task's region (the region test alone,
  whatever the perception; numeric regions only, a visual one is seen, not read);
- **inside right**: the listed in-region cells are the gold ones.

Then, for V-Clk by region case, how the named region compares with the
highlighted one: right, missing it entirely (no cell in common; and of those,
how many name a region holding one of the model's own odd cells), or other;
and where V-Clk's in-region list comes from: the region the model named, or
the highlight itself.

    python experiments/transfer/reasoning_check.py data/rdev-dim runs/eval-think-rdev
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rosetrain.core import protocol as P  # noqa: E402
from rosetrain.core.regions import cells_in_region  # noqa: E402


def parse(reasoning: str | None) -> dict[str, list[str]] | None:
    """``{"odd": [...]?, "inside": [...], "region": [...]?}`` or None if unreadable."""
    if not reasoning:
        return None
    fields = {}
    for part in reasoning.split(";"):
        name, sep, cells = part.strip().partition(": ")
        if not sep:
            return None
        fields[name] = [] if cells.strip() == "none" else cells.split()
    if "inside" not in fields:  # the `odd` style names the in-region cells `region`
        fields["inside"] = fields.pop("region", [])
    return fields if "inside" in fields and fields.keys() & {"odd", "region"} else None


def answered(split: Path, run: Path):
    """(gold record, prediction) of every item the run answered."""
    records = {}
    for line in (split / "metadata_test.jsonl").open(encoding="utf-8"):
        record = json.loads(line)
        records[record["item_id"]] = record
    for line in (run / "predictions.jsonl").open(encoding="utf-8"):
        prediction = json.loads(line)
        yield records[prediction["item_id"]], prediction


def check(split: Path, run: Path) -> dict[str, dict[str, float]]:
    counts: dict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record, prediction in answered(split, run):
        c = counts[P.SHORT_NAME[record["task_template"]]]
        c["n"] += 1
        thought = parse(prediction.get("reasoning"))
        if thought is None:
            continue
        c["readable"] += 1
        region = cells_in_region(
            record["region_type"], record["region_params"], record["rows"], record["cols"]
        )
        if "odd" in thought:
            c["odd n"] += 1
            c["odd right"] += set(thought["odd"]) == set(record["all_target_cells"])
        c["inside right"] += set(thought["inside"]) == set(record["region_target_cells"])
        if "region" in thought and record["region_type"] != P.GLOBAL:
            c["region n"] += 1
            c["region right"] += set(thought["region"]) == {P.cell_str(cell) for cell in region}
        if "odd" in thought and record["region_type"] not in (P.VISUAL_REGION, P.GLOBAL):
            own = {cell for cell in thought["odd"] if _cell(cell) in region}
            c["test n"] += 1
            c["test right"] += own == set(thought["inside"])
    table = {}
    for template, c in counts.items():
        row = {"n": c["n"], "readable": 100 * c["readable"] / c["n"]}
        if c["odd n"]:
            row["odd right"] = 100 * c["odd right"] / c["odd n"]
        if c["region n"]:
            row["region right"] = 100 * c["region right"] / c["region n"]
        if c["test n"]:
            row["test right"] = 100 * c["test right"] / c["test n"]
        row["inside right"] = 100 * c["inside right"] / c["n"]
        table[template] = row
    return table


def visual_items(split: Path, run: Path):
    """(record, thought, highlighted cells) of every V-Clk item the run answered;
    an unreadable thought is ``{}``."""
    for record, prediction in answered(split, run):
        if record["task_template"] != P.T4:
            continue
        cells = cells_in_region(
            record["region_type"], record["region_params"], record["rows"], record["cols"]
        )
        yield record, parse(prediction.get("reasoning")) or {}, {P.cell_str(cell) for cell in cells}


def visual_misses(split: Path, run: Path) -> dict[str, dict[str, int]]:
    """V-Clk items by region case: ``right``, ``disjoint`` (the named region shares
    no cell with the highlight), ``disjoint near odd`` (of those, the named region
    holds a cell of the model's own odd list) and ``other``."""
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for record, thought, gold in visual_items(split, run):
        named = set(thought.get("region", []))
        row = table[record["region_case"]]
        row["n"] += 1
        if named == gold:
            row["right"] += 1
        elif not named & gold:
            row["disjoint"] += 1
            row["disjoint near odd"] += bool(named & set(thought.get("odd", [])))
        else:
            row["other"] += 1
    return table


def visual_sources(split: Path, run: Path) -> dict[str, int]:
    """Where V-Clk's in-region list comes from, in items: ``follows its region``
    (it is the model's own odd cells inside the region it named), ``own odd in
    highlight`` (its own odd cells inside the real highlight: right whenever
    the odd list is), and, of the items whose odd list is right, how many name
    the region right and how many list the in-region cells right."""
    row: dict[str, int] = defaultdict(int)
    for record, thought, gold in visual_items(split, run):
        row["n"] += 1
        if not thought:  # unreadable: counted in n only
            continue
        odd, inside, named = (set(thought.get(field, [])) for field in ("odd", "inside", "region"))
        row["region right"] += named == gold
        row["inside right"] += inside == set(record["region_target_cells"])
        if "odd" not in thought:  # the `cells-seen` style: the highlight's cells alone
            continue
        row["follows its region"] += inside == odd & named
        row["own odd in highlight"] += inside == odd & gold
        if odd == set(record["all_target_cells"]):
            row["odd right"] += 1
            row["odd right: region right"] += named == gold
            row["odd right: inside right"] += inside == set(record["region_target_cells"])
    return row


def _cell(text: str):
    try:
        return P.parse_cell_str(text)
    except ValueError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("split", type=Path, help="the split folder (release format)")
    parser.add_argument("run", type=Path, help="an evaluation run folder of that split")
    args = parser.parse_args()
    table = check(args.split, args.run)
    columns = ["n", "readable", "odd right", "region right", "test right", "inside right"]
    print("| template | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for template in sorted(table, key=list(P.SHORT_NAME.values()).index):
        row = table[template]
        cells = [str(row["n"])] + [f"{row[c]:.1f}" if c in row else "" for c in columns[1:]]
        print(f"| {template} | " + " | ".join(cells) + " |")
    misses = visual_misses(args.split, args.run)
    if misses:
        columns = ["n", "right", "disjoint", "disjoint near odd", "other"]
        print("\n| V-Clk region case | " + " | ".join(columns) + " |")
        print("|---" * (len(columns) + 1) + "|")
        for case in sorted(misses, key=list(P.REGION_CASES).index):
            print(f"| {case} | " + " | ".join(str(misses[case][c]) for c in columns) + " |")
        sources = visual_sources(args.split, args.run)
        columns = list(sources)
        print("\n| V-Clk items | " + " | ".join(columns) + " |")
        print("|---" * (len(columns) + 1) + "|")
        print("| count | " + " | ".join(str(sources[c]) for c in columns) + " |")


if __name__ == "__main__":
    main()
