"""The Hub out: a generated folder's dataset card, its upload, and a trained model's card.

Offline throughout: the card is checked against what ``datasets`` reads back
from the folder and what huggingface_hub's card parser reads; the upload runs
huggingface_hub's own ``upload_folder`` with the network calls stood in for.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main

SPLIT_SCENES = 6


def _generate(out: Path, split: str = "test", scenes: int = SPLIT_SCENES, *extra: str) -> int:
    command = ["generate", "--spec", "rose-protocol", "--out", str(out), "--split", split]
    command += ["--scenes", str(scenes), "--seed", "5", "--num-proc", "1", "--quiet", *extra]
    return cli_main(command)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A layout-rose folder (bridge files) with two splits, release and Parquet."""
    out = tmp_path_factory.mktemp("card") / "data"
    assert _generate(out, "test") == 0
    assert _generate(out, "dev", 3) == 0
    return out


def _card(folder: Path):
    from huggingface_hub import DatasetCard

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the parser must read it without a warning
        return DatasetCard.load(folder / "README.md")


def test_the_card_is_what_huggingface_hubs_datasetcard_writes(folder, tmp_path):
    """rosetrain writes the card's text itself (DatasetCard would import hf_api in
    every generate): DatasetCard reads it and writes it back byte for byte."""
    from huggingface_hub import DatasetCard

    text = (folder / "README.md").read_text(encoding="utf-8")
    assert str(DatasetCard(text)) == text
    release_only = tmp_path / "release"
    assert _generate(release_only, "test", 2, "--formats", "release") == 0
    text = (release_only / "README.md").read_text(encoding="utf-8")
    assert str(DatasetCard(text)) == text


def test_the_card_header_is_what_datasets_reads_back(folder):
    import datasets

    from rosetrain.data.hf import hf_features

    card = _card(folder)
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0" and data["pretty_name"] == "rosetrain rose-protocol"
    assert {"image-text-to-text", "visual-question-answering"} <= set(data["task_categories"])
    assert "rosetrain" in data["tags"]
    [config], [info] = data["configs"], [data["dataset_info"]]
    assert config["config_name"] == info["config_name"] == "default"
    # a split name means the same rows as in the release: the bridges are splits of their own
    bridges = ("global_click_bridge", "matched_local_count_bridge")
    names = [f"{split}{part}" for split in ("dev", "test") for part in ("", *(f"_{b}" for b in bridges))]
    assert [f["split"] for f in config["data_files"]] == names
    # the declared features are datasets' own YAML form of the Parquet schema
    assert info["features"] == hf_features()._to_yaml_list()
    whole = datasets.load_dataset(str(folder))  # datasets also checks num_examples against what it read
    assert sorted(whole) == sorted(names)
    for split in info["splits"]:
        assert whole[split["name"]].num_rows == split["num_examples"] > 0
        assert whole[split["name"]].features == hf_features()
        metadata = (folder / f"metadata_{split['name']}.jsonl").read_text().splitlines()
        assert whole[split["name"]]["item_id"] == [json.loads(line)["item_id"] for line in metadata]
    assert whole["test"].num_rows == SPLIT_SCENES * 5  # T1..T5; the bridges: one each a scene


def test_a_release_only_folder_is_read_from_its_metadata_files(tmp_path):
    """Splits whose rows carry other fields (a one-scene split has one family): the
    card declares the union of the files' columns, or datasets could not cast them."""
    import datasets

    out = tmp_path / "data"
    assert _generate(out, "dev", 1, "--formats", "release") == 0
    assert _generate(out, "test", 6, "--formats", "release") == 0
    info = _card(out).data.to_dict()["dataset_info"]
    # the bridges are in their own files, as in the ROSE release: splits of their own
    expected = {"dev": 5, "dev_global_click_bridge": 1, "dev_matched_local_count_bridge": 1}
    expected |= {"test": 30, "test_global_click_bridge": 6, "test_matched_local_count_bridge": 6}
    assert {s["name"]: s["num_examples"] for s in info["splits"]} == expected
    whole = datasets.load_dataset(str(out))
    assert {name: part.num_rows for name, part in whole.items()} == expected
    assert whole["test"].features == datasets.Features._from_yaml_list(info["features"])
    assert whole["dev"][0]["image"].startswith("images/")
    assert sum(row["ground_truth_count"] for row in whole["test"]) == sum(
        json.loads(line)["ground_truth_count"]
        for line in (out / "metadata_test.jsonl").read_text().splitlines()
    )
    # 64-bit seeds keep every digit (a JSON number would read as a float)
    seeds = [json.loads(line)["item_seed"] for line in (out / "metadata_test.jsonl").read_text().splitlines()]
    assert any(seed > 2**53 for seed in seeds) and whole["test"]["item_seed"] == seeds


