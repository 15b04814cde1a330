"""Whole-process scoring speed: ``rosetrain score`` against a bare floor and,
when given, the official ROSE evaluator, as separate processes on the same items.

The split is the ROSE-protocol spec's metadata (no images: scoring reads
none). Like the real release's main split it holds the bridge templates'
items too (G-Clk, mL-Cnt), so `rosetrain score` writes every file its default
writes, the bridge and scene-consistency files included (``--main-only``
leaves them out, as the official evaluator reads only the main templates). Predictions
are a deterministic mix: half gold answers, a quarter wrong (a click dropped,
moved, added or duplicated, a count off), a quarter malformed (prose around
the answer, empty, None, truncated, spaced and lower-cased, a long ramble).

The floor, measured in the same run, is the least a whole scoring process can
do: start Python, read both JSONL files with orjson, compare each raw answer
with the gold answer string, and write one orjson line per item.

Prints the wall and CPU seconds of each process (best of --repeat, the three
alternated so machine load hits them alike; CPU seconds count rosetrain's
worker processes too), rosetrain's ratio to the floor, and the official
evaluator's time over rosetrain's. The target (>= 5) is on whole-process wall
time: `rosetrain score` reads and scores the split in as many processes as it
may use CPUs (`--num-proc`, printed), the official evaluator and the floor in
one. The CPU ratio says what the same work costs on one core.

    python benchmarks/score.py [--items 51000] [--repeat 3] [--num-proc N] [--main-only] [--official PATH/evaluate_rose.py]
"""

from __future__ import annotations

import argparse
import compileall
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rosetrain.core.cpus import available_cpus  # noqa: E402
from rosetrain.core.protocol import BRIDGE_TEMPLATES, COUNT, format_answer  # noqa: E402
from rosetrain.generators.records import build_records  # noqa: E402
from rosetrain.generators.spec import load_spec  # noqa: E402

FLOOR = """
import sys, orjson
meta, preds, out = sys.argv[1:4]
gold = {}
for line in open(meta, "rb"):
    row = orjson.loads(line)
    gold[row["item_id"]] = row
with open(out, "wb") as handle:
    for line in open(preds, "rb"):
        p = orjson.loads(line)
        g = gold[p["item_id"]]
        handle.write(orjson.dumps({"item_id": p["item_id"], "pass": int(p["raw_text"] == g["answer"])}) + b"\\n")
"""


def build_split(folder: Path, items: int, seed: int, bridges: bool = True) -> tuple[Path, Path]:
    """metadata_test.jsonl and predictions.jsonl with ``items`` rows; like the real
    release's main split they hold the bridge templates' items too (G-Clk,
    mL-Cnt), unless ``bridges`` is false."""
    spec = load_spec(ROOT / "generators" / "rose-protocol.yaml", check_fonts=False)
    rng = random.Random(seed)
    records, index = [], 0
    while len(records) < items:
        example = build_records(spec, spec.seed, index, "test", render=False)
        records += [r for r in example.records if bridges or r["task_template"] not in BRIDGE_TEMPLATES]
        index += 1
    records = records[:items]
    metadata, predictions = folder / "metadata_test.jsonl", folder / "predictions.jsonl"
    metadata.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with predictions.open("w", encoding="utf-8") as handle:
        for record in records:
            row = {
                "item_id": record["item_id"],
                "raw_text": _answer(record, rng),
                "model": "bench",
                "error": None,
            }
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return metadata, predictions


def _cells(record) -> list[tuple[int, int]]:
    return [(int(r[1:]), int(c[1:])) for r, c in (x.split(",") for x in record["ground_truth_clicks"])]


def _wrong(record, rng: random.Random) -> str:
    mode, clicks = record["task_mode"], _cells(record)
    if mode == COUNT:
        return format_answer(COUNT, count=max(0, record["ground_truth_count"] + rng.choice((-1, 1))))
    choice = rng.randrange(4)
    if choice == 0 and clicks:
        clicks = clicks[1:]
    elif choice == 1 and clicks:
        clicks[0] = (clicks[0][0], clicks[0][1] % record["cols"] + 1)
    elif choice == 2:
        clicks.append((rng.randint(1, record["rows"]), rng.randint(1, record["cols"])))
    else:
        answer = format_answer(mode, clicks)
        return answer.replace("; ", "; " + answer.split(";")[0] + "; ", 1) if clicks else answer
    return format_answer(mode, clicks)


def _answer(record, rng: random.Random) -> str | None:
    roll, answer = rng.random(), record["answer"]
    if roll < 0.5:
        return answer
    if roll < 0.75:
        return _wrong(record, rng)
    return rng.choice(
        [
            f"The answer is {answer}.",
            "",
            None,
            answer[: len(answer) // 2],
            answer.lower().replace(",", " , ").replace("(", "( "),
            "I think there are several odd cells here; " * 20,
        ]
    )


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process; on a shared machine the CPU
    seconds are the steadier figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=51_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--main-only", action="store_true", help="leave the bridge templates' items out")
    parser.add_argument(
        "--num-proc", type=int, default=None, help="rosetrain score --num-proc (default: its own, the CPUs)"
    )
    parser.add_argument(
        "--official",
        type=Path,
        default=None,
        help="the official evaluator (demo/evaluate_rose.py of ROSE-v0.1)",
    )
    args = parser.parse_args(argv)
    # the package's bytecode, as an installed wheel has it: with PYTHONDONTWRITEBYTECODE
    # set, an editable install would compile its modules in every timed process
    compileall.compile_dir(ROOT / "rosetrain", quiet=1)

    num_proc = args.num_proc or available_cpus()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        metadata, predictions = build_split(folder, args.items, args.seed, bridges=not args.main_only)
        py = sys.executable
        commands = {
            "floor": [py, "-c", FLOOR, str(metadata), str(predictions), str(folder / "floor.jsonl")],
            "rosetrain": [
                py,
                "-m",
                "rosetrain",
                "score",
                "--data",
                str(folder),
                "--predictions",
                str(predictions),
                "--out",
                str(folder / "rosetrain"),
                "--num-proc",
                str(num_proc),
            ],
        }
        if args.official is not None:
            commands["official"] = [
                py,
                str(args.official),
                "--dataset_root",
                str(folder),
                "--predictions",
                str(predictions),
                "--split",
                "test",
                "--out_dir",
                str(folder / "official"),
            ]
        wall = {name: float("inf") for name in commands}
        cpu = dict(wall)
        for _ in range(args.repeat):
            for name, command in commands.items():
                took = timed(command)
                wall[name], cpu[name] = min(wall[name], took[0]), min(cpu[name], took[1])
    print(f"items: {args.items:,} (whole processes, best of {args.repeat}; wall s / CPU s)")
    print(
        f"figure: rosetrain score {wall['rosetrain']:.2f} / {cpu['rosetrain']:.2f} "
        f"(--num-proc {num_proc}, {available_cpus()} CPUs available)"
    )
    print(
        f"floor:  {wall['floor']:.2f} / {cpu['floor']:.2f} "
        f"(start, orjson read of both files, one line per item)"
    )
    print(
        f"ratio:  {wall['rosetrain'] / wall['floor']:.2f} wall, "
        f"{cpu['rosetrain'] / cpu['floor']:.2f} CPU (rosetrain / floor)"
    )
    if "official" in wall:
        print(
            f"official evaluator: {wall['official']:.2f} / {cpu['official']:.2f}; speed-up "
            f"{wall['official'] / wall['rosetrain']:.2f}x wall, "
            f"{cpu['official'] / cpu['rosetrain']:.2f}x CPU (target: >= 5x wall)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
