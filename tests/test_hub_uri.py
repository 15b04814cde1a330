"""``hf://datasets/OWNER/NAME[@REVISION][/PATH]`` wherever a split is read:
every command that reads one resolves it through rosetrain.data.hub.resolve_split
(pathlib would collapse ``hf://`` into ``hf:/``), and names the URI as written.
Runs on test_hub_release's offline stand-in of the Hub cache."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from test_hub_release import BRIDGES, REPO, ROWS_PER_FILE, hf_home, offline_cache  # noqa: F401 (fixtures)

from rosetrain.core.errors import RosetrainError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def snapshot(request):
    """test_hub_release's offline cache (its fixture, by name: the import above
    brings it here); the snapshot folder of the stand-in release."""
    return request.getfixturevalue("offline_cache")


def test_every_command_that_reads_a_split_reads_a_hub_uri(snapshot, tmp_path, capsys, monkeypatch):
    """preview, export-lmms-eval and signal take hf://datasets/... as eval and score
    do (one resolver: rosetrain.data.hub.resolve_split); pathlib never sees the URI."""
    from rosetrain.cli import main as cli_main

    uri = f"hf://datasets/{REPO}"
    monkeypatch.chdir(tmp_path)  # preview's default sheet goes here, never into the Hub cache
    assert cli_main(["preview", uri, "--limit", "2"]) == 0
    assert (tmp_path / "preview_test.png").is_file()
    assert not list(snapshot.parents[1].rglob("preview_*.png"))
    assert cli_main(["preview", f"{uri}@main/{BRIDGES[0]}", "--out", str(tmp_path / "one.png")]) == 0
    task = tmp_path / "task"
    assert cli_main(["export-lmms-eval", "--data", uri, "--out", str(task)]) == 0
    docs = (task / "docs_test.jsonl").read_text().splitlines()
    assert len(docs) == 2 * ROWS_PER_FILE
    # signal reads the split through the same resolver before any model loads
    seen = {}

    def no_model(data, split, limit, *args, **kwargs):
        seen["data"] = data
        raise RosetrainError("stop here")

    monkeypatch.setattr("rosetrain.data.release.select_records", no_model)
    capsys.readouterr()
    assert cli_main(["signal", "--model", "org/model", "--data", uri]) == 2
    assert seen["data"] == snapshot


@pytest.mark.parametrize("command", ["preview", "export-lmms-eval", "eval", "signal"])
def test_a_missing_path_in_a_hub_dataset_is_named_as_written(snapshot, tmp_path, capsys, command):
    from rosetrain.cli import main as cli_main

    uri = f"hf://datasets/{REPO}/no/such.jsonl"
    argv = {
        "preview": ["preview", uri],
        "export-lmms-eval": ["export-lmms-eval", "--data", uri, "--out", str(tmp_path / "task")],
        "eval": ["eval", "--model", "org/model", "--data", uri, "--out", str(tmp_path / "run")],
        "signal": ["signal", "--model", "org/model", "--data", uri],
    }[command]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{uri}: no such folder or metadata .jsonl file" in err, err
    assert "hf:/datasets" not in err.replace("hf://", "")
    assert not (tmp_path / "task").exists() and not (tmp_path / "run").exists()


def test_the_library_reads_a_hub_uri_and_names_it_as_written(snapshot):
    """load_split and split_fingerprint take the URI too (the training's eval.folder
    reads through them); a split the snapshot lacks names the URI, not the cache."""
    from rosetrain.data.release import load_split, split_fingerprint

    uri = f"hf://datasets/{REPO}"
    assert load_split(uri, "test") == load_split(snapshot, "test")
    assert split_fingerprint(uri, "test") == split_fingerprint(snapshot, "test")
    with pytest.raises(RosetrainError, match=f"^{uri}: no metadata_val.jsonl") as err:
        load_split(uri, "val")
    assert str(snapshot) not in str(err.value)


def test_a_recipes_held_out_split_may_be_a_hub_uri(snapshot):
    from rosetrain.train.data import heldout_records
    from rosetrain.train.recipe import EvalConfig

    records = heldout_records(EvalConfig(folder=f"hf://datasets/{REPO}", split="test"))
    assert len(records) == 2 * ROWS_PER_FILE
    assert all(record["image"].startswith(str(snapshot)) for record in records)


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A Hub cache of this test's own (its refs and links get edited), read offline."""
    from huggingface_hub import constants
    from test_hub_release import build_hub_cache

    home = tmp_path / "hf"
    snapshot = build_hub_cache(home, rows_per_file=1)
    for name, value in (("HF_HOME", home), ("HF_HUB_CACHE", home / "hub")):
        monkeypatch.setenv(name, str(value))
        monkeypatch.setattr(constants, name, str(value))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    outside = tmp_path / "outside"
    (outside / "images").mkdir(parents=True)
    for path in snapshot.rglob("*"):
        if path.is_file():
            target = outside / path.relative_to(snapshot)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return snapshot, outside