def test_the_card_body_names_spec_seed_version_mix_and_command(folder):
    import rosetrain

    text = (folder / "README.md").read_text()
    spec_text = (
        Path(rosetrain.__file__).parent / "resources" / "generators" / "rose-protocol.yaml"
    ).read_text()
    assert spec_text.strip() in text  # the spec itself, so the card alone reproduces the data
    assert f"rosetrain {rosetrain.__version__}" in text
    assert "| test | rose-protocol.yaml |" in text and f"| 5 | {SPLIT_SCENES} | {SPLIT_SCENES * 7} |" in text
    for line in ("| T1_COUNT_GLOBAL | 3 | 6 |", "| T2B_COUNT_LOCAL_MATCHED | 3 | 6 |"):
        assert line in text  # templates x splits (dev has 3 scenes, test 6)
    assert "## Template x family" in text
    assert "rosetrain generate --spec rose-protocol --out OUT --split test --scenes 6 --seed 5" in text
    assert str(folder.parent) not in text and "/tmp" not in text  # no path of this machine


def test_the_cards_command_remakes_the_folder_byte_for_byte(tmp_path, monkeypatch):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    monkeypatch.chdir(one)
    assert _generate(Path("data"), "test", 4) == 0
    text = (one / "data" / "README.md").read_text()
    command = next(line for line in text.splitlines() if line.startswith("rosetrain generate"))
    monkeypatch.chdir(two)
    words = ["data" if word == "OUT" else word for word in shlex.split(command)[1:]]
    assert cli_main([*words, "--num-proc", "1", "--quiet"]) == 0
    files = sorted(p.relative_to(one).as_posix() for p in one.rglob("*") if p.is_file())
    assert "data/README.md" in files and "data/.parts/card.json" in files
    for name in files:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_a_readme_rosetrain_did_not_write_is_never_replaced(tmp_path, capsys):
    out = tmp_path / "data"
    out.mkdir()
    (out / "README.md").write_text("# my notes\n")
    assert _generate(out, "test", 2, "--json") == 0
    assert (out / "README.md").read_text() == "# my notes\n"
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[-1])["card"] is None
    assert "README.md: not the card rosetrain wrote" in captured.err and "left as it is" in captured.err
    # rosetrain's own card is replaced on a rerun; once the user edits it, it is theirs
    (out / "README.md").unlink()
    assert _generate(out, "test", 2) == 0
    assert "| test |" in (out / "README.md").read_text()
    assert _generate(out, "dev", 2) == 0
    assert "| dev |" in (out / "README.md").read_text()
    edited = (out / "README.md").read_text() + "\nMy own words.\n"
    (out / "README.md").write_text(edited)
    assert _generate(out, "test", 2) == 0
    assert (out / "README.md").read_text() == edited


# ----------------------------------------------------------------- the upload


@pytest.fixture
def hub_standin(monkeypatch):
    """huggingface_hub's upload_folder itself, with its calls to the Hub stood in for."""
    from huggingface_hub import HfApi

    calls: dict = {}
    monkeypatch.setenv("HF_TOKEN", "hf_stand_in")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = {"repo_id": repo_id, **kwargs}

    def create_branch(self, repo_id, **kwargs):
        calls["create_branch"] = {"repo_id": repo_id, **kwargs}

    def create_commit(self, repo_id, operations, **kwargs):
        calls["commit"] = {
            "repo_id": repo_id,
            "files": sorted(op.path_in_repo for op in operations),
            **kwargs,
        }

    monkeypatch.setattr("huggingface_hub.hf_api.is_xet_available", lambda: False)  # one create_commit
    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_branch", create_branch)
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    monkeypatch.setattr(HfApi, "_validate_yaml", lambda self, **kwargs: calls.setdefault("validated", True))
    return calls


