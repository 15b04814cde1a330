"""Several CPU training processes on one machine: each keeps to its own cores."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rosetrain.core.cpus import pin_local_rank

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")

# In a child: allow it `allowed` cores, start a thread, then pin as rank `rank`
# of `ranks`; print what it got and where the thread started before now runs.
PIN = textwrap.dedent(
    """
    import json, os, sys, threading
    allowed, rank, ranks = json.loads(sys.argv[1])
    os.sched_setaffinity(0, allowed)
    os.environ.update(LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks))
    started, stop = threading.Event(), threading.Event()
    ids = []
    def wait():
        ids.append(threading.get_native_id()); started.set(); stop.wait()
    thread = threading.Thread(target=wait); thread.start(); started.wait()
    from rosetrain.core.cpus import pin_local_rank
    mine = pin_local_rank()
    print(json.dumps([mine, sorted(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(ids[0]))]))
    stop.set(); thread.join()
    """
)


def pinned(allowed: list[int], rank: int, ranks: int) -> list:
    done = subprocess.run(
        [sys.executable, "-c", PIN, json.dumps([allowed, rank, ranks])],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores")
@pytest.mark.parametrize("rank", [0, 1])
def test_each_of_two_processes_keeps_to_its_own_core_with_its_threads(rank):
    two = CORES[:2]
    mine, process, thread = pinned(two, rank, 2)
    assert mine == process == thread == [two[rank]]


@pytest.mark.skipif(len(CORES) < 2, reason="needs two cores")
def test_cores_that_do_not_split_evenly_or_are_too_few_are_left_to_the_scheduler():
    two = CORES[:2]
    assert pinned(two, 0, 3) == [None, two, two]  # 2 cores, 3 processes
    assert pinned(two[:1], 1, 2) == [None, two[:1], two[:1]]  # each given its own already


def test_a_single_process_or_no_torchrun_pins_nothing(monkeypatch):
    before = os.sched_getaffinity(0)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert pin_local_rank() is None
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert pin_local_rank() is None
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "two")
    assert pin_local_rank() is None
    assert os.sched_getaffinity(0) == before
