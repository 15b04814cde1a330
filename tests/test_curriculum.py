"""rosetrain curriculum: weights from measured failures, the spec it writes,
what it reports it cannot teach; rosetrain signal's figures on known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from scored_runs import row, write_run

from rosetrain.cli import main
from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import T1, T1B, T2, T3, T4, T5
from rosetrain.curriculum import make_curriculum
from rosetrain.curriculum.build import fit_draw_weights, realised_shares, untaught_summary
from rosetrain.curriculum.cells import family_of, item_of
from rosetrain.curriculum.signal import grade, signal_check, summarize
from rosetrain.curriculum.weights import Rule, axis_shares
from rosetrain.generators.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
ROSE_V01 = ROOT / "tests" / "data" / "rose-v0.1"

# (cells: value -> (items, failed), rule options, expected shares), worked by hand:
# raw weight = (failed + prior) / (items + 2 prior); shares held in [floor/K, cap/K];
# an unmeasured cell keeps its source share (here uniform, 1/K), never above a failed cell.
WEIGHT_TABLE = [
    pytest.param(
        # C keeps 1/4; A, B, D share 3/4 by 11/12 : 1/12 : 1/2: B's 1/24 is under the floor,
        # B = 1/8, and D gets 5/8 * 6/17 = 0.22 < C's 1/4. So C is held to D's share c:
        # A + D = 7/8 - c by 11 : 6, D = c -> c = (7/8) 6/23, A = (7/8) 11/23
        {"A": (10, 10), "B": (10, 0), "C": (0, 0), "D": (2, 1)},
        {},
        {"A": 0.875 * 11 / 23, "B": 0.125, "C": 0.875 * 6 / 23, "D": 0.875 * 6 / 23},
        id="floor lifts a learned cell; C unmeasured: held to the failed D's share",
    ),
    pytest.param(
        # B unmeasured keeps its source 1/2; A, which failed nothing, does not hold it down
        {"A": (10, 0), "B": (0, 0)},
        {"floor": 0.0},
        {"A": 0.5, "B": 0.5},
        id="an unmeasured cell keeps the source share",
    ),
    pytest.param(
        # the cap 3/7 holds for A with room for the rest: 4/7 over six cells, 2/21 each,
        # above the floor 1/14 (fixing the floor first had given A 1/2, over the cap)
        {"A": (9, 9), **{c: (9, 0) for c in "BCDEFG"}},
        {},
        {"A": 3 / 7, **{c: 2 / 21 for c in "BCDEFG"}},
        id="the cap holds for a cell failed outright",
    ),
    pytest.param(
        # cap 1.5 x 1/4 = 0.375: raw 101/102, 1/2, 1/2, 1/102; D to the floor 1/8, then A
        # (7/8 * 0.990 / 1.990 = 0.435) to the cap; B and C share the rest 1/2
        {"A": (100, 100), "B": (100, 50), "C": (100, 50), "D": (100, 0)},
        {"cap": 1.5},
        {"A": 0.375, "B": 0.25, "C": 0.25, "D": 0.125},
        id="cap holds an always-failed cell",
    ),
    pytest.param(
        # add-one: 3 of 3 failed -> 4/5, 0 of 3 -> 1/5; no floor, no binding cap
        {"A": (3, 3), "B": (3, 0)},
        {"floor": 0.0, "cap": 2.0},
        {"A": 0.8, "B": 0.2},
        id="add-one smoothing of 3-item cells",
    ),
    pytest.param(
        # prior 2: (3 + 2) / 7 and 2 / 7: a stronger prior pulls small cells to 1/2
        {"A": (3, 3), "B": (3, 0)},
        {"floor": 0.0, "cap": 2.0, "prior": 2.0},
        {"A": 5 / 7, "B": 2 / 7},
        id="a stronger prior",
    ),
    pytest.param(
        # balanced, band [0.1, 0.9] on the smoothed PASS rate: A (1/22) and C (21/22)
        # are outside -> 0 -> floor 1/8; D is unmeasured: its 1/4 is held to the failed
        # A's 1/8; B (pass 1/2) takes the other 5/8
        {"A": (20, 20), "B": (20, 10), "C": (20, 0), "D": (0, 0)},
        {"mode": "balanced"},
        {"A": 0.125, "B": 0.625, "C": 0.125, "D": 0.125},
        id="balanced mode favours what is passed sometimes",
    ),
]


@pytest.mark.parametrize("counts, options, expected", WEIGHT_TABLE)
def test_weights_follow_failures(counts, options, expected):
    shares = axis_shares(counts, Rule(**options))
    assert shares == pytest.approx(expected, abs=1e-9)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_balanced_mode_puts_always_failed_below_sometimes_passed():
    counts = {"always_failed": (40, 40), "sometimes": (40, 20), "learned": (40, 0)}
    failures = axis_shares(counts, Rule())
    balanced = axis_shares(counts, Rule(mode="balanced"))
    assert failures["always_failed"] > failures["sometimes"] > failures["learned"]
    assert balanced["sometimes"] > balanced["always_failed"] == pytest.approx(balanced["learned"])


@pytest.mark.parametrize(
    "options, flag",
    [
        ({"mode": "hard"}, "mode"),
        ({"floor": 1.5}, "floor"),
        ({"cap": 0.5}, "cap"),
        ({"band": (0.9, 0.1)}, "band"),
    ],
)
def test_bad_rule_options_are_named(options, flag):
    with pytest.raises(RosetrainError, match=f"^{flag}: ") as caught:
        Rule(**options)
    assert caught.value.argument == flag


def test_the_command_line_names_the_flag(tmp_path, capsys):
    args = ["curriculum", "--from", str(tmp_path), "--spec", "x.yaml", "--out", str(tmp_path / "n.yaml")]
    assert main([*args, "--band", "0.9", "0.1"]) == 2  # each in range, the pair is not
    assert "(option --band)" in capsys.readouterr().err


def test_template_weights_are_fitted_to_draws_without_replacement():
    # 2 of 3 templates a scene: weights equal to the target shares would realise flatter ones
    target = {"a": 0.45, "b": 0.35, "c": 0.20}
    naive = realised_shares(target, 2)
    assert abs(naive["a"] - 0.45) > 0.04
    fitted = realised_shares(fit_draw_weights(target, 2), 2)
    assert fitted == pytest.approx(target, abs=1e-4)


# -- a scored run and a spec ------------------------------------------------------

SOURCE_SPEC = """
name: source
role: train
namespace: source-train
seed: 5
rows: [3, 6]
cols: [3, 6]
cell_size: [24, 32]
exceptions: [1, 3]
negative_rate: 0.1
profiles: {tiny: 1.0}
tasks: {T1_COUNT_GLOBAL: 1, T2_COUNT_LOCAL_NUMERIC: 1, T3_CLICK_LOCAL_NUMERIC: 1, T4_CLICK_VISUAL_REGION: 1}
tasks_per_scene: 2
families:
  attribute: {subtlety: 0.0, attributes: [hue]}
