"""A demo rerun with other --cores is refused, never reported under the new setting."""

from __future__ import annotations

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.demo.pipeline import DemoConfig, Stages, stage_settings


def test_a_rerun_with_other_cores_is_refused(tmp_path, tiny_model_dir):
    first, second = (DemoConfig(out=tmp_path, base=tiny_model_dir, cores=c) for c in (1, 2))
    assert stage_settings(first)["data"] == stage_settings(second)["data"]  # the data does not depend on it
    stages = Stages(first.stages_dir)
    stages.run("eval-base", "evaluating", stage_settings(first)["eval-base"], lambda: {"avg": 0.5})
    with pytest.raises(RosetrainError, match="cores=1.*cores=2.*not relabelled"):
        Stages(second.stages_dir).run(
            "eval-base", "evaluating", stage_settings(second)["eval-base"], lambda: {"avg": 0.7}
        )


def test_demo_base_takes_a_training_run_folder_as_eval_and_train_do(tmp_path, tiny_model_dir):
    import shutil

    from rosetrain.demo.pipeline import check_base

    run = tmp_path / "base-run"
    shutil.copytree(tiny_model_dir, run / "checkpoint-3")
    with pytest.raises(RosetrainError, match="is a training run without its final model"):
        check_base(run)
    shutil.copytree(tiny_model_dir, run / "checkpoint-final")
    assert check_base(run) == run / "checkpoint-final"
    assert check_base(tiny_model_dir) == tiny_model_dir
    with pytest.raises(RosetrainError, match="demo base model not found"):
        check_base(tmp_path / "missing")
