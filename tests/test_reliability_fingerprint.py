"""A split's fingerprint names its images too: an image edited in place under the
same metadata is other data (an eval run is not resumed on it), while the
metadata alone (what score needs) still matches a run made with the images."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.data.release import same_fingerprint, split_fingerprint


class Oracle:
    name = "oracle"

    def generate(self, records):
        return [(r["answer"], None) for r in records]


@pytest.fixture
def split_dir(tmp_path, smoke_split) -> Path:
    return smoke_split(tmp_path / "smoke")


def an_image(split: Path) -> Path:
    return sorted((split / "images").rglob("*.png"))[0]


def test_an_image_edited_in_place_is_other_data(split_dir, tmp_path):
    before = split_fingerprint(split_dir, "test")
    image = an_image(split_dir)
    image.write_bytes(image.read_bytes() + b"\0")  # the metadata is unchanged
    after = split_fingerprint(split_dir, "test")
    assert ";images:" in before and not same_fingerprint(before, after)
    meta_only = tmp_path / "meta"  # the metadata alone, as score needs it
    meta_only.mkdir()
    shutil.copy(split_dir / "metadata_test.jsonl", meta_only)
    alone = split_fingerprint(meta_only, "test")
    assert ";images:" not in alone and same_fingerprint(alone, before) and same_fingerprint(alone, after)


def test_eval_is_not_resumed_on_edited_images_and_score_needs_none(split_dir, tmp_path, capsys):
    from rosetrain.evaluation.evaluate import evaluate

    out = tmp_path / "run"
    evaluate("oracle", split_dir, out_dir=out, limit=3, runner=Oracle(), progress=False)
    image = an_image(split_dir)
    image.write_bytes(image.read_bytes() + b"\0")
    with pytest.raises(RosetrainError, match="the same metadata, but the images changed since"):
        evaluate("oracle", split_dir, out_dir=out, runner=Oracle(), progress=False)
    meta_only = tmp_path / "meta"
    meta_only.mkdir()
    shutil.copy(split_dir / "metadata_test.jsonl", meta_only)
    command = ["score", "--data", str(meta_only), "--predictions", str(out / "predictions.jsonl")]
    assert cli_main([*command, "--out", str(tmp_path / "scored"), "--allow-partial"]) == 0
    summary = json.loads((tmp_path / "scored" / "evaluation_summary.json").read_text())
    assert summary["n"] == 3
