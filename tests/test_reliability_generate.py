"""generate never touches what it did not write, and repairs what it did.

Every destructive path here runs inside the test's own ``tmp_path``, nested a
few folders deep so that even a split name that climbs (``../..``) stays
inside it.
"""

import errno
import hashlib
import json
from pathlib import Path

import pytest

from rosetrain.cli import main
from rosetrain.core.io import output_lock

SCENES, SHARD = "12", "4"


@pytest.fixture
def spec(tmp_path, small_spec_text, write_spec):
    return write_spec(tmp_path, small_spec_text)


def run_generate(spec, out, *extra, split="test", scenes=SCENES):
    return main(
        [
            "generate",
            "--spec",
            str(spec),
            "--out",
            str(out),
            f"--split={split}",
            "--scenes",
            scenes,
            "--shard-size",
            SHARD,
            "--num-proc",
            "1",
            "--quiet",
            *extra,
        ]
    )


def tree(root: Path, skip=(".rosetrain.lock",)) -> dict[str, str]:
    """Every file under ``root`` (hidden ones too) -> sha256."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in skip
    }


@pytest.fixture
def fresh(tmp_path, spec):
    """An uninterrupted run's files, to compare repaired folders with."""
    out = tmp_path / "fresh"
    assert run_generate(spec, out) == 0
    return tree(out)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("split", ["", ".", "..", "../..", "a/b", "<absolute>", "-x"])
def test_split_must_be_a_plain_name(tmp_path, spec, capsys, split):
    root = tmp_path / "a" / "b" / "c"
    out = root / "out"
    # Never a real absolute path such as /tmp: a writer without this check deletes it.
    split = str(root / "absolute") if split == "<absolute>" else split
    assert run_generate(spec, out) == 0
    (root / "keep.txt").write_text("mine")
    before = tree(tmp_path)
    assert run_generate(spec, out, "--overwrite", split=split, scenes="2") == 2
    assert "--split" in one_error_line(capsys)
    assert tree(tmp_path) == before


def foreign_release(folder: Path) -> dict[str, str]:
    """A folder laid out like the official release, with an hf/ folder of its own."""
    (folder / "images" / "ROSE-Glyph").mkdir(parents=True)
    (folder / "images" / "ROSE-Glyph" / "IMG_1.png").write_bytes(b"not ours")
    (folder / "metadata_test.jsonl").write_text('{"item_id": "official-1"}\n')
    (folder / "hf" / "test").mkdir(parents=True)
    (folder / "hf" / "test" / "theirs.parquet").write_bytes(b"PAR1")
    return tree(folder)


