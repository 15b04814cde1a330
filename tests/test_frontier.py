"""Frontier prompts for GRPO: the filter keeps prompts the policy passes
sometimes, records what it saw per template, steps aside when nothing is left; the
live-group share is counted on PASS, per template."""

import json

from rosetrain.train import frontier as F
from rosetrain.train.rewards import log_live_groups


def make_filter(tmp_path, passes_by_item):
    keep = F.FrontierFilter(
        processor=None, samples=4, temperature=1.0, top_p=1.0, max_new_tokens=8, output_dir=str(tmp_path)
    )
    keep.pass_counts = lambda rows: [passes_by_item[r["item_id"]] for r in rows]
    return keep


def test_keeps_only_prompts_with_pass_rate_strictly_between_0_and_1(tmp_path):
    keep = make_filter(tmp_path, {"a": 0, "b": 2, "c": 4, "d": 1})
    batch = {
        "item_id": ["a", "b", "c", "d"],
        "task_template": ["T3_CLICK_LOCAL_NUMERIC"] * 2 + ["T1_COUNT_GLOBAL"] * 2,
    }
    assert keep(batch) == [False, True, False, True]
    summary = F.frontier_summary(tmp_path)
    assert summary["L-Clk"] == {"seen": 2, "all_fail": 1, "live": 1, "live_share": 0.5}
    assert summary["G-Cnt"]["all_pass"] == 1 and summary["G-Cnt"]["live"] == 1


def test_no_frontier_left_stops_filtering_with_a_warning_not_an_endless_loop(tmp_path, caplog):
    keep = make_filter(tmp_path, {"a": 4})
    batch = {"item_id": ["a"] * 64, "task_template": ["T1_COUNT_GLOBAL"] * 64}
    assert keep(batch) == [False] * 64
    assert keep(batch) == [True] * 64  # 128 dead prompts in a row: the filter steps aside
    assert keep(batch) == [True] * 64
    assert "no frontier left" in caplog.text
    assert "no frontier left" in (tmp_path / F.FRONTIER_LOG).read_text()
    assert F.frontier_summary(tmp_path)["G-Cnt"]["seen"] == 128


def test_live_groups_counted_on_pass_per_template():
    logged = []
    golds = [
        {"item_id": i, "task_template": t}
        for i, t in [("x", "T3_CLICK_LOCAL_NUMERIC")] * 2 + [("y", "T1_COUNT_GLOBAL")] * 2
    ]
    results = [{"pass": 1}, {"pass": 0}, {"pass": 1}, {"pass": 1}]  # x varies, y is all-correct
    log_live_groups(golds, results, lambda name, value: logged.append((name, value)))
    assert [v for n, v in logged if n == "live/L-Clk"] == [1.0, 1.0]
    assert [v for n, v in logged if n == "live/G-Cnt"] == [0.0, 0.0]
    assert sum(v for n, v in logged if n == "live/all") / 4 == 0.5
    assert json.dumps(logged)
