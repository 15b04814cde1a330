"""``rosetrain score --bridges`` writes the official analysis scripts' files
(``analysis/evaluate_global_click_bridge.py``,
``analysis/evaluate_matched_local_count_bridge.py``,
``analysis/analyze_scene_consistency.py`` of ROSE v0.1) with their names,
keys and values, and no rosetrain figure carries a paper name for another
quantity.

Set ROSE_EVALUATOR to the official ``demo/evaluate_rose.py`` of a copy of the
ROSE-v0.1 repository to also run its ``analysis/`` scripts on the same
predictions and compare file by file (skipped otherwise): on the real v0.1
bridge rows, and on a generated rose-protocol split whose bridges pair with
its main items (some by id, some by scene only, some with no main row).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from answer_variants import answer_variants

from rosetrain.cli import main
from rosetrain.core.protocol import T1, T1B, T2B, T3

ROOT = Path(__file__).resolve().parents[1]
ROSE_DIR = ROOT / "tests" / "data" / "rose-v0.1"
MODEL = "m"
BRIDGE_FILES = {
    "global_click": (
        "per_item_global_click_eval.jsonl",
        "global_click_error_cases.jsonl",
        "global_click_summary.json",
        "global_click_by_subset.csv",
        "global_click_paper_table.csv",
        "global_click_paper_table.json",
    ),
    "matched_count": (
        "per_item_matched_count_eval.jsonl",
        "matched_count_error_cases.jsonl",
        "mlcnt_correct_lclk_wrong.jsonl",
        "matched_count_summary.json",
        "matched_count_by_subset.csv",
        "matched_count_by_region_case.csv",
        "matched_count_paper_table.csv",
        "matched_count_paper_table.json",
    ),
}
SCENE_FILES = ("scene_consistency_test.json", "scene_consistency_test.csv", "scene_consistency_test_rows.tex")
# keys compared as values, less what says where the inputs were (the paths
# differ; the predictions are split per file here, so their counts agree) and
# the notes' prose (rosetrain's own wording, as for the main evaluator)
UNCOMPARED = {
    "global_click_summary.json": ("main_eval", "metric_notes"),
    "matched_count_summary.json": ("main_eval", "metric_notes"),
    "scene_consistency_test.json": ("notes",),
}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _write_rows(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _answer(record: dict, rng: random.Random) -> dict:
    """The gold answer half the time, else a near miss, a wrong or malformed one, or a failed request."""
    text, error = record["answer"], None
    if rng.random() < 0.5:
        text, error = rng.choice(answer_variants(record, seed=rng.randrange(1 << 30), n_random=4))
    return {"item_id": record["item_id"], "raw_text": text, "model": MODEL, "error": error}


def _score(data: Path, predictions: Path, out: Path, *extra: str) -> dict:
    argv = ["score", "--data", str(data), "--predictions", str(predictions), "--out", str(out), "--bridges"]
    assert main([*argv, "--model", MODEL, *extra]) == 0
    return json.loads((out / "evaluation_summary.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rose_split(tmp_path_factory) -> dict:
    """A generated rose-protocol split, predictions for it (some main T1/T3 items
    left out), and its scored run. A few bridge rows name a source item that is
    not in the split, so the scripts pair them by subset and scene."""
    root = tmp_path_factory.mktemp("rose-analysis")
    data = root / "data"
    assert main(["generate", "--spec", str(ROOT / "generators/rose-protocol.yaml"), "--out", str(data),
                 "--split", "test", "--scenes", "40", "--quiet"]) == 0  # fmt: skip
    for tag in ("global_click_bridge", "matched_local_count_bridge"):
        path = data / f"metadata_test_{tag}.jsonl"
        rows = _rows(path)
        for row in rows[::7]:
            row["source_item_id"] = row["source_click_item_id"] = f"elsewhere-{row['item_id']}"
        _write_rows(path, rows)
    rng = random.Random(31)
    files = {
        name: _rows(data / f"metadata_test{suffix}.jsonl")
        for name, suffix in (
            ("main", ""),
            ("global_click", "_global_click_bridge"),
            ("matched_count", "_matched_local_count_bridge"),
        )
    }
    # some T1 and T3 items unanswered: their bridges pair with nothing
    files["main"] = [r for r in files["main"] if r["task_template"] not in (T1, T3) or rng.random() > 0.15]
    predictions = {name: [_answer(r, rng) for r in rows] for name, rows in files.items()}
    paths = {name: _write_rows(root / f"{name}.jsonl", rows) for name, rows in predictions.items()}
    every = _write_rows(root / "all.jsonl", [r for rows in predictions.values() for r in rows])
    summary = _score(data, every, root / "out", "--allow-partial")
    return {"root": root, "data": data, "predictions": paths, "out": root / "out", "summary": summary}


def test_score_writes_every_file_of_the_analysis_scripts(rose_split):
    out = rose_split["out"]
    for name in [*BRIDGE_FILES["global_click"], *BRIDGE_FILES["matched_count"], *SCENE_FILES]:
        assert (out / name).is_file(), name
    paired = _rows(out / "per_item_global_click_eval.jsonl")
    assert {r["task_template"] for r in paired} == {T1B}
    assert 0 < sum(r["base_gcnt_matched"] for r in paired) < len(paired)  # some T1 items unanswered
    matched = _rows(out / "per_item_matched_count_eval.jsonl")
    assert {r["task_template"] for r in matched} == {T2B}
    # the bridges whose source is elsewhere still pair, by subset and scene
    moved = [r for r in matched if str(r["source_click_item_id"]).startswith("elsewhere-")]
    assert moved and any(r["base_lclk_matched"] for r in moved)


def test_processes_write_the_folder_one_process_writes(rose_split, monkeypatch, tmp_path):
    """Chunks scored in workers and the analyses computed in a process of their
    own: every file, the analyses' too, holds the bytes of one process."""
    from rosetrain.scoring import split as split_module
    from rosetrain.scoring import writer

    cut, forks, run_beside = split_module.line_chunks, [], writer.meanwhile
    monkeypatch.setattr(split_module, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(split_module, "line_chunks", lambda paths, size: cut(paths, size and 20_000))
    monkeypatch.setattr(writer, "FORKED_ROWS", 0)
    monkeypatch.setattr(
        writer, "meanwhile", lambda task, fork, what: forks.append(fork) or run_beside(task, fork, what)
    )
    one, many = rose_split["out"], tmp_path / "out"
    _score(rose_split["data"], rose_split["root"] / "all.jsonl", many, "--allow-partial", "--num-proc", "3")
    assert forks == [True]
    names = sorted(path.name for path in one.iterdir())
    assert names == sorted(path.name for path in many.iterdir())
    for name in names:  # the bridge summaries name the folder's own per-item file
        ours = (many / name).read_bytes().replace(str(many).encode(), str(one).encode())
        assert ours == (one / name).read_bytes(), name


def test_the_two_parts_of_the_analyses_are_the_whole(rose_split):
    """``write_scored_split`` computes the analyses as two parts, at once in two
    processes: joined, they are every analysis computed in one go."""
    from rosetrain.data.release import load_split
    from rosetrain.scoring.analyses import PARTS, analyze
    from rosetrain.scoring.bridges import RowsInMemory
    from rosetrain.scoring.frame import Frame
    from rosetrain.scoring.official_files import RunInfo, expected_items

    rows = _rows(rose_split["out"] / "per_item_eval.jsonl")
    expected = expected_items(load_split(rose_split["data"], "test", bridges=True))
    frame, run = Frame.from_rows(rows), RunInfo(model=MODEL, split="test")
    whole = analyze(expected, frame, RowsInMemory(rows), run)
    first, second = (analyze(expected, frame, RowsInMemory(rows), run, part=n) for n in range(len(PARTS)))
    assert first.bridges and second.bridges and second.consistency is not None
    joined = first + second
    assert list(joined.files().items()) == list(whole.files().items())
    assert json.dumps(joined.summary()) == json.dumps(whole.summary())  # in the same order


def test_the_summary_names_each_figure_as_the_paper_does(rose_split):
    summary, out = rose_split["summary"], rose_split["out"]
    tables = {
        name: json.loads((out / f"{name}_paper_table.json").read_text(encoding="utf-8"))
        for name in BRIDGE_FILES
    }
    assert summary["bridges"] == tables
    assert {"G-Clk", "G-Clk | G-Cnt correct", "Card-Exact", "Loc-Exact | Card-Exact"} <= set(
        tables["global_click"]
    )
    assert {"mL-Cnt", "L-Clk | mL-Cnt correct", "Transfer failure"} <= set(tables["matched_count"])
    scenes = json.loads((out / "scene_consistency_test.json").read_text(encoding="utf-8"))
    assert summary["scene_consistency"] == {MODEL: scenes["models"][0]["macro_equal_subset"]}
    # rosetrain's old bridge names are gone from every output
    assert not {"card", "loc_given_card", "g_clk", "action_retention"} & set(summary)
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert "Loc\\|Card" not in markdown and "Card (T2B PASS)" not in markdown
    assert "L-Clk | mL-Cnt correct" in markdown and "Action Ret." in markdown


def test_a_headline_over_other_subsets_says_so_and_gives_the_tables_figures(rose_split, capsys):
    summary = rose_split["summary"]
    note = summary["headline_note"]
    table2 = summary["paper_metrics"]["table2"]
    assert "rosetrain-attribute" in note and f"G-Cnt {100 * table2['G-Cnt']:.1f}" in note
    assert "Note:" in (rose_split["out"] / "summary.md").read_text(encoding="utf-8")
    _score(
        rose_split["data"], rose_split["root"] / "all.jsonl", rose_split["root"] / "again", "--allow-partial"
    )
    assert "note: the headline differs from the paper tables" in capsys.readouterr().out


def test_real_bridge_rows_agree_without_a_main_run(tmp_path):
    """The v0.1 bridge files alone: every bridge figure that needs no main row."""
    predictions = []
    rng = random.Random(7)
    for path in sorted(ROSE_DIR.glob("metadata_test_*_bridge.jsonl")):
        predictions += [_answer(r, rng) for r in _rows(path)]
    summary = _score(ROSE_DIR, _write_rows(tmp_path / "p.jsonl", predictions), tmp_path / "out")
    gclk, mlcnt = summary["bridges"]["global_click"], summary["bridges"]["matched_count"]
    assert gclk["G-Cnt"] is None and mlcnt["L-Clk"] is None  # nothing to pair with
    # recomputed plainly: item means per subset (a failed request fails), then over the subsets
    for name, table, key in ((gclk, "global_click", "G-Clk"), (mlcnt, "matched_count", "mL-Cnt")):
        rows = _rows(tmp_path / "out" / f"per_item_{table}_eval.jsonl")
        subsets = sorted({r["rose_subset"] for r in rows})
        per_subset = [
            sum(r["pass"] for r in rows if r["rose_subset"] == s) / sum(r["rose_subset"] == s for r in rows)
            for s in subsets
        ]
        assert len(subsets) == 5 and name[key] == round(100 * sum(per_subset) / 5, 1)


# ---- against the official scripts themselves ---------------------------------------


def _analysis_dir() -> Path:
    """The official ``analysis/`` folder beside ``demo/evaluate_rose.py`` (ROSE_EVALUATOR)."""
    evaluator = os.environ.get("ROSE_EVALUATOR")
    if not evaluator or not Path(evaluator).is_file():
        pytest.skip(
            "set ROSE_EVALUATOR to the official evaluate_rose.py to compare with its analysis scripts"
        )
    analysis = Path(evaluator).resolve().parents[1] / "analysis"
    if not (analysis / "evaluate_matched_local_count_bridge.py").is_file():
        pytest.skip(f"{analysis}: no official analysis scripts beside ROSE_EVALUATOR")
    return analysis


def _official(script: str, *args: object) -> None:
    analysis = _analysis_dir()
    subprocess.run(
        [sys.executable, str(analysis / script), *map(str, args)],
        cwd=analysis,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _official_bridges(
    root: Path, metadata: dict[str, Path], predictions: dict[str, Path], main_eval: Path
) -> Path:
    """Run both bridge scripts as their README does, one folder per bridge; returns the folder."""
    scripts = {
        "global_click": "evaluate_global_click_bridge.py",
        "matched_count": "evaluate_matched_local_count_bridge.py",
    }
    out = root / "official"
    for name, script in scripts.items():
        dataset = root / f"dataset-{name}"  # the scripts read DATASET_ROOT/metadata_<split>.jsonl
        dataset.mkdir()
        (dataset / "metadata_test.jsonl").write_bytes(metadata[name].read_bytes())
        _official(script, "--dataset_root", dataset, "--predictions", predictions[name], "--split", "test",
                  "--main_eval", main_eval, "--model", MODEL, "--out_dir", out, "--allow_partial")  # fmt: skip
    return out


def _same_files(theirs: Path, ours: Path, names) -> None:
    for name in names:
        assert (theirs / name).is_file() == (ours / name).is_file(), name
        if not (theirs / name).is_file():
            continue
        if name in UNCOMPARED:
            want, got = (json.loads((d / name).read_text(encoding="utf-8")) for d in (theirs, ours))
            for key in UNCOMPARED[name]:
                want.pop(key), got.pop(key)
            assert got == want, name
        else:  # the same bytes: JSON lines, CSV (BOM, CRLF), JSON, LaTeX rows
            assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


def test_files_equal_the_official_scripts_on_a_generated_split(rose_split):
    _analysis_dir()
    root, data, predictions = rose_split["root"], rose_split["data"], rose_split["predictions"]
    main_out = root / "official-main"
    evaluator = os.environ["ROSE_EVALUATOR"]
    subprocess.run([sys.executable, evaluator, "--dataset_root", str(data), "--predictions", str(predictions["main"]),
                    "--split", "test", "--out_dir", str(main_out), "--allow_partial"],
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    metadata = {
        "global_click": data / "metadata_test_global_click_bridge.jsonl",
        "matched_count": data / "metadata_test_matched_local_count_bridge.jsonl",
    }
    official = _official_bridges(root, metadata, predictions, main_out / "per_item_eval.jsonl")
    _official(
        "analyze_scene_consistency.py",
        main_out / "per_item_eval.jsonl",
        "--split",
        "test",
        "--out_dir",
        official,
    )
    _same_files(
        official,
        rose_split["out"],
        [*BRIDGE_FILES["global_click"], *BRIDGE_FILES["matched_count"], *SCENE_FILES],
    )
    # and the pairing reached every kind: by id, by scene, none
    rows = _rows(official / "per_item_matched_count_eval.jsonl")
    assert {r["base_lclk_matched"] for r in rows} == {0, 1}


def test_files_equal_the_official_scripts_on_the_real_bridge_rows(tmp_path):
    _analysis_dir()
    rng = random.Random(3)
    metadata = {
        "global_click": ROSE_DIR / "metadata_test_global_click_bridge.jsonl",
        "matched_count": ROSE_DIR / "metadata_test_matched_local_count_bridge.jsonl",
    }
    predictions = {name: _write_rows(tmp_path / f"{name}.jsonl", [_answer(r, rng) for r in _rows(path)])
                   for name, path in metadata.items()}  # fmt: skip
    every = _write_rows(tmp_path / "all.jsonl", [r for p in predictions.values() for r in _rows(p)])
    _score(ROSE_DIR, every, tmp_path / "out")
    main_eval = _write_rows(tmp_path / "no-main.jsonl", [])  # the release's main split is not vendored
    official = _official_bridges(tmp_path, metadata, predictions, main_eval)
    _same_files(official, tmp_path / "out", [*BRIDGE_FILES["global_click"], *BRIDGE_FILES["matched_count"]])


def test_a_headline_of_generated_data_alone_has_no_note_of_empty_tables(smoke_split, tmp_path):
    """No ROSE subset at all: the tables are empty, and no note lists their dashes."""
    from rosetrain.data.release import load_split

    split = smoke_split(tmp_path / "smoke", scenes=2)
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"item_id": r["item_id"], "raw_text": r["answer"]}) + "\n"
            for r in load_split(split, "test")
        )
    )
    summary = _score(split, predictions, tmp_path / "out")
    assert summary.get("headline_note") is None
    assert "Note:" not in (tmp_path / "out" / "summary.md").read_text(encoding="utf-8")


