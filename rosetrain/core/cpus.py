"""How many CPUs this process may use (what ``--num-proc`` defaults to), and
whether work may go to forked processes.

``os.cpu_count()`` counts the machine's CPUs; a container or a cluster job
is often given a few of them (CPU affinity), and one worker per machine CPU
would crowd those few.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
