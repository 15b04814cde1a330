"""Evaluation you can trust: failed requests are not wrong answers, results know
their data, one writer per run folder, every failure one readable line, and a
killed eval resumes to the same result."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai_server import serve_in_subprocess
from rosetrain.cli import main as cli_main
from rosetrain.commands.evaluate import evaluate
from rosetrain.compare import compare_runs
from rosetrain.errors import RosetrainError

ROOT = Path(__file__).resolve().parent.parent


def generate_split(out: Path, scenes: int = 3, seed: int | None = None) -> Path:
    args = ["generate", "--spec", str(ROOT / "generators/smoke.yaml"), "--out", str(out),
            "--split", "test", "--scenes", str(scenes), "--formats", "release",
            "--num-proc", "1", "--quiet"]
    if seed is not None:
        args += ["--seed", str(seed)]
    assert cli_main(args) == 0
    return out


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory) -> Path:
    return generate_split(tmp_path_factory.mktemp("split") / "smoke")


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
    summary = evaluate("oracle", split_dir, out_dir=tmp_path / "run", max_error_rate=1.0,
                       runner=OracleRunner(fail_every=3), progress=False)
    # Every answered item is gold: errors must not turn into failures.
    assert summary["avg_pass"] == 1.0 and summary["gap"] == 0.0
    assert summary["n_errors"] == 7 and summary["n"] == 14 and summary["n_expected"] == 21
    assert summary["coverage"] == pytest.approx(14 / 21)
    assert summary["error_examples"][0]["error"] == "HTTP 500: test failure"
    assert "**7 items errored**" in (tmp_path / "run" / "summary.md").read_text()
    # The per-item file keeps them, scored as the official evaluator does (a failure).
    errored = [r for r in read_jsonl(tmp_path / "run" / "per_item_eval.jsonl")
               if r["prediction_error"]]
    assert len(errored) == 7 and not any(r["pass"] for r in errored)


def test_library_eval_fails_when_errors_remain_unless_allowed(split_dir, tmp_path):
    with pytest.raises(RosetrainError, match=r"7 of 21 items \(33.3%\) got no answer after "
                                             r"retries .*--max-error-rate 0.333"):
        evaluate("oracle", split_dir, out_dir=tmp_path / "a", runner=OracleRunner(fail_every=3),
                 progress=False)
    # The results were written before the error, and a rerun asks only the errored items.
    assert json.loads((tmp_path / "a" / "evaluation_summary.json").read_text())["n_errors"] == 7
    again = OracleRunner()
    summary = evaluate("oracle", split_dir, out_dir=tmp_path / "a", runner=again, progress=False)
    assert again.seen == 7 and summary["n_errors"] == 0 and summary["avg_pass"] == 1.0


def test_compare_leaves_errored_items_out_of_the_pairs(split_dir, tmp_path):
    evaluate("oracle", split_dir, out_dir=tmp_path / "clean", runner=OracleRunner(),
             progress=False)
    evaluate("oracle", split_dir, out_dir=tmp_path / "flaky", max_error_rate=1.0,
             runner=OracleRunner(fail_every=3), progress=False)
    result = compare_runs(tmp_path / "clean", tmp_path / "flaky", tmp_path / "cmp", plots=False)
    assert result["errored_excluded"] == {"before": 0, "after": 7, "pairs": 7}
    assert result["n_items"] == 14
    for key in ("avg_pass", "action_avg", "gap"):
        assert result[key]["delta"] == 0.0 and result[key]["ci95"] == [0.0, 0.0]
    assert "**7 items left out**" in (tmp_path / "cmp" / "report.md").read_text()


def test_eval_cli_against_a_flaky_endpoint_exits_non_zero_in_one_line(split_dir, tmp_path,
                                                                      capsys):
    out = tmp_path / "run"
    with serve_in_subprocess(split_dir, fail_every=3) as base_url:
        args = ["eval", "--runner", "openai", "--base-url", base_url, "--model", "fake",
                "--data", str(split_dir), "--out", str(out), "--max-retries", "1",
                "--request-timeout", "5", "--no-progress"]
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
    code = cli_main(["eval", "--runner", "openai", "--base-url", base_url, "--model", "m",
                     "--data", str(split_dir), "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "cannot reach 127.0.0.1" in err and "connection refused" in err
    assert not (tmp_path / "run" / "predictions.jsonl").exists() or \
        (tmp_path / "run" / "predictions.jsonl").read_text() == ""


def test_an_endpoint_that_goes_away_mid_run_stops_the_run(split_dir, tmp_path):
    """Connection refused after the start: the run stops with one error instead
    of recording a failure for every remaining item."""
    from rosetrain.runners.openai_runner import EndpointUnreachable, OpenAIRunner

    with serve_in_subprocess(split_dir) as base_url:
        runner = OpenAIRunner("m", base_url=base_url, backoff_s=0.01)
    # the server has stopped: its port now refuses connections
    records = [{**r, "image": str(split_dir / r["image"])}
               for r in read_jsonl(split_dir / "metadata_test.jsonl")[:2]]
    with pytest.raises(EndpointUnreachable, match="connection refused, 3 attempts"):
        runner.generate(records)
    runner.close()
