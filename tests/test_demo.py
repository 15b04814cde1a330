"""The demo's orchestration on the tiny model with a handful of steps: every
stage runs through the real generate/train/eval/compare code, the report and
summary are written, a rerun resumes, and the same seed gives the same summary."""

import json
import shutil
from pathlib import Path

import pytest

from rosetrain.demo.pipeline import DemoConfig, run_demo

pytestmark = pytest.mark.slow


def small_config(out, base):
    return DemoConfig(
        out=out,
        base=base,
        sft_steps=2,
        grpo_steps=2,
        signal_prompts=6,
        heldout_scenes=3,
        palette_scenes=2,
        family_scenes=2,
        eval_batch_size=8,
        max_new_tokens=12,
        cores=1,
        progress=False,
        grpo_recipe=plain_grpo_recipe(Path(out).parent),
    )


def plain_grpo_recipe(folder):
    """The demo's GRPO recipe without frontier prompts: an untrained tiny model
    has no frontier, and the filter would sample 128 prompts before stepping
    aside (tests/test_frontier.py covers that)."""
    from rosetrain.demo.pipeline import RECIPES

    path = Path(folder) / "demo-grpo-plain.yaml"
    if not path.exists():
        path.write_text((RECIPES / "demo-grpo.yaml").read_text().replace("frontier: true", "frontier: false"))
    return path


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    from rosetrain.models.tiny import build_tiny_model

    # the demo's own family (Qwen3-VL), at the tests' size
    base = build_tiny_model(tmp_path_factory.mktemp("base") / "tiny-qwen3", size="tiny", family="qwen3-vl")
    out = tmp_path_factory.mktemp("demo") / "run"
    return out, run_demo(small_config(out, base))


def test_summary_and_report(demo_run):
    out, _ = demo_run
    on_disk = json.loads((out / "summary.json").read_text())
    assert set(on_disk["stages"]) == {"base", "sft", "grpo"}
    for stage in on_disk["stages"].values():
        assert {"counting_avg", "action_avg", "gap", "avg_pass", "templates"} <= set(stage)
    assert {"ci95", "delta", "before", "after"} <= set(on_disk["compare"]["action_avg"])
    assert set(on_disk["targets"]) == {
        "base_gap",
        "action_gain",
        "gap_ratio",
        "counting_drop",
        "action_over_majority",
        "templates_over_majority",
    }
    report = (out / "report.md").read_text()
    assert "a visual family no training stage shows" in report and "Did GRPO help?" in report
    assert "Targets" in report and "What one run can and cannot show" in report
    assert (out / "stages.png").stat().st_size > 1000
    assert on_disk["heldout_family"]["base"]["n"] > 0
    # transfer leads the report: each held-out split's line, its majority level and targets
    assert report.index("## Transfer") < report.index("## In distribution")
    assert set(on_disk["transfer_targets"]) == {"heldout-palette", "heldout-family"}
    for split in ("heldout-palette", "heldout-family"):
        assert set(on_disk["transfer_targets"][split]) == {
            "action_over_majority",
            "gap_ratio",
            "counting_drop",
        }
        assert f"| {split} | " in report
    assert on_disk["heldout_palette"]["base"]["n"] > 0 and "never shows a hue in [50, 150]" in report


def test_signal_check_runs_before_grpo_and_is_reported(demo_run):
    """The pre-RL signal check samples the SFT model on the GRPO stage's own
    prompts with the GRPO recipe's k, and its figures reach the summary, the
    report and the table printed at the end."""
    from rosetrain.core.io import read_jsonl
    from rosetrain.demo.report import final_table
    from rosetrain.generators.scene import derived_seed

    out, summary = demo_run
    signal = json.loads((out / "summary.json").read_text())["signal"]
    assert signal == json.loads((out / "signal" / "signal.json").read_text())
    assert signal["k"] == 8 and signal["all"]["n"] == 6  # the recipe's num_generations, signal_prompts
    assert {"pass@1", "pass@8", "no_signal", "rescue"} <= set(signal["all"])
    assert sum(f["n"] for f in signal["templates"].values()) == 6
    assert signal["settings"]["model"] == summary["config"]["out"] + "/sft/checkpoint-final"
    # the first scenes of the GRPO stage's stream: the design's rl spec, the stage's data seed
    sampled = list(read_jsonl(out / "data" / "grpo-sample" / "metadata_train.jsonl"))
    assert {r["dataset_version"] for r in sampled} == {"rosetrain:demo-rl-transfer"}  # the design's
    assert all(r["item_seed"] == derived_seed("demo-rl-transfer", 0 + 2, r["scene_index"]) for r in sampled)
    stages = json.loads((out / "stages" / "signal.json").read_text())
    assert stages["settings"]["signal_prompts"] == 6
    report = (out / "report.md").read_text()
    block = report[report.index("## Before GRPO: signal check") : report.index("## Did GRPO help?")]
    assert "| all | 6 |" in block and "no signal" in block and signal["prediction"] in block
    table = "\n".join(final_table(summary, out / "report.md"))
    assert "signal check before GRPO: 6 GRPO prompts, k = 8: pass@1" in table


