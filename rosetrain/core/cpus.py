"""How many CPUs this process may use: what ``--num-proc`` defaults to.

``os.cpu_count()`` counts the machine's CPUs; a container or a cluster job
is often given a few of them (CPU affinity), and one worker per machine CPU
would crowd those few.
"""

from __future__ import annotations

import os


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
