"""rosetrain replaces only files it wrote: one ownership marker per output
folder (``.rosetrain.json``, kept by ``rosetrain.core.io.output_lock``), and no
lock file left behind. Every destructive path here works inside tmp_path."""

from __future__ import annotations

import json
import os
import signal
import stat
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
    said = "Data not checked: " + str(old) + " names no data fingerprint"
    assert capsys.readouterr().out.startswith("WARNING: " + said)
    assert said in (tmp_path / "cmp" / "report.md").read_text().splitlines()[2]
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["data_unchecked"] == [str(old)]
    # an empty fingerprint names no data either
    summary["data_fingerprint"] = ""
    (old / "evaluation_summary.json").write_text(json.dumps(summary))
    assert cli_main(command) == 2 and "names no data fingerprint" in capsys.readouterr().err


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


# --- the marker itself: a regular file in the folder, or nothing is changed ---------------------

BOUND_S = 30  # a refusal reads no more than the marker: far less than this; a FIFO opened would wait for ever


class Hung(Exception):
    pass


def _alarm(signum, frame):
    raise Hung


def bounded(argv: list[str]) -> int | str:
    """cli_main(argv), or "hung" when it has not returned within BOUND_S."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(BOUND_S)
    try:
        return cli_main(argv)
    except Hung:
        return "hung"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def tree(root: Path) -> dict[str, str]:
    """Every entry under root, links and FIFOs as themselves (never followed or opened)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            entry = Path(folder) / name
            mode = entry.lstat().st_mode
            if stat.S_ISLNK(mode):
                found[str(entry.relative_to(root))] = "-> " + os.readlink(entry)
            elif stat.S_ISREG(mode):
                found[str(entry.relative_to(root))] = entry.read_bytes().hex()
            else:
                found[str(entry.relative_to(root))] = f"mode {mode:o}"
    return found


@pytest.fixture(scope="module")
def scored_run(split_dir, predictions, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("scored") / "run"
    command = ["score", "--data", str(split_dir), "--predictions", str(predictions), "--out", str(run)]
    assert cli_main(command) == 0
    return run


# the user's files each command would replace if it trusted a marker naming them
USERS_FILES = {
    "score": ["summary.md", "evaluation_summary.json"],
    "eval": ["summary.md", "predictions.jsonl"],
    "compare": ["report.md", "compare.json"],
    "export-lmms-eval": ["utils.py", "rosetrain_test.yaml"],
    "tiny-model": ["config.json", "model.safetensors"],
}


def bad_marker(kind: str, out: Path, names: list[str]) -> None:
    """Make ``out/.rosetrain.json`` of this kind; a genuine marker naming ``names``
    is written by rosetrain itself into a folder beside ``out``."""
    from rosetrain.core.io import claim_outputs

    marker = out / MARKER_NAME
    if kind == "a link to another run's genuine marker":
        other = out.parent / "other-run"
        with output_lock(other):
            claim_outputs(*(other / name for name in names))
        assert set(names) <= set(json.loads((other / MARKER_NAME).read_text())["files"])
        marker.symlink_to(other / MARKER_NAME)
    elif kind == "a dangling link":
        marker.symlink_to(out.parent / "gone.json")
    elif kind == "a FIFO":
        os.mkfifo(marker)
    elif kind == "a folder":
        marker.mkdir()
        (marker / "files").write_text(json.dumps(names))


# each kind, and how the refusal names it
MARKER_KINDS = {
    "a link to another run's genuine marker": "a symbolic link",
    "a dangling link": "a symbolic link",
    "a FIFO": "a named pipe (FIFO)",
    "a folder": "a folder",
}


@pytest.mark.parametrize("kind", MARKER_KINDS)
@pytest.mark.parametrize("command", list(USERS_FILES))
def test_a_marker_that_is_not_a_regular_file_changes_nothing(
    command, kind, split_dir, predictions, scored_run, tmp_path, capsys, monkeypatch, command_line
):
    """score, eval, compare, export-lmms-eval and tiny-model: a marker that is a
    link (even to a genuine one naming the user's files), a FIFO (reading it would
    wait for ever) or a folder is refused in one line naming it, within BOUND_S,
    and the folder stays byte for byte as it was."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "out"
    out.mkdir()
    for name in USERS_FILES[command]:
        (out / name).write_text(f"the user's {name}\n")
    bad_marker(kind, out, USERS_FILES[command])
    before = tree(tmp_path)
    code = bounded(command_line(command, out, split_dir, predictions, scored_run))
    err = capsys.readouterr().err
    assert code == 2, f"exit {code}: {err}"
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{out / MARKER_NAME}: {MARKER_KINDS[kind]}" in err
    assert tree(tmp_path) == before


def test_a_marker_above_the_size_bound_is_refused(tmp_path, monkeypatch):
    import rosetrain.core.io

    monkeypatch.setattr(rosetrain.core.io, "MARKER_LIMIT", 64)
    (tmp_path / MARKER_NAME).write_text(json.dumps({"written_by": "rosetrain", "files": ["x" * 80]}))
    with pytest.raises(RosetrainError, match=r"\.rosetrain\.json: a file of more than 64 bytes"):
        with output_lock(tmp_path):
            pass


@pytest.mark.parametrize("temps", [["../outside.txt"], ["sub/x.tmp"], [MARKER_NAME], "x"])
def test_a_marker_naming_temps_outside_the_folder_is_corrupt(tmp_path, temps):
    (tmp_path / "outside.txt").write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER_NAME).write_text(json.dumps({"written_by": "rosetrain", "files": [], "temps": temps}))
    with pytest.raises(RosetrainError, match="corrupt rosetrain marker"):
        with output_lock(out):
            pass
    assert (tmp_path / "outside.txt").read_text() == "keep"


def test_the_markers_own_temp_is_replaced_when_a_file_and_refused_otherwise(tmp_path):
    """``.rosetrain.json.tmp`` is the marker's temp, written only by the folder's
    holder: a killed write's is removed when the folder is taken; a FIFO or a link
    there is refused, never opened or written through."""
    from rosetrain.core.io import MARKER_TEMP

    (tmp_path / MARKER_TEMP).write_text('{"half')
    with output_lock(tmp_path):
        assert not (tmp_path / MARKER_TEMP).exists()
        atomic_write(tmp_path / "a.txt", "x")
    os.mkfifo(tmp_path / MARKER_TEMP)
    with output_lock(tmp_path), pytest.raises(RosetrainError, match=r"json\.tmp: a named pipe"):
        atomic_write(tmp_path / "b.txt", "x")
    assert stat.S_ISFIFO((tmp_path / MARKER_TEMP).lstat().st_mode) and not (tmp_path / "b.txt").exists()


def test_a_lock_file_that_is_a_link_adopts_nothing(tmp_path):
    """An older rosetrain's folder is known by its lock file: a link there is not one."""
    other = tmp_path / "other"
    other.mkdir()
    (other / ".rosetrain.lock").write_text("pid 1")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".rosetrain.lock").symlink_to(other / ".rosetrain.lock")
    (out / "summary.md").write_text("mine")
    with output_lock(out), pytest.raises(RosetrainError, match="did not write it"):
        atomic_write(out / "summary.md", "rosetrain's")
    assert (out / "summary.md").read_text() == "mine"