"""


@pytest.fixture
def scored_run(tmp_path) -> Path:
    rows = []
    rows += [row(i, T1, True) for i in range(10)]  # counting learned
    rows += [row(10 + i, T3, False, case="zero") for i in range(10)]  # clicks failed
    rows += [row(20 + i, T2, i % 2 == 0, count=2) for i in range(10)]
    rows += [row(30 + i, T3, False, family="sprite_edit") for i in range(5)]  # not in the spec
    rows += [row(40 + i, T1, False, count=7) for i in range(3)]  # outside exceptions [1, 3]
    rows += [row(50, T5, False, errored=True)]  # its request failed: left out
    return write_run(tmp_path / "run", rows)


@pytest.fixture
def source_spec(tmp_path) -> Path:
    path = tmp_path / "source.yaml"
    path.write_text(SOURCE_SPEC)
    return path


def test_written_spec_weights_failed_templates_and_loads(tmp_path, scored_run, source_spec):
    out = tmp_path / "out" / "next.yaml"
    plan = make_curriculum(scored_run, source_spec, out)
    spec = load_spec(out)
    assert {level.name for level in spec.levels} == {"attribute-t1", "attribute-t2", "attribute-t3"}
    level = spec.levels[0]
    assert level.tasks_per_scene == 2
    # T3 failed 10 of 10 (sprite_edit's 5 are not counted), T1 passed 10 of 13 counted
    template = plan.axes["template"]
    assert template.cells[T3].n == 10 and template.cells[T1].n == 13
    assert template.shares[T3] > template.shares[T2] > template.shares[T1]
    assert plan.run.errored == 1
    # the zero region case failed: it gets the largest region-case share
    assert max(level.region_cases, key=level.region_cases.get) == "zero"
    assert level.negative_rate == pytest.approx(plan.axes["target_count"].shares[0], abs=1e-4)
    report = (tmp_path / "out" / "next-report" / "report.md").read_text()
    assert "| L-Clk | 10 | 10 |" in report
    assert (tmp_path / "out" / "next-report" / "curriculum.png").read_bytes()[:4] == b"\x89PNG"


def test_untaught_cells_are_reported(tmp_path, scored_run, source_spec):
    plan = make_curriculum(scored_run, source_spec, tmp_path / "next.yaml")
    reported = {entry["what"]: (entry["n"], entry["fails"]) for entry in untaught_summary(plan)}
    assert reported["family sprite_edit: not in the spec"] == (5, 5)
    assert reported["7: outside the spec's exceptions range [1, 3]"] == (3, 3)
    report = (tmp_path / "next-report" / "report.md").read_text()
    assert "family sprite_edit: not in the spec | 5 | 5 |" in report


def test_generate_makes_data_from_the_written_spec_in_an_empty_folder(
    tmp_path, scored_run, source_spec, monkeypatch
):
    out = tmp_path / "specs" / "next.yaml"
    assert main(["curriculum", "--from", str(scored_run), "--spec", str(source_spec), "--out", str(out)]) == 0
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    monkeypatch.chdir(empty)
    code = main(
        [
            "generate",
            "--spec",
            str(out),
            "--out",
            "data",
            "--scenes",
            "6",
            "--formats",
            "release",
            "--num-proc",
            "1",
        ]
    )
    assert code == 0
    rows = [json.loads(line) for line in (empty / "data" / "metadata_train.jsonl").read_text().splitlines()]
    assert len(rows) == 12  # 6 scenes x tasks_per_scene 2


def test_the_demo_round2_spec_round_trips(tmp_path):
    """The demo's round-2 spec fixes the grid: profiles are reported, not weighted;
    its held-out spec is written as an absolute path, valid from any folder."""
    rows = [row(i, T4, i < 3, case="all", count=1 + i % 2) for i in range(20)]
    run = write_run(tmp_path / "run", rows)
    out = tmp_path / "next.yaml"
    plan = make_curriculum(run, ROOT / "generators" / "demo" / "rl.yaml", out)
    assert not plan.axes["profile"].expressible
    assert main(["curriculum", "--from", str(run), "--spec", "demo/rl", "--out", str(out)]) == 0  # by name
    spec = load_spec(out)
    assert Path(spec.heldout_spec).is_absolute() and Path(spec.heldout_spec).is_file()


def test_a_foreign_out_file_is_not_overwritten(tmp_path, scored_run, source_spec, capsys):
    out = tmp_path / "mine.yaml"
    out.write_text("name: mine\n")
    code = main(["curriculum", "--from", str(scored_run), "--spec", str(source_spec), "--out", str(out)])
    assert code == 2
    assert "not written by rosetrain curriculum" in capsys.readouterr().err
    assert out.read_text() == "name: mine\n"


def test_a_missing_run_is_one_line(tmp_path, source_spec, capsys):
    code = main(
        [
            "curriculum",
            "--from",
            str(tmp_path / "nope"),
            "--spec",
            str(source_spec),
            "--out",
            str(tmp_path / "n.yaml"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "per_item_eval.jsonl" in err and len(err.strip().splitlines()) == 1


# -- real ROSE rows ---------------------------------------------------------------


def rose_rows() -> list[dict]:
    path = ROSE_V01 / "metadata_test_matched_local_count_bridge.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rose_subsets_map_onto_families():
    families = {r["rose_subset"]: family_of(r) for r in rose_rows()}
    assert families == {
        "ROSE-ChineseGlyph": "glyph",
        "ROSE-EmojiStyle": "emoji_style",
        "ROSE-EmojiContent": "emoji_content",
        "ROSE-PixelEdit": "sprite_edit",
        "ROSE-PixelContent": "sprite_pair",
    }
    assert family_of({"rose_subset": "ROSE-Unknown"}) is None


def test_rose_rows_give_cells(tmp_path):
    """A scored run of real ROSE rows: fallback region cases count as the case the
    region has, grid profiles are the release's, and subsets the spec lacks are reported."""
    rows = rose_rows()
    items = [item_of({**r, "pass": 0}) for r in rows]
    assert {i.region_case for i in items} == {"zero", "partial", "all"}
    assert {i.profile for i in items} <= {"small", "medium", "large"}
    assert all(i.target_count == len(r["all_target_cells"]) for i, r in zip(items, rows))
    scored = [{**r, "pass": int(i % 3 == 0), "api_error": 0} for i, r in enumerate(rows)]
    run = write_run(tmp_path / "rose-run", scored)
    spec = tmp_path / "pixel.yaml"
    spec.write_text(
        "name: pixel\nrole: train\nnamespace: pixel\nexceptions: [1, 4]\ntasks_per_scene: 3\n"
        "families: {sprite_edit: {subtlety: 0.0}}\n"
    )
    plan = make_curriculum(run, spec, tmp_path / "next.yaml")
    assert plan.axes["family"].cells["sprite_edit"].n == 221  # the ROSE-PixelEdit rows
    reported = {e["what"] for e in untaught_summary(plan)}
    assert "family glyph: not in the spec" in reported and "family sprite_pair: not in the spec" in reported
    assert plan.axes["profile"].expressible


