"""The one config mechanism (rosetrain.core.config): unknown keys, types, ranges,
NaN/inf, overrides and the key tables, for specs, recipes and suites alike."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from rosetrain.core import config
from rosetrain.core.config import ConfigError, setting
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import load_yaml, read_yaml_mapping


@dataclasses.dataclass
class Inner:
    size: int = setting(4, "a size", low=1, high=8)


@dataclasses.dataclass
class Outer:
    rate: float = setting(0.5, "a rate", low=0, high=1, high_open=True)
    count: int = setting(1, "a count", low=0)
    mode: str = setting("a", "a mode", choices=("a", "b"))
    flag: bool = setting(False, "a flag")
    names: list[str] = setting(help="names", factory=list)
    inner: Inner = setting(help="a section", factory=Inner)
    maybe: Inner | None = setting(None, "an optional section")


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"rat": 0.1}, "unknown key 'rat' at the top level (did you mean 'rate'?); valid keys: rate, count"),
        ({"inner": {"sise": 2}}, "unknown key 'sise' at inner (did you mean 'size'?)"),
        ({"rate": "0.5"}, "rate: expected a number, got '0.5'"),  # a string is never a number
        ({"count": True}, "count: expected an integer, got True"),  # nor is a boolean
        ({"count": 1.5}, "count: expected an integer, got 1.5"),
        ({"flag": 1}, "flag: expected true or false, got 1"),
        ({"rate": math.nan}, "rate: must be a finite number, got nan"),
        ({"rate": math.inf}, "rate: must be a finite number, got inf"),
        ({"count": math.inf}, "count: must be a finite number, got inf"),
        ({"rate": 1.0}, "rate: must be in [0, 1), got 1.0"),
        ({"count": -1}, "count: must be >= 0, got -1"),
        ({"mode": "c"}, "mode: 'c' is not one of a, b"),
        ({"names": [1]}, "names: expected a list of strings, got [1]"),
        ({"inner": {"size": 9}}, "inner.size: must be in [1, 8], got 9"),
        ({"inner": 3}, "inner: expected a mapping of size, got 3"),
        ({"count": None}, "count: must not be null"),
    ],
)
def test_a_bad_key_or_value_names_the_key_and_what_is_allowed(raw, message):
    with pytest.raises(ConfigError) as err:
        config.from_mapping(Outer, raw)
    assert str(err.value) == message or str(err.value).startswith(message)


def test_good_values_come_back_checked_and_sections_built():
    values = config.from_mapping(Outer, {"count": 3.0, "names": "x", "inner": None, "maybe": {"size": 2}})
    assert values == {"count": 3, "names": ["x"], "inner": Inner(), "maybe": Inner(2)}
    assert isinstance(values["count"], int)  # YAML's 3.0 or 1e3 for a count is a whole number


def test_overrides_set_nested_keys_and_refuse_unknown_ones():
    raw: dict = {}
    config.apply_override(raw, "inner.size=5e0", Outer)
    config.apply_override(raw, "rate=.5", Outer)
    assert raw == {"inner": {"size": 5.0}, "rate": 0.5}
    with pytest.raises(ConfigError, match=r"unknown key 'sise' at inner \(did you mean 'size'\?\)"):
        config.apply_override(raw, "inner.sise=1", Outer)
    with pytest.raises(ConfigError, match="expected key=value"):
        config.apply_override(raw, "rate", Outer)


def test_an_override_of_a_string_key_takes_the_text_as_written():
    raw: dict = {}
    config.apply_override(raw, "mode=b:", Outer)  # YAML would read a mapping {b: null}
    config.apply_override(raw, "names=[x, y]", Outer)  # a list of strings is not a string: YAML
    assert raw == {"mode": "b:", "names": ["x", "y"]}
    config.apply_override(raw, "mode= 12 ", Outer)
    assert raw["mode"] == "12"
    config.apply_override(raw, "mode='quoted:'", Outer)  # quoting still works
    assert raw["mode"] == "quoted:"
    config.apply_override(raw, "mode=null", Outer)
    assert raw["mode"] is None  # and null is still null: the check then says it must not be
    config.apply_override(raw, "count=12", Outer)
    assert raw["count"] == 12


def test_a_recipe_string_key_set_on_the_command_line_keeps_its_colon(tmp_path):
    from rosetrain.train.recipe import load_recipe

    path = recipe_file(tmp_path)
    sets = ["method=grpo", "grpo.frontier=true", "grpo.frontier_reuse=true", "grpo.loss_from=inside:"]
    assert load_recipe(path, sets).grpo.loss_from == "inside:"
    assert load_recipe(path, ["output_dir=123"]).output_dir == "123"


def test_the_key_table_shows_defaults_ranges_and_choices():
    lines = config.render_keys(Outer)
    assert "- `rate` (default `0.5`; in [0, 1)): a rate" in lines
    assert '- `mode` (default `"a"`; one of `a`, `b`): a mode' in lines
    assert "  - `size` (default `4`; in [1, 8]): a size" in lines


# ----------------------------------------------------------------- YAML


def test_yaml_reads_exponent_floats_as_numbers_and_quoted_ones_as_strings():
    assert load_yaml("a: 5e-7\nb: 1e9\nc: '0.5'\nd: .nan\ne: 3") == {
        "a": 5e-7,
        "b": 1e9,
        "c": "0.5",
        "d": pytest.approx(math.nan, nan_ok=True),
        "e": 3,
    }


@pytest.mark.parametrize(
    "deep", ["[" * 5000 + "]" * 5000, "a:\n" + "".join("  " * i + "- \n" for i in range(5000))]
)
def test_a_yaml_file_nested_5000_deep_is_a_one_line_error(tmp_path, deep):
    path = tmp_path / "deep.yaml"
    path.write_text(deep)
    with pytest.raises(RosetrainError) as err:
        read_yaml_mapping(path, "spec")
    assert str(err.value) == f"{path}: not valid YAML: nested too deep to read"


# ----------------------------------------------------------------- recipes


def recipe_file(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        f"method: sft\nmodel: m\noutput_dir: {tmp_path / 'run'}\ndata: {{folder: {tmp_path}}}\nmax_steps: 2\n"
    )
    return path


@pytest.mark.parametrize(
    "override, message",
    [
        ("learning_rate=.nan", "learning_rate: must be a finite number, got nan"),
        ("learning_rate=.inf", "learning_rate: must be a finite number, got inf"),
        ("learning_rate=1e999", "learning_rate: must be a finite number, got inf"),
        ("learning_rate='5e-7'", "learning_rate: expected a number, got '5e-7'"),
        ("weight_decay=.inf", "weight_decay: must be a finite number, got inf"),
        ("grpo.beta=.nan", "grpo.beta: must be a finite number, got nan"),
        ("grpo.temperature=.inf", "grpo.temperature: must be a finite number, got inf"),
        ("grpo.temperature=0", "grpo.temperature: must be in (0, 100], got 0"),
        ("grpo.loss_type=nope", "grpo.loss_type: 'nope' is not one of grpo, dr_grpo, dapo"),
        ("grpo.scale_rewards=nope", "grpo.scale_rewards: 'nope' is not one of group, batch, none"),
        ("grpo.num_iterations=0", "grpo.num_iterations: must be in [1, 1000], got 0"),
        ("grpo.num_generations=1", "grpo.num_generations: must be in [2, 65536], got 1"),
        (
            "gradient_accumulation_steps=1e9",
            "gradient_accumulation_steps: must be in [1, 65536], got 1000000000",
        ),
        ("cpu_threads=1e5", "cpu_threads: must be in [1, 1024], got 100000"),
        ("data.shuffle_buffer=1e12", "data.shuffle_buffer: must be in [0, 1000000], got 1000000000000"),
        (
            "per_device_train_batch_size=1e6",
            "per_device_train_batch_size: must be in [1, 65536], got 1000000",
        ),
        ("seed=-1", "seed: must be in [0, 2**32-1], got -1"),
        ("seed=1e20", "seed: must be in [0, 2**32-1], got 100000000000000000000"),
        ("eval.max_new_tokens=true", "eval.max_new_tokens: expected an integer, got True"),
        ("rewards.pass=.nan", "rewards.pass: must be a finite number, got nan"),
        ("trl.adam_beta1=.nan", "trl.adam_beta1: must be a finite number, got nan"),
        ("lerning_rate=1", "unknown key 'lerning_rate' at the top level (did you mean 'learning_rate'?)"),
    ],
)
def test_a_recipe_value_that_cannot_run_is_refused_naming_the_key_and_range(tmp_path, override, message):
    from rosetrain.train.recipe import RecipeError, load_recipe

    path = recipe_file(tmp_path)
    load_recipe(path)  # the recipe itself is fine
    with pytest.raises(RecipeError) as err:
        load_recipe(path, [override])
    assert message in str(err.value) and str(path) in str(err.value)
    assert f"(override {override})" in str(err.value)  # the file itself is fine: say what was not
    assert "\n" not in str(err.value)


def test_a_bad_value_in_the_recipe_file_is_not_blamed_on_an_override(tmp_path):
    from rosetrain.train.recipe import RecipeError, load_recipe

    path = recipe_file(tmp_path)
    path.write_text(path.read_text().replace("max_steps: 2", "max_steps: many"))
    with pytest.raises(RecipeError) as err:
        load_recipe(path, ["learning_rate=1e-4", "grpo.beta=0.1"])
    assert str(err.value) == f"{path}: max_steps: expected an integer, got 'many'"


def test_a_recipe_built_in_python_is_held_to_the_same_ranges():
    from rosetrain.train.recipe import DataConfig, GrpoConfig

    with pytest.raises(ValueError, match=r"grpo.temperature: must be a finite number, got nan"):
        GrpoConfig(temperature=math.nan)
    with pytest.raises(ValueError, match=r"data.seed: must be in \[0, 2\*\*32-1\], got -1"):
        DataConfig(folder="x", seed=-1)


def test_the_loss_types_and_reward_scalings_are_trls():
    trl = pytest.importorskip("trl")
    from rosetrain.train.recipe import LOSS_TYPES, SCALE_REWARDS

    fields = {f.name: f for f in dataclasses.fields(trl.GRPOConfig)}
    for name, choices in (("loss_type", LOSS_TYPES), ("scale_rewards", SCALE_REWARDS)):
        help_text = fields[name].metadata["help"]
        for choice in choices:
            assert re.search(rf"[`']{choice}[`']", help_text), (name, choice)


# ----------------------------------------------------------------- specs

SPEC = """
name: t
role: train
namespace: t
seed: 3
rows: [3, 4]
cols: [3, 4]
cell_size: [28, 28]
exceptions: [1, 3]
families: {attribute: {subtlety: 0.5}}
"""


@pytest.mark.parametrize(
    "change, message",
    [
        (("subtlety: 0.5", "subtlety: '0.5'"), "families.attribute.subtlety: expected a number, got '0.5'"),
        (
            ("subtlety: 0.5", "subtlty: 0.5"),
            "unknown key 'subtlty' at families.attribute (did you mean 'subtlety'?)",
        ),
        (("seed: 3", "seed: -1"), "seed: must be in [0, 2**63-1], got -1"),
        (("seed: 3", "seed: 1e20"), "seed: must be in [0, 2**63-1], got 100000000000000000000"),
        (("seed: 3", "seed: .nan"), "seed: must be a finite number, got nan"),
        (("seed: 3", "seed: 3\nnoise: .inf"), "noise: must be a finite number, got inf"),
        (("seed: 3", "seed: 3\nnegative_rate: '0.1'"), "negative_rate: expected a number, got '0.1'"),
        (("seed: 3", "seed: 3\nlayout: nope"), "layout: 'nope' is not one of rosetrain, rose"),
        (
            ("seed: 3", "seed: 3\nheldout_scenes: 1e9"),
            "heldout_scenes: must be in [0, 1000000], got 1000000000",
        ),
        (
            ("seed: 3", "seed: 3\nnegativ_rate: 0.1"),
            "unknown key 'negativ_rate' at the top level (did you mean 'negative_rate'?)",
        ),
        (("seed: 3", "seed: 3\ncue: {width: 40}"), "cue.width: must be in [1, 32], got 40"),
    ],
)
def test_a_spec_value_that_cannot_run_is_refused_naming_the_key(tmp_path, change, message):
    from rosetrain.generators.spec import SpecError, load_spec

    path = tmp_path / "s.yaml"
    path.write_text(SPEC)
    load_spec(path)
    path.write_text(SPEC.replace(*change))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_heldout_check_bigger_than_memory_is_refused_with_the_estimate(tmp_path, monkeypatch):
    from rosetrain.core import memory
    from rosetrain.generators.spec import SpecError, load_spec

    monkeypatch.setattr(memory, "available_memory", lambda: 100 * 2**20)  # 100 MiB free
    path = tmp_path / "h.yaml"
    path.write_text(
        SPEC.replace("role: train\nnamespace: t", "role: heldout\nnamespace: heldout")
        + "heldout_scenes: 1000000\n"
    )
    with pytest.raises(
        SpecError,
        match=r"heldout_scenes \(1000000 scenes\): needs about 190.7 MiB of memory, more than the 100.0 MiB free",
    ):
        load_spec(path)


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "data.shuffle_buffer=1e6",
            "data.shuffle_buffer 1000000 (1000008 rows held at once, about 1024 KiB each)",
        ),
        ("per_device_train_batch_size=65536", "per_device_train_batch_size 65536 (65792 rows held at once"),
    ],
)
def test_rows_held_at_once_beyond_free_memory_are_refused_with_the_estimate(
    tmp_path, monkeypatch, override, expected
):
    from rosetrain.core import memory
    from rosetrain.train.preflight import check_memory
    from rosetrain.train.recipe import RecipeError, load_recipe

    monkeypatch.setattr(memory, "available_memory", lambda: 2**30)  # 1 GiB free
    path = recipe_file(tmp_path)
    check_memory(load_recipe(path))  # 256 rows of about 1 MiB fit
    with pytest.raises(RecipeError) as err:
        check_memory(load_recipe(path, [override]))
    assert expected in str(err.value) and "of memory, more than the 1.0 GiB free" in str(err.value)


# ----------------------------------------------------------------- eval suites


@pytest.mark.parametrize(
    "line, message",
    [
        ("limit: 0", "limit: must be in [1, 1000000000000], got 0"),
        ("max_new_tokens: -5", "max_new_tokens: must be in [1, 1000000], got -5"),
        ("max_new_tokens: '64'", "max_new_tokens: expected an integer, got '64'"),
        ("max_new_tokens: true", "max_new_tokens: expected an integer, got True"),
        ("limit: .nan", "limit: must be a finite number, got nan"),
        ("description: [a]", "description: expected a string, got ['a']"),
        ("splt: test", "unknown key 'splt' at the top level (did you mean 'split'?)"),
    ],
)
def test_a_suite_value_that_cannot_run_is_refused_naming_the_key(tmp_path, line, message):
    from rosetrain.evaluation.evaluate import load_suite

    path = tmp_path / "suite.yaml"
    path.write_text(f"name: s\ndata: {tmp_path}\n")
    assert load_suite(path).limit is None
    path.write_text(f"name: s\ndata: {tmp_path}\n{line}\n")
    with pytest.raises(RosetrainError) as err:
        load_suite(path)
    assert str(err.value) == f"{path}: {message}" or str(err.value).startswith(f"{path}: {message}")


def test_the_docs_list_the_current_spec_keys():
    from pathlib import Path

    from rosetrain.generators.spec_keys import replace_block

    doc = Path(__file__).resolve().parent.parent / "docs" / "generating.md"
    text = doc.read_text(encoding="utf-8")
    assert replace_block(text) == text, (
        "docs/generating.md's spec keys are out of date: run "
        "`python -m rosetrain.generators.spec_keys docs/generating.md`"
    )
    assert "- `heldout_scenes` (default `2000`; in [0, 1000000])" in text
