"""``hf://datasets/OWNER/NAME[@REVISION][/PATH]`` wherever a split is read:
every command that reads one resolves it through rosetrain.data.hub.resolve_split
(pathlib would collapse ``hf://`` into ``hf:/``), and names the URI as written.
Runs on test_hub_release's offline stand-in of the Hub cache."""

from __future__ import annotations

import pytest
from test_hub_release import BRIDGES, REPO, ROWS_PER_FILE, hf_home, offline_cache  # noqa: F401 (fixtures)

from rosetrain.core.errors import RosetrainError


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
