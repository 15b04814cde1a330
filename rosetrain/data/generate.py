"""Write a split to disk: shards of scenes, in parallel, resumable, atomic.

The unit of work is a shard of consecutive scenes. A worker renders a shard's
images, then writes its metadata part and its Parquet shard under temp names
and renames them: a shard exists whole or not at all. A rerun skips finished
shards (checking that each one's files are all there and whole); the last
step lists the split's files in its manifest and joins the parts into
``metadata_<split>.jsonl``. Shard boundaries depend only on the number of
scenes, never on ``num_proc``, so the bytes on disk are the same however many
processes made them. What a run may replace or delete, and what it refuses to
touch, is decided by the manifest (:mod:`rosetrain.data.manifest`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import atomic_path, atomic_write, iter_jsonl, output_lock
from rosetrain.core.scratch import scratch_folder
from rosetrain.data.bridges import bridge_paths, route_lines, split_names
from rosetrain.data.manifest import (
    TempJournal,
    image_names,
    manifest_path,
    metadata_name,
    parquet_name,
    part_image_names,
    part_records,
    parts_dir,
    read_manifest,
    refuse_foreign_files,
    refuse_foreign_images,
    refuse_links_out,
    remove_owned_files,
    remove_stale_temps,
)
from rosetrain.data.paths import check_split_name, confined_path
from rosetrain.generators.heldout import heldout_guard
from rosetrain.generators.records import build_records
from rosetrain.generators.scene import Scene, sample_scene
from rosetrain.generators.spec import Spec, spec_sha256

FORMATS = ("release", "hf")
FLUSH_ROWS, FLUSH_BYTES = 2048, 64 << 20  # Parquet row groups: bounded memory, few conversions
MANIFEST_KEYS = ("spec_sha256", "seed", "scenes", "shard_size", "formats", "split", "shard", "exclude_sha256")


@dataclasses.dataclass(frozen=True)
class GenerateJob:
    spec: Spec
    out_dir: Path
    split: str
    scenes: int
    seed: int
    num_proc: int = 1
    formats: tuple[str, ...] = FORMATS
    shard_size: int | None = None
    exclude: frozenset[str] = frozenset()  # scene fingerprints that must not appear
    heldout_family_name: str | None = None
    shard_of: tuple[int, int] | None = None  # (K, N): this job makes shards K, K+N, K+2N, ...
    engine: str = "local"  # "local" (processes) or "ray" (tasks on a Ray cluster)
    exclude_sha256: str | None = None  # of the --exclude splits' fingerprints: a resume must not change them

    @property
    def shard_scenes(self) -> int:
        # Enough shards to keep a few processes busy, few enough to stay cheap.
        return self.shard_size or max(16, min(1000, -(-self.scenes // 16)))

    @property
    def num_shards(self) -> int:
        return -(-self.scenes // self.shard_scenes)

    @property
    def own_shards(self) -> list[int]:
        """The shards this job makes: all of them, or with ``--shard K/N`` every
        N-th from K (round-robin, so N array jobs get equal work)."""
        if self.shard_of is None:
            return list(range(self.num_shards))
        k, n = self.shard_of
        return list(range(k, self.num_shards, n))

    def scene_records(self, index: int, scene: Scene | None = None) -> Any:
        """Scene ``index``'s records with PNG-encoded images, as the split holds
        them (``scene``: the scene itself, when the caller sampled it already)."""
        from rosetrain.data.hf import png_bytes

        return build_records(
            self.spec,
            self.seed,
            index,
            self.split,
            heldout_family_name=self.heldout_family_name,
            encode=png_bytes,
            scene=scene,
        )

    def shard_indices(self, shard: int) -> range:
        start = shard * self.shard_scenes
        return range(start, min(self.scenes, start + self.shard_scenes))

    def part_path(self, shard: int) -> Path:
        return parts_dir(self.out_dir, self.split) / f"part-{shard:05d}.jsonl"

    def parquet_paths(self, shard: int) -> dict[str | None, Path]:
        """The shard's Parquet files, by bridge template (None: the main rows): with
        ``layout: rose`` the bridge rows are splits of their own, as in the release."""
        names = split_names(self.split, self.spec.layout == "rose")
        return {key: self.out_dir / parquet_name(name, shard, self.num_shards) for key, name in names.items()}

    @property
    def metadata_path(self) -> Path:
        return self.out_dir / metadata_name(self.split)

    @property
    def manifest_path(self) -> Path:
        return manifest_path(self.out_dir, self.split)


def settings(job: GenerateJob) -> dict[str, Any]:
    """What the manifest records before any shard is written."""
    found = {
        "spec": job.spec.path,
        "spec_sha256": spec_sha256(job.spec),
        "seed": job.seed,
        "scenes": job.scenes,
        "shard_size": job.shard_scenes,
        "formats": list(job.formats),
        "split": job.split,
        "role": job.spec.role,
    }  # role: training refuses held-out folders
    if job.spec.heldout_hue_band is not None:  # what training checks a folder's action rows against
        found["heldout_hue_band"] = list(job.spec.heldout_hue_band)
    if job.spec.heldout_family_name is not None:
        found["heldout_family_name"] = job.spec.heldout_family_name
    if job.shard_of is not None:  # only a --shard job says so: a whole split's manifest is unchanged
        found["shard"] = "{}/{}".format(*job.shard_of)
    if job.exclude_sha256 is not None:  # likewise only with --exclude
        found["exclude_sha256"] = job.exclude_sha256
    return found


def prepare(job: GenerateJob, overwrite: bool = False) -> list[int]:
    """Check the job against what is already on disk; return the shards to make.

    Only a split with rosetrain's manifest is resumed or (``overwrite``) removed;
    anything else in the way is refused (see :mod:`rosetrain.data.manifest`).
    The caller holds the folder's lock."""
    refuse_links_out(job.out_dir, job.split)
    manifest = read_manifest(job.manifest_path, job.split)
    if manifest is not None:
        remove_stale_temps(job.out_dir, job.split)  # a killed run's temp files are ours too
        if overwrite:
            remove_owned_files(job.out_dir, manifest)
            manifest = None
    if manifest is None:
        refuse_foreign_files(job.out_dir, job.split)
        refuse_foreign_images(job.out_dir, job.split)
        remove_stale_temps(job.out_dir, job.split, started=False)  # a run killed writing its manifest
        with TempJournal(job.out_dir, job.split, "manifest") as journal:
            journal.record(job.manifest_path)
            atomic_write(job.manifest_path, json.dumps(settings(job), indent=2))
    else:  # a resumed split keeps its manifest: same settings, same files
        _refuse_other_settings(job, manifest)
    return [shard for shard in job.own_shards if not shard_is_whole(job, shard)]


