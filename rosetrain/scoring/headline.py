"""Where rosetrain's headline and the paper tables part: said in words.

The headline (console, summary.md, ``templates``/``avg_pass``/... in the
summary) covers every subset of the run and leaves out items whose request
failed; the paper tables (``table1_row.txt``, ``table2_row.txt``,
``paper_metrics``) hold the five ROSE subsets only and count a failed request
as a failure, as the official evaluator does. On the official test split the
two agree; where they do not, the summary says why and gives the tables' figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rosetrain.core.formats import pct
from rosetrain.core.protocol import MAIN_TEMPLATES
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.official import ROSE_SUBSETS, TABLE_SHORT

TOLERANCE = 1e-9  # the same figure added in another order


def _pairs(summary: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(the tables' name, headline value, table value) of each figure both show."""
    table1, table2 = summary["paper_metrics"]["table1"], summary["paper_metrics"]["table2"]
    templates = summary["templates"]
    pairs = [
        (TABLE_SHORT[t], templates.get(t, {}).get("pass"), table2[TABLE_SHORT[t]]) for t in MAIN_TEMPLATES
    ]
    pairs += [
        ("C-F1", summary["c_f1"], table2["C-F1"]),
        ("R-OK", summary["r_ok"], table2["R-OK"]),
        ("Avg. PASS", summary["avg_pass"], table2["Avg. PASS"]),
        ("Avg. SOFT", summary["soft"], table1["Avg. SOFT"]),
        ("VALID", summary["valid"], table1["VALID"]),
    ]
    return pairs


def _differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > TOLERANCE


def headline_note(summary: Mapping[str, Any], answered: Frame) -> str | None:
    """None when the headline shows the tables' figures, else why it does not
    and the tables' figures (``answered``: the rows the headline counts)."""
    pairs = _pairs(summary)
    if not any(_differs(a, b) for _, a, b in pairs):
        return None
    if all(b is None for _, _, b in pairs):  # no ROSE subset at all (generated data): nothing to tell
        return None
    main = set(MAIN_TEMPLATES)
    others = Counter(
        str(subset)
        for subset, template in zip(answered.label("rose_subset"), answered.label("task_template"))
        if template in main and subset not in ROSE_SUBSETS
    )
    reasons = [
        f"counts {n} items of {subset} too (not a ROSE subset)" for subset, n in sorted(others.items())
    ]
    if summary["n_errors"]:
        reasons.append(f"leaves out {summary['n_errors']} items whose request failed")
    tables = ", ".join(f"{name} {pct(b)}" for name, _, b in pairs)
    return (
        f"the headline differs from the paper tables (table1_row.txt, table2_row.txt: the five ROSE "
        f"subsets, a failed request counted as a failure): it "
        f"{'; it '.join(reasons) or 'adds the same items in another order'}. "
        f"The tables say: {tables}"
    )