def test_rerun_resumes_from_finished_stages(demo_run, capsys):
    out, summary = demo_run
    again = run_demo(small_config(out, summary["config"]["base"]))
    log = capsys.readouterr().out
    assert log.count("done in an earlier run") == 8
    assert "signal: done in an earlier run" in log
    assert again["stages"] == summary["stages"] and again["signal"] == summary["signal"]


def test_interrupted_stage_reruns_and_same_seed_same_summary(demo_run, tmp_path):
    out, summary = demo_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    for stage in ("eval-grpo", "compare"):  # as if interrupted during GRPO's evaluation
        (copy / "stages" / f"{stage}.json").unlink()
    shutil.rmtree(copy / "eval" / "grpo-heldout")
    again = run_demo(small_config(copy, summary["config"]["base"]))
    assert without_paths(again["stages"]) == without_paths(summary["stages"])
    assert again["compare"]["action_avg"] == summary["compare"]["action_avg"]


def test_rerun_with_other_settings_is_refused_not_relabelled(demo_run):
    """A seed-0 run's results must never come back labelled with another seed."""
    from rosetrain.core.errors import RosetrainError

    out, summary = demo_run
    other_seed = small_config(out, summary["config"]["base"])
    other_seed.seed = 7
    with pytest.raises(RosetrainError, match="seed=0.*seed=7"):
        run_demo(other_seed)
    more_steps = small_config(out, summary["config"]["base"])
    more_steps.sft_steps = 3
    with pytest.raises(RosetrainError, match="sft_steps"):
        run_demo(more_steps)
    bigger_signal = small_config(out, summary["config"]["base"])
    bigger_signal.signal_prompts = 7
    with pytest.raises(RosetrainError, match="signal_prompts=6.*signal_prompts=7"):
        run_demo(bigger_signal)
    assert json.loads((out / "summary.json").read_text())["seed"] == 0


def test_sweep_report_counts_seeds_and_spread(demo_run, tmp_path):
    from rosetrain.demo.sweep import parse_seeds, summarize_sweep, sweep_report

    assert parse_seeds("0-2,5,1") == [0, 1, 2, 5]
    _, summary = demo_run
    other = json.loads(json.dumps(summary))
    other["seed"] = 1
    for target in other["targets"].values():
        target["met"] = True
    sweep = summarize_sweep([summary, other])
    assert sweep["all_targets_met"] == 1 + all(t["met"] for t in summary["targets"].values())
    assert sweep["spread"]["final_action"]["sd"] == 0.0
    report = sweep_report(sweep)
    assert "Out of distribution" in report and "| 1 |" in report


