"""Where two training processes lose time against one (issue 36's 1.7x target).

Run under torchrun with 1 or 2 processes (one thread each, pinned to its core):

    torchrun --nproc-per-node 1 experiments/speed/ddp_floor.py --batch 16
    torchrun --nproc-per-node 2 experiments/speed/ddp_floor.py --batch 8

Each process builds the demo's SFT trainer as ``rosetrain train sft`` does,
collates ``--steps`` batches of its own rows once, then times two loops over
them: forward+backward+AdamW alone ("floor"), and the same inside DDP (the
gradient all-reduce). benchmarks/train_step.py gives the trainer's real step.
Prints ms per step of each, on rank 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {rank})
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.recipe import load_recipe

    recipe = load_recipe(
        ROOT / "rosetrain/assets/demo/recipes/demo-sft-transfer.yaml",
        [
            f"per_device_train_batch_size={args.batch}",
            f"output_dir=/tmp/ddp-floor-{rank}",
            "cpu_threads=1",
            "dataloader_num_workers=0",
            f"model={ROOT / 'rosetrain/assets/demo-base-palettes'}",
            "resume=never",
        ],
    )
    trainer = build(check(recipe)).trainer
    loader = iter(trainer.get_train_dataloader())
    batches = [next(loader) for _ in range(args.steps)]
    model = trainer.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def loop(step) -> float:
        for batch in batches[:5]:
            step(batch)
        if dist.is_initialized():
            dist.barrier()
        start = time.perf_counter()
        for batch in batches[5:]:
            step(batch)
        return 1000 * (time.perf_counter() - start) / (len(batches) - 5)

    def plain(batch):
        loss = model(**{k: v for k, v in batch.items() if k != "num_items_in_batch"}).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    results = {"floor (no all-reduce)": loop(plain)}
    if dist.is_initialized():
        import json as _json

        options = _json.loads(os.environ.get("DDP_OPTIONS", "{}"))  # e.g. {"gradient_as_bucket_view": true}
        ddp = torch.nn.parallel.DistributedDataParallel(model, **options)

        def wrapped(batch):
            loss = ddp(**{k: v for k, v in batch.items() if k != "num_items_in_batch"}).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

        results["DDP (gradient all-reduce)"] = loop(wrapped)
    if rank == 0:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        for name, ms in results.items():
            print(f"{world} process(es), batch {args.batch} each: {name}: {ms:.1f} ms/step", flush=True)


if __name__ == "__main__":
    main()