def test_push_uploads_the_finished_splits_and_the_card_only(tmp_path, hub_standin):
    out = tmp_path / "data"
    assert _generate(out, "test", 3) == 0
    # what must never go up: a user's file, a killed run's temp file, an unfinished split's image
    (out / "notes.txt").write_text("mine")
    subset = next((out / "images").iterdir())
    (subset / ".test-0000000.png.123-456.tmp").write_bytes(b"x")
    (subset / "test-2-0000000.png").write_bytes(b"x")
    assert (
        _generate(out, "test", 3, "--push-to-hub", "me/rose-copy", "--private", "--hub-revision", "v1") == 0
    )
    assert hub_standin["create_repo"] == {
        "repo_id": "me/rose-copy",
        "repo_type": "dataset",
        "private": True,
        "exist_ok": True,
    }
    assert hub_standin["create_branch"]["branch"] == "v1"
    commit = hub_standin["commit"]
    assert commit["repo_id"] == "me/rose-copy" and commit["repo_type"] == "dataset"
    assert commit["revision"] == "v1" and hub_standin["validated"]
    expected = {"README.md", "metadata_test.jsonl"}
    expected |= {
        f"metadata_test_{tag}.jsonl" for tag in ("global_click_bridge", "matched_local_count_bridge")
    }
    expected |= {p.relative_to(out).as_posix() for p in (out / "hf").glob("test*/shard-*.parquet")}
    assert len([name for name in expected if name.startswith("hf/")]) == 3  # the split and its two bridges
    images = json.loads((out / ".parts" / "test.manifest.json").read_text())["files"]
    expected |= {name for name in images if name.startswith("images/")}
    assert set(commit["files"]) == expected and len(commit["files"]) == len(expected)


def test_a_pushed_folder_names_its_hub_dataset_while_unchanged(tmp_path, hub_standin):
    """After --push-to-hub, results and model cards made from the local copy name
    the repo and commit; a split regenerated or edited since names none."""
    from huggingface_hub import CommitInfo

    from rosetrain.data.hub import data_identity, dataset_repo

    def create_commit(self, repo_id, operations, **kwargs):
        return CommitInfo(
            commit_url=f"https://huggingface.co/datasets/{repo_id}/commit/{'ab' * 20}",
            commit_message="", commit_description="", oid="ab" * 20,
        )  # fmt: skip

    from huggingface_hub import HfApi

    out = tmp_path / "data"
    assert _generate(out, "test", 2) == 0
    assert _generate(out, "dev", 2) == 0
    assert dataset_repo(out, "test") is None and data_identity(out, "test")["repo_id"] is None
    with pytest.MonkeyPatch.context() as patch:  # the fixture's stand-in, returning a commit as the Hub does
        patch.setattr(HfApi, "create_commit", create_commit)
        assert _generate(out, "test", 2, "--push-to-hub", "me/rose-copy") == 0
    assert data_identity(out, "test") == {"data": str(out), "repo_id": "me/rose-copy", "revision": "ab" * 20}
    rows = [json.loads(line) for line in (out / "metadata_test.jsonl").read_text().splitlines()]
    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        "".join(json.dumps({"item_id": r["item_id"], "raw_text": r["answer"]}) + "\n" for r in rows)
    )
    scored = tmp_path / "scored"
    assert cli_main(["score", "--data", str(out), "--predictions", str(gold), "--out", str(scored)]) == 0
    summary = json.loads((scored / "evaluation_summary.json").read_text())
    assert summary["dataset_repo_id"] == "me/rose-copy" and summary["data"]["revision"] == "ab" * 20
    assert dataset_repo(str(out), "dev") == "me/rose-copy"  # every finished split went up
    assert dataset_repo(out) is None  # which split was used must be known
    # the user edits a split afterwards: it is no longer what the Hub holds
    metadata = out / "metadata_dev.jsonl"
    metadata.write_text(metadata.read_text().splitlines(keepends=True)[0])
    assert dataset_repo(out, "dev") is None and dataset_repo(out, "test") == "me/rose-copy"
    (out / ".parts" / "hub.json").write_text("{not json")  # a damaged record claims nothing
    assert dataset_repo(out, "test") is None


