"""Fixtures every test file may ask for by name (pytest finds them here; a test
file never imports this module).

- ``write_spec``: ``write_spec(folder, text, name="spec.yaml") -> path``.
- ``small_spec_text``: the one small eval spec (three families, small grids) that
  generator, data and reliability tests build on; ``small_spec``: it written
  into the test's ``tmp_path``.
- ``tiny_train_spec``: ``tiny_train_spec(name) -> text``, the one training spec
  of the train/report tests (one family, 28 px cells: Qwen-VL patches).
- ``release_split``, ``smoke_split`` and ``train_split``: factories of generated
  splits (one process), for a test's own or a module's folder.
- ``tiny_model_dir`` (one tiny model per session, read-only) and
  ``rose_sample_dir`` (the vendored ROSE v0.1 metadata).

Tests that train or run a model for tens of seconds are marked ``slow``
(``make test-fast`` leaves them out) with ``@pytest.mark.slow``.
"""

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROSE_V01 = ROOT / "tests" / "data" / "rose-v0.1"  # real release metadata, vendored
GENERATORS = ROOT / "generators"

requires_cjk = pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig missing")


@pytest.fixture(scope="session")
def rose_sample_dir() -> Path:
    return ROSE_V01


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """One tiny model (``size="tiny"``, seed 0) for the whole session. Read-only:
    a test that changes the folder must copy it first."""
    from rosetrain.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny", size="tiny")


def _write_spec(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def write_spec() -> Callable[..., Path]:
    """``write_spec(folder, text, name="spec.yaml")``: the spec file's path."""
    return _write_spec


SMALL_SPEC = """
name: small
role: eval
namespace: test-small
seed: 3
rows: [3, 6]
cols: [3, 6]
cell_size: [24, 40]
exceptions: [1, 4]
negative_rate: 0.2
image_multiple: 4
families:
  attribute: 1
  sprite_edit: 1
  sprite_pair: 1
"""


@pytest.fixture(scope="session")
def small_spec_text() -> str:
    return SMALL_SPEC


@pytest.fixture
def small_spec(tmp_path) -> Path:
    """The small spec, written to ``tmp_path/spec.yaml``."""
    return _write_spec(tmp_path, SMALL_SPEC)


TINY_TRAIN_SPEC = """
name: {name}
role: train
namespace: {name}
seed: 1
rows: [3, 4]
cols: [3, 4]
cell_size: [28, 28]
image_multiple: 28
exceptions: [1, 3]
negative_rate: 0.1
families: [attribute]
"""


@pytest.fixture(scope="session")
def tiny_train_spec() -> Callable[[str], str]:
    """``tiny_train_spec(name)``: the tiny training spec under its own name and namespace."""

    def named(name: str) -> str:
        return TINY_TRAIN_SPEC.format(name=name)

    return named


def _generate_train_split(root: Path, spec_text: str, scenes: int) -> Path:
    """A small release + Parquet split of ``spec_text`` under ``root/data`` (one process)."""
    from rosetrain.cli import main as cli_main

    (root / "train.yaml").write_text(spec_text)
    command = ["generate", "--spec", str(root / "train.yaml"), "--out", str(root / "data")]
    command += ["--split", "train", "--scenes", str(scenes), "--formats", "release,hf"]
    assert cli_main([*command, "--num-proc", "1", "--quiet"]) == 0
    return root / "data"


@pytest.fixture(scope="session")
def train_split() -> Callable[[Path, str, int], Path]:
    """``train_split(root, spec_text, scenes)``: a release + Parquet ``train``
    split under ``root/data``."""
    return _generate_train_split


def _generate_release_split(
    spec: Path, out: Path, scenes: int, split: str = "test", seed: int | None = None
) -> Path:
    """A release-only split of the spec file ``spec`` at ``out`` (one process)."""
    from rosetrain.cli import main as cli_main

    command = ["generate", "--spec", str(spec), "--out", str(out), "--split", split]
    command += ["--scenes", str(scenes), "--formats", "release", "--num-proc", "1", "--quiet"]
    if seed is not None:
        command += ["--seed", str(seed)]
    assert cli_main(command) == 0
    return out


@pytest.fixture(scope="session")
def release_split() -> Callable[..., Path]:
    """``release_split(spec, out, scenes, split="test", seed=None)``: a release-only
    split of a spec file at ``out``."""
    return _generate_release_split


def _generate_smoke_split(out: Path, scenes: int = 3, seed: int | None = None) -> Path:
    return _generate_release_split(GENERATORS / "smoke.yaml", out, scenes, seed=seed)


@pytest.fixture(scope="session")
def smoke_split() -> Callable[..., Path]:
    """``smoke_split(out, scenes=3, seed=None)``: a release-only ``test`` split of
    ``generators/smoke.yaml`` at ``out``."""
    return _generate_smoke_split