def test_the_command_line_names_the_option_a_library_error_is_about(tmp_path, capsys):
    """parse_seeds speaks of its argument; the CLI adds the flag that sets it."""
    from rosetrain.cli import main

    assert main(["demo", "--seeds", "4-0", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "rosetrain demo: error: seeds: expected e.g. 0-4 or 0,2,7 (seeds 0 to 4294967293), got '4-0' (option --seeds)"
    )


def test_bad_seed_lists_and_scene_counts_are_errors(tmp_path):
    from rosetrain.core.errors import RosetrainError
    from rosetrain.demo.sweep import parse_seeds

    for bad in ("4-0", "a", "-1", "", "4294967294", "0-99999999999", "0-500,1000-1500"):
        with pytest.raises(RosetrainError, match="^seeds: "):
            parse_seeds(bad)  # a huge range is refused before its list is built (it hung)
    with pytest.raises(RosetrainError, match="^heldout_scenes: "):
        DemoConfig(out=tmp_path, heldout_scenes=0)


def test_demo_files_are_package_data():
    """Specs, recipes and base ship inside the package, so an installed
    rosetrain runs the demo from any directory."""
    import tomllib
    from pathlib import Path

    import rosetrain
    from rosetrain.demo import pipeline as demo

    package = Path(rosetrain.__file__).resolve().parent
    used = [
        demo.GENERATORS / f"{n}.yaml"
        for n in ("base", "base-palettes", "train", "rl", "heldout", "heldout-palette", "heldout-family")
    ]
    used += [
        demo.RECIPES / f"{n}.yaml"
        for n in ("demo-base-sft", "demo-base-sft-palettes", "demo-sft", "demo-grpo")
    ]
    used += [demo.ASSET_BASE / "config.json"]
    data = tomllib.loads((package.parent / "pyproject.toml").read_text())
    assert "assets/**/*" in data["tool"]["setuptools"]["package-data"]["rosetrain"]
    for path in used:
        assert path.is_file() and path.resolve().is_relative_to(package / "assets"), path


@pytest.mark.parametrize(
    "spec_file, mixed",
    [
        ("train.yaml", {"mixture": 1.0}),
        ("transfer.yaml", {"varied": 0.6, "perceive": 0.2, "replay-fixed": 0.2}),
    ],
)
def test_cell_addressing_warmup_comes_first(spec_file, mixed):
    """Each design's SFT spec: a warm-up of single-exception click tasks on the
    demo's palette, then its mixture (transfer: varied palettes, every-palette
    counting and the demo's palette replayed, by weight)."""
    import random

    from rosetrain.demo.pipeline import GENERATORS
    from rosetrain.generators.scene import choose_level
    from rosetrain.generators.spec import load_spec, spec_from_dict

    spec = load_spec(GENERATORS / spec_file)
    cells = spec.levels[0]
    assert [lv.name for lv in spec.warmup_levels] == ["cells"]
    assert set(cells.tasks) == {"T1B_CLICK_GLOBAL", "T3_CLICK_LOCAL_NUMERIC", "T4_CLICK_VISUAL_REGION"}
    assert cells.exceptions == (1, 1)
    assert cells.families["attribute"].config["hue_range"] == [170, 200]
    rng = random.Random(0)
    assert choose_level(spec, cells.scenes - 1, rng).name == "cells"
    drawn = [choose_level(spec, cells.scenes + i, rng).name for i in range(1000)]
    assert set(drawn) == set(mixed)
    for name, share in mixed.items():
        assert abs(drawn.count(name) / len(drawn) - share) < 0.05, name
    level = {"families": ["attribute"], "rows": [3, 3], "cols": [3, 3], "exceptions": [1, 1]}
    with pytest.raises(ValueError, match="warm-up"):
        spec_from_dict({"levels": [{**level, "name": "a"}, {**level, "name": "b", "scenes": 5}]})


def test_designs_pick_their_base_recipe_and_specs(tmp_path):
    from rosetrain.core.errors import RosetrainError
    from rosetrain.demo import pipeline as demo

    palette, transfer = (demo.DemoConfig(out=tmp_path, design=d) for d in ("palette", "transfer"))
    assert palette.base == demo.ASSET_BASE and transfer.base == demo.ASSET_BASE_PALETTES
    assert (
        transfer.sft_recipe.name == "demo-sft-transfer.yaml" and transfer.plan.rl_spec == "rl-transfer.yaml"
    )
    assert demo.DemoConfig(out=tmp_path, design="transfer", base=tmp_path).base == tmp_path
    # the design is part of the SFT stage's settings: a rerun with the other is refused
    assert demo.stage_settings(palette)["sft"] != demo.stage_settings(transfer)["sft"]
    with pytest.raises(RosetrainError, match="design: expected one of palette, transfer"):
        demo.DemoConfig(out=tmp_path, design="colour")


def test_the_transfer_design_thinks_first_and_has_the_tokens_to(tmp_path):
    from rosetrain.core.reasoning import reasoned_answer
    from rosetrain.demo import pipeline as demo
    from rosetrain.train.recipe import load_recipe

    config = demo.DemoConfig(out=tmp_path)
    sft = load_recipe(config.sft_recipe, [f"output_dir={tmp_path}"])
    grpo = load_recipe(config.grpo_recipe, [f"output_dir={tmp_path}"])
    assert (
        sft.data.reasoning == "cells"
        and load_recipe(demo.DESIGNS["palette"].sft_recipe).data.reasoning is None
    )
    # the longest completion the demo's specs allow: their most exception cells, all
    # in a region of the whole grid, all clicked
    from transformers import AutoTokenizer

    from rosetrain.generators.spec import load_spec

    levels = [
        lv
        for name in (
            "transfer.yaml",
            "rl-transfer.yaml",
            "heldout.yaml",
            "heldout-palette.yaml",
            "heldout-family.yaml",
        )
        for lv in load_spec(demo.GENERATORS / name).levels
    ]
    rows, cols, most = (max(getattr(lv, k)[-1] for lv in levels) for k in ("rows", "cols", "exceptions"))
    odd = [f"R{r},C{c}" for r in range(1, rows + 1) for c in range(1, cols + 1)][:most]
    row = {
        "all_target_cells": odd,
        "region_target_cells": odd,
        "region_type": "ROW_RANGE",
        "region_params": {"r1": 1, "r2": rows},
        "rows": rows,
        "cols": cols,
        "answer": "".join(f"CLICK({c}); " for c in odd) + "DONE",
    }
    tokenizer = AutoTokenizer.from_pretrained(config.base)
    tokens = len(tokenizer(reasoned_answer("cells", row))["input_ids"]) + 1  # and the end of turn
    assert config.max_new_tokens >= tokens and grpo.grpo.max_completion_length >= tokens


@pytest.mark.parametrize("progress", [True, False])
def test_quiet_demo_trains_without_the_trainers_bar(tmp_path, monkeypatch, progress):
    from rosetrain.demo import pipeline as demo

    seen = {}
    monkeypatch.setattr(
        demo, "train_recipe", lambda recipe, overrides, cores: seen.setdefault("o", overrides)
    )
    config = demo.DemoConfig(out=tmp_path, progress=progress)
    demo.train_stage(config, config.sft_recipe, config.base, tmp_path / "sft", None, 1, "transfer.yaml")
    assert ("trl.disable_tqdm=true" in seen["o"]) is not progress


def test_rebuild_base_never_replaces_a_folder_it_did_not_write(tmp_path):
    from rosetrain.core.errors import RosetrainError
    from rosetrain.demo.pipeline import rebuild_base

    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "mine.txt").write_text("keep")
    with pytest.raises(RosetrainError, match="not written by"):
        rebuild_base(tmp_path, steps=1)
    assert (tmp_path / "base" / "mine.txt").read_text() == "keep"


