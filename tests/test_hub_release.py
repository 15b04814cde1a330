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
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.data.paths import check_confined
from rosetrain.data.release import load_split, select_records, with_image_paths

ROOT = Path(__file__).resolve().parent.parent
ROSE_V01 = Path(__file__).resolve().parent / "data" / "rose-v0.1"  # real release metadata, vendored

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
        ("refs.png", snapshot.parents[1] / "refs" / "main"),  # inside the repo's folder, not its blobs/
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


@pytest.mark.slow
def test_eval_of_the_official_suite_reads_the_hub_cache_offline(hf_home, tiny_model_dir, tmp_path):
    """The command a user runs, as a process: no --data, HF_HUB_OFFLINE=1, the
    release only in HF_HOME's cache; eval/rose-official.yaml names it."""
    run = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "rosetrain",
        "eval",
        "--suite",
        str(ROOT / "eval" / "rose-official.yaml"),
    ]
    command += ["--model", str(tiny_model_dir), "--out", str(run), "--no-progress", "--max-new-tokens", "8"]
    done = subprocess.run(command, env=offline_env(hf_home), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    snapshot = hf_home / "hub" / ("datasets--" + REPO.replace("/", "--")) / "snapshots" / COMMIT
    rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * ROWS_PER_FILE and all(row["error"] is None for row in rows)
    assert json.loads((run / "eval_run.json").read_text())["data"] == str(snapshot)
    summary = json.loads((run / "evaluation_summary.json").read_text())
    assert summary["n"] == 2 * ROWS_PER_FILE
    copy = tmp_path / "copy"
    shutil.copytree(snapshot, copy)  # the links followed: a plain local copy names the same data
    from rosetrain.data.release import split_fingerprint

    assert summary["data_fingerprint"] == split_fingerprint(copy, "test")
    assert (run / "table1_row.txt").is_file() and (run / "per_item_eval.jsonl").is_file()


def test_offline_with_nothing_cached_is_one_line_saying_how_to_get_it(tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    from rosetrain.cli import main as cli_main

    empty = tmp_path / "empty-hf"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(empty / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "p.jsonl").write_text("")
    for command in (
        [
            "eval",
            "--suite",
            str(ROOT / "eval" / "rose-official.yaml"),
            "--model",
            "m",
            "--out",
            str(tmp_path / "r"),
        ],
        [
            "score",
            "--data",
            f"hf://datasets/{REPO}",
            "--predictions",
            str(tmp_path / "p.jsonl"),
            "--out",
            str(tmp_path / "s"),
        ],
    ):
        assert cli_main(command) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert f"dataset {REPO} is not (completely) in the Hugging Face cache" in err
        assert f"hf download --repo-type dataset {REPO}" in err
    assert not (tmp_path / "r").exists() and not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nsplit: test\n", "give 'data' (a local release folder) or 'hub_dataset'"),
        ("name: x\ndata: null\nhub_dataset: null\n", "give 'data' (a local release folder) or 'hub_dataset'"),
        ("name: x\nhub_dataset: [a, b]\n", "'hub_dataset' must be a non-empty string or null"),
        ("name: x\nhub_dataset: a/b\nrevision: 3\n", "'revision' must be a non-empty string or null"),
        ("data: somewhere\n", "'name' is missing"),
    ],
)
def test_a_suite_that_names_no_data_is_one_line(tmp_path, capsys, text, message):
    from rosetrain.cli import main as cli_main

    suite = tmp_path / "suite.yaml"
    suite.write_text(text)
    assert cli_main(["eval", "--suite", str(suite), "--model", "m", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(suite) in err, err


def test_score_reads_a_hub_dataset_uri(offline_cache, tmp_path, capsys):
    """--data hf://datasets/OWNER/NAME[@REVISION][/PATH]: gold answers all PASS."""
    from rosetrain.cli import main as cli_main

    def gold_answers(records: list[dict], name: str) -> Path:
        path = tmp_path / name
        path.write_text(
            "".join(json.dumps({"item_id": r["item_id"], "raw_text": r["answer"]}) + "\n" for r in records)
        )
        return path

    predictions = gold_answers(load_split(offline_cache, "test"), "gold.jsonl")
    first_file = gold_answers(load_split(offline_cache / BRIDGES[0], "test"), "first.jsonl")
    for n, data in enumerate(
        (f"hf://datasets/{REPO}", f"hf://datasets/{REPO}@{COMMIT}", f"hf://datasets/{REPO}@main/{BRIDGES[0]}")
    ):
        out = tmp_path / f"scored-{n}"
        answers = first_file if n == 2 else predictions
        assert cli_main(["score", "--data", data, "--predictions", str(answers), "--out", str(out)]) == 0
        summary = json.loads((out / "evaluation_summary.json").read_text())
        assert summary["n"] == (ROWS_PER_FILE if n == 2 else 2 * ROWS_PER_FILE)
        per_item = [json.loads(line) for line in (out / "per_item_eval.jsonl").read_text().splitlines()]
        assert all(row["pass"] == 1 for row in per_item)
        # the file's name in the snapshot, not its blob's hash
        assert summary["metadata_jsonl"] == str(offline_cache / BRIDGES[0])
        # provenance: the repo in the official key, the commit read in rosetrain's own record
        assert summary["dataset_repo_id"] == REPO
        assert summary["data"] == {
            "data": data,
            "repo_id": REPO,
            "revision": COMMIT,
            "fingerprint": summary["data_fingerprint"],
        }
    capsys.readouterr()
    for data, message in (
        (f"hf://{REPO}", f"names a model repo; a dataset is hf://datasets/{REPO}"),
        ("hf://datasets/just-a-name", "namespace/name"),
        (
            f"hf://datasets/{REPO}@v9",
            f"dataset {REPO} (revision v9) is not (completely) in the Hugging Face cache",
        ),
        (f"hf://datasets/{REPO}/../../x", "leaves the dataset folder"),
    ):
        assert (
            cli_main(
                ["score", "--data", data, "--predictions", str(predictions), "--out", str(tmp_path / "bad")]
            )
            == 2
        )
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err


def test_data_on_the_command_line_wins_over_the_suites_hub_dataset(tmp_path, monkeypatch):
    """--data needs no cache: the suite's hub_dataset is not even looked up."""
    import argparse

    from rosetrain.commands.evaluate import resolve_data

    def no_hub(*args, **kwargs):
        raise AssertionError("the Hub was asked")

    monkeypatch.setattr("huggingface_hub.snapshot_download", no_hub)
    args = argparse.Namespace(
        suite=str(ROOT / "eval" / "rose-official.yaml"),
        data=str(tmp_path),
        split=None,
        limit=None,
        max_new_tokens=None,
    )
    data, split, _, _ = resolve_data(args)
    assert (data, split) == (tmp_path, "test")


README_HEADING = re.compile(
    r"^#+ Evaluate a model on the real ROSE release, before and after training\s*$", re.M
)


def readme_commands() -> list[str]:
    """The commands of the README section found by its heading (wherever it
    moves): the first ```bash block after it, one command a line, comments out."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    heading = README_HEADING.search(text)
    assert heading, (
        "README.md has no section 'Evaluate a model on the real ROSE release, before and after training'"
    )
    block = re.search(r"^```bash\n(.*?)^```", text[heading.end() :], re.M | re.S)
    assert block and "\n## " not in text[heading.end() : heading.end() + block.start()]
    lines = block.group(1).replace("\\\n", " ").splitlines()
    return [
        line.split(" #")[0].strip() for line in lines if line.strip() and not line.lstrip().startswith("#")
    ]


@pytest.mark.slow
def test_the_readme_commands_run_offline_on_the_hub_cache(
    offline_cache, hf_home, tiny_model_dir, tmp_path, monkeypatch
):
    """Every command of the README section, in an empty folder with the suite
    as in a checkout, HF_HUB_OFFLINE=1, and every ``--model`` value replaced by a
    tiny model. ``hf download`` (online, once, for a user) reads the cache here;
    ``~/data/ROSE-v0.1`` is a plain copy of the snapshot (the links followed)."""
    from rosetrain.cli import main as cli_main

    work, home = tmp_path / "work", tmp_path / "home"
    (work / "eval").mkdir(parents=True)
    shutil.copy(ROOT / "eval" / "rose-official.yaml", work / "eval")
    shutil.copytree(offline_cache, home / "data" / "ROSE-v0.1")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    commands = readme_commands()
    assert [c.split()[:2] for c in commands][:4] == [
        ["hf", "download"],
        *[["rosetrain", "eval"]] * 2,
        ["rosetrain", "compare"],
    ]
    for command in commands:
        words = [os.path.expanduser(word) for word in shlex.split(command)]  # as a shell expands ~/
        for at, word in enumerate(words[:-1]):
            if word == "--model":
                words[at + 1] = str(tiny_model_dir)
        if words[0] == "hf":
            done = subprocess.run(
                words, env=offline_env(hf_home, HOME=str(home)), capture_output=True, text=True
            )
            assert done.returncode == 0 and str(offline_cache) in done.stdout, (
                command,
                done.stdout,
                done.stderr,
            )
        else:
            assert words[0] == "rosetrain", f"README command the test cannot run: {command}"
            assert cli_main([*words[1:], *(["--no-progress"] if words[1] == "eval" else [])]) == 0, command

    runs = work / "runs"
    for run in ("rose-base", "rose-grpo"):
        summary = json.loads((runs / run / "evaluation_summary.json").read_text())
        assert summary["n"] == 2 * ROWS_PER_FILE
        assert set(summary["bridges"]) == {"global_click", "matched_count"}
        for name in ("per_item_eval.jsonl", "table1_row.txt", "table2_row.txt", "summary_by_template.csv"):
            assert (runs / run / name).is_file(), (run, name)
    assert json.loads((runs / "rose-compare" / "compare.json").read_text())["avg_pass"] is not None
    assert json.loads((runs / "rose-base-gclk" / "evaluation_summary.json").read_text())["n"] == ROWS_PER_FILE
    # the predictions scored again, from the Hub id and from the local copy: the eval's rows
    per_item = (runs / "rose-grpo" / "per_item_eval.jsonl").read_bytes()
    assert (runs / "rose-grpo-scored" / "per_item_eval.jsonl").read_bytes() == per_item
    assert (runs / "rose-grpo-local" / "per_item_eval.jsonl").read_bytes() == per_item


def test_score_of_a_hub_dataset_imports_no_torch(hf_home, tmp_path):
    """huggingface_hub is light: `score --data hf://...` stays a fast command."""
    rows = (ROSE_V01 / BRIDGES[0]).read_text().splitlines()[:ROWS_PER_FILE]
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(
        "".join(json.dumps({"item_id": json.loads(r)["item_id"], "raw_text": ""}) + "\n" for r in rows)
    )
    code = (
        "import sys; from rosetrain.cli import main; "
        f"assert main(['score', '--data', 'hf://datasets/{REPO}/{BRIDGES[0]}', '--predictions', "
        f"{str(predictions)!r}, '--out', {str(tmp_path / 'out')!r}]) == 0; "
        "heavy = {'torch', 'transformers', 'pandas', 'pyarrow'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=offline_env(hf_home), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "out" / "evaluation_summary.json").read_text())["n"] == ROWS_PER_FILE
