"""Data rosetrain reads is checked, never trusted: image paths stay inside the
dataset folder, gold records that contradict themselves and specs with values
of the wrong kind are errors naming file, line and field, and held-out scenes
never reach a training stream. Every failure is one line on the console."""

import json
import shutil
from pathlib import Path

import pytest

from rosetrain.cli import main
from rosetrain.core.errors import RosetrainError
from rosetrain.data.release import load_split, select_records, with_image_paths


@pytest.fixture(scope="module")
def split(tmp_path_factory, small_spec_text, write_spec):
    """A generated split (release layout), read-only: tests copy it before changing it."""
    root = tmp_path_factory.mktemp("data")
    spec = write_spec(root, small_spec_text)
    assert (
        main(
            [
                "generate",
                "--spec",
                str(spec),
                "--out",
                str(root / "split"),
                "--split",
                "test",
                "--scenes",
                "6",
                "--formats",
                "release",
                "--num-proc",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    return root / "split"


def copy_with(split: Path, tmp_path: Path, line: int, **changes) -> Path:
    """A copy of the split whose metadata line ``line`` (1-based) has ``changes``."""
    folder = tmp_path / "copy"
    shutil.copytree(split, folder, ignore=shutil.ignore_patterns(".parts", ".rosetrain.lock"))
    metadata = folder / "metadata_test.jsonl"
    rows = [json.loads(text) for text in metadata.read_text().splitlines()]
    rows[line - 1].update(changes)
    metadata.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def score(folder: Path, tmp_path: Path) -> int:
    predictions = tmp_path / "predictions.jsonl"
    if not predictions.exists():
        predictions.write_text('{"item_id": "none", "raw_text": "COUNT(1)"}\n')
    return main(
        [
            "score",
            "--data",
            str(folder),
            "--split",
            "test",
            "--predictions",
            str(predictions),
            "--out",
            str(tmp_path / "scored"),
            "--allow-partial",
        ]
    )


# ----------------------------------------------------------------- image paths


@pytest.mark.parametrize(
    "image",
    ["../../../../../../etc/passwd", "/etc/passwd", "images/../../outside.png", "images/link-out.png"],
)
def test_an_image_path_leaving_the_folder_names_the_row(tmp_path, split, capsys, image):
    (tmp_path / "outside.png").write_bytes(b"secret")
    folder = copy_with(split, tmp_path, 3, image=image)
    (folder / "images" / "link-out.png").symlink_to(tmp_path / "outside.png")
    where = f"{folder / 'metadata_test.jsonl'}:3: image"
    with pytest.raises(RosetrainError, match="dataset folder") as err:
        load_split(folder, "test")
    assert where in str(err.value)
    assert score(folder, tmp_path) == 2 and where in one_error_line(capsys)
    assert main(["preview", str(folder), "--split", "test", "--out", str(tmp_path / "p.png")]) == 2
    assert where in one_error_line(capsys)
    assert not (tmp_path / "p.png").exists()


def test_records_given_to_eval_keep_their_images_inside(split):
    records, root = select_records(split, "test", None)
    assert all(Path(r["image"]).is_file() for r in with_image_paths(records, root))
    crafted = [{**records[0], "image": "../x.png"}]
    with pytest.raises(RosetrainError, match="item .*: image"):
        with_image_paths(crafted, root)


def test_the_official_release_files_load(rose_sample_dir):
    assert len(load_split(rose_sample_dir, "test", bridges=True)) == 2 * 1112


# ----------------------------------------------------------------- gold records


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"ground_truth_clicks": ["R99,C1"], "ground_truth_count": 1},
            "ground_truth_clicks: R99,C1 lies outside",
        ),
        ({"all_target_cells": ["R1,C99"]}, "all_target_cells: R1,C99 lies outside"),
        ({"ground_truth_count": 7}, "ground_truth_count: 7 disagrees"),
        ({"task_template": "T9_CLICK_EVERYTHING"}, "task_template: unknown template 'T9_CLICK_EVERYTHING'"),
        ({"rows": True}, "rows: expected an integer"),
        ({"ground_truth_clicks": "R1,C1"}, "ground_truth_clicks: a string that is not a JSON list"),
        ({"region_target_cells": []}, None),
        ({"task_mode": "COUNT"}, "task_mode: 'COUNT' contradicts task_template T3_CLICK_LOCAL_NUMERIC"),
        ({"image": ["images/a.png"]}, "image: expected a relative path"),
        ({"ground_truth_clicks": "[" * 5000 + "]" * 5000}, "ground_truth_clicks: a string that is not"),
    ],
)
def test_a_gold_record_that_contradicts_itself_names_file_line_and_field(
    tmp_path, split, capsys, changes, message
):
    rows = [json.loads(line) for line in (split / "metadata_test.jsonl").read_text().splitlines()]
    line = next(
        i
        for i, r in enumerate(rows, 1)
        if r["ground_truth_count"] > 0 and r["task_template"] == "T3_CLICK_LOCAL_NUMERIC"
    )
    folder = copy_with(split, tmp_path, line, **changes)
    err = (score(folder, tmp_path), one_error_line(capsys))[1]
    assert f"metadata_test.jsonl:{line}: " in err
    assert (message or "region_target_cells: disagrees") in err


