"""Generation throughput against a floor measured in the same run.

Ours: `rosetrain generate` on the rose-protocol spec with all cores, writing
the release layout and Parquet shards. Floor: the same images drawn with plain
PIL (the family's two cells tiled, the cue rectangle drawn) and PNG-encoded,
with the same number of processes, nothing else. Prints tasks/s, images/s,
the floor's images/s, their ratio (target >= 0.7), and peak memory.

    python benchmarks/generate.py [--scenes 300] [--num-proc N]
"""
from __future__ import annotations

import argparse
import io
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rosetrain.data.generate import make_job, run_job  # noqa: E402
from rosetrain.data.hf import PNG_COMPRESS_LEVEL  # noqa: E402
from rosetrain.examples import build_example  # noqa: E402
from rosetrain.render import scene_cells  # noqa: E402
from rosetrain.spec import load_spec  # noqa: E402


def floor_inputs(spec, seed, scenes):
    """Per scene: the two cells, the grid, the targets, the cue box (drawing
    inputs only; computed outside the timed floor)."""
    out = []
    for i in range(scenes):
        example = build_example(spec, seed, i, "test", render=False)
        scene = example.scene
        majority, exception = scene_cells(scene)
        cue = next(r["region_params"] for r in example.records if r["region_type"] == "VISUAL_REGION")
        out.append((majority.tobytes(), exception.tobytes(), scene.cell_size, scene.rows, scene.cols,
                    scene.targets, cue))
    return out


def floor_draw(job):
    majority_bytes, exception_bytes, size, rows, cols, targets, cue = job
    majority = Image.frombytes("RGB", (size, size), majority_bytes)
    exception = Image.frombytes("RGB", (size, size), exception_bytes)
    image = Image.new("RGB", (cols * size, rows * size))
    for r in range(1, rows + 1):
        for c in range(1, cols + 1):
            image.paste(exception if (r, c) in targets else majority, ((c - 1) * size, (r - 1) * size))
    encoded = [png(image)]
    cued = image.copy()
    ImageDraw.Draw(cued).rectangle(((cue["c1"] - 1) * size, (cue["r1"] - 1) * size,
                                    cue["c2"] * size - 1, cue["r2"] * size - 1), outline=(255, 0, 0), width=4)
    encoded.append(png(cued))
    return len(encoded)


def png(image):
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default=str(ROOT / "generators" / "rose-protocol.yaml"))
    parser.add_argument("--scenes", type=int, default=300)
    parser.add_argument("--num-proc", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    spec = load_spec(args.spec)

    with tempfile.TemporaryDirectory() as tmp:
        job = make_job(spec, Path(tmp) / "out", "test", args.scenes, num_proc=args.num_proc)
        start = time.perf_counter()
        summary = run_job(job, progress=False)
        ours = time.perf_counter() - start
        n_images = sum(1 for _ in (Path(tmp) / "out" / "images").rglob("*.png"))

    inputs = floor_inputs(spec, spec.seed, args.scenes)
    start = time.perf_counter()
    with ProcessPoolExecutor(args.num_proc) as pool:
        floor_images = sum(pool.map(floor_draw, inputs, chunksize=8))
    floor = time.perf_counter() - start
    peak_mib = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024

    ours_ips, floor_ips = n_images / ours, floor_images / floor
    print(f"scenes={args.scenes} processes={args.num_proc} tasks={summary['rows']} images={n_images}")
    print(f"rosetrain generate: {summary['rows'] / ours:.1f} tasks/s, {ours_ips:.1f} images/s ({ours:.1f} s)")
    print(f"floor (PIL tile + cue + PNG encode): {floor_ips:.1f} images/s ({floor:.1f} s)")
    print(f"ratio: {ours_ips / floor_ips:.2f} of the floor (target >= 0.70)")
    print(f"peak RSS of any process: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
