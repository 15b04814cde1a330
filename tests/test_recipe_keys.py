"""The recipe key list in recipes/README.md is written from the recipe classes'
field documentation, and is current."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rosetrain.train.recipe import NOT_KEYS, SECTIONS, Recipe, valid_keys
from rosetrain.train.recipe_keys import BEGIN, END, render, replace_block

README = Path(__file__).resolve().parent.parent / "recipes" / "README.md"


def test_every_recipe_key_is_documented_in_its_field():
    for cls in (Recipe, *SECTIONS.values()):
        for field in dataclasses.fields(cls):
            if field.name not in NOT_KEYS:
                assert field.metadata.get("help"), f"{cls.__name__}.{field.name} has no help"


def test_the_readme_lists_the_current_recipe_keys():
    text = README.read_text(encoding="utf-8")
    assert replace_block(text) == text, (
        "recipes/README.md's recipe keys are out of date: run "
        "`python -m rosetrain.train.recipe_keys recipes/README.md`"
    )
    listed = text.split(BEGIN, 1)[1].split(END, 1)[0]
    for cls in (Recipe, *SECTIONS.values()):
        for key in valid_keys(cls):
            assert f"`{key}" in listed, key
    assert render().count("\n- ") == len(valid_keys(Recipe)) - 1
