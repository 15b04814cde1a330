"""The recipe key list of ``recipes/README.md``, written from the recipe
dataclasses' own field documentation (``key(..., help=..., low=...)`` in ``recipe.py``),
as TRL's ``--help`` comes from its config fields: the list cannot drift from the
code. ``tests/test_recipe_keys.py`` checks the README holds the current list.

    python -m rosetrain.train.recipe_keys recipes/README.md   # rewrite the list in place
"""

from __future__ import annotations

import sys
from pathlib import Path

from rosetrain.core.config import render_keys, replace_between
from rosetrain.core.io import atomic_write
from rosetrain.train.recipe import NOT_KEYS, Recipe

BEGIN = "<!-- recipe keys: begin (python -m rosetrain.train.recipe_keys recipes/README.md) -->"
END = "<!-- recipe keys: end -->"


def render() -> str:
    """Markdown: every top-level key with its default, allowed values and help,
    each section's keys nested under it (:func:`rosetrain.core.config.render_keys`)."""
    return "\n".join(render_keys(Recipe, NOT_KEYS))


def replace_block(text: str) -> str:
    """``text`` with the list between the markers rewritten."""
    return replace_between(text, BEGIN, END, render())


if __name__ == "__main__":
    readme = Path(sys.argv[1] if len(sys.argv) > 1 else "recipes/README.md")
    atomic_write(readme, replace_block(readme.read_text(encoding="utf-8")))
    print(f"wrote the recipe keys of {readme}")
