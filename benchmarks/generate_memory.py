"""Peak memory of `rosetrain generate` as the number of scenes grows.

Runs one `rosetrain generate` (a fresh process, as a user runs it) and samples
every process of it (the main process and its workers) once a second. Each
time the finished shards reach a checkpoint (10,000, 50,000, 100,000 scenes by
default) it records every process's peak RSS so far (the kernel's high-water
mark, VmHWM, so nothing between two samples is missed) and its current RSS.
Memory is flat when the peaks stop growing after the first checkpoint: a
writer that kept rows, images or cache entries would keep raising them.

    python benchmarks/generate_memory.py [--scenes 100000] [--num-proc 2] [--formats hf]

The split is written into a temporary folder that is removed at the end
(100,000 scenes of the rose-protocol spec take about 6.5 GB as Parquet).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def high_water_mib(process: psutil.Process) -> float:
    """VmHWM (peak resident set) of a live process, from /proc (Linux)."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return process.memory_info().rss / MIB


def snapshot(main: psutil.Process) -> dict[int, tuple[str, float, float]]:
    """pid -> (role, peak MiB, current MiB) for the main process and its workers."""
    rows = {}
    for role, process in [("main", main)] + [("worker", c) for c in main.children(recursive=True)]:
        try:
            rows[process.pid] = (role, high_water_mib(process), process.memory_info().rss / MIB)
        except (psutil.NoSuchProcess, FileNotFoundError, ProcessLookupError):
            continue  # a worker that just ended
    return rows


def scenes_done(out: Path, split: str, shard_size: int) -> int:
    return len(list((out / ".parts" / split).glob("part-*.jsonl"))) * shard_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # absolute: generate runs in this checkout's root, the caller's --spec is relative to them
    parser.add_argument(
        "--spec",
        type=lambda p: str(Path(p).absolute()),
        default=str(ROOT / "generators" / "rose-protocol.yaml"),
    )
    parser.add_argument("--scenes", type=int, default=100_000)
    parser.add_argument("--checkpoints", default="10000,50000,100000")
    parser.add_argument("--num-proc", type=int, default=2)
    parser.add_argument("--formats", default="hf")
    parser.add_argument("--shard-size", type=int, default=1000)
    args = parser.parse_args()
    checkpoints = sorted(int(c) for c in args.checkpoints.split(",") if int(c) <= args.scenes)

    with tempfile.TemporaryDirectory(prefix="rosetrain-bench-memory-") as tmp:
        out = Path(tmp) / "out"
        command = [sys.executable, "-m", "rosetrain", "generate", "--spec", args.spec, "--out", str(out)]
        command += ["--scenes", str(args.scenes), "--num-proc", str(args.num_proc), "--formats", args.formats]
        command += ["--shard-size", str(args.shard_size), "--split", "train", "--quiet"]
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
        main_process = psutil.Process(child.pid)
        peaks: dict[int, tuple[str, float, float]] = {}
        table: list[tuple[int, float, dict[int, tuple[str, float, float]]]] = []
        while child.poll() is None:
            peaks.update(snapshot(main_process))
            done = scenes_done(out, "train", args.shard_size)
            while checkpoints and done >= checkpoints[0]:
                table.append((checkpoints.pop(0), time.perf_counter() - started, dict(peaks)))
            time.sleep(1.0)
        if child.returncode:
            sys.exit(f"rosetrain generate failed with exit code {child.returncode}")
        # the last shards can finish between two samples: the peaks last seen are final
        done = scenes_done(out, "train", args.shard_size)
        table += [(c, time.perf_counter() - started, dict(peaks)) for c in checkpoints if done >= c]

    print(f"spec {args.spec}, {args.scenes} scenes, --num-proc {args.num_proc}, --formats {args.formats}")
    print("| scenes | minutes | process | peak RSS MiB | current RSS MiB |")
    print("|---|---|---|---|---|")
    for scenes, seconds, processes in table:
        for pid, (role, peak, current) in sorted(processes.items(), key=lambda item: item[1][0] != "main"):
            print(f"| {scenes:,} | {seconds / 60:.1f} | {role} {pid} | {peak:.0f} | {current:.0f} |")


if __name__ == "__main__":
    main()