# --- cleanup after a kill: only the temps the marker names ---------------------------------------


def users_lookalikes(out: Path) -> None:
    """Files of the user's named as rosetrain's temps are (``.<name>.<digits>-<digits>.tmp``)."""
    (out / ".notes.2024-06.tmp").write_text("the user's notes\n")
    (out / ".backup.2024-06.tmp").mkdir()
    (out / ".backup.2024-06.tmp" / "data.csv").write_text("the user's backup\n")
    (out / ".summary.md.1-2.tmp").write_text("the user's, named as a temp of summary.md\n")


def recorded_leftover(out: Path) -> Path:
    """A temp a killed run left, named in the marker (the record is made before the temp)."""
    temp = out / ".report.md.99999-1.tmp"
    temp.write_text("half")
    (out / MARKER_NAME).write_text(json.dumps({"written_by": "rosetrain", "files": [], "temps": [temp.name]}))
    return temp


@pytest.mark.parametrize("command", ["score", "eval", "compare"])
def test_cleanup_after_a_kill_removes_only_temps_the_marker_names(
    command, split_dir, predictions, scored_run, tmp_path, capsys, command_line
):
    from rosetrain.evaluation.evaluate import evaluate

    class Oracle:
        name = "oracle"

        def generate(self, records):
            return [(r["answer"], None) for r in records]

    out = tmp_path / "out"
    out.mkdir()
    users_lookalikes(out)
    temp = recorded_leftover(out)
    before = {k: v for k, v in tree(out).items() if k != temp.name and k != MARKER_NAME}
    if command == "eval":
        evaluate("oracle", split_dir, out_dir=out, runner=Oracle(), progress=False)
    else:
        assert bounded(command_line(command, out, split_dir, predictions, scored_run)) == 0
    after = tree(out)
    assert not temp.exists()
    assert {k: v for k, v in after.items() if k in before} == before  # every file of the user's, as it was
    assert "temps" not in json.loads((out / MARKER_NAME).read_text())


def test_compare_names_models_and_data_and_says_first_when_settings_differ(split_dir, tmp_path, capsys):
    """Two eval runs of 48 and 64 new tokens: compared, with that said first on
    the console and in the report; every report names its models and its data."""
    from rosetrain.evaluation.evaluate import evaluate

    class Oracle:
        name = "oracle"

        def generate(self, records):
            return [(r["answer"], None) for r in records]

    evaluate("oracle", split_dir, out_dir=tmp_path / "a", runner=Oracle(), progress=False)
    evaluate("oracle", split_dir, out_dir=tmp_path / "b", runner=Oracle(), progress=False)
    for run, tokens in (("a", 48), ("b", 64)):  # as two transformers runs would record them
        record = json.loads((tmp_path / run / "eval_run.json").read_text())
        record.update(runner="transformers", max_new_tokens=tokens)
        (tmp_path / run / "eval_run.json").write_text(json.dumps(record))
    command = [
        "compare",
        str(tmp_path / "a"),
        str(tmp_path / "b"),
        "--out",
        str(tmp_path / "cmp"),
        "--no-plots",
    ]
    assert cli_main(command) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        "WARNING: The runs were made with different settings (max_new_tokens 48 before, 64 after)"
    )
    report = (tmp_path / "cmp" / "report.md").read_text().splitlines()
    assert report[2].startswith("**The runs were made with different settings")
    assert f"models: before `oracle`, after `oracle`; data: `{split_dir}`" in report
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert result["settings_differ"] == {"max_new_tokens": [48, 64]} and result["data"]["data"] == str(
        split_dir
    )
    # summaries written before they named their data: the eval runs' own record names it
    for run in ("a", "b"):
        summary = json.loads((tmp_path / run / "evaluation_summary.json").read_text())
        summary.pop("data")
        (tmp_path / run / "evaluation_summary.json").write_text(json.dumps(summary))
    assert cli_main([*command[:3], "--out", str(tmp_path / "cmp2"), "--no-plots"]) == 0
    report = (tmp_path / "cmp2" / "report.md").read_text()
    assert f"data: `{split_dir}`" in report and "not recorded" not in report
