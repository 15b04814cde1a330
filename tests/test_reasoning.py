"""The reasoning channel: targets that think first, and a scored answer without the thinking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.core.reasoning import rationale, reasoned_answer, split_reasoning
from rosetrain.evaluation.evaluate import evaluate
from rosetrain.train.rewards import make_reward


@pytest.mark.parametrize(
    "text, expected",
    [
        ("CLICK(R1,C2); DONE", (None, "CLICK(R1,C2); DONE")),
        ("<think>odd: R1,C2; region: none</think>DONE", ("odd: R1,C2; region: none", "DONE")),
        ("<think>a</think> <think>b</think>\nCOUNT(2) ", ("a</think> <think>b", "COUNT(2)")),
        ("no open tag</think>COUNT(1)", ("no open tag", "COUNT(1)")),
        ("<think>odd: R1,C2; reg", ("odd: R1,C2; reg", "")),  # cut off while thinking: no answer
        ("", (None, "")),
        (None, (None, None)),
    ],
)
def test_split_reasoning_keeps_the_answer_after_the_last_close(text, expected):
    assert split_reasoning(text) == expected


def row(odd, inside, region_type="ROW_RANGE", params=None, answer="COUNT(0)", **more):
    return {
        "all_target_cells": odd,
        "region_target_cells": inside,
        "region_type": region_type,
        "region_params_json": json.dumps(params or {"r1": 3, "r2": 3}),
        "rows": 3,
        "cols": 3,
        "answer": answer,
        **more,
    }


def test_the_odd_rationale_lists_every_odd_cell_then_the_regions_in_reading_order():
    odd = rationale("odd", row(["R3,C1", "R1,C12", "R1,C2"], ["R3,C1"]))
    assert odd == "odd: R1,C2 R1,C12 R3,C1; region: R3,C1"
    assert rationale("odd", row([], [])) == "odd: none; region: none"
    assert reasoned_answer("odd", row(["R2,C2"], [])) == "<think>odd: R2,C2; region: none</think>COUNT(0)"


def test_the_cells_rationale_names_the_regions_cells_between_the_odd_and_the_inside_cells():
    think = rationale("cells", row(["R1,C2", "R3,C1"], ["R3,C1"]))
    assert think == "odd: R1,C2 R3,C1; region: R3,C1 R3,C2 R3,C3; inside: R3,C1"
    outside = row(
        ["R1,C1"],
        ["R1,C1"],
        "EXCLUSION",
        region_params={"exclude_type": "COL_RANGE", "exclude_params": {"c1": 2, "c2": 3}},
    )
    assert rationale("cells", outside) == "odd: R1,C1; region: R1,C1 R2,C1 R3,C1; inside: R1,C1"
    assert rationale("cells", row([], [], "GLOBAL", {})) == "odd: none; region: all; inside: none"
    with pytest.raises(ValueError, match="unknown reasoning style 'steps'"):
        rationale("steps", row([], []))


def test_the_cells_seen_rationale_asks_a_highlighted_region_for_its_own_cells_alone():
    highlighted = row(["R1,C1", "R3,C3"], ["R3,C3"], "VISUAL_REGION", {"r1": 2, "r2": 3, "c1": 3, "c2": 3})
    assert rationale("cells-seen", highlighted) == "region: R2,C3 R3,C3; inside: R3,C3"
    corner = row(["R2,C2"], [], "VISUAL_REGION", {"r1": 1, "r2": 1, "c1": 1, "c2": 1})
    assert rationale("cells-seen", corner) == "region: R1,C1; inside: none"
    numeric = row(["R1,C2", "R3,C1"], ["R3,C1"])  # every other region as `cells`
    assert rationale("cells-seen", numeric) == rationale("cells", numeric)


class ThinkingOracle:
    """Thinks first, then gives the gold answer."""

    name = "thinking-oracle"

    def generate(self, records):
        return [(reasoned_answer("cells", r), None) for r in records]


def test_evaluation_scores_the_answer_and_keeps_the_reasoning(smoke_split, tmp_path):
    split = smoke_split(tmp_path / "smoke", scenes=2)
    summary = evaluate("x", split, "test", tmp_path / "run", runner=ThinkingOracle(), progress=False)
    assert summary["avg_pass"] == 1.0
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert all(not r["raw_text"].startswith("<think>") and r["reasoning"].startswith("odd: ") for r in rows)


def test_rewards_score_the_answer_after_the_thinking():
    gold = {
        "item_id": "a-T3",
        "task_template": "T3_CLICK_LOCAL_NUMERIC",
        "task_mode": "CLICK",
        "rows": 3,
        "cols": 3,
        "ground_truth_count": 1,
        "ground_truth_clicks": ["R1,C2"],
        "all_target_cells": ["R1,C2", "R3,C1"],
        "region_target_cells": ["R1,C2"],
        "region_type": "ROW_RANGE",
        "region_params_json": json.dumps({"r1": 1, "r2": 1}),
    }
    reward = make_reward("pass")
    columns = {k: [v] * 3 for k, v in gold.items()}
    completions = [
        "<think>odd: R1,C2 R3,C1; region: R1,C2</think>CLICK(R1,C2); DONE",
        "CLICK(R1,C2); DONE",
        "<think>odd: R1,C2 R3,C1; region: R1,C2",  # never closed: no answer
    ]
    assert reward(completions, **columns) == [1.0, 1.0, 0.0]


def test_the_thinking_reward_asks_every_cell_list_right():
    """``thinking`` is 1 only for the item's own thinking in the policy's style:
    a right answer with a wrong list, no block, or another style's block gets 0."""
    from rosetrain.train.recipe import load_recipe
    from rosetrain.train.rewards import build_rewards, make_thinking_reward

    gold = row(["R1,C2", "R3,C1"], ["R1,C2"], "VISUAL_REGION", {"r1": 1, "r2": 1, "c1": 1, "c2": 2})
    gold["item_id"] = "t4"
    assert rationale("cells-seen", gold) == "region: R1,C1 R1,C2; inside: R1,C2"
    completions = [
        "<think>region: R1,C1 R1,C2; inside: R1,C2</think>CLICK(R1,C2); DONE",
        [{"role": "assistant", "content": "<think>region: R1,C1 R1,C2; inside: R1,C2</think>DONE"}],
        "<think>region: R1,C1 R1,C2; inside: R1,C1</think>CLICK(R1,C2); DONE",  # the answer alone right
        "CLICK(R1,C2); DONE",
        "<think>" + rationale("cells", gold) + "</think>CLICK(R1,C2); DONE",
        "<think>region: R1,C1 R1,C2; inside: R1,C2",  # cut off: no answer, but the thinking is whole
    ]
    columns = {k: [v] * len(completions) for k, v in gold.items()}
    assert make_thinking_reward("cells-seen")(completions, **columns) == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    funcs, weights = build_rewards({"pass": 1.0, "thinking": 0.5}, "cells-seen")
    assert [f.__name__ for f in funcs] == ["pass", "soft", "format", "thinking"] and weights[-1] == 0.5
    assert [f.__name__ for f in build_rewards({"pass": 1.0})[0]] == ["pass", "soft", "format"]
    with pytest.raises(ValueError, match="unknown reasoning style 'cell'"):
        make_thinking_reward("cell")
    grpo = Path(__file__).resolve().parents[1] / "rosetrain/assets/demo/recipes/demo-grpo.yaml"
    with pytest.raises(RosetrainError, match="rewards.thinking: needs grpo.thinking"):
        load_recipe(grpo, ["rewards.thinking=1"])
    recipe = load_recipe(grpo, ["rewards.thinking=1", "grpo.thinking=cells-seen"])
    assert recipe.rewards == {"pass": 1.0, "soft": 0.5, "format": 0.1, "thinking": 1.0}
    with pytest.raises(ValueError, match="needs the policy's thinking style"):
        make_reward("thinking")