# -- the signal check -------------------------------------------------------------


class StubSampler:
    """Known answers: greedy and k samples per item id."""

    def __init__(self, greedy: dict[str, str], samples: dict[str, list[str]]):
        self.answers, self.samples = greedy, samples

    def greedy(self, records):
        return [self.answers[r["item_id"]] for r in records]

    def sample(self, records, k):
        return [self.samples[r["item_id"]] for r in records]


def gold(item_id: str, template: str, count: int) -> dict:
    cells = [f"R1,C{c + 1}" for c in range(count)]
    return {
        "item_id": item_id,
        "scene_id": item_id,
        "task_template": template,
        "task_mode": "COUNT" if template in (T1, T2) else "CLICK",
        "rows": 3,
        "cols": 3,
        "region_type": "GLOBAL",
        "region_params": {},
        "region_case": "all",
        "ground_truth_count": count,
        "ground_truth_clicks": cells,
        "all_target_cells": cells,
        "region_target_cells": cells,
        "rose_subset": "rosetrain-attribute",
    }


def test_signal_numbers_on_known_completions():
    records = [gold("a", T1, 2), gold("b", T1, 1), gold("c", T1B, 1), gold("d", T1B, 1)]
    sampler = StubSampler(
        greedy={"a": "COUNT(2)", "b": "COUNT(3)", "c": "CLICK(R1,C1); DONE", "d": "CLICK(R2,C2); DONE"},
        samples={
            "a": ["COUNT(2)"] * 4,  # all pass: no signal
            "b": ["COUNT(1)", "COUNT(3)", "COUNT(3)", "COUNT(3)"],  # greedy fails, a sample passes
            "c": ["CLICK(R1,C1); DONE", "CLICK(R3,C3); DONE", "CLICK(R1,C1); DONE", "COUNT(1)"],
            "d": ["CLICK(R2,C2); DONE"] * 4,  # all fail: no signal
        },
    )
    summary = signal_check(records, sampler, k=4, batch_size=3)
    g_cnt, g_clk, total = summary["templates"]["G-Cnt"], summary["templates"]["G-Clk"], summary["all"]
    assert g_cnt == {
        "n": 2,
        "pass@1": 0.5,
        "pass@4": 1.0,
        "sample_pass": 5 / 8,
        "no_signal": 0.5,
        "rescue": 0.5,
    }
    assert g_clk == {
        "n": 2,
        "pass@1": 0.5,
        "pass@4": 0.5,
        "sample_pass": 2 / 8,
        "no_signal": 0.5,
        "rescue": 0.0,
    }
    assert total["no_signal"] == 0.5 and total["rescue"] == 0.25 and total["pass@4"] == 0.75
    assert "50.0% of prompts give GRPO a group" in summary["prediction"]