def test_clicks_must_be_the_targets_in_the_region(tmp_path, split, capsys):
    rows = [json.loads(line) for line in (split / "metadata_test.jsonl").read_text().splitlines()]
    line, row = next(
        (i, r)
        for i, r in enumerate(rows, 1)
        if r["task_template"] == "T3_CLICK_LOCAL_NUMERIC"
        and set(r["all_target_cells"]) - set(r["ground_truth_clicks"])
    )
    wrong = sorted(set(row["all_target_cells"]) - set(row["ground_truth_clicks"]))[:1]
    folder = copy_with(
        split, tmp_path, line, ground_truth_clicks=wrong, ground_truth_count=1, region_target_cells=wrong
    )
    assert score(folder, tmp_path) == 2
    assert f"metadata_test.jsonl:{line}: ground_truth_clicks" in one_error_line(capsys)


# ----------------------------------------------------------------- specs


@pytest.fixture
def spec_with(tmp_path, small_spec_text, write_spec):
    """``spec_with(*(old, new))``: the small spec so changed, in ``tmp_path``."""

    def changed(*replacements: tuple[str, str]) -> Path:
        text = small_spec_text
        for old, new in replacements:
            assert old in text
            text = text.replace(old, new)
        return write_spec(tmp_path, text)

    return changed


LEVELS = "levels:\n  - {name: easy}\n  - {name: hard, rows: [5, 6]}\n  - {name: easy, cols: [5, 6]}\n"


@pytest.mark.parametrize(
    "replacements, message",
    [
        ([("exceptions: [1, 4]", "exceptions: [1, 5]")], "exceptions: up to 5 exceptions"),
        (
            [("negative_rate: 0.2", "negative_rate: 0.2\ntasks_per_scene: 2.5")],
            "tasks_per_scene: expected an integer",
        ),
        (
            [("negative_rate: 0.2", "negative_rate: 0.2\ntasks_per_scene: true")],
            "tasks_per_scene: expected an integer",
        ),
        ([("negative_rate: 0.2", "negative_rate: 0.2\ncue: {color: 5}")], "cue.color: expected 3 integers"),
        (
            [("negative_rate: 0.2", "negative_rate: 0.2\ncue: {color: [1, 2, 300]}")],
            "cue.color: expected 3 integers",
        ),
        (
            [("negative_rate: 0.2", "negative_rate: 0.2\ncue: {colour: [1, 2, 3]}")],
            "unknown key 'colour' at cue (did you mean 'color'?)",
        ),
        ([("negative_rate: 0.2", "negative_rate: 0.2\ncue: red")], "cue: expected a mapping"),
        ([("seed: 3", "seed: 1.5")], "seed: expected an integer"),
        ([("seed: 3", "seed: abc")], "seed: expected an integer"),
        ([("negative_rate: 0.2", "negative_rate: high")], "negative_rate: expected a number"),
        ([("rows: [3, 6]", "rows: [true, 6]")], "rows: expected an int or [low, high]"),
        (
            [("  attribute: 1", "  attribute: {weight: heavy}")],
            "families.attribute.weight: expected a number",
        ),
        ([("negative_rate: 0.2", "negative_rate: 0.2\n" + LEVELS)], "levels[2]: name 'easy' is already"),
        ([("negative_rate: 0.2", "negative_rate: 0.2\nlevels: []")], "levels: expected a non-empty list"),
        ([("  attribute: 1", "  attribute: .inf")], "families.attribute: weight must be a finite number"),
        ([("role: eval", "role: train\nheldout_spec: no-such.yaml")], "heldout_spec: spec file not found"),
    ],
)
def test_a_bad_spec_value_is_refused_naming_the_field(tmp_path, capsys, replacements, message, spec_with):
    spec = spec_with(*replacements)
    assert (
        main(["generate", "--spec", str(spec), "--out", str(tmp_path / "out"), "--scenes", "2", "--quiet"])
        == 2
    )
    err = one_error_line(capsys)
    assert message in err and str(spec) in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- unreadable inputs