def test_the_frontier_on_thinking_keeps_a_prompt_answered_right_from_the_wrong_cells(tmp_path):
    """With ``grpo.frontier_thinking`` a sample is solved only when it passes
    with the item's own <think> block, so a group whose answers all pass, one
    from a wrong in-region list, is live; without it, that group is all-pass."""
    from rosetrain.train.frontier import FrontierFilter
    from rosetrain.train.recipe import load_recipe

    gold = row(["R1,C2", "R3,C1"], ["R1,C2"], "VISUAL_REGION", {"r1": 1, "r2": 1, "c1": 1, "c2": 2})
    gold.update(item_id="t4", task_template="T4_CLICK_VISUAL_REGION", task_mode="CLICK")
    gold.update(ground_truth_count=1, ground_truth_clicks=["R1,C2"])
    right = "<think>region: R1,C1 R1,C2; inside: R1,C2</think>CLICK(R1,C2); DONE"
    wrong_cells = "<think>region: R1,C1 R1,C2; inside: R1,C1</think>CLICK(R1,C2); DONE"
    texts = [right, right, wrong_cells]

    def solved(thinking):
        keep = FrontierFilter(
            None, samples=3, temperature=1.0, top_p=1.0, max_new_tokens=8,
            output_dir=str(tmp_path), thinking=thinking,
        )  # fmt: skip
        return keep.passes([gold], texts)

    assert solved(None) == [3] and solved("cells-seen") == [2]
    grpo = Path(__file__).resolve().parents[1] / "rosetrain/assets/demo/recipes/demo-grpo.yaml"
    with pytest.raises(
        RosetrainError, match="grpo.frontier_thinking: needs grpo.frontier: true and grpo.thinking"
    ):
        load_recipe(grpo, ["grpo.frontier_thinking=true"])
    recipe = load_recipe(grpo, ["grpo.frontier_thinking=true", "grpo.thinking=cells-seen"])
    assert recipe.grpo.frontier_thinking and recipe.grpo.frontier


