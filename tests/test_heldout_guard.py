"""The held-out guard holds however the training data arrives: a spec that names
no held-out spec, a folder whatever made it, with the band taken from
``eval.folder``'s manifest (or its spec, for a split made before manifests
recorded it). A property test draws random bands and specs: no action row of a
guarded spec ever shows the band."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from rosetrain.cli import main as cli_main
from rosetrain.data.manifest import manifest_path

HELDOUT = """
name: h
role: heldout
namespace: heldout
heldout_hue_band: [50, 150]
rows: 3
cols: 3
cell_size: 32
exceptions: [1, 2]
families: {attribute: {subtlety: 0.0, attributes: [hue], hue_range: [60, 140]}}
"""

# click tasks on every hue, and no heldout_spec: nothing in the spec itself guards it
UNGUARDED = """
name: u
role: train
namespace: u
rows: 3
cols: 3
cell_size: 32
exceptions: [1, 2]
tasks: {T1B_CLICK_GLOBAL: 1, T1_COUNT_GLOBAL: 1}
tasks_per_scene: 2
families: {attribute: {subtlety: 0.0, attributes: [hue], hue_range: [0, 360], swap_roles: true}}
"""
GUARDED = UNGUARDED.replace("swap_roles: true}", "swap_roles: true, hue_exclude: [[50, 150]]}")


def _generate(tmp_path: Path, text: str, name: str, split: str, formats: str, scenes: int) -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(text)
    out = tmp_path / name
    command = ["generate", "--spec", str(spec), "--out", str(out), "--split", split, "--scenes", str(scenes)]
    assert cli_main([*command, "--formats", formats, "--num-proc", "1", "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def heldout_folder(tmp_path_factory) -> Path:
    return _generate(tmp_path_factory.mktemp("guard"), HELDOUT, "heldout", "test", "release", 6)


def _recipe(tmp_path: Path, model: Path, data: dict, heldout: Path) -> Path:
    path = tmp_path / "r.yaml"
    recipe = {
        "method": "sft",
        "model": str(model),
        "output_dir": str(tmp_path / "run"),
        "data": data,
        "eval": {"folder": str(heldout), "split": "test", "items": 5},
        "max_steps": 2,
        "per_device_train_batch_size": 2,
        "lora": None,
        "cpu_threads": 1,
    }
    path.write_text(yaml.safe_dump(recipe))
    return path


def _check(recipe: Path, capsys) -> tuple[int, str]:
    code = cli_main(["train", "sft", "--recipe", str(recipe), "--check"])
    return code, capsys.readouterr().err


def test_the_manifest_of_a_heldout_split_records_its_band(heldout_folder):
    manifest = json.loads(manifest_path(heldout_folder, "test").read_text())
    assert manifest["role"] == "heldout" and manifest["heldout_hue_band"] == [50.0, 150.0]


def test_a_folder_whose_action_rows_show_the_band_is_refused(
    tmp_path, heldout_folder, tiny_model_dir, capsys
):
    folder = _generate(tmp_path, UNGUARDED, "train", "train", "release,hf", 12)
    code, err = _check(_recipe(tmp_path, tiny_model_dir, {"folder": str(folder)}, heldout_folder), capsys)
    assert code == 2 and err.count("\n") == 1
    assert "an action row shows hue" in err and "inside the band [50.0, 150.0]" in err
    assert f"held out of the action data by eval.folder {heldout_folder}" in err


def test_a_folder_whose_action_rows_keep_out_of_the_band_passes(
    tmp_path, heldout_folder, tiny_model_dir, capsys
):
    folder = _generate(tmp_path, GUARDED, "train", "train", "release,hf", 12)
    code, err = _check(_recipe(tmp_path, tiny_model_dir, {"folder": str(folder)}, heldout_folder), capsys)
    assert code == 0, err


def test_a_folder_made_before_the_hues_column_is_refused_not_passed(
    tmp_path, heldout_folder, tiny_model_dir, capsys
):
    import pyarrow.parquet as pq

    folder = _generate(tmp_path, GUARDED, "train", "train", "release,hf", 4)
    for shard in (folder / "hf" / "train").glob("*.parquet"):
        table = pq.read_table(shard)
        pq.write_table(table.drop(["hues"]), shard)
    code, err = _check(_recipe(tmp_path, tiny_model_dir, {"folder": str(folder)}, heldout_folder), capsys)
    assert code == 2 and "has no hues column" in err and "generate the folder again" in err


def test_a_stream_of_a_spec_naming_no_heldout_spec_is_checked_against_eval_folder(
    tmp_path, heldout_folder, tiny_model_dir, capsys
):
    spec = tmp_path / "u.yaml"
    spec.write_text(UNGUARDED)
    recipe = _recipe(tmp_path, tiny_model_dir, {"spec": str(spec)}, heldout_folder)
    code, err = _check(recipe, capsys)
    assert code == 2 and "hue band [50, 150] is held out of the action data by eval.folder" in err
    spec.write_text(GUARDED)
    assert _check(recipe, capsys)[0] == 0


def test_an_older_heldout_manifest_gives_its_band_through_its_unchanged_spec(
    tmp_path, tiny_model_dir, capsys
):
    heldout = _generate(tmp_path, HELDOUT, "heldout", "test", "release", 4)
    path = manifest_path(heldout, "test")
    manifest = json.loads(path.read_text())
    del manifest["heldout_hue_band"]
    path.write_text(json.dumps(manifest))
    spec = tmp_path / "u.yaml"
    spec.write_text(UNGUARDED)
    code, err = _check(_recipe(tmp_path, tiny_model_dir, {"spec": str(spec)}, heldout), capsys)
    assert code == 2 and "hue band [50, 150]" in err


@pytest.mark.parametrize("seed", range(9))
def test_property_no_action_row_of_a_guarded_spec_shows_the_band(tmp_path, seed):
    """Random bands (on the circle, 0 and 360 included) and random specs: every
    spec the guard accepts draws no action row with a hue in the band."""
    from rosetrain.generators.families.attribute import in_hue_band
    from rosetrain.generators.heldout import check_action_levels
    from rosetrain.generators.records import build_records
    from rosetrain.generators.spec import SpecError, load_spec

    rng = random.Random(seed)
    low = rng.choice([0.0, rng.uniform(0, 300)])
    high = min(360.0, low + rng.uniform(5, 120)) if low < 240 or rng.random() < 0.5 else 360.0
    band = (round(low, 2), round(high, 2))
    exclude = [[max(0.0, band[0] - rng.uniform(0, 10)), min(360.0, band[1] + rng.uniform(0, 10))]]
    if seed % 3 == 2:  # a band the exclusion only partly covers: the guard must refuse it
        exclude = [[exclude[0][0], (band[0] + band[1]) / 2]]
    text = UNGUARDED.replace(
        "swap_roles: true}", f"swap_roles: {rng.choice(['true', 'false'])}, hue_exclude: {exclude}}}"
    )
    text = text.replace("subtlety: 0.0", f"subtlety: {rng.choice([0.0, 0.5, 1.0])}")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    try:
        spec = load_spec(path, check_fonts=False)
        check_action_levels(spec, band, None, "the test")
    except (SpecError, ValueError):
        assert seed % 3 == 2, "a covering exclusion was refused"
        return  # refused: nothing is generated
    assert seed % 3 != 2, "a band only partly excluded was accepted"
    acted = 0
    for index in range(40):
        for record in build_records(spec, spec.seed, index, "train", render=False).records:
            if record["task_mode"] != "COUNT":
                acted += 1
                for look in ("background_spec", "target_spec"):
                    assert not in_hue_band(record[look]["hue"], band), (band, record[look])
    assert acted >= 40


def test_a_mixture_level_or_a_set_override_is_checked_too(tmp_path, heldout_folder, tiny_model_dir, capsys):
    """A spec whose one action level shows the band (the others keep out of it), and
    a recipe whose data is switched by --set: the same guard, naming the level."""
    mixture = GUARDED + (
        "curriculum: mixture\nlevels:\n  - name: kept\n    weight: 1\n  - name: open\n    weight: 1\n"
        "    families: {attribute: {subtlety: 0.0, attributes: [hue], swap_roles: true}}\n"
    )
    spec = tmp_path / "m.yaml"
    spec.write_text(mixture)
    guarded = tmp_path / "g.yaml"
    guarded.write_text(GUARDED)
    recipe = _recipe(tmp_path, tiny_model_dir, {"spec": str(guarded)}, heldout_folder)
    assert _check(recipe, capsys)[0] == 0
    code = cli_main(["train", "sft", "--recipe", str(recipe), "--check", "--set", f"data.spec={spec}"])
    err = capsys.readouterr().err
    assert code == 2 and "levels (open): families.attribute: the hue band [50, 150] is held out" in err
