"""rosetrain replaces only files it wrote: one ownership marker per output
folder (``.rosetrain.json``, kept by ``rosetrain.core.io.output_lock``), and no
lock file left behind. Every destructive path here works inside tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import MARKER_NAME, atomic_write, output_lock


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory, smoke_split) -> Path:
    return smoke_split(tmp_path_factory.mktemp("split") / "smoke")


@pytest.fixture(scope="module")
def predictions(split_dir, tmp_path_factory) -> Path:
    rows = [json.loads(line) for line in (split_dir / "metadata_test.jsonl").read_text().splitlines()]
    path = tmp_path_factory.mktemp("preds") / "preds.jsonl"
    path.write_text(
        "".join(json.dumps({"item_id": r["item_id"], "raw_text": r["answer"]}) + "\n" for r in rows)
    )
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_the_marker_refuses_a_foreign_file_and_records_its_own(tmp_path):
    (tmp_path / "mine.txt").write_text("the user's")
    with output_lock(tmp_path):
        atomic_write(tmp_path / "new.txt", "rosetrain's")
        with pytest.raises(RosetrainError, match=r"mine.txt: already exists and rosetrain did not write it"):
            atomic_write(tmp_path / "mine.txt", "rosetrain's")
    assert (tmp_path / "mine.txt").read_text() == "the user's"
    assert json.loads((tmp_path / MARKER_NAME).read_text())["files"] == ["new.txt"]
    with output_lock(tmp_path):  # a rerun replaces what it wrote
        atomic_write(tmp_path / "new.txt", "again")
    assert (tmp_path / "new.txt").read_text() == "again"
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER_NAME, "mine.txt", "new.txt"]  # no lock file


def test_a_symlink_in_a_held_folder_is_never_written_through(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "summary.md").symlink_to(outside)
    with output_lock(tmp_path / "out"), pytest.raises(RosetrainError, match="did not write it"):
        atomic_write(tmp_path / "out" / "summary.md", "x")
    assert outside.read_text() == "keep"


def test_a_corrupt_marker_changes_nothing(tmp_path):
    (tmp_path / MARKER_NAME).write_text("{not json")
    with pytest.raises(RosetrainError, match="corrupt rosetrain marker"):
        with output_lock(tmp_path):
            pass


def test_a_folder_of_an_older_rosetrain_is_adopted(tmp_path):
    (tmp_path / ".rosetrain.lock").write_text("pid 1")  # what rosetrain wrote before the marker
    (tmp_path / "summary.md").write_text("old")
    with output_lock(tmp_path):
        atomic_write(tmp_path / "summary.md", "new")
    assert (tmp_path / "summary.md").read_text() == "new"


def test_score_never_replaces_an_official_evaluators_files(split_dir, predictions, tmp_path, capsys):
    out = tmp_path / "official"
    out.mkdir()
    (out / "evaluation_summary.json").write_text('{"by": "the official evaluator"}')
    (out / "per_item_eval.jsonl").write_text("{}\n")
    before = snapshot(out)
    command = ["score", "--data", str(split_dir), "--predictions", str(predictions), "--out", str(out)]
    assert cli_main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rosetrain did not write it" in err
    assert snapshot(out) == before
    # into its own folder, twice: the second run replaces what the first wrote
    mine = tmp_path / "mine"
    assert cli_main([*command[:-1], str(mine)]) == 0
    assert cli_main([*command[:-1], str(mine)]) == 0
    assert not (mine / ".rosetrain.lock").exists()
    assert "evaluation_summary.json" in json.loads((mine / MARKER_NAME).read_text())["files"]


def test_eval_and_compare_never_replace_foreign_files(split_dir, tmp_path, capsys):
    from rosetrain.evaluation.evaluate import evaluate
    from rosetrain.reports.compare import compare_runs

    class Oracle:
        name = "oracle"

        def generate(self, records):
            return [(r["answer"], None) for r in records]

    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.md").write_text("my notes")
    with pytest.raises(RosetrainError, match="summary.md: already exists and rosetrain did not write it"):
        evaluate("oracle", split_dir, out_dir=out, runner=Oracle(), progress=False)
    assert (out / "summary.md").read_text() == "my notes"
    run = tmp_path / "ok"
    evaluate("oracle", split_dir, out_dir=run, runner=Oracle(), progress=False)
    cmp = tmp_path / "cmp"
    cmp.mkdir()
    (cmp / "report.md").write_text("my report")
    with pytest.raises(RosetrainError, match="report.md: already exists"):
        compare_runs(run, run, out_dir=cmp, plots=False)
    assert (cmp / "report.md").read_text() == "my report"


def test_export_lmms_eval_never_replaces_foreign_files(split_dir, tmp_path, capsys):
    task = tmp_path / "task"
    task.mkdir()
    (task / "utils.py").write_text("# my own module")
    assert cli_main(["export-lmms-eval", "--data", str(split_dir), "--out", str(task)]) == 2
    assert "utils.py: already exists and rosetrain did not write it" in capsys.readouterr().err
    assert (task / "utils.py").read_text() == "# my own module"
    assert not (task / "docs_test.jsonl").exists()


def test_eval_never_appends_to_a_foreign_predictions_file(split_dir, tmp_path):
    from rosetrain.evaluation.evaluate import evaluate

    out = tmp_path / "run"
    out.mkdir()
    (out / "predictions.jsonl").write_text('{"my": "own rows"}\n')

    class Oracle:
        name = "oracle"

        def generate(self, records):
            return [(r["answer"], None) for r in records]

    with pytest.raises(RosetrainError, match="predictions.jsonl: already exists and rosetrain did not write"):
        evaluate("oracle", split_dir, out_dir=out, runner=Oracle(), progress=False)
    assert (out / "predictions.jsonl").read_text() == '{"my": "own rows"}\n'


def test_compare_refuses_a_run_that_names_no_data_unless_told(split_dir, tmp_path, capsys):
    from rosetrain.evaluation.evaluate import evaluate

    class Oracle:
        name = "oracle"

        def generate(self, records):
            return [(r["answer"], None) for r in records]

    evaluate("oracle", split_dir, out_dir=tmp_path / "a", runner=Oracle(), progress=False)
    old = tmp_path / "old"  # the same run, as a rosetrain older than fingerprints scored it
    old.mkdir()
    for name in ("per_item_eval.jsonl", "evaluation_summary.json"):
        (old / name).write_bytes((tmp_path / "a" / name).read_bytes())
    summary = json.loads((old / "evaluation_summary.json").read_text())
    del summary["data_fingerprint"]
    (old / "evaluation_summary.json").write_text(json.dumps(summary))
    command = ["compare", str(tmp_path / "a"), str(old), "--out", str(tmp_path / "cmp"), "--no-plots"]
    assert cli_main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names no data fingerprint" in err and "--same-data" in err
    assert not (tmp_path / "cmp" / "compare.json").exists()
    assert cli_main([*command, "--same-data"]) == 0


def test_export_samples_are_matched_by_their_doc_not_by_position_alone(split_dir, tmp_path):
    from rosetrain.integrations.lmms_eval import export_task, predictions_from_samples

    task = tmp_path / "task"
    export_task(split_dir, "test", task)
    docs = [json.loads(line) for line in (task / "docs_test.jsonl").read_text().splitlines()]

    def samples(rows) -> Path:
        path = tmp_path / "x_samples_rosetrain_test.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return path

    def sample(doc_id, doc):  # as lmms-eval logs it: the doc (images left out) and its target
        return {
            "doc_id": doc_id,
            "doc": {"item_id": doc["item_id"]},
            "target": doc["answer"],
            "filtered_resps": ["x"],
        }

    good = predictions_from_samples(samples([sample(i, d) for i, d in enumerate(docs)]), task)
    assert [row["item_id"] for row in good] == [d["item_id"] for d in docs]
    swapped = [sample(0, docs[1]), sample(1, docs[0])]  # another export's order of the same items
    with pytest.raises(RosetrainError, match="another export"):
        predictions_from_samples(samples(swapped), task)
    with pytest.raises(RosetrainError, match="already answered"):
        predictions_from_samples(samples([sample(0, docs[0]), sample(0, docs[0])]), task)
    with pytest.raises(RosetrainError, match="neither its doc nor its target"):
        predictions_from_samples(samples([{"doc_id": 0, "filtered_resps": ["x"]}]), task)