def test_push_refuses_a_damaged_folder_before_uploading(tmp_path, hub_standin):
    from rosetrain.core.errors import RosetrainError
    from rosetrain.data.publish import push_folder

    out = tmp_path / "data"
    assert _generate(out, "test", 2) == 0
    lines = (out / "metadata_test.jsonl").read_text().splitlines(keepends=True)
    row = json.loads(lines[0])
    row["ground_truth_count"] += 1  # a gold record that contradicts its own targets
    (out / "metadata_test.jsonl").write_text(json.dumps(row) + "\n" + "".join(lines[1:]))
    with pytest.raises(RosetrainError, match=r"metadata_test.jsonl:1: ground_truth_count"):
        push_folder(out, "me/x")
    image = next((out / "images").rglob("*.png"))
    image.unlink()
    with pytest.raises(RosetrainError, match=f"{image.name}: listed in split 'test'"):
        push_folder(out, "me/x")
    assert "commit" not in hub_standin and "create_repo" not in hub_standin  # nothing went up


@pytest.mark.parametrize(
    "env, message",
    [
        ({"HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_x"}, "huggingface_hub is offline"),
        ({"TRANSFORMERS_OFFLINE": "1", "HF_TOKEN": "hf_x"}, "huggingface_hub is offline"),  # it reads both
        ({}, "no Hugging Face token"),
    ],
)
def test_push_is_refused_before_any_work(tmp_path, env, message):
    # CI runs offline (HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE): each case sets its own
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and k != "TRANSFORMERS_OFFLINE"}
    clean.update(env, HF_HOME=str(tmp_path / "hf-home"))  # no stored token there
    out = tmp_path / "data"
    code = "import sys, rosetrain.cli as c; sys.exit(c.main(sys.argv[1:]))"
    args = ["generate", "--spec", "smoke", "--out", str(out), "--scenes", "1", "--push-to-hub", "me/x"]
    found = subprocess.run([sys.executable, "-c", code, *args], env=clean, capture_output=True, text=True)
    assert found.returncode == 2 and message in found.stderr
    assert len(found.stderr.strip().splitlines()) == 1 and "Traceback" not in found.stderr
    assert not out.exists()  # nothing generated, not even the folder


def test_push_to_a_refusing_endpoint_is_one_line_naming_it(tmp_path):
    """A closed port: huggingface_hub's HTTP client raises its own error type, not an OSError."""
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and k != "TRANSFORMERS_OFFLINE"}
    clean.update(HF_HOME=str(tmp_path / "hf-home"), HF_TOKEN="hf_x", HF_ENDPOINT=f"http://127.0.0.1:{port}")
    out = tmp_path / "data"
    code = "import sys, rosetrain.cli as c; sys.exit(c.main(sys.argv[1:]))"
    args = [
        "generate",
        "--spec",
        "smoke",
        "--out",
        str(out),
        "--scenes",
        "1",
        "--quiet",
        "--push-to-hub",
        "me/x",
    ]
    found = subprocess.run([sys.executable, "-c", code, *args], env=clean, capture_output=True, text=True)
    assert found.returncode == 2 and "Traceback" not in found.stderr, found.stderr
    assert found.stderr.count("\n") == 1
    assert f"--push-to-hub me/x: the upload to http://127.0.0.1:{port} failed" in found.stderr


def test_a_bad_repo_id_is_one_line(tmp_path, capsys):
    assert _generate(tmp_path / "data", "test", 1, "--push-to-hub", "no-owner") == 2
    assert "--push-to-hub: 'no-owner'" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


# ----------------------------------------------------------------- a trained model's card


