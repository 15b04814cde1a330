"""The real ROSE release as the Hugging Face Hub delivers it, offline.

``huggingface_hub`` keeps a dataset repo in its cache as
``hub/datasets--OWNER--NAME/`` with ``refs/main`` (the commit of main),
``blobs/<hash>`` (each file's bytes, once) and ``snapshots/<commit>/<path>``
(relative symlinks into ``blobs/``). The tests build that layout in a
temporary ``HF_HOME`` from the real ROSE v0.1 metadata in tests/data/rose-v0.1
(the first rows of each bridge file) and stand-in images, check that the
library itself reads it back, then run rosetrain on it with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import ROSE_V01

from rosetrain.core.errors import RosetrainError
from rosetrain.data.paths import check_confined
from rosetrain.data.release import load_split, select_records, with_image_paths

REPO = "sysuwyh357/ROSE-v0.1"
COMMIT = hashlib.sha1(b"rosetrain stand-in for ROSE-v0.1").hexdigest()  # a commit hash's form
ROWS_PER_FILE = 3
BRIDGES = ("metadata_test_global_click_bridge.jsonl", "metadata_test_matched_local_count_bridge.jsonl")


def add_blob(repo: Path, path_in_repo: str, data: bytes) -> None:
    """``data`` stored as huggingface_hub stores a downloaded file: the bytes in
    blobs/<sha256>, a relative symlink to it at snapshots/<commit>/<path>."""
    digest = hashlib.sha256(data).hexdigest()
    blob = repo / "blobs" / digest
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    link = repo / "snapshots" / COMMIT / path_in_repo
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(blob, link.parent))


def build_hub_cache(hf_home: Path, rows_per_file: int = ROWS_PER_FILE) -> Path:
    """The ROSE release's first rows in a Hub cache under ``hf_home``; its snapshot folder."""
    from PIL import Image

    repo = hf_home / "hub" / ("datasets--" + REPO.replace("/", "--"))
    images: dict[str, tuple[int, int]] = {}
    for name in BRIDGES:
        lines = (ROSE_V01 / name).read_bytes().splitlines(keepends=True)[:rows_per_file]
        add_blob(repo, name, b"".join(lines))
        for row in map(json.loads, lines):
            images[row["image"]] = (row["image_width"], row["image_height"])
    for shade, (image, size) in enumerate(sorted(images.items())):
        picture = Image.new("RGB", size, (255, 255 - 40 * shade, 255))
        for x in range(0, size[0], 64):  # grid lines, as ROSE's images have
            for y in range(size[1]):
                picture.putpixel((x, y), (0, 0, 0))
        target = hf_home / "picture.png"
        picture.save(target)
        add_blob(repo, image, target.read_bytes())
        target.unlink()
    for name in ("README.md", "LICENSE"):
        add_blob(repo, name, (ROSE_V01 / name).read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)  # no newline, as huggingface_hub writes it
    return repo / "snapshots" / COMMIT


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("hf-home")
    build_hub_cache(home)
    return home


@pytest.fixture
def offline_cache(hf_home, monkeypatch) -> Path:
    """This process reads ``hf_home``'s cache, offline (constants as well as the
    environment: huggingface_hub reads the environment once, when imported)."""
    from huggingface_hub import constants

    for name, value in (("HF_HOME", hf_home), ("HF_HUB_CACHE", hf_home / "hub")):
        monkeypatch.setenv(name, str(value))
        monkeypatch.setattr(constants, name, str(value))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return hf_home / "hub" / ("datasets--" + REPO.replace("/", "--")) / "snapshots" / COMMIT


def offline_env(hf_home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_CACHE": str(hf_home / "hub"), "HF_HUB_OFFLINE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


def test_the_stand_in_cache_is_read_by_huggingface_hub_itself(offline_cache):
    from huggingface_hub import scan_cache_dir, snapshot_download, try_to_load_from_cache

    assert Path(snapshot_download(REPO, repo_type="dataset")) == offline_cache
    assert Path(snapshot_download(REPO, repo_type="dataset", revision=COMMIT)) == offline_cache
    cached = try_to_load_from_cache(REPO, BRIDGES[0], repo_type="dataset")
    assert isinstance(cached, str) and Path(cached) == offline_cache / BRIDGES[0]
    assert os.path.realpath(cached).startswith(str(offline_cache.parents[1] / "blobs") + os.sep)
    info = scan_cache_dir()
    assert not info.warnings
    (repo,) = info.repos
    assert (repo.repo_id, repo.repo_type, set(repo.refs)) == (REPO, "dataset", {"main"})
    (revision,) = repo.revisions
    files = {f.file_name for f in revision.files}
    assert set(BRIDGES) <= files and any(f.endswith(".png") for f in files)
    # the stand-in's files are links into blobs/, as a download makes them
    assert all(p.is_symlink() for p in offline_cache.rglob("*") if p.is_file())


def test_a_hub_snapshot_of_symlinks_into_blobs_reads_as_a_release(offline_cache):
    """Every file of a snapshot is a link into ../../blobs: the loader, the
    scorer's image check and eval's image paths accept links that stay in the
    same repo's cache folder."""
    records = load_split(offline_cache, "test")
    assert len(records) == 2 * ROWS_PER_FILE
    chosen, root = select_records(offline_cache, "test", None)
    for record in with_image_paths(chosen, root):
        assert Path(record["image"]).is_file() and record["image"].startswith(str(offline_cache))


def test_links_that_leave_the_repo_cache_are_still_refused(hf_home, tmp_path):
    """The protection holds inside a Hub cache too: a link to /etc, to another
    repo's blobs, to the cache folder above; a path with '..'; and a folder
    shaped like a snapshot whose repo folder has no blobs/."""
    home = tmp_path / "hf"
    snapshot = build_hub_cache(home, rows_per_file=1)
    (home / "hub" / "version.txt").write_text("1")
    other = home / "hub" / "datasets--someone--else" / "blobs" / "secret"
    other.parent.mkdir(parents=True)
    other.write_text("another repo's file")
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"not the dataset's")
    for name, target in (
        ("etc.png", Path("/etc/passwd")),
        ("other-repo.png", other),
        ("cache-above.png", home / "hub" / "version.txt"),
        ("outside.png", outside),
    ):
        (snapshot / "images" / name).symlink_to(target)
        with pytest.raises(RosetrainError, match="resolves outside the dataset folder"):
            check_confined(str(snapshot), f"images/{name}", "line 1: image")
    with pytest.raises(RosetrainError, match="leaves the dataset folder"):
        check_confined(str(snapshot), "../../blobs/x", "line 1: image")
    check_confined(str(snapshot), BRIDGES[0], "here")  # a link into blobs/: accepted

    fake = tmp_path / "not-a-cache" / "datasets--a--b"
    (fake / "snapshots" / "rev" / "images").mkdir(parents=True)
    (fake / "data.png").write_bytes(b"x")
    (fake / "snapshots" / "rev" / "images" / "x.png").symlink_to(fake / "data.png")
    with pytest.raises(RosetrainError, match="resolves outside the dataset folder"):
        check_confined(str(fake / "snapshots" / "rev"), "images/x.png", "line 1: image")