def test_signal_needs_k_samples_and_two_or_more():
    records = [gold("a", T1, 2)]
    with pytest.raises(RosetrainError, match="^k: "):
        signal_check(records, StubSampler({"a": ""}, {"a": [""]}), k=1)
    with pytest.raises(RosetrainError, match="3 samples, expected 4"):
        grade(records, ["COUNT(2)"], [["COUNT(2)"] * 3], 4)


def test_signal_prediction_with_no_signal():
    records = [gold(str(i), T1, 1) for i in range(5)]
    sampler = StubSampler(
        {str(i): "COUNT(1)" for i in range(5)}, {str(i): ["COUNT(1)"] * 8 for i in range(5)}
    )
    summary = summarize(grade(records, sampler.greedy(records), sampler.sample(records, 8), 8), 8)
    assert summary["all"]["no_signal"] == 1.0
    assert "little to gain from GRPO" in summary["prediction"]


def test_source_spec_fixture_is_valid(source_spec):
    assert yaml.safe_load(source_spec.read_text())["tasks_per_scene"] == 2
    load_spec(source_spec)


def test_signal_command_runs_a_tiny_model(tmp_path, tiny_model_dir, capsys):
    """The real sampler: greedy through the eval runner, k samples through the
    frontier filter's code, on a tiny random model (its figures mean nothing);
    one progress bar, off with --quiet. A GRPO spec may weight V-Cnt, a
    training-only template: its rows are checked like any other."""
    spec = tmp_path / "grpo-prompts.yaml"
    spec.write_text(
        SOURCE_SPEC.replace(
            "T3_CLICK_LOCAL_NUMERIC: 1, T4_CLICK_VISUAL_REGION: 1", "T4C_COUNT_VISUAL_REGION: 1"
        )
    )
    data = tmp_path / "split"
    assert main(["generate", "--spec", str(spec), "--out", str(data), "--split", "test",
                 "--scenes", "2", "--formats", "release", "--num-proc", "1"]) == 0  # fmt: skip
    out = tmp_path / "signal"
    args = ["signal", "--model", str(tiny_model_dir), "--data", str(data), "--limit", "3", "--k", "2"]
    capsys.readouterr()
    assert main([*args, "--out", str(out)]) == 0
    assert "signal check" in capsys.readouterr().err
    assert "| V-Cnt |" in (out / "signal.md").read_text()
    summary = json.loads((out / "signal.json").read_text())
    assert summary["k"] == 2 and summary["all"]["n"] == 3
    assert main([*args, "--quiet"]) == 0
    assert "signal check" not in capsys.readouterr().err
    assert summary["settings"]["temperature"] == 1.0  # the demo GRPO recipe's


