"""One training run on several CPU cores: ``rosetrain train`` under torchrun.

One training process of the tiny demo models leaves a second core idle. N
processes with the batch split (a gloo process group, one torch thread each;
``distributed.py`` checks that they form one job) run the same global batch
faster: 1.63-1.82x one core with two, median 1.74x (each operator's fixed
cost and the optimizer do not split; the gradients are averaged, and single
numbers gathered, through shared memory: ``shared_memory.py``), where one
process with two threads gave 1.40x (``benchmarks/train_step.py --cores 1 2``;
docs/benchmarks.md). Each process generates its own rows: the stream's 64
shards are split among them.

The launch is a child ``torch.distributed.run --standalone`` (its own free
port, so two runs side by side do not meet), which forwards Ctrl-C to the
trainers; a rerun resumes from the last checkpoint as a one-process run does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError


def split_batch(batch: int, processes: int) -> int:
    """Rows per process for a global batch of ``batch`` rows."""
    if processes < 1 or batch % processes:
        raise RosetrainError(
            f"cores: a batch of {batch} rows does not split evenly over {processes} training processes",
            argument="cores",
        )
    return batch // processes


def core_overrides(batch: int, processes: int) -> list[str]:
    """The recipe overrides that train a global batch of ``batch`` rows on
    ``processes`` CPU processes of one thread each, the batch split among them
    (no DataLoader worker: with a core per process a worker only adds the
    batches' trip between processes)."""
    per_process = split_batch(batch, processes)
    return ["cpu_threads=1", f"per_device_train_batch_size={per_process}", "dataloader_num_workers=0"]


def train_command(method: str, recipe: Path, overrides: Sequence[str], processes: int) -> list[str]:
    command = ["-m", "rosetrain", "train", method, "--recipe", str(recipe)]
    for item in overrides:
        command += ["--set", item]
    if processes == 1:
        return [sys.executable, *command]
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
    ]
    return [*launcher, *command]


def train_on_cores(
    method: str, recipe: Path, overrides: Sequence[str], processes: int, output_dir: Path
) -> dict[str, Any]:
    """Train ``recipe`` (with ``overrides``, which set the per-process batch) on
    ``processes`` CPU processes of one thread each; returns the run summary
    (``train_summary.json``) the main process wrote."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(train_command(method, recipe, overrides, processes), env=env)
    if done.returncode:
        if done.returncode < 0 or done.returncode == 130:
            raise KeyboardInterrupt
        raise RosetrainError(
            f"training on {processes} processes failed (exit {done.returncode}); "
            f"its output above names the cause, and a rerun resumes from {output_dir}'s last checkpoint"
        )
    return json.loads((Path(output_dir) / "train_summary.json").read_text())
