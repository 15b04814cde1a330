import shutil
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


def write_spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


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


def generate_train_split(root: Path, spec_text: str, scenes: int) -> Path:
    """A small release + Parquet split of ``spec_text`` under ``root/data`` (one process)."""
    from rosetrain.cli import main as cli_main

    (root / "train.yaml").write_text(spec_text)
    command = ["generate", "--spec", str(root / "train.yaml"), "--out", str(root / "data")]
    command += ["--split", "train", "--scenes", str(scenes), "--formats", "release,hf"]
    assert cli_main([*command, "--num-proc", "1", "--quiet"]) == 0
    return root / "data"


def generate_smoke_split(out: Path, scenes: int = 3, seed: int | None = None) -> Path:
    """A release-only ``test`` split of ``generators/smoke.yaml`` at ``out`` (one process)."""
    from rosetrain.cli import main as cli_main

    command = ["generate", "--spec", str(GENERATORS / "smoke.yaml"), "--out", str(out), "--split", "test"]
    command += ["--scenes", str(scenes), "--formats", "release", "--num-proc", "1", "--quiet"]
    if seed is not None:
        command += ["--seed", str(seed)]
    assert cli_main(command) == 0
    return out
