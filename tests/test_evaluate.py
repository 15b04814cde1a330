"""`rosetrain eval` end to end: a tiny local VLM and a real local HTTP endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai_server import GARBAGE, behaviour, fetch_stats, serve_in_subprocess

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.evaluation.evaluate import evaluate, load_suite
from rosetrain.runners.transformers_runner import TransformersRunner


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory, smoke_split) -> Path:
    return smoke_split(tmp_path_factory.mktemp("split") / "smoke", scenes=3)


class OracleRunner:
    """Answers the gold answer; checks each record reaches it with an openable image."""

    name = "oracle"

    def __init__(self):
        self.calls = 0

    def generate(self, records):
        self.calls += len(records)
        assert all(Path(r["image"]).is_file() for r in records)
        return [(r["answer"], None) for r in records]


def test_library_evaluate_with_a_runner_object_scores_gold_as_pass(split_dir, tmp_path):
    oracle = OracleRunner()
    summary = evaluate(
        "oracle", split_dir, "test", tmp_path / "run", runner=oracle, batch_size=4, progress=False
    )
    assert oracle.calls == summary["n"] == 21
    assert summary["avg_pass"] == 1.0 and summary["gap"] == 0.0
    assert {r["model"] for r in read_jsonl(tmp_path / "run" / "predictions.jsonl")} == {"oracle"}


def test_a_run_folder_refuses_predictions_of_another_model(split_dir, tmp_path):
    evaluate("oracle", split_dir, out_dir=tmp_path, runner=OracleRunner(), limit=2, progress=False)
    other = OracleRunner()
    other.name = "someone-else"
    with pytest.raises(RosetrainError, match="holds predictions of 'oracle'"):
        evaluate("x", split_dir, out_dir=tmp_path, runner=other, limit=3, progress=False)


@pytest.mark.slow
def test_eval_tiny_model_resumes_and_compares(split_dir, tiny_model_dir, tmp_path, monkeypatch):
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    args = [
        "eval",
        "--model",
        str(tiny_model_dir),
        "--data",
        str(split_dir),
        "--split",
        "test",
        "--max-new-tokens",
        "8",
        "--batch-size",
        "2",
        "--no-progress",
    ]
    assert cli_main(args + ["--out", str(run_a), "--limit", "5"]) == 0
    predictions = read_jsonl(run_a / "predictions.jsonl")
    assert [p["item_id"] for p in predictions] == [f"test-0000000-T{t}" for t in "12345"]
    assert all(
        p["model"] == str(tiny_model_dir) and p["error"] is None and isinstance(p["raw_text"], str)
        for p in predictions
    )
    summary = json.loads((run_a / "evaluation_summary.json").read_text())
    assert summary["n"] == 5 and len(read_jsonl(run_a / "per_item_eval.jsonl")) == 5
    run_info = json.loads((run_a / "eval_run.json").read_text())
    assert run_info["items_run"] == 5 and run_info["items_per_s"] > 0

    # An interrupt mid-write left a torn line; the rerun repairs it and asks no model.
    done_bytes = (run_a / "predictions.jsonl").read_bytes()
    with open(run_a / "predictions.jsonl", "ab") as handle:
        handle.write(b'{"item_id": "test-0000000-T1B", "raw_te')

    def no_model_calls(self, records):
        raise AssertionError(f"model asked again for {[r['item_id'] for r in records]}")

    monkeypatch.setattr(TransformersRunner, "generate", no_model_calls)
    assert cli_main(args + ["--out", str(run_a), "--limit", "5"]) == 0
    assert (run_a / "predictions.jsonl").read_bytes() == done_bytes
    assert json.loads((run_a / "eval_run.json").read_text())["items_run"] == 0
    monkeypatch.undo()

    # A larger --limit runs only the new items, appending after the old rows.
    assert cli_main(args + ["--out", str(run_a), "--limit", "8"]) == 0
    assert (run_a / "predictions.jsonl").read_bytes().startswith(done_bytes)
    assert json.loads((run_a / "eval_run.json").read_text())["items_run"] == 3
    assert json.loads((run_a / "evaluation_summary.json").read_text())["n"] == 8

    # Another batch size gives the same greedy answers; compare pairs the two runs.
    assert (
        cli_main(args[:-3] + ["--batch-size", "8", "--no-progress", "--out", str(run_b), "--limit", "8"]) == 0
    )
    texts = lambda run: [p["raw_text"] for p in read_jsonl(run / "predictions.jsonl")]  # noqa: E731
    assert texts(run_a) == texts(run_b)
    assert cli_main(["compare", str(run_a), str(run_b), "--out", str(tmp_path / "same"), "--no-plots"]) == 0
    same = json.loads((tmp_path / "same" / "compare.json").read_text())
    assert same["avg_pass"]["delta"] == 0.0

    # Against a run that answers gold on the same items, compare shows the whole gain.
    oracle_summary = evaluate(
        "oracle", split_dir, "test", tmp_path / "oracle", runner=OracleRunner(), limit=8, progress=False
    )
    assert cli_main(["compare", str(run_a), str(tmp_path / "oracle"), "--out", str(tmp_path / "cmp")]) == 0
    compare = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    before = json.loads((run_a / "evaluation_summary.json").read_text())["avg_pass"]
    assert compare["avg_pass"]["before"] == pytest.approx(before)
    assert compare["avg_pass"]["after"] == oracle_summary["avg_pass"] == 1.0
    assert (tmp_path / "cmp" / "report.md").is_file()


@pytest.mark.slow
def test_batched_generation_matches_one_at_a_time(split_dir, tiny_model_dir):
    """Left padding: a batch of prompts of different lengths (images of different
    sizes) decodes exactly like each prompt alone. Weights are scaled up so the
    random model's output depends on its input (at init it says the same thing
    whatever it sees, which would make this test unable to fail)."""
    import torch

    from rosetrain.data.release import select_records, with_image_paths
    from rosetrain.models.loading import load_model_and_processor

    model, processor = load_model_and_processor(tiny_model_dir)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)
    runner = TransformersRunner("scaled", loaded=(model, processor), max_new_tokens=12)
    records, root = select_records(split_dir, "test", None)
    records = with_image_paths(records[::3], root)  # three image sizes, all templates
    batched = runner.generate(records)
    alone = [runner.generate([r])[0] for r in records]
    assert batched == alone
    assert len({text for text, _ in batched}) > 1


def test_eval_openai_endpoint_scores_resumes_and_retries_only_failures(split_dir, tmp_path, monkeypatch):
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"name: smoke\ndata: {split_dir}\nsplit: test\n")
    out = tmp_path / "run"
    monkeypatch.setenv("FAKE_KEY", "sk-local")
    with serve_in_subprocess(split_dir, key_env="FAKE_KEY", slow_s=1.0) as base_url:
        args = [
            "eval",
            "--runner",
            "openai",
            "--base-url",
            base_url,
            "--api-key-env",
            "FAKE_KEY",
            "--model",
            "fake-model",
            "--suite",
            str(suite),
            "--out",
            str(out),
            "--concurrency",
            "4",
            "--request-timeout",
            "0.5",
            "--no-progress",
            "--max-error-rate",
            "0.05",
        ]  # the refused item stays an error
        assert cli_main(args) == 0
        first = fetch_stats(base_url)
        assert cli_main(args) == 0  # everything answered: only the refused item is asked again
        second = fetch_stats(base_url)

    assert second["requests"] - first["requests"] == 1
    predictions = {p["item_id"]: p for p in read_jsonl(out / "predictions.jsonl")}
    per_item = {r["item_id"]: r for r in read_jsonl(out / "per_item_eval.jsonl")}
    split_ids = [r["item_id"] for r in read_jsonl(split_dir / "metadata_test.jsonl")]
    assert len(predictions) == len(per_item) == len(split_ids) == 21
    for position, item_id in enumerate(split_ids):  # the server's rules go by split position
        failure, gold = behaviour(position)
        prediction, row = predictions[item_id], per_item[item_id]
        if failure == "400":
            assert prediction["raw_text"] is None and "HTTP 400" in prediction["error"]
            assert row["pass"] == 0
        else:
            assert prediction["error"] is None
            assert row["pass"] == int(gold), (position, prediction["raw_text"])
            assert gold or prediction["raw_text"] == GARBAGE
    summary = json.loads((out / "evaluation_summary.json").read_text())
    assert summary["n"] == 20 and summary["n_errors"] == 1  # the refused item is left out


def test_suite_files_are_validated(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndata: d\nsplits: test\n")
    with pytest.raises(
        RosetrainError, match=r"unknown key .splits. at the top level \(did you mean .split.\?\)"
    ):
        load_suite(bad)
    missing = tmp_path / "missing.yaml"
    missing.write_text(f"name: x\ndata: {tmp_path / 'nowhere'}\nprepare: run rosetrain generate\n")
    with pytest.raises(RosetrainError, match=r"nowhere does not exist \(run rosetrain generate\)"):
        load_suite(missing).data_dir()


@pytest.mark.parametrize("suite", sorted(Path("eval").glob("*.yaml")))
def test_shipped_suites_load(suite):
    loaded = load_suite(suite)
    assert loaded.name == suite.stem and loaded.split == "test"


def test_eval_without_data_or_suite_is_a_user_error(tmp_path, capsys):
    assert cli_main(["eval", "--model", "m", "--out", str(tmp_path)]) == 2
    assert "--data" in capsys.readouterr().err


def test_eval_reads_the_official_release_layout(tmp_path):
    """Rows of the real ROSE v0.1 metadata, laid out as the release is (bridge file
    beside no main file, images under images/<subset>/), with stand-in images."""
    from PIL import Image

    source = Path(__file__).resolve().parent / "data/rose-v0.1/metadata_test_global_click_bridge.jsonl"
    if not source.is_file():
        pytest.skip(f"{source} not present")
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()[:6]]
    release = tmp_path / "ROSE-v0.1"
    release.mkdir()
    (release / source.name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    for row in rows:
        image = release / row["image"]
        image.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (row["image_width"], row["image_height"]), "white").save(image)
    oracle = OracleRunner()
    summary = evaluate("oracle", release, "test", tmp_path / "run", runner=oracle, progress=False)
    assert oracle.calls == summary["n"] == 6
    assert summary["templates"]["T1B_CLICK_GLOBAL"]["pass"] == 1.0


def test_sigint_mid_run_then_rerun_finishes_with_no_item_lost_or_doubled(split_dir, tmp_path):
    """Interrupt a real `rosetrain eval` process; the rerun asks again at most the
    items that were in flight, and the final file has each item exactly once."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    # 0.3 s an answer, two in flight: the run lasts ~3 s, so the interrupt lands
    # mid-run even when a loaded machine wakes this polling loop late
    with serve_in_subprocess(split_dir, slow_s=0.2, delay_s=0.3) as base_url:
        args = [
            sys.executable,
            "-m",
            "rosetrain",
            "eval",
            "--runner",
            "openai",
            "--base-url",
            base_url,
            "--model",
            "fake-model",
            "--data",
            str(split_dir),
            "--out",
            str(out),
            "--concurrency",
            "2",
            "--request-timeout",
            "5",
            "--no-progress",
            "--max-error-rate",
            "0.05",
        ]
        # A shell starts background jobs with SIGINT ignored, and Python keeps that:
        # give the child the default, so the test does not depend on how pytest was started.
        process = subprocess.Popen(
            args,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        predictions = out / "predictions.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not predictions.exists() or predictions.read_text().count("\n") < 4
        ):
            time.sleep(0.02)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stderr
        assert "run the same command again to resume" in stderr
        interrupted = predictions.read_text().count("\n")
        assert 4 <= interrupted < 21

        assert cli_main(args[3:]) == 0
        attempts = fetch_stats(base_url)["attempts"]

    ids = [p["item_id"] for p in read_jsonl(predictions)]
    assert sorted(ids) == sorted(r["item_id"] for r in read_jsonl(split_dir / "metadata_test.jsonl"))
    split_ids = [r["item_id"] for r in read_jsonl(split_dir / "metadata_test.jsonl")]
    extra = {i: attempts[i] - (1 + (behaviour(p)[0] in ("500", "429"))) for p, i in enumerate(split_ids)}
    # The refused item is asked once more by the rerun; at most two (the concurrency)
    # were in flight when the interrupt came. (Slow items had a 5 s timeout: no retry.)
    asked_again = [i for i, n in extra.items() if n > 0 and i != split_ids[7]]
    assert len(asked_again) <= 2, extra
    assert json.loads((out / "evaluation_summary.json").read_text())["n"] == 20
