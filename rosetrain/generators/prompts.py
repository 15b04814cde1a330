"""Task sentences. ``rose`` mode reproduces the release's wording (for
evaluation); ``varied`` draws from a pool of phrasings (for training) so a
model learns the task, not one sentence. Both end with the same answer
grammar, so gold answers never depend on the phrasing.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from rosetrain.core import protocol as P

ANSWER_HINT = {
    P.COUNT: "Answer only in the format: COUNT(n).",
    P.CLICK: "Answer only using CLICK(Rr,Cc); ...; DONE.",
    P.CLICK_COUNT: "Answer only using CLICK(Rr,Cc); ...; SUBMIT(n).",
}

ROSE_SENTENCES = {
    P.T1: "Count the number of cells that are different from the majority in the whole grid.",
    P.T1B: "Click all cells that are different from the majority in the whole grid.",
    P.T2: "Count the number of cells that are different from the majority {where}.",
    P.T2B: "Count the number of cells that are different from the majority {where}.",
    P.T3: "Click all cells that are different from the majority {where}.",
    P.T4: "Click all cells that are different from the majority inside the highlighted region.",
    P.T4C: "Count the number of cells that are different from the majority inside the highlighted region.",
    P.T5: "Click all cells that are different from the majority in the whole grid, except {where}, "
    "then submit the number of cells you clicked.",
    P.T5C: "Count the number of cells that are different from the majority in the whole grid, except {where}.",
}

# Varied phrasings. Each way of naming the exception cells comes in the forms
# the templates need, so every filled-in sentence is grammatical: {odd_cells}
# ("odd cells"), {odd_that} after "a cell that" ("differs from the majority") and
# {odd_those} after "cells that" ("differ from the majority"). {where} is the
# region phrase (natural_region_phrase); for CLICK_COUNT, the excluded cells.
VARIED_SENTENCES = {
    P.COUNT: [
        "How many cells {where} {odd_those}?",
        "Count the {odd_cells} {where}.",
        "Report the number of cells {where} that {odd_those}.",
        "Count the number of cells that are different from the majority {where}.",
    ],
    P.CLICK: [
        "Click every cell {where} that {odd_that}.",
        "Select all {odd_cells} {where}, then finish.",
        "Click all cells that are different from the majority {where}.",
        "Mark each cell {where} that {odd_that}; if there are none, just finish.",
    ],
    P.CLICK_COUNT: [
        "Click every cell that {odd_that}, except {where}, then submit how many you clicked.",
        "Ignoring {where}, click all {odd_cells} and submit how many you clicked.",
        "Click all cells that are different from the majority in the whole grid, except {where}, "
        "then submit the number of cells you clicked.",
    ],
}
# A count of every exception cell but the excluded ones (Excl-Cnt): COUNT's
# phrasings name a region the cells are in, these the cells left out.
VARIED_EXCLUSION_COUNT = [
    "Count the {odd_cells} in the whole grid, except {where}.",
    "Ignoring {where}, how many cells {odd_those}?",
    "Count the number of cells that are different from the majority in the whole grid, except {where}.",
]
# (the cells as a noun phrase, what one such cell does, what several do)
ODD_PHRASES = [
    ("cells that differ from the majority", "differs from the majority", "differ from the majority"),
    ("odd cells", "is an odd one out", "are odd ones out"),
    ("cells unlike the others", "is unlike the others", "are unlike the others"),
    ("cells that do not match the rest", "does not match the rest", "do not match the rest"),
    ("exceptions to the pattern", "breaks the pattern", "break the pattern"),
]
VARIED_GLOBAL = ["in the whole grid", "in the grid", "anywhere in the image", "across the entire grid"]
VARIED_VISUAL = ["inside the highlighted region", "within the marked rectangle", "inside the marked area"]


def region_phrase(region_type: str, params: Mapping) -> str:
    """The release's wording of a numeric region, e.g. ``in rows 2 to 3``."""
    if region_type == P.ROW_RANGE:
        r1, r2 = params["r1"], params["r2"]
        return f"in row {r1}" if r1 == r2 else f"in rows {r1} to {r2}"
    if region_type == P.COL_RANGE:
        c1, c2 = params["c1"], params["c2"]
        return f"in column {c1}" if c1 == c2 else f"in columns {c1} to {c2}"
    if region_type == P.RECTANGLE:
        return f"from row {params['r1']} column {params['c1']} to row {params['r2']} column {params['c2']}"
    raise ValueError(f"no text phrase for region type {region_type}")


