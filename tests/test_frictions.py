"""Small frictions a newcomer meets in the first hour, each fixed and kept fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cli(*argv: str) -> int:
    from rosetrain.cli import main

    return main(list(argv))


def test_a_large_split_is_announced_with_its_disk_size_before_anything_is_written(
    tmp_path, monkeypatch, capsys
):
    import shutil

    from rosetrain.data import generate

    class Usage:
        free = 10**6  # 1 MB free

    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage)
    said_before_writing = []
    monkeypatch.setattr(
        generate,
        "run_job",
        lambda job, **kw: (
            said_before_writing.append(capsys.readouterr().err)
            or {"split": job.split, "scenes": 0, "rows": 0, "out": str(job.out_dir)}
        ),
    )
    out = tmp_path / "big"
    assert cli("generate", "--spec", "smoke", "--out", str(out), "--scenes", "100000", "--quiet") == 0
    (err,) = said_before_writing
    assert "note: 100,000 scenes in release, hf take about" in err and "NOT ENOUGH" in err


def test_a_small_split_starts_without_sampling(tmp_path, monkeypatch):
    from rosetrain.data import disk, generate

    monkeypatch.setattr(disk, "estimate_bytes", lambda *a: pytest.fail("a small split was sampled"))
    monkeypatch.setattr(
        generate,
        "run_job",
        lambda job, **kw: {"split": job.split, "scenes": 0, "rows": 0, "out": str(job.out_dir)},
    )
    assert cli("generate", "--spec", "smoke", "--out", str(tmp_path / "d"), "--scenes", "50", "--quiet") == 0


def parsed(*argv: str):
    from rosetrain.cli import build_parser

    return build_parser(argv[0]).parse_args(list(argv))


def test_eval_runs_a_cpu_model_on_one_thread_unless_told_otherwise(monkeypatch):
    import torch

    from rosetrain.commands.evaluate import eval_threads

    base = ("eval", "--model", "m", "--out", "o")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert eval_threads(parsed(*base)) == 1
    assert eval_threads(parsed(*base, "--threads", "4")) == 4
    assert eval_threads(parsed(*base, "--runner", "openai")) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert eval_threads(parsed(*base)) is None  # a GPU: torch's default


def test_eval_threads_is_applied(tmp_path, monkeypatch, rose_sample_dir):
    import torch

    from rosetrain.evaluation import evaluate as E

    seen = []
    monkeypatch.setattr(E, "evaluate", lambda *a, **k: seen.append(torch.get_num_threads()) or 1 / 0)
    before = torch.get_num_threads()
    try:
        with pytest.raises(ZeroDivisionError):
            cli(
                "eval",
                "--model",
                "m",
                "--data",
                str(rose_sample_dir),
                "--out",
                str(tmp_path / "r"),
                "--threads",
                "1",
            )
    finally:
        torch.set_num_threads(before)
    assert seen == [1]


def test_a_runner_that_answered_nothing_does_not_block_a_retry_with_another(tmp_path, tiny_model_dir, capsys):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here: its runner would start")
    data = tmp_path / "data"
    generate = ("generate", "--spec", "smoke", "--out", str(data), "--split", "test", "--scenes", "1")
    assert cli(*generate, "--formats", "release", "--num-proc", "1", "--quiet") == 0
    run = ("eval", "--model", str(tiny_model_dir), "--data", str(data), "--out", str(tmp_path / "run"))
    assert cli(*run, "--runner", "vllm", "--no-progress") == 2  # vllm is missing: nothing answered
    assert "vllm" in capsys.readouterr().err
    assert cli(*run, "--max-new-tokens", "4", "--no-progress") == 0
    # once something is answered, the runner is part of the run: another is refused
    assert cli(*run, "--runner", "openai", "--base-url", "http://127.0.0.1:9/v1", "--no-progress") == 2
    assert "made with runner 'transformers'" in capsys.readouterr().err


def test_train_check_validates_a_changed_key_before_it_reports_the_old_checkpoint(
    tmp_path, tiny_model_dir, capsys
):
    from rosetrain.core.io import claim_outputs, output_lock
    from rosetrain.train.recipe import load_recipe
    from rosetrain.train.resume import record_recipe

    out = tmp_path / "out"
    base = ["--set", f"model={tiny_model_dir}", "--set", f"output_dir={out}"]
    record_recipe(load_recipe(ROOT / "recipes" / "tiny-sft.yaml", [s for s in base if s != "--set"]))
    with output_lock(out):  # a checkpoint of rosetrain's: its marker names it
        claim_outputs(out / "checkpoint-5")
    (out / "checkpoint-5").mkdir()
    (out / "checkpoint-5" / "trainer_state.json").write_text('{"global_step": 5}')
    for state in ("optimizer.pt", "scheduler.pt"):  # --check looks for them, never into them
        (out / "checkpoint-5" / state).write_bytes(b"")
    check = ("train", "sft", "--recipe", "tiny-sft", "--check", *base)
    assert cli(*check) == 0
    assert f"resumes from {out / 'checkpoint-5'}" in capsys.readouterr().out
    # a bad new key is named, not hidden behind "holds checkpoint-5 of a run with another recipe"
    assert cli(*check, "--set", "data.spec=no-such-spec.yaml") == 2
    err = capsys.readouterr().err
    assert "data.spec" in err and "checkpoint-5" not in err
    # a good new key that changes what trains: the checkpoint may not resume with it
    assert cli(*check, "--set", "learning_rate=0.5") == 2
    assert "checkpoint-5 of a run with another recipe" in capsys.readouterr().err


def test_fsdp_on_a_machine_without_a_gpu_is_refused_not_run_as_ddp(
    tmp_path, tiny_model_dir, monkeypatch, capsys
):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what accelerate launch sets for fsdp.yaml
    check = ("train", "sft", "--recipe", "tiny-sft", "--check", "--set", f"model={tiny_model_dir}")
    assert cli(*check, "--set", f"output_dir={tmp_path / 'out'}") == 2
    assert "FSDP" in capsys.readouterr().err
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    assert cli(*check, "--set", f"output_dir={tmp_path / 'out'}") == 0


def test_every_option_says_its_default():
    """A flag is off unless given and a required option has none; any other option's
    help says what it is when left out."""
    import argparse

    from rosetrain.cli import COMMANDS, HelpFormatter, build_parser

    silent = []
    for name in COMMANDS:
        parser = build_parser(name)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        formatter = HelpFormatter(name)
        for action in sub._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            text = formatter._get_help_string(action) or ""
            if not action.help or (action.nargs != 0 and not action.required and "default" not in text):
                silent.append(f"{name} {action.option_strings[0]}")
    assert silent == []


def test_eval_help_shows_the_defaults(capsys):
    assert cli("eval", "--help") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "requests in flight at once (openai runner) (default: 8)" in out
    assert "transformers: the model in this process" in out and "(default: transformers)" in out
    assert "tokens an answer may take (default: 256, or the suite's)" in out  # the unit, then the default
    assert cli("train", "--help") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "repeatable (default: none)" in out and "[]" not in out.replace("[a, b]", "")


def test_the_folders_the_docs_write_into_are_ignored_by_git():
    """docs/generating.md's --shard jobs write parts/, docs/lmms-eval.md's export tasks/."""
    ignored = (ROOT / ".gitignore").read_text().split()
    for folder in ("/data/", "/runs/", "/models/", "/tasks/", "/parts/"):
        assert folder in ignored


def test_ci_comments_say_what_lint_checks():
    text = (ROOT / ".ci" / "run").read_text()
    assert "core modules" not in text and "mypy on the whole rosetrain package" in text
    assert 'files = ["rosetrain"]' in (ROOT / "pyproject.toml").read_text()  # what mypy checks


def demo_summary() -> dict:
    def stage(counting, action):
        return {"counting_avg": counting, "action_avg": action, "gap": counting - action, "avg_pass": 0.5}

    return {
        "stages": {"base": stage(0.8, 0.0), "sft": stage(0.8, 0.6), "grpo": stage(0.82, 0.62)},
        "heldout_family": {"base": stage(0.5, 0.0), "sft": stage(0.5, 0.2), "grpo": stage(0.5, 0.25)},
        "targets": {"base_gap": {"met": True}, "gap_ratio": {"met": False}},
    }


def test_the_demo_ends_with_a_table_a_person_reads(tmp_path):
    from rosetrain.demo.report import final_table

    lines = final_table(demo_summary(), tmp_path / "report.md")
    assert "in distribution" in lines[0] and "held-out palettes" in lines[0] and "held-out family" in lines[0]
    # a summary without the palette split (an older run's) shows dashes there, never a crash
    assert lines[2].split() == ["base", "80.0", "0.0", "80.0", "-", "-", "-", "50.0", "0.0", "50.0"]
    assert lines[-2] == "targets met: 1 of 2 (missed: gap_ratio)"
    assert lines[-1] == f"report: {tmp_path / 'report.md'}"
    assert not any(line.lstrip().startswith("{") for line in lines)  # no raw JSON


def test_stages_plot_is_in_points_with_both_distributions(tmp_path, monkeypatch):
    import matplotlib.axes

    from rosetrain.demo.report import plot_stages

    seen = []
    original = matplotlib.axes.Axes.bar
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "bar",
        lambda ax, x, h, *a, **k: seen.append(list(h)) or original(ax, x, h, *a, **k),
    )
    summary = demo_summary()
    plot_stages(summary["stages"], tmp_path / "stages.png", summary["heldout_family"])
    assert (tmp_path / "stages.png").stat().st_size > 1000
    assert len(seen) == 4  # counting and action bars, in and out of distribution
    assert seen[0] == pytest.approx([80, 80, 82]) and seen[3] == pytest.approx([0, 20, 25])


def test_compare_plot_legends_name_the_runs(tmp_path, monkeypatch):
    import matplotlib.axes

    from rosetrain.reports.compare import write_plots

    labels = []
    original = matplotlib.axes.Axes.bar
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "bar",
        lambda ax, *a, **k: labels.append(k.get("label")) or original(ax, *a, **k),
    )
    entry = {
        "before": 0.5,
        "after": 0.7,
        "ci95_before": (0.4, 0.6),
        "ci95_after": (0.6, 0.8),
        "delta": 0.2,
        "ci95": (0.1, 0.3),
    }
    result = {
        "before_run": "runs/demo/eval/base-heldout",
        "after_run": "runs/demo/eval/grpo-heldout",
        "templates": {"T1": {**entry, "short": "G-Cnt"}},
        "counting_avg": entry,
        "action_avg": entry,
        "gap": entry,
        "by_region_case": {"zero": {**entry, "n": 3}},
    }
    write_plots(result, tmp_path)
    assert labels[:2] == ["before: base-heldout", "after: grpo-heldout"]


def test_a_listing_piped_into_a_reader_that_leaves_early_is_quiet():
    """`rosetrain configs list | head -1`: the reader closes the pipe; the command
    stops without an error line or a traceback (it printed 'error: Broken pipe')."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "rosetrain", "configs", "list"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0) as listing:
        assert listing.stdout is not None and listing.stderr is not None
        listing.stdout.read(1)
        listing.stdout.close()  # before the listing is written in full
        stderr = listing.stderr.read().decode()
    assert listing.returncode in (0, 141) and stderr == ""


