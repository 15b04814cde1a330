"""Landing a shard made elsewhere (another job's folder, a Ray task) in ``--out``.

Each file is written atomically and the shard's part, which marks the shard
done, last: a shard is in the folder whole or not at all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from rosetrain.core.io import atomic_write
from rosetrain.data.paths import confined_path


def store_shard(job, shard: int, files: Mapping[str, Path | bytes]) -> None:
    """Write a shard's files into ``job.out_dir`` (``job``: the split's ``GenerateJob``;
    ``files``: relative name -> a file to copy, or its bytes), each atomically, its
    part (it marks the shard done) last."""
    part = job.part_path(shard).relative_to(job.out_dir).as_posix()
    for name in sorted(files, key=lambda n: n == part):
        target, source = confined_path(job.out_dir, name, "shard file"), files[name]
        if name.endswith(".parquet"):  # the temp name generate's own writer uses (a rerun clears it)
            _replace_from(source, target, target.with_suffix(f".tmp{os.getpid()}"))
        elif isinstance(source, bytes):
            atomic_write(target, source)
        else:
            _replace_from(source, target, target.with_name(f".{target.name}.{os.getpid()}-0.tmp"))


def _link_or_copy(source: Path, tmp: Path) -> None:
    """A hard link where the job folders share a file system with --out (terabytes
    merge in seconds; safe because rosetrain never writes into a file, it renames
    new ones over it), else a copy."""
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)


def _replace_from(source: Path | bytes, target: Path, tmp: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        if isinstance(source, bytes):
            tmp.write_bytes(source)
        else:
            _link_or_copy(source, tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
