"""Generation throughput against the encode-only floor, measured in the same run.

Ours: `rosetrain generate` as a user runs it (a fresh process: start-up, font
warm-up, drawing, PNG encoding, images + Parquet + JSON writing, manifest),
on the rose-protocol spec, release layout and Parquet. Floor: the identical
images (drawn here, outside the timed part), in memory, PNG-encoded with the
same settings, and nothing else. Both in CPU seconds (process + children):
on a machine shared with other jobs, wall time measures the other jobs too;
wall seconds are printed beside them. Font rankings are kept in a cache
folder between runs (rosetrain/generators/families/rankings.py): the first run
fills a fresh one, and its CPU time and ratio are printed on their own line;
the timed runs read it, as a user's every later run does. Prints tasks/s, images/s, the ratio
ours/floor (target >= 0.85), CPU ms and bytes per scene (docs/scale.md uses
them), and the peak RSS of the generate processes. ``--repeat R`` runs both
R times and keeps each side's least CPU time (other jobs only ever add to it).

    python benchmarks/generate.py [--scenes 300] [--num-proc N] [--repeat R]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rosetrain.core.cpus import available_cpus  # noqa: E402
from rosetrain.data.hf import png_bytes  # noqa: E402  (the writer's own encoder and settings)
from rosetrain.generators.records import build_records  # noqa: E402
from rosetrain.generators.spec import load_spec  # noqa: E402


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_generate(spec: str, out: Path, scenes: int, num_proc: int) -> tuple[dict, float, float]:
    """`rosetrain generate` in a child process: (summary, CPU s of it and its workers, wall s)."""
    command = [
        sys.executable,
        "-m",
        "rosetrain",
        "generate",
        "--spec",
        spec,
        "--out",
        str(out),
        "--split",
        "test",
        "--scenes",
        str(scenes),
        "--num-proc",
        str(num_proc),
        "--quiet",
        "--json",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    cpu, wall = children_cpu(), time.perf_counter()
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), children_cpu() - cpu, time.perf_counter() - wall


def encode_floor(spec, scenes: int) -> tuple[int, float, float]:
    """(images, CPU s, wall s) of PNG-encoding the split's images, in memory; each
    scene's images are drawn first, outside the timed part."""
    images = cpu = wall = 0
    for index in range(scenes):
        drawn = list(build_records(spec, spec.seed, index, "test").images.values())
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        for image in drawn:
            png_bytes(image)
        cpu += time.process_time() - cpu_start
        wall += time.perf_counter() - wall_start
        images += len(drawn)
    return images, cpu, wall


def folder_bytes(folder: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in folder.rglob(pattern) if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "generators" / "rose-protocol.yaml"))
    parser.add_argument("--scenes", type=int, default=300)
    parser.add_argument("--num-proc", type=int, default=available_cpus())
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    # the package's bytecode, as an installed wheel has it: with PYTHONDONTWRITEBYTECODE
    # set, an editable install would compile its modules in every timed process
    compileall.compile_dir(ROOT / "rosetrain", quiet=1)
    spec = load_spec(args.spec)

    ours, floors = [], []
    cache = Path(tempfile.mkdtemp(prefix="rosetrain-bench-cache-"))
    # the runs' and the floor's drawing: never the user's cache
    os.environ["ROSETRAIN_CACHE_DIR"] = str(cache)
    with tempfile.TemporaryDirectory() as tmp:  # the first run fills the cache: reported apart
        _, cold_cpu, _ = run_generate(args.spec, Path(tmp) / "out", args.scenes, args.num_proc)
    for _ in range(args.repeat):  # alternate, so a burst of load hits both sides alike
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            summary, cpu, wall = run_generate(args.spec, out, args.scenes, args.num_proc)
            ours.append((cpu, wall))
            n_images = sum(1 for _ in (out / "images").rglob("*.png"))
            png_total = folder_bytes(out / "images", "*.png")
            parquet_total = folder_bytes(out / "hf", "*.parquet")
        floor_images, cpu, wall = encode_floor(spec, args.scenes)
        floors.append((cpu, wall))
        assert floor_images == n_images, (floor_images, n_images)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    (ours_cpu, ours_wall), (floor_cpu, floor_wall) = min(ours), min(floors)

    rows, scenes = summary["rows"], args.scenes
    print(f"scenes={scenes} processes={args.num_proc} tasks={rows} images={n_images}")
    print(
        f"rosetrain generate: {rows / ours_cpu:.1f} tasks/s, {n_images / ours_cpu:.1f} images/s "
        f"per CPU second ({ours_cpu:.2f} CPU s; wall {ours_wall:.1f} s: "
        f"{rows / ours_wall:.1f} tasks/s, {n_images / ours_wall:.1f} images/s)"
    )
    print(
        f"floor (the same images, PNG-encoded in memory): {n_images / floor_cpu:.1f} images/s per "
        f"CPU second ({floor_cpu:.2f} CPU s; wall {floor_wall:.1f} s)"
    )
    print(
        f"ratio: {floor_cpu / ours_cpu:.2f} of the floor in CPU time (target >= 0.85; "
        f"least of {args.repeat} runs each; all runs: ours {[round(c, 2) for c, _ in ours]}, "
        f"floor {[round(c, 2) for c, _ in floors]} CPU s)"
    )
    print(
        f"first run, fonts not yet ranked in the cache: {cold_cpu:.2f} CPU s, "
        f"{floor_cpu / cold_cpu:.2f} of the floor"
    )
    if args.num_proc == 1:  # with more processes, wall time also counts idle and busy cores
        print(f"ratio in wall time: {floor_wall / ours_wall:.2f} (one process each)")
    print(
        f"per scene: {1000 * ours_cpu / scenes:.1f} CPU ms, PNG {png_total / scenes / 1024:.1f} KiB, "
        f"Parquet {parquet_total / scenes / 1024:.1f} KiB, {rows / scenes:.1f} tasks"
    )
    print(f"peak RSS of any generate process: {peak_mib:.0f} MiB")
    shutil.rmtree(cache)


if __name__ == "__main__":
    main()