def test_training_rows_think_first_when_the_recipe_asks(tmp_path, train_split, tiny_train_spec):
    from rosetrain.train.data import train_dataset
    from rosetrain.train.recipe import DataConfig

    folder = train_split(tmp_path, tiny_train_spec("reasoning-rows"), 2)
    spec = tmp_path / "train.yaml"
    for data in (
        DataConfig(folder=str(folder), reasoning="cells"),
        DataConfig(spec=str(spec), reasoning="odd"),
    ):
        for example in train_dataset(data).take(8):
            (message,) = example["completion"]
            text = message["content"][0]["text"]
            assert text == reasoned_answer(data.reasoning, example) and text.endswith(example["answer"])
            assert example["images"]  # the image columns travel untouched
    plain = next(iter(train_dataset(DataConfig(folder=str(folder)))))
    assert plain["completion"][0]["content"][0]["text"] == plain["answer"]


class CutOffThinker:
    """Stops inside its thinking, as a too-small token limit makes a model stop."""

    name = "cut-off"

    def generate(self, records):
        return [("<think>odd: R1,C2 R3,C1; reg", None) for _ in records]


def test_answers_cut_off_while_thinking_score_empty_and_are_said(smoke_split, tmp_path, capsys):
    from rosetrain.commands.evaluate import say_how_the_run_went

    split = smoke_split(tmp_path / "smoke", scenes=1)
    out = tmp_path / "run"
    summary = evaluate("x", split, "test", out, runner=CutOffThinker(), max_new_tokens=12, progress=False)
    assert summary["avg_pass"] == 0.0
    capsys.readouterr()
    say_how_the_run_went(out)
    assert capsys.readouterr().out.startswith(
        f"{summary['n']} answers were cut off while thinking (<think> without </think>, scored as "
        "empty): raise --max-new-tokens (this run: 12)"
    )


def test_a_grpo_recipe_refuses_reasoning_targets(tmp_path):
    from rosetrain.train.recipe import RecipeError, load_recipe

    with pytest.raises(
        RecipeError,
        match=r"demo-grpo.yaml \(override data.reasoning=cells\): data.reasoning: shapes SFT targets",
    ):
        load_recipe(
            "rosetrain/assets/demo/recipes/demo-grpo.yaml",
            overrides=["data.reasoning=cells", f"output_dir={tmp_path}"],
        )


def test_the_frontier_filter_and_the_signal_check_grade_the_answer_after_the_thinking(tmp_path):
    """Both sample a thinking policy before GRPO; scoring the raw text would fail
    every sample (`<think>` does not parse), read every group as dead and drop the
    frontier. Round 8's GRPO after the thinking SFT hit exactly that."""
    from rosetrain.curriculum.signal import signal_check
    from rosetrain.train.frontier import FrontierFilter

    gold = {
        "item_id": "a-T1",
        "task_template": "T1_COUNT_GLOBAL",
        "task_mode": "COUNT",
        "rows": 3,
        "cols": 3,
        "ground_truth_count": 2,
        "ground_truth_clicks": ["R1,C2", "R3,C1"],
        "all_target_cells": ["R1,C2", "R3,C1"],
        "region_target_cells": ["R1,C2", "R3,C1"],
        "region_type": "GLOBAL",
        "region_params_json": "{}",
    }
    right, wrong = "<think>odd: R1,C2 R3,C1</think>COUNT(2)", "<think>odd: R1,C2</think>COUNT(1)"
    group = [right, wrong, right, wrong]

    class Sampler:
        def greedy(self, records):
            return [right]

        def sample(self, records, k):
            return [group]

    summary = signal_check([gold], Sampler(), k=4)["all"]
    assert summary["pass@1"] == 1.0 and summary["sample_pass"] == 0.5 and summary["no_signal"] == 0.0

    keep = FrontierFilter(
        processor=None, samples=4, temperature=1.0, top_p=1.0, max_new_tokens=8, output_dir=str(tmp_path)
    )
    assert keep.passes([gold], group) == [2]
