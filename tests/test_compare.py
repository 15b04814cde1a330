"""Before/after comparison: paired scene bootstrap, McNemar, mismatches, outputs."""

from __future__ import annotations

import json
import random

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import (
    CLICK,
    COUNT,
    MAIN_TEMPLATES,
    T1,
    T2,
    T3,
    T4,
    T5,
    TASK_MODE,
    cell_str,
    format_answer,
)
from rosetrain.reports.compare import columns_of, compare_runs, figures
from rosetrain.reports.paired import SceneTable, observed, pair_runs
from rosetrain.scoring import score_item, summarize, write_scored_run

SUBSETS = ("ROSE-A", "ROSE-B", "ROSE-C")
EXCLUDE = {"exclude_type": "ROW_RANGE", "exclude_params": {"r1": 1, "r2": 2}}
REGIONS = {
    T1: ("GLOBAL", {}),
    T2: ("ROW_RANGE", {"r1": 3, "r2": 5}),
    T3: ("COL_RANGE", {"c1": 1, "c2": 4}),
    T4: ("VISUAL_REGION", {"r1": 2, "r2": 6, "c1": 2, "c2": 6}),
    T5: ("EXCLUSION", EXCLUDE),
}


def synthetic_golds(scenes: int, seed: int = 0) -> list[dict]:
    """Five main tasks per scene on an 8x8 grid with 1-4 random targets."""
    rng = random.Random(seed)
    golds = []
    for s in range(scenes):
        cells = [(r, c) for r in range(1, 9) for c in range(1, 9)]
        targets = sorted(rng.sample(cells, rng.randint(1, 4)))
        for template in MAIN_TEMPLATES:
            region_type, params = REGIONS[template]
            inside = _inside(template, targets)
            golds.append(
                {
                    "item_id": f"s{s}-{template}",
                    "scene_id": f"s{s}",
                    "task_template": template,
                    "task_mode": TASK_MODE[template],
                    "rows": 8,
                    "cols": 8,
                    "region_type": region_type,
                    "region_params": params,
                    "ground_truth_count": len(inside),
                    "ground_truth_clicks": [cell_str(c) for c in inside],
                    "all_target_cells": [cell_str(c) for c in targets],
                    "region_case": "zero"
                    if not inside
                    else ("all" if len(inside) == len(targets) else "partial"),
                    "rose_subset": SUBSETS[s % len(SUBSETS)],
                    "answer": format_answer(TASK_MODE[template], inside),
                }
            )
    return golds


def _inside(template, targets):
    if template == T1:
        return targets
    if template == T2:
        return [t for t in targets if 3 <= t[0] <= 5]
    if template == T3:
        return [t for t in targets if t[1] <= 4]
    if template == T4:
        return [t for t in targets if 2 <= t[0] <= 6 and 2 <= t[1] <= 6]
    return [t for t in targets if t[0] > 2]


def run_dir(tmp_path, name, golds, p_right, seed, p_right_counting=None):
    """A scored run where each item is answered right with probability p_right."""
    rng = random.Random(seed)
    rows = []
    for g in golds:
        p = (
            p_right_counting
            if (p_right_counting is not None and TASK_MODE[g["task_template"]] == COUNT)
            else p_right
        )
        if rng.random() < p:
            text = g["answer"]
        else:
            text = "COUNT(0)" if TASK_MODE[g["task_template"]] != COUNT else "COUNT(99)"
        rows.append(score_item(g, text))
    out = tmp_path / name
    write_scored_run(out, golds, rows, data_fingerprint="sha256:synthetic")  # the same data throughout
    return out


@pytest.fixture(scope="module")
def golds():
    return synthetic_golds(90)


