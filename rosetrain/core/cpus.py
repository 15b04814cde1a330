"""How many CPUs this process may use (what ``--num-proc`` defaults to),
whether work may go to forked processes, and a task run in one.

``os.cpu_count()`` counts the machine's CPUs; a container or a cluster job
is often given a few of them (CPU affinity), and one worker per machine CPU
would crowd those few.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import mmap
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable, Iterator

# the submodule itself: `concurrent.futures` alone names it only once something imported it
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from rosetrain.core.errors import RosetrainError

_T = TypeVar("_T")


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def pin_local_rank() -> list[int] | None:
    """On the CPU, one of several training processes on this machine (torchrun's
    ``LOCAL_RANK`` of ``LOCAL_WORLD_SIZE``) keeps to its own equal share of the
    cores they may all use, its threads with it; the cores it got, or None when
    nothing was pinned. Left to the scheduler, the processes and their threads
    (gloo's, the progress bar's) move between the cores and wait on each other
    at every all-reduce: two processes of the demo's SFT ran about 3% faster pinned
    (docs/benchmarks.md, "The training step"). Nothing is pinned where the
    cores do not split evenly, or where each process sees too few of them (the
    user has already given each its own)."""
    try:
        rank, ranks = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    if not hasattr(os, "sched_setaffinity") or ranks < 2 or not 0 <= rank < ranks:
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < ranks or len(cores) % ranks:
        return None
    share = len(cores) // ranks
    mine = cores[rank * share : (rank + 1) * share]
    for thread in os.listdir("/proc/self/task"):  # the threads already started; later ones inherit
        with contextlib.suppress(OSError):  # one that ended meanwhile
            os.sched_setaffinity(int(thread), mine)
    return mine


def can_fork() -> bool:
    """Forked processes share this one's memory (the predictions, a run's rows)
    at no cost; elsewhere each process would get a pickled copy of them, which
    costs more than the work it splits."""
    return sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()


def leave_interrupts() -> None:
    """A forked worker's initializer: Ctrl-C reaches the whole process group, and
    the parent stops its workers (its pool's exit ends them), without a
    traceback from each."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def forked_pool(processes: int) -> concurrent.futures.ProcessPoolExecutor:
    """Worker processes forked from this one (``can_fork``), which leave Ctrl-C
    to it (``leave_interrupts``)."""
    context = multiprocessing.get_context("fork")
    return concurrent.futures.ProcessPoolExecutor(processes, context, initializer=leave_interrupts)


class ResultMemory:
    """Results of forked processes, written into one anonymous memory file
    (``memfd``) that the processes inherit, where the pool's pipe would carry
    them 64 KB at a time: a worker stalls on a full pipe until the parent's
    reading thread, which waits for a core of its own, drains it. Scoring 51,000
    items sends 110 MB of per-item lines from its workers: 0.1 s less wall time
    this way (docs/benchmarks.md). Create it before the processes fork; each
    ``put`` (pickled) or ``put_bytes`` appends where a shared counter says, and
    returns the place that ``take`` (or ``read``) reads from; ``mapped`` maps
    all of it once the processes are done. The file holds every result until
    ``close`` and the map is gone."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("rosetrain-results", os.MFD_CLOEXEC)
        self._end = multiprocessing.get_context("fork").Value("q", 0)  # its lock is shared too

    def put(self, value: Any) -> tuple[int, int]:
        return self.put_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def put_bytes(self, data: bytes) -> tuple[int, int]:
        with self._end.get_lock():
            start = self._end.value
            self._end.value = start + len(data)
        view, done = memoryview(data), 0
        while done < len(data):
            done += os.pwrite(self.fd, view[done:], start + done)
        return start, len(data)

    def take(self, place: tuple[int, int]) -> Any:
        return pickle.loads(self.read(place))

    def read(self, place: tuple[int, int]) -> bytes:
        start, size = place
        data = os.pread(self.fd, size, start)
        while len(data) < size:  # a read stops at 2 GB
            data += os.pread(self.fd, size - len(data), start + len(data))
        return data

    def mapped(self) -> mmap.mmap | bytes:
        """Everything put, mapped (read-only; empty bytes when nothing was)."""
        size = self._end.value
        return mmap.mmap(self.fd, size, prot=mmap.PROT_READ) if size else b""

    def close(self) -> None:
        os.close(self.fd)


# The task a forked process runs: set before it forks, so the process inherits
# what the task reads instead of a pickled copy, and the memory its result goes to.
_TASK: tuple[Callable[[], Any], ResultMemory] | None = None


def _run_task() -> tuple[int, int]:
    assert _TASK is not None
    task, memory = _TASK
    return memory.put(task())


@contextlib.contextmanager
def meanwhile(task: Callable[[], _T], fork: bool, what: str) -> Iterator[Callable[[], _T]]:
    """Yields what returns ``task()``: with ``fork``, run in a forked process
    while this one goes on; else run when asked for. The process forks on
    entry, so start no thread before: a forked copy of a lock that another
    thread held would never be released. Leaving the block waits for the
    process to end. ``what``: the task, as an error names it."""
    if not (fork and can_fork()):
        yield task
        return
    global _TASK
    # a large result (the bridge analyses' lines, 35 MB at 51,000 items when both
    # were forked) crossed the pipe in 0.11-0.44 s, and crosses memory in 0.07-0.10 s
    memory = ResultMemory()
    _TASK = (task, memory)
    workers = forked_pool(1)
    try:
        # the fork start method launches the process here, in this thread,
        # before the pool starts a thread of its own
        pending = workers.submit(_run_task)
    except BaseException:
        workers.shutdown(wait=True, cancel_futures=True)
        memory.close()
        raise
    finally:
        _TASK = None

    def result() -> _T:
        try:
            return memory.take(pending.result())
        except BrokenProcessPool:
            raise RosetrainError(
                f"the process computing {what} died (killed, or out of memory?); run "
                "again, with num_proc=1 to compute it in this process",
                argument="num_proc",
            ) from None

    try:
        with workers:
            yield result
    finally:
        memory.close()
