"""Writing a run's many small files into a held output folder: one
``atomic_write`` a file against one ``atomic_writes`` for them all.

Every file rosetrain writes into a folder it holds (``output_lock``) is named
in the folder's ownership marker first, and its temp is recorded there while
it exists, so each write updates the marker. An update replaces the marker
file, which ext4 flushes to disk when a file is renamed over an existing one
(``auto_da_alloc``): about 2 ms where a plain rename costs 0.04. ``score``
writes about 30 summary files at the end of a run. Prints the best of
``--repeat`` for each way and their ratio.

    python benchmarks/write_files.py [--files 30] [--kb 130] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rosetrain.core.io import atomic_write, atomic_writes, output_lock  # noqa: E402


def timed(folder: Path, files: dict[str, bytes], together: bool) -> float:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    start = time.perf_counter()
    with output_lock(folder):
        if together:
            atomic_writes({folder / name: data for name, data in files.items()})
        else:
            for name, data in files.items():
                atomic_write(folder / name, data)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--kb", type=int, default=130, help="size of each file")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    files = {f"file-{i:02d}.csv": bytes([65 + i % 26]) * (args.kb * 1000) for i in range(args.files)}
    best = {False: float("inf"), True: float("inf")}
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp:  # the repository's file system, as runs/ is
        for _ in range(args.repeat):
            for together in (False, True):
                best[together] = min(best[together], timed(Path(tmp) / "out", files, together))
    print(f"files: {args.files} x {args.kb} KB into a held folder (best of {args.repeat})")
    print(f"one atomic_write a file: {best[False] * 1000:.1f} ms")
    print(f"one atomic_writes for all: {best[True] * 1000:.1f} ms")
    print(f"ratio: {best[False] / best[True]:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
