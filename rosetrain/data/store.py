"""Landing a shard made elsewhere (another job's folder, a Ray task) in ``--out``.

Each file is written atomically and the shard's part, which marks the shard
done, last: a shard is in the folder whole or not at all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from rosetrain.core.io import atomic_path, atomic_write
from rosetrain.data.paths import confined_path


def store_shard(job, shard: int, files: Mapping[str, Path | bytes]) -> None:
    """Write a shard's files into ``job.out_dir`` (``job``: the split's ``GenerateJob``;
    ``files``: relative name -> a file to copy, or its bytes), each atomically, its
    part (it marks the shard done) last."""
    part = job.part_path(shard).relative_to(job.out_dir).as_posix()
    for name in sorted(files, key=lambda n: n == part):
        target, source = confined_path(job.out_dir, name, "shard file"), files[name]
        if isinstance(source, bytes):
            atomic_write(target, source)
        else:
            with atomic_path(target) as tmp:
                _link_or_copy(source, tmp)


def _link_or_copy(source: Path, tmp: Path) -> None:
    """A hard link where the job folders share a file system with --out (terabytes
    merge in seconds; safe because rosetrain never writes into a file, it renames
    new ones over it), else a copy."""
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