def test_levels_not_copied_are_noted(tmp_path, scored_run):
    spec = tmp_path / "levels.yaml"
    spec.write_text(
        SOURCE_SPEC
        + "levels:\n  - {name: warm, scenes: 10, tasks_per_scene: 1}\n  - {name: easy}\n"
        + "  - {name: hard, rows: [5, 6], cols: [5, 6]}\n"
    )
    plan = make_curriculum(scored_run, spec, tmp_path / "next.yaml")
    assert any("mixes 2 levels (easy, hard)" in note for note in plan.notes)
    assert "warm-up levels not copied: warm" in plan.notes
    assert "Note: warm-up levels not copied: warm." in (tmp_path / "next-report" / "report.md").read_text()


def test_axes_not_chosen_keep_the_source_shares(tmp_path, scored_run, source_spec, capsys):
    out = tmp_path / "next.yaml"
    assert main(["curriculum", "--from", str(scored_run), "--spec", str(source_spec), "--out", str(out),
                 "--axes", "template"]) == 0  # fmt: skip
    level = load_spec(out).levels[0]
    assert level.region_cases == pytest.approx({"zero": 33.0, "partial": 45.0, "all": 22.0})  # the default's
    assert level.negative_rate == pytest.approx(0.1)
    assert level.tasks[T3] > level.tasks[T1]  # the failed clicks still weighted up
    bad = ["curriculum", "--from", str(scored_run), "--spec", str(source_spec), "--out", str(out)]
    assert main([*bad, "--axes", "colour"]) == 2
    assert "unknown axis 'colour'" in capsys.readouterr().err


