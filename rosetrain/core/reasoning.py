"""A reasoning channel: a ``<think>...</think>`` block before the formal answer.

ROSE scores the answer alone, strictly: prose around it makes it invalid. Its
official runner reads an OpenAI-style ``message.content``, which a serving
engine with a reasoning parser (vLLM's, for Qwen3-style models) gives without
the thinking. rosetrain does the same for every runner: the text after the
last ``</think>`` is the answer that is scored, the block before it is kept
beside the prediction as ``reasoning`` (:func:`split_reasoning`).

Training can then teach a step the strict grammar has no room for
(:func:`reasoned_answer`, the recipe key ``data.reasoning``, one of
:data:`STYLES`): every exception cell of the grid, then those in the task's
region. The region test ("which of these cells lie in rows 2 to 3?") then
happens in text, over cell names the model has written, where the answer
alone asks for it inside one token's forward pass (docs/experiments.md,
round 8).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

OPEN, CLOSE = "<think>", "</think>"
NONE = "none"


def split_reasoning(text: Any) -> tuple[str | None, Any]:
    """``(reasoning, answer)`` of a response.

    - Not a string (None, a caller's object): no reasoning, the answer as it is.
    - No ``</think>``: no reasoning, the whole text is the answer.
    - Otherwise the answer is what follows the last ``</think>`` (stripped)
      and the reasoning what precedes it, without its ``<think>``.
    - An unclosed ``<think>`` (generation stopped while thinking) has
      reasoning and an empty answer, which scores as the official ``empty``.
    """
    if not isinstance(text, str):
        return None, text
    head, close, answer = text.rpartition(CLOSE)
    if close:
        return _without_open(head), answer.strip()
    opened = text.find(OPEN)
    if opened >= 0:
        return text[opened + len(OPEN) :].strip(), ""
    return None, text


def _without_open(head: str) -> str:
    opened = head.find(OPEN)
    return (head[opened + len(OPEN) :] if opened >= 0 else head).strip()


def rationale(style: str, row: Mapping[str, Any]) -> str:
    """The thinking of a release record or an HF row, in ``style`` (:data:`STYLES`)."""
    from rosetrain.core import protocol as P

    odd, inside = _cells(row["all_target_cells"] or ()), _cells(row["region_target_cells"] or ())
    if style == "odd":
        return f"odd: {odd}; region: {inside}"
    if style == "cells":
        return f"odd: {odd}; region: {_cells(_region_cells(row))}; inside: {inside}"
    if style == "cells-seen":
        if row["region_type"] == P.VISUAL_REGION:
            return f"region: {_cells(_region_cells(row))}; inside: {inside}"
        return rationale("cells", row)
    raise ValueError(unknown_style(style))


def unknown_style(style: str) -> str:
    return f"unknown reasoning style {style!r} (one of {', '.join(STYLES)})"


STYLES = {
    "odd": "every exception cell of the grid, then those the task is about "
    "(`odd: R1,C2 R3,C1; region: R3,C1`)",
    # Perception first: written after the region's cells, the odd list drifted
    # towards them (docs/experiments.md, round 8).
    "cells": "every exception cell, the task region's cells, then those in both "
    "(`odd: R1,C2 R3,C1; region: R3,C1 R3,C2 R3,C3; inside: R3,C1`): the region test "
    "becomes matching names in text",
    # The highlight darkens every cell outside it, and the exception cells of a
    # darkened grid are named far worse than a plain one's (docs/experiments.md,
    # rounds 14-15): a highlighted region's task asks only for the cells it shows.
    "cells-seen": "as `cells`, but a highlighted region's task names the highlight's cells, "
    "then the exception cells among them (`region: R1,C1 R1,C2; inside: R1,C2`): "
    "never the darkened cells outside it",
}


def _region_cells(row: Mapping[str, Any]) -> list[str]:
    from rosetrain.core import protocol as P
    from rosetrain.core.regions import cells_in_region

    if row["region_type"] == P.GLOBAL:
        return ["all"]
    params = row.get("region_params")
    if params is None:  # an HF row keeps them as JSON
        params = json.loads(row["region_params_json"])
    return [P.cell_str(c) for c in cells_in_region(row["region_type"], params, row["rows"], row["cols"])]


def _cells(cells: Iterable[str]) -> str:
    from rosetrain.core.protocol import parse_cell_str

    # reading order, as the answer lists them ("all" stands alone)
    ordered = sorted(cells, key=lambda c: (0, 0) if c == "all" else parse_cell_str(c))
    return " ".join(ordered) or NONE


def reasoned_answer(style: str, row: Mapping[str, Any]) -> str:
    """The SFT target with reasoning: ``<think>rationale</think>answer``."""
    return f"{OPEN}{rationale(style, row)}{CLOSE}{row['answer']}"
