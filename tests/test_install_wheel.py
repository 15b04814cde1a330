"""Installed works like cloned: build the wheel, install it into a fresh
environment and run the everyday commands by name from an empty folder.

The fresh environment is a venv without pip whose one ``.pth`` line adds the
test environment's site-packages (torch, transformers, ... are reused, not
installed: seconds, no network). A ``.pth`` line adds a folder to ``sys.path``
without reading the ``.pth`` files inside it, so the checkout's editable
install is not seen: ``rosetrain`` is imported from the wheel or not at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_INPUTS = ("pyproject.toml", "README.md", "rosetrain", "generators", "recipes", "eval")


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the checkout (the build writes build/ and egg-info beside its sources)."""
    source = copy_sources(tmp / "source")
    dist = tmp / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, source],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("rosetrain-*.whl")
    return wheel


def copy_sources(source: Path) -> Path:
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    return source


def bare_venv(venv: Path) -> Path:
    """A venv without pip that sees the test environment's packages; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "reuse_test_environment.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def pip_install(python: Path, *what: str | Path) -> None:
    command = [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q"]
    subprocess.run([*command, "--no-build-isolation", *what], check=True, capture_output=True)


def fresh_environment(tmp: Path, wheel: Path) -> Path:
    """A venv holding only the wheel, seeing the test environment's other packages; its bin/."""
    pip_install(bare_venv(tmp / "venv"), wheel)
    return tmp / "venv" / "bin"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory, wheel) -> Path:
    return fresh_environment(tmp_path_factory.mktemp("venv"), wheel)


def run(bin_dir: Path, cwd: Path, *argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1")
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_wheel_carries_every_shipped_config_as_a_file(wheel):
    import zipfile

    shipped = {
        f"rosetrain/resources/{path.relative_to(ROOT).as_posix()}"
        for folder in ("generators", "recipes", "eval")
        for path in (ROOT / folder).rglob("*.yaml")
    } | {
        # rglob does not enter generators/demo, a link in the checkout
        f"rosetrain/resources/generators/demo/{path.name}"
        for path in (ROOT / "generators" / "demo").glob("*.yaml")
    }
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert shipped - names == set()
        for name in shipped:  # the files themselves, not links
            assert archive.read(name) == (ROOT / name.removeprefix("rosetrain/resources/")).read_bytes()


@pytest.mark.slow
def test_an_installed_wheel_runs_generate_train_check_and_eval_by_name(installed, tmp_path):
    empty = tmp_path / "work"
    empty.mkdir()
    where = run(installed, empty, "python", "-c", "import rosetrain; print(rosetrain.__file__)")
    assert where.startswith(str(installed.parent)) and not where.startswith(str(ROOT)), where
    assert run(installed, empty, "rosetrain", "--version").strip().startswith("rosetrain 0.")
    listing = run(installed, empty, "rosetrain", "configs", "list")
    for name in ("rose-protocol", "demo/train", "sft-lora-qwen2.5-vl-3b", "zero3", "rose-official"):
        assert f"  {name} " in listing
    # the held-out suite's prepare command with 2 scenes, then the suite by name
    generate = ["rosetrain", "generate", "--spec", "heldout", "--out", "data/heldout", "--split", "test"]
    run(installed, empty, *generate, "--scenes", "2", "--formats", "release", "--num-proc", "1", "--quiet")
    assert (empty / "data" / "heldout" / "metadata_test.jsonl").is_file()
    run(installed, empty, "rosetrain", "tiny-model", "--out", "models/tiny")
    # tiny-sft names models/tiny and generators/demo/train.yaml: the second is the shipped spec
    checked = run(installed, empty, "rosetrain", "train", "sft", "--recipe", "tiny-sft", "--check")
    assert "recipe tiny-sft: OK" in checked
    run(
        installed,
        empty,
        "rosetrain",
        "eval",
        "--suite",
        "heldout",
        "--model",
        "models/tiny",
        "--out",
        "runs/tiny",
        "--limit",
        "3",
        "--max-new-tokens",
        "4",
        "--no-progress",
    )
    assert (empty / "runs" / "tiny" / "evaluation_summary.json").is_file()
    copied = run(installed, empty, "rosetrain", "configs", "copy", "recipe", "tiny-sft", "mine")
    assert Path(copied.strip()) == Path("mine/tiny-sft.yaml")
    assert sorted(p.name for p in empty.iterdir()) == ["data", "mine", "models", "runs"]


def test_the_readme_commands_run_from_the_installed_wheel(installed, tmp_path):
    """The fast half of tests/readme_commands.py (3 scenes where the README says
    more, 8 items per eval): every README command a CPU-only offline machine can
    run, from an empty folder, with the wheel's rosetrain, each Hub model or
    checkpoint the README names replaced by a tiny stand-in model; what it
    cannot run is listed."""
    script = Path(__file__).resolve().parent / "readme_commands.py"
    done = subprocess.run(
        [sys.executable, script, "--bin", installed, "--work", tmp_path / "work"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = done.stdout.split("skipped")[0]
    for command in (
        "rosetrain generate --spec rose-protocol",
        "rosetrain preview",
        "rosetrain score",
        "python block",
        "rosetrain eval --model Qwen/Qwen2.5-VL-3B-Instruct",  # the stand-in model
        "rosetrain compare runs/base",
        "rosetrain eval --model runs/sft/checkpoint-final --data data/probe",
        "rosetrain curriculum",
    ):
        assert command in ran, done.stdout
    # the loop's real recipe is not trained, but the spec the curriculum wrote feeds it
    loop = [line for line in done.stdout.splitlines() if "data.spec=runs/next.yaml" in line]
    assert loop and "--check passed" in loop[0], done.stdout


def test_an_editable_install_finds_the_shipped_configs_too(tmp_path):
    """pip install -e (PEP 660) maps the package to its source folder, where
    rosetrain/resources/ holds links: names resolve through them."""
    source = copy_sources(tmp_path / "source")
    venv = tmp_path / "venv"
    pip_install(bare_venv(venv), "-e", source)
    empty = tmp_path / "work"
    empty.mkdir()
    where = run(venv / "bin", empty, "python", "-c", "import rosetrain; print(rosetrain.__file__)")
    assert where.startswith(str(source)), where
    run(
        venv / "bin",
        empty,
        "rosetrain",
        "generate",
        "--spec",
        "smoke",
        "--out",
        "d",
        "--split",
        "test",
        "--scenes",
        "1",
        "--formats",
        "release",
        "--num-proc",
        "1",
        "--quiet",
    )
    assert (empty / "d" / "metadata_test.jsonl").is_file()
