"""benchmarks/gpu_check.py's CPU dry run: every check of the GPU path (the real
recipes on a tiny Qwen2.5-VL, then the 3B's shape), at toy sizes, passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_check_runs_dry_on_the_cpu(tmp_path):
    found = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_check.py"),
            "--dry-run",
            "--steps",
            "1",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in found.stdout.splitlines() if line.split("  ")[0] in ("PASS", "FAIL", "SKIP")]
    assert found.returncode == 0, found.stdout + found.stderr[-2000:]
    names = [line.split("  ", 1)[1].split(":")[0] for line in lines]
    assert names == ["packages", "tiny model", "data", "sft", "grpo", "eval", "qwen2.5-vl-3b"]
    assert all(line.startswith("PASS") for line in lines)