def test_rebuild_base_never_deletes_a_file_a_user_added_to_its_base(tmp_path):
    """A base rebuild_base wrote (its marker names each file) is replaced whole
    by the next rebuild; with a user's file added there, it is refused first."""
    from rosetrain.core.errors import RosetrainError
    from rosetrain.core.io import mark_folder
    from rosetrain.demo.pipeline import BASE_MARKER, rebuild_base

    base = tmp_path / "base"
    base.mkdir()
    (base / BASE_MARKER).write_text("{}")
    (base / "config.json").write_text("{}")
    mark_folder(base)
    (base / "notes.txt").write_text("the user's")
    with pytest.raises(RosetrainError, match="notes.txt, which rosetrain did not write"):
        rebuild_base(tmp_path, steps=1, design="palette")
    assert (base / "notes.txt").read_text() == "the user's"


def without_paths(stages):
    """Stage summaries less the files they name (a copied run names its own)."""
    return {
        name: {k: v for k, v in stage.items() if k not in ("predictions_jsonl", "metadata_jsonl", "data")}
        for name, stage in stages.items()
    }


def test_missing_base_is_a_clear_error(tmp_path):
    from rosetrain.core.errors import RosetrainError

    with pytest.raises(RosetrainError, match="build it with rebuild_base") as err:
        run_demo(DemoConfig(out=tmp_path / "o", base=tmp_path / "nothing"))
    assert err.value.argument == "rebuild_base"  # the command line names --rebuild-base


def test_shipped_base_perceives_but_does_not_act(tmp_path):
    """The shipped base is what the demo's story rests on: on new scenes of the
    demo's held-out spec it counts the whole grid right, and asked to click it
    still answers with a count (it was never taught to act)."""
    from rosetrain.data.generate import make_job, run_job
    from rosetrain.demo.pipeline import ASSET_BASE, GENERATORS
    from rosetrain.evaluation.evaluate import evaluate
    from rosetrain.generators.spec import load_spec

    job = make_job(
        load_spec(GENERATORS / "heldout.yaml"), tmp_path / "data", "test", 12, formats=("release",)
    )
    run_job(job, progress=False)
    summary = evaluate(
        str(ASSET_BASE),
        tmp_path / "data",
        "test",
        tmp_path / "run",
        batch_size=32,
        max_new_tokens=16,
        progress=False,
    )
    assert summary["templates"]["T1_COUNT_GLOBAL"]["pass"] >= 0.9
    assert summary["action_avg"] == 0.0
    answers = [json.loads(line)["raw_text"] for line in (tmp_path / "run" / "predictions.jsonl").open()]
    assert all(a.startswith("COUNT(") for a in answers)
