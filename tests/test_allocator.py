"""rosetrain.core.allocator: glibc told to keep the memory a CPU training step frees."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from rosetrain.core import allocator

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)

# A step's pattern: forty 1 MB blocks allocated, then all freed, five times;
# the page faults of the last four. By default the freed top of the heap
# (40 MB, over the trim threshold) goes back to the system and is faulted back
# in at the next round; once told, the heap keeps it.
FAULTS = textwrap.dedent(
    """
    import resource, sys
    from rosetrain.core.allocator import keep_freed_memory
    if sys.argv[1] == "keep":
        assert keep_freed_memory()
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    def step():
        blocks = [bytearray(1 << 20) for _ in range(40)]
        del blocks
    step()
    start = faults()
    for _ in range(4):
        step()
    print(faults() - start)
    """
)


def _faults(mode: str) -> int:
    # glibc's defaults, whatever this process was started with
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("MALLOC_") and name not in ("GLIBC_TUNABLES", "LD_PRELOAD")
    }
    done = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True, env=env
    )
    return int(done.stdout)


@glibc
def test_freed_memory_is_kept_for_the_next_allocation():
    pages = (40 << 20) // 4096
    assert _faults("default") >= 3 * pages  # each round faulted in afresh
    assert _faults("keep") < pages // 4


@glibc
@pytest.mark.parametrize(
    "name, value",
    [
        ("MALLOC_TRIM_THRESHOLD_", "131072"),
        ("MALLOC_ARENA_MAX", "2"),
        ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536"),
        ("LD_PRELOAD", "/usr/lib/libjemalloc.so.2"),
    ],
)
def test_a_users_own_malloc_settings_are_kept(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert allocator.keep_freed_memory() is False


def test_elsewhere_nothing_is_set(monkeypatch):
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    assert allocator.keep_freed_memory() is False


ARROW_POOL = textwrap.dedent(
    """
    import io
    import os

    from rosetrain.core.allocator import arrow_on_system_allocator

    set_ = arrow_on_system_allocator()
    import pyarrow as pa
    import pyarrow.parquet as pq

    # what a Parquet shard's writer allocates in C++, not only pyarrow's own tables
    with pq.ParquetWriter(io.BytesIO(), pa.schema([("png", pa.binary())])) as writer:
        writer.write_table(pa.table({"png": [bytes(range(256)) * 4000] * 8}))
    others = 0  # what the other pools this wheel was built with gave out
    for pool in (pa.mimalloc_memory_pool, pa.jemalloc_memory_pool):
        try:
            others += pool().max_memory()
        except NotImplementedError:  # a wheel built without it
            pass
    print(set_, pa.default_memory_pool().backend_name, pa.system_memory_pool().max_memory() > 0, others,
          "ARROW_DEFAULT_MEMORY_POOL" in os.environ)
    """
)


@pytest.mark.parametrize("chosen", [None, "jemalloc"])
def test_arrow_tables_go_to_the_system_allocator_unless_the_user_chose(chosen):
    env = {name: value for name, value in os.environ.items() if name != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    done = subprocess.run(
        [sys.executable, "-c", ARROW_POOL], capture_output=True, text=True, check=True, env=env
    )
    set_, pool, system_used, others, left_set = done.stdout.split()
    if chosen is None:
        # the Parquet writer too (its pool is chosen when pyarrow is imported), and
        # the variable that chose it is not left for processes started later
        assert (set_, pool, system_used, left_set) == ("True", "system", "True", "False")
        assert others == "0"
    else:  # left as the user asked (a wheel built without that pool falls back to its default)
        assert set_ == "False" and pool != "system"


def test_where_pyarrow_was_imported_already_its_own_calls_still_move(monkeypatch):
    import pyarrow as pa

    before = pa.default_memory_pool()
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    try:
        assert allocator.arrow_on_system_allocator() is True
        assert pa.default_memory_pool().backend_name == "system"
        assert "ARROW_DEFAULT_MEMORY_POOL" not in os.environ
    finally:
        pa.set_memory_pool(before)


# NumPy's own switch, read back: _set_madvise_hugepage returns the value it replaces
HUGE_PAGES = textwrap.dedent(
    """
    import os, sys
    from rosetrain.core.allocator import numpy_without_huge_pages
    if sys.argv[1] == "before":
        import numpy
    print(numpy_without_huge_pages(), "NUMPY_MADVISE_HUGEPAGE" in os.environ)
    import numpy
    print(bool(numpy._core.multiarray._set_madvise_hugepage(False)))
    """
)


def _huge_pages(order: str, **env: str) -> list[str]:
    clean = {name: value for name, value in os.environ.items() if name != "NUMPY_MADVISE_HUGEPAGE"}
    done = subprocess.run(
        [sys.executable, "-c", HUGE_PAGES, order],
        capture_output=True,
        text=True,
        check=True,
        env={**clean, **env},
    )
    return done.stdout.split()


@pytest.mark.skipif(platform.system() != "Linux", reason="NumPy asks for huge pages on Linux only")
def test_numpy_is_imported_without_huge_pages_and_the_variable_is_gone():
    assert _huge_pages("after") == ["True", "False", "False"]
    assert _huge_pages("before") == ["False", "False", "True"]  # imported already: left as it was
    assert _huge_pages("after", NUMPY_MADVISE_HUGEPAGE="1") == ["False", "True", "True"]  # the user's
