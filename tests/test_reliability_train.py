"""Training's output_dir: a foreign checkpoint is never resumed from, written into
or deleted; a rerun of a finished run changes nothing; a resume without the
optimizer state, or from a damaged checkpoint, is refused in one line. Every
destructive path here works inside tmp_path."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from rosetrain.cli import main as cli_main


@pytest.fixture(scope="module")
def data_folder(tmp_path_factory, train_split, tiny_train_spec) -> Path:
    return train_split(tmp_path_factory.mktemp("own-data"), tiny_train_spec(name="t-own"), 4)


def write_recipe(folder: Path, model: Path, data: Path, **changes) -> Path:
    recipe = {
        "method": "sft",
        "model": str(model),
        "output_dir": str(folder / "run"),
        "data": {"folder": str(data)},
        "max_steps": 2,
        "save_steps": 1,
        "per_device_train_batch_size": 2,
        "learning_rate": 1e-2,
        "logging_steps": 1,
        "lora": None,
        "cpu_threads": 1,
        **changes,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "r.yaml").write_text(yaml.safe_dump(recipe))
    return folder / "r.yaml"


def tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def train(recipe: Path, *sets: str) -> int:
    return cli_main(["train", "sft", "--recipe", str(recipe), *(f"--set={s}" for s in sets)])


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_model_dir, data_folder) -> Path:
    """A finished 2-step run (checkpoints 1 and 2, checkpoint-final): made once, copied by each test."""
    folder = tmp_path_factory.mktemp("own-finished")
    assert train(write_recipe(folder, tiny_model_dir, data_folder)) == 0
    return folder


def copy_of(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished, tmp_path / "f")
    recipe = yaml.safe_load((tmp_path / "f" / "r.yaml").read_text())
    recipe["output_dir"] = str(tmp_path / "f" / "run")
    (tmp_path / "f" / "r.yaml").write_text(yaml.safe_dump(recipe))
    return tmp_path / "f"


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("rosetrain")]  # not progress bars
    assert "Traceback" not in err and len(errors) == 1, err
    return errors[0]


def test_a_foreign_checkpoint_in_output_dir_is_refused_and_kept(
    tmp_path, tiny_model_dir, data_folder, capsys
):
    recipe = write_recipe(tmp_path, tiny_model_dir, data_folder, save_total_limit=1, resume="never")
    mine = tmp_path / "run" / "checkpoint-1"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my experiment")
    before = tree(tmp_path / "run")
    assert train(recipe) == 2
    err = one_error_line(capsys)
    assert "checkpoint-1" in err and "rosetrain did not write" in err
    assert tree(tmp_path / "run") == before


@pytest.mark.slow
def test_a_rerun_of_a_finished_run_changes_nothing(finished, tmp_path, capsys):
    folder = copy_of(finished, tmp_path)
    final = tree(folder / "run" / "checkpoint-final")
    assert train(folder / "r.yaml") == 0
    assert tree(folder / "run" / "checkpoint-final") == final
    assert sorted(p.name for p in (folder / "run").glob("checkpoint-*")) == [
        "checkpoint-1",
        "checkpoint-2",
        "checkpoint-final",
    ]


@pytest.mark.slow
def test_resume_without_the_optimizer_state_is_refused_unless_named(finished, tmp_path, capsys):
    folder = copy_of(finished, tmp_path)
    (folder / "run" / "checkpoint-2" / "optimizer.pt").unlink()
    assert train(folder / "r.yaml", "max_steps=3") == 2
    err = one_error_line(capsys)
    assert "checkpoint-2 has no optimizer.pt" in err and "resume:" in err
    named = folder / "run" / "checkpoint-2"
    assert train(folder / "r.yaml", "max_steps=3", f"resume={named}") == 0  # explicitly: from its weights


@pytest.mark.slow
@pytest.mark.parametrize("damaged", ["model.safetensors", "optimizer.pt"])
def test_a_damaged_checkpoint_is_one_line(finished, tmp_path, capsys, damaged):
    folder = copy_of(finished, tmp_path)
    path = folder / "run" / "checkpoint-2" / damaged
    path.write_bytes(path.read_bytes()[:100])
    assert train(folder / "r.yaml", "max_steps=3") == 2
    err = one_error_line(capsys)
    assert damaged in err and "damaged" in err
