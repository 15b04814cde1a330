"""Task sentences. ``rose`` mode reproduces the release's wording (for
evaluation); ``varied`` draws from a pool of phrasings (for training) so a
model learns the task, not one sentence. Both end with the same answer
grammar, so gold answers never depend on the phrasing.
"""
from __future__ import annotations

import random
from typing import Mapping

from rosetrain import protocol as P

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
    P.T5: "Click all cells that are different from the majority in the whole grid, except {where}, "
          "then submit the number of cells you clicked.",
}

# {odd} is a way to name the exception cells, {where} the region phrase.
VARIED_SENTENCES = {
    P.COUNT: ["How many cells are {odd} {where}?", "Count the {odd} cells {where}.",
              "Report the number of cells {where} that are {odd}.",
              "Count the number of cells that are different from the majority {where}."],
    P.CLICK: ["Click every cell {where} that is {odd}.", "Select all {odd} cells {where}, then finish.",
              "Click all cells that are different from the majority {where}.",
              "Mark each cell {where} that is {odd}; if there is none, just finish."],
    P.CLICK_COUNT: ["Click every cell that is {odd}, except {where}, then submit how many you clicked.",
                    "Ignoring {where}, click all {odd} cells and submit their number.",
                    "Click all cells that are different from the majority in the whole grid, except {where}, "
                    "then submit the number of cells you clicked."],
}
ODD_PHRASES = ["different from the majority", "odd ones out", "unlike the others",
               "not the majority item", "exceptions to the pattern"]
VARIED_GLOBAL = ["in the whole grid", "in the grid", "anywhere in the image", "across the entire grid"]
VARIED_VISUAL = ["inside the highlighted region", "within the marked rectangle", "inside the outlined area"]


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


def task_sentence(template: str, region_type: str, params: Mapping, style: str,
                  rng: random.Random) -> str:
    mode = P.TASK_MODE[template]
    if region_type == P.GLOBAL:
        where = "in the whole grid" if style == "rose" else rng.choice(VARIED_GLOBAL)
    elif region_type == P.VISUAL_REGION:
        where = "inside the highlighted region" if style == "rose" else rng.choice(VARIED_VISUAL)
    elif region_type == P.EXCLUSION:
        where = exclusion_phrase(params)
    else:
        where = region_phrase(region_type, params)
    if style == "rose":
        sentence = ROSE_SENTENCES[template].format(where=where)
    else:
        sentence = rng.choice(VARIED_SENTENCES[mode]).format(where=where, odd=rng.choice(ODD_PHRASES))
    return f"{sentence} {ANSWER_HINT[mode]}"