def _refuse_other_settings(job: GenerateJob, old: dict[str, Any]) -> None:
    new = settings(job)
    changed = [k for k in MANIFEST_KEYS if old.get(k) != new.get(k)]
    if changed:
        raise RosetrainError(
            f"{job.out_dir} already holds split {job.split!r} made with other settings "
            f"({', '.join(f'{k}: {old.get(k)!r} -> {new.get(k)!r}' for k in changed)}); "
            f"pass overwrite=True to remake it, or choose another output folder",
            argument="overwrite",
        )


def shard_is_whole(job: GenerateJob, shard: int) -> bool:
    """A shard is done when its part lists exactly its scenes and every file the
    part names is there and complete: a 0-byte or cut-off part, a deleted or
    truncated image, a missing or cut-off Parquet shard all mean "make it again"."""
    try:
        records = part_records(job.part_path(shard))
    except (OSError, ValueError):
        return False
    found, indices = {r.get("scene_index") for r in records}, set(job.shard_indices(shard))
    if not found <= indices or not all(_is_excluded(job, index) for index in indices - found):
        return False
    if "release" in job.formats and not all(
        _png_is_whole(job.out_dir, name) for name in set(image_names(records))
    ):
        return False
    if "hf" not in job.formats:
        return True
    rows = [_parquet_rows(path) for path in job.parquet_paths(shard).values()]
    return all(n is not None for n in rows) and sum(n or 0 for n in rows) == len(records)


PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"  # every PNG ends with this empty IEND chunk


def _png_is_whole(out_dir: Path, name: str) -> bool:
    try:
        with open(confined_path(out_dir, name, "part"), "rb") as handle:
            handle.seek(-len(PNG_END), os.SEEK_END)
            return handle.read() == PNG_END
    except (OSError, RosetrainError):
        return False


def _parquet_rows(path: Path) -> int | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException):
        return None


def kept_scenes(job: GenerateJob, shard: int) -> dict[int, Scene | None]:
    """The shard's scenes to write, by index: all of them, less any whose
    fingerprint is in ``exclude`` (a held-out scene, or one of an ``--exclude``
    split), which is skipped as the training stream skips it: small grids repeat
    by chance, so a long run would otherwise stop at the first repeat. The
    scenes sampled for that check are kept, not sampled again to draw them."""
    indices = job.shard_indices(shard)
    if not job.exclude:
        return dict.fromkeys(indices)
    scenes = {index: sample_scene(job.spec, job.seed, index, job.split) for index in indices}
    return {index: scene for index, scene in scenes.items() if scene.fingerprint not in job.exclude}


