"""How much memory is free, and refusing sizes that would not fit.

A size that needs more memory than the machine has free (a shuffle buffer of
10**12 rows, a batch of a million images) would pass every other check and then
eat the machine's memory until the kernel kills the process; it is refused before
any work starts, with the estimate in the message. Linux's ``MemAvailable``
(``/proc/meminfo``), else the physical memory, else no check.
"""

from __future__ import annotations

import os

from rosetrain.core.errors import RosetrainError


def available_memory() -> int | None:
    """Bytes the kernel could give this process now without swapping, or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def format_bytes(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if count < 1024 or unit == "PiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def too_big(estimate: float, what: str) -> str | None:
    """Why ``what`` (a key or option and its value) cannot run, when its
    ``estimate`` in bytes exceeds the free memory; else None."""
    free = available_memory()
    if free is None or estimate <= free:
        return None
    return (
        f"{what}: needs about {format_bytes(estimate)} of memory, more than the "
        f"{format_bytes(free)} free; use a smaller value"
    )


def check_fits(estimate: float, what: str) -> None:
    """Raise RosetrainError with :func:`too_big`'s reason, if there is one."""
    problem = too_big(estimate, what)
    if problem:
        raise RosetrainError(problem)
