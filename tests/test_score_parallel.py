"""Scoring a split in several processes gives the bytes one process gives, and
the same errors (naming the file and line), whatever the chunks."""

from __future__ import annotations

import json
import os
import random
import re
import signal
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.data.predictions import read_predictions
from rosetrain.data.release import line_chunks
from rosetrain.scoring import split as split_module
from rosetrain.scoring.batch import check_coverage
from rosetrain.scoring.lines import MappedLines
from rosetrain.scoring.split import score_split

SPLIT_FILES = ("per_item_eval.jsonl", "error_cases.jsonl", "evaluation_summary.json", "table1_row.txt")


@pytest.fixture(autouse=True)
def parallel_at_any_size(monkeypatch):
    """Small splits are scored in one process; these tests want the processes."""
    monkeypatch.setattr(split_module, "PARALLEL_BYTES", 0)


@pytest.fixture(scope="module")
def split(tmp_path_factory, smoke_split) -> tuple[Path, Path]:
    """A smoke split and predictions: gold, wrong, prose, empty and API errors."""
    data = smoke_split(tmp_path_factory.mktemp("parallel") / "data", scenes=12)
    rng = random.Random(0)
    rows = []
    for line in (data / "metadata_test.jsonl").read_text().splitlines():
        record = json.loads(line)
        answer = rng.choice([record["answer"], "COUNT(1)", "CLICK(R1,C1); DONE", "I see five.", ""])
        error = "HTTP 500" if rng.random() < 0.05 else None
        rows.append({"item_id": record["item_id"], "raw_text": answer, "model": "m", "error": error})
    predictions = data / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data, predictions


def test_chunks_cut_whole_lines_and_cover_the_file(split):
    data, _ = split
    path = data / "metadata_test.jsonl"
    chunks = line_chunks([path], 5000)
    assert len(chunks) > 5
    body = path.read_bytes()
    assert b"".join(body[c.start : c.end] for c in chunks) == body
    assert all(body[c.end - 1 : c.end] == b"\n" for c in chunks)
    assert line_chunks([path], None) == [chunks[0].__class__(path, 0, len(body))]


def test_many_processes_give_one_process_bytes(split, tmp_path):
    data, predictions = split
    preds = read_predictions(predictions)
    one = score_split(data, "test", None, preds, "m", num_proc=1)
    many = score_split(data, "test", None, preds, "m", num_proc=3, chunk_bytes=5000)
    assert isinstance(many.lines, MappedLines)  # the workers' text, in shared memory
    assert list(many.lines) == one.lines
    assert many.expected == one.expected
    assert many.frame.numbers.tobytes() == one.frame.numbers.tobytes()
    assert {k: list(v) for k, v in many.frame.labels.items()} == {
        k: list(v) for k, v in one.frame.labels.items()
    }
    for n in (1, 3):  # the command, end to end (one chunk: the split is under 8 MB)
        args = [
            "score",
            "--data",
            str(data),
            "--predictions",
            str(predictions),
            "--out",
            str(tmp_path / str(n)),
        ]
        assert cli_main([*args, "--num-proc", str(n)]) == 0
    for name in SPLIT_FILES:
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "3" / name).read_bytes(), name


def test_the_workers_fingerprint_is_the_splits_with_any_of_its_images_on_disk(split, tmp_path):
    """The workers hash the files, the main process the images the chunks name:
    together the fingerprint of the split read whole, whether every image, some
    or none of them are there."""
    import shutil

    from rosetrain.data.release import IMAGES_PART, split_fingerprint

    data, predictions = split
    preds = read_predictions(predictions)
    bare, some = tmp_path / "bare", tmp_path / "some"
    for folder in (bare, some):
        folder.mkdir()
        shutil.copy(data / "metadata_test.jsonl", folder)
    shutil.copytree(data / "images", some / "images")
    images = sorted(path for path in (some / "images").rglob("*") if path.is_file())
    for image in images[::3]:
        image.unlink()
    found = {}
    for folder in (data, bare, some):
        whole = split_fingerprint(folder, "test")
        assert (
            score_split(folder, "test", None, preds, "m", num_proc=3, chunk_bytes=5000).fingerprint == whole
        )
        found[folder] = whole
    assert IMAGES_PART not in found[bare] and len(set(found.values())) == 3


def test_a_callers_process_keeps_its_own_settings(split, tmp_path):
    """Only the command line's own process ends after a run: a caller of
    main(argv) keeps its collector and NumPy's huge pages as they were."""
    import gc

    import numpy

    data, predictions = split
    frozen, huge = gc.get_freeze_count(), numpy._core.multiarray._set_madvise_hugepage(True)
    try:
        argv = ["score", "--data", str(data), "--predictions", str(predictions), "--out", str(tmp_path / "o")]
        assert cli_main(argv) == 0
        assert gc.get_freeze_count() == frozen and gc.isenabled()
        assert numpy._core.multiarray._set_madvise_hugepage(huge) is True
    finally:
        numpy._core.multiarray._set_madvise_hugepage(huge)