def _is_excluded(job: GenerateJob, index: int) -> bool:
    return bool(job.exclude) and sample_scene(job.spec, job.seed, index, job.split).fingerprint in job.exclude


def write_shard(job: GenerateJob, shard: int) -> int:
    """Make one shard; returns its number of scene indices (skipped ones
    included: the progress bar counts indices). Runs in a worker process; every
    temp it makes is recorded first in the shard's journal."""
    scenes = kept_scenes(job, shard)
    with TempJournal(job.out_dir, job.split, f"part-{shard:05d}") as journal:
        _write_shard_files(job, shard, scenes, journal)
    return len(job.shard_indices(shard))


def _write_shard_files(job: GenerateJob, shard: int, scenes: dict, journal: TempJournal) -> None:
    import pyarrow.parquet as pq

    from rosetrain.data.hf import SCHEMA, hf_row

    lines: list[str] = []
    writers: dict[str | None, Any] = {}  # by bridge template (None: the main rows)
    pending: dict[str | None, list[dict[str, Any]]] = {}
    pending_bytes = 0
    with ExitStack() as stack:  # each Parquet writer is closed, then its file renamed into place
        if "hf" in job.formats:
            for key, path in job.parquet_paths(shard).items():
                journal.record(path)
                tmp_parquet = stack.enter_context(atomic_path(path))
                writers[key] = stack.enter_context(closing(pq.ParquetWriter(tmp_parquet, SCHEMA)))
                pending[key] = []
        for index, scene in scenes.items():
            example = job.scene_records(index, scene)
            encoded = example.images
            if "release" in job.formats:
                for image_id, data in encoded.items():
                    image = job.out_dir / "images" / example.subset / f"{image_id}.png"
                    journal.record(image)
                    atomic_write(image, data)
            lines.extend(json.dumps(r, ensure_ascii=False, sort_keys=True) for r in example.records)
            if writers:
                for r in example.records:
                    key = r["task_template"] if r["task_template"] in writers else None
                    pending[key].append(hf_row(r, encoded[r["image_id"]]))
                pending_bytes += sum(map(len, encoded.values())) * len(example.records)
                if pending_bytes > FLUSH_BYTES or sum(map(len, pending.values())) >= FLUSH_ROWS:
                    _flush(writers, pending)  # one Arrow conversion per batch: ~40 ms each
                    pending_bytes = 0
        _flush(writers, pending)
    journal.record(job.part_path(shard))
    atomic_write(job.part_path(shard), "".join(line + "\n" for line in lines))  # marks the shard done


def _flush(writers: dict[str | None, Any], pending: dict[str | None, list[dict[str, Any]]]) -> None:
    from rosetrain.data.hf import rows_to_table

    for key, rows in pending.items():
        if rows:
            writers[key].write_table(rows_to_table(rows))
            pending[key] = []


def finish_shard_job(job: GenerateJob) -> tuple[int, int]:
    """A ``--shard K/N`` job: list its own shards' files in its manifest (so
    ``--merge`` knows it finished, and ``--overwrite`` what it owns); the
    split's metadata is joined by the merge. Returns the numbers of rows and scenes made."""
    files = _shard_files(job)
    with TempJournal(job.out_dir, job.split, "finish") as journal:
        journal.record(job.manifest_path)
        atomic_write(job.manifest_path, json.dumps({**settings(job), "files": sorted(files)}, indent=2))
    counts = [_rows_and_scenes(job.part_path(shard).read_bytes()) for shard in job.own_shards]
    return sum(rows for rows, _ in counts), sum(scenes for _, scenes in counts)


# A part's lines are written with sorted keys and json's default separators.
SCENE_INDEX = re.compile(rb'"scene_index": (\d+)')


def _rows_and_scenes(data: bytes) -> tuple[int, int]:
    """Rows and distinct scenes of a part, from its bytes (no JSON decoding)."""
    return data.count(b"\n"), len(set(SCENE_INDEX.findall(data)))


def finish(job: GenerateJob) -> tuple[int, int]:
    """List every file of the split in its manifest, then join the parts into the
    split's metadata file (and, with ``layout: rose``, its bridge rows into the
    release's bridge files); returns the numbers of rows and scenes. The list comes first, so
    a kill in between never leaves an output that no manifest claims."""
    bridges = bridge_paths(job.out_dir, job.split) if job.spec.layout == "rose" else {}
    finals: dict[str | None, Path] = {None: job.metadata_path}  # None: the main metadata file
    finals.update(bridges)
    files = _shard_files(job) | {path.name for path in finals.values()}
    with TempJournal(job.out_dir, job.split, "finish") as journal:
        journal.record(job.manifest_path)
        atomic_write(job.manifest_path, json.dumps({**settings(job), "files": sorted(files)}, indent=2))
        for path in finals.values():
            journal.record(path)
        return _join_parts(job, finals)


