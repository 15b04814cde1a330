"""Reading splits in the ROSE release layout and predictions files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.data.predictions import read_predictions
from rosetrain.data.release import load_split, split_files

ROSE_DIR = Path(__file__).resolve().parent / "data" / "rose-v0.1"
GLOBAL_BRIDGE = "metadata_test_global_click_bridge.jsonl"
COUNT_BRIDGE = "metadata_test_matched_local_count_bridge.jsonl"


def record(item_id: str, **changes) -> dict:
    base = {
        "item_id": item_id,
        "scene_id": "s1",
        "task_template": "T1_COUNT_GLOBAL",
        "task_mode": "COUNT",
        "region_type": "GLOBAL",
        "region_params": {},
        "rows": 7,
        "cols": 7,
        "ground_truth_count": 1,
        "ground_truth_clicks": ["R1,C1"],
        "all_target_cells": ["R1,C1"],
        "answer": "COUNT(1)",
    }
    base.update(changes)
    return base


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture()
def rose_dir():
    assert (ROSE_DIR / GLOBAL_BRIDGE).exists(), f"vendored ROSE v0.1 metadata missing in {ROSE_DIR}"
    return ROSE_DIR


def test_official_bridge_folder_loads(rose_dir):
    records = load_split(rose_dir, "test")
    assert len(records) == 2224
    assert {r["task_template"] for r in records} == {"T1B_CLICK_GLOBAL", "T2B_COUNT_LOCAL_MATCHED"}
    assert len(load_split(rose_dir / GLOBAL_BRIDGE, "test")) == 1112
    # a file's rows of another split are left out, as the official evaluator leaves them out
    assert load_split(rose_dir / GLOBAL_BRIDGE, "dev") == []
    with pytest.raises(RosetrainError, match="metadata_dev.jsonl"):
        load_split(rose_dir, "dev")


def test_bridges_beside_a_main_file_are_opt_in(tmp_path, rose_dir):
    write_jsonl(tmp_path / "metadata_test.jsonl", [record("main-1")])
    shutil.copy(rose_dir / COUNT_BRIDGE, tmp_path / COUNT_BRIDGE)
    assert [r["item_id"] for r in load_split(tmp_path, "test")] == ["main-1"]
    with_bridges = load_split(tmp_path, "test", bridges=True)
    assert len(with_bridges) == 1 + 1112 and with_bridges[0]["item_id"] == "main-1"
    (tmp_path / "metadata_test.jsonl").unlink()
    assert len(load_split(tmp_path, "test")) == 1112
    with pytest.raises(RosetrainError):
        load_split(tmp_path, "test", bridges=False)


def test_bridges_asked_for_are_found_beside_a_main_file_given_by_path(tmp_path, rose_dir):
    main_file = write_jsonl(tmp_path / "metadata_test.jsonl", [record("main-1")])
    shutil.copy(rose_dir / COUNT_BRIDGE, tmp_path / COUNT_BRIDGE)
    assert split_files(main_file, "test", bridges=True) == [main_file, tmp_path / COUNT_BRIDGE]
    assert split_files(main_file, "test") == [main_file]
    assert len(load_split(main_file, "test", bridges=True)) == 1 + 1112
    # a bridge file given by path is read alone
    assert split_files(tmp_path / COUNT_BRIDGE, "test", bridges=True) == [tmp_path / COUNT_BRIDGE]
    other = write_jsonl(tmp_path / "mine.jsonl", [record("main-1")])
    with pytest.raises(
        RosetrainError, match=r"mine.jsonl: bridges: only a file named metadata_<split>.jsonl"
    ):
        split_files(other, "test", bridges=True)


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling link"])
def test_a_bridge_path_that_is_no_regular_file_is_an_error_naming_it(tmp_path, kind):
    write_jsonl(tmp_path / "metadata_test.jsonl", [record("main-1")])
    bridge = tmp_path / GLOBAL_BRIDGE
    {
        "folder": bridge.mkdir,
        "fifo": lambda: os.mkfifo(bridge),
        "dangling link": lambda: bridge.symlink_to("gone"),
    }[kind]()
    what = {"folder": "a folder", "fifo": r"a named pipe \(FIFO\)", "dangling link": "a link to nothing"}[
        kind
    ]
    for data in (tmp_path, tmp_path / "metadata_test.jsonl"):
        with pytest.raises(
            RosetrainError, match=rf"{GLOBAL_BRIDGE}: a bridge file must be a regular file; this is {what}"
        ):
            split_files(data, "test", bridges=True)
    assert split_files(tmp_path, "test") == [tmp_path / "metadata_test.jsonl"]  # not asked for: not read


def test_one_folder_per_split_layout(tmp_path):
    write_jsonl(tmp_path / "dev" / "metadata_dev.jsonl", [record("a"), record("b")])
    assert [r["item_id"] for r in load_split(tmp_path, "dev")] == ["a", "b"]
    assert split_files(tmp_path, "dev") == [tmp_path / "dev" / "metadata_dev.jsonl"]


def test_a_split_whose_name_extends_another_is_not_taken_for_its_bridge(tmp_path):
    write_jsonl(tmp_path / "metadata_test.jsonl", [record("main-1")])
    write_jsonl(tmp_path / "metadata_test_hard.jsonl", [record("hard-1")])  # the split "test_hard"
    assert split_files(tmp_path, "test", bridges=True) == [tmp_path / "metadata_test.jsonl"]
    assert [r["item_id"] for r in load_split(tmp_path, "test", bridges=True)] == ["main-1"]
    assert [r["item_id"] for r in load_split(tmp_path, "test_hard")] == ["hard-1"]


def test_bad_json_names_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "metadata_test.jsonl", [record("a"), "", "{not json"])
    with pytest.raises(RosetrainError, match=r"metadata_test.jsonl:3: not valid JSON"):
        load_split(tmp_path, "test")
    write_jsonl(path, [record("a"), "[1, 2]"])
    with pytest.raises(RosetrainError, match=r":2: expected a JSON object"):
        load_split(tmp_path, "test")


def test_missing_required_field_names_field_and_line(tmp_path):
    broken = record("b")
    del broken["ground_truth_clicks"]
    no_region = record("c")
    del no_region["region_params"]
    write_jsonl(tmp_path / "metadata_test.jsonl", [record("a"), broken])
    with pytest.raises(RosetrainError, match=r":2: record lacks required field\(s\) ground_truth_clicks"):
        load_split(tmp_path, "test")
    write_jsonl(tmp_path / "metadata_test.jsonl", [no_region])
    with pytest.raises(RosetrainError, match="region_params"):
        load_split(tmp_path, "test")
    hf_style = record("d", region_params_json="{}")
    del hf_style["region_params"]
    write_jsonl(tmp_path / "metadata_test.jsonl", [hf_style])
    assert load_split(tmp_path, "test")[0]["item_id"] == "d"


def test_duplicate_item_ids_in_a_split_fail(tmp_path):
    write_jsonl(tmp_path / "metadata_test.jsonl", [record("a"), record("b"), record("a")])
    with pytest.raises(RosetrainError, match=r":3: item_id 'a' already at metadata_test.jsonl:1"):
        load_split(tmp_path, "test")


def test_reading_some_fields_keeps_them_and_fails_as_a_full_read(tmp_path):
    path = write_jsonl(tmp_path / "metadata_test.jsonl", [record("a", prompt="Count. " * 50), record("b")])
    full, some = load_split(tmp_path, "test"), load_split(tmp_path, "test", fields=("scene_id",))
    assert "prompt" not in some[0] and "answer" not in some[0]
    assert some == [{k: r[k] for k in some_record} for r, some_record in zip(full, some)]
    assert {"scene_id", "ground_truth_clicks", "region_params"} <= set(some[1])
    write_jsonl(path, [record("a"), "", record("a")])
    with pytest.raises(RosetrainError, match=r":3: item_id 'a' already at metadata_test.jsonl:1"):
        load_split(tmp_path, "test", fields=("scene_id",))
    write_jsonl(path, [record("a"), "{not json"])
    with pytest.raises(RosetrainError, match=r"metadata_test.jsonl:2: not valid JSON"):
        load_split(tmp_path, "test", fields=("scene_id",))
    path.write_bytes(json.dumps(record("a", prompt="@")).replace("@", "\\udcff").encode() + b"\n")
    got = load_split(tmp_path, "test", fields=("scene_id",))  # a lone surrogate: read in full
    assert got[0]["scene_id"] == "s1" and got == load_split(tmp_path, "test")
    path.write_bytes(json.dumps(record("a", prompt="@")).encode().replace(b"@", b"\xff") + b"\n")
    with pytest.raises(RosetrainError, match=r":1: not UTF-8 text"):
        load_split(tmp_path, "test", fields=("scene_id",))


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(RosetrainError, match="no such folder"):
        load_split(tmp_path / "nope", "test")


def test_read_predictions(tmp_path):
    path = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"item_id": "a", "raw_text": "COUNT(1)", "model": "m", "error": None},
            "",
            {"item_id": "b", "raw_text": None, "model": "m", "error": "timeout"},
        ],
    )
    predictions = read_predictions(path)
    assert list(predictions) == ["a", "b"] and predictions["b"]["error"] == "timeout"
    # whatever a model wrote is scored: NaN and lone surrogates in raw_text too
    path.write_text(
        '{"item_id": "a", "raw_text": NaN, "model": "m\u00e9", "error": {"code": 1}}\n'
        '{"item_id": "b", "raw_text": "\\ud800", "data_fingerprint": "sha256:0"}\n'
    )
    assert read_predictions(path)["b"]["raw_text"] == "\ud800"


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ('{"item_id": "b", "raw_text": "x"', r"p.jsonl:2: not valid JSON"),
        ('"just a string"', r"p.jsonl:2: expected a JSON object"),
        ('{"raw_text": "COUNT(1)"}', r"p.jsonl:2: a prediction needs a string 'item_id'"),
        ('{"item_id": 7}', r"p.jsonl:2: a prediction needs a string 'item_id'"),
        (
            '{"item_id": "a", "raw_text": "COUNT(2)"}',
            r"p.jsonl:2: duplicate prediction for item_id 'a' \(first at line 1\)",
        ),
        ('{"item_id": "b", "data_fingerprint": 7}', r"p.jsonl:2: field 'data_fingerprint' must be a string"),
        ('{"item_id": "b", "model": -Infinity}', r"p.jsonl:2: field 'model' holds NaN or Infinity"),
        ('{"item_id": "b", "error": ["\\ud800"]}', r"p.jsonl:2: field 'error' holds a lone surrogate"),
        ('{"item_id": "b", "raw_text": ' + "[" * 2000 + "]" * 2000 + "}", r"p.jsonl:2: not valid JSON"),
    ],
)
def test_bad_prediction_lines_fail_with_their_line(tmp_path, bad_line, message):
    path = write_jsonl(tmp_path / "p.jsonl", [{"item_id": "a", "raw_text": "COUNT(1)"}, bad_line])
    with pytest.raises(RosetrainError, match=message):
        read_predictions(path)


def test_missing_predictions_file(tmp_path):
    with pytest.raises(RosetrainError, match="no such predictions file"):
        read_predictions(tmp_path / "absent.jsonl")
    with pytest.raises(RosetrainError, match="/dev/null: not a regular file"):
        read_predictions("/dev/null")


def test_loader_imports_only_the_standard_library():
    import subprocess
    import sys

    code = (
        "import sys; import rosetrain.data.release; "
        "heavy = {'numpy', 'torch', 'pyarrow', 'datasets'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_integers_past_64_bits_read_exactly_on_both_reading_paths(tmp_path):
    # as the official evaluator's json.loads reads them (orjson made them floats)
    big = 123456789012345678901234567890
    line = f'{{"item_id": "a", "raw_text": {big}}}\n'
    for text in (line, line + "\n"):  # the blank line sends it to the line-by-line reading
        (tmp_path / "p.jsonl").write_text(text)
        assert read_predictions(tmp_path / "p.jsonl")["a"]["raw_text"] == big
