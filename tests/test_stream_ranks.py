"""Streaming training across ranks: two launched processes (RANK, WORLD_SIZE,
a gloo process group on the CPU) each read ``stream_dataset`` the way a
distributed run hands it out, and between them read every scene exactly once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENES = 96  # rounds of 64 stream shards: one whole, one partial

# One rank: joins the process group, takes its share of the stream, records the scenes it read.
RANK = """
import json, os, sys
import torch, torch.distributed as dist
from rosetrain.data.hf import stream_dataset

spec, stop, how, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
stream = stream_dataset(spec, split="train", stop=stop)

def scene_numbers(rows):  # scene ids are <split>-<index>
    return torch.tensor([int(row["scene_id"].rsplit("-", 1)[1]) for row in rows])

if how == "split_dataset_by_node":
    from datasets.distributed import split_dataset_by_node
    seen = [int(row["scene_id"].rsplit("-", 1)[1]) for row in split_dataset_by_node(stream, rank, world)]
else:  # what a Trainer's accelerator does when each rank makes its own data
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration
    from torch.utils.data import DataLoader
    accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(dispatch_batches=False))
    loader = accelerator.prepare(DataLoader(stream, batch_size=4, collate_fn=scene_numbers))
    seen = [int(n) for batch in loader for n in batch]
with open(os.path.join(out, f"rank-{rank}.json"), "w") as handle:
    json.dump({"world": world, "scenes": seen}, handle)
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_two_ranks(tmp_path: Path, spec: Path, how: str) -> list[dict]:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "CUDA_VISIBLE_DEVICES": "",
            "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), str(spec), str(SCENES), how, str(tmp_path)],
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    errors = [proc.communicate(timeout=300)[1] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), errors
    return [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.parametrize("how", ["accelerate", "split_dataset_by_node"])
def test_two_ranks_stream_disjoint_scenes_covering_the_stream(tmp_path, how, small_spec_text, write_spec):
    spec = write_spec(tmp_path, small_spec_text.replace("role: eval", "role: train"))
    ranks = launch_two_ranks(tmp_path, spec, how)
    assert [rank["world"] for rank in ranks] == [2, 2]
    first, second = ({*rank["scenes"]} for rank in ranks)
    assert first and second, "each rank reads a share"
    assert not first & second, f"scenes read by both ranks: {sorted(first & second)[:5]}"
    assert first | second == set(range(SCENES))
