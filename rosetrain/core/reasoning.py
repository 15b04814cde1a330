"""A reasoning channel: a ``<think>...</think>`` block before the formal answer.

ROSE scores the answer alone, strictly: prose around it makes it invalid. Its
official runner reads an OpenAI-style ``message.content``, which a serving
engine with a reasoning parser (vLLM's, for Qwen3-style models) gives without
the thinking. rosetrain does the same for every runner: the text after the
last ``</think>`` is the answer that is scored, the block before it is kept
beside the prediction as ``reasoning`` (:func:`split_reasoning`).

Training can then teach a step the strict grammar has no room for
(:func:`reasoned_answer`, the recipe key ``data.reasoning``): first every
exception cell of the grid, then those in the task's region. The region test
("which of these cells lie in rows 2 to 3?") becomes a comparison of cell
names in text, where the answer alone asks for it inside one token's
forward pass (docs/experiments.md, round 8).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

OPEN, CLOSE = "<think>", "</think>"
NONE = "none"


def split_reasoning(text: str | None) -> tuple[str | None, str | None]:
    """``(reasoning, answer)`` of a response.

    - No ``</think>``: no reasoning, the whole text is the answer.
    - Otherwise the answer is what follows the last ``</think>`` (stripped)
      and the reasoning what precedes it, without its ``<think>``.
    - An unclosed ``<think>`` (generation stopped while thinking) has
      reasoning and an empty answer, which scores as the official ``empty``.
    """
    if text is None:
        return None, None
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


def rationale(all_cells: Iterable[str], region_cells: Iterable[str]) -> str:
    """``odd: R1,C2 R3,C1; region: R3,C1``: every exception cell of the grid,
    then those the task is about (its region; for an exclusion, outside it)."""
    return f"odd: {_cells(all_cells)}; region: {_cells(region_cells)}"


def _cells(cells: Iterable[str]) -> str:
    from rosetrain.core.protocol import parse_cell_str

    ordered = sorted(cells, key=parse_cell_str)  # reading order, as the answer lists them
    return " ".join(ordered) or NONE


def reasoned_answer(row: Mapping[str, Any]) -> str:
    """The SFT target with reasoning: ``<think>rationale</think>answer``, from a
    release record or an HF row (both carry the gold cells and the answer)."""
    thought = rationale(row["all_target_cells"] or (), row["region_target_cells"] or ())
    return f"{OPEN}{thought}{CLOSE}{row['answer']}"
