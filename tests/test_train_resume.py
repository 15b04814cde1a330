"""Resuming training restores the weights: a run killed after a checkpoint and
rerun ends with the same weights as one that was never interrupted, for full
fine-tuning and LoRA on every tiny model family; a checkpoint whose tensors do
not match the model is an error, never a warning."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.models.tiny import MODEL_FAMILIES
from rosetrain.train.recipe import load_recipe

ROOT = Path(__file__).resolve().parent.parent
STEPS, SAVE_EVERY = 4, 2
# Trains a recipe and SIGKILLs itself at a training event: nothing after it reaches the disk.
KILLED_RUN = """
import os, signal, sys
from transformers import TrainerCallback
from rosetrain.train.build import build
from rosetrain.train.check import check
from rosetrain.train.recipe import load_recipe
from rosetrain.train.run import run

event, step = sys.argv[2], int(sys.argv[3])

class Kill(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if event == "step_end" and state.global_step == step:
            os.kill(os.getpid(), signal.SIGKILL)

    def on_save(self, args, state, control, **kwargs):
        if event == "save" and state.global_step == step:
            os.kill(os.getpid(), signal.SIGKILL)

recipe = load_recipe(sys.argv[1])
built = build(check(recipe))
built.trainer.add_callback(Kill())
run(built)
"""


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory, train_split, tiny_train_spec) -> Path:
    return train_split(tmp_path_factory.mktemp("resume-data"), tiny_train_spec("t-resume"), scenes=4)


@pytest.fixture(scope="module")
def family_models(tmp_path_factory, tiny_model_dir) -> dict[str, Path]:
    """One tiny model per family rosetrain ships (the session's Qwen2-VL reused)."""
    from rosetrain.models.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("resume-models")
    return {
        family: tiny_model_dir if family == "qwen2-vl" else build_tiny_model(root / family, family=family)
        for family in MODEL_FAMILIES
    }


def write_recipe(folder: Path, model: Path, data: Path, lora: bool) -> Path:
    recipe = {
        "method": "sft",
        "model": str(model),
        "output_dir": str(folder / "run"),
        "data": {"folder": str(data)},
        "max_steps": STEPS,
        "save_steps": SAVE_EVERY,
        "per_device_train_batch_size": 2,
        "learning_rate": 1e-2,
        "logging_steps": 1,
        "lora": {"r": 4, "alpha": 8, "dropout": 0.0} if lora else None,
        "cpu_threads": 1,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "r.yaml").write_text(yaml.safe_dump(recipe))
    return folder / "r.yaml"


def final_weights(recipe_path: Path) -> dict:
    from safetensors.torch import load_file

    final = Path(load_recipe(recipe_path).output_dir) / "checkpoint-final"
    files = [final / "model.safetensors", final / "adapter_model.safetensors"]
    return load_file(next(f for f in files if f.is_file()))


def assert_same_weights(a: dict, b: dict) -> None:
    import torch

    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6, rtol=0), name


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data_folder):
    """Final weights of a run never interrupted, per (model, lora): made once."""
    from rosetrain.train import train

    made: dict[tuple[Path, bool], dict] = {}

    def weights(model: Path, lora: bool) -> dict:
        if (model, lora) not in made:
            recipe = write_recipe(tmp_path_factory.mktemp("uninterrupted"), model, data_folder, lora)
            train(load_recipe(recipe))
            made[model, lora] = final_weights(recipe)
        return made[model, lora]

    return weights


def start_killed_run(recipe: Path, event: str, step: int) -> subprocess.Popen:
    # TMPDIR: the temp folders a library makes at import (wandb, under TRL) stay after a SIGKILL
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(recipe.parent)}
    return subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(recipe), event, str(step)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigkilled_full_finetuning_resumes_to_the_uninterrupted_weights(
    tmp_path, data_folder, tiny_model_dir, uninterrupted, caplog
):
    """The issue's case: full SFT of Qwen2-VL killed after a checkpoint (as soon as it
    is written, and a step later), then rerun with the same command."""
    kill_points = {"after-save": ("save", SAVE_EVERY), "mid-step": ("step_end", SAVE_EVERY + 1)}
    recipes = {
        name: write_recipe(tmp_path / name, tiny_model_dir, data_folder, lora=False) for name in kill_points
    }
    runs = {name: start_killed_run(recipes[name], *point) for name, point in kill_points.items()}
    for proc in runs.values():  # the two run side by side: one wait for both
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, err[-2000:]

    for name, recipe in recipes.items():
        run = Path(load_recipe(recipe).output_dir)
        assert (run / f"checkpoint-{SAVE_EVERY}" / "trainer_state.json").is_file(), name
        assert not (run / "checkpoint-final").exists(), name
        caplog.clear()
        assert cli_main(["train", "sft", "--recipe", str(recipe)]) == 0
        assert f"resuming from {run / f'checkpoint-{SAVE_EVERY}'}" in caplog.text
        assert_same_weights(final_weights(recipe), uninterrupted(tiny_model_dir, False))


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("family", MODEL_FAMILIES)
def test_interrupted_training_resumes_to_the_uninterrupted_weights(
    tmp_path, data_folder, family_models, uninterrupted, family, lora
):
    from transformers import TrainerCallback

    from rosetrain.train import train
    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.run import run

    class Interrupt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == SAVE_EVERY + 1:
                raise KeyboardInterrupt

    recipe_path = write_recipe(tmp_path / "interrupted", family_models[family], data_folder, lora)
    recipe = load_recipe(recipe_path)
    built = build(check(recipe))
    built.trainer.add_callback(Interrupt())
    with pytest.raises(KeyboardInterrupt):
        run(built)
    assert train(recipe)["global_step"] == STEPS
    assert_same_weights(final_weights(recipe_path), uninterrupted(family_models[family], lora))


