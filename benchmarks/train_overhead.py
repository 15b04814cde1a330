"""Training overhead of rosetrain over bare TRL, and stream throughput.

The same tiny LoRA SFT (tiny local Qwen2-VL, the same Parquet rows, the same
settings) runs twice in fresh processes: through ``rosetrain train sft`` and
through a bare TRL script (``load_dataset("parquet")`` + ``SFTTrainer``).
Seconds per step are the trainer's own ``train_runtime / steps``; each side
runs ``--repeats`` times, interleaved, and the best run counts (the machine
may be shared). Prints both, and their ratio (target: rosetrain <= 1.05x).

Streaming: rows/s the spec stream generates (alone) against rows/s that
training consumes; above 1x the stream never starves training.

    python benchmarks/train_overhead.py [--steps 30] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPEC = ROOT / "generators" / "demo" / "train.yaml"
BATCH, LR, LORA = 4, 1e-3, {"r": 8, "alpha": 16, "dropout": 0.0}


def bare_trl(config: dict) -> dict:
    """The floor: what a user would write with TRL alone for the same run."""
    import glob

    import torch
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(config["threads"])
    files = sorted(glob.glob(os.path.join(config["data"], "hf", "train", "*.parquet")))
    dataset = load_dataset("parquet", data_files={"train": files}, split="train")
    model = AutoModelForImageTextToText.from_pretrained(config["model"], dtype=torch.float32)
    processor = AutoProcessor.from_pretrained(config["model"])
    args = SFTConfig(
        output_dir=config["out"],
        max_steps=config["steps"],
        per_device_train_batch_size=BATCH,
        learning_rate=LR,
        lr_scheduler_type="cosine",
        warmup_steps=0.03,
        logging_steps=10,
        save_steps=10_000,
        report_to="none",
        seed=0,
        max_length=None,
        packing=False,
        completion_only_loss=True,
        bf16=False,
        activation_checkpointing=False,
        dataloader_pin_memory=False,
    )
    peft = LoraConfig(
        r=LORA["r"],
        lora_alpha=LORA["alpha"],
        lora_dropout=LORA["dropout"],
        target_modules=r".*language_model.*\.self_attn\.(q_proj|k_proj|v_proj|o_proj)",
        task_type="CAUSAL_LM",
    )
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft
    )
    result = trainer.train()
    return {"train_runtime": result.metrics["train_runtime"], "steps": trainer.state.global_step}


def rosetrain_run(
    model: Path, data: Path, out: Path, steps: int, threads: int, spec: Path | None = None
) -> dict:
    import yaml

    source = {"spec": str(spec)} if spec else {"folder": str(data)}
    recipe = {
        "method": "sft",
        "model": str(model),
        "output_dir": str(out),
        "data": source,
        "max_steps": steps,
        "per_device_train_batch_size": BATCH,
        "learning_rate": LR,
        "lr_scheduler_type": "cosine",
        "warmup_steps": 0.03,
        "logging_steps": 10,
        "save_steps": 10_000,
        "lora": LORA,
        "cpu_threads": threads,
        "resume": "never",
    }
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    subprocess.run(
        [sys.executable, "-m", "rosetrain", "train", "sft", "--recipe", str(path)],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    summary = json.loads((out / "train_summary.json").read_text())
    return {"train_runtime": summary["train_runtime"], "steps": summary["global_step"]}


def bare_run(model: Path, data: Path, out: Path, steps: int, threads: int) -> dict:
    config = {"model": str(model), "data": str(data), "out": str(out), "steps": steps, "threads": threads}
    done = subprocess.run(
        [sys.executable, __file__, "--bare-worker", json.dumps(config)],
        check=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def stream_rows_per_second(rows: int) -> float:
    from rosetrain.data.hf import stream_dataset

    iterator = iter(stream_dataset(str(SPEC), split="train", seed=0))
    next(iterator)  # the first row pays for imports and fonts
    start = time.perf_counter()
    for _ in range(rows):
        next(iterator)
    return rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads, the same for both sides")
    parser.add_argument("--scenes", type=int, default=40, help="scenes in the training folder")
    parser.add_argument("--bare-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_worker:
        print(json.dumps(bare_trl(json.loads(args.bare_worker))))
        return

    from rosetrain.cli import main as cli_main
    from rosetrain.models.tiny import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="rosetrain-bench-") as tmp:
        tmp = Path(tmp)
        model = build_tiny_model(tmp / "tiny", size="tiny")
        data = tmp / "data"
        cli_main(
            [
                "generate",
                "--spec",
                str(SPEC),
                "--out",
                str(data),
                "--split",
                "train",
                "--scenes",
                str(args.scenes),
                "--formats",
                "release,hf",
                "--num-proc",
                "1",
                "--quiet",
            ]
        )
        ours, floor = [], []
        for i in range(args.repeats):  # interleaved, so a busy moment hits both sides alike
            floor.append(bare_run(model, data, tmp / f"bare{i}", args.steps, args.threads))
            ours.append(rosetrain_run(model, data, tmp / f"ours{i}", args.steps, args.threads))
            print(
                f"run {i + 1}/{args.repeats}: bare TRL {per_step(floor[-1]):.4f} s/step, "
                f"rosetrain {per_step(ours[-1]):.4f} s/step",
                flush=True,
            )
        best_ours, best_floor = min(map(per_step, ours)), min(map(per_step, floor))
        streamed = rosetrain_run(model, data, tmp / "stream", args.steps, args.threads, spec=SPEC)
        generated = stream_rows_per_second(200)

    consumed = BATCH / best_ours
    print(
        f"rosetrain train sft: {best_ours:.4f} s/step (best of {args.repeats}, {args.steps} steps, "
        f"batch {BATCH}, {args.threads} thread(s))"
    )
    print(f"bare TRL (floor):    {best_floor:.4f} s/step")
    print(f"ratio rosetrain/bare: {best_ours / best_floor:.3f}x (target <= 1.05)")
    print(f"streamed from the spec: {per_step(streamed):.4f} s/step")
    print(
        f"stream generates {generated:.1f} rows/s; training consumes {consumed:.1f} rows/s; "
        f"headroom {generated / consumed:.1f}x (must stay > 1)"
    )


def per_step(run: dict) -> float:
    return run["train_runtime"] / run["steps"]


if __name__ == "__main__":
    main()
