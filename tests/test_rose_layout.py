"""``layout: rose`` (the ROSE-protocol spec) writes data the official ROSE
evaluator reads as ROSE: official subset names, bridges in their own files,
full Table 1 and Table 2 rows for gold answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rosetrain.cli import main
from rosetrain.core.protocol import BRIDGE_TEMPLATES, MAIN_TEMPLATES, T1B, T2B
from rosetrain.data.release import load_split
from rosetrain.generators.records import subset_name
from rosetrain.generators.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
ROSE_SUBSETS = {
    "ROSE-ChineseGlyph",
    "ROSE-EmojiStyle",
    "ROSE-EmojiContent",
    "ROSE-PixelEdit",
    "ROSE-PixelContent",
}


@pytest.fixture(scope="module")
def rose_split(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rose-layout")
    main(
        [
            "generate",
            "--spec",
            str(ROOT / "generators" / "rose-protocol.yaml"),
            "--out",
            str(out),
            "--split",
            "test",
            "--scenes",
            "25",
            "--quiet",
        ]
    )  # every family by scene 23
    return out


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_main_file_holds_the_five_templates_and_bridges_have_their_own_files(rose_split):
    main_rows = _rows(rose_split / "metadata_test.jsonl")
    assert {r["task_template"] for r in main_rows} == set(MAIN_TEMPLATES)
    clicks = _rows(rose_split / "metadata_test_global_click_bridge.jsonl")
    counts = _rows(rose_split / "metadata_test_matched_local_count_bridge.jsonl")
    assert clicks and {r["task_template"] for r in clicks} == {T1B}
    assert counts and {r["task_template"] for r in counts} == {T2B}
    subsets = {r["rose_subset"] for r in main_rows}
    assert ROSE_SUBSETS <= subsets and subsets - ROSE_SUBSETS <= {"rosetrain-attribute"}
    assert all(r["image"].startswith(f"images/{r['rose_subset']}/") for r in main_rows)


def test_readers_find_the_bridges_in_their_files(rose_split):
    everything = load_split(rose_split, "test", bridges=True)
    assert {r["task_template"] for r in everything} == set(MAIN_TEMPLATES) | set(BRIDGE_TEMPLATES)
    assert {r["task_template"] for r in load_split(rose_split, "test")} == set(MAIN_TEMPLATES)


def test_gold_answers_fill_table_rows_at_100(rose_split, tmp_path):
    predictions = tmp_path / "gold.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"item_id": r["item_id"], "raw_text": r["answer"], "model": "gold", "error": None})
            + "\n"
            for r in _rows(rose_split / "metadata_test.jsonl")
        ),
        encoding="utf-8",
    )
    out = tmp_path / "scored"
    assert main(
        ["score", "--data", str(rose_split), "--predictions", str(predictions), "--out", str(out)]
    ) in (0, None)
    table1 = (out / "table1_row.txt").read_text(encoding="utf-8")
    table2 = (out / "table2_row.txt").read_text(encoding="utf-8")
    assert table1 == "gold\n& " + " & ".join(["100.0"] * 13) + " \\\\\n"
    assert table2 == "gold\n& " + " & ".join(["100.0"] * 8) + " \\\\\n"
    summary = json.loads((out / "evaluation_summary.json").read_text(encoding="utf-8"))
    assert summary["coverage"]["complete_submission"] is True
    assert summary["paper_metrics"]["table2"]["Avg. PASS"] == 1.0
    for name in (
        "summary_by_subset.csv",
        "summary_by_template.csv",
        "coverage_by_subset_template.csv",
        "error_cases.jsonl",
        "per_item_eval.jsonl",
    ):
        assert (out / name).is_file(), name
    assert (out / "error_cases.jsonl").read_text() == ""


def test_family_subset_names():
    assert subset_name("glyph", {"script": "cjk"}, "rose") == "ROSE-ChineseGlyph"
    assert subset_name("glyph", {"script": "latin"}, "rose") == "rosetrain-glyph"
    assert subset_name("sprite_pair", {}, "rose") == "ROSE-PixelContent"
    assert subset_name("sprite_pair") == "rosetrain-sprite_pair"
    assert subset_name("attribute", {}, "rose") == "rosetrain-attribute"
    assert subset_name("nosuch", {}, "rose") == "rosetrain-nosuch"  # a name of no family: not an error here


def test_each_family_carries_its_rose_subset():
    """The family classes name the five subsets the official evaluator tables, one each;
    the curriculum maps a ROSE row's subset back through the same classes."""
    from rosetrain.curriculum.cells import family_of
    from rosetrain.generators.families import FAMILIES, family_class, rose_subsets
    from rosetrain.scoring.official import ROSE_SUBSETS as OFFICIAL

    assert set(rose_subsets().values()) == ROSE_SUBSETS == set(OFFICIAL)
    assert len(rose_subsets()) == len(ROSE_SUBSETS)
    assert all(family_class(name).name == name for name in FAMILIES)
    for family, subset in rose_subsets().items():
        assert family_of({"rose_subset": subset}) == family


def test_layout_is_checked(tmp_path, write_spec):
    spec = write_spec(tmp_path, "name: x\nlayout: nested\n")
    with pytest.raises(Exception, match="layout"):
        load_spec(spec, check_fonts=False)
    assert load_spec(ROOT / "generators" / "rose-protocol.yaml").layout == "rose"


def test_a_rerun_owns_its_bridge_files(rose_split):
    before = (rose_split / "metadata_test_global_click_bridge.jsonl").read_bytes()
    main(
        [
            "generate",
            "--spec",
            str(ROOT / "generators" / "rose-protocol.yaml"),
            "--out",
            str(rose_split),
            "--split",
            "test",
            "--scenes",
            "25",
            "--quiet",
        ]
    )
    assert (rose_split / "metadata_test_global_click_bridge.jsonl").read_bytes() == before


def test_a_bridge_file_of_another_split_is_one_line_naming_the_bridge_and_its_option(
    rose_split, tmp_path, capsys
):
    """Bridge rows that pair with main items of other scenes (another seed's file,
    the same item ids) are refused, naming the bridge file and --bridges."""
    import shutil

    other = tmp_path / "other"
    spec = ROOT / "generators" / "rose-protocol.yaml"
    command = ["generate", "--spec", str(spec), "--out", str(other), "--split", "test", "--scenes", "25"]
    assert main([*command, "--seed", "999", "--quiet"]) in (0, None)
    mixed = tmp_path / "mixed"
    shutil.copytree(rose_split, mixed, ignore=shutil.ignore_patterns("images"))
    bridge = "metadata_test_matched_local_count_bridge.jsonl"
    shutil.copy(other / bridge, mixed / bridge)
    rows = [r for path in sorted(mixed.glob("metadata_test*.jsonl")) for r in _rows(path)]
    predictions = tmp_path / "gold.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"item_id": r["item_id"], "raw_text": r["answer"], "error": None}) + "\n" for r in rows
        )
    )
    argv = ["score", "--data", str(mixed), "--predictions", str(predictions), "--out", str(tmp_path / "s")]
    assert main([*argv, "--bridges"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "T2B_COUNT_LOCAL_MATCHED items count another target number" in err
    assert (
        "metadata_<split>_matched_local_count_bridge.jsonl) is not this split's" in err and "--bridges" in err
    )
