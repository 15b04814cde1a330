"""A metadata file holding rows of several splits is scored as the official ROSE
evaluator scores it: only the rows whose ``split`` field is --split (a row
without one belongs to every split), in one process or in chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rosetrain.scoring.split as split_module
from rosetrain.cli import main as cli_main


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, smoke_split) -> tuple[Path, Path]:
    """test rows and dev copies of them in one file; each split's predictions
    (test answered right, dev wrong) in the folder returned beside it."""
    folder = tmp_path_factory.mktemp("mixed")
    split = smoke_split(folder / "smoke")
    rows = [json.loads(line) for line in (split / "metadata_test.jsonl").read_text().splitlines()]
    dev = [{**row, "split": "dev", "item_id": "dev-" + row["item_id"]} for row in rows]
    data = split / "both.jsonl"  # beside images/, which the rows name
    data.write_text("".join(json.dumps(row) + "\n" for pair in zip(rows, dev) for row in pair))
    for name, answered in (
        ("test", [(r, r["answer"]) for r in rows]),
        ("dev", [(r, "COUNT(99)") for r in dev]),
    ):
        answers = [{"item_id": r["item_id"], "raw_text": text} for r, text in answered]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    return data, folder


@pytest.mark.parametrize("chunked", [False, True])
def test_only_the_rows_of_the_split_asked_for_are_scored(mixed, tmp_path, monkeypatch, chunked):
    data, answers = mixed
    if chunked:  # the chunked reading of a large split, on this small one
        monkeypatch.setattr(split_module, "PARALLEL_BYTES", 0)
        model, num_proc, _ = split_module.score_split.__defaults__
        monkeypatch.setattr(split_module.score_split, "__defaults__", (model, num_proc, 2000))
    n = len(data.read_text().splitlines()) // 2
    for split, avg in (("test", 1.0), ("dev", 0.0)):
        out = tmp_path / split
        command = [
            "score",
            "--data",
            str(data),
            "--split",
            split,
            "--predictions",
            str(answers / f"{split}.jsonl"),
        ]
        assert cli_main([*command, "--out", str(out), "--num-proc", "2"]) == 0
        summary = json.loads((out / "evaluation_summary.json").read_text())
        assert summary["n_expected"] == n and summary["avg_pass"] == pytest.approx(avg)
