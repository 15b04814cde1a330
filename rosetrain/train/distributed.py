"""Several training processes are one distributed job, or none runs.

A launcher (``torchrun``, ``accelerate launch``) starts N processes and sets
``WORLD_SIZE=N``. With a GPU each process joins the NCCL group. Without one,
``accelerate launch --multi_gpu`` used to leave every process on its own: N
identical trainings writing one ``output_dir``. Here a CPU-only launch trains
on the CPU process group (gloo), so the processes share the data and average
their gradients; if the trainer still does not see ``WORLD_SIZE`` processes,
the run is refused. Only the main process writes ``output_dir``: it holds the
folder's lock (``rosetrain.core.io.output_lock``) for the whole run, so a second job
(or a second, unrelated process) on the same folder is refused at once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from rosetrain.core.errors import RosetrainError, first_line


def launched_world_size() -> int:
    """How many processes the launcher started (1 without a launcher)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        raise RosetrainError(
            f"WORLD_SIZE: expected a number of processes, got {os.environ['WORLD_SIZE']!r}"
        ) from None


def is_main_process() -> bool:
    """Rank 0 of a launch (every process that is not launched is its own main)."""
    return os.environ.get("RANK", "0") == "0"


def wait_for_every_process() -> None:
    """Every rank of a launched run waits here for the others (the main process
    has written what they are about to read or append to); a no-op without a launch."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def leave_process_group() -> None:
    """End a launched run's process group once every rank has finished (rank 0
    writes the cards and summary after the others are done training). Left to
    interpreter exit, a rank whose gloo threads are still up can abort
    ("terminate called without an active exception") and fail a finished run.
    A no-op without a launch."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        wait_for_every_process()
        dist.destroy_process_group()


def cpu_group() -> bool:
    """Several launched processes without a GPU: one job on the CPU process group."""
    return launched_world_size() > 1 and not has_gpu()


def cpu_group_settings(gpu: bool) -> dict[str, Any]:
    """TrainingArguments that put a CPU-only launch on the gloo process group."""
    if gpu or launched_world_size() == 1:
        return {}
    # transformers asks DDP to look for unused parameters on every step unless
    # gradient checkpointing is on; rosetrain's models use every trainable one, and
    # DDP warned so on each run (same speed either way: docs/benchmarks.md). A model
    # that leaves some unused: trl.ddp_find_unused_parameters=true in the recipe.
    return {"use_cpu": True, "ddp_backend": "gloo", "ddp_find_unused_parameters": False}


def gradients_in_buckets(trainer: Any) -> bool:
    """On the CPU group, DDP keeps each gradient as a view of its all-reduce
    bucket instead of copying every gradient into the buckets and back at each
    step (10 MB each way for the demo's model); whether it was set. Two
    processes of the demo's SFT: 6.10-6.16 steps/s against 5.87-6.06, the
    same losses to the last digit (docs/benchmarks.md, "The training step")."""
    handler = getattr(getattr(trainer, "accelerator", None), "ddp_handler", None)
    if handler is None or not cpu_group():
        return False
    handler.gradient_as_bucket_view = True  # read when the trainer wraps the model, at train()
    return True


def fsdp_launched() -> bool:
    """``accelerate launch`` with an FSDP config (recipes/accelerate/fsdp.yaml) says so here."""
    return os.environ.get("ACCELERATE_USE_FSDP", "").strip().lower() in ("true", "1", "yes")


def check_fsdp_device(args: Any) -> None:
    """FSDP shards over CUDA GPUs; without one, accelerate and the trainer fall back
    to plain data parallel (every process a whole model) without a word: refused."""
    if not (fsdp_launched() or getattr(args, "fsdp", None)):
        return
    import torch

    if not torch.cuda.is_available():
        raise RosetrainError(
            "FSDP (accelerate launch --config_file recipes/accelerate/fsdp.yaml, or the trainer's fsdp "
            "setting) needs CUDA GPUs; on this machine without one it would silently run plain DDP, "
            "each process holding the whole model: launch with recipes/accelerate/ddp.yaml and --cpu instead"
        )


def check_distributed(args: Any) -> None:
    """Refuse N launched processes that the trainer would run as N separate trainings,
    and FSDP where it would not shard."""
    check_fsdp_device(args)
    launched = launched_world_size()
    if launched == 1:
        return
    try:
        seen = args.world_size  # sets up the process group
    except (RuntimeError, ValueError) as err:
        first = first_line(err)
        raise RosetrainError(
            f"WORLD_SIZE={launched}: the processes could not form one distributed "
            f"job ({first}); start them with torchrun or accelerate launch"
        ) from None
    if seen != launched:
        raise RosetrainError(
            f"WORLD_SIZE={launched}, but training would run as {seen} process(es) of its own: "
            f"{launched} separate trainings writing one output_dir; launch with torchrun or "
            f"`accelerate launch` (add --cpu without a GPU), or unset WORLD_SIZE"
        )


@contextlib.contextmanager
def output_dir_lock(output_dir: str) -> Iterator[None]:
    """The main process holds ``output_dir``'s lock while the run writes there."""
    if not is_main_process():
        yield
        return
    from rosetrain.core.io import output_lock

    with output_lock(output_dir, "this training output_dir"):
        yield


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def bf16_supported() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
