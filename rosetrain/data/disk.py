"""How much disk a split will take, said before generate writes anything.

100,000 scenes of ``rose-protocol`` take 16 to 20 GB (release PNGs, Parquet
shards, metadata twice): a run that fills the disk hours in helps nobody. The
estimate renders a few scenes spread over the split in memory, with the same
encoders as the writers, and scales their bytes to the split; levels of a
curriculum differ in image size, so the samples are spread over the indices.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rosetrain.data.generate import GenerateJob

SAMPLES = 6
WARN_BYTES = 1 << 30  # below 1 GiB a split is not worth a word
ESTIMATE_FROM_SCENES = 2000  # smaller splits are not sampled (a test's split starts as before)


def sample_indices(scenes: int, samples: int = SAMPLES) -> list[int]:
    return sorted({(scenes - 1) * k // max(samples - 1, 1) for k in range(samples)})


def estimate_bytes(job: GenerateJob, scenes: int) -> int:
    """Bytes the split's ``scenes`` will take in ``job.formats``, from a few rendered samples."""
    import pyarrow.parquet as pq

    from rosetrain.data.hf import SCHEMA, hf_row, rows_to_table

    indices = sample_indices(scenes)
    total = 0
    rows: list[dict] = []
    for index in indices:
        example = job.scene_records(index)
        lines = sum(len(json.dumps(r, ensure_ascii=False, sort_keys=True)) + 1 for r in example.records)
        if "release" in job.formats:
            total += sum(map(len, example.images.values())) + 2 * lines  # metadata and its .parts copy
        if "hf" in job.formats:
            rows.extend(hf_row(r, example.images[r["image_id"]]) for r in example.records)
    if rows:
        buffer = io.BytesIO()
        with pq.ParquetWriter(buffer, SCHEMA) as writer:
            writer.write_table(rows_to_table(rows))
        total += len(buffer.getvalue())
    return total * scenes // len(indices)


def gigabytes(n: float) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def disk_note(job: GenerateJob, scenes: int) -> str | None:
    """A line to print before a large split is written (None for a small one):
    its estimated size, and the free space where it goes."""
    if scenes < ESTIMATE_FROM_SCENES:
        return None
    need = estimate_bytes(job, scenes)
    where = Path(job.out_dir)
    while not where.exists():  # the folder is made later: ask the disk of its nearest parent
        where = where.parent
    free = shutil.disk_usage(where).free
    if need < WARN_BYTES and need < free // 2:
        return None
    line = (
        f"{scenes:,} scenes in {', '.join(job.formats)} take about {gigabytes(need)} "
        f"(estimated from {len(sample_indices(scenes))} scenes); {gigabytes(free)} free on {where}"
    )
    if need > free:
        line += ": NOT ENOUGH; generate fewer scenes, --formats hf or release alone, or another --out"
    return line
