"""``meanwhile``: a task run in a forked process while the caller goes on, its
result or its error brought back; a process that dies is a clear error."""

from __future__ import annotations

import os
import signal

import pytest

from rosetrain.core.cpus import ResultMemory, can_fork, forked_pool, meanwhile
from rosetrain.core.errors import RosetrainError

forking = pytest.mark.skipif(not can_fork(), reason="needs the fork start method")


@forking
def test_the_task_runs_in_another_process_and_reads_what_this_one_holds():
    held = list(range(100_000))  # inherited, not pickled
    with meanwhile(lambda: (os.getpid(), sum(held)), fork=True, what="a sum") as result:
        held.append(1)  # the process forked on entry: it sees the list as it was
        pid, total = result()
    assert pid != os.getpid() and total == sum(range(100_000))


def _memory_files_open() -> list[str]:
    """The memory files (``ResultMemory``'s) this process holds open."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed meanwhile
            pass
    return [link for link in links if "rosetrain-results" in link]


@forking
def test_a_large_result_comes_back_whole_and_leaves_no_file_open():
    lines = [b"%d," % i * 20 for i in range(60_000)]  # some 20 MB, far past a pipe's 64 KB
    with meanwhile(lambda: (lines, "and a label"), fork=True, what="x") as result:
        assert len(_memory_files_open()) == 1
        back, label = result()
    assert back == lines and label == "and a label"
    assert _memory_files_open() == []


@forking
def test_the_tasks_error_reaches_the_caller():
    def fail():
        raise RosetrainError("bad bridge file", argument="bridges")

    with meanwhile(fail, fork=True, what="the bridge analyses") as result:
        with pytest.raises(RosetrainError, match="bad bridge file") as caught:
            result()
    assert caught.value.argument == "bridges"


@forking
def test_a_process_that_dies_is_named():
    with meanwhile(
        lambda: os.kill(os.getpid(), signal.SIGKILL), fork=True, what="the bridge analyses"
    ) as result:
        with pytest.raises(RosetrainError, match="computing the bridge analyses died.*num_proc=1") as caught:
            result()
    assert caught.value.argument == "num_proc"


def test_without_fork_the_task_runs_here_when_asked():
    ran = []
    with meanwhile(lambda: ran.append(os.getpid()) or "done", fork=False, what="x") as result:
        assert ran == []
        assert result() == "done"
    assert ran == [os.getpid()]


_MEMORY: ResultMemory | None = None  # inherited by the forked workers


def _block(n: int) -> list[bytes]:
    return [b"%d:%d" % (n, i) for i in range(5_000 * (n % 3 + 1))]  # results of unlike sizes


def _put_block(n: int) -> tuple[int, int]:
    assert _MEMORY is not None
    return _MEMORY.put(_block(n))


@forking
def test_result_memory_keeps_each_workers_results_apart():
    global _MEMORY
    memory = _MEMORY = ResultMemory()
    try:
        with forked_pool(2) as workers:
            places = list(workers.map(_put_block, range(12)))
        assert [memory.take(place) for place in places] == [_block(n) for n in range(12)]
        spans = sorted((start, start + size) for start, size in places)
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))  # none overlaps another
    finally:
        memory.close()
        _MEMORY = None
