"""Task sentences read as English a person would write.

``varied`` (training) phrasings: every template filled with every way of naming
the exception cells is one of the reviewed forms below, and every form filled
with every kind of region obeys the rules (number agreement, no predicate used
as an adjective, one-cell and one-row ranges named naturally). ``rose``
(evaluation) sentences stay the release's, byte for byte.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from rosetrain.core import protocol as P
from rosetrain.generators import prompts as Q

# Read and approved by a person: every distinct varied sentence, {where} left open.
REVIEWED_FORMS = """
How many cells {where} differ from the majority?
How many cells {where} are odd ones out?
How many cells {where} are unlike the others?
How many cells {where} do not match the rest?
How many cells {where} break the pattern?
Count the cells that differ from the majority {where}.
Count the odd cells {where}.
Count the cells unlike the others {where}.
Count the cells that do not match the rest {where}.
Count the exceptions to the pattern {where}.
Report the number of cells {where} that differ from the majority.
Report the number of cells {where} that are odd ones out.
Report the number of cells {where} that are unlike the others.
Report the number of cells {where} that do not match the rest.
Report the number of cells {where} that break the pattern.
Count the number of cells that are different from the majority {where}.
Click every cell {where} that differs from the majority.
Click every cell {where} that is an odd one out.
Click every cell {where} that is unlike the others.
Click every cell {where} that does not match the rest.
Click every cell {where} that breaks the pattern.
Select all cells that differ from the majority {where}, then finish.
Select all odd cells {where}, then finish.
Select all cells unlike the others {where}, then finish.
Select all cells that do not match the rest {where}, then finish.
Select all exceptions to the pattern {where}, then finish.
Click all cells that are different from the majority {where}.
Mark each cell {where} that differs from the majority; if there are none, just finish.
Mark each cell {where} that is an odd one out; if there are none, just finish.
Mark each cell {where} that is unlike the others; if there are none, just finish.
Mark each cell {where} that does not match the rest; if there are none, just finish.
Mark each cell {where} that breaks the pattern; if there are none, just finish.
Click every cell that differs from the majority, except {where}, then submit how many you clicked.
Click every cell that is an odd one out, except {where}, then submit how many you clicked.
Click every cell that is unlike the others, except {where}, then submit how many you clicked.
Click every cell that does not match the rest, except {where}, then submit how many you clicked.
Click every cell that breaks the pattern, except {where}, then submit how many you clicked.
Ignoring {where}, click all cells that differ from the majority and submit how many you clicked.
Ignoring {where}, click all odd cells and submit how many you clicked.
Ignoring {where}, click all cells unlike the others and submit how many you clicked.
Ignoring {where}, click all cells that do not match the rest and submit how many you clicked.
Ignoring {where}, click all exceptions to the pattern and submit how many you clicked.
Click all cells that are different from the majority in the whole grid, except {where}, then submit the number of cells you clicked.
Count the cells that differ from the majority in the whole grid, except {where}.
Count the odd cells in the whole grid, except {where}.
Count the cells unlike the others in the whole grid, except {where}.
Count the cells that do not match the rest in the whole grid, except {where}.
Count the exceptions to the pattern in the whole grid, except {where}.
Ignoring {where}, how many cells differ from the majority?
Ignoring {where}, how many cells are odd ones out?
Ignoring {where}, how many cells are unlike the others?
Ignoring {where}, how many cells do not match the rest?
Ignoring {where}, how many cells break the pattern?
Count the number of cells that are different from the majority in the whole grid, except {where}.
""".strip().splitlines()

# Every shape of numeric region, with the natural phrase a person would use.
NUMERIC_REGIONS = [
    (P.ROW_RANGE, {"r1": 3, "r2": 3}, "in row 3"),
    (P.ROW_RANGE, {"r1": 2, "r2": 5}, "in rows 2 to 5"),
    (P.COL_RANGE, {"c1": 4, "c2": 4}, "in column 4"),
    (P.COL_RANGE, {"c1": 1, "c2": 7}, "in columns 1 to 7"),
    (P.RECTANGLE, {"r1": 3, "r2": 3, "c1": 13, "c2": 13}, "at row 3, column 13"),
    (P.RECTANGLE, {"r1": 3, "r2": 3, "c1": 2, "c2": 9}, "in row 3, columns 2 to 9"),
    (P.RECTANGLE, {"r1": 1, "r2": 6, "c1": 5, "c2": 5}, "in rows 1 to 6, column 5"),
    (P.RECTANGLE, {"r1": 2, "r2": 4, "c1": 3, "c2": 8}, "in rows 2 to 4, columns 3 to 8"),
]
SINGULAR_VERBS = {"is", "differs", "does", "breaks"}
PLURAL_VERBS = {"are", "differ", "do", "break"}


EXCLUSION_COUNT = "exclusion count"  # Excl-Cnt's phrasings: COUNT's, naming the cells left out
FORM_SETS = {**Q.VARIED_SENTENCES, EXCLUSION_COUNT: Q.VARIED_EXCLUSION_COUNT}


def all_forms() -> list[str]:
    forms = [
        Q.fill_varied(template, odd, "{where}")
        for templates in FORM_SETS.values()
        for template in templates
        for odd in Q.ODD_PHRASES
    ]
    return list(dict.fromkeys(forms))


def all_wheres(mode: str) -> list[str]:
    if mode in (P.CLICK_COUNT, EXCLUSION_COUNT):  # the excluded cells
        return [
            Q.natural_exclusion_phrase({"exclude_type": kind, "exclude_params": params})
            for kind, params, _ in NUMERIC_REGIONS
        ]
    numeric = [Q.natural_region_phrase(kind, params) for kind, params, _ in NUMERIC_REGIONS]
    return [*Q.VARIED_GLOBAL, *numeric, *(Q.VARIED_VISUAL if mode == P.CLICK else [])]


def all_sentences() -> list[str]:
    return [
        Q.fill_varied(template, odd, where)
        for mode, templates in FORM_SETS.items()
        for template in templates
        for odd in Q.ODD_PHRASES
        for where in all_wheres(mode)
    ]


def grammar_problems(sentence: str) -> list[str]:
    """The rules every filled-in sentence must obey; the list of what it breaks."""
    problems = []
    if (
        not sentence[0].isupper()
        or sentence[-1] not in ".?"
        or "  " in sentence
        or re.search(r" [,.;?]", sentence)
    ):
        problems.append("capital, single spaces, final punctuation")
    words = re.findall(r"[\w-]+", sentence.lower())
    for i, word in enumerate(words):
        if word not in SINGULAR_VERBS | PLURAL_VERBS or words[i - 1] == "there":
            continue
        subject = next((w for w in reversed(words[:i]) if w in ("cell", "cells")), None)
        if subject and (word in SINGULAR_VERBS) != (subject == "cell"):
            problems.append(f"'{subject} ... {word}' disagree in number")
    if re.search(r"\bis (?:\w+ )?ones\b|\bare an? ", sentence):
        problems.append("'is ... ones' or 'are a ...' disagree in number")
    if re.search(
        r"\b(?:the|all) (?:unlike|not|different|odd ones|exceptions to the pattern cells)\b", sentence
    ):
        problems.append("a predicate used as an adjective")
    if re.search(r"\b(rows?|columns?) (\d+) to \2\b", sentence):
        problems.append("a range from a number to itself")
    if re.search(r"from row (\d+),? column \d+ to row \1\b", sentence):
        problems.append("a one-row range named by both ends")
    return problems


def test_every_varied_form_is_a_reviewed_one():
    forms = all_forms()
    unreviewed = [f for f in forms if f not in REVIEWED_FORMS]
    assert unreviewed == [], "new phrasings: read them, then add them to REVIEWED_FORMS"
    assert sorted(forms) == sorted(REVIEWED_FORMS), "REVIEWED_FORMS lists forms no longer made"


def test_every_filled_in_sentence_obeys_the_rules():
    sentences = all_sentences()
    assert len(sentences) > 500
    broken = {s: grammar_problems(s) for s in sentences if grammar_problems(s)}
    assert broken == {}


@pytest.mark.parametrize(
    "sentence",
    [
        "Count the unlike the others cells in row 3.",
        "Select all not the majority item cells in row 3, then finish.",
        "Click every cell in row 3 that is odd ones out.",
        "How many cells in row 3 differs from the majority?",
        "Count the cells from row 3 column 13 to row 3 column 13.",
        "Count the cells in rows 4 to 4.",
        "Count the cells from row 3, column 2 to row 3, column 9.",
    ],
)
def test_the_rules_catch_what_the_old_phrasings_said(sentence):
    assert grammar_problems(sentence)


@pytest.mark.parametrize("kind, params, natural", NUMERIC_REGIONS)
def test_regions_are_named_as_a_person_would(kind, params, natural):
    assert Q.natural_region_phrase(kind, params) == natural


def test_one_excluded_cell_is_singular():
    one = {"exclude_type": P.RECTANGLE, "exclude_params": {"r1": 3, "r2": 3, "c1": 13, "c2": 13}}
    assert Q.natural_exclusion_phrase(one) == "the cell at row 3, column 13"
    rows = {"exclude_type": P.ROW_RANGE, "exclude_params": {"r1": 2, "r2": 4}}
    assert Q.natural_exclusion_phrase(rows) == "the cells in rows 2 to 4"


def test_varied_sentences_come_from_the_reviewed_forms_and_end_with_the_answer_format():
    rng = random.Random(0)
    params = {"r1": 3, "r2": 3, "c1": 13, "c2": 13}
    for _ in range(50):
        sentence = Q.task_sentence(P.T2, P.RECTANGLE, params, "varied", rng)
        body, hint = sentence.rsplit(" Answer only", 1)
        assert body.replace("at row 3, column 13", "{where}") in REVIEWED_FORMS
        assert "Answer only" + hint == Q.ANSWER_HINT[P.COUNT]


def test_excl_cnt_names_the_cells_left_out_and_asks_a_count():
    """Excl-Cnt is a COUNT of an EXCLUSION region: its phrasings are the
    exclusion counting ones, never COUNT's "cells in ..." (which would name the
    excluded cells as the ones to count)."""
    rng = random.Random(0)
    excluded = {"exclude_type": P.ROW_RANGE, "exclude_params": {"r1": 2, "r2": 4}}
    bodies = set()
    for _ in range(60):
        body, hint = Q.task_sentence(P.T5C, P.EXCLUSION, excluded, "varied", rng).rsplit(" Answer only", 1)
        bodies.add(body.replace("the cells in rows 2 to 4", "{where}"))
        assert "Answer only" + hint == Q.ANSWER_HINT[P.COUNT]
    assert bodies <= set(
        Q.fill_varied(f, o, "{where}") for f in Q.VARIED_EXCLUSION_COUNT for o in Q.ODD_PHRASES
    )
    assert len(bodies) > 5


# ----------------------------------------------------------------- rose: the release's words

ROSE_EXPECTED = {
    (P.T1, P.GLOBAL): "Count the number of cells that are different from the majority in the whole grid.",
    (P.T1B, P.GLOBAL): "Click all cells that are different from the majority in the whole grid.",
    (
        P.T4,
        P.VISUAL_REGION,
    ): "Click all cells that are different from the majority inside the highlighted region.",
}


def test_rose_sentences_are_the_release_words_and_draw_nothing():
    rng = random.Random(7)
    for (template, kind), expected in ROSE_EXPECTED.items():
        assert (
            Q.task_sentence(template, kind, {}, "rose", rng)
            == f"{expected} {Q.ANSWER_HINT[P.TASK_MODE[template]]}"
        )
    rect = {"r1": 3, "r2": 3, "c1": 13, "c2": 13}  # the release names even one cell by both ends
    assert Q.task_sentence(P.T3, P.RECTANGLE, rect, "rose", rng) == (
        "Click all cells that are different from the majority from row 3 column 13 to row 3 column 13. "
        "Answer only using CLICK(Rr,Cc); ...; DONE."
    )
    excluded = {"exclude_type": P.ROW_RANGE, "exclude_params": {"r1": 2, "r2": 2}}
    assert Q.task_sentence(P.T5, P.EXCLUSION, excluded, "rose", rng) == (
        "Click all cells that are different from the majority in the whole grid, except the cells in row 2, "
        "then submit the number of cells you clicked. Answer only using CLICK(Rr,Cc); ...; SUBMIT(n)."
    )
    assert Q.task_sentence(P.T5C, P.EXCLUSION, excluded, "rose", rng) == (
        "Count the number of cells that are different from the majority in the whole grid, except the cells "
        "in row 2. Answer only in the format: COUNT(n)."
    )
    assert rng.random() == random.Random(7).random()


def test_rose_sentences_match_every_prompt_of_the_real_release(rose_sample_dir):
    rows = [
        json.loads(line)
        for line in (rose_sample_dir / "metadata_test_matched_local_count_bridge.jsonl")
        .read_text()
        .splitlines()
    ]
    rng = random.Random(0)
    for row in rows:
        sentence = Q.task_sentence(
            row["task_template"], row["region_type"], row["region_params"], "rose", rng
        )
        assert row["prompt"].endswith("\n" + sentence), row["item_id"]


def test_the_tiny_tokenizer_is_still_the_shipped_demo_bases():
    """Phrasings can change without changing tiny models: their tokenizer corpus is
    frozen, so `rosetrain demo --rebuild-base` still rebuilds the shipped base."""
    from pathlib import Path

    from rosetrain.models.tiny import build_tokenizer

    shipped = Path(__file__).resolve().parent.parent / "rosetrain" / "assets" / "demo-base" / "tokenizer.json"
    built = json.loads(build_tokenizer(seed=0).backend_tokenizer.to_str())
    assert built == json.loads(shipped.read_text())
