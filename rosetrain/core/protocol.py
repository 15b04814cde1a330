"""Facts of the ROSE v0.1 protocol: task templates, modes, the prompt prefix and
the answer grammar's formatting side. Parsing and scoring live in
``rosetrain.scoring``; everything that writes or reads a gold answer uses the
helpers here so both sides agree on one spelling.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

COUNT, CLICK, CLICK_COUNT = "COUNT", "CLICK", "CLICK_COUNT"
TASK_MODES = (COUNT, CLICK, CLICK_COUNT)

T1 = "T1_COUNT_GLOBAL"
T2 = "T2_COUNT_LOCAL_NUMERIC"
T3 = "T3_CLICK_LOCAL_NUMERIC"
T4 = "T4_CLICK_VISUAL_REGION"
T5 = "T5_CLICK_COUNT_EXCLUSION"
T1B = "T1B_CLICK_GLOBAL"
T2B = "T2B_COUNT_LOCAL_MATCHED"
# Training only, never a ROSE item: V-Clk's counting twin (count inside the
# highlighted region), as L-Cnt is L-Clk's. Counting data may show what action
# data must not (a held-out family), so it can teach reading the highlight there.
T4C = "T4C_COUNT_VISUAL_REGION"
# Excl-CS's counting twin (count every exception cell but the excluded ones), of
# the same region: with a reasoning style its thinking is Excl-CS's own, word
# for word, so counting data can teach that thinking where action data may not.
T5C = "T5C_COUNT_EXCLUSION"

MAIN_TEMPLATES = (T1, T2, T3, T4, T5)  # the five that make a model's Avg
BRIDGE_TEMPLATES = (T1B, T2B)  # controls, reported apart
TEMPLATES = MAIN_TEMPLATES + BRIDGE_TEMPLATES
TRAINING_TEMPLATES = (T4C, T5C)  # a spec with role train may weight them; no release holds them
SPEC_TEMPLATES = TEMPLATES + TRAINING_TEMPLATES  # every template a spec may weight, in order
COUNTING_TEMPLATES = (T1, T2)  # Counting Avg
ACTION_TEMPLATES = (T3, T4, T5)  # Action Avg

TASK_MODE = {
    T1: COUNT,
    T2: COUNT,
    T3: CLICK,
    T4: CLICK,
    T5: CLICK_COUNT,
    T1B: CLICK,
    T2B: COUNT,
    T4C: COUNT,
    T5C: COUNT,
}
SHORT_NAME = {
    T1: "G-Cnt",
    T2: "L-Cnt",
    T3: "L-Clk",
    T4: "V-Clk",
    T5: "Excl-CS",
    T1B: "G-Clk",
    T2B: "mL-Cnt",
    T4C: "V-Cnt",
    T5C: "Excl-Cnt",
}

ROW_RANGE, COL_RANGE, RECTANGLE = "ROW_RANGE", "COL_RANGE", "RECTANGLE"
VISUAL_REGION, EXCLUSION, GLOBAL = "VISUAL_REGION", "EXCLUSION", "GLOBAL"
# a record's cue_type: asked of the highlighted image, or of the plain one
CUE_HIGHLIGHT, NO_CUE = "VISUAL_HIGHLIGHT", "NONE"
NUMERIC_REGIONS = (ROW_RANGE, COL_RANGE, RECTANGLE)
REGION_CASES = ("zero", "partial", "all")

PROMPT_PREFIX = (
    "You are given a grid image. Rows are counted from top to bottom, and columns from left "
    "to right, both starting from 1. Output only the formal answer in the required format. "
    "Do not output any explanation.\n\n"
    "Allowed answer formats:\n"
    "1) COUNT(n)\n"
    "2) CLICK(Rr,Cc); CLICK(Rr,Cc); ...; DONE\n"
    "3) CLICK(Rr,Cc); CLICK(Rr,Cc); ...; SUBMIT(n)\n\n"
    "Examples:\n"
    "COUNT(3)\n"
    "CLICK(R2,C5); CLICK(R4,C7); DONE\n"
    "CLICK(R2,C5); CLICK(R4,C7); SUBMIT(2)\n"
)

EXPECTED_FORMAT = {
    COUNT: "COUNT(n)",
    CLICK: "CLICK(Rr,Cc); ...; DONE",
    CLICK_COUNT: "CLICK(Rr,Cc); ...; SUBMIT(n)",
}

Cell = tuple[int, int]  # (row, col), 1-based


def cell_str(cell: Cell) -> str:
    """``(4, 11)`` -> ``"R4,C11"``, the release's spelling of a cell."""
    return f"R{cell[0]},C{cell[1]}"


@functools.lru_cache(maxsize=65536)  # a split spells the same few hundred cells again and again
def parse_cell_str(text: str) -> Cell:
    """``"R4,C11"`` -> ``(4, 11)``; the inverse of :func:`cell_str`."""
    row, col = text.strip().upper().split(",")
    if not (row.startswith("R") and col.strip().startswith("C")):
        raise ValueError(f"not a cell: {text!r}")
    return int(row[1:]), int(col.strip()[1:])


def sorted_cells(cells: Iterable[Cell]) -> list[Cell]:
    """Row-major order: the order gold click lists are written in."""
    return sorted(set(cells))


def format_answer(mode: str, clicks: Iterable[Cell] = (), count: int | None = None) -> str:
    """The canonical gold answer string for a task mode."""
    clicks = sorted_cells(clicks)
    if mode == COUNT:
        return f"COUNT({len(clicks) if count is None else count})"
    tokens = [f"CLICK({cell_str(c)})" for c in clicks]
    tokens.append("DONE" if mode == CLICK else f"SUBMIT({len(clicks)})")
    return "; ".join(tokens)
