"""A CPU group's exchanges through shared memory: DDP's gradient average (the
same gradients as gloo's all-reduce, bit for bit on two processes, the same on
every process), the gathers of single numbers (gloo's own tensors), the
barrier (its timeout), and gloo's own path on every process when one of them
cannot map the memory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rosetrain.train import shared_memory
from rosetrain.train.shared_memory import all_processes_here

ROOT = Path(__file__).resolve().parent.parent
torch = pytest.importorskip("torch")

# Each process trains one small model three steps four ways: gloo's all-reduce,
# the shared memory, slots too small for some buckets (those go through gloo),
# and the shared memory refused by process 1. DDP's first step has one bucket
# of every gradient (larger than the slots: through gloo), the later steps four
# (the calls alternate between the two regions).
RANK_SCRIPT = """
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from rosetrain.train import shared_memory

dist.init_process_group("gloo")
rank = dist.get_rank()
buckets = []

def recording(state, bucket):
    buckets.append(bucket.buffer().numel() * 4)
    return shared_memory.average(state, bucket)

def gloo_gather(tensor):
    out = [torch.empty_like(tensor.reshape(-1)) for _ in range(dist.get_world_size())]
    dist.all_gather(out, tensor.reshape(-1))
    return torch.cat(out)

def gradients(way):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(120, 120) for _ in range(4)] + [torch.nn.Linear(120, 3)]
    model = torch.nn.Sequential(*layers)
    ddp = DistributedDataParallel(model, gradient_as_bucket_view=True, bucket_cap_mb=0.03)
    shared = None
    if way != "gloo":
        slot = 59_000 if way == "small" else shared_memory.largest_bucket(ddp)
        shared = shared_memory.SharedMemory.create(slot)
        if shared is not None:
            ddp.register_comm_hook(shared, recording)
    data = torch.Generator().manual_seed(rank + 1)
    steps, losses = [], []
    for _ in range(3):
        ddp.zero_grad()
        loss = ddp(torch.randn(8, 120, generator=data)).square().sum()
        # a gathered number between the buckets' barriers, as a training step has them
        losses.append(shared.gather_number(loss.detach()) if shared else gloo_gather(loss.detach()))
        loss.backward()
        steps.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    return {"shared": shared is not None, "gradients": torch.stack(steps), "losses": torch.stack(losses),
            "largest": shared_memory.largest_bucket(ddp)}

results = {way: gradients(way) for way in ("gloo", "shared", "small")}
# single numbers of each kind TRL and the Trainer gather, through the served
# gather and through gloo; a vector still through gloo
shared = shared_memory.SharedMemory.create(4096)
accelerator = type("Accelerator", (), {"gather": staticmethod(gloo_gather)})()
shared.serve_gathers(accelerator)
numbers = [torch.tensor(rank * 7 + 3), torch.tensor(rank + 0.1), torch.tensor(rank == 1),
           torch.tensor(rank / 3, dtype=torch.float64), torch.tensor(rank + 1.5, dtype=torch.bfloat16)]
results["numbers"] = [(accelerator.gather(n), gloo_gather(n)) for n in numbers * 2]
results["vector"] = accelerator.gather(torch.arange(3) + rank)
results["barriers"] = shared._barriers
if rank == 1:
    def refuse(path, size):
        raise PermissionError(f"{path}: /proc hidden")
    shared_memory._map = refuse
results["refused"] = gradients("refused")
results["buckets"] = buckets

torch.save(results, f"{sys.argv[1]}/rank-{rank}.pt")
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_group(world: int, out: Path) -> list[dict]:
    port = free_port()
    procs = []
    for rank in range(world):
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "WORLD_SIZE": str(world),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", RANK_SCRIPT, str(out)],
                env=env,
                text=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
    return [torch.load(out / f"rank-{rank}.pt") for rank in range(world)]


@pytest.mark.skipif(sys.platform != "linux", reason="the shared memory is a Linux memfd")
def test_two_processes_get_gloos_gradients_and_numbers_bit_for_bit(tmp_path):
    ranks = run_group(2, tmp_path)
    for rank in ranks:
        assert rank["shared"]["shared"] and rank["small"]["shared"] and not rank["refused"]["shared"]
        for way in ("shared", "small", "refused"):
            assert torch.equal(rank[way]["gradients"], rank["gloo"]["gradients"]), way
            assert torch.equal(rank[way]["losses"], rank["gloo"]["losses"]), way
        first, later = rank["buckets"][0], rank["buckets"][1:9]  # the shared way's
        assert len(rank["buckets"]) == 2 * (1 + 2 * 4)
        assert first == sum(later[:4]) > rank["shared"]["largest"] >= max(later)
        assert min(later) <= 59_000 < max(later)  # the small slots took some buckets, not all
    assert torch.equal(ranks[0]["shared"]["gradients"], ranks[1]["shared"]["gradients"])
    assert ranks[0]["gloo"]["gradients"].abs().sum() > 0
    for rank in ranks:
        for served, gloo in rank["numbers"]:
            assert served.dtype == gloo.dtype and torch.equal(served, gloo)
        assert rank["barriers"] == 10  # one a number; the vector went through gloo
        assert torch.equal(rank["vector"], torch.tensor([0, 1, 2, 1, 2, 3]))


