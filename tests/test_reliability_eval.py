"""Evaluation you can trust: failed requests are not wrong answers, results know
their data, one writer per run folder, every failure one readable line, and a
killed eval resumes to the same result."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai_server import serve_in_subprocess

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.evaluation.evaluate import evaluate
from rosetrain.reports.compare import compare_runs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory, smoke_split) -> Path:
    return smoke_split(tmp_path_factory.mktemp("split") / "smoke")


def eval_command(base_url: str, data: Path, out: Path, *options: str, model: str = "fake") -> list[str]:
    """`rosetrain eval` flags (without the command's name) against an OpenAI-style endpoint."""
    command = ["--runner", "openai", "--base-url", base_url, "--model", model, "--data", str(data)]
    return [*command, "--out", str(out), "--no-progress", *options]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class OracleRunner:
    """Answers gold; with ``fail_every``, every such item's request fails instead."""

    def __init__(self, name: str = "oracle", fail_every: int = 0):
        self.name, self.fail_every, self.seen = name, fail_every, 0

    def generate(self, records):
        answers = []
        for record in records:
            self.seen += 1
            failed = self.fail_every and self.seen % self.fail_every == 0
            answers.append((None, "HTTP 500: test failure") if failed else (record["answer"], None))
        return answers


def free_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- 1. a failed request is not a wrong answer -----------------------------------------------


def test_errored_items_leave_the_figures_and_are_counted_apart(split_dir, tmp_path):
    summary = evaluate(
        "oracle",
        split_dir,
        out_dir=tmp_path / "run",
        max_error_rate=1.0,
        runner=OracleRunner(fail_every=3),
        progress=False,
    )
    # Every answered item is gold: errors must not turn into failures.
    assert summary["avg_pass"] == 1.0 and summary["gap"] == 0.0
    assert summary["n_errors"] == 7 and summary["n"] == 14 and summary["n_expected"] == 21
    assert summary["coverage_rate"] == pytest.approx(14 / 21)
    assert summary["error_examples"][0]["error"] == "HTTP 500: test failure"
    assert "**7 items errored**" in (tmp_path / "run" / "summary.md").read_text()
    # The per-item file keeps them, scored as the official evaluator does (a failure).
    errored = [r for r in read_jsonl(tmp_path / "run" / "per_item_eval.jsonl") if r["api_error"]]
    assert len(errored) == 7 and not any(r["pass"] for r in errored)


def test_library_eval_fails_when_errors_remain_unless_allowed(split_dir, tmp_path):
    with pytest.raises(
        RosetrainError,
        match=r"7 of 21 items \(33.3%\) got no answer after "
        r"retries .*max_error_rate=0.333",
    ):
        evaluate(
            "oracle", split_dir, out_dir=tmp_path / "a", runner=OracleRunner(fail_every=3), progress=False
        )
    # The results were written before the error, and a rerun asks only the errored items.
    assert json.loads((tmp_path / "a" / "evaluation_summary.json").read_text())["n_errors"] == 7
    again = OracleRunner()
    summary = evaluate("oracle", split_dir, out_dir=tmp_path / "a", runner=again, progress=False)
    assert again.seen == 7 and summary["n_errors"] == 0 and summary["avg_pass"] == 1.0


def test_compare_leaves_errored_items_out_of_the_pairs(split_dir, tmp_path):
    evaluate("oracle", split_dir, out_dir=tmp_path / "clean", runner=OracleRunner(), progress=False)
    evaluate(
        "oracle",
        split_dir,
        out_dir=tmp_path / "flaky",
        max_error_rate=1.0,
        runner=OracleRunner(fail_every=3),
        progress=False,
    )
    result = compare_runs(tmp_path / "clean", tmp_path / "flaky", tmp_path / "cmp", plots=False)
    assert result["errored_excluded"] == {"before": 0, "after": 7, "pairs": 7}
    assert result["n_items"] == 14
    for key in ("avg_pass", "action_avg", "gap"):
        assert result[key]["delta"] == 0.0 and result[key]["ci95"] == [0.0, 0.0]
    assert "**7 items left out**" in (tmp_path / "cmp" / "report.md").read_text()


def test_eval_cli_against_a_flaky_endpoint_exits_non_zero_in_one_line(split_dir, tmp_path, capsys):
    out = tmp_path / "run"
    with serve_in_subprocess(split_dir, fail_every=3) as base_url:
        args = [
            "eval",
            *eval_command(base_url, split_dir, out, "--max-retries", "1", "--request-timeout", "5"),
        ]
        assert cli_main(args) == 2
        captured = capsys.readouterr()
        # 7 items always fail with 500 and one is refused with 400
        assert captured.err.count("\n") == 1
        assert captured.err.startswith("rosetrain eval: error: 8 of 21 items (38.1%)")
        assert "ERRORS: 8 items have no answer" in captured.out
        assert "coverage 61.9%" in captured.out
        assert cli_main(args + ["--max-error-rate", "0.4"]) == 0
    summary = json.loads((out / "evaluation_summary.json").read_text())
    assert summary["n_errors"] == 8 and summary["n"] == 13


def test_an_unreachable_endpoint_fails_at_once_in_one_line(split_dir, tmp_path, capsys):
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    code = cli_main(["eval", *eval_command(base_url, split_dir, tmp_path / "run", model="m")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "cannot reach 127.0.0.1" in err and "connection refused" in err
    assert (
        not (tmp_path / "run" / "predictions.jsonl").exists()
        or (tmp_path / "run" / "predictions.jsonl").read_text() == ""
    )


def test_an_endpoint_that_goes_away_mid_run_stops_the_run(split_dir, tmp_path):
    """Connection refused after the start: the run stops with one error instead
    of recording a failure for every remaining item."""
    from rosetrain.runners.openai_runner import EndpointUnreachable, OpenAIRunner

    with serve_in_subprocess(split_dir) as base_url:
        runner = OpenAIRunner("m", base_url=base_url, backoff_s=0.01)
    # the server has stopped: its port now refuses connections
    records = [
        {**r, "image": str(split_dir / r["image"])} for r in read_jsonl(split_dir / "metadata_test.jsonl")[:2]
    ]
    with pytest.raises(EndpointUnreachable, match="connection refused, 3 attempts"):
        runner.generate(records)
    runner.close()


# --- 2. results know what data they belong to --------------------------------------------------


@pytest.fixture(scope="module")
def other_split_dir(tmp_path_factory, smoke_split) -> Path:
    """Same spec, another seed: the same item ids, other scenes."""
    return smoke_split(tmp_path_factory.mktemp("other") / "smoke", seed=11)


def test_split_fingerprint_names_the_metadata_bytes(split_dir, other_split_dir):
    from rosetrain.data.release import split_fingerprint

    def ids(folder):
        return [r["item_id"] for r in read_jsonl(folder / "metadata_test.jsonl")]

    assert ids(split_dir) == ids(other_split_dir)  # why ids cannot tell datasets apart
    assert split_fingerprint(split_dir, "test").startswith("sha256:")
    assert split_fingerprint(split_dir, "test") != split_fingerprint(other_split_dir, "test")
    # a folder and its one metadata file are the same data
    assert split_fingerprint(split_dir, "test") == split_fingerprint(
        split_dir / "metadata_test.jsonl", "test"
    )


def test_split_fingerprint_is_the_hash_of_each_files_bytes_mapped_or_read(split_dir, tmp_path):
    """The value results carry, the same whether a file is mapped (a whole one)
    or read (an empty one cannot be mapped); a line msgspec cannot read names
    no image, and the others still do."""
    import hashlib
    import shutil

    from rosetrain.data.release import IMAGES_PART, split_fingerprint

    folder = tmp_path / "data"
    shutil.copytree(split_dir, folder)
    main = folder / "metadata_test.jsonl"
    bridge = folder / "metadata_test_global_click_bridge.jsonl"
    bridge.write_bytes(b"")

    def expected(*files):
        outer = hashlib.sha256()
        for path in files:
            outer.update(hashlib.sha256(path.read_bytes()).digest())
        return f"sha256:{outer.hexdigest()}"

    with_images = split_fingerprint(folder, "test", bridges=True)
    assert with_images.split(IMAGES_PART)[0] == expected(main, bridge)
    assert IMAGES_PART in with_images  # the smoke split's images are on disk
    main.write_bytes(main.read_bytes() + b"{not json\n")
    mended = split_fingerprint(folder, "test", bridges=True)
    assert mended.split(IMAGES_PART)[0] == expected(main, bridge)
    assert mended.split(IMAGES_PART)[1] == with_images.split(IMAGES_PART)[1]


def test_eval_into_a_run_of_regenerated_data_is_refused(split_dir, other_split_dir, tmp_path):
    import shutil

    data, out = tmp_path / "data", tmp_path / "run"
    shutil.copytree(split_dir, data)
    evaluate("oracle", data, out_dir=out, runner=OracleRunner(), progress=False)
    predictions = (out / "predictions.jsonl").read_bytes()
    shutil.rmtree(data)
    shutil.copytree(other_split_dir, data)  # "regenerated" in place with another seed
    runner = OracleRunner()
    with pytest.raises(
        RosetrainError,
        match=r"predictions\.jsonl holds predictions made on "
        r"data [0-9a-f]{12}.* is data [0-9a-f]{12}: other metadata \(.*the data "
        r"regenerated since.*\); use another output folder",
    ):
        evaluate("oracle", data, out_dir=out, runner=runner, progress=False)
    assert runner.seen == 0 and (out / "predictions.jsonl").read_bytes() == predictions


def test_eval_refuses_a_run_folder_without_fingerprints(split_dir, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / ".rosetrain.lock").touch()  # a run folder of a rosetrain older than fingerprints
    (out / "predictions.jsonl").write_text(
        json.dumps({"item_id": "test-0000000-T1", "raw_text": "COUNT(1)", "model": "oracle", "error": None})
        + "\n"
    )
    with pytest.raises(RosetrainError, match="made on unknown data .*: these rows carry no data fingerprint"):
        evaluate("oracle", split_dir, out_dir=out, runner=OracleRunner(), progress=False)


def test_score_refuses_predictions_of_other_data(split_dir, other_split_dir, tmp_path, capsys):
    evaluate("oracle", split_dir, out_dir=tmp_path / "run", runner=OracleRunner(), progress=False)
    predictions = str(tmp_path / "run" / "predictions.jsonl")
    code = cli_main(
        [
            "score",
            "--data",
            str(other_split_dir),
            "--predictions",
            predictions,
            "--out",
            str(tmp_path / "scored"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "other metadata" in err and "score them against the data and bridges setting" in err
    assert "output folder" not in err
    assert not (tmp_path / "scored" / "evaluation_summary.json").exists()
    # The data they were made on scores them, and the summary records that data.
    assert (
        cli_main(
            [
                "score",
                "--data",
                str(split_dir / "metadata_test.jsonl"),
                "--predictions",
                predictions,
                "--out",
                str(tmp_path / "scored"),
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "scored" / "evaluation_summary.json").read_text())
    run_info = json.loads((tmp_path / "run" / "eval_run.json").read_text())
    assert summary["data_fingerprint"] == run_info["data_fingerprint"]
    assert summary["data_fingerprint"].startswith("sha256:")


def test_compare_refuses_runs_of_other_data(split_dir, other_split_dir, tmp_path, capsys):
    evaluate("oracle", split_dir, out_dir=tmp_path / "a", runner=OracleRunner(), progress=False)
    evaluate("oracle", other_split_dir, out_dir=tmp_path / "b", runner=OracleRunner(), progress=False)
    code = cli_main(
        ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "cmp"), "--no-plots"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "scored on different data" in err
    assert not (tmp_path / "cmp" / "compare.json").exists()
    result = compare_runs(tmp_path / "a", tmp_path / "a", plots=False)
    assert (
        result["data_fingerprint"]
        == json.loads((tmp_path / "a" / "eval_run.json").read_text())["data_fingerprint"]
    )


def test_a_second_eval_into_the_same_folder_is_refused(split_dir, tmp_path):
    out = tmp_path / "run"
    with serve_in_subprocess(split_dir, delay_s=0.2) as base_url:
        options = ("--concurrency", "1", "--request-timeout", "5", "--max-error-rate", "0.05")
        args = [sys.executable, "-m", "rosetrain", "eval", *eval_command(base_url, split_dir, out, *options)]
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            wait_for_lines(out / "predictions.jsonl", 1, first)
            second = subprocess.run(args, check=False, capture_output=True, text=True, cwd=ROOT)
        finally:
            _, first_err = first.communicate(timeout=120)
    assert second.returncode == 2, second.stderr
    assert second.stderr.count("\n") == 1 and "another rosetrain process" in second.stderr
    assert first.returncode == 0, first_err
    ids = [p["item_id"] for p in read_jsonl(out / "predictions.jsonl")]
    assert len(ids) == len(set(ids)) == 21


def wait_for_lines(path: Path, lines: int, process: subprocess.Popen) -> None:
    """Block until ``path`` holds ``lines`` complete lines (or the process ended)."""
    import time

    while process.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.01)


# --- 3. every eval/score/compare failure is one readable line -----------------------------------


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rosetrain {command}: error: "), err
    return err


@pytest.fixture
def scored_run(split_dir, tmp_path) -> Path:
    evaluate("oracle", split_dir, out_dir=tmp_path / "run", runner=OracleRunner(), progress=False)
    return tmp_path / "run"


def test_undecodable_bytes_in_predictions_name_the_line(split_dir, tmp_path, capsys):
    bad = tmp_path / "predictions.jsonl"
    bad.write_bytes(
        b'{"item_id": "test-0000000-T1", "raw_text": "COUNT(1)"}\n'
        b'{"item_id": "test-0000000-T2", "raw_text": "COUNT(\xff)"}\n'
    )
    assert (
        cli_main(["score", "--data", str(split_dir), "--predictions", str(bad), "--out", str(tmp_path / "s")])
        == 2
    )
    assert f"{bad}:2: not UTF-8 text" in one_line_error(capsys, "score")


def test_a_folder_where_a_file_is_expected(split_dir, scored_run, tmp_path, capsys):
    assert (
        cli_main(
            [
                "score",
                "--data",
                str(split_dir),
                "--predictions",
                str(scored_run),
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 2
    )
    assert "is a folder; expected a predictions .jsonl file" in one_line_error(capsys, "score")
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    assert (
        cli_main(
            [
                "score",
                "--data",
                str(split_dir),
                "--predictions",
                str(scored_run / "predictions.jsonl"),
                "--out",
                str(afile),
            ]
        )
        == 2
    )
    assert f"{afile}: cannot create" in one_line_error(capsys, "score")
    assert cli_main(["compare", str(scored_run), str(scored_run), "--out", str(afile)]) == 2
    assert f"{afile}: cannot create" in one_line_error(capsys, "compare")
    assert afile.read_text() == "mine\n"


@pytest.mark.parametrize("failure", [(28, "No space left on device"), (13, "Permission denied")])
def test_disk_full_or_permission_denied_while_writing(
    split_dir, scored_run, tmp_path, capsys, monkeypatch, failure
):
    """The machine refuses a write (root ignores file modes, so the refusal is simulated)."""
    import rosetrain.core.io

    def refuse(src, dst):
        raise OSError(failure[0], failure[1], str(dst))

    monkeypatch.setattr(rosetrain.core.io.os, "replace", refuse)
    out = tmp_path / "scored"
    assert (
        cli_main(
            [
                "score",
                "--data",
                str(split_dir),
                "--predictions",
                str(scored_run / "predictions.jsonl"),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = one_line_error(capsys, "score")
    # the first write is the ownership marker's, before the files it names
    assert str(out / ".rosetrain.json") in err and failure[1] in err
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temp file left


def test_disk_full_while_saving_predictions(split_dir, tmp_path, capsys, monkeypatch):
    import errno

    import rosetrain.data.predictions

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rosetrain.data.predictions.os, "fsync", disk_full)
    with serve_in_subprocess(split_dir) as base_url:
        assert cli_main(["eval", *eval_command(base_url, split_dir, tmp_path / "run", model="m")]) == 2
    assert "No space left on device" in one_line_error(capsys, "eval")


@pytest.mark.parametrize("config", [None, "{}"])
def test_a_folder_that_is_not_a_model(split_dir, tmp_path, capsys, config):
    model = tmp_path / "not-a-model"
    model.mkdir()
    if config is not None:
        (model / "config.json").write_text(config)
    assert (
        cli_main(
            [
                "eval",
                "--model",
                str(model),
                "--data",
                str(split_dir),
                "--out",
                str(tmp_path / "run"),
                "--no-progress",
            ]
        )
        == 2
    )
    err = one_line_error(capsys, "eval")
    assert str(model) in err and ("not a model" in err or "model_type" in err)


def test_a_hub_id_that_cannot_be_fetched_offline(split_dir, tmp_path):
    """No network (an endpoint that refuses): one line at once, not a minute of retries."""
    import os

    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("HF_HUB_OFFLINE", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rosetrain",
            "eval",
            "--model",
            "some-org/some-model",
            "--data",
            str(split_dir),
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "not in the local Hugging Face cache and the Hub cannot be reached" in result.stderr


# --- 4. a killed eval resumes to the result of an uninterrupted one ------------------------------

KILLER = Path(__file__).with_name("kill_eval.py")
# files that name the moment they were made, not the result
NOT_RESULTS = {"eval_run.json", "predictions.jsonl"}


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def results(out: Path) -> dict[str, bytes]:
    """The run folder's files, with the folder's own path taken out (the summary names it)."""
    return {
        name: data.replace(str(out).encode(), b"<OUT>")
        for name, data in tree(out).items()
        if name not in NOT_RESULTS
    }


def predictions_by_id(out: Path) -> dict[str, dict]:
    return {row["item_id"]: row for row in read_jsonl(out / "predictions.jsonl")}


@pytest.fixture(scope="module")
def endpoint(split_dir):
    with serve_in_subprocess(split_dir, slow_s=0.2, delay_s=0.01) as base_url:
        yield base_url


# eval_command options of the SIGKILL runs: 0.05 allows the item the endpoint always refuses
KILLED_RUN_OPTIONS = ("--concurrency", "3", "--request-timeout", "5", "--max-error-rate", "0.05")


@pytest.mark.parametrize(
    "kind, which",
    [
        ("torn-line", "1"),  # the first prediction, half saved
        ("saved-line", "1"),
        ("torn-line", "11"),  # midway
        ("saved-line", "21"),  # every answer saved, nothing scored yet
        ("torn-file", "per_item_eval.jsonl"),  # scoring, half written
        ("before-rename", "evaluation_summary.json"),
        ("torn-file", "summary.md"),
        ("before-rename", "eval_run.json"),  # the very last write
    ],
)
def test_sigkilled_eval_resumes_to_the_uninterrupted_result(split_dir, endpoint, tmp_path, kind, which):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(split_dir, data)
    (tmp_path / "bystander.txt").write_text("must not change")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    reference, out = tmp_path / "reference" / "run", tmp_path / "killed" / "run"
    assert cli_main(["eval", *eval_command(endpoint, data, reference, *KILLED_RUN_OPTIONS)]) == 0
    before = {k: v for k, v in tree(tmp_path).items() if not k.startswith("killed/")}

    killed = subprocess.run(
        [
            sys.executable,
            str(KILLER),
            kind,
            which,
            "--",
            *eval_command(endpoint, data, out, *KILLED_RUN_OPTIONS),
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert killed.returncode == -9, killed.stderr  # the kill point was reached
    rerun = subprocess.run(
        [sys.executable, "-m", "rosetrain", "eval", *eval_command(endpoint, data, out, *KILLED_RUN_OPTIONS)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert rerun.returncode == 0, rerun.stderr

    assert results(out) == results(reference)
    assert predictions_by_id(out) == predictions_by_id(reference)
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    after = {k: v for k, v in tree(tmp_path).items() if not k.startswith("killed/")}
    assert after == before  # nothing outside the output folder changed


# --- 5. compare's intervals can always be indexed ----------------------------------------------


def test_compare_intervals_are_two_entries_even_where_a_figure_is_undefined(split_dir, tmp_path, capsys):
    """Runs holding only counting items: action_avg and gap are undefined, and
    their ci95 is [None, None], never None (the demo and its report index it)."""
    for name in ("a", "b"):
        evaluate(
            "oracle", split_dir, out_dir=tmp_path / name, runner=OracleRunner(), limit=2, progress=False
        )  # T1 and T2 of the first scene
    assert (
        cli_main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "cmp")]) == 0
    )
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert result["action_avg"]["delta"] is None and result["counting_avg"]["delta"] == 0.0
    headline = [result[k] for k in ("counting_avg", "action_avg", "gap", "avg_pass")]
    entries = list(result["templates"].values()) + headline
    for entry in entries:
        for key in ("ci95", "ci95_before", "ci95_after"):
            low, high = entry[key]  # what the demo's report does
            assert (low is None) == (high is None) == (entry["before"] is None)
    assert result["gap"]["ci95"] == [None, None]
    assert "| **Gap (Counting - Action)** | - | - | - |  |" in (tmp_path / "cmp" / "report.md").read_text()
    assert "Gap" in capsys.readouterr().out


def test_resuming_with_settings_that_change_answers_is_refused(split_dir, endpoint, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["eval", *eval_command(endpoint, split_dir, out, *KILLED_RUN_OPTIONS), "--limit", "3"]
    assert cli_main(args + ["--max-new-tokens", "64"]) == 0
    assert json.loads((out / "eval_run.json").read_text())["finished"] is True
    capsys.readouterr()
    # a larger --limit with the same settings resumes; another max_new_tokens does not
    assert cli_main(args[:-1] + ["5", "--max-new-tokens", "16"]) == 2
    assert "made with max_new_tokens 64, this run asks for 16" in one_line_error(capsys, "eval")
    assert cli_main(args[:-1] + ["5", "--max-new-tokens", "64"]) == 0


def test_an_endpoint_that_never_answers_stops_the_run(split_dir, tmp_path, capsys):
    """A server that accepts connections and then says nothing (hung): the run
    stops after the first requests time out, not after every item's retries."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)  # the kernel completes connections; nobody ever reads them
        base_url = f"http://127.0.0.1:{hung.getsockname()[1]}/v1"
        code = cli_main(
            [
                "eval",
                *eval_command(
                    base_url,
                    split_dir,
                    tmp_path / "run",
                    "--concurrency",
                    "2",
                    "--request-timeout",
                    "0.2",
                    model="m",
                ),
            ]
        )
    assert code == 2
    err = one_line_error(capsys, "eval")
    # 3 or more: the requests in flight at once time out together, and which
    # of them stops the run first depends on the machine's load
    assert re.search(r"accepted connections but answered none of [3-9] requests", err), err
    assert (tmp_path / "run" / "predictions.jsonl").read_text() == ""