def _edit(snapshot, outside, how: str) -> None:
    repo = snapshot.parents[1]
    if how == "refs climbs out":
        (repo / "refs" / "main").write_text(os.path.relpath(outside, repo / "snapshots"))
    elif how == "refs is absolute":
        (repo / "refs" / "main").write_text(str(outside))
    elif how == "snapshot is a link":
        shutil.rmtree(snapshot)
        snapshot.symlink_to(outside)
    elif how == "metadata is a link out":
        (snapshot / BRIDGES[0]).unlink()
        (snapshot / BRIDGES[0]).symlink_to(outside / BRIDGES[0])


@pytest.mark.parametrize(
    "how", ["refs climbs out", "refs is absolute", "snapshot is a link", "metadata is a link out"]
)
@pytest.mark.parametrize("command", ["score", "preview", "export-lmms-eval", "eval", "signal"])
def test_a_hub_uri_never_reads_outside_its_repos_cache_folder(own_cache, tmp_path, capsys, how, command):
    from rosetrain.cli import main as cli_main

    snapshot, outside = own_cache
    _edit(snapshot, outside, how)
    uri = f"hf://datasets/{REPO}"
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("")
    argv = {
        "score": ["score", "--data", uri, "--predictions", str(predictions), "--out", str(tmp_path / "s")],
        "preview": ["preview", uri, "--out", str(tmp_path / "p.png")],
        "export-lmms-eval": ["export-lmms-eval", "--data", uri, "--out", str(tmp_path / "task")],
        "eval": ["eval", "--model", "org/model", "--data", uri, "--out", str(tmp_path / "run")],
        "signal": ["signal", "--model", "org/model", "--data", uri],
    }[command]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "outside the repo's cache folder" in err or "resolves outside the dataset folder" in err, err
    assert not any((tmp_path / name).exists() for name in ("s", "p.png", "task", "run"))


def test_a_revision_is_a_name_never_a_path(own_cache):
    from rosetrain.data.hub import hub_snapshot

    for revision in ("../../outside", "/etc", "main/../../x"):
        with pytest.raises(RosetrainError, match="revision must be a branch, tag or commit"):
            hub_snapshot(REPO, revision, "data")


def test_a_folder_in_the_hub_cache_names_its_dataset_like_the_uri(snapshot, tmp_path):
    """The path hf://datasets/... resolves to names the same repo and commit: in a
    result's provenance and in a model card's `datasets`; other folders name none."""
    from huggingface_hub import ModelCard

    from rosetrain.data.hub import cached_dataset, data_identity
    from rosetrain.train.card import model_card_text
    from rosetrain.train.recipe import recipe_from_dict

    by_uri = data_identity(f"hf://datasets/{REPO}")
    assert by_uri["repo_id"] == REPO and data_identity(snapshot) == {**by_uri, "data": str(snapshot)}
    assert cached_dataset(snapshot / "images") == (REPO, by_uri["revision"])
    assert cached_dataset(tmp_path) is None and data_identity(tmp_path)["repo_id"] is None

    def card_datasets(folder: str, **data: object) -> list[str] | None:
        recipe = recipe_from_dict(
            {"method": "sft", "model": "Qwen/Qwen2.5-VL-3B-Instruct", "output_dir": str(tmp_path / "run"),
             "max_steps": 1, "data": data or {"folder": folder}, "lora": None}
        )  # fmt: skip
        (tmp_path / "README.md").write_text(model_card_text(recipe, {"global_step": 1}, adapter=False))
        return ModelCard.load(tmp_path / "README.md").data.datasets

    assert card_datasets(str(snapshot)) == [REPO]
    assert card_datasets(f"hf://datasets/{REPO}@main/sub") == [REPO]  # the repo, not the path in it
    # data on no Hub repo: its identity, never nothing (a folder without a manifest: its name)
    assert card_datasets(str(tmp_path)) == [f"{tmp_path.name} (split train)"]
    spec = tmp_path / "mine.yaml"
    spec.write_bytes((ROOT / "rosetrain" / "resources" / "generators" / "rose-protocol.yaml").read_bytes())
    digest = hashlib.sha256(spec.read_bytes()).hexdigest()[:12]
    assert card_datasets("", spec=str(spec), seed=7) == [f"mine.yaml@sha256:{digest} (seed 7)"]