def test_a_trained_model_names_its_base_data_method_and_version(tmp_path, tiny_model_dir, tiny_train_spec):
    import yaml
    from huggingface_hub import ModelCard

    import rosetrain

    (tmp_path / "spec.yaml").write_text(tiny_train_spec("t-card"))
    data = tmp_path / "train-data"
    args = ["generate", "--spec", str(tmp_path / "spec.yaml"), "--out", str(data), "--split", "train"]
    assert cli_main([*args, "--scenes", "4", "--num-proc", "1", "--quiet"]) == 0
    recipe = {
        "method": "sft",
        "model": str(tiny_model_dir),
        "output_dir": str(tmp_path / "run"),
        "data": {"folder": str(data)},
        "eval": {"folder": None},
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "save_steps": 100,
        "lora": {"r": 8, "alpha": 16, "dropout": 0.0},
        "cpu_threads": 1,
        "save_merged": True,
    }
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    assert (
        cli_main(["train", "sft", "--recipe", str(tmp_path / "r.yaml"), "--set", "learning_rate=1e-3"]) == 0
    )
    sha = json.loads((data / ".parts" / "train.manifest.json").read_text())["spec_sha256"]
    for folder, library in (("checkpoint-final", "peft"), ("merged", "transformers"), (".", "peft")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            card = ModelCard.load(tmp_path / "run" / folder / "README.md")
        assert card.data.library_name == library
        assert {"rosetrain", "trl", "sft", "lora"} <= set(card.data.tags)
        assert card.data.base_model is None  # a local folder is no Hub id: named in the text
        text = card.text
        assert "[None]" not in text and f"`{tiny_model_dir.name}` (a local folder)" in text
        assert "SFT, LoRA r=8 alpha=16" in text
        assert f"spec `spec.yaml` (sha256 `{sha[:12]}`), seed 1, 4 scenes" in text
        assert f"| rosetrain | {rosetrain.__version__} |" in text and "| steps | 2 |" in text
        assert "rosetrain train sft --recipe r.yaml --set learning_rate=1e-3" in text  # every override
        assert "learning_rate: 0.001" in text
        assert str(tmp_path) not in text.split("```yaml")[0]  # the table and command: no machine paths


def test_a_card_gives_the_lineage_to_the_hub_model_and_its_held_out_results(tmp_path):
    """A second stage trained from the first's run folder names the whole chain,
    its Hub root as base_model, and the final held-out figures as model-index."""
    from huggingface_hub import ModelCard

    from rosetrain.train.card import model_card_text
    from rosetrain.train.recipe import recipe_from_dict

    first = tmp_path / "runs" / "sft"
    (first / "checkpoint-final").mkdir(parents=True)
    (first / "rosetrain_recipe.yaml").write_text("method: sft\nmodel: Qwen/Qwen2.5-VL-3B-Instruct\n")
    second = tmp_path / "runs" / "grpo"
    second.mkdir()
    (second / "heldout_eval.jsonl").write_text(
        json.dumps({"step": 5, "eval_avg_pass": 0.5, "eval_counting_avg": 0.8, "eval_action_avg": 0.3,
                    "eval_gap": 0.5, "item_ids": ["a", "b"]}) + "\n"
    )  # fmt: skip
    recipe = recipe_from_dict(
        {"method": "grpo", "model": str(first / "checkpoint-final"), "output_dir": str(second),
         "max_steps": 5, "data": {"spec": "generators/curriculum.yaml"}, "lora": None,
         "eval": {"folder": "data/heldout"}}
    )  # fmt: skip
    path = tmp_path / "README.md"
    path.write_text(model_card_text(recipe, {"global_step": 5}, adapter=False))
    card = ModelCard.load(path)
    assert card.data.base_model == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert "`checkpoint-final` <- `Qwen/Qwen2.5-VL-3B-Instruct`" in card.text
    results = {r.metric_name: r.metric_value for r in card.data.eval_results}
    assert results == {"Avg. PASS": 50.0, "Counting": 80.0, "Action": 30.0, "Gap (Counting - Action)": 50.0}


def test_a_hub_base_model_is_the_cards_base_model():
    from rosetrain.train.card import model_card_text
    from rosetrain.train.recipe import recipe_from_dict

    recipe = recipe_from_dict(
        {"method": "grpo", "model": "Qwen/Qwen2.5-VL-3B-Instruct", "output_dir": "run", "max_steps": 5,
         "data": {"spec": "generators/curriculum.yaml"}, "lora": None}
    )  # fmt: skip
    card = model_card_text(recipe, {"global_step": 5}, adapter=False)
    assert "base_model: Qwen/Qwen2.5-VL-3B-Instruct" in card and "GRPO, full fine-tuning" in card
    assert "library_name: transformers" in card


def test_a_readme_of_the_users_in_output_dir_stops_training_before_it_starts(
    tmp_path, tiny_model_dir, capsys, tiny_train_spec
):
    import yaml

    (tmp_path / "spec.yaml").write_text(tiny_train_spec("t-card"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "README.md").write_text("# my experiment\n")
    recipe = {
        "method": "sft",
        "model": str(tiny_model_dir),
        "output_dir": str(run),
        "data": {"spec": str(tmp_path / "spec.yaml")},
        "eval": {"folder": None},
        "max_steps": 1,
        "per_device_train_batch_size": 2,
        "cpu_threads": 1,
    }
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    assert cli_main(["train", "sft", "--recipe", str(tmp_path / "r.yaml")]) == 2
    assert "README.md: already exists and rosetrain did not write it" in capsys.readouterr().err
    assert (run / "README.md").read_text() == "# my experiment\n"
    assert not list(run.glob("checkpoint-*"))  # not one step


def test_release_metadata_without_one_type_per_field_gets_a_card_without_features(tmp_path, small_spec):
    """The attribute family's ``amount`` is a number for hue and text for shape: no
    table reader takes such metadata, so the card names the files and declares no
    features, and generate still finishes (it failed inside pyarrow before)."""
    out = tmp_path / "data"
    command = ["generate", "--spec", str(small_spec), "--out", str(out), "--split", "test", "--scenes", "30"]
    assert cli_main([*command, "--formats", "release", "--num-proc", "1", "--quiet"]) == 0
    rows = [json.loads(line) for line in (out / "metadata_test.jsonl").open()]
    assert {type(row["amount"]) for row in rows if "amount" in row} == {float, str}
    info = _card(out).data.to_dict().get("dataset_info", {})
    assert "features" not in info
    assert "metadata_test.jsonl" in (out / "README.md").read_text()


def test_a_resumed_runs_card_gives_the_command_that_trains_it_in_one_go(tmp_path, monkeypatch):
    """`--set resume=CHECKPOINT` is how a run went on, not what it trains: the card's
    command leaves it out (the checkpoint is not there on another machine) and says so."""
    from rosetrain.train.card import model_card_text
    from rosetrain.train.recipe import load_recipe

    checkpoint = tmp_path / "run" / "checkpoint-2500"
    checkpoint.mkdir(parents=True)
    (tmp_path / "r.yaml").write_text(
        "method: sft\nmodel: Qwen/Qwen2.5-VL-3B-Instruct\ndata: {spec: generators/curriculum.yaml}\nlora: null\n"
    )
    overrides = ["max_steps=3000", f"output_dir={tmp_path / 'run'}", f"resume={checkpoint}"]
    recipe = load_recipe(tmp_path / "r.yaml", overrides)
    monkeypatch.chdir(tmp_path)  # paths under the working directory are written relative to it
    card = model_card_text(recipe, {"global_step": 3000}, adapter=False)
    command = next(line for line in card.splitlines() if line.startswith("rosetrain train sft"))
    assert "--set max_steps=3000" in command and "--set output_dir=run" in command
    assert str(tmp_path) not in card and "output_dir: run" in card
    from rosetrain.train.card import _from_here

    elsewhere = f"model=/data{tmp_path}/base"  # the working directory's path inside another one
    assert _from_here(f"{elsewhere} '{tmp_path}/a' model: {tmp_path}/b") == f"{elsewhere} 'a' model: b"
    assert "--set resume" not in command and "checkpoint-2500" not in command
    assert "went on from `checkpoint-2500`" in card

    fresh = model_card_text(
        load_recipe(tmp_path / "r.yaml", overrides[:2]), {"global_step": 3000}, adapter=False
    )
    assert "went on from" not in fresh
