"""rosetrain.core.registry: the one way names (families, runners, rewards, training
methods, config kinds) are registered, looked up and refused."""

from __future__ import annotations

import sys

import pytest

from rosetrain.core.errors import RosetrainError
from rosetrain.core.registry import Registry
from rosetrain.rewards import make_reward


def test_lookup_and_listing_keep_registration_order():
    reg = Registry("colour", {"red": 1, "green": 2}, argument="colour")
    reg.register("blue", 3)
    assert reg.names() == ("red", "green", "blue") == tuple(reg)
    assert reg.lookup("green") == 2 and reg["blue"] == 3 and "red" in reg and len(reg) == 3
    assert reg.check("red") == "red"


def test_an_unknown_name_names_the_kind_the_nearest_name_and_all_names():
    reg = Registry("colour", {"red": 1, "green": 2}, argument="colour")
    with pytest.raises(
        RosetrainError, match=r"^unknown colour 'gren'; did you mean 'green'\? \(known: red, green\)$"
    ) as err:
        reg.lookup("gren")
    assert err.value.argument == "colour"  # the command line adds the option that sets it
    with pytest.raises(RosetrainError, match=r"^unknown colour 'xyz' \(known: red, green\)$"):
        reg.check("xyz")
    with pytest.raises(KeyError):  # a Mapping still: [] is the plain lookup
        reg["xyz"]


def test_a_name_is_registered_once():
    reg = Registry("colour", {"red": 1})
    with pytest.raises(ValueError, match="colour 'red' is registered twice"):
        reg.register("red", 2)


def test_code_is_imported_on_first_load_only(tmp_path, monkeypatch):
    (tmp_path / "registry_probe_mod.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "registry_probe_mod", raising=False)
    reg = Registry("thing", {"thing": "registry_probe_mod:Thing", "module": "registry_probe_mod"})
    assert reg.names() == ("thing", "module") and reg.check("thing")
    assert "registry_probe_mod" not in sys.modules  # listing and checking import nothing
    loaded = reg.load("thing")
    assert loaded.__name__ == "Thing" and reg.load("thing") is loaded
    assert reg.load("module") is sys.modules["registry_probe_mod"]
    with pytest.raises(RosetrainError, match="unknown thing 'thin'; did you mean 'thing'"):
        reg.load("thin")


def test_the_registries_of_the_package_are_registries():
    from rosetrain.core.resources import KINDS
    from rosetrain.generators.families import FAMILIES
    from rosetrain.runners import RUNNERS
    from rosetrain.train.recipe import METHODS
    from rosetrain.train.rewards import REWARDS

    kinds = {reg.kind: reg.names() for reg in (KINDS, FAMILIES, RUNNERS, METHODS, REWARDS)}
    assert kinds == {
        "config kind": ("spec", "recipe", "accelerate", "suite"),
        "family": ("glyph", "emoji_content", "emoji_style", "sprite_edit", "sprite_pair", "attribute"),
        "runner": ("transformers", "vllm", "openai"),
        "method": ("sft", "grpo"),
        "reward": ("pass", "soft", "format", "thinking"),
    }
    with pytest.raises(RosetrainError, match="unknown reward 'pas'; did you mean 'pass'"):
        make_reward("pas")
