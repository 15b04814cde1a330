"""The demo's orchestration on the tiny model with a handful of steps: every
stage runs through the real generate/train/eval/compare code, the report and
summary are written, a rerun resumes, and the same seed gives the same summary."""
import json
import shutil

import pytest

from rosetrain.demo import DemoConfig, run_demo

pytestmark = pytest.mark.slow


def small_config(out, base):
    return DemoConfig(out=out, base=base, sft_steps=2, grpo_steps=2, heldout_scenes=3, family_scenes=2,
                      eval_batch_size=8, max_new_tokens=12, threads=1, progress=False)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    from rosetrain.models.tiny import build_tiny_model

    # the demo's own family (Qwen3-VL), at the tests' size
    base = build_tiny_model(tmp_path_factory.mktemp("base") / "tiny-qwen3", size="tiny", family="qwen3-vl")
    out = tmp_path_factory.mktemp("demo") / "run"
    return out, run_demo(small_config(out, base))


def test_summary_and_report(demo_run):
    out, summary = demo_run
    on_disk = json.loads((out / "summary.json").read_text())
    assert set(on_disk["stages"]) == {"base", "sft", "grpo"}
    for stage in on_disk["stages"].values():
        assert {"counting_avg", "action_avg", "gap", "avg_pass", "templates"} <= set(stage)
    assert {"ci95", "delta", "before", "after"} <= set(on_disk["compare"]["action_avg"])
    assert set(on_disk["targets"]) == {"base_gap", "action_gain", "gap_ratio", "counting_drop"}
    report = (out / "report.md").read_text()
    assert "held-out visual family" in report and "Did GRPO help?" in report and "Targets" in report
    assert (out / "stages.png").stat().st_size > 1000
    assert on_disk["heldout_family"]["base"]["n"] > 0


def test_rerun_resumes_from_finished_stages(demo_run, capsys):
    out, summary = demo_run
    again = run_demo(small_config(out, summary["config"]["base"]))
    log = capsys.readouterr().out
    assert log.count("done in an earlier run") == 7
    assert again["stages"] == summary["stages"]


def test_interrupted_stage_reruns_and_same_seed_same_summary(demo_run, tmp_path):
    out, summary = demo_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    for stage in ("eval-grpo", "compare"):  # as if interrupted during GRPO's evaluation
        (copy / "stages" / f"{stage}.json").unlink()
    shutil.rmtree(copy / "eval" / "grpo-heldout")
    again = run_demo(small_config(copy, summary["config"]["base"]))
    assert again["stages"] == summary["stages"]
    assert again["compare"]["action_avg"] == summary["compare"]["action_avg"]


def test_missing_base_is_a_clear_error(tmp_path):
    from rosetrain.errors import RosetrainError

    with pytest.raises(RosetrainError, match="rebuild-base"):
        run_demo(DemoConfig(out=tmp_path / "o", base=tmp_path / "nothing"))


def test_shipped_base_perceives_but_does_not_act(tmp_path):
    """The shipped base is what the demo's story rests on: on new scenes of the
    demo's held-out spec it counts the whole grid right, and asked to click it
    still answers with a count (it was never taught to act)."""
    from rosetrain.commands.evaluate import evaluate
    from rosetrain.data.generate import make_job, run_job
    from rosetrain.demo import ASSET_BASE, GENERATORS
    from rosetrain.spec import load_spec

    job = make_job(load_spec(GENERATORS / "heldout.yaml"), tmp_path / "data", "test", 12,
                   formats=("release",))
    run_job(job, progress=False)
    summary = evaluate(str(ASSET_BASE), tmp_path / "data", "test", tmp_path / "run",
                       batch_size=32, max_new_tokens=16, progress=False)
    assert summary["templates"]["T1_COUNT_GLOBAL"]["pass"] >= 0.9
    assert summary["action_avg"] == 0.0
    answers = [json.loads(line)["raw_text"] for line in (tmp_path / "run" / "predictions.jsonl").open()]
    assert all(a.startswith("COUNT(") for a in answers)