@pytest.mark.parametrize("split", ["test", "train"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_foreign_release_is_refused_and_untouched(tmp_path, spec, capsys, split, overwrite):
    release = tmp_path / "rose"
    before = foreign_release(release)
    assert run_generate(spec, release, *(["--overwrite"] if overwrite else []), split=split) == 2
    err = one_error_line(capsys)
    assert "did not write" in err and "metadata_test.jsonl" in err and "--out" in err
    assert tree(release, skip=()) == before  # not even a lock file is added


def test_overwrite_removes_only_files_in_the_manifest(tmp_path, spec, fresh):
    out = tmp_path / "out"
    assert run_generate(spec, out, scenes="20") == 0
    subset = next((out / "images").iterdir())
    mine = {
        subset / "my-notes.png": b"user file",
        out / "metadata_test.jsonl.bak": b"a backup",
        out / "hf" / "train.parquet": b"mine",
    }
    for path, data in mine.items():
        path.write_bytes(data)
    assert run_generate(spec, out, "--overwrite") == 0
    assert all(path.read_bytes() == data for path, data in mine.items())
    after = tree(out)
    assert {k: v for k, v in after.items() if (out / k) not in mine} == fresh


def test_overwrite_refuses_a_split_folder_holding_foreign_shards(tmp_path, spec, capsys):
    out = tmp_path / "out"
    assert run_generate(spec, out) == 0
    (out / "hf" / "test" / "theirs.parquet").write_bytes(b"PAR1")
    before = tree(out)
    assert run_generate(spec, out, "--overwrite", scenes="8") == 2
    assert "hf/test/theirs.parquet" in one_error_line(capsys)
    assert tree(out) == before


def test_a_new_split_beside_a_rosetrain_split_is_fine(tmp_path, spec):
    out = tmp_path / "out"
    assert run_generate(spec, out, split="train") == 0
    assert run_generate(spec, out, split="test") == 0
    assert run_generate(spec, out, "--overwrite", split="train", scenes="8") == 0
    assert len((out / "metadata_test.jsonl").read_text().splitlines()) > 0


def cut(path: Path, keep: int = 0) -> None:
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize(
    "damage",
    [
        lambda out: cut(out / ".parts" / "test" / "part-00001.jsonl"),
        lambda out: cut(out / ".parts" / "test" / "part-00001.jsonl", 300),
        lambda out: (out / ".parts" / "test" / "part-00002.jsonl").unlink(),
        lambda out: next((out / "images").rglob("test-0000005.png")).unlink(),
        lambda out: cut(next((out / "images").rglob("test-0000009-cue.png")), 100),
        lambda out: cut(next((out / "hf" / "test").glob("shard-00001-*")), 50),
        lambda out: (out / "metadata_test.jsonl").unlink(),
    ],
    ids=[
        "empty-part",
        "cut-part",
        "deleted-part",
        "deleted-image",
        "cut-image",
        "cut-parquet",
        "deleted-metadata",
    ],
)
def test_a_damaged_split_is_repaired_on_rerun(tmp_path, spec, fresh, damage):
    out = tmp_path / "out"
    assert run_generate(spec, out) == 0
    damage(out)
    assert run_generate(spec, out) == 0
    assert tree(out) == fresh


@pytest.mark.parametrize("text", ["{not json", "[]", '{"split": "other"}', ""])
def test_a_corrupt_manifest_is_a_clear_error(tmp_path, spec, capsys, text):
    out = tmp_path / "out"
    assert run_generate(spec, out) == 0
    (out / ".parts" / "test.manifest.json").write_text(text)
    before = tree(out)
    for extra in ([], ["--overwrite"]):
        assert run_generate(spec, out, *extra) == 2
        assert "corrupt rosetrain manifest" in one_error_line(capsys)
    assert tree(out) == before


def test_a_manifest_cannot_point_overwrite_outside_the_folder(tmp_path, spec, capsys):
    out = tmp_path / "deep" / "out"
    assert run_generate(spec, out) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    manifest = out / ".parts" / "test.manifest.json"
    data = json.loads(manifest.read_text())
    data["files"].append("../../victim.txt")
    manifest.write_text(json.dumps(data))
    assert run_generate(spec, out, "--overwrite", scenes="8") == 2
    assert "victim.txt" in one_error_line(capsys)
    assert victim.read_text() == "keep me"


def test_a_second_writer_is_refused(tmp_path, spec, capsys):
    out = tmp_path / "out"
    with output_lock(out):
        assert run_generate(spec, out) == 2
    assert "another rosetrain process" in one_error_line(capsys)
    assert not (out / "metadata_test.jsonl").exists()


@pytest.mark.parametrize(
    "code, message", [(errno.ENOSPC, "No space left on device"), (errno.EACCES, "Permission denied")]
)
def test_a_failed_write_is_one_line_and_the_rerun_resumes(
    tmp_path, spec, fresh, capsys, monkeypatch, code, message
):
    import rosetrain.data.generate as gen

    real, calls = gen.atomic_write, []

    def failing(path, data):
        calls.append(path)
        if len(calls) == 7:
            raise OSError(code, message, str(path))
        return real(path, data)

    out = tmp_path / "out"
    monkeypatch.setattr(gen, "atomic_write", failing)
    assert run_generate(spec, out) == 2
    err = one_error_line(capsys)
    assert message in err and str(calls[6]) in err
    monkeypatch.setattr(gen, "atomic_write", real)
    assert run_generate(spec, out) == 0
    assert tree(out) == fresh


def die_in_a_worker(job, shard):
    import os

    os._exit(1)  # as a worker killed by the OOM killer ends: no exception, no result


def test_a_worker_that_dies_is_one_line_and_the_rerun_resumes(tmp_path, spec, fresh, capsys, monkeypatch):
    import rosetrain.data.generate as gen

    out = tmp_path / "out"
    monkeypatch.setattr(gen, "write_shard", die_in_a_worker)
    assert run_generate(spec, out, "--num-proc=2") == 2
    assert "worker process died" in one_error_line(capsys)
    monkeypatch.undo()
    assert run_generate(spec, out) == 0
    assert tree(out) == fresh


@pytest.mark.parametrize(
    "flag, value", [("--shard-size", "0"), ("--shard-size", "-3"), ("--num-proc", "0"), ("--scenes", "0")]
)
def test_non_positive_sizes_are_refused(tmp_path, spec, capsys, flag, value):
    args = [
        "generate",
        "--spec",
        str(spec),
        "--out",
        str(tmp_path / "out"),
        "--scenes",
        "4",
        "--quiet",
        flag,
        value,
    ]
    assert main(args) == 2
    assert flag in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_file_where_the_output_folder_should_be(tmp_path, spec, capsys):
    (tmp_path / "out").write_text("a file")
    assert run_generate(spec, tmp_path / "out") == 2
    assert "is a file, not a folder" in one_error_line(capsys)
    assert run_generate(spec, tmp_path / "out" / "below") == 2
    one_error_line(capsys)
    assert (tmp_path / "out").read_text() == "a file"


def test_a_file_where_an_image_folder_should_be(tmp_path, spec, capsys):
    out = tmp_path / "out"
    (out / "images").mkdir(parents=True)
    for family in ("attribute", "sprite_edit", "sprite_pair"):
        (out / "images" / f"rosetrain-{family}").write_text("in the way")
    assert run_generate(spec, out) == 2
    assert "cannot write" in one_error_line(capsys)
