"""``rosetrain score`` writes every file of the official ROSE evaluator, with its
names, columns and keys, and figures recomputed here plainly from the per-item
rows (set ROSE_EVALUATOR to the official ``evaluate_rose.py`` to also compare
the files with its own, byte for byte where they are not prose)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from answer_variants import answer_variants

from rosetrain.cli import main
from rosetrain.core.protocol import BRIDGE_TEMPLATES
from rosetrain.generators.records import build_records
from rosetrain.generators.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
SUBSETS = ["ROSE-ChineseGlyph", "ROSE-EmojiStyle", "ROSE-EmojiContent", "ROSE-PixelEdit", "ROSE-PixelContent"]
GROUP_COLUMNS = [
    "n",
    "pass_rate",
    "unified_soft",
    "valid_rate",
    "format_error_rate",
    "api_error_rate",
    "n_count_applicable",
    "count_exact_rate",
    "count_mae_parsed",
    "count_bias_parsed",
    "count_soft",
    "n_click_applicable",
    "click_exact_set_rate",
    "click_exact_set_strict_rate",
    "click_precision",
    "click_recall",
    "click_f1",
    "click_f1_strict",
    "click_iou",
    "click_iou_strict",
    "region_ok_rate",
    "region_violation_sample_rate",
    "invalid_coordinate_sample_rate",
    "duplicate_click_sample_rate",
    "over_click_sample_rate",
    "under_click_sample_rate",
    "near_miss_rate",
    "n_submit_applicable",
    "submit_exact_rate",
    "click_submit_consistency_rate",
    "global_default_error_rate",
    "n_exclusion",
    "exclusion_failure_rate",
]
OFFICIAL_FILES = [
    "per_item_eval.jsonl",
    "error_cases.jsonl",
    "evaluation_summary.json",
    "summary_by_subset.csv",
    "summary_by_template.csv",
    "coverage_by_subset_template.csv",
    "table1_row.txt",
    "table2_row.txt",
]
SUMMARY_KEYS = [
    "evaluator",
    "model",
    "display_name",
    "split",
    "dataset_repo_id",
    "metadata_jsonl",
    "predictions_jsonl",
    "coverage",
    "overall",
    "by_subset",
    "by_template",
    "by_task_mode",
    "by_region_type",
    "paper_metrics",
    "paper_metrics_percent",
    "metric_notes",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A 40-scene ROSE-layout split (main templates), mixed answers, scored."""
    root = tmp_path_factory.mktemp("official-files")
    spec = load_spec(ROOT / "generators" / "rose-protocol.yaml", check_fonts=False)
    records = [
        r
        for i in range(40)
        for r in build_records(spec, 7, i, "test", render=False).records
        if r["task_template"] not in BRIDGE_TEMPLATES
    ]
    (root / "metadata_test.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
    )
    rng = random.Random(5)
    with (root / "preds.jsonl").open("w", encoding="utf-8") as handle:
        for k, record in enumerate(records):
            text, error = rng.choice(answer_variants(record, seed=k, n_random=10))
            if rng.random() < 0.4:
                text, error = record["answer"], None
            handle.write(
                json.dumps({"item_id": record["item_id"], "raw_text": text, "model": "m1", "error": error})
                + "\n"
            )
    assert main(
        ["score", "--data", str(root), "--predictions", str(root / "preds.jsonl"), "--out", str(root / "out")]
    ) in (0, None)
    return root