def test_compare_carries_every_analysis_figure_with_its_intervals(rose_split, tmp_path):
    """Each bridge's paper columns and the consistency figures, each side with its
    own interval and the paired one; on rows as they are (no failed request),
    each side's value is the one its own run's files report."""
    from rosetrain.reports.compare import compare_runs

    data, runs, summaries = rose_split["data"], [], []
    records = [r for path in sorted(data.glob("metadata_test*.jsonl")) for r in _rows(path)]
    for seed in (1, 2):
        rng = random.Random(seed)
        answers = [{**_answer(record, rng), "error": None} for record in records]
        predictions = _write_rows(tmp_path / f"predictions-{seed}.jsonl", answers)
        summaries.append(_score(data, predictions, tmp_path / f"run-{seed}"))
        runs.append(tmp_path / f"run-{seed}")
    result = compare_runs(*runs, tmp_path / "compare", resamples=300, plots=False)
    for name in ("global_click", "matched_count"):
        figures = result["bridges"][name]["figures"]
        assert list(figures) == [key for key in summaries[0]["bridges"][name] if key != "Model"]
        for key, entry in figures.items():
            for side, summary in zip(("before", "after"), summaries):
                value = entry[side]
                assert summary["bridges"][name][key] == (None if value is None else round(100 * value, 1)), (
                    key
                )
                low, high = entry[f"ci95_{side}"]
                assert value is None or low <= value <= high, (name, key, side)
            assert entry["ci95"][0] is None or entry["ci95"][0] <= entry["delta"] <= entry["ci95"][1]
    consistency = result["scene_consistency"]["figures"]
    for side, summary in zip(("before", "after"), summaries):
        own = summary["scene_consistency"][MODEL]
        for key in ("T1", "L-Cnt|T1", "L-Clk|T1", "V-Clk|T1", "Excl-CS|T1", "Action Ret."):
            assert consistency[key][side] == pytest.approx(own[key], abs=1e-12), key
    report = (tmp_path / "compare" / "report.md").read_text(encoding="utf-8")
    for title in ("## Global-click bridge", "## Matched-count bridge", "## Same-scene consistency"):
        assert title in report
    assert "| G-Clk where G-Cnt passed |" in report and "| Transfer failure (" in report


def test_compare_leaves_out_an_analysis_one_run_lacks(rose_split, tmp_path):
    import shutil

    from rosetrain.reports.compare import compare_runs

    other = tmp_path / "other"
    shutil.copytree(rose_split["out"], other)
    (other / "per_item_matched_count_eval.jsonl").unlink()
    result = compare_runs(rose_split["out"], other, None, resamples=50, plots=False)
    assert list(result["bridges"]) == ["global_click"]
    assert result["bridges"]["global_click"]["figures"]["G-Clk"]["delta"] == 0
