"""Many machines make one split: ``--shard K/N`` array jobs joined by
``--merge``, and ``--engine ray`` on a local two-worker Ray cluster, each
byte-identical to a one-machine run (manifest and metadata included)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rosetrain.cli import main

SCENES, SHARD_SIZE = 20, 4  # five shards: three jobs get 2, 2 and 1


def tree_digest(root: Path) -> dict[str, str]:
    """Every file, the manifest and the parts included (not the lock file)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def command(spec: Path, out: Path, *extra: str) -> list[str]:
    return [
        "generate",
        "--spec",
        str(spec),
        "--out",
        str(out),
        "--split",
        "train",
        "--scenes",
        str(SCENES),
        "--shard-size",
        str(SHARD_SIZE),
        "--num-proc",
        "1",
        "--quiet",
        *extra,
    ]


@pytest.fixture(scope="module")
def one_machine(tmp_path_factory, small_spec_text, write_spec):
    root = tmp_path_factory.mktemp("one-machine")
    spec = write_spec(root, small_spec_text)
    assert main(command(spec, root / "out")) == 0
    return spec, root / "out"


@pytest.fixture
def three_jobs(tmp_path, one_machine):
    spec, _ = one_machine
    folders = [tmp_path / f"job-{k}" for k in range(3)]
    for k, folder in enumerate(folders):
        assert main(command(spec, folder, "--shard", f"{k}/3")) == 0
    return folders


def test_shard_jobs_are_disjoint_and_cover_the_split(three_jobs):
    parts = [
        sorted(p.name for p in (folder / ".parts" / "train").glob("part-*.jsonl")) for folder in three_jobs
    ]
    assert parts == [
        ["part-00000.jsonl", "part-00003.jsonl"],
        ["part-00001.jsonl", "part-00004.jsonl"],
        ["part-00002.jsonl"],
    ]
    assert not any((folder / "metadata_train.jsonl").exists() for folder in three_jobs)


def test_merge_is_byte_identical_to_one_machine(tmp_path, one_machine, three_jobs):
    spec, single = one_machine
    assert main(command(spec, tmp_path / "merged", "--merge", *map(str, reversed(three_jobs)))) == 0
    assert tree_digest(tmp_path / "merged") == tree_digest(single)
    assert "shard" not in json.loads((tmp_path / "merged/.parts/train.manifest.json").read_text())


def test_merge_refuses_a_missing_job(tmp_path, one_machine, three_jobs, capsys):
    spec, _ = one_machine
    assert main(command(spec, tmp_path / "merged", "--merge", *map(str, three_jobs[:2]))) == 2
    assert "jobs 2/3 are missing" in capsys.readouterr().err
    assert not (tmp_path / "merged").exists()


def test_merge_refuses_to_merge_into_a_job_folder(one_machine, three_jobs, capsys):
    spec, _ = one_machine
    before = tree_digest(three_jobs[0])
    assert main(command(spec, three_jobs[0], "--merge", *map(str, three_jobs), "--overwrite")) == 2
    assert (
        "is also the output folder; merge into a folder of its own (option --merge)"
        in capsys.readouterr().err
    )
    assert tree_digest(three_jobs[0]) == before


def test_merge_refuses_jobs_of_another_command(tmp_path, one_machine, three_jobs, capsys):
    spec, _ = one_machine
    other = command(spec, tmp_path / "merged", "--merge", *map(str, three_jobs))
    other[other.index("--scenes") + 1] = str(SCENES + 1)
    assert main(other) == 2
    assert "other settings than this job (scenes: 20)" in capsys.readouterr().err


def test_merge_refuses_a_damaged_shard(tmp_path, one_machine, three_jobs, capsys):
    spec, _ = one_machine
    image = next((three_jobs[1] / "images").rglob("*.png"))
    image.write_bytes(image.read_bytes()[:100])
    assert main(command(spec, tmp_path / "merged", "--merge", *map(str, three_jobs))) == 2
    assert "shard 1 is missing or damaged" in capsys.readouterr().err


@pytest.mark.parametrize("shard", ["3/3", "1", "a/2", "0/0", "0/9"])
def test_a_bad_shard_flag_is_one_line(tmp_path, one_machine, shard, capsys):
    spec, _ = one_machine
    assert main(command(spec, tmp_path / "job", "--shard", shard)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--shard" in err
    assert not (tmp_path / "job").exists()


def test_ray_on_a_local_two_worker_cluster_is_byte_identical(tmp_path, one_machine, monkeypatch):
    ray = pytest.importorskip("ray")
    import rosetrain.data.generate as generate

    def not_here(*args):
        raise AssertionError("a shard was made in the driver, not on the cluster")

    monkeypatch.setattr(generate, "write_shard", not_here)  # Ray's workers import their own
    spec, single = one_machine
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # two tasks at a time
    try:
        assert main(command(spec, tmp_path / "ray", "--engine", "ray")) == 0
    finally:
        ray.shutdown()
    assert tree_digest(tmp_path / "ray") == tree_digest(single)