@pytest.mark.skipif(sys.platform != "linux", reason="the shared memory is a Linux memfd")
def test_three_processes_get_the_same_gradients_each(tmp_path):
    ranks = run_group(3, tmp_path)
    for rank in ranks:
        assert rank["shared"]["shared"] and not rank["refused"]["shared"]
        for way in ("shared", "small"):  # summed in another order than gloo's ring: equal to its rounding
            torch.testing.assert_close(rank[way]["gradients"], rank["gloo"]["gradients"])
            assert torch.equal(rank[way]["gradients"], ranks[0][way]["gradients"])
            assert torch.equal(rank[way]["losses"], rank["gloo"]["losses"])
        assert torch.equal(rank["refused"]["gradients"], rank["gloo"]["gradients"])
        assert all(torch.equal(served, gloo) for served, gloo in rank["numbers"])


@pytest.mark.parametrize(
    ("env", "here"),
    [
        ({"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}, True),
        ({"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, False),  # two machines
        ({"WORLD_SIZE": "2"}, False),  # a launcher that does not say
        ({"WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}, False),
        ({}, False),
    ],
)
def test_only_a_group_all_on_this_machine_shares_memory(monkeypatch, env, here):
    for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert all_processes_here() is here


@pytest.fixture
def group_of_one(monkeypatch):
    """A gloo group of this process alone, ended after the test."""
    import torch.distributed as dist

    for name, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def one_step(model, shared=None, register=False):
    """The gradients of one step of ``model`` under DDP (``register``: through
    ``ShareAtTrainBegin``; ``shared``: that hook state registered by hand)."""
    from torch.nn.parallel import DistributedDataParallel

    from rosetrain.train.shared_memory import ShareAtTrainBegin, average

    ddp = DistributedDataParallel(model, gradient_as_bucket_view=True)
    if register:
        trainer = SimpleNamespace(model_wrapped=ddp, accelerator=SimpleNamespace(gather=None))
        ShareAtTrainBegin(trainer).on_train_begin(None, None, None)
        assert torch.equal(trainer.accelerator.gather(torch.tensor(7)), torch.tensor([7]))
    if shared is not None:
        ddp.register_comm_hook(shared, average)
    ddp(torch.linspace(-1, 1, 120).view(3, 40)).square().sum().backward()
    return ddp, [p.grad.clone() for p in model.parameters()]


@pytest.mark.skipif(sys.platform != "linux", reason="the shared memory is a Linux memfd")
def test_the_hook_registered_at_train_begin_averages_in_this_process(group_of_one):
    import copy

    from rosetrain.train.shared_memory import ShareAtTrainBegin, SharedMemory, largest_bucket

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(40, 40), torch.nn.Linear(40, 2))
    plain = copy.deepcopy(model)
    plain(torch.linspace(-1, 1, 120).view(3, 40)).square().sum().backward()
    expected = [p.grad for p in plain.parameters()]

    ddp, got = one_step(copy.deepcopy(model), register=True)
    (hook, shared), *others = ddp._comm_hooks
    assert hook.__name__ == "average" and not others
    assert shared.slot_bytes >= largest_bucket(ddp) == sum(p.numel() * 4 for p in model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    # a model that already has a hook (accelerate's own) keeps it; single numbers still go through the memory
    trainer = SimpleNamespace(model_wrapped=ddp, accelerator=SimpleNamespace(gather=lambda tensor: "gloo"))
    ShareAtTrainBegin(trainer).on_train_begin(None, None, None)
    assert len(ddp._comm_hooks) == 1
    assert trainer.accelerator.gather(torch.tensor(True)).tolist() == [True]
    assert trainer.accelerator.gather(torch.ones(2)) == "gloo"
    # a bucket larger than the slots goes through gloo, to the same gradients
    _, through_gloo = one_step(copy.deepcopy(model), shared=SharedMemory.create(64))
    assert all(torch.equal(a, b) for a, b in zip(through_gloo, expected, strict=True))


def lone_rank(world: int = 2, timeout: float = 1800.0):
    """Process 0 of a group of ``world`` whose others never come: a file of its own."""
    import mmap

    from rosetrain.train.shared_memory import SharedMemory

    memory = mmap.mmap(-1, SharedMemory.size(64, world))
    return SharedMemory(memory, 64, rank=0, world=world, timeout=timeout)


@pytest.mark.skipif(not shared_memory._ORDERED_STORES, reason="the counters' barrier is x86's")
def test_a_barrier_whose_others_never_come_raises_after_the_timeout():
    shared = lone_rank(world=3, timeout=0.05)
    shared._counters[2] = 1  # process 2 came, process 1 did not
    start = time.monotonic()
    with pytest.raises(
        RuntimeError, match=r"process 0 waited 0 s at the shared-memory barrier for processes \[1\]"
    ):
        shared.barrier()
    assert time.monotonic() - start < 5


def test_without_ordered_stores_the_barrier_is_gloos(group_of_one, monkeypatch):
    from rosetrain.train.shared_memory import SharedMemory

    waits = []
    monkeypatch.setattr(shared_memory, "_ORDERED_STORES", False)
    monkeypatch.setattr(torch.distributed, "barrier", lambda: waits.append(1))
    shared = SharedMemory.create(64)
    assert torch.equal(shared.gather_number(torch.tensor(2.5)), torch.tensor([2.5]))
    assert waits == [1] and shared._barriers == 1
