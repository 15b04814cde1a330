"""The training batches made ahead at idle priority: the loader's own batches
in its order, its error and its end where the step asks, a thread that ends
with the training, and only on a CPU group of several processes."""

from __future__ import annotations

import os
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from rosetrain.train.batches_ahead import (
    BatchesAhead,
    batches_ahead_of_the_step,
    make_batches_ahead,
    stop_making_batches,
)

torch = pytest.importorskip("torch")


class Rows(torch.utils.data.IterableDataset):
    """Rows 0..n-1; an error at row ``fail`` when set."""

    def __init__(self, n: int, fail: int | None = None) -> None:
        self.n, self.fail = n, fail

    def __iter__(self):
        for i in range(self.n):
            if i == self.fail:
                raise ValueError(f"row {i}: unreadable")
            yield {"x": torch.full((3,), float(i))}


class Collate:
    """A collator with state, as TRL's holds its processor."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, rows):
        self.calls += 1
        return torch.stack([row["x"] for row in rows])


def ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rosetrain-batches-ahead"]


def test_the_batches_are_the_loaders_own_in_its_order():
    loader = torch.utils.data.DataLoader(Rows(21), batch_size=4, collate_fn=Collate())
    plain = [batch.clone() for batch in loader]
    ahead = BatchesAhead(iter(loader))
    got = list(ahead)
    assert len(got) == len(plain) == 6
    assert all(torch.equal(a, b) for a, b in zip(got, plain, strict=True))
    with pytest.raises(StopIteration):  # and it stays ended
        next(ahead)


def test_the_loaders_error_is_raised_where_the_step_asks_for_that_batch():
    ahead = BatchesAhead(
        iter(torch.utils.data.DataLoader(Rows(20, fail=9), batch_size=4, collate_fn=Collate()))
    )
    assert [batch[0, 0].item() for batch in (next(ahead), next(ahead))] == [0.0, 4.0]
    for _ in range(2):  # the same error on every later ask
        with pytest.raises(ValueError, match="row 9: unreadable"):
            next(ahead)


@pytest.mark.skipif(sys.platform != "linux", reason="SCHED_IDLE is Linux's")
def test_the_thread_runs_at_idle_priority_and_ends_on_close():
    ahead = BatchesAhead(iter(torch.utils.data.DataLoader(Rows(10_000), batch_size=2, collate_fn=Collate())))
    next(ahead)
    (thread,) = ahead_threads()
    assert os.sched_getscheduler(thread.native_id) == os.SCHED_IDLE
    time.sleep(0.05)  # it has filled its queue and waits to put the next batch
    ahead.close()
    assert not thread.is_alive()
    assert not ahead_threads()
    with pytest.raises(StopIteration):  # a closed iterator has ended
        next(ahead)


def test_a_loader_hands_out_its_batches_ahead_with_its_own_collator():
    collate = Collate()
    loader = torch.utils.data.DataLoader(Rows(12), batch_size=4, collate_fn=collate)
    assert make_batches_ahead(loader) is loader
    assert loader.collate_fn is not collate and isinstance(loader.collate_fn, Collate)
    batches = iter(loader)
    assert isinstance(batches, BatchesAhead)
    assert [batch[0, 0].item() for batch in batches] == [0.0, 4.0, 8.0]
    assert collate.calls == 0  # the trainer's own collator is left to the main thread
    workers = torch.utils.data.DataLoader(Rows(12), batch_size=4, num_workers=1)
    make_batches_ahead(workers)
    assert not isinstance(iter(workers), BatchesAhead)  # worker processes make them already


def fake_trainer(workers: int = 0) -> SimpleNamespace:
    trainer = SimpleNamespace(args=SimpleNamespace(dataloader_num_workers=workers))
    trainer.get_train_dataloader = lambda: torch.utils.data.DataLoader(
        Rows(8), batch_size=4, collate_fn=Collate()
    )
    return trainer


@pytest.mark.parametrize(("world", "workers", "ahead"), [("2", 0, True), ("1", 0, False), ("2", 1, False)])
def test_only_a_cpu_group_of_several_processes_makes_batches_ahead(monkeypatch, world, workers, ahead):
    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.setattr("rosetrain.train.distributed.has_gpu", lambda: False)
    trainer = fake_trainer(workers)
    assert batches_ahead_of_the_step(trainer) is ahead
    batches = iter(trainer.get_train_dataloader())
    assert isinstance(batches, BatchesAhead) is ahead
    if ahead:  # at exit every thread is stopped and waited for
        next(batches)
        stop_making_batches()
        assert not ahead_threads()
