"""The paper's bridge figures, as the official analysis scripts compute them.

ROSE v0.1 reports its bridge controls through two scripts of its repository:
``analysis/evaluate_global_click_bridge.py`` (T1B, paired with the scene's
T1) and ``analysis/evaluate_matched_local_count_bridge.py`` (T2B, paired with
the T3 item whose region it counts). This module writes the files those
scripts write, with their names, keys and values, as they write them when
given the bridge's own predictions and the main run's ``per_item_eval.jsonl``
(so no prediction is "extra" and none is a duplicate). The per-item rows are
the ones rosetrain scored (their official fields); the figures are computed
here, over rows sorted by item id, the scripts' order of addition, so every
float is theirs. Pairing follows the scripts: the main row of the bridge's
source item id (T2B: its click item id first), else the last main row of the
same subset and scene, of the same model.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rosetrain.core.errors import RosetrainError
from rosetrain.core.jsonio import spaced_line
from rosetrain.core.protocol import T1, T1B, T2B, T3
from rosetrain.data.bridges import BRIDGE_FILE_TAGS
from rosetrain.scoring.fields import OFFICIAL_FIELDS
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.official import ROSE_SUBSETS
from rosetrain.scoring.official_files import Expected, RunInfo, official_csv

RowAt = Callable[[int], Mapping[str, Any]]  # frame position -> its per-item row
REGION_CASE_ORDER = ("zero", "partial", "all")


@dataclasses.dataclass
class Bridge:
    """One bridge's official outputs: its paper-table row (in %) and its files."""

    name: str  # the files' prefix, also its key under ``bridges`` in the summary
    paper: dict[str, Any]
    files: dict[str, str]


def mean(values: Iterable[Any]) -> float | None:
    """The scripts' mean: of the values set, as floats, added in order."""
    kept = [v for v in values if v is not None and v != ""]
    return sum(map(float, kept)) / len(kept) if kept else None  # the same additions, in order


