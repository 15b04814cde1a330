"""The spec key list of ``docs/generating.md``, written from the spec dataclasses'
own field documentation (``setting(..., help=..., low=...)`` in ``spec.py``), as
the recipe key list is from the recipe's: it cannot drift from the code.
``tests/test_config.py`` checks the document holds the current list.

    python -m rosetrain.generators.spec_keys docs/generating.md   # rewrite the list in place
"""

from __future__ import annotations

import sys
from pathlib import Path

from rosetrain.core.config import render_keys, replace_between
from rosetrain.core.io import atomic_write
from rosetrain.generators.spec import LevelSpec, Spec

BEGIN = "<!-- spec keys: begin (python -m rosetrain.generators.spec_keys docs/generating.md) -->"
END = "<!-- spec keys: end -->"


def render() -> str:
    """Markdown: the spec's own keys, then the keys of a level (at the top level,
    or in each of ``levels``)."""
    lines = render_keys(Spec, {"path"})
    lines += ["", "Level keys (at the top level, or in each of `levels`):", ""]
    lines += render_keys(LevelSpec)
    return "\n".join(lines)


def replace_block(text: str) -> str:
    """``text`` with the list between the markers rewritten."""
    return replace_between(text, BEGIN, END, render())


if __name__ == "__main__":
    doc = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/generating.md")
    atomic_write(doc, replace_block(doc.read_text(encoding="utf-8")))
    print(f"wrote the spec keys of {doc}")
