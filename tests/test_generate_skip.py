"""Scenes that are in the held-out split (or an ``--exclude`` split) are skipped,
not an error: a long run over small grids meets such a repeat by chance, and
must neither stop there nor write it. The skip is deterministic, so resuming,
worker processes and ``--shard``/``--merge`` still give one run's bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rosetrain.cli import main


def command(spec: Path, out: Path, scenes: int, *extra: str, num_proc: int = 1) -> list[str]:
    base = ["generate", "--spec", str(spec), "--out", str(out), "--split", "train", "--quiet", "--json"]
    return base + ["--scenes", str(scenes), "--shard-size", "4", "--num-proc", str(num_proc), *extra]


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def run(capsys, args: list[str]) -> dict:
    capsys.readouterr()
    assert main(args) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture
def made(tmp_path, capsys, small_spec_text, write_spec):
    """A split of scenes 0-5, then 12 scenes of the same spec excluding it."""
    spec = write_spec(tmp_path, small_spec_text)
    run(capsys, command(spec, tmp_path / "first", 6))
    exclude = ["--exclude", str(tmp_path / "first" / "metadata_train.jsonl")]
    summary = run(capsys, command(spec, tmp_path / "out", 12, *exclude))
    return spec, exclude, summary


def indices(out: Path) -> set[int]:
    return {json.loads(line)["scene_index"] for line in open(out / "metadata_train.jsonl")}


def test_excluded_scenes_are_skipped_and_counted(tmp_path, made):
    _, _, summary = made
    assert indices(tmp_path / "out") == set(range(6, 12))
    assert summary["scenes"] == 6 and summary["skipped_scenes"] == 6
    assert summary["rows"] == sum(1 for _ in open(tmp_path / "out" / "metadata_train.jsonl"))


def test_a_rerun_keeps_shards_whose_missing_scenes_were_skipped(tmp_path, made, capsys):
    spec, exclude, summary = made
    parts = tmp_path / "out" / ".parts" / "train"
    before = {p.name: p.stat().st_mtime_ns for p in parts.iterdir()}
    assert run(capsys, command(spec, tmp_path / "out", 12, *exclude)) == summary
    assert {p.name: p.stat().st_mtime_ns for p in parts.iterdir()} == before  # nothing made again
    (parts / "part-00002.jsonl").write_text("")  # a lost part is still noticed and made again
    assert run(capsys, command(spec, tmp_path / "out", 12, *exclude)) == summary
    assert indices(tmp_path / "out") == set(range(6, 12))


def test_skipping_gives_the_same_bytes_with_workers_and_shard_jobs(tmp_path, made, capsys):
    spec, exclude, _ = made
    expected = tree_digest(tmp_path / "out")
    run(capsys, command(spec, tmp_path / "procs", 12, *exclude, num_proc=2))
    assert tree_digest(tmp_path / "procs") == expected
    jobs = [tmp_path / f"job-{k}" for k in range(2)]
    for k, job in enumerate(jobs):
        run(capsys, command(spec, job, 12, *exclude, "--shard", f"{k}/2"))
    merged = run(capsys, command(spec, tmp_path / "merged", 12, *exclude, "--merge", *map(str, jobs)))
    assert merged["skipped_scenes"] == 6
    assert tree_digest(tmp_path / "merged") == expected


def test_a_split_with_every_scene_excluded_is_an_error(tmp_path, made, capsys):
    spec, exclude, _ = made
    capsys.readouterr()
    assert main(command(spec, tmp_path / "none", 6, *exclude)) != 0
    err = capsys.readouterr().err.strip()
    assert "every one of the 6 scenes" in err and "held-out split or an excluded split" in err
    assert len(err.splitlines()) == 1
