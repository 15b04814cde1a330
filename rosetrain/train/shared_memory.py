"""A CPU group's exchanges through shared memory, where every process of the
group runs on this machine: the gradient average, the one-number gathers of
every step, and the barrier they wait at.

On the CPU the group's backend is gloo, which sends everything over TCP
through the loopback. DDP's average of the demo model's 10 MB took 6.4 ms
alone, 8.8 ms inside a step, on a core that has no spare thread to hide it
behind the backward pass. Every step also gathers five numbers (the tokens of
the batch, which scale the loss, and TRL's four metric sums) at 0.4-0.5 ms
each, and a gloo barrier costs 0.2 ms. Here the processes map one anonymous
memory file (``memfd``):

- **gradients**: each process writes its bucket, divided by the number of
  processes as DDP's own hook divides it, into its slot, waits at the barrier
  and sums the slots in rank order into its bucket: about 2 ms. Every process
  sums the same slots with the same operation, so their gradients stay
  identical bit for bit; with two processes they are gloo's own (``a + b``);
- **gathers** of a single number (a 0-dimensional tensor) take the same way:
  the same tensor as gloo's gather, in a microsecond or two;
- **the barrier**: each process writes how many barriers it has reached into
  its own counter and waits until every counter has reached it. One writer a
  counter needs no atomic operation; x86 shows stores in the order they were
  made and makes loads in program order, so a counter seen is a slot
  written. Elsewhere the barrier is gloo's (another processor may show the
  counter before the slot).

Each kind of call alternates between two regions of the file, so one barrier a
call is enough: a process writes a region again two calls later, after the
barrier of the call between, which every process reaches only once it has
read the region. Each gradient slot holds DDP's largest rebuilt bucket; a
larger one (DDP's first step puts every gradient in one bucket) goes through
gloo, on every process alike. Where the file cannot be shared (a process of
the group on another machine, ``/proc`` hidden), every process keeps gloo.
Timings: docs/benchmarks.md, "The training step".
"""

from __future__ import annotations

import logging
import mmap
import os
import platform
import time
from typing import Any

from transformers import TrainerCallback

from rosetrain.train.distributed import cpu_group, launched_world_size

logger = logging.getLogger(__name__)

_TOKEN_BYTES = 16  # the creator's random token at the start of the file: the others check they map it
_LINE = 64  # a cache line: every counter and slot starts on its own
_SPIN_SECONDS = 0.01  # a barrier polls without sleeping this long, then every 0.2 ms (a loaded machine)
_ORDERED_STORES = platform.machine().lower() in {"x86_64", "amd64"}


def all_processes_here() -> bool:
    """Whether the launcher started every process of a job of several on this machine."""
    world = launched_world_size()
    return world > 1 and os.environ.get("LOCAL_WORLD_SIZE") == str(world)


def _new_memory(size: int) -> tuple[mmap.mmap, int]:
    """An anonymous memory file of ``size`` bytes, mapped, and its descriptor."""
    fd = os.memfd_create("rosetrain-group", os.MFD_CLOEXEC)
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


def _regions_at(world: int) -> tuple[int, int]:
    """Where the number slots and the gradient slots start: after the token's
    line and one counter line a process; the number slots take two regions of
    one line a process."""
    numbers_at = _LINE * (1 + world)
    return numbers_at, numbers_at + 2 * world * _LINE