def test_detects_a_real_improvement(tmp_path, golds):
    before = run_dir(tmp_path, "before", golds, 0.35, seed=1, p_right_counting=0.8)
    after = run_dir(tmp_path, "after", golds, 0.75, seed=2, p_right_counting=0.8)
    result = compare_runs(before, after, tmp_path / "cmp", resamples=500)
    assert result["n_items"] == 450 and result["n_scenes"] == 90
    for key in ("action_avg", "avg_pass"):
        low, high = result[key]["ci95"]
        assert 0 < low <= result[key]["delta"] <= high
    assert result["gap"]["ci95"][1] < 0  # the gap shrank, beyond noise
    for template in (T3, T4, T5):
        entry = result["templates"][template]
        assert entry["delta"] > 0 and entry["mcnemar_p"] < 0.01
        assert entry["pass_only_after"] > entry["pass_only_before"]
    # the point figures are exactly the scored runs' own summaries
    summary_after = json.loads((after / "evaluation_summary.json").read_text())
    for key in ("avg_pass", "counting_avg", "action_avg", "gap"):
        assert result[key]["after"] == pytest.approx(summary_after[key])
    for template, entry in result["templates"].items():
        assert entry["after"] == pytest.approx(summary_after["templates"][template]["pass"])
    names = {p.name for p in (tmp_path / "cmp").iterdir()}
    assert {"compare.json", "report.md", "pass_per_template.png", "gap.png", "region_case.png"} <= names
    assert all(
        (tmp_path / "cmp" / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in names if n.endswith(".png")
    )
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert saved["gap"]["ci95"] == result["gap"]["ci95"]
    assert "gap.png" in (tmp_path / "cmp" / "report.md").read_text()


def test_no_change_gives_zero_delta_and_p_one(tmp_path, golds):
    run = run_dir(tmp_path, "same", golds, 0.5, seed=3)
    result = compare_runs(run, run, None, resamples=200)
    for key in ("avg_pass", "gap"):
        assert result[key]["delta"] == 0 and result[key]["ci95"] == [0.0, 0.0]
    assert all(e["mcnemar_p"] == 1.0 for e in result["templates"].values())


def test_same_seed_same_interval_and_noise_straddles_zero(tmp_path, golds):
    before = run_dir(tmp_path, "b", golds, 0.5, seed=4)
    after = run_dir(tmp_path, "a", golds, 0.5, seed=5)
    first = compare_runs(before, after, None, resamples=400, seed=7)
    again = compare_runs(before, after, None, resamples=400, seed=7)
    assert first["avg_pass"]["ci95"] == again["avg_pass"]["ci95"]
    low, high = first["avg_pass"]["ci95"]
    assert low < 0 < high


def test_resampling_moves_whole_scenes_and_reproduces_the_summary(golds):
    """Resampled with every scene once, each column is the summary's own figure:
    the templates' PASS, SOFT, VALID, C-F1, R-OK (as the summary's headline
    keys compute them, per subset and then over subsets)."""
    rows = [score_item(g, g["answer"] if k % 3 else "nope") for k, g in enumerate(golds)]
    pairs = list(zip(rows, rows))
    columns = columns_of(pairs)
    table = SceneTable(pairs, columns)
    templates = list(MAIN_TEMPLATES)
    assert table.counts["before"].shape[0] == 90 and (table.counts["before"][:, :5] == 1).all()
    values = observed(table)
    summary = summarize(golds, rows)
    assert [values[t]["before"] for t in templates] == pytest.approx(
        [summary["templates"][t]["pass"] for t in templates]
    )
    for name, key in (("soft", "soft"), ("valid", "valid"), ("click_f1", "c_f1"), ("region_ok", "r_ok")):
        assert values[name]["before"] == pytest.approx(summary[key]), name
    assert figures(rows)["gap"] == pytest.approx(summary["gap"])


def test_every_figure_has_each_sides_interval_and_the_deltas(tmp_path, golds):
    before = run_dir(tmp_path, "a", golds, 0.5, seed=1)
    after = run_dir(tmp_path, "b", golds, 0.8, seed=2)
    result = compare_runs(before, after, tmp_path / "cmp", resamples=200, plots=False)
    labels = {e["label"] for e in result["figures"].values()}
    assert {"Avg. SOFT", "VALID", "C-F1 (click F1, strict)", "R-OK (clicks inside the region)"} <= labels
    assert {"ROSE-A PASS", "ROSE-A SOFT"} <= labels
    for entry in [*result["figures"].values(), *result["by_region_case"].values()]:
        assert len(entry["ci95"]) == len(entry["ci95_before"]) == len(entry["ci95_after"]) == 2
        if entry["before"] is not None:
            low, high = entry["ci95_before"]
            assert low <= entry["before"] <= high
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "counting_avg" not in report and "avg_pass" not in report  # labels a person reads
    assert "| Avg. SOFT |" in report and "| zero |" in report


def test_different_item_sets_are_an_error(tmp_path, golds):
    before = run_dir(tmp_path, "full", golds, 0.5, seed=6)
    rows = [score_item(g, g["answer"]) for g in golds[:-3]]
    write_scored_run(tmp_path / "short", golds, rows)
    with pytest.raises(RosetrainError) as err:
        compare_runs(before, tmp_path / "short", None)
    message = str(err.value)
    assert "before has 450, after has 447" in message and golds[-1]["item_id"] in message
    other = [score_item(g, g["answer"]) for g in synthetic_golds(3, seed=9)]
    for row in other:
        row["item_id"] = "x-" + row["item_id"]
    with pytest.raises(RosetrainError, match="only in before: 2 .*only in after: 15"):
        pair_runs([score_item(g, "") for g in golds[:2]], other)


def test_template_mismatch_and_duplicates_are_errors(golds):
    rows = [score_item(g, g["answer"]) for g in golds[:5]]
    changed = [dict(r) for r in rows]
    changed[0]["task_template"] = T2
    with pytest.raises(RosetrainError, match="not the same split"):
        pair_runs(rows, changed)
    with pytest.raises(RosetrainError, match="lists item .* twice"):
        pair_runs(rows + rows[:1], rows)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("pass", "yes", "'pass' is 'yes', not 0 or 1"),
        ("pass", 2, "'pass' is 2, not 0 or 1"),
        ("item_id", ["a"], "'item_id' is ['a'], not a non-empty text"),
        ("unified_soft", "x" * 500, "'unified_soft' is 'xxxxxxxxxxxx...xxxxxxxxxxxxx', not a number"),
        ("click_f1", float("nan"), "'click_f1' is nan, not a number"),
        ("count_mae", {"a": 1}, "'count_mae' is {'a': 1}, not a number"),
    ],
)
def test_a_per_item_row_edited_by_hand_is_one_line_naming_line_and_field(tmp_path, golds, field, value, said):
    run = run_dir(tmp_path, "run", golds, 0.5, seed=3)
    path = run / "per_item_eval.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[2])
    row[field] = value
    lines[2] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RosetrainError) as raised:
        compare_runs(run, run, None, resamples=10)
    assert str(raised.value) == f"{path}:3: {said}"