def exclusion_phrase(params: Mapping) -> str:
    phrase = region_phrase(params["exclude_type"], params["exclude_params"])
    return "the cells " + phrase


def natural_region_phrase(region_type: str, params: Mapping) -> str:
    """A numeric region as a person would name it: one cell is "at row 3,
    column 13", a rectangle one row high is "in row 3, columns 2 to 9". The
    release's own wording (region_phrase) repeats both ends in every case."""
    if region_type != P.RECTANGLE:
        return region_phrase(region_type, params)
    rows = _span("row", params["r1"], params["r2"])
    cols = _span("column", params["c1"], params["c2"])
    if params["r1"] == params["r2"] and params["c1"] == params["c2"]:
        return f"at {rows}, {cols}"
    return f"in {rows}, {cols}"


def _span(unit: str, first: int, last: int) -> str:
    return f"{unit} {first}" if first == last else f"{unit}s {first} to {last}"


def natural_exclusion_phrase(params: Mapping) -> str:
    """The excluded cells: "the cell at row 3, column 13", "the cells in rows 2 to 4"."""
    kind, inner = params["exclude_type"], params["exclude_params"]
    one_cell = kind == P.RECTANGLE and inner["r1"] == inner["r2"] and inner["c1"] == inner["c2"]
    return ("the cell " if one_cell else "the cells ") + natural_region_phrase(kind, inner)


def varied_sentence(mode: str, where: str, rng: random.Random, exclusion: bool = False) -> str:
    """One of the mode's phrasings with one way of naming the exception cells.
    For CLICK_COUNT, and a COUNT with ``exclusion``, ``where`` is the excluded cells' phrase."""
    odd = rng.choice(ODD_PHRASES)
    sentences = VARIED_EXCLUSION_COUNT if exclusion and mode == P.COUNT else VARIED_SENTENCES[mode]
    return fill_varied(rng.choice(sentences), odd, where)


def fill_varied(template: str, odd: tuple[str, str, str], where: str) -> str:
    odd_cells, odd_that, odd_those = odd
    return template.format(where=where, odd_cells=odd_cells, odd_that=odd_that, odd_those=odd_those)


def task_sentence(template: str, region_type: str, params: Mapping, style: str, rng: random.Random) -> str:
    mode = P.TASK_MODE[template]
    if style == "rose":  # the release's sentences, byte for byte; draws nothing from rng
        sentence = ROSE_SENTENCES[template].format(where=rose_where(region_type, params))
    else:
        where = varied_where(region_type, params, rng)
        sentence = varied_sentence(mode, where, rng, exclusion=region_type == P.EXCLUSION)
    return f"{sentence} {ANSWER_HINT[mode]}"


def rose_where(region_type: str, params: Mapping) -> str:
    if region_type == P.GLOBAL:
        return "in the whole grid"
    if region_type == P.VISUAL_REGION:
        return "inside the highlighted region"
    if region_type == P.EXCLUSION:
        return exclusion_phrase(params)
    return region_phrase(region_type, params)


def varied_where(region_type: str, params: Mapping, rng: random.Random) -> str:
    if region_type == P.GLOBAL:
        return rng.choice(VARIED_GLOBAL)
    if region_type == P.VISUAL_REGION:
        return rng.choice(VARIED_VISUAL)
    if region_type == P.EXCLUSION:
        return natural_exclusion_phrase(params)
    return natural_region_phrase(region_type, params)