def _shard_files(job: GenerateJob) -> set[str]:
    """Every finished shard's files: its part, its Parquet shard, the images its part names."""
    files = set()
    for shard in job.own_shards:
        part = job.part_path(shard)
        files.add(part.relative_to(job.out_dir).as_posix())
        if "hf" in job.formats:
            files.update(
                path.relative_to(job.out_dir).as_posix() for path in job.parquet_paths(shard).values()
            )
        if "release" in job.formats:
            files.update(part_image_names(part))
    return files


def _join_parts(job: GenerateJob, finals: dict[str | None, Path]) -> tuple[int, int]:
    n_rows = n_scenes = 0
    # each file is closed, then renamed into place in the order of ``finals`` (the stack
    # leaves in reverse; both bridge files always, as in the release); an error removes every temp
    with ExitStack() as stack:
        temps = {key: stack.enter_context(atomic_path(finals[key])) for key in reversed(finals)}
        handles = {key: stack.enter_context(open(tmp, "wb")) for key, tmp in temps.items()}
        for shard in range(job.num_shards):
            data = job.part_path(shard).read_bytes()
            n_rows += route_lines(data, handles[None], {key: h for key, h in handles.items() if key})
            n_scenes += _rows_and_scenes(data)[1]
    return n_rows, n_scenes


def run_job(job: GenerateJob, *, overwrite: bool = False, progress: bool = True) -> dict[str, Any]:
    """Make the split's missing shards and join them, holding the folder's lock
    (a second generate into the same folder is refused, never interleaved)."""
    from tqdm import tqdm

    if not job.manifest_path.exists():
        refuse_foreign_files(job.out_dir, job.split)  # before the lock file is made in a foreign folder
    try:
        with output_lock(job.out_dir, "this output folder"):
            todo = prepare(job, overwrite)
            total = sum(len(job.shard_indices(s)) for s in job.own_shards)
            done_scenes = total - sum(len(job.shard_indices(s)) for s in todo)
            bar = tqdm(
                total=total,
                initial=done_scenes,
                unit="scene",
                disable=not progress,
                desc=f"generate {job.split}",
            )
            with bar:
                for count in _map(job, todo):
                    bar.update(count)
            n_rows, n_scenes = finish(job) if job.shard_of is None else finish_shard_job(job)
    except OSError as err:  # disk full, permission denied, a file where a folder should be
        raise RosetrainError(
            f"{err.filename or job.out_dir}: cannot write ({err.strerror or err}); "
            f"fix that and run the same command again to resume"
        ) from None
    if total and not n_scenes:
        raise RosetrainError(
            f"every one of the {total} scenes of {job.spec.path} (seed {job.seed}) is also in the "
            f"held-out split or an excluded split, so the split is empty; change the seed or the spec"
        )
    counts = {"scenes": n_scenes, "skipped_scenes": total - n_scenes, "rows": n_rows}
    if job.shard_of is not None:
        return {
            "split": job.split,
            "shard": "{}/{}".format(*job.shard_of),
            "shards": job.own_shards,
            **counts,
            "out": str(job.out_dir),
        }
    return {"split": job.split, **counts, "out": str(job.out_dir), "metadata": str(job.metadata_path)}


def _map(job: GenerateJob, shards: list[int]) -> Iterable[int]:
    if job.engine == "ray":
        from rosetrain.data.ray_engine import map_shards_on_ray

        yield from map_shards_on_ray(job, shards, render_shard_files)
        return
    if job.num_proc <= 1 or len(shards) <= 1:
        for shard in shards:
            yield write_shard(job, shard)
        return
    _warm_up_before_fork(job)
    with ProcessPoolExecutor(max_workers=job.num_proc) as pool:
        futures = [pool.submit(write_shard, job, shard) for shard in shards]
        try:
            for future in futures:
                yield future.result()
        except BaseException as err:
            for future in futures:
                future.cancel()
            if isinstance(err, BrokenProcessPool):  # a worker was killed: the OOM killer, a user
                raise RosetrainError(
                    "a generate worker process died (killed, or out of memory); run "
                    "the same command again to resume, with a smaller num_proc "
                    "if memory is short",
                    argument="num_proc",
                ) from None
            raise