def test_missing_run_folder_is_an_error(tmp_path):
    with pytest.raises(RosetrainError, match="per_item_eval.jsonl"):
        compare_runs(tmp_path / "nothing", tmp_path / "nothing", None)


def test_compare_command(tmp_path, golds, capsys):
    from rosetrain.cli import main

    before = run_dir(tmp_path, "b", golds, 0.3, seed=10)
    after = run_dir(tmp_path, "a", golds, 0.9, seed=11)
    assert (
        main(
            [
                "compare",
                str(before),
                str(after),
                "--out",
                str(tmp_path / "c"),
                "--resamples",
                "300",
                "--no-plots",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Avg. PASS" in out and "McNemar" in out and "avg_pass" not in out and "VALID" in out
    assert (tmp_path / "c" / "compare.json").exists()
    assert not list((tmp_path / "c").glob("*.png"))
    assert main(["compare", str(before), str(tmp_path / "missing"), "--out", str(tmp_path / "d")]) == 2


def test_click_templates_use_click_answers(golds):
    # guard for the fixture itself: a wrong click answer is a real CLICK-mode miss
    t3 = next(g for g in golds if g["task_template"] == T3 and g["ground_truth_clicks"])
    assert TASK_MODE[T3] == CLICK and not score_item(t3, "DONE")["pass"]
