"""Predictions file durability and the runners that need no model weights."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fake_openai_server import GARBAGE, REFUSED_POSITION, behaviour, fetch_stats, serve_in_subprocess

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.data.predictions import PredictionWriter, prediction_row, read_predictions, repair_tail
from rosetrain.runners import make_runner

KEY_ENV = "ROSETRAIN_TEST_FAKE_KEY"
SECRET = "sk-test-do-not-log-4242"


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory, smoke_split) -> Path:
    return smoke_split(tmp_path_factory.mktemp("split") / "smoke")


def split_records(split_dir: Path) -> list[dict]:
    lines = (split_dir / "metadata_test.jsonl").read_text(encoding="utf-8").splitlines()
    return [{**r, "image": str(split_dir / r["image"])} for r in map(json.loads, lines)]


# --- predictions.jsonl -------------------------------------------------------------------


def test_writer_truncates_torn_last_line_and_resumes(tmp_path):
    path = tmp_path / "predictions.jsonl"
    with PredictionWriter(path) as writer:
        for i in range(3):
            writer.write(prediction_row(f"item-{i}", f"COUNT({i})", "m"))
    torn = b'{"item_id": "item-3", "raw_text": "CLICK(R1'
    with open(path, "ab") as handle:
        handle.write(torn)

    with PredictionWriter(path) as writer:
        assert writer.truncated_bytes == len(torn)
        assert writer.done == {"item-0", "item-1", "item-2"}
        writer.write(prediction_row("item-3", "DONE", "m"))

    rows = read_predictions(path)
    assert list(rows) == ["item-0", "item-1", "item-2", "item-3"]
    assert rows["item-3"] == {"item_id": "item-3", "raw_text": "DONE", "model": "m", "error": None}
    assert path.read_bytes().endswith(b"\n")


def test_repair_tail_keeps_complete_file_and_empties_single_torn_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"item_id": "a"}\n')
    assert repair_tail(path) == 0 and path.read_bytes() == b'{"item_id": "a"}\n'
    path.write_bytes(b'{"item_id": "a"')  # the very first write was cut short
    assert repair_tail(path) == len(b'{"item_id": "a"')
    assert path.read_bytes() == b""


def test_rows_that_failed_are_asked_again_on_resume(tmp_path):
    path = tmp_path / "predictions.jsonl"
    with PredictionWriter(path) as writer:
        writer.write(prediction_row("a", "COUNT(1)", "m"))
        writer.write(prediction_row("b", None, "m", error="HTTP 503: busy"))
    with PredictionWriter(path, retry_errors=False) as writer:
        assert writer.done == {"a", "b"}
    with PredictionWriter(path) as writer:
        assert writer.done == {"a"}
        writer.write(prediction_row("b", "COUNT(2)", "m"))
    rows = read_predictions(path)
    assert [(i, r["raw_text"]) for i, r in rows.items()] == [("a", "COUNT(1)"), ("b", "COUNT(2)")]


def test_a_bad_line_in_the_middle_is_an_error_with_its_line_number(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"item_id": "a"}\nnot json\n{"item_id": "b"}\n')
    with pytest.raises(RosetrainError, match=r"predictions.jsonl:2: not valid JSON"):
        PredictionWriter(path)


def test_a_killed_writer_process_leaves_a_readable_file(tmp_path):
    """SIGKILL a process appending rows as fast as it can; every row it left must parse."""
    path = tmp_path / "predictions.jsonl"
    script = textwrap.dedent(f"""
        from rosetrain.data.predictions import PredictionWriter, prediction_row
        with PredictionWriter({str(path)!r}) as writer:
            i = 0
            while True:
                writer.write(prediction_row(f"item-{{i}}", "CLICK(R1,C1); " * 200 + "DONE", "m"))
                i += 1
    """)
    process = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 30
    while (not path.exists() or path.stat().st_size < 50_000) and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    with PredictionWriter(path) as writer:
        done = len(writer.done)
        assert done > 0
        writer.write(prediction_row("after", "DONE", "m"))
    ids = list(read_predictions(path))
    assert ids == [f"item-{i}" for i in range(done)] + ["after"]


# --- openai runner against a real HTTP server process --------------------------------------


def test_openai_runner_retries_bounds_concurrency_and_records_failures(split_dir, monkeypatch):
    records = split_records(split_dir)
    assert len(records) > REFUSED_POSITION
    monkeypatch.setenv(KEY_ENV, SECRET)
    with serve_in_subprocess(split_dir, key_env=KEY_ENV, env={KEY_ENV: SECRET}, slow_s=1.5) as base_url:
        runner = make_runner(
            "openai",
            "fake-model",
            base_url=base_url,
            api_key_env=KEY_ENV,
            concurrency=3,
            timeout_s=0.5,
            backoff_s=0.01,
        )
        try:
            answers = runner.generate(records)
        finally:
            runner.close()
        stats = fetch_stats(base_url)

    for position, (record, (raw_text, error)) in enumerate(zip(records, answers)):
        failure, gold = behaviour(position)
        if failure == "400":
            assert raw_text is None and "HTTP 400" in error
        else:
            assert error is None, (position, error)
            assert raw_text == (record["answer"] if gold else GARBAGE)
        # one retry for every item whose first attempt failed (500, 429, timeout)
        expected_attempts = 2 if failure in ("500", "429", "slow") else 1
        assert stats["attempts"][record["item_id"]] == expected_attempts, position
    assert 2 <= stats["max_in_flight"] <= 3
    assert all(SECRET not in (error or "") for _, error in answers)


def test_openai_runner_wrong_key_fails_items_without_crashing_or_leaking(split_dir, monkeypatch):
    records = split_records(split_dir)[:2]
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-123")
    with serve_in_subprocess(split_dir, key_env=KEY_ENV, env={KEY_ENV: SECRET}) as base_url:
        runner = make_runner("openai", "fake-model", base_url=base_url, api_key_env=KEY_ENV)
        answers = runner.generate(records)
        runner.close()
    assert [raw for raw, _ in answers] == [None, None]
    assert all("HTTP 401" in error and "sk-wrong" not in error for _, error in answers)


def test_openai_runner_gives_up_on_an_unreachable_server(split_dir):
    # an endpoint nobody listens on stops the run at once, not item by item
    with pytest.raises(RosetrainError, match="cannot reach 127.0.0.1:9 .connection refused"):
        make_runner(
            "openai", "m", base_url="http://127.0.0.1:9/v1", timeout_s=0.5, max_retries=2, backoff_s=0.01
        )


def test_openai_runner_needs_a_base_url():
    with pytest.raises(RosetrainError, match="^runner 'openai' needs base_url") as err:
        make_runner("openai", "m")
    assert err.value.argument == "base_url"


# --- vllm runner ---------------------------------------------------------------------------


def test_vllm_runner_says_clearly_when_vllm_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail like an absent package
    with pytest.raises(RosetrainError, match=r"needs the vllm package.*rosetrain\[vllm\]"):
        make_runner("vllm", "some/model")


def test_vllm_runner_says_clearly_when_there_is_no_gpu(monkeypatch):
    import types

    import torch

    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RosetrainError, match="needs a CUDA GPU"):
        make_runner("vllm", "some/model")


def test_eval_cli_reports_missing_vllm_as_a_user_error(split_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    code = cli_main(
        [
            "eval",
            "--runner",
            "vllm",
            "--model",
            "m",
            "--data",
            str(split_dir),
            "--out",
            str(tmp_path / "run"),
            "--no-progress",
        ]
    )
    assert code == 2
    assert "needs the vllm package" in capsys.readouterr().err


def test_every_runner_is_a_base_runner_with_the_one_default_length():
    """One constant sets how long an answer may be, wherever a runner is made."""
    import inspect

    from rosetrain.evaluation.evaluate import evaluate
    from rosetrain.integrations.lmms_eval.export import export_task
    from rosetrain.runners import DEFAULT_MAX_NEW_TOKENS, BaseRunner
    from rosetrain.runners.openai_runner import OpenAIRunner
    from rosetrain.runners.transformers_runner import TransformersRunner
    from rosetrain.runners.vllm_runner import VLLMRunner

    for made in (OpenAIRunner, TransformersRunner, VLLMRunner, make_runner, evaluate, export_task):
        assert inspect.signature(made).parameters["max_new_tokens"].default == DEFAULT_MAX_NEW_TOKENS
    for runner in (OpenAIRunner, TransformersRunner, VLLMRunner):
        assert issubclass(runner, BaseRunner)
    with pytest.raises(TypeError):  # generate is the one thing a runner must write
        type("Half", (BaseRunner,), {})("m")


def test_unknown_runner_is_rejected():
    with pytest.raises(
        RosetrainError, match=r"^unknown runner 'llamacpp' \(known: transformers, vllm, openai\)$"
    ):
        make_runner("llamacpp", "m")
    with pytest.raises(RosetrainError, match="did you mean 'vllm'"):
        make_runner("vlm", "m")


def test_writer_refuses_a_second_row_for_an_item(tmp_path):
    with PredictionWriter(tmp_path / "p.jsonl") as writer:
        writer.write(prediction_row("a", "DONE", "m"))
        with pytest.raises(ValueError, match="already has a prediction"):
            writer.write(prediction_row("a", "DONE", "m"))
    assert list(read_predictions(tmp_path / "p.jsonl")) == ["a"]


def test_a_corrupt_weights_file_is_one_line_naming_it(tmp_path, tiny_model_dir):
    import shutil

    from rosetrain.models.loading import load_model_and_processor

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(RosetrainError, match=rf"^model: {weights}: corrupt weights file \("):
        load_model_and_processor(model)
    run = tmp_path / "run"  # a run folder's final model alike
    shutil.copytree(model, run / "checkpoint-final")
    with pytest.raises(RosetrainError, match=r"checkpoint-final/model.safetensors: corrupt weights file"):
        load_model_and_processor(run)


def test_loading_a_model_shows_no_library_progress_bar_unless_verbose(tiny_model_dir, capfd, monkeypatch):
    from rosetrain.models.loading import load_model_and_processor

    load_model_and_processor(tiny_model_dir)
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out
    monkeypatch.setenv("ROSETRAIN_VERBOSE", "1")  # what --verbose sets
    load_model_and_processor(tiny_model_dir)
    assert "Loading weights" in capfd.readouterr().err
    monkeypatch.delenv("ROSETRAIN_VERBOSE")
    load_model_and_processor(tiny_model_dir)  # quiet again: the bars are off once more
    assert "Loading weights" not in capfd.readouterr().err


@pytest.mark.parametrize("command", ["eval", "train", "demo", "signal", "tiny-model"])
def test_verbose_is_there_on_every_command_that_loads_a_model(command, monkeypatch):
    from rosetrain import cli

    monkeypatch.delenv("ROSETRAIN_VERBOSE", raising=False)
    parser = cli.build_parser(command)
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    assert "--verbose" in sub.format_help()
