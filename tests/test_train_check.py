"""``train --check`` rejects, before any weights load and in one line naming the
recipe key, everything the real run would reject: TRL's config, the optimizer
and schedule, bf16 without a GPU, GRPO batch shapes, the model folder or Hub id,
LoRA targets, the output folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rosetrain.cli import main as cli_main


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory, train_split, tiny_train_spec) -> Path:
    return train_split(tmp_path_factory.mktemp("check-data"), tiny_train_spec("t-check"), scenes=2)


@pytest.fixture
def recipe(tmp_path, data_folder, tiny_model_dir) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "method": "sft",
                "model": str(tiny_model_dir),
                "output_dir": str(tmp_path / "run"),
                "data": {"folder": str(data_folder)},
                "max_steps": 2,
                "per_device_train_batch_size": 2,
                "learning_rate": 1e-3,
                "lora": None,
                "cpu_threads": 1,
            }
        )
    )
    return path


def check(recipe: Path, *overrides: str, method: str = "sft") -> tuple[int, str]:
    import sys
    from io import StringIO

    err, stderr = StringIO(), sys.stderr
    sys.stderr = err
    try:
        code = cli_main(
            [
                "train",
                method,
                "--recipe",
                str(recipe),
                "--check",
                *[arg for o in overrides for arg in ("--set", o)],
            ]
        )
    finally:
        sys.stderr = stderr
    return code, err.getvalue()


def assert_one_line_error(code: int, err: str, *expected: str) -> None:
    assert code == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("rosetrain train: error:")]
    assert len(lines) == 1, err
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize(
    "override, expected",
    [
        ("learning_rate=-1", ["learning_rate: must be >= 0, got -1"]),
        ("bf16=true", ["bf16: true needs a GPU with bf16 support", "set bf16: false"]),
        ("warmup_steps=-1", ["warmup_steps: must be in [0, 1000000000], got -1"]),
        ("trl.adam_epsilon=-1", ["trl.adam_epsilon", "Invalid epsilon value"]),
        (
            "lr_scheduler_type=nope",
            ["lr_scheduler_type: SFTConfig rejects", "nope is not a valid SchedulerType"],
        ),
        ("lr_scheduler_type=cosine_with_min_lr", ["lr_scheduler_type: 'cosine_with_min_lr' cannot be built"]),
        ("trl.adam_beta1=2", ["trl.adam_beta1", "Invalid beta parameter"]),
        ("weight_decay=-0.1", ["weight_decay: must be >= 0, got -0.1"]),
        ("max_grad_norm=-1", ["max_grad_norm: must be >= 0, got -1"]),
        ("trl.fp16=true", ["trl.fp16: true needs a GPU", "the CPU trains in fp32"]),
        (
            "lora={target_modules: [no_such_module]}",
            ["lora.target_modules: 'no_such_module' matches no module"],
        ),
    ],
)
def test_settings_the_run_would_reject_fail_the_check_naming_the_key(recipe, override, expected):
    if override in ("bf16=true", "trl.fp16=true"):
        pytest.importorskip("torch")
        if __import__("torch").cuda.is_available():
            pytest.skip("this machine has a GPU")
    assert_one_line_error(*check(recipe, override), str(recipe), *expected)


def test_grpo_batch_shapes_fail_the_check(recipe):
    code, err = check(
        recipe, "method=grpo", "per_device_train_batch_size=4", "grpo.num_generations=3", method="grpo"
    )
    assert_one_line_error(
        code,
        err,
        "grpo.num_generations, per_device_train_batch_size: GRPOConfig rejects",
        "must be divisible by num_generations (3)",
    )
    code, err = check(
        recipe, "method=grpo", "per_device_train_batch_size=4", "grpo.num_generations=2", method="grpo"
    )
    assert_one_line_error(code, err, "per_device_train_batch_size (4) must equal grpo.num_generations (2)")


def test_a_folder_that_is_not_a_model_fails_the_check(recipe, tmp_path, tiny_model_dir):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(*check(recipe, f"model={empty}"), f"model: {empty} is a folder but not a model")
    (empty / "config.json").write_text((Path(tiny_model_dir) / "config.json").read_text())
    assert_one_line_error(*check(recipe, f"model={empty}"), f"model: the folder {empty} has no weights")
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        (broken / name).write_bytes((Path(tiny_model_dir) / name).read_bytes())
    (broken / "config.json").write_text("{}")
    assert_one_line_error(*check(recipe, f"model={broken}"), f"model: {broken} is not a model folder")


def test_a_hub_id_missing_from_the_cache_fails_the_check_when_offline(recipe, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    assert_one_line_error(
        *check(recipe, "model=rosetrain-tests/no-such-model"),
        "model: the Hub id rosetrain-tests/no-such-model is not in the local Hugging Face "
        "cache and the Hub cannot be reached (offline)",
    )


def test_an_output_dir_under_a_file_fails_the_check(recipe, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    assert_one_line_error(
        *check(recipe, f"output_dir={tmp_path / 'a-file' / 'run'}"),
        f"output_dir: {tmp_path / 'a-file'} is a file, not a folder",
    )


def test_the_check_passes_a_good_recipe_and_writes_nothing(recipe, tmp_path):
    assert check(recipe)[0] == 0
    assert check(recipe, "lora={}")[0] == 0  # LoRA on the language model's attention
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "case",
    [
        "corrupt-parquet",
        "data-is-a-file",
        "eval-is-a-file",
        "adapter-without-base",
        "unknown-tracker",
        "tracker-not-installed",
        "zero-steps",
        "negative-workers",
    ],
)
def test_train_input_failures_are_one_line_naming_the_key(case, recipe, tmp_path, data_folder, monkeypatch):
    import shutil

    overrides, expected = {
        "data-is-a-file": ([f"data.folder={recipe}"], f"data.folder: {recipe} is a file, not a folder"),
        "eval-is-a-file": ([f"eval.folder={recipe}"], f"eval.folder: {recipe} is a file, not a folder"),
        "unknown-tracker": (["report_to=[no_such_tracker]"], "report_to: no_such_tracker is not supported"),
        "tracker-not-installed": (["report_to=[wandb]"], "report_to: WandbCallback cannot start"),
        "zero-steps": (["max_steps=0"], "max_steps: must be > 0, or -1 to train num_train_epochs"),
        "negative-workers": (
            ["dataloader_num_workers=-1"],
            "dataloader_num_workers: must be in [0, 256], got -1",
        ),
    }.get(case, ([], ""))
    if case == "tracker-not-installed":  # wandb comes with the lmms-eval extra: make it absent here
        from transformers.integrations import integration_utils

        monkeypatch.setattr(integration_utils, "is_wandb_available", lambda: False)
    if case == "corrupt-parquet":
        broken = tmp_path / "broken"
        shutil.copytree(data_folder, broken)
        shard = sorted((broken / "hf" / "train").glob("*.parquet"))[0]
        shard.write_bytes(shard.read_bytes()[:100])  # cut short, as by a full disk
        overrides, expected = (
            [f"data.folder={broken}"],
            f"data.folder: {shard} is not a readable Parquet file",
        )
    if case == "adapter-without-base":
        adapter = tmp_path / "adapter"
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text('{"base_model_name_or_path": "/no/such/base"}')
        (adapter / "adapter_model.safetensors").write_bytes(b"")
        overrides, expected = [f"model={adapter}"], "is a LoRA adapter whose base model"
    assert_one_line_error(*check(recipe, *overrides), expected)


RECIPES = sorted((Path(__file__).resolve().parent.parent / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_shipped_recipe_checks_with_heldout_evaluation_off(path, tmp_path, tiny_model_dir, monkeypatch):
    """`--set eval.folder=null`, as the README offers, on each recipe (with the tiny
    model in place of its Hub id: nothing is downloaded here)."""
    monkeypatch.chdir(path.parent.parent)  # the recipes' data paths are relative to the repository
    method = yaml.safe_load(path.read_text())["method"]
    code, err = check(
        path, "eval.folder=null", f"model={tiny_model_dir}", f"output_dir={tmp_path / 'run'}", method=method
    )
    assert code == 0, err


def test_a_run_folder_is_its_final_model(recipe, tmp_path, tiny_model_dir):
    """model: runs/sft (a recipe's output_dir) means runs/sft/checkpoint-final, as
    TRL's output_dir holds the final model; a run stopped early names its latest checkpoint."""
    import shutil

    run = tmp_path / "sft-run"
    shutil.copytree(tiny_model_dir, run / "checkpoint-3")
    assert_one_line_error(
        *check(recipe, f"model={run}"),
        f"model: {run} is a training run without its final model (checkpoint-final)",
        f"its latest checkpoint {run / 'checkpoint-3'}",
    )
    shutil.copytree(tiny_model_dir, run / "checkpoint-final")
    code, err = check(recipe, f"model={run}")
    assert code == 0, err


def test_a_local_model_the_recipe_header_makes_is_named_with_that_command(recipe, tmp_path):
    """The recipe's own header says how to make its model: the check says that, never
    `hf download` of a folder's name."""
    text = recipe.read_text()
    model = tmp_path / "models" / "tiny"
    recipe.write_text(
        f"# rosetrain tiny-model --out {model}   # or --size small\n"
        + text.replace(
            next(line for line in text.splitlines() if line.startswith("model:")), f"model: {model}"
        )
    )
    code, err = check(recipe)
    assert_one_line_error(code, err, f"run `rosetrain tiny-model --out {model}` first")
    assert "hf download" not in err


def test_a_bare_trl_key_in_set_says_trl_key_works(recipe):
    code, err = check(recipe, "optim=adafactor")
    assert_one_line_error(
        code, err, "unknown key 'optim'", "a TRL SFTConfig field goes under trl: trl.optim=adafactor"
    )
    code, err = check(recipe, "learnig_rate=1")  # a misspelt recipe key: "did you mean", no TRL hint
    assert_one_line_error(code, err, "did you mean 'learning_rate'")
    assert "trl.learnig_rate" not in err
    code, err = check(recipe, "trl.optim=adafactor")
    assert code == 0, err


def test_a_folder_without_the_split_names_the_split_not_missing_shards(recipe):
    code, err = check(recipe, "data.split=test")
    assert_one_line_error(code, err, "data.split: ", "no split 'test'", "it has 'train': set data.split")
    assert "generate the split" not in err


def test_trl_habits_on_the_train_command_line(recipe, capsys, tmp_path):
    """--config is --recipe (TRL's scripts' name); a TRL-style --flag acts as the
    --set that does it (a recipe key, else trl.KEY, checked with the recipe);
    --resume_from_checkpoint is resume; --help lists the recipe keys."""
    from rosetrain.commands.train import rewrite_argv

    assert cli_main(["train", "sft", "--config", str(recipe), "--check"]) == 0
    capsys.readouterr()
    assert rewrite_argv(
        [
            "sft",
            "--recipe",
            "r.yaml",
            "--learning_rate",
            "1e-5",
            "--max-steps=5",
            "--bf16",
            "--optim",
            "adafactor",
        ]
    ) == [
        "sft",
        "--recipe",
        "r.yaml",
        "--set",
        "learning_rate=1e-5",
        "--set",
        "max_steps=5",
        "--set",
        "bf16=true",
        "--set",
        "trl.optim=adafactor",
    ]
    assert rewrite_argv(["--resume_from_checkpoint", "runs/x/checkpoint-5", "--lora.r", "8", "--check"]) == [
        "--set",
        "resume=runs/x/checkpoint-5",
        "--set",
        "lora.r=8",
        "--check",
    ]
    for argv in (["--learning_rate", "1e-5"], ["--max-steps=5"], ["--optim", "adafactor"]):
        code = cli_main(["train", "sft", "--recipe", str(recipe), *argv, "--check"])
        assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert cli_main(["train", "sft", "--recipe", str(recipe), "--optimm", "adafactor", "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trl.optimm" in err, err
    assert cli_main(["train", "sft", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    for key in ("learning_rate", "lora.{", "eval.{folder", "trl.KEY", "recipes/README.md"):
        assert key in shown, key


def test_a_trl_yaml_names_its_model_and_data_its_own_way(recipe, tmp_path, capsys):
    """model_name_or_path is model; dataset_name gets a one-line hint naming the keys that work."""
    text = yaml.safe_load(recipe.read_text())
    text["model_name_or_path"] = text.pop("model")
    trl_yaml = tmp_path / "trl.yaml"
    trl_yaml.write_text(yaml.safe_dump(text))
    assert cli_main(["train", "sft", "--config", str(trl_yaml), "--check"]) == 0
    text["dataset_name"] = "trl-lib/Capybara"
    trl_yaml.write_text(yaml.safe_dump(text))
    assert cli_main(["train", "sft", "--config", str(trl_yaml), "--check"]) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "dataset_name: rosetrain trains on its own data" in err
        and "data.spec" in err
    )


def test_data_folder_takes_a_hub_uri(recipe, data_folder, tmp_path, monkeypatch, capsys):
    """A generated split pushed to the Hub trains from the local Hub cache, as eval --data reads one."""
    from huggingface_hub import constants
    from test_hub_release import COMMIT, add_blob

    repo = tmp_path / "hub" / "datasets--me--train-split"
    for path in sorted(data_folder.rglob("*")):
        if path.is_file() and ".parts" not in path.parts:
            add_blob(repo, path.relative_to(data_folder).as_posix(), path.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    code, err = check(recipe, "data.folder=hf://datasets/me/train-split", "data.split=train")
    assert code == 0, err


def test_push_to_hub_is_checked_before_training(recipe, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    code, err = check(recipe, "trl.push_to_hub=true")
    assert_one_line_error(code, err, "trl.push_to_hub: huggingface_hub is offline")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    code, err = check(recipe, "trl.push_to_hub=true")
    assert_one_line_error(code, err, "trl.push_to_hub: no Hugging Face token")
    monkeypatch.setattr("huggingface_hub.get_token", lambda: "hf_x")
    code, err = check(recipe, "trl.push_to_hub=true", "trl.hub_model_id=a/b/c")
    assert_one_line_error(code, err, "trl.hub_model_id: 'a/b/c' is not a Hub repo id")


def test_a_shipped_recipe_runs_by_name_from_any_directory(tmp_path, monkeypatch, capsys):
    """demo-sft-transfer names its base as rosetrain/assets/...: found from anywhere."""
    monkeypatch.chdir(tmp_path)
    assert cli_main(["train", "sft", "--recipe", "demo-sft-transfer", "--check"]) == 0, (
        capsys.readouterr().err
    )
    assert "demo-base-palettes" in capsys.readouterr().out
