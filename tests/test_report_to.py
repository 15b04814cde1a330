"""The held-out metrics logged during training reach the trackers of `report_to`:
TensorBoard, read back from its event files (offline, no server)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rosetrain.cli import main as cli_main


def scalars(log_root: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in every event file under ``log_root``: tag -> [(step, value)]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(log_root.rglob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            found.setdefault(tag, []).extend((e.step, e.value) for e in accumulator.Scalars(tag))
    return found


@pytest.mark.slow
def test_heldout_metrics_reach_tensorboard(
    tmp_path, tiny_model_dir, tiny_train_spec, write_spec, release_split
):
    pytest.importorskip("tensorboard")  # in the test extra; CI installs it
    write_spec(tmp_path, tiny_train_spec("tb-train"))
    held = tiny_train_spec("tb-held").replace("role: train", "role: eval").replace("seed: 1", "seed: 2")
    release_split(write_spec(tmp_path, held, "held.yaml"), tmp_path / "heldout", scenes=1)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "method": "sft",
                "model": str(tiny_model_dir),
                "output_dir": str(tmp_path / "run"),
                "data": {"spec": str(tmp_path / "spec.yaml"), "shuffle_buffer": 0},
                "eval": {
                    "folder": str(tmp_path / "heldout"),
                    "every_steps": 1,
                    "items": 4,
                    "max_new_tokens": 8,
                },
                "max_steps": 2,
                "per_device_train_batch_size": 2,
                "learning_rate": 1e-3,
                "logging_steps": 1,
                "save_steps": 100,
                "lora": None,
                "cpu_threads": 1,
                "report_to": ["tensorboard"],
            }
        )
    )
    assert cli_main(["train", "sft", "--recipe", str(recipe)]) == 0

    logged = scalars(tmp_path / "run")
    # the held-out figures sit under eval/, beside the trainer's own eval/loss
    for name in ("avg_pass", "counting_avg", "gap", "pass/G-Cnt"):
        assert [step for step, _ in logged[f"eval/{name}"]] == [1, 2], name
    assert all(0 <= value <= 1 for _, value in logged["eval/avg_pass"])
    # the steps that evaluated still log their training loss (logging_steps: 1)
    assert [step for step, _ in logged["train/loss"]] == [1, 2]
