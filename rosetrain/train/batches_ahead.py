"""The next batches made while a training process waits for the others.

On a CPU group each process has one core, and at every collective of a step
(the gradient average, TRL's metric gathers) the faster process waits for the
slower one: 1.5 s of 30.8 s in 200 steps of the demo's SFT on two processes,
about 5% (docs/benchmarks.md, "The training step"). Here a thread of each
process makes its next two batches at the kernel's idle priority
(``SCHED_IDLE``): it gets the core when the step waits, and gives it back as
soon as the step can go on. At normal priority the same thread made two
processes slower, not faster: it took the core from the step.

The batches are the loader's own, made by its own code, in its order; only
when they are made changes. The thread collates with its own copy of the
collator, as a DataLoader worker process gets one, so the tokenizer's padding
settings are never changed under a held-out evaluation running in the main
thread.
"""

from __future__ import annotations

import atexit
import copy
import os
import queue
import threading
from collections.abc import Iterator
from typing import Any

AHEAD = 2  # batches made before the step asks for them
_JOIN_TIMEOUT_S = 30.0

# Every thread still making batches, with the event that stops it. The trainer
# drops a loader's iterator when the training ends, which only asks its thread
# to stop; a thread still in torch's code when the interpreter exits aborts the
# process ("terminate called without an active exception"), so at exit every
# one is stopped and waited for (atexit runs before daemon threads are dropped).
_MAKING: set[tuple[threading.Event, threading.Thread]] = set()


def stop_making_batches() -> None:
    """Stop every thread making batches ahead, and wait for the batch each is
    making (not for ever: a loader stuck on its input must not hang the exit)."""
    for stop, thread in list(_MAKING):
        stop.set()
        if thread is not threading.current_thread():
            thread.join(timeout=_JOIN_TIMEOUT_S)


atexit.register(stop_making_batches)


def idle_priority() -> bool:
    """This thread runs only when nothing else on its core would; whether the
    system allowed it (any process may lower its own threads' priority on Linux)."""
    try:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or a sandbox that refuses it
        return False
    return True


def _make_batches(batches: Iterator[Any], made: queue.Queue, stop: threading.Event) -> None:
    """The thread of a :class:`BatchesAhead`. It holds no reference to that
    object, so dropping the object stops the thread."""
    try:
        idle_priority()
        while not stop.is_set():
            try:
                item: tuple[Any, BaseException | None] = (next(batches), None)
            except BaseException as err:  # noqa: BLE001 - the end, or the loader's error, for the step to raise
                item = (None, err)
            while not stop.is_set():
                try:
                    made.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if item[1] is not None:
                return
    finally:
        _MAKING.discard((stop, threading.current_thread()))


class BatchesAhead:
    """The batches of ``batches`` (a DataLoader's own iterator), made ``AHEAD``
    of the step by a thread of idle priority. The loader's error, or its end,
    is raised where the step asks for the batch it stopped at; ``close`` (or
    dropping the iterator) ends the thread."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self._made: queue.Queue[tuple[Any, BaseException | None]] = queue.Queue(AHEAD)
        self._stop = threading.Event()
        self._ended: BaseException | None = None
        self._thread = threading.Thread(
            target=_make_batches,
            args=(batches, self._made, self._stop),
            name="rosetrain-batches-ahead",
            daemon=True,
        )
        _MAKING.add((self._stop, self._thread))
        self._thread.start()

    def __iter__(self) -> BatchesAhead:
        return self

    def __next__(self) -> Any:
        if self._ended is None:
            batch, error = self._made.get()
            if error is None:
                return batch
            self._ended = error
        if isinstance(self._ended, StopIteration):
            raise StopIteration
        raise self._ended

    def close(self) -> None:
        """End the thread, and wait for the batch it is making; the iterator ends."""
        self._stop.set()
        if self._ended is None:
            self._ended = StopIteration()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=_JOIN_TIMEOUT_S)

    def __del__(self) -> None:
        self._stop.set()


def make_batches_ahead(loader: Any) -> Any:
    """``loader`` (a DataLoader without worker processes, or accelerate's
    wrapper of one) hands out its batches through :class:`BatchesAhead`, its
    collator a copy of its own; the loader itself is returned."""
    base = getattr(loader, "base_dataloader", loader)  # accelerate's DataLoaderShard wraps the torch loader
    if base.num_workers:
        return loader  # worker processes make the batches already
    base.collate_fn = copy.deepcopy(base.collate_fn)
    plain = base._get_iterator  # what DataLoader.__iter__ calls without persistent workers

    def ahead() -> BatchesAhead:
        return BatchesAhead(plain())

    base._get_iterator = ahead
    return loader


def batches_ahead_of_the_step(trainer: Any) -> bool:
    """On a CPU group of several processes, the trainer's training batches are
    made ahead at idle priority (``make_batches_ahead``); whether they will be."""
    from rosetrain.train.distributed import has_gpu, launched_world_size

    if has_gpu() or launched_world_size() < 2 or trainer.args.dataloader_num_workers:
        return False
    make = trainer.get_train_dataloader

    def get_train_dataloader() -> Any:
        return make_batches_ahead(make())

    trainer.get_train_dataloader = get_train_dataloader
    return True