def test_eval_takes_a_run_folder_and_a_finished_rerun_says_it_ran_nothing(tmp_path, tiny_model_dir, capsys):
    """--model runs/x is the run's final model (runs/x/checkpoint-final), as TRL's
    output_dir is; a rerun of the finished eval says the model answered nothing."""
    import json
    import shutil

    data = tmp_path / "data"
    generate = ("generate", "--spec", "smoke", "--out", str(data), "--split", "test", "--scenes", "1")
    assert cli(*generate, "--formats", "release", "--num-proc", "1", "--quiet") == 0
    run = tmp_path / "runs" / "tiny-sft"
    shutil.copytree(tiny_model_dir, run / "checkpoint-final")
    out = tmp_path / "eval"
    argv = ("eval", "--model", str(run), "--data", str(data), "--out", str(out), "--limit", "2")
    assert cli(*argv, "--max-new-tokens", "4", "--no-progress") == 0
    captured = capsys.readouterr()
    assert f"using its final model {run / 'checkpoint-final'}" in captured.err
    assert "nothing to run" not in captured.out
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {row["model"] for row in rows} == {str(run / "checkpoint-final")}
    assert cli(*argv, "--max-new-tokens", "4", "--no-progress") == 0
    assert "nothing to run: all 2 items already have answers" in capsys.readouterr().out
