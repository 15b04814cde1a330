"""Differential tests: rosetrain's per-item rows against the official ROSE v0.1
evaluator's semantics, field by field, over hundreds of answer variants per
template (``tests/official_reference.py`` states those semantics; the answer
kinds are in ``tests/answer_variants.py``).

Set ROSE_EVALUATOR to the official ``demo/evaluate_rose.py`` to also compare
with the evaluator itself (skipped otherwise).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path

import pytest
from answer_variants import answer_variants
from official_reference import expected_row

from rosetrain.core.protocol import CLICK, CLICK_COUNT, COUNT, TEMPLATES
from rosetrain.generators.records import build_records
from rosetrain.generators.spec import load_spec
from rosetrain.scoring import OFFICIAL_FIELDS, parse_answer, prepare_gold, score_item
from rosetrain.scoring.grammar import parse_by_parts

ROOT = Path(__file__).resolve().parents[1]
ROSE_DIR = ROOT / "tests" / "data" / "rose-v0.1"
SCENES = 24


def _generated_golds() -> list[dict]:
    spec = load_spec(ROOT / "generators" / "rose-protocol.yaml", check_fonts=False)
    return [r for i in range(SCENES) for r in build_records(spec, 7, i, "test", render=False).records]


def _rose_golds() -> list[dict]:
    rows = []
    for path in sorted(ROSE_DIR.glob("*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            rows += [json.loads(line) for _, line in zip(range(30), handle)]
    return rows


@pytest.fixture(scope="module")
def golds():
    return _generated_golds() + _rose_golds()


def _same(want, got) -> bool:
    if isinstance(want, float) or isinstance(got, float):
        return (
            type(want) is type(got) and want is not None and math.isclose(want, got, rel_tol=0, abs_tol=1e-9)
        )
    return type(want) is type(got) and want == got


def _differences(want: dict, got: dict) -> list[str]:
    return [
        f"{f}: official {want[f]!r}, rosetrain {got.get(f)!r}"
        for f in OFFICIAL_FIELDS
        if f not in got or not _same(want[f], got[f])
    ]


def test_every_official_field_agrees_on_hundreds_of_variants_per_template(golds):
    per_template = Counter()
    for seed, gold in enumerate(golds):
        prepared = prepare_gold(gold)
        for text, error in answer_variants(gold, seed=seed):
            got = score_item(prepared, text, "model-x", error)
            want = expected_row(gold, text, "model-x", error)
            assert list(want) == list(OFFICIAL_FIELDS)
            problems = _differences(want, got)
            assert not problems, (gold["item_id"], text, problems[:3])
            per_template[gold["task_template"]] += 1
    assert set(per_template) == set(TEMPLATES)
    assert min(per_template.values()) >= 300, per_template


@pytest.mark.parametrize(
    "text, mode, valid, clicks, count",
    [
        ("CLICK(R4,C11);; CLICK(R8,C2);; DONE", CLICK, True, ((4, 11), (8, 2)), None),
        ("CLICK(R4,C11); DONE;", CLICK, True, ((4, 11),), None),
        ("CLICK ( R4 , C11 ) ; DONE", CLICK, True, ((4, 11),), None),
        ("COUNT ( 1 )", COUNT, True, (), 1),
        ("COUNT(١)", COUNT, True, (), 1),
        ("CLICK(R１,C2); SUBMIT(１)", CLICK_COUNT, True, ((1, 2),), 1),
        (";DONE", CLICK, True, (), None),
        ("CLICK(R1,C1) DONE", CLICK, False, (), None),
        ("COUNT(1);", COUNT, False, (), None),
        ("CLICK(R1,C1); oops; SUBMIT(2)", CLICK_COUNT, False, ((1, 1),), 2),
    ],
)
def test_grammar_reads_what_the_benchmark_accepts(text, mode, valid, clicks, count):
    parsed = parse_answer(text, mode)
    assert (parsed.valid, parsed.clicks, parsed.count) == (valid, clicks, count)


def test_the_fast_path_agrees_with_the_part_by_part_reading(golds):
    for gold in golds[:60]:
        for text, _ in answer_variants(gold, seed=3):
            assert parse_answer(text, gold["task_mode"]) == parse_by_parts(text, gold["task_mode"])


def test_invalid_click_count_answer_keeps_count_credit_and_partial_clicks():
    gold = {
        "item_id": "i",
        "task_template": "T5_CLICK_COUNT_EXCLUSION",
        "task_mode": CLICK_COUNT,
        "rows": 6,
        "cols": 6,
        "region_type": "EXCLUSION",
        "region_params": {"exclude_type": "ROW_RANGE", "exclude_params": {"r1": 1, "r2": 1}},
        "ground_truth_count": 2,
        "ground_truth_clicks": ["R3,C3", "R4,C4"],
        "all_target_cells": ["R1,C1", "R3,C3", "R4,C4"],
    }
    row = score_item(gold, "CLICK(R3,C3); CLICK(R1,C1); I am unsure; SUBMIT(2)")
    assert row["format_valid"] == 0 and row["parse_error"] == "invalid_CLICK_token"
    assert row["invalid_action_tokens"] == ["I am unsure"]
    # count soft 1 + consistency 1 (two distinct clicks, SUBMIT(2)) + strict F1 0
    assert row["unified_soft"] == pytest.approx(2 / 3)
    assert row["click_f1"] == pytest.approx(0.5) and row["exclusion_failure"] == 1


def _official_module():
    path = os.environ.get("ROSE_EVALUATOR")
    if not path or not Path(path).is_file():
        pytest.skip("set ROSE_EVALUATOR to the official evaluate_rose.py to compare with it")
    spec = importlib.util.spec_from_file_location("rose_official_evaluator", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_rows_equal_the_official_evaluators_own(golds):
    official = _official_module()
    compared = 0
    for gold in golds:
        prepared = prepare_gold(gold)
        for text, error in answer_variants(gold, seed=11):
            prediction = {"item_id": gold["item_id"], "raw_text": text, "model": "m", "error": error}
            want = official.evaluate_one(prediction, gold, near_miss_l1=1)
            assert not _differences(want, score_item(prepared, text, "m", error))
            compared += 1
    assert compared > 10_000


def test_rosetrain_diagnostics_keep_their_own_names():
    from rosetrain.scoring import EXTRA_FIELDS, RESULT_FIELDS

    assert not set(EXTRA_FIELDS) & set(OFFICIAL_FIELDS)
    assert RESULT_FIELDS == OFFICIAL_FIELDS + EXTRA_FIELDS
    gold = {
        "item_id": "i",
        "task_template": "T3_CLICK_LOCAL_NUMERIC",
        "task_mode": CLICK,
        "rows": 6,
        "cols": 6,
        "region_type": "RECTANGLE",
        "region_params": {"r1": 1, "r2": 3, "c1": 1, "c2": 3},
        "ground_truth_count": 2,
        "ground_truth_clicks": ["R2,C2", "R1,C3"],
        "all_target_cells": ["R2,C2", "R1,C3"],
        "region_case": "fallback_partial_wanted_all",
    }
    row = score_item(gold, "CLICK(R2,C2); CLICK(R2,C3); CLICK(R3,C3); DONE")
    assert list(row) == list(RESULT_FIELDS)
    assert row["true_positive_clicks"] == 1 and row["wrong_clicks_next_to_missed"] == 1
    assert row["click_precision_strict"] == pytest.approx(1 / 3)
    assert row["click_recall_strict"] == 0.5 and row["region_case_group"] == "partial"
    assert row["parse_error_detail"] is None and row["raw_text_chars"] == 46