def _broken_copy(data: Path, out: Path, line: int, change) -> Path:
    out.mkdir()
    lines = (data / "metadata_test.jsonl").read_text().splitlines()
    lines[line - 1] = change(lines[line - 1], lines)
    (out / "metadata_test.jsonl").write_text("\n".join(lines) + "\n")
    return out


def _with(field, value):
    return lambda line, lines: json.dumps({**json.loads(line), field: value})


@pytest.mark.parametrize(
    "line, change, message",
    [
        (40, _with("rows", 0), r"metadata_test.jsonl:40: rows: expected an integer >= 1"),
        (41, lambda line, lines: line[:-5], r"metadata_test.jsonl:41"),
        (
            45,
            lambda line, lines: lines[2],
            r"metadata_test.jsonl:45: item_id .* already at metadata_test.jsonl:3",
        ),
    ],
)
def test_a_bad_line_in_a_later_chunk_is_named_as_one_process_names_it(split, tmp_path, line, change, message):
    data, predictions = split
    broken = _broken_copy(data, tmp_path / "broken", line, change)
    preds = read_predictions(predictions)
    for num_proc in (1, 3):
        with pytest.raises(RosetrainError, match=message):
            score_split(broken, "test", None, preds, "m", num_proc=num_proc, chunk_bytes=5000)


def test_scored_split_carries_the_fingerprint_and_every_expected_item(split):
    from rosetrain.data.release import split_fingerprint

    data, predictions = split
    preds = read_predictions(predictions)
    fewer = dict(list(preds.items())[:-3])
    for num_proc in (1, 3):
        scored = score_split(data, "test", None, fewer, "m", num_proc=num_proc, chunk_bytes=5000)
        assert scored.fingerprint == split_fingerprint(data, "test")
        assert scored.frame.n == len(fewer) and len(scored.expected["item_id"]) == len(preds)
        with pytest.raises(RosetrainError, match="3 of .* items have no prediction"):
            check_coverage(scored.expected["item_id"], fewer, allow_partial=False)
        check_coverage(scored.expected["item_id"], fewer, allow_partial=True)


def test_the_command_names_missing_unknown_and_other_data_predictions(split, tmp_path, capsys):
    data, predictions = split
    rows = predictions.read_text().splitlines()
    args = ["score", "--data", str(data), "--out", str(tmp_path / "o"), "--num-proc", "2"]
    cases = {
        "fewer.jsonl": ("\n".join(rows[:-3]), "3 of .* items have no prediction"),
        "extra.jsonl": (
            "\n".join([*rows, '{"item_id": "nope", "raw_text": ""}']),
            "1 predictions name items",
        ),
        "other.jsonl": (
            "\n".join(json.dumps({**json.loads(r), "data_fingerprint": "sha256:" + "0" * 64}) for r in rows),
            "holds predictions made on data 000000000000",
        ),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text + "\n")
        assert cli_main([*args, "--predictions", str(tmp_path / name)]) != 0
        assert re.search(message, capsys.readouterr().err), name


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--num-proc", "0"], r"argument --num-proc: expected an integer in \[1, "),
        (["--digits", "-1"], r"argument --digits: expected an integer in \[0, 10\]"),
        (["--model", "m\udcff"], "--model: .* is not printable text"),
        (["--display-name", "a\nb"], "--display-name: .* is not printable text"),
    ],
)
def test_bad_flags_are_refused(split, tmp_path, capsys, flags, message):
    data, predictions = split
    args = ["score", "--data", str(data), "--predictions", str(predictions), "--out", str(tmp_path / "o")]
    assert cli_main([*args, *flags]) != 0
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


def test_an_empty_split_is_an_error(tmp_path, capsys):
    (tmp_path / "metadata_test.jsonl").write_text("")
    (tmp_path / "p.jsonl").write_text("")
    args = [
        "score",
        "--data",
        str(tmp_path),
        "--predictions",
        str(tmp_path / "p.jsonl"),
        "--out",
        str(tmp_path / "o"),
    ]
    assert cli_main(args) != 0
    assert "has no items" in capsys.readouterr().err


def _killed(chunk, *_):
    os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would


def test_a_worker_that_dies_fails_the_run_with_one_error(split, monkeypatch):
    data, predictions = split
    monkeypatch.setattr(split_module, "_score_chunk", _killed)
    with pytest.raises(RosetrainError, match="a scoring worker process died"):
        score_split(data, "test", None, read_predictions(predictions), "m", num_proc=2, chunk_bytes=5000)