def pct(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(100.0 * float(value), digits)


def _mean_of(rows: Sequence[Mapping], field: str) -> float | None:
    return mean([r.get(field) for r in rows])


def _share(rows: Sequence[Mapping], test: Callable[[Mapping], bool]) -> float | None:
    return mean(int(test(r)) for r in rows)


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else float(a) - float(b)


def _clean(row: Mapping) -> int:
    """A formal action with no off-grid or repeated click."""
    return int(
        row.get("format_valid") == 1
        and int(row.get("invalid_coordinate_count") or 0) == 0
        and int(row.get("duplicate_click_count") or 0) == 0
    )


# ---- global click (T1B against the scene's T1) -------------------------------------


def _global_row(row: Mapping, sources: Sequence) -> dict[str, Any]:
    out = {field: row[field] for field in OFFICIAL_FIELDS}
    clean, predicted, target = (
        _clean(row),
        int(row["pred_click_count_unique"] or 0),
        int(row["gt_count"] or 0),
    )
    out.update(
        source_item_id=sources[0],
        bridge_type=sources[2],
        clean_action=clean,
        predicted_click_cardinality=predicted,
        target_click_cardinality=target,
        cardinality_error=predicted - target,
        cardinality_abs_error=abs(predicted - target),
        cardinality_exact_nonstrict=int(predicted == target),
        cardinality_exact=int(clean == 1 and predicted == target),
    )
    return out


def _global_pair(row: dict, base: Mapping | None) -> None:
    row.update(
        base_gcnt_matched=int(base is not None),
        base_gcnt_item_id=base.get("item_id") if base else None,
        base_gcnt_pass=int(base.get("pass") or 0) if base else None,
        base_gcnt_soft=base.get("unified_soft") if base else None,
    )


def _global_figures(rows: Sequence[Mapping]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    exact = [r for r in rows if r.get("cardinality_exact") == 1]
    paired = [r for r in rows if r.get("base_gcnt_matched") == 1]
    counted = [r for r in paired if r.get("base_gcnt_pass") == 1]
    out = {
        "n": len(rows),
        "gclk_pass_rate": _mean_of(rows, "pass"),
        "gclk_soft": _mean_of(rows, "unified_soft"),
        "valid_rate": _mean_of(rows, "format_valid"),
        "api_error_rate": _mean_of(rows, "api_error"),
        "cardinality_exact_rate": _mean_of(rows, "cardinality_exact"),
        "cardinality_exact_nonstrict_rate": _mean_of(rows, "cardinality_exact_nonstrict"),
        "cardinality_mae": _mean_of(rows, "cardinality_abs_error"),
        "cardinality_bias": _mean_of(rows, "cardinality_error"),
        "location_exact_given_cardinality": _mean_of(exact, "pass"),
        "click_precision": _mean_of(rows, "click_precision"),
        "click_recall": _mean_of(rows, "click_recall"),
        "click_f1_strict": _mean_of(rows, "click_f1_strict"),
        "click_iou_strict": _mean_of(rows, "click_iou_strict"),
        "invalid_coordinate_sample_rate": _share(
            rows, lambda r: (r.get("invalid_coordinate_count") or 0) > 0
        ),
        "duplicate_click_sample_rate": _share(rows, lambda r: (r.get("duplicate_click_count") or 0) > 0),
        "n_cardinality_exact": len(exact),
        "n_main_gcnt_matched": len(paired),
        "n_main_gcnt_correct": len(counted),
    }
    g_cnt, g_clk = _mean_of(paired, "base_gcnt_pass"), _mean_of(paired, "pass")
    out.update(
        gcnt_pass_rate=g_cnt,
        gclk_pass_on_paired=g_clk,
        gclk_minus_gcnt=_difference(g_clk, g_cnt),
        gcnt_to_gclk_drop=_difference(g_cnt, g_clk),
        both_correct_rate=_share(paired, lambda r: r.get("base_gcnt_pass") == 1 and r.get("pass") == 1),
        gcnt_correct_gclk_wrong_rate=_share(
            paired, lambda r: r.get("base_gcnt_pass") == 1 and r.get("pass") != 1
        ),
        gclk_pass_given_gcnt_correct=_mean_of(counted, "pass"),
        cardinality_exact_given_gcnt_correct=_mean_of(counted, "cardinality_exact"),
        click_f1_given_gcnt_correct=_mean_of(counted, "click_f1_strict"),
    )
    return out


def _global_paper(model: str, macro: Mapping) -> dict[str, Any]:
    return {
        "Model": model,
        "G-Cnt": pct(macro.get("gcnt_pass_rate")),
        "G-Clk": pct(macro.get("gclk_pass_rate")),
        "G-Clk | G-Cnt correct": pct(macro.get("gclk_pass_given_gcnt_correct")),
        "Card-Exact": pct(macro.get("cardinality_exact_rate")),
        "Card-Exact | G-Cnt correct": pct(macro.get("cardinality_exact_given_gcnt_correct")),
        "Loc-Exact | Card-Exact": pct(macro.get("location_exact_given_cardinality")),
        "C-F1": pct(macro.get("click_f1_strict")),
        "VALID": pct(macro.get("valid_rate")),
        "G-Cnt to G-Clk drop": pct(macro.get("gcnt_to_gclk_drop")),
    }


# ---- matched local count (T2B against its T3) ---------------------------------------


def _matched_row(row: Mapping, sources: Sequence) -> dict[str, Any]:
    out = {field: row[field] for field in OFFICIAL_FIELDS}
    out.update(source_item_id=sources[0], source_click_item_id=sources[1], bridge_type=sources[2])
    return out


def _matched_pair(row: dict, base: Mapping | None) -> bool:
    """Fill in the T3 row's figures; False when its target count is not the bridge's."""
    if base is None:
        row["base_lclk_matched"] = 0
        return True
    clean, target = _clean(base), int(base.get("gt_count") or 0)
    clicks = int(base.get("pred_click_count_unique") or 0)
    counted = row.get("pred_count")
    row.update(
        base_lclk_matched=1,
        base_lclk_item_id=base.get("item_id"),
        base_lclk_pass=int(base.get("pass") or 0),
        base_lclk_soft=base.get("unified_soft"),
        base_lclk_format_valid=int(base.get("format_valid") or 0),
        base_lclk_clean_action=clean,
        base_lclk_gt_count=target,
        base_lclk_pred_click_cardinality=clicks,
        base_lclk_cardinality_exact=int(clean == 1 and clicks == target),
        base_lclk_click_f1_strict=base.get("click_f1_strict"),
        base_lclk_region_violation_count=base.get("region_violation_count"),
        cross_task_cardinality_consistent=(
            int(int(counted) == clicks) if counted is not None and clean == 1 else None
        ),
    )
    return int(row.get("gt_count") or 0) == target


# the T3 figures of a summary without paired rows, in the scripts' order
_UNPAIRED = (
    "lclk_pass_rate",
    "lclk_soft",
    "lclk_valid_rate",
    "lclk_cardinality_exact_rate",
    "lclk_location_exact_given_cardinality",
    "lclk_click_f1_strict",
    "mlcnt_to_lclk_drop",
    "lclk_pass_given_mlcnt_correct",
    "transfer_failure_given_mlcnt_correct",
    "lclk_cardinality_exact_given_mlcnt_correct",
    "lclk_click_f1_given_mlcnt_correct",
    "lclk_location_exact_given_cardinality_and_mlcnt_correct",
    "cross_task_cardinality_consistency_rate",
    "both_correct_rate",
    "mlcnt_correct_lclk_wrong_rate",
)


def _matched_figures(rows: Sequence[Mapping]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    counted = [r for r in rows if r.get("pred_count") is not None]
    paired = [r for r in rows if r.get("base_lclk_matched") == 1]
    right = [r for r in paired if r.get("pass") == 1]
    out: dict[str, Any] = {
        "n": len(rows),
        "mlcnt_pass_rate": _mean_of(rows, "pass"),
        "mlcnt_soft": _mean_of(rows, "unified_soft"),
        "mlcnt_valid_rate": _mean_of(rows, "format_valid"),
        "mlcnt_count_mae": _mean_of(counted, "count_mae"),
        "mlcnt_count_bias": _mean_of(counted, "count_bias"),
        "n_main_lclk_matched": len(paired),
        "n_mlcnt_correct": len(right),
    }
    if not paired:
        return {**out, **dict.fromkeys(_UNPAIRED)}
    m_cnt, l_clk = _mean_of(paired, "pass"), _mean_of(paired, "base_lclk_pass")
    exact = [r for r in paired if r.get("base_lclk_cardinality_exact") == 1]
    comparable = [r for r in paired if r.get("cross_task_cardinality_consistent") is not None]
    given = _mean_of(right, "base_lclk_pass")
    out.update(
        mlcnt_pass_on_paired=m_cnt,
        lclk_pass_rate=l_clk,
        lclk_soft=_mean_of(paired, "base_lclk_soft"),
        lclk_valid_rate=_mean_of(paired, "base_lclk_format_valid"),
        lclk_cardinality_exact_rate=_mean_of(paired, "base_lclk_cardinality_exact"),
        lclk_location_exact_given_cardinality=_mean_of(exact, "base_lclk_pass"),
        lclk_click_f1_strict=_mean_of(paired, "base_lclk_click_f1_strict"),
        mlcnt_to_lclk_drop=_difference(m_cnt, l_clk),
        both_correct_rate=_share(paired, lambda r: r.get("pass") == 1 and r.get("base_lclk_pass") == 1),
        mlcnt_correct_lclk_wrong_rate=_share(
            paired, lambda r: r.get("pass") == 1 and r.get("base_lclk_pass") != 1
        ),
        cross_task_cardinality_consistency_rate=_mean_of(comparable, "cross_task_cardinality_consistent"),
        lclk_pass_given_mlcnt_correct=given,
        transfer_failure_given_mlcnt_correct=None if given is None else 1.0 - float(given),
        lclk_cardinality_exact_given_mlcnt_correct=_mean_of(right, "base_lclk_cardinality_exact"),
        lclk_click_f1_given_mlcnt_correct=_mean_of(right, "base_lclk_click_f1_strict"),
        lclk_location_exact_given_cardinality_and_mlcnt_correct=_mean_of(
            [r for r in right if r.get("base_lclk_cardinality_exact") == 1], "base_lclk_pass"
        ),
    )
    return out


def _matched_paper(model: str, macro: Mapping) -> dict[str, Any]:
    return {
        "Model": model,
        "mL-Cnt": pct(macro.get("mlcnt_pass_rate")),
        "L-Clk": pct(macro.get("lclk_pass_rate")),
        "L-Clk | mL-Cnt correct": pct(macro.get("lclk_pass_given_mlcnt_correct")),
        "Card-Exact": pct(macro.get("lclk_cardinality_exact_rate")),
        "Card-Exact | mL-Cnt correct": pct(macro.get("lclk_cardinality_exact_given_mlcnt_correct")),
        "Loc-Exact | Card-Exact": pct(macro.get("lclk_location_exact_given_cardinality")),
        "Loc-Exact | Card & mL-Cnt": pct(
            macro.get("lclk_location_exact_given_cardinality_and_mlcnt_correct")
        ),
        "C-F1": pct(macro.get("lclk_click_f1_strict")),
        "mL-Cnt VALID": pct(macro.get("mlcnt_valid_rate")),
        "L-Clk VALID": pct(macro.get("lclk_valid_rate")),
        "mL-Cnt to L-Clk drop": pct(macro.get("mlcnt_to_lclk_drop")),
        "Transfer failure": pct(macro.get("transfer_failure_given_mlcnt_correct")),
    }


@dataclasses.dataclass(frozen=True)
class _Kind:
    name: str
    template: str
    source: str
    source_fields: tuple[int, ...]  # which sources name the main item, in the order tried
    row: Callable[[Mapping, Sequence], dict]
    pair: Callable[[dict, Mapping | None], Any]
    figures: Callable[[Sequence[Mapping]], dict]
    paper: Callable[[str, Mapping], dict]
    notes: dict[str, str]


KINDS = (
    _Kind(
        "global_click",
        T1B,
        T1,
        (0,),
        _global_row,
        _global_pair,
        _global_figures,
        _global_paper,
        {
            "G-Clk": "T1B PASS: every target of the whole grid clicked, nothing else, a clean action.",
            "Card-Exact": "The distinct valid clicks number the targets, in a clean action.",
            "Loc-Exact|Card-Exact": "T1B PASS over the items whose click cardinality is exact.",
            "G-Clk|G-Cnt correct": "T1B PASS over the scenes whose paired T1 count passed.",
        },
    ),
    _Kind(
        "matched_count",
        T2B,
        T3,
        (1, 0),
        _matched_row,
        _matched_pair,
        _matched_figures,
        _matched_paper,
        {
            "mL-Cnt": "T2B PASS: the count of the very region and targets of the paired T3 item.",
            "L-Clk|mL-Cnt correct": "The paired T3 item's PASS over the pairs whose matched count passed.",
            "Transfer failure": "1 - L-Clk|mL-Cnt correct.",
        },
    ),
)


def _macro(by_subset: Mapping[str, Mapping]) -> dict[str, Any]:
    """Every figure as the plain mean over the subsets that define it."""
    names = sorted({key for figures in by_subset.values() for key in figures if key != "n"})
    out: dict[str, Any] = {
        "n": sum(int(figures.get("n") or 0) for figures in by_subset.values()),
        "num_subsets": len(by_subset),
    }
    for name in names:
        out[name] = mean(f.get(name) for f in by_subset.values())
    return out


def _main_rows(frame: Frame, template: str, model: str) -> tuple[dict[str, int], dict[tuple, int]]:
    """The model's main rows of ``template`` by item id and by (subset, scene), in
    item id order (the main per_item_eval.jsonl's): the last row of a scene wins."""
    models = frame.label("model")
    ids, subsets, scenes = frame.label("item_id"), frame.label("rose_subset"), frame.label("scene_id")
    by_id, by_scene = {}, {}
    for i in _in_id_order(frame, np.flatnonzero(frame.rows_of("task_template", template))):
        # a row naming no model is the run's (the main evaluator names it so)
        if models[i] is None or str(models[i]) == model:
            if ids[i] is not None:
                by_id[str(ids[i])] = i
            if scenes[i] is not None:
                by_scene[(str(subsets[i]), str(scenes[i]))] = i
    return by_id, by_scene


def _in_id_order(frame: Frame, positions: np.ndarray) -> list[int]:
    """``positions`` sorted by their rows' item ids (without a pass over every row)."""
    rank = frame.derived("id_rank", _id_rank)
    return positions[np.argsort(rank[positions], kind="stable")].tolist()


def _id_rank(frame: Frame) -> np.ndarray:
    rank = np.empty(frame.n, dtype=np.intp)
    rank[frame.id_order()] = np.arange(frame.n)
    return rank


def _run_model(info: RunInfo, rows: Sequence[Mapping]) -> str:
    """The model the scripts name: the one given, else the rows' one, else "model"."""
    if info.model:
        return info.model
    named = sorted(
        {str(r["model"]).strip() for r in rows if r.get("model") is not None and str(r["model"]).strip()}
    )
    return ",".join(named) or "model"


def _analyze(
    kind: _Kind, expected: Expected, frame: Frame, row_at: RowAt, info: RunInfo, main_eval: str | None
):
    """One bridge's official outputs, or None when no row of it was scored."""
    sources = {
        str(item): source
        for item, template, source in zip(expected["item_id"], expected["task_template"], expected["sources"])
        if template == kind.template
    }
    ids = frame.label("item_id")
    scored = [
        i
        for i in _in_id_order(frame, np.flatnonzero(frame.rows_of("task_template", kind.template)))
        if str(ids[i]) in sources
    ]
    if not scored:
        return None
    bridge_rows = [row_at(i) for i in scored]
    model = _run_model(info, bridge_rows)
    rows = [kind.row(row, sources[str(row["item_id"])]) for row in bridge_rows]
    by_id, by_scene = _main_rows(frame, kind.source, model)
    mismatched = 0
    for row in rows:
        source = sources[str(row["item_id"])]
        found = next((by_id[str(source[k])] for k in kind.source_fields if str(source[k]) in by_id), None)
        if found is None:
            found = by_scene.get((str(row.get("rose_subset")), str(row.get("scene_id"))))
        mismatched += kind.pair(row, None if found is None else row_at(found)) is False
    if mismatched:
        raise RosetrainError(
            f"{mismatched} {kind.template} items count another target number than the "
            f"{kind.source} item they pair with: the bridge file of {kind.name} "
            f"(metadata_<split>_{BRIDGE_FILE_TAGS[kind.template]}.jsonl) is not this split's; "
            f"give the split's own bridge file, or score without bridges",
            argument="bridges",
        )
    return _outputs(kind, rows, model, len(sources), info, main_eval)


def _outputs(kind: _Kind, rows: list[dict], model: str, expected: int, info: RunInfo, main_eval: str | None):
    buckets: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        buckets[str(row.get("rose_subset"))].append(row)
    by_subset = {subset: kind.figures(buckets[subset]) for subset in ROSE_SUBSETS if subset in buckets}
    macro = _macro(by_subset)
    summary: dict[str, Any] = {"task_template": kind.template}
    if kind.template == T2B:
        summary["source_task_template"] = kind.source
    summary.update(
        model=model,
        split=info.split,
        num_expected=expected,
        num_predictions_loaded=len(rows),
        num_predictions_used=len(rows),
        num_missing=expected - len(rows),
        num_extra=0,
        num_duplicate_prediction_rows=0,
        main_eval=main_eval,
        macro_equal_subset=macro,
        micro_pooled=kind.figures(rows),
        by_subset=by_subset,
    )
    name = kind.name
    lines = [spaced_line(row) for row in rows]  # each row encoded once, whatever files hold it
    files = {
        f"per_item_{name}_eval.jsonl": "".join(lines),
        f"{name}_error_cases.jsonl": "".join(line for line, r in zip(lines, rows) if r.get("pass") != 1),
    }
    if kind.template == T2B:
        files["mlcnt_correct_lclk_wrong.jsonl"] = "".join(
            line
            for line, r in zip(lines, rows)
            if r.get("pass") == 1 and r.get("base_lclk_matched") == 1 and r.get("base_lclk_pass") != 1
        )
        cases, case_rows = _by_region_case(kind, rows, model)
        summary["by_region_case"] = cases
    summary["metric_notes"] = kind.notes
    files[f"{name}_summary.json"] = _json(summary)
    files[f"{name}_by_subset.csv"] = official_csv(
        [{"model": model, "subset": s, **f} for s, f in by_subset.items()]
    )
    if kind.template == T2B:
        files[f"{name}_by_region_case.csv"] = official_csv(case_rows)
    paper = kind.paper(model, macro)
    files[f"{name}_paper_table.csv"] = official_csv([paper])
    files[f"{name}_paper_table.json"] = _json(paper)
    # an empty table is no file, as there
    return Bridge(
        name, paper, {file: text for file, text in files.items() if text or file.endswith(".jsonl")}
    )


def _by_region_case(kind: _Kind, rows: Sequence[dict], model: str) -> tuple[dict, list[dict]]:
    """Per region case as the release spells it: the mean over the subsets (every
    subset present, in order of first use) of each subset's figures."""
    buckets: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        buckets[str(row.get("region_case") or "unknown")][str(row.get("rose_subset"))].append(row)
    order = [*REGION_CASE_ORDER, *sorted(case for case in buckets if case not in REGION_CASE_ORDER)]
    cases, table = {}, []
    for case in order:
        if case in buckets:
            subsets = {subset: kind.figures(subset_rows) for subset, subset_rows in buckets[case].items()}
            macro = _macro(subsets)
            cases[case] = {"macro_equal_subset": macro, "by_subset": subsets}
            table.append({"model": model, "region_case": case, **macro})
    return cases, table


def _json(value: Any) -> str:
    """As the scripts write JSON: 2-space indent, non-ASCII kept, no last newline."""
    return json.dumps(value, ensure_ascii=False, indent=2)


def bridge_outputs(
    expected: Expected, frame: Frame, row_at: RowAt, info: RunInfo | None = None, main_eval: str | None = None
) -> list[Bridge]:
    """The official outputs of each bridge the run scored rows of (``row_at(i)``:
    the per-item row at frame position ``i``; ``main_eval``: the path the
    summaries name as the main run's per-item file)."""
    info = info or RunInfo()
    found = (_analyze(kind, expected, frame, row_at, info, main_eval) for kind in KINDS)
    return [bridge for bridge in found if bridge is not None]