class SharedMemory:
    """The file every process maps: the token; one counter a process; two
    regions of one number slot a process; two regions of one gradient slot a
    process, each the size of the largest bucket."""

    def __init__(
        self, memory: mmap.mmap, slot_bytes: int, rank: int, world: int, timeout: float = 1800.0
    ) -> None:
        import numpy as np
        import torch

        self.memory, self.slot_bytes, self.rank, self.world = memory, slot_bytes, rank, world
        self.timeout = timeout
        self._bytes = torch.frombuffer(memory, dtype=torch.uint8)
        lines = np.frombuffer(memory, dtype=np.int64, count=world * _LINE // 8, offset=_LINE)
        self._counters = lines.reshape(world, _LINE // 8)[:, 0]
        self._numbers_at, self._gradients_at = _regions_at(world)
        self._barriers = self._gradient_calls = self._number_calls = 0

    @staticmethod
    def size(slot_bytes: int, world: int) -> int:
        return _regions_at(world)[1] + 2 * world * slot_bytes

    @classmethod
    def create(cls, bucket_bytes: int, timeout: float = 1800.0) -> SharedMemory | None:
        """Called by every process of the group at once (it holds collectives):
        the shared file on every process, or None on every process when one
        of them could not map it. ``timeout``: the seconds a barrier waits for
        the others before it raises."""
        import torch
        import torch.distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
        slot_bytes = -(-bucket_bytes // _LINE) * _LINE
        size = cls.size(slot_bytes, world)
        where: list[Any] = [None]
        memory = None
        if rank == 0:
            try:
                memory, fd = _new_memory(size)
                token = os.urandom(_TOKEN_BYTES)
                memory[:_TOKEN_BYTES] = token
                where[0] = (os.getpid(), fd, token)
            except (AttributeError, OSError) as err:  # no memfd (not Linux), or no memory for it
                logger.debug("the group's exchanges through gloo: %s", err)
        dist.broadcast_object_list(where, src=0)
        if rank != 0 and where[0] is not None:
            pid, fd, token = where[0]
            try:
                memory = _map(f"/proc/{pid}/fd/{fd}", size)
                if memory[:_TOKEN_BYTES] != token:  # another machine's process of the same number
                    memory.close()
                    memory = None
            except (OSError, ValueError) as err:
                logger.debug("the group's exchanges through gloo: %s", err)
        mapped = torch.tensor([int(memory is not None)])
        dist.all_reduce(mapped, op=dist.ReduceOp.MIN)  # also: every process has mapped it
        if rank == 0 and where[0] is not None:
            os.close(where[0][1])  # the maps keep the memory
        if memory is None or not mapped.item():
            if memory is not None:
                memory.close()
            return None
        return cls(memory, slot_bytes, rank, world, timeout)

    def barrier(self) -> None:
        """Returns once every process has reached as many barriers as this one."""
        self._barriers += 1
        if not _ORDERED_STORES:
            import torch.distributed as dist

            dist.barrier()
            return
        reached, counters = self._barriers, self._counters
        counters[self.rank] = reached
        if counters.min() >= reached:
            return
        start = time.monotonic()
        while counters.min() < reached:
            waited = time.monotonic() - start
            if waited < _SPIN_SECONDS:
                os.sched_yield()
            elif waited < self.timeout:
                time.sleep(0.0002)
            else:
                behind = [rank for rank, count in enumerate(counters.tolist()) if count < reached]
                raise RuntimeError(
                    f"process {self.rank} waited {self.timeout:.0f} s at the shared-memory barrier "
                    f"for processes {behind} (ddp_timeout)"
                )

    def _region(self, start: int, calls: int, slot: int) -> Any:
        start += (calls % 2) * self.world * slot
        return self._bytes[start : start + self.world * slot].view(self.world, slot)

    def slots(self, gradients: Any) -> Any:
        """This call's gradient region, as one row a process shaped like ``gradients``."""
        region = self._region(self._gradients_at, self._gradient_calls, self.slot_bytes)
        self._gradient_calls += 1
        return region[:, : gradients.numel() * gradients.element_size()].view(gradients.dtype)

    def gather_number(self, number: Any) -> Any:
        """Every process's ``number`` (a 0-dimensional tensor) in rank order:
        what ``all_gather`` and a concatenation give."""
        import torch

        region = self._region(self._numbers_at, self._number_calls, _LINE)
        self._number_calls += 1
        width = number.element_size()
        region[self.rank, :width] = number.detach().reshape(1).view(torch.uint8)
        self.barrier()
        return region[:, :width].clone().view(number.dtype).reshape(self.world)

    def serve_gathers(self, accelerator: Any) -> None:
        """``accelerator.gather`` (which ``gather_for_metrics`` calls) takes a
        single number on the CPU through the shared memory, anything else as before."""
        through_gloo = accelerator.gather

        def gather(tensor: Any) -> Any:
            if _is_number(tensor):
                return self.gather_number(tensor)
            return through_gloo(tensor)

        accelerator.gather = gather


def _is_number(value: Any) -> bool:
    """A 0-dimensional CPU tensor: alike on every process at the same call, so
    every process takes the same way."""
    import torch

    return isinstance(value, torch.Tensor) and value.dim() == 0 and value.device.type == "cpu"


def average(state: SharedMemory, bucket):
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
    state.barrier()  # every slot written
    if state.world == 2:
        torch.add(slots[0], slots[1], out=gradients)
    else:
        torch.sum(slots, dim=0, out=gradients)
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(gradients)
    return done


class ShareAtTrainBegin(TrainerCallback):
    """At ``on_train_begin`` the trainer has wrapped the model in DDP and not yet
    run a backward pass: the one moment a communication hook can be registered."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        from torch.nn.parallel import DistributedDataParallel

        model = self.trainer.model_wrapped
        if not isinstance(model, DistributedDataParallel):
            return
        shared = SharedMemory.create(largest_bucket(model), timeout=float(getattr(args, "ddp_timeout", 1800)))
        if shared is None:
            return
        shared.serve_gathers(self.trainer.accelerator)
        # a hook set in accelerate's settings (fp16 compression, PowerSGD) is kept
        if not getattr(model, "_comm_hooks", None):
            model.register_comm_hook(shared, average)


def share_memory(trainer: Any) -> bool:
    """On a CPU group whose processes all run here, the trainer's DDP averages
    the gradients, and its accelerator gathers single numbers, through shared
    memory once it has wrapped the model; whether it will. A hook asked for in
    accelerate's settings (fp16 compression, PowerSGD) is kept."""
    if not cpu_group() or not all_processes_here():
        return False
    trainer.add_callback(ShareAtTrainBegin(trainer))
    return True