def _mean(values):
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def _plain_group(rows):
    """The official group figures, by their documented definitions, row by row."""
    if not rows:
        return {"n": 0}
    count = [r for r in rows if r["count_applicable"] == 1]
    click = [r for r in rows if r["click_applicable"] == 1]
    submit = [r for r in rows if r["submit_applicable"] == 1]
    parsed = [r for r in count if r["pred_count"] is not None]
    share = lambda group, f: _mean(int((r[f] or 0) > 0) for r in group)  # noqa: E731
    return dict(
        zip(
            GROUP_COLUMNS,
            [
                len(rows),
                _mean(r["pass"] for r in rows),
                _mean(r["unified_soft"] for r in rows),
                _mean(r["format_valid"] for r in rows),
                _mean(r["format_error"] for r in rows),
                _mean(r["api_error"] for r in rows),
                len(count),
                _mean(r["count_exact"] for r in count),
                _mean(r["count_mae"] for r in parsed),
                _mean(r["count_bias"] for r in parsed),
                _mean(r["count_soft"] for r in count),
                len(click),
                *[
                    _mean(r[f] for r in click)
                    for f in (
                        "click_exact_set",
                        "click_exact_set_strict",
                        "click_precision",
                        "click_recall",
                        "click_f1",
                        "click_f1_strict",
                        "click_iou",
                        "click_iou_strict",
                        "region_ok",
                    )
                ],
                *[
                    share(click, f)
                    for f in (
                        "region_violation_count",
                        "invalid_coordinate_count",
                        "duplicate_click_count",
                        "over_click_count",
                        "under_click_count",
                    )
                ],
                _mean(r["near_miss_rate"] for r in click),
                len(submit),
                _mean(r["submit_exact"] for r in submit),
                _mean(r["click_submit_consistency"] for r in submit),
                _mean(r["global_default_error"] for r in rows if r["task_template"] != "T1_COUNT_GLOBAL"),
                len([r for r in rows if r["region_type"] == "EXCLUSION"]),
                _mean(r["exclusion_failure"] for r in rows if r["region_type"] == "EXCLUSION"),
            ],
        )
    )


def _close(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, abs_tol=1e-9)
    return a == b


def test_every_official_file_is_written(run):
    out = run / "out"
    for name in OFFICIAL_FILES:
        assert (out / name).is_file(), name
    summary = json.loads((out / "evaluation_summary.json").read_text(encoding="utf-8"))
    assert list(summary)[: len(SUMMARY_KEYS)] == SUMMARY_KEYS
    assert {"avg_pass", "gap", "templates", "coverage_rate"} <= set(summary)  # rosetrain's own


def test_csv_files_have_the_official_columns_and_form(run):
    out = run / "out"
    raw = (out / "summary_by_subset.csv").read_bytes()
    assert raw.startswith("\ufeff".encode()) and b"\r\n" in raw
    lines = raw.decode("utf-8-sig").splitlines()
    assert lines[0].split(",") == ["rose_subset", "subset_short", *GROUP_COLUMNS]
    assert [line.split(",")[0] for line in lines[1:]] == SUBSETS
    template = (out / "summary_by_template.csv").read_text(encoding="utf-8-sig").splitlines()
    assert template[0].split(",") == ["task_template", "task_short", *GROUP_COLUMNS]
    coverage = (out / "coverage_by_subset_template.csv").read_text(encoding="utf-8-sig").splitlines()
    assert coverage[0].split(",") == [
        "group",
        "rose_subset",
        "expected",
        "evaluated",
        "coverage_rate",
        "task_template",
        "task_short",
    ]
    assert len(coverage) == 1 + 5 + 5


def test_group_figures_equal_a_plain_recomputation(run):
    out = run / "out"
    rows = [json.loads(line) for line in (out / "per_item_eval.jsonl").open(encoding="utf-8")]
    assert [r["item_id"] for r in rows] == sorted(r["item_id"] for r in rows)
    summary = json.loads((out / "evaluation_summary.json").read_text(encoding="utf-8"))
    groups = {"overall": {"": rows}}
    for field, key in (
        ("rose_subset", "by_subset"),
        ("task_template", "by_template"),
        ("task_mode", "by_task_mode"),
        ("region_type", "by_region_type"),
    ):
        groups[key] = {}
        for row in rows:
            groups[key].setdefault(str(row[field]), []).append(row)
    for key, by_value in groups.items():
        for value, group in by_value.items():
            got = summary[key] if key == "overall" else summary[key][value]
            want = _plain_group(group)
            assert list(got) == list(want)
            assert all(_close(got[k], want[k]) for k in want), (key, value)
    table2 = summary["paper_metrics"]["table2"]
    per_subset = [
        _mean(
            r["pass"]
            for r in rows
            if r["rose_subset"] == s and r["task_template"] == "T3_CLICK_LOCAL_NUMERIC"
        )
        for s in SUBSETS
    ]
    assert _close(table2["L-Clk"], _mean(per_subset))
    cf1 = [
        _mean(r["click_f1_strict"] for r in rows if r["rose_subset"] == s and r["click_applicable"])
        for s in SUBSETS
    ]
    assert _close(table2["C-F1"], _mean(cf1))
    errors = [json.loads(line) for line in (out / "error_cases.jsonl").open(encoding="utf-8")]
    assert [r["item_id"] for r in errors] == [r["item_id"] for r in rows if r["pass"] != 1]


