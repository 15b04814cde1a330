"""generate replaces only what its manifest says it wrote: files named as its
images but not written by it, and links that lead out of --out, are refused;
a resume with another --exclude is refused. Every destructive path here works
inside the test's own tmp_path."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from rosetrain.cli import main


@pytest.fixture
def spec(tmp_path, small_spec_text, write_spec):
    return write_spec(tmp_path, small_spec_text)


def run_generate(spec, out, *extra, scenes="6"):
    command = ["generate", "--spec", str(spec), "--out", str(out), "--split", "test", "--scenes", scenes]
    return main([*command, "--shard-size", "3", "--num-proc", "1", "--formats", "release", "--quiet", *extra])


def tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def image_names(tmp_path, spec) -> list[str]:
    """The image paths a 6-scene split of SMALL_SPEC writes."""
    out = tmp_path / "names"
    assert run_generate(spec, out) == 0
    return sorted(p.relative_to(out).as_posix() for p in (out / "images").rglob("*.png"))


def test_a_foreign_file_named_as_an_image_is_refused(tmp_path, spec, image_names, capsys):
    out = tmp_path / "out"
    mine = out / image_names[0]
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"the user's picture")
    assert run_generate(spec, out) == 2
    err = one_error_line(capsys)
    assert image_names[0] in err and "not written by rosetrain" in err
    assert tree(out) == {image_names[0]: hashlib.sha256(b"the user's picture").hexdigest()}
    assert run_generate(spec, out, "--overwrite") == 2  # --overwrite included
    assert mine.read_bytes() == b"the user's picture"


@pytest.mark.parametrize("link", ["images", "images/<subset>", "hf", ".parts"])
def test_a_link_out_of_the_folder_is_never_written_through(tmp_path, spec, image_names, capsys, link):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    out = tmp_path / "out"
    link = link.replace("<subset>", Path(image_names[0]).parent.name)
    (out / link).parent.mkdir(parents=True, exist_ok=True)
    (out / link).symlink_to(outside, target_is_directory=True)
    formats = ["--formats", "release,hf"] if link == "hf" else []
    assert run_generate(spec, out, *formats) == 2
    assert "a symbolic link" in one_error_line(capsys)
    assert tree(outside) == {"keep.txt": hashlib.sha256(b"mine").hexdigest()}


def test_overwrite_after_a_kill_leaves_a_users_file_named_as_an_image(tmp_path, spec, image_names, capsys):
    out = tmp_path / "out"
    assert run_generate(spec, out) == 0
    manifest = out / ".parts" / "test.manifest.json"
    settings, made = json.loads(manifest.read_text()), manifest.stat().st_mtime_ns
    del settings["files"]  # as a run killed before it listed its files, its manifest written at the start
    manifest.write_text(json.dumps(settings))
    os.utime(manifest, ns=(made, min(made, *(p.stat().st_mtime_ns for p in (out / "images").rglob("*.png")))))
    mine = out / image_names[1]
    mine.write_bytes(b"the user's picture")  # moved in later, so it keeps its own older time
    os.utime(mine, ns=(10**18, 10**18))
    assert manifest.stat().st_mtime_ns > 10**18
    assert run_generate(spec, out, "--overwrite") == 2  # the user's file is in the way of the new split
    err = one_error_line(capsys)
    assert image_names[1] in err, err
    assert mine.read_bytes() == b"the user's picture"


def test_exclude_added_on_resume_is_refused(tmp_path, spec, capsys):
    other = tmp_path / "other"
    assert run_generate(spec, other, scenes="3") == 0
    out = tmp_path / "out"
    assert run_generate(spec, out) == 0
    before = tree(out)
    exclude = ["--exclude", str(other / "metadata_test.jsonl")]
    assert run_generate(spec, out, *exclude) == 2
    assert "exclude_sha256" in one_error_line(capsys)
    assert tree(out) == before
    assert run_generate(spec, out, *exclude, "--overwrite") == 0  # a new split with the exclusion
    assert run_generate(spec, out, *exclude) == 0  # and its resume with the same one