def test_a_spec_that_is_a_folder_or_not_text(tmp_path, capsys):
    (tmp_path / "folder.yaml").mkdir()
    (tmp_path / "binary.yaml").write_bytes(b"name: \xff\xfe\n")
    for spec in ("folder.yaml", "binary.yaml"):
        assert (
            main(
                [
                    "generate",
                    "--spec",
                    str(tmp_path / spec),
                    "--out",
                    str(tmp_path / "o"),
                    "--scenes",
                    "1",
                    "--quiet",
                ]
            )
            == 2
        )
        assert spec in one_error_line(capsys)


def test_undecodable_predictions_and_metadata_name_the_line(tmp_path, split, capsys):
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_bytes(b'{"item_id": "a", "raw_text": "x"}\n{"item_id": "\xff"}\n')
    assert score(split, tmp_path) == 2
    assert f"{predictions}:2: not UTF-8" in one_error_line(capsys)
    folder = copy_with(split, tmp_path, 1)
    with open(folder / "metadata_test.jsonl", "ab") as handle:
        handle.write(b'{"item_id": "\xfe"}\n')
    predictions.write_text('{"item_id": "a", "raw_text": "x"}\n')
    assert score(folder, tmp_path) == 2
    assert "not UTF-8" in one_error_line(capsys)


@pytest.mark.parametrize(
    "fields, message",
    [
        ('"model": NaN', "field 'model' holds NaN or Infinity"),
        ('"error": "\\ud800"', "field 'error' holds a lone surrogate"),
        ('"error": {"detail": ["\\udfff"]}', "field 'error' holds a lone surrogate"),
        ('"data_fingerprint": ["sha256:0"]', "field 'data_fingerprint' must be a string"),
        ('"raw_text": ' + "[" * 5000 + "]" * 5000, "not valid JSON (depth limit exceeded"),
    ],
)
def test_prediction_fields_a_run_cannot_write_name_the_line(tmp_path, split, capsys, fields, message):
    # these went on to a traceback (writing evaluation_summary.json, reading the line)
    item_id = json.loads((split / "metadata_test.jsonl").read_text().splitlines()[0])["item_id"]
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(f'{{"item_id": "{item_id}", "raw_text": "COUNT(1)", {fields}}}\n')
    assert score(split, tmp_path) == 2
    assert f"{predictions}:1: {message}" in one_error_line(capsys)


