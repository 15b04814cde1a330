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
MB each), writes it and drops it. pyarrow's default pool in the PyPI wheels
is mimalloc, which asks the kernel for transparent huge pages on its arenas:
faulting them in, a shard's write stalled in kernel time, 0.1-0.5 s at a
time. On the system allocator the Parquet writes of a 600-scene split on two
processes took 0.41-0.44 CPU s against 0.98-1.14, the whole split 23.4-24.7
CPU s against 24.6-24.9, and the split's bytes are the same
(docs/benchmarks.md, "Generate"). A user who set ``ARROW_DEFAULT_MEMORY_POOL``
keeps their pool.

NumPy asks for transparent huge pages on every array of 4 MB or more. Where
the kernel's THP defrag setting is ``madvise`` (this machine's, and a common
default), faulting such an array in can wait for the kernel to compact
memory into 2 MB pages: ``rosetrain score``'s one such array (the summary's
13.5 MB of numbers at 51,000 items) took 0.02-0.20 s of kernel time,
zeroing huge pages, in runs that were otherwise alike
(``numpy_without_huge_pages``; docs/benchmarks.md, score). A user who set
``NUMPY_MADVISE_HUGEPAGE`` keeps their choice.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20  # glibc's own upper limit for the adaptive threshold
NO_TRIM = 2**31 - 1  # mallopt takes an int


def keep_freed_memory() -> bool:
    """Set glibc's thresholds for a long CPU job; whether they were set."""
    import ctypes  # here: score imports this module for NumPy's setting, and starts sooner without them
    import platform

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
    pyarrow was built with); whether it was set. Arrow's C++ side, the Parquet
    writer included, reads ``ARROW_DEFAULT_MEMORY_POOL`` once, when pyarrow is
    imported; ``pyarrow.set_memory_pool`` reaches only the pool that pyarrow's
    Python calls use. So the variable is set around pyarrow's import, and taken
    out again so that no process started later inherits it. Where pyarrow was
    imported already, only its Python calls can be moved."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return False
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
        return True
    with _set_for_import("ARROW_DEFAULT_MEMORY_POOL", "system"):  # both sides' default, Python's and C++'s
        import pyarrow  # noqa: F401
    return True


def numpy_without_huge_pages() -> bool:
    """NumPy's arrays on the ordinary pages; whether it was set. NumPy reads
    ``NUMPY_MADVISE_HUGEPAGE`` once, when imported: the variable is set around
    its import and taken out again, so that no process started later inherits
    it. Where NumPy was imported already, nothing is changed."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ or "numpy" in sys.modules:
        return False
    with _set_for_import("NUMPY_MADVISE_HUGEPAGE", "0"):
        import numpy  # noqa: F401
    return True


@contextlib.contextmanager
def _set_for_import(variable: str, value: str) -> Iterator[None]:
    """An environment variable that a module reads once, when imported, set for
    its import; then taken out again, so that no process started later inherits it."""
    os.environ[variable] = value
    try:
        yield
    finally:
        del os.environ[variable]


def _user_chose() -> bool:
    if any(name.startswith("MALLOC_") for name in os.environ):
        return True
    preload = os.environ.get("LD_PRELOAD", "")
    return "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "") or "malloc" in preload
