"""Process-wide allocator settings for rosetrain's own long CPU jobs.

glibc's allocator, told to keep the memory a CPU training step frees
(``keep_freed_memory``), and Arrow's tables put on that allocator instead of
the one pyarrow's wheels default to (``arrow_on_system_allocator``), both
process-wide: a CPU training sets the first, ``rosetrain generate`` in its own
process the second. A user's own settings always win.

By default glibc hands a freed block back to the system when it is large
(its mmap threshold, which adapts up to 32 MB) or sits at the top of the
heap (its trim threshold). A training step frees its activations and
gradients and asks for the same sizes again, so the same memory is returned
and faulted back in at every step: 18,000 page faults a step of the demo's SFT
on one core, and the kernel's time for them was 8% of the run. With a fixed
32 MB mmap threshold and no trimming, the freed blocks stay in the heap for
the next step: 5,600 faults a step, and 3.97 steps/s against 3.78
(docs/benchmarks.md, "The training step"). The process keeps its peak memory
until it ends, as a training process does anyway.

The same settings as the environment variables ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_``, set from inside the process with ``mallopt``. A
user who set any ``MALLOC_*`` variable, or glibc's malloc tunables, keeps their
own; another C library, or an allocator preloaded in glibc's place (jemalloc,
tcmalloc), is left alone.

``generate`` builds one Arrow table of PNG bytes per Parquet shard (several
MB each) and drops it. With pyarrow's default pool (mimalloc in the PyPI
wheels) a 600-scene split took 0.97-2.60 s of kernel time in one process;
with the system allocator 0.40-0.84 s, the user time the same (22.0-22.3 s),
and the split's bytes the same. On two processes, alternated with the code
before, it saved 0.6-1.4 of 24-26 CPU s in every pair (docs/benchmarks.md,
"Generate"). A user who set ``ARROW_DEFAULT_MEMORY_POOL`` keeps their pool.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20  # glibc's own upper limit for the adaptive threshold
NO_TRIM = 2**31 - 1  # mallopt takes an int


def keep_freed_memory() -> bool:
    """Set glibc's thresholds for a long CPU job; whether they were set."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or _user_chose():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success: both, or the second is not worth having alone
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, NO_TRIM))


def arrow_on_system_allocator() -> bool:
    """Arrow's default memory pool set to the system allocator (whatever pool
    pyarrow was built with); whether it was set."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True


def _user_chose() -> bool:
    if any(name.startswith("MALLOC_") for name in os.environ):
        return True
    preload = os.environ.get("LD_PRELOAD", "")
    return "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "") or "malloc" in preload