def test_a_training_only_template_of_the_source_spec_keeps_a_weight(tmp_path, scored_run):
    """V-Cnt (T4C) is no ROSE item, so no run scores it; the next spec still asks it."""
    source = tmp_path / "source.yaml"
    source.write_text(
        SOURCE_SPEC.replace(
            "T4_CLICK_VISUAL_REGION: 1}", "T4_CLICK_VISUAL_REGION: 1, T4C_COUNT_VISUAL_REGION: 1}"
        )
    )
    make_curriculum(scored_run, source, tmp_path / "next.yaml")
    assert all(
        level.tasks["T4C_COUNT_VISUAL_REGION"] > 0 for level in load_spec(tmp_path / "next.yaml").levels
    )


def test_a_curriculum_that_would_show_the_heldout_band_to_action_tasks_is_refused(tmp_path, scored_run):
    """Its source shows the band in counting only; weighted click tasks there would
    break the guard generate enforces, so nothing is written and the error says why."""
    (tmp_path / "h.yaml").write_text(
        "name: h\nrole: heldout\nnamespace: heldout\nheldout_hue_band: [50, 150]\nrows: 3\ncols: 3\n"
        "cell_size: 32\nexceptions: [1, 2]\nfamilies: {attribute: {hue_range: [60, 140]}}\n"
    )
    source = tmp_path / "source.yaml"
    counting = "tasks: {T1_COUNT_GLOBAL: 1, T2_COUNT_LOCAL_NUMERIC: 1}\n"
    source.write_text(
        SOURCE_SPEC.replace(
            "tasks: {T1_COUNT_GLOBAL: 1, T2_COUNT_LOCAL_NUMERIC: 1, T3_CLICK_LOCAL_NUMERIC: 1, "
            "T4_CLICK_VISUAL_REGION: 1}\n",
            counting,
        )
        + "heldout_spec: h.yaml\n"
    )
    out = tmp_path / "out" / "next.yaml"
    with pytest.raises(RosetrainError, match="would show held-out data to the action tasks.*hue band"):
        make_curriculum(scored_run, source, out)
    assert not out.exists()
