"""Answer variants for one gold task: the kinds of response a model gives.

Each variant is ``(raw_text, api_error)``. Hand-written kinds (prose, case,
spacing, separators, Unicode digits, duplicates, out-of-grid cells, wrong end
token, abstention, empty, None, API errors) are built from the gold answer,
plus random near-grammar strings from a seeded generator.
"""

from __future__ import annotations

import random

from rosetrain.core.protocol import CLICK, CLICK_COUNT, COUNT

ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


def _cells(record) -> list[tuple[int, int]]:
    cells = []
    for label in record["ground_truth_clicks"]:
        row, col = label.split(",")
        cells.append((int(row[1:]), int(col.strip()[1:])))
    return cells


def _click_answer(cells, end: str, click="CLICK", sep="; ", inner=","):
    return sep.join([f"{click}(R{r}{inner}C{c})" for r, c in cells] + [end])


def _hand_written(record) -> list[str]:
    mode, rows, cols = record["task_mode"], int(record["rows"]), int(record["cols"])
    gold = record["ground_truth_formal_answer"] or record.get("answer")
    n = int(record["ground_truth_count"])
    cells = _cells(record)
    all_cells = []
    for label in record["all_target_cells"]:
        row, col = label.split(",")
        all_cells.append((int(row[1:]), int(col.strip()[1:])))
    texts = [
        gold,
        gold.lower(),
        gold.upper(),
        " \n" + gold + "\t\n",
        f"The answer is {gold}.",
        f"{gold}\nBecause I counted.",
        "```\n" + gold + "\n```",
        "",
        "   ",
        "\n\t",
        gold.translate(ARABIC_INDIC),
        gold.translate(FULL_WIDTH),
        gold.replace("(", " ( "),
        gold.replace(",", " , ").replace("(", "( ").replace(")", " )"),
        gold.replace("; ", ";"),
        gold.replace("; ", " ;; "),
        gold + ";",
        gold + " ; ;",
        ";" + gold,
        gold.replace("; ", "\n"),
        gold.replace("; ", ", "),
        gold.replace("R", "r "),
        "DONE",
        "SUBMIT(0)",
        "COUNT(0)",
        "CLICK(R1,C1)",
        "I cannot determine this.",
        "None",
        "COUNT()",
        "COUNT(-1)",
        "COUNT(2.0)",
        "COUNT(1); COUNT(1)",
        ";;",
        ";",
        "DONE; DONE",
        "CLIC\u212a(R1,C1); DONE",
        "\u017fUBMIT(0)",
        "count (" + str(n) + ")",
        "COUNT(" + str(n),
        f"COUNT({n}) DONE",
        f"SUBMIT({n})",
        f"DONE; SUBMIT({n})",
        f"COUNT({len(all_cells)})",
        "CLICK(R0,C0); DONE",
        f"CLICK(R{rows + 1},C1); DONE",
        f"CLICK(R1,C{cols + 1}); SUBMIT(1)",
        f"CLICK(R{rows},C{cols}); CLICK(R{rows},C{cols}); DONE",
        "CLICK(R" + "9" * 30 + ",C1); DONE",
        "COUNT(" + "0" * 25 + str(n) + ")",
    ]
    if mode != COUNT:
        end = "DONE" if mode == CLICK else f"SUBMIT({n})"
        other_end = f"SUBMIT({n})" if mode == CLICK else "DONE"
        texts += [
            _click_answer(cells, other_end),
            _click_answer(cells[:-1], end),
            _click_answer(cells + cells[:1], end),
            _click_answer(cells + [(rows + 2, 1)], end),
            _click_answer(cells + [(1, 1)], end),
            _click_answer(all_cells, end),
            _click_answer(all_cells, f"SUBMIT({len(all_cells)})"),
            _click_answer(cells, end, click="click", sep=" ; ", inner=" , "),
            _click_answer(cells, end, sep=";;"),
            _click_answer(cells, end, inner=";"),
            _click_answer(cells, "DONE."),
            _click_answer(cells, "SUBMIT(" + str(n + 1) + ")"),
            _click_answer(cells[::-1], end),
            _click_answer(cells, end) + "; extra",
            "Sure! " + _click_answer(cells, end),
            _click_answer(cells, "oops; " + end),
            _click_answer([(r, c + 1) for r, c in cells], end),
            _click_answer([(r + 1, c) for r, c in cells] + cells[1:], end),
            _click_answer(cells, end, click="CLICK ", inner=" ,"),
            _click_answer(cells, "x; " + f"SUBMIT({len(all_cells)})"),
            _click_answer(all_cells, "bad; " + end),
            _click_answer(cells, "COUNT(1)"),
        ]
    return texts


# Pieces of near-grammar answers (the property tests of test_scoring sample them too)
ANSWER_FRAGMENTS = [
    "CLICK(R2,C2)",
    "click( r 2 , c 2 )",
    "CLICK(R4,C4)",
    "CLICK(R99,C0)",
    "DONE",
    "done",
    "SUBMIT(1)",
    "SUBMIT(",
    "COUNT(1)",
    "COUNT( 2 )",
    "CLICK(",
    "R2,C2",
    ")",
    "(",
    ";",
    " ",
    "\n",
    "\u3000",
    "CLICK(R2,C2);",
    "Answer:",
    "✅",
    "SUBMIT ( ٣ )",
    "CLICK(R1,C1)",
    "CLICK(R3,C3)",
    "CLICK ( R 5 , C 5 )",
    ";;",
    "submit(2)",
]


def _random_text(rng: random.Random) -> str:
    parts = [rng.choice(ANSWER_FRAGMENTS) for _ in range(rng.randint(0, 8))]
    return (rng.choice(["", "; ", ";", " "])).join(parts)


def answer_variants(record, seed: int, n_random: int = 150) -> list[tuple[object, object]]:
    """``(raw_text, api_error)`` pairs for ``record``: hand-written, then random."""
    rng = random.Random(seed)
    variants: list[tuple[object, object]] = [(text, None) for text in _hand_written(record)]
    variants += [
        (None, None),
        (None, "Timeout"),
        ("", "rate limited"),
        ("", ""),
        (None, "None"),
        (12, None),
        (["COUNT(1)"], None),
    ]
    variants += [(_random_text(rng), None) for _ in range(n_random)]
    if record["task_mode"] == CLICK_COUNT:
        variants += [
            (_random_text(rng) + f"; SUBMIT({rng.randint(0, 4)})", None) for _ in range(n_random // 3)
        ]
    return variants
