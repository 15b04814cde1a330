"""Many machines, no coordination: ``--shard K/N`` jobs, then one ``--merge``.

Scene *i* depends only on (spec, seed, *i*), and shard boundaries only on the
number of scenes, so N jobs (a Slurm or Kubernetes array) can each make every
N-th shard into a folder of their own. The same command with ``--merge
FOLDER...`` then checks that the folders hold exactly the N finished jobs of
this very split, copies their shards in (each shard's part last: a part marks
its shard done, as in a one-machine run) and joins them: the result is byte
for byte the folder one machine would have written, with one manifest.
Shards land through :func:`rosetrain.data.store.store_shard`, as the Ray engine's do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import output_lock
from rosetrain.data.generate import (
    MANIFEST_KEYS,
    GenerateJob,
    finish,
    parse_shard,
    prepare,
    settings,
    shard_is_whole,
)
from rosetrain.data.manifest import manifest_path, read_manifest
from rosetrain.data.paths import confined_path
from rosetrain.data.store import store_shard


def merge(
    job: GenerateJob, folders: Iterable[str | Path], *, overwrite: bool = False, progress: bool = True
) -> dict[str, Any]:
    """Join the folders of N ``--shard K/N`` jobs into ``job.out_dir``."""
    from tqdm import tqdm

    owners = shard_owners(job, [Path(f) for f in folders])
    try:
        with output_lock(job.out_dir, "this output folder"):
            todo = prepare(job, overwrite)
            with tqdm(total=len(todo), unit="shard", disable=not progress, desc=f"merge {job.split}") as bar:
                for shard in todo:
                    copy_shard(job, shard, owners[shard])
                    bar.update(1)
            n_rows, n_scenes = finish(job)
    except OSError as err:
        raise RosetrainError(
            f"{err.filename or job.out_dir}: cannot write ({err.strerror or err}); "
            f"fix that and run the same command again to resume"
        ) from None
    return {
        "split": job.split,
        "scenes": n_scenes,
        "skipped_scenes": job.scenes - n_scenes,
        "rows": n_rows,
        "out": str(job.out_dir),
        "metadata": str(job.metadata_path),
        "merged": len(set(owners.values())),
    }


def shard_owners(job: GenerateJob, folders: list[Path]) -> dict[int, Path]:
    """shard -> the folder of the job that made it, after checking that the
    folders are the N finished jobs of this split (same settings, each K once)."""
    if not folders:
        raise RosetrainError("folders: name the folders of the shard K/N jobs", argument="folders")
    jobs: dict[int, Path] = {}
    total = 0  # the number of jobs, as the first folder says
    for folder in folders:
        if folder.resolve() == job.out_dir.resolve():  # --overwrite would delete what it merges
            raise RosetrainError(
                f"folders: {folder} is also the output folder; merge into a folder of its own",
                argument="folders",
            )
        k, n = _finished_shard_job(job, folder)
        if jobs and n != total:
            raise RosetrainError(
                f"folders: {folder} is job {k}/{n}, the others are of {total} jobs", argument="folders"
            )
        if k in jobs:
            raise RosetrainError(f"folders: {jobs[k]} and {folder} are both job {k}/{n}", argument="folders")
        total, jobs[k] = n, folder
    missing = sorted(set(range(total)) - set(jobs))
    if missing:
        raise RosetrainError(
            f"folders: jobs {', '.join(f'{k}/{total}' for k in missing)} are missing "
            f"(got {len(jobs)} of {total} folders)",
            argument="folders",
        )
    owners = {}
    for k, folder in jobs.items():
        shard_job = dataclasses.replace(job, out_dir=folder, shard_of=(k, total))
        for shard in shard_job.own_shards:
            if not shard_is_whole(shard_job, shard):
                raise RosetrainError(
                    f"folders: {folder}: shard {shard} is missing or damaged; rerun "
                    f"that job's command (shard {k}/{total}) to repair it",
                    argument="folders",
                )
            owners[shard] = folder
    return owners


def _finished_shard_job(job: GenerateJob, folder: Path) -> tuple[int, int]:
    manifest = read_manifest(manifest_path(folder, job.split), job.split)
    if manifest is None or "shard" not in manifest:
        raise RosetrainError(
            f"folders: {folder} holds no shard job of split {job.split!r} "
            f"(no {manifest_path(folder, job.split).relative_to(folder)} naming a shard)",
            argument="folders",
        )
    k, n = parse_shard(manifest["shard"])
    ours = settings(dataclasses.replace(job, shard_of=(k, n)))
    changed = [key for key in MANIFEST_KEYS if manifest.get(key) != ours.get(key)]
    if changed:
        raise RosetrainError(
            f"folders: {folder} was made with other settings than this job "
            f"({', '.join(f'{key}: {manifest.get(key)!r}' for key in changed)})",
            argument="folders",
        )
    if manifest.get("files") is None:
        raise RosetrainError(
            f"folders: {folder}: job {k}/{n} has not finished; run its command "
            f"again (shard {k}/{n}) to finish it",
            argument="folders",
        )
    return k, n


def copy_shard(job: GenerateJob, shard: int, source: Path) -> None:
    """Copy one whole shard from another job's folder."""
    names = shard_file_names(job, shard, source)
    store_shard(job, shard, {name: confined_path(source, name, f"--merge {source}") for name in names})


def shard_file_names(job: GenerateJob, shard: int, folder: Path) -> list[str]:
    """A whole shard's files in ``folder``, relative to it: images, Parquet, part."""
    from rosetrain.data.manifest import part_image_names

    part = job.part_path(shard).relative_to(job.out_dir).as_posix()
    names = []
    if "release" in job.formats:
        names += sorted(set(part_image_names(folder / part)))
    if "hf" in job.formats:
        names += [path.relative_to(job.out_dir).as_posix() for path in job.parquet_paths(shard).values()]
    return names + [part]