def test_score_inputs_and_output_in_the_wrong_shape(tmp_path, split, capsys):
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"item_id": "test-0000000-T1", "raw_text": "COUNT(1)"}\n')
    (tmp_path / "out-file").write_text("a file")
    assert (
        main(
            [
                "score",
                "--data",
                str(split),
                "--predictions",
                str(predictions),
                "--split",
                "test",
                "--out",
                str(tmp_path / "out-file"),
                "--allow-partial",
            ]
        )
        == 2
    )
    assert "out-file" in one_error_line(capsys)
    assert (
        main(
            [
                "score",
                "--data",
                str(split),
                "--predictions",
                str(tmp_path),
                "--split",
                "test",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    one_error_line(capsys)
    assert (
        main(
            [
                "score",
                "--data",
                str(split),
                "--predictions",
                str(predictions),
                "--split",
                "../x",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "--split" in one_error_line(capsys)


def test_preview_inputs_and_output_in_the_wrong_shape(tmp_path, split, capsys):
    (tmp_path / "a-folder.png").mkdir()
    assert main(["preview", str(split), "--split", "test", "--out", str(tmp_path / "a-folder.png")]) == 2
    assert "a-folder.png" in one_error_line(capsys)
    folder = copy_with(split, tmp_path, 1)
    next((folder / "images").rglob("test-0000000.png")).write_bytes(b"not a png")
    assert main(["preview", str(folder), "--split", "test", "--out", str(tmp_path / "p.png")]) == 2
    assert "test-0000000.png" in one_error_line(capsys)
    assert (
        main(["preview", str(split), "--split", "test", "--limit", "0", "--out", str(tmp_path / "p.png")])
        == 2
    )
    assert "--limit" in one_error_line(capsys)
    assert main(["preview", str(split), "--split", "../test", "--out", str(tmp_path / "p.png")]) == 2
    assert "--split" in one_error_line(capsys)
    assert (
        main(["preview", str(split), "--split", "test", "--template", "T3", "--out", str(tmp_path / "p.png")])
        == 2
    )
    assert "--template: unknown template 'T3'" in one_error_line(capsys)


def test_exclude_needs_a_split_it_can_check_against(tmp_path, capsys, small_spec_text, write_spec):
    spec = write_spec(tmp_path, small_spec_text)
    official = tmp_path / "metadata_test.jsonl"
    official.write_text('{"item_id": "CHITEM_000001__GCLK", "scene_id": "CHSCENE_000001"}\n')
    assert (
        main(
            [
                "generate",
                "--spec",
                str(spec),
                "--out",
                str(tmp_path / "out"),
                "--scenes",
                "2",
                "--exclude",
                str(official),
                "--quiet",
            ]
        )
        == 2
    )
    err = one_error_line(capsys)
    assert "--exclude" in err and "no scene_fingerprint" in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------- held-out scenes


def test_a_heldout_spec_is_never_streamed_for_training(spec_with):
    from rosetrain.data.hf import stream_dataset

    spec = spec_with(("role: eval", "role: heldout"), ("namespace: test-small", "namespace: heldout"))
    with pytest.raises(RosetrainError, match="role: heldout"):
        stream_dataset(str(spec), split="train")


def test_a_stream_of_the_heldout_splits_own_scenes_is_refused(tmp_path, small_spec_text, write_spec):
    from rosetrain.train.data import check_stream_apart
    from rosetrain.train.recipe import DataConfig, EvalConfig, RecipeError

    spec = write_spec(tmp_path, small_spec_text)  # role eval: the split a run is evaluated on
    assert (
        main(
            [
                "generate",
                "--spec",
                str(spec),
                "--out",
                str(tmp_path / "held"),
                "--split",
                "test",
                "--scenes",
                "3",
                "--formats",
                "release",
                "--num-proc",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    records = load_split(tmp_path / "held", "test")
    heldout = EvalConfig(folder=str(tmp_path / "held"))
    with pytest.raises(RecipeError, match="streams the scenes of the held-out split"):
        check_stream_apart(DataConfig(spec=str(spec), seed=3), records, heldout)
    check_stream_apart(DataConfig(spec=str(spec), seed=4), records, heldout)  # other scenes: fine


def test_a_folder_generated_from_a_heldout_spec_is_never_training_data(tmp_path, spec_with):
    from rosetrain.train.data import check_folder
    from rosetrain.train.recipe import DataConfig, RecipeError

    spec = spec_with(("role: eval", "role: heldout"), ("namespace: test-small", "namespace: heldout"))
    assert (
        main(
            [
                "generate",
                "--spec",
                str(spec),
                "--out",
                str(tmp_path / "held"),
                "--split",
                "test",
                "--scenes",
                "2",
                "--formats",
                "hf",
                "--num-proc",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    with pytest.raises(RecipeError, match="role: heldout"):
        check_folder(DataConfig(folder=str(tmp_path / "held"), split="test"))