def test_table_rows_are_latex_rows(run):
    table1 = (run / "out" / "table1_row.txt").read_text(encoding="utf-8")
    name, cells = table1.split("\n& ")
    assert name == "m1" and cells.endswith(" \\\\\n") and len(cells.split(" & ")) == 13


def test_files_equal_the_official_evaluators(run, tmp_path):
    evaluator = os.environ.get("ROSE_EVALUATOR")
    if not evaluator or not Path(evaluator).is_file():
        pytest.skip("set ROSE_EVALUATOR to the official evaluate_rose.py to compare with it")
    subprocess.run(
        [
            sys.executable,
            evaluator,
            "--dataset_root",
            str(run),
            "--predictions",
            str(run / "preds.jsonl"),
            "--split",
            "test",
            "--out_dir",
            str(tmp_path),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    ours = run / "out"
    for name in (
        "summary_by_subset.csv",
        "summary_by_template.csv",
        "coverage_by_subset_template.csv",
        "table1_row.txt",
        "table2_row.txt",
    ):
        assert (ours / name).read_bytes() == (tmp_path / name).read_bytes(), name
    theirs = json.loads((tmp_path / "evaluation_summary.json").read_text(encoding="utf-8"))
    mine = json.loads((ours / "evaluation_summary.json").read_text(encoding="utf-8"))
    for key in ("coverage", "overall", "by_subset", "by_template", "by_task_mode", "by_region_type"):
        assert json.dumps(mine[key], sort_keys=True) == json.dumps(theirs[key], sort_keys=True)
    for key in ("table1", "table2"):
        assert mine["paper_metrics"][key] == theirs["paper_metrics"][key]
    rows = {r["item_id"]: r for r in map(json.loads, (tmp_path / "per_item_eval.jsonl").open())}
    for row in map(json.loads, (ours / "per_item_eval.jsonl").open()):
        assert all(row[k] == v for k, v in rows[row["item_id"]].items()), row["item_id"]


def test_rosetrain_headline_equals_the_paper_tables_on_rose_subsets_without_errors():
    """With only ROSE subsets and no failed request, rosetrain's own headline
    figures are the paper tables' (the README says which is which)."""
    from rosetrain.scoring import score_many, summarize

    spec = load_spec(ROOT / "generators" / "rose-protocol.yaml", check_fonts=False)
    records = [
        r
        for i in range(40)
        for r in build_records(spec, 7, i, "test", render=False).records
        if r["task_template"] not in BRIDGE_TEMPLATES and r["rose_subset"] in SUBSETS
    ]
    rng = random.Random(9)
    texts = [
        r["answer"] if rng.random() < 0.5 else rng.choice(answer_variants(r, seed=k, n_random=5))[0]
        for k, r in enumerate(records)
    ]
    summary = summarize(records, score_many(records, texts))
    table1 = summary["paper_metrics"]["table1"]
    table2 = summary["paper_metrics"]["table2"]
    pairs = [
        (summary["avg_pass"], table2["Avg. PASS"]),
        (summary["c_f1"], table2["C-F1"]),
        (summary["r_ok"], table2["R-OK"]),
        (summary["valid"], table1["VALID"]),
        (summary["soft"], table1["Avg. SOFT"]),
    ]
    pairs += [
        (summary["templates"][t]["pass"], table2[short])
        for t, short in (
            ("T1_COUNT_GLOBAL", "G-Cnt"),
            ("T3_CLICK_LOCAL_NUMERIC", "L-Clk"),
            ("T5_CLICK_COUNT_EXCLUSION", "Excl. C+S"),
        )
    ]
    assert all(_close(mine, paper) for mine, paper in pairs), pairs
