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
        generate, "run_job", lambda job, **kw: said_before_writing.append(capsys.readouterr().err) or {}
    )
    out = tmp_path / "big"
    assert cli("generate", "--spec", "smoke", "--out", str(out), "--scenes", "100000", "--quiet") == 0
    (err,) = said_before_writing
    assert "note: 100,000 scenes in release, hf take about" in err and "NOT ENOUGH" in err


def test_a_small_split_starts_without_sampling(tmp_path, monkeypatch):
    from rosetrain.data import disk, generate

    monkeypatch.setattr(disk, "estimate_bytes", lambda *a: pytest.fail("a small split was sampled"))
    monkeypatch.setattr(generate, "run_job", lambda job, **kw: {})
    assert cli("generate", "--spec", "smoke", "--out", str(tmp_path / "d"), "--scenes", "50", "--quiet") == 0
