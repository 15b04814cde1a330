"""The official analyses in a comparison: each bridge's paper-table columns and
the same-scene consistency figures, each run's value with its own 95%
interval beside the paired interval of the difference, when both runs have
them.

Every figure is the one the official script reports, written as a mean of one
value per row (a bridge row, or a scene for consistency) over the rows where
the script's condition holds, per ROSE subset and then over the subsets. So
the scene bootstrap of the main figures (``paired.paired_figures``)
resamples them too, and its value on the rows as they are is the script's.

- Bridges: the rows of ``per_item_<bridge>_eval.jsonl``, paired by item id.
  Their pairing fields (``base_gcnt_*``, ``base_lclk_*``) say whether the
  main item was scored and passed.
- Scene consistency: from the paired main rows, one row per scene and run
  holding whether the scene passed each main template (any of its rows did),
  over the five ROSE subsets, as ``scoring/consistency.py`` counts them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import MAIN_TEMPLATES
from rosetrain.reports.paired import Column, drop_errored, figure_row, pair_runs, paired_figures
from rosetrain.scoring.consistency import KEYS as CONSISTENCY_KEYS
from rosetrain.scoring.files import read_scored_rows
from rosetrain.scoring.official import ROSE_SUBSETS

Row = Mapping[str, Any]


def _of(field: str, when: Callable[[Row], bool] = lambda row: True) -> Callable[[Row], Any]:
    return lambda row: row.get(field) if when(row) else None


def _gcnt_paired(row: Row) -> bool:
    return row.get("base_gcnt_matched") == 1


def _gcnt_correct(row: Row) -> bool:
    return _gcnt_paired(row) and row.get("base_gcnt_pass") == 1


def _lclk_paired(row: Row) -> bool:
    return row.get("base_lclk_matched") == 1


def _mlcnt_correct(row: Row) -> bool:
    return _lclk_paired(row) and row.get("pass") == 1


def _lclk_exact(row: Row) -> bool:
    return _lclk_paired(row) and row.get("base_lclk_cardinality_exact") == 1


def _difference(first: str, second: str, when: Callable[[Row], bool]) -> Callable[[Row], Any]:
    def value(row: Row) -> Any:
        a, b = row.get(first), row.get(second)
        return None if not when(row) or a is None or b is None else float(a) - float(b)

    return value


# each bridge's paper-table columns (bridges/global_click.py and
# matched_count.py, PAPER), as row values under the script's conditions
BRIDGE_COLUMNS: dict[str, tuple[Column, ...]] = {
    "global_click": (
        Column("G-Cnt", "G-Cnt (the paired T1 count)", _of("base_gcnt_pass", _gcnt_paired)),
        Column("G-Clk", "G-Clk (T1B PASS)", _of("pass")),
        Column("G-Clk | G-Cnt correct", "G-Clk where G-Cnt passed", _of("pass", _gcnt_correct)),
        Column("Card-Exact", "Card-Exact (as many clean clicks as targets)", _of("cardinality_exact")),
        Column(
            "Card-Exact | G-Cnt correct",
            "Card-Exact where G-Cnt passed",
            _of("cardinality_exact", _gcnt_correct),
        ),
        Column(
            "Loc-Exact | Card-Exact",
            "Loc-Exact where Card-Exact",
            _of("pass", lambda row: row.get("cardinality_exact") == 1),
        ),
        Column("C-F1", "C-F1 (click F1, strict)", _of("click_f1_strict")),
        Column("VALID", "VALID", _of("format_valid")),
        Column(
            "G-Cnt to G-Clk drop", "G-Cnt to G-Clk drop", _difference("base_gcnt_pass", "pass", _gcnt_paired)
        ),
    ),
    "matched_count": (
        Column("mL-Cnt", "mL-Cnt (T2B PASS)", _of("pass")),
        Column("L-Clk", "L-Clk (the paired T3 click)", _of("base_lclk_pass", _lclk_paired)),
        Column("L-Clk | mL-Cnt correct", "L-Clk where mL-Cnt passed", _of("base_lclk_pass", _mlcnt_correct)),
        Column("Card-Exact", "Card-Exact of L-Clk", _of("base_lclk_cardinality_exact", _lclk_paired)),
        Column(
            "Card-Exact | mL-Cnt correct",
            "Card-Exact where mL-Cnt passed",
            _of("base_lclk_cardinality_exact", _mlcnt_correct),
        ),
        Column("Loc-Exact | Card-Exact", "Loc-Exact where Card-Exact", _of("base_lclk_pass", _lclk_exact)),
        Column(
            "Loc-Exact | Card & mL-Cnt",
            "Loc-Exact where Card-Exact and mL-Cnt passed",
            _of("base_lclk_pass", lambda row: _lclk_exact(row) and row.get("pass") == 1),
        ),
        Column("C-F1", "C-F1 of L-Clk (strict)", _of("base_lclk_click_f1_strict", _lclk_paired)),
        Column("mL-Cnt VALID", "mL-Cnt VALID", _of("format_valid")),
        Column("L-Clk VALID", "L-Clk VALID", _of("base_lclk_format_valid", _lclk_paired)),
        Column(
            "mL-Cnt to L-Clk drop",
            "mL-Cnt to L-Clk drop",
            _difference("pass", "base_lclk_pass", _lclk_paired),
        ),
        Column(
            "Transfer failure",
            "Transfer failure (L-Clk failed where mL-Cnt passed)",
            lambda row: None if not _mlcnt_correct(row) else 1 - int(row.get("base_lclk_pass") or 0),
        ),
    ),
}
BRIDGE_TITLES = {
    "global_click": "Global-click bridge (G-Clk against the scene's G-Cnt)",
    "matched_count": "Matched-count bridge (mL-Cnt against the paired L-Clk)",
}

# scene consistency: each main template's figure over the scenes whose T1 passed
# (scoring/consistency.py), and Action Ret., the mean of the action templates'
_T1 = CONSISTENCY_KEYS[0]


def _after_t1(key: str) -> Callable[[Row], Any]:
    return lambda row: row.get(key) if row.get(_T1) == 1 else None


CONSISTENCY_COLUMNS = (
    Column(_T1, "T1 (scenes whose G-Cnt passed)", _of(_T1)),
    # labels without "|", which would cut a Markdown table's row (the keys keep the script's names)
    *(Column(key, f"{key.split('|')[0]} where T1 passed", _after_t1(key)) for key in CONSISTENCY_KEYS[1:]),
)
CONSISTENCY_DERIVED = {
    "Action Ret.": ("Action Ret. (mean of the three action figures)", CONSISTENCY_KEYS[2:]),
}


def compare_analyses(
    before_dir: str | os.PathLike,
    after_dir: str | os.PathLike,
    pairs: Sequence[tuple[Row, Row]],
    summaries: tuple[Mapping[str, Any], Mapping[str, Any]],
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    """compare.json's ``bridges`` and ``scene_consistency``: what both runs have
    (``summaries``: their evaluation_summary.json)."""
    out: dict[str, Any] = {}
    bridges = {}
    for name, columns in BRIDGE_COLUMNS.items():
        files = [Path(run) / f"per_item_{name}_eval.jsonl" for run in (before_dir, after_dir)]
        if all(path.is_file() for path in files):
            try:
                paired = pair_runs(read_scored_rows(files[0]), read_scored_rows(files[1]))
            except RosetrainError as err:
                raise RosetrainError(f"{files[0].name}: {err}") from None
            # the scripts' figures are means over the ROSE subsets alone
            kept, excluded = drop_errored([(b, a) for b, a in paired if b["rose_subset"] in ROSE_SUBSETS])
            if kept:
                figures = paired_figures(kept, columns, resamples, seed)
                bridges[name] = {
                    "n_items": len(kept),
                    "errored_excluded": excluded["pairs"],
                    "figures": figures,
                }
    if bridges:
        out["bridges"] = bridges
    if all(summary.get("scene_consistency") for summary in summaries):
        scenes = scene_pairs(pairs)
        if scenes:
            out["scene_consistency"] = {
                "n_scenes": len(scenes),
                "figures": paired_figures(scenes, CONSISTENCY_COLUMNS, resamples, seed, CONSISTENCY_DERIVED),
            }
    return out


def scene_pairs(pairs: Sequence[tuple[Row, Row]]) -> list[tuple[Row, Row]]:
    """One (before, after) row per scene of the five ROSE subsets: whether the
    scene passed each main template, under the consistency script's keys
    (absent where the scene has no row of it)."""
    scenes: dict[tuple[str, str], tuple[dict, dict]] = {}
    for before, after in pairs:
        template, subset = before["task_template"], before["rose_subset"]
        if template not in MAIN_TEMPLATES or subset not in ROSE_SUBSETS:
            continue
        key = CONSISTENCY_KEYS[MAIN_TEMPLATES.index(template)]
        scene_id = f"{subset}/{before['scene_id']}"
        found = scenes.setdefault(
            (subset, str(before["scene_id"])),
            ({"scene_id": scene_id, "rose_subset": subset}, {"scene_id": scene_id, "rose_subset": subset}),
        )
        for scene, row in zip(found, (before, after)):
            scene[key] = max(scene.get(key, 0), int(row.get("pass") or 0))
    return list(scenes.values())


def analyses_markdown(result: Mapping[str, Any]) -> list[str]:
    """The report's sections of the official analyses, one table each."""
    header = [
        "| figure | before [95% CI] | after [95% CI] | delta [paired 95% CI] |",
        "|---|---|---|---|",
    ]
    lines: list[str] = []
    for name, bridge in result.get("bridges", {}).items():
        lines += ["", f"## {BRIDGE_TITLES.get(name, name)}", ""]
        lines.append(f"{bridge['n_items']} paired bridge items, each figure as the paper's bridge table.\n")
        lines += header + [figure_row(e["label"], e, None) for e in bridge["figures"].values()]
    consistency = result.get("scene_consistency")
    if consistency:
        lines += ["", "## Same-scene consistency (the scenes whose T1 count passed)", ""]
        lines.append(f"{consistency['n_scenes']} paired scenes of the ROSE subsets.\n")
        lines += header + [figure_row(e["label"], e, None) for e in consistency["figures"].values()]
    return lines
