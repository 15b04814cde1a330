"""SIGKILL ``rosetrain generate`` anywhere: the rerun finishes the split, its
files are byte for byte those of an uninterrupted run, and nothing outside the
output folder changed. Everything lives in the test's own ``tmp_path``."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_reliability_generate import run_generate, tree

ROOT = Path(__file__).resolve().parent.parent

KILLER = Path(__file__).with_name("kill_generate.py")


@pytest.fixture
def world(tmp_path, small_spec_text, write_spec):
    """A spec, an output folder to be, and a bystander file beside it."""
    spec = write_spec(tmp_path, small_spec_text)
    (tmp_path / "bystander.txt").write_text("must not change")
    return spec, tmp_path / "out"


def outside(tmp_path: Path) -> dict[str, str]:
    return {name: digest for name, digest in tree(tmp_path).items() if not name.startswith("out/")}


def generate_args(spec: Path, out: Path, scenes: str = "12", num_proc: str = "1") -> list[str]:
    return [
        "--spec",
        str(spec),
        "--out",
        str(out),
        "--split=test",
        "--scenes",
        scenes,
        "--shard-size",
        "4",
        "--num-proc",
        num_proc,
        "--quiet",
    ]


def wait_for_the_lock(out: Path) -> None:
    """Worker processes share the folder's lock (a rerun while one still writes
    is refused); a killed worker may take a moment to be gone."""
    import fcntl

    deadline = time.monotonic() + 60  # a guard against a hang, not a timing check
    handle = os.open(out, os.O_RDONLY | os.O_DIRECTORY)  # output_lock flocks the folder itself
    try:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                assert time.monotonic() < deadline, "a killed worker still holds the lock"
                time.sleep(0.02)
    finally:
        os.close(handle)


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize(
    "kind, pattern, nth",
    [
        ("write", r"manifest\.json$", 1),  # the manifest, before any shard
        ("write", r"\.png$", 1),  # the first image, half written
        ("write", r"\.png$", 11),  # midway through the second shard
        ("rename", r"\.parquet$", 2),  # the second Parquet shard, written, not in place
        ("write", r"part-00001\.jsonl$", 1),  # the second shard's done marker, half written
        ("write", r"manifest\.json$", 2),  # every shard done, the file list half written
        ("rename", r"metadata_test\.jsonl$", 1),  # the file list written, the metadata not in place
    ],
    ids=["manifest", "first-image", "mid-shard", "parquet", "part", "file-list", "metadata"],
)
def test_killed_at_any_write_the_rerun_gives_the_same_bytes(tmp_path, world, kind, pattern, nth):
    spec, out = world
    assert run_generate(spec, tmp_path / "fresh") == 0
    expected = tree(tmp_path / "fresh")
    before = outside(tmp_path)
    killed = subprocess.run(
        [sys.executable, str(KILLER), kind, pattern, str(nth), "--", *generate_args(spec, out)],
        env=child_env(),
        capture_output=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert run_generate(spec, out) == 0
    assert tree(out) == expected
    assert outside(tmp_path) == before


def test_killed_with_its_workers_the_rerun_gives_the_same_bytes(tmp_path, world):
    """A real kill from outside, of the command and its worker processes, once
    two shards are done; the rerun uses another number of processes."""
    spec, out = world
    assert run_generate(spec, tmp_path / "fresh", scenes="40") == 0
    expected = tree(tmp_path / "fresh")
    before = outside(tmp_path)
    command = subprocess.Popen(
        [sys.executable, "-m", "rosetrain", "generate", *generate_args(spec, out, scenes="40", num_proc="2")],
        env=child_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300  # a guard against a hang, not a timing check
        while command.poll() is None and len(list(out.glob(".parts/test/part-*.jsonl"))) < 2:
            assert time.monotonic() < deadline, "generate made no shard"
            time.sleep(0.02)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)  # its own process group: it and its workers
        command.wait()
    wait_for_the_lock(out)
    assert not (out / "metadata_test.jsonl").exists(), "finished before the kill: make more scenes"
    assert run_generate(spec, out, scenes="40") == 0
    assert tree(out) == expected
    assert outside(tmp_path) == before


def test_killed_while_writing_bridge_files_overwrite_still_owns_them(tmp_path, world):
    """layout: rose writes bridge rows into their own metadata files; a kill between
    them leaves files that the manifest already lists, so --overwrite removes them."""
    spec = ROOT / "generators" / "rose-protocol.yaml"
    out = world[1]
    assert run_generate(spec, tmp_path / "fresh", scenes="8") == 0
    expected = tree(tmp_path / "fresh")
    killed = subprocess.run(
        [
            sys.executable,
            str(KILLER),
            "rename",
            r"metadata_test_matched_local_count_bridge",
            "1",
            "--",
            *generate_args(spec, out),
        ],
        env=child_env(),
        capture_output=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert (out / "metadata_test_global_click_bridge.jsonl").exists()
    assert run_generate(spec, out, "--overwrite", scenes="8") == 0
    assert tree(out) == expected


def test_overwrite_after_a_kill_removes_the_unfinished_splits_files(tmp_path, world):
    """Killed before its file list exists, a split's files are those its shard
    parts name and its Parquet shards: --overwrite with other settings removes
    them all and leaves exactly a fresh run's files."""
    spec, out = world
    assert run_generate(spec, tmp_path / "fresh", scenes="8") == 0
    expected = tree(tmp_path / "fresh")
    killed = subprocess.run(
        [sys.executable, str(KILLER), "write", r"part-00002\.jsonl$", "1", "--", *generate_args(spec, out)],
        env=child_env(),
        capture_output=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert len(list(out.glob("hf/test/*.parquet"))) == 3
    assert run_generate(spec, out, "--overwrite", scenes="8") == 0
    assert tree(out) == expected