# ----------------------------------------------------------------- mismatched checkpoints


def _saved_model(tmp_path: Path, model_dir: Path):
    from rosetrain.models.loading import load_model_and_processor

    model, _ = load_model_and_processor(model_dir)
    checkpoint = tmp_path / "checkpoint-2"
    model.save_pretrained(checkpoint)
    return model, checkpoint


def test_a_checkpoint_restores_every_tensor_through_the_saved_names(tmp_path, tiny_model_dir):
    import torch

    from rosetrain.train.checkpoints import load_weights

    model, checkpoint = _saved_model(tmp_path, tiny_model_dir)
    saved = {n: p.detach().clone() for n, p in model.named_parameters()}
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    load_weights(model, checkpoint)
    assert_same_weights(dict(model.named_parameters()), saved)


def test_a_checkpoint_with_other_keys_is_an_error_naming_them(tmp_path, tiny_model_dir):
    from safetensors.torch import load_file, save_file

    from rosetrain.train.checkpoints import load_weights

    model, checkpoint = _saved_model(tmp_path, tiny_model_dir)
    weights = load_file(checkpoint / "model.safetensors")
    first = sorted(weights)[0]
    weights["renamed." + first] = weights.pop(first)
    save_file(weights, checkpoint / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        RosetrainError,
        match=rf"checkpoint-2 does not match .*1 of the model's \d+ tensors "
        rf"are missing \(e.g. {first}\); 1 saved tensors are not in the model",
    ):
        load_weights(model, checkpoint)
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(RosetrainError, match="has no model.safetensors"):
        load_weights(model, checkpoint)


def test_a_full_checkpoint_cannot_resume_a_lora_run(tmp_path, tiny_model_dir):
    from peft import LoraConfig, get_peft_model

    from rosetrain.train.checkpoints import load_weights

    model, checkpoint = _saved_model(tmp_path, tiny_model_dir)
    lora = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))
    with pytest.raises(RosetrainError, match="has no adapter_model.safetensors: it is not a LoRA checkpoint"):
        load_weights(lora, checkpoint)


def test_a_checkpoint_cut_short_by_a_kill_is_skipped(tmp_path, data_folder, tiny_model_dir):
    from rosetrain.train.resume import check_resumable, last_checkpoint

    run = tmp_path / "run"
    for step, state in ((2, "{}"), (4, '{"global_step": 4, "log_hi')):  # killed while writing step 4
        (run / f"checkpoint-{step}").mkdir(parents=True)
        (run / f"checkpoint-{step}" / "trainer_state.json").write_text(state)
    assert last_checkpoint(run) == str(run / "checkpoint-2")
    recipe = load_recipe(
        write_recipe(tmp_path, tiny_model_dir, data_folder, lora=False), [f"resume={run / 'checkpoint-4'}"]
    )
    with pytest.raises(RosetrainError, match="resume: .*checkpoint-4 is not a complete training checkpoint"):
        check_resumable(recipe)


def test_auto_resume_refuses_a_checkpoint_without_the_recipe_record(tmp_path, data_folder, tiny_model_dir):
    from rosetrain.core.io import claim_outputs, output_lock
    from rosetrain.train.resume import RECIPE_RECORD, check_resumable, record_recipe

    run = tmp_path / "run"
    with output_lock(run):  # a checkpoint a run wrote: named in output_dir's marker, with its state
        claim_outputs(run / "checkpoint-2")
    (run / "checkpoint-2").mkdir(parents=True)
    for name, text in (("trainer_state.json", "{}"), ("optimizer.pt", ""), ("scheduler.pt", "")):
        (run / "checkpoint-2" / name).write_text(text)
    recipe_path = write_recipe(tmp_path, tiny_model_dir, data_folder, lora=False)
    recipe = load_recipe(recipe_path, [f"output_dir={run}"])
    with pytest.raises(RosetrainError, match=rf"holds checkpoint-2 but no {RECIPE_RECORD}.*resume: never"):
        check_resumable(recipe)
    record_recipe(recipe)  # the record of this same recipe: resuming is allowed
    check_resumable(recipe)
    # a record written before a key existed (rewards.thinking, grpo.thinking) is the same
    # recipe while the key is unused, another once it is used
    record = yaml.safe_load((run / RECIPE_RECORD).read_text())
    del record["rewards"]["thinking"], record["grpo"]["thinking"]
    (run / RECIPE_RECORD).write_text(yaml.safe_dump(record))
    check_resumable(recipe)
    with pytest.raises(RosetrainError, match="another recipe .*rewards"):
        check_resumable(load_recipe(recipe_path, [f"output_dir={run}", "rewards.soft=0.5"]))
    # a checkpoint named explicitly needs no record
    check_resumable(
        load_recipe(recipe_path, [f"output_dir={tmp_path / 'other'}", f"resume={run / 'checkpoint-2'}"])
    )
