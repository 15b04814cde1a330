"""Transformers-runner throughput: items/s of a whole ``rosetrain eval`` against a
bare batched ``generate`` loop over the same items, model and batch size.

The figure is ``rosetrain.evaluation.evaluate.evaluate`` with the model already
loaded (a runner object is passed in, so loading is not timed on either side):
reading the split, batching, generation, one flushed prediction line per item,
scoring and every output file, into a fresh folder at each repeat.

The floor, measured in the same run: the least any evaluation must do, a loop
over the same batches that applies the chat template, opens each image, runs
the processor, ``model.generate`` with the same generation config, and
decodes; nothing is written or scored. Figure and floor alternate, and each
keeps its least time over the repeats.

Beside them, evaluation during training: the trainer's held-out callback
(``HeldoutEvalCallback.evaluate``, what ``eval.every_steps`` runs) on the same
items in the order training picks them, with the same model, batch size and
token limit. It prints its time against ``rosetrain eval``'s (target <= 1.2).

All are timed in CPU seconds of this
process (torch on one thread, so no OpenMP thread spins while it waits): on a
machine shared with other jobs wall time measures the other jobs too, and
only ever adds to CPU time. Wall seconds are printed beside them. Prints
items/s of each, the ratio floor time / figure time (target >= 0.9) and the
ratio during-training time / figure time (target <= 1.2).

    python benchmarks/eval.py [--scenes 40] [--batch-size 8] [--repeat 3] [--model DIR]

The default model is the demo's shipped base (a tiny Qwen3-VL), on the demo's
held-out spec; both are package data, so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rosetrain.core.messages import record_messages  # noqa: E402
from rosetrain.data.release import select_records, with_image_paths  # noqa: E402
from rosetrain.evaluation.evaluate import PREDICTIONS_FILE, evaluate  # noqa: E402
from rosetrain.runners.base import load_rgb_image  # noqa: E402
from rosetrain.train.callbacks import HeldoutEvalCallback  # noqa: E402
from rosetrain.train.data import pick_items  # noqa: E402

ASSETS = ROOT / "rosetrain" / "assets"


def make_split(folder: Path, scenes: int) -> None:
    spec = ASSETS / "demo" / "generators" / "heldout.yaml"
    command = [sys.executable, "-m", "rosetrain", "generate", "--spec", str(spec), "--out", str(folder)]
    command += ["--split", "test", "--scenes", str(scenes), "--formats", "release", "--quiet"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)


def bare_loop(runner, records, batch_size: int) -> list[str]:
    """The floor: batched generation and decoding, nothing else."""
    import torch

    model, processor, tokenizer = runner.model, runner.processor, runner.tokenizer
    answers: list[str] = []
    for start in range(0, len(records), batch_size):
        batch = records[start : start + batch_size]
        texts = [
            processor.apply_chat_template(record_messages(r), tokenize=False, add_generation_prompt=True)
            for r in batch
        ]
        images = [[load_rgb_image(r)] for r in batch]
        inputs = processor(text=texts, images=images, return_tensors="pt", padding=True)
        inputs = inputs.to(model.device, dtype=model.dtype)
        with torch.inference_mode():
            output = model.generate(**inputs, generation_config=runner.generation_config)
        answers += tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=40, help="held-out scenes (5 items each)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--model", default=str(ASSETS / "demo-base"))
    args = parser.parse_args()

    import torch

    from rosetrain.runners.transformers_runner import TransformersRunner

    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory(prefix="rosetrain-bench-eval-") as tmp:
        data = Path(tmp) / "data"
        make_split(data, args.scenes)
        records, root = select_records(data, "test", None)
        records = with_image_paths(records, root)
        runner = TransformersRunner(args.model, max_new_tokens=args.max_new_tokens)
        bare_loop(runner, records[: args.batch_size], args.batch_size)  # warm-up, untimed
        callback = HeldoutEvalCallback(
            pick_items(records, len(records)),  # training's order: round-robin over templates
            runner.processor,
            every_steps=0,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
            output_dir=tmp,
        )
        figure, floor, during = Timing(), Timing(), Timing()
        answers: list[str] = []
        for i in range(args.repeat):
            with floor:
                answers = bare_loop(runner, records, args.batch_size)
            with figure:
                evaluate(
                    args.model,
                    data,
                    "test",
                    Path(tmp) / f"run-{i}",
                    runner=runner,
                    batch_size=args.batch_size,
                    max_new_tokens=args.max_new_tokens,
                    progress=False,
                )
            predicted = (Path(tmp) / f"run-{i}" / PREDICTIONS_FILE).read_text().count("\n")
            with during:
                callback.evaluate(runner.model)
    n = len(records)
    assert len(answers) == predicted == n, "figure and floor must cover the same items"
    print(f"items: {n}, batch size {args.batch_size}, model {args.model}, torch threads 1; {load()}")
    print(f"figure (rosetrain eval, transformers runner): {figure.line(n)}")
    print(f"floor (bare batched generate loop): {floor.line(n)}")
    print(f"ratio (floor CPU time / figure CPU time): {floor.cpu / figure.cpu:.2f}  (target >= 0.9)")
    print(f"ratio in wall time: {floor.wall / figure.wall:.2f}")
    print(f"during training (the held-out callback, same items): {during.line(n)}")
    print(
        f"ratio (during-training CPU time / figure CPU time): {during.cpu / figure.cpu:.2f}  (target <= 1.2)"
    )


class Timing:
    """Least CPU and least wall seconds over the repeats timed with ``with``."""

    def __init__(self) -> None:
        self.cpu = self.wall = float("inf")

    def __enter__(self) -> None:
        self._cpu, self._wall = time.process_time(), time.perf_counter()

    def __exit__(self, *exc) -> None:
        self.cpu = min(self.cpu, time.process_time() - self._cpu)
        self.wall = min(self.wall, time.perf_counter() - self._wall)

    def line(self, n: int) -> str:
        return f"{n / self.cpu:.1f} items per CPU s ({self.cpu:.2f} CPU s; {self.wall:.2f} s wall)"


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


if __name__ == "__main__":
    main()
