"""The paper's same-scene consistency figures, as the official
``analysis/analyze_scene_consistency.py`` of ROSE v0.1 computes them from a
main ``per_item_eval.jsonl``: per model, per ROSE subset, each of T2-T5's PASS
over the scenes whose T1 passed and that have a row of that template (a scene
passes a template when any of its rows of it passes), then the mean over the
subsets; Action Ret. is the mean of the three action templates' figures.

Its files: ``scene_consistency_<split>.json``, ``.csv`` and ``_rows.tex``,
with the script's keys and values. Computed from the summary's columns (no
row is decoded): the rows of the split named, of the five ROSE subsets and the
five main templates, with a model name.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from rosetrain.core.protocol import MAIN_TEMPLATES
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.official import ROSE_SUBSETS, mean
from rosetrain.scoring.official_files import official_csv

# the figure of each main template, as the script names it
KEYS = ("T1", "L-Cnt|T1", "L-Clk|T1", "V-Clk|T1", "Excl-CS|T1")
ACTION = (2, 3, 4)  # L-Clk, V-Clk, Excl-CS
MACRO_KEYS = (*KEYS, "Action Ret.", "Action Fail.")
CONDITION = "same-scene T1_COUNT_GLOBAL pass == 1"
NOTES = {
    "macro": "The plain mean over the ROSE subsets that define the figure.",
    "paired_denominator": "Each figure counts the T1-passed scenes that have a row of its template; "
    "scenes without one are counted in missing_<figure>, not as failures.",
    "Action Ret.": "Mean of L-Clk|T1, V-Clk|T1 and Excl-CS|T1.",
}


def _index(frame: Frame, field: str, names: tuple, key=str) -> np.ndarray:
    """Each row's position of ``key(field)`` in ``names``, -1 when it is not there."""
    codes, values = frame.codes(field, key=key)
    return np.array([names.index(v) if v in names else -1 for v in values], dtype=np.intp)[codes]


def _model_name(value: Any) -> str:
    return str(value or "").strip()


def _record(model: str, subsets: np.ndarray, scenes: np.ndarray, templates: np.ndarray, passes: np.ndarray):
    """The script's record of one model, from its kept rows."""
    width = int(scenes.max()) + 1 if len(scenes) else 1
    pairs, pair_of = np.unique(subsets * width + scenes, return_inverse=True)
    seen = np.zeros((len(pairs), len(KEYS)), dtype=bool)
    best = np.zeros((len(pairs), len(KEYS)), dtype=np.int64)
    seen[pair_of, templates] = True
    np.maximum.at(best, (pair_of, templates), passes)
    subset_of = pairs // width
    by_subset = {}
    for number, subset in enumerate(ROSE_SUBSETS):
        t1 = (subset_of == number) & seen[:, 0]
        passed = t1 & (best[:, 0] == 1)
        n_t1, n_passed = int(t1.sum()), int(passed.sum())
        record: dict[str, Any] = {
            "n_t1_scenes": n_t1,
            "n_t1_correct_scenes": n_passed,
            "T1": n_passed / n_t1 if n_t1 else None,
        }
        for k in range(1, len(KEYS)):
            values = best[passed & seen[:, k], k].tolist()
            record[KEYS[k]] = mean(values)
            record[f"n_{KEYS[k]}"] = len(values)
            record[f"missing_{KEYS[k]}"] = n_passed - len(values)
        retained = mean(record[KEYS[k]] for k in ACTION)
        record["Action Ret."] = retained
        record["Action Fail."] = None if retained is None else 1.0 - retained
        by_subset[subset] = record
    macro = {key: mean(by_subset[s][key] for s in ROSE_SUBSETS) for key in MACRO_KEYS}
    return {"model": model, "n_items": len(passes), "macro_equal_subset": macro, "by_subset": by_subset}


def scene_consistency(frame: Frame, split: str | None) -> dict[str, Any] | None:
    """The script's bundle for the rows of ``split``, None when no row counts."""
    if not frame.n:
        return None
    subsets = _index(frame, "rose_subset", ROSE_SUBSETS)
    templates = _index(frame, "task_template", MAIN_TEMPLATES)
    model_codes, models = frame.codes("model", key=_model_name)
    kept = (subsets >= 0) & (templates >= 0) & np.array([bool(m) for m in models])[model_codes]
    if split:
        kept &= _index(frame, "rose_split", (split,)) == 0
    if not kept.any():
        return None
    scenes = frame.codes("scene_id", key=str)[0]
    passes = np.nan_to_num(frame["pass"]).astype(np.int64)
    records = []
    for model in sorted(m for m in models if m):
        rows = kept & (model_codes == models.index(model))
        if rows.any():
            records.append(_record(model, subsets[rows], scenes[rows], templates[rows], passes[rows]))
    return {
        "split": split,
        "condition": CONDITION,
        "num_models": len(records),
        "models": records,
        "notes": NOTES,
    }


def consistency_files(bundle: dict[str, Any], digits: int = 1) -> dict[str, str]:
    """``scene_consistency_<split>.json``, ``.csv`` and ``_rows.tex`` as the script writes them."""
    stem = f"scene_consistency_{bundle['split'] or 'all'}"  # no split named: every row
    table, lines = [], []
    for record in bundle["models"]:
        macro = record["macro_equal_subset"]
        table.append(
            {
                "model": record["model"],
                **{k: None if v is None else round(100.0 * v, digits) for k, v in macro.items()},
            }
        )
        cells = [
            "--" if macro[k] is None else f"{100.0 * macro[k]:.{digits}f}" for k in (*KEYS, "Action Ret.")
        ]
        lines += [record["model"] + "\n& " + " & ".join(cells) + " \\\\", ""]
    files = {f"{stem}.json": json.dumps(bundle, ensure_ascii=False, indent=2)}
    if table:
        files[f"{stem}.csv"] = official_csv(table)
    files[f"{stem}_rows.tex"] = "\n".join(lines).rstrip() + "\n"
    return files
