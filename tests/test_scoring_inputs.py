"""Scoring inputs that once gave a wrong number or a traceback: a gold mapping
refilled in place by its reader (``score_many``), and an error in the gold
metadata of a small split or one scored with ``--num-proc 1`` (``score``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.scoring import score_many

ROSE_V01 = Path(__file__).resolve().parent / "data" / "rose-v0.1"  # real release metadata, vendored

BRIDGE = ROSE_V01 / "metadata_test_matched_local_count_bridge.jsonl"


def bridge_rows(n: int = 300) -> list[dict]:
    with BRIDGE.open(encoding="utf-8") as handle:
        return [json.loads(next(handle)) for _ in range(n)]


def test_score_many_reads_every_row_of_a_mapping_refilled_in_place():
    """Buffer-reusing readers hand out one mapping, refilled for every row: each
    row must be scored against its own gold (it was the first row's for all)."""
    rows = bridge_rows()

    def refilled():
        buffer: dict = {}
        for row in rows:
            buffer.clear()
            buffer.update(row)
            yield buffer

    scored = score_many(refilled(), [row["answer"] for row in rows])
    assert [s["item_id"] for s in scored] == [row["item_id"] for row in rows]
    assert sum(s["pass"] for s in scored) == len(rows) == 300


def test_score_many_still_scores_a_gold_given_many_times():
    """The same gold object for several answers (a group of generations)."""
    row = bridge_rows(1)[0]
    scored = score_many([row] * 3, [row["answer"], "COUNT(999)", None])
    assert [s["pass"] for s in scored] == [1, 0, 0]


@pytest.mark.parametrize("num_proc", [1, 2])
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda rows: rows[5].__setitem__("rows", "x"), ":6: rows: expected an integer >= 1, got 'x'"),
        (lambda rows: rows.__setitem__(7, rows[2]), ":8: item_id 'MLCNT_CHITEM_000013' already at"),
        (lambda rows: rows[3].pop("all_target_cells"), ":4: record lacks required field(s) all_target_cells"),
    ],
)
def test_an_error_in_small_gold_metadata_is_one_line_naming_the_line(
    tmp_path, capsys, num_proc, damage, message
):
    """A split under the size scored in parallel (and --num-proc 1) went through
    the worker-pool error path too, and crashed on its exception's name."""
    rows = bridge_rows(20)
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(
        "".join(json.dumps({"item_id": r["item_id"], "raw_text": r["answer"]}) + "\n" for r in rows)
    )
    damage(rows)
    (tmp_path / "metadata_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    command = [
        "score",
        "--data",
        str(tmp_path),
        "--predictions",
        str(predictions),
        "--out",
        str(tmp_path / "out"),
    ]
    assert cli_main([*command, "--num-proc", str(num_proc)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"metadata_test.jsonl{message}" in err, err
    assert not (tmp_path / "out" / "per_item_eval.jsonl").exists()
