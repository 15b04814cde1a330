"""Gradients averaged through shared memory, where every process of a CPU
group runs on this machine.

DDP averages each gradient bucket over the process group's backend. On the
CPU that is gloo, which sends the bucket over TCP through the loopback: 6.4 ms
for the demo model's 10 MB alone, 8.8 ms inside a step, on a core that has no
spare thread to hide it behind the backward pass. Here each process writes its
bucket, divided by the number of processes as DDP's own hook divides it, into
its slot of one anonymous memory file (``memfd``) that every process maps,
waits at a gloo barrier (no payload), and sums the slots in rank order into
its bucket: about 2 ms. Every process sums the same slots with the same operation,
so their gradients stay identical bit for bit; with two processes they are
gloo's own (``a + b``): the same losses to the last digit (docs/benchmarks.md,
"The training step").

Calls alternate between two regions of the file, so one barrier a bucket is
enough: a process writes a region again two calls later, after the barrier of
the call between, which every process reaches only once it has read the
region. Each slot holds DDP's largest rebuilt bucket; a larger one (DDP's
first step puts every gradient in one bucket) goes through gloo, on every
process alike. Where the file cannot be shared (a process of the group on another
machine, ``/proc`` hidden), every process keeps gloo's all-reduce.
"""

from __future__ import annotations

import logging
import mmap
import os
from typing import Any

from transformers import TrainerCallback

from rosetrain.train.distributed import cpu_group, launched_world_size

logger = logging.getLogger(__name__)

_TOKEN_BYTES = 16  # the creator's random token at the start of the file: the others check they map it
_ALIGN = 64  # every slot starts on a cache line


def all_processes_here() -> bool:
    """Whether the launcher started every process of a job of several on this machine."""
    world = launched_world_size()
    return world > 1 and os.environ.get("LOCAL_WORLD_SIZE") == str(world)


def _new_memory(size: int) -> tuple[mmap.mmap, int]:
    """An anonymous memory file of ``size`` bytes, mapped, and its descriptor."""
    fd = os.memfd_create("rosetrain-gradients", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        os.posix_fallocate(fd, 0, size)  # the memory now, not a SIGBUS at a later step
        return mmap.mmap(fd, size), fd
    except BaseException:
        os.close(fd)
        raise


def _map(path: str, size: int) -> mmap.mmap:
    """Another process's memory file, through its descriptor under ``/proc``."""
    with open(path, "r+b") as file:
        return mmap.mmap(file.fileno(), size)


def largest_bucket(model: Any) -> int:
    """The most bytes one of DDP's buckets of ``model`` can hold: DDP closes a
    bucket once it reaches its cap, so a bucket passes the cap by less than one
    gradient; never more than all the gradients together."""
    sizes = [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]
    return min(sum(sizes), model.bucket_bytes_cap + max(sizes, default=0))


class SharedGradients:
    """The file every process maps: the token, then two regions of one slot a
    process, each slot the size of the largest bucket."""

    def __init__(self, memory: mmap.mmap, slot_bytes: int, rank: int, world: int) -> None:
        import torch

        self.memory, self.slot_bytes, self.rank, self.world = memory, slot_bytes, rank, world
        self._bytes = torch.frombuffer(memory, dtype=torch.uint8)
        self._calls = 0

    @classmethod
    def create(cls, bucket_bytes: int) -> SharedGradients | None:
        """Called by every process of the group at once (it holds collectives):
        the shared file on every process, or None on every process when one
        of them could not map it."""
        import torch
        import torch.distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
        slot_bytes = -(-bucket_bytes // _ALIGN) * _ALIGN
        size = _ALIGN + 2 * world * slot_bytes
        where: list[Any] = [None]
        memory = None
        if rank == 0:
            try:
                memory, fd = _new_memory(size)
                token = os.urandom(_TOKEN_BYTES)
                memory[:_TOKEN_BYTES] = token
                where[0] = (os.getpid(), fd, token)
            except (AttributeError, OSError) as err:  # no memfd (not Linux), or no memory for it
                logger.debug("gradients through gloo: %s", err)
        dist.broadcast_object_list(where, src=0)
        if rank != 0 and where[0] is not None:
            pid, fd, token = where[0]
            try:
                memory = _map(f"/proc/{pid}/fd/{fd}", size)
                if memory[:_TOKEN_BYTES] != token:  # another machine's process of the same number
                    memory.close()
                    memory = None
            except (OSError, ValueError) as err:
                logger.debug("gradients through gloo: %s", err)
        mapped = torch.tensor([int(memory is not None)])
        dist.all_reduce(mapped, op=dist.ReduceOp.MIN)  # also: every process has mapped it
        if rank == 0 and where[0] is not None:
            os.close(where[0][1])  # the maps keep the memory
        if memory is None or not mapped.item():
            if memory is not None:
                memory.close()
            return None
        return cls(memory, slot_bytes, rank, world)

    def slots(self, gradients: Any) -> Any:
        """This call's region, as one row a process shaped like ``gradients``."""
        start = _ALIGN + (self._calls % 2) * self.world * self.slot_bytes
        self._calls += 1
        region = self._bytes[start : start + self.world * self.slot_bytes].view(self.world, self.slot_bytes)
        return region[:, : gradients.numel() * gradients.element_size()].view(gradients.dtype)


def average(state: SharedGradients, bucket):
    """DDP's communication hook: the bucket averaged over the processes. Its
    bucket and result are not annotated: DDP checks those annotations against
    its own classes, and this module's postponed annotations would be strings."""
    import torch
    import torch.distributed as dist

    gradients = bucket.buffer()
    if (
        gradients.numel() * gradients.element_size() > state.slot_bytes
    ):  # not expected; alike on every process
        return (
            dist.all_reduce(gradients.div_(state.world), async_op=True)
            .get_future()
            .then(lambda f: f.value()[0])
        )
    slots = state.slots(gradients)
    torch.div(gradients, state.world, out=slots[state.rank])
    dist.barrier()  # every slot written
    if state.world == 2:
        torch.add(slots[0], slots[1], out=gradients)
    else:
        torch.sum(slots, dim=0, out=gradients)
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(gradients)
    return done


class RegisterAtTrainBegin(TrainerCallback):
    """At ``on_train_begin`` the trainer has wrapped the model in DDP and not yet
    run a backward pass: the one moment a communication hook can be registered."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        from torch.nn.parallel import DistributedDataParallel

        model = self.trainer.model_wrapped
        # a hook set in accelerate's settings (fp16 compression, PowerSGD) is kept
        if not isinstance(model, DistributedDataParallel) or getattr(model, "_comm_hooks", None):
            return
        shared = SharedGradients.create(largest_bucket(model))
        if shared is not None:
            model.register_comm_hook(shared, average)


def average_in_shared_memory(trainer: Any) -> bool:
    """On a CPU group whose processes all run here, the trainer's DDP averages
    the gradients through shared memory once it has wrapped the model; whether
    it will. A hook asked for in accelerate's settings (fp16 compression,
    PowerSGD) is kept."""
    if not cpu_group() or not all_processes_here():
        return False
    trainer.add_callback(RegisterAtTrainBegin(trainer))
    return True