def render_shard_files(job: GenerateJob, shard: int) -> dict[str, bytes]:
    """Make one shard in a scratch folder; return its files (relative name -> bytes):
    what a Ray task sends back to the driver (module level, so a worker imports its own)."""
    with scratch_folder() as scratch:  # one a killed task leaves is removed by a later task
        write_shard(dataclasses.replace(job, out_dir=scratch), shard)
        return {
            path.relative_to(scratch).as_posix(): path.read_bytes()
            for path in sorted(scratch.rglob("*"))
            if path.is_file()
        }


def _warm_up_before_fork(job: GenerateJob) -> None:
    """What every worker would otherwise do once each (imports, font rankings):
    done here once; forked workers inherit it. Output is unaffected (the caches
    hold the same values whoever fills them)."""
    import multiprocessing

    if multiprocessing.get_start_method() != "fork":  # spawned workers start empty anyway
        return
    import pyarrow.parquet  # noqa: F401

    from rosetrain.data.hf import rows_to_table
    from rosetrain.generators.families import get_family

    rows_to_table([])  # imports what pyarrow's first conversion imports (pandas, unless refused)
    for level in job.spec.levels:
        for name, family in level.families.items():
            get_family(name, family.config).warm_up()


def read_fingerprints(metadata: Path) -> set[str]:
    rows = (row for _, row in iter_jsonl(metadata))
    return {found for row in rows if (found := row.get("scene_fingerprint")) is not None}


def make_job(
    spec: Spec,
    out_dir: str | Path,
    split: str,
    scenes: int,
    seed: int | None = None,
    num_proc: int = 1,
    formats: Iterable[str] = FORMATS,
    shard_size: int | None = None,
    exclude_metadata: Iterable[str | Path] = (),
    shard: str | None = None,
    engine: str = "local",
) -> GenerateJob:
    """Validate a request and resolve the held-out family and fingerprints."""
    formats = tuple(formats)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise RosetrainError(f"formats: {bad or formats!r}; valid: {', '.join(FORMATS)}", argument="formats")
    check_split_name(split)
    _check_positive_int(scenes, "scenes")
    _check_positive_int(num_proc, "num_proc")
    if shard_size is not None:
        _check_positive_int(shard_size, "shard_size")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise RosetrainError(f"out_dir: {out_dir} is a file, not a folder", argument="out_dir")
    heldout_family_name, exclude = heldout_guard(spec)
    excluded: set[str] = set()
    for path in exclude_metadata:
        if not Path(path).is_file():
            raise RosetrainError(
                f"exclude_metadata: {path} is not a metadata .jsonl file", argument="exclude_metadata"
            )
        fingerprints = read_fingerprints(Path(path))
        if not fingerprints:  # e.g. the official release: nothing to prove disjointness with
            raise RosetrainError(
                f"exclude_metadata: {path} has no scene_fingerprint in any row (not a split "
                f"rosetrain generated), so no overlap with it can be checked",
                argument="exclude_metadata",
            )
        excluded |= fingerprints
    exclude |= excluded
    job = GenerateJob(
        spec=spec,
        out_dir=Path(out_dir),
        split=split,
        scenes=scenes,
        seed=spec.seed if seed is None else seed,
        num_proc=num_proc,
        formats=formats,
        shard_size=shard_size,
        exclude=frozenset(exclude),
        heldout_family_name=heldout_family_name,
        shard_of=None if shard is None else parse_shard(shard),
        engine=engine,
        exclude_sha256=_sha256_of(excluded) if excluded else None,
    )
    if job.shard_of and job.shard_of[1] > job.num_shards:  # a job with nothing to do is a mistake
        raise RosetrainError(
            f"shard {shard}: the split has only {job.num_shards} shards of "
            f"{job.shard_scenes} scenes; use at most {job.num_shards} jobs or a "
            f"smaller shard_size",
            argument="shard",
        )
    return job


def _sha256_of(fingerprints: set[str]) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256("\n".join(sorted(fingerprints)).encode()).hexdigest()


def parse_shard(text: str) -> tuple[int, int]:
    """``--shard K/N`` (job K of N, counted from 0, as Slurm's and Kubernetes'
    array indices are) -> (K, N)."""
    k, slash, n = str(text).partition("/")
    if not (slash and k.isdigit() and n.isdigit() and int(k) < int(n)):
        raise RosetrainError(
            f"shard must be K/N with 0 <= K < N (job K of N, from 0), got {text!r}", argument="shard"
        )
    return int(k), int(n)


def _check_positive_int(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RosetrainError(f"{name} must be a whole number >= 1, got {value!r}", argument=name)
