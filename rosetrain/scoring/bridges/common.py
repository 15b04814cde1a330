"""What the two official bridge analyses share: the scripts' mean and rounding,
the pairing of a bridge row with its main row, the per-subset and macro
figures, and the files each script writes (``global_click.py`` and
``matched_count.py`` hold what differs)."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import T2B
from rosetrain.data.bridges import BRIDGE_FILE_TAGS
from rosetrain.scoring.bridges.rows import ScoredRows, joined_line
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.official import ROSE_SUBSETS
from rosetrain.scoring.official_files import Expected, RunInfo, official_csv

REGION_CASE_ORDER = ("zero", "partial", "all")
# the per-item fields every bridge reads of its rows: its groups, its failures
COMMON_READS = frozenset(("rose_subset", "region_case", "pass"))


@dataclasses.dataclass
class Bridge:
    """One bridge's official figures, computed: its summary (the script's
    ``<name>_summary.json``), its paper-table row (in %), its per-item lines;
    ``files`` writes them as the script does."""

    name: str  # the files' prefix, also its key under ``bridges`` in the summary
    template: str
    model: str
    summary: dict[str, Any]
    paper: dict[str, Any]
    lines: list[bytes]  # the paired rows, encoded as the script writes them
    failed: list[bool]  # each row's PASS is not 1
    transfer_failed: list[bool]  # T2B: the count passed and the paired T3 click did not
    case_rows: list[dict]  # T2B: the by-region-case table

    def files(self) -> dict[str, str | list[bytes]]:
        """File name -> text, as the script names and writes them (an empty table
        is no file, as there); a JSONL file as its lines (``atomic_writes`` writes
        them one by one, with no joined copy)."""
        name, model = self.name, self.model
        files: dict[str, str | list[bytes]] = {
            f"per_item_{name}_eval.jsonl": self.lines,
            f"{name}_error_cases.jsonl": [line for line, bad in zip(self.lines, self.failed) if bad],
        }
        if self.template == T2B:
            files["mlcnt_correct_lclk_wrong.jsonl"] = [
                line for line, bad in zip(self.lines, self.transfer_failed) if bad
            ]
        files[f"{name}_summary.json"] = _json(self.summary)
        files[f"{name}_by_subset.csv"] = official_csv(
            [{"model": model, "subset": s, **f} for s, f in self.summary["by_subset"].items()]
        )
        if self.template == T2B:
            files[f"{name}_by_region_case.csv"] = official_csv(self.case_rows)
        files[f"{name}_paper_table.csv"] = official_csv([self.paper])
        files[f"{name}_paper_table.json"] = _json(self.paper)
        return {file: text for file, text in files.items() if text or file.endswith(".jsonl")}


def mean(values: Iterable[Any]) -> float | None:
    """The scripts' mean: of the values set, as floats, added in order."""
    kept = [v for v in values if v is not None and v != ""]
    return sum(map(float, kept)) / len(kept) if kept else None  # the same additions, in order


def pct(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(100.0 * float(value), digits)


def mean_of(rows: Sequence[Mapping], field: str) -> float | None:
    return mean([r.get(field) for r in rows])


def share(rows: Sequence[Mapping], test: Callable[[Mapping], bool]) -> float | None:
    return mean(int(test(r)) for r in rows)


def difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else float(a) - float(b)


def clean_action(row: Mapping) -> int:
    """A formal action with no off-grid or repeated click."""
    return int(
        row.get("format_valid") == 1
        and int(row.get("invalid_coordinate_count") or 0) == 0
        and int(row.get("duplicate_click_count") or 0) == 0
    )


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    template: str
    source: str
    source_fields: tuple[int, ...]  # which sources name the main item, in the order tried
    reads: frozenset[str]  # the per-item fields own, pair and figures read of a bridge row (and COMMON_READS)
    base_reads: frozenset[str]  # those pair reads of the main row
    own: Callable[[Mapping, Sequence], dict]  # the bridge's own fields of a row, from its sources
    pair: Callable[[dict, Mapping | None], Any]  # adds the main row's fields to the row
    figures: Callable[[Sequence[Mapping]], dict]
    paper: tuple[tuple[str, str], ...]  # the paper table's columns: (label, macro figure)
    notes: dict[str, str]


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


def _run_model(info: RunInfo, frame: Frame, positions: Sequence[int]) -> str:
    """The model the scripts name: the one given, else the rows' one, else "model"."""
    if info.model:
        return info.model
    models = frame.label("model")
    named = sorted(
        {str(models[i]).strip() for i in positions if models[i] is not None and str(models[i]).strip()}
    )
    return ",".join(named) or "model"


def analyze_kind(
    kind: Kind, expected: Expected, frame: Frame, rows: ScoredRows, info: RunInfo, main_eval: str | None
) -> Bridge | None:
    """One bridge's official figures, or None when no row of it was scored
    (``rows``: the per-item rows by frame position)."""
    sources = {
        str(item): source
        for item, template, source in zip(expected["item_id"], expected["task_template"], expected["sources"])
        if template == kind.template
    }
    ids, subsets, scenes = frame.label("item_id"), frame.label("rose_subset"), frame.label("scene_id")
    scored = [
        i
        for i in _in_id_order(frame, np.flatnonzero(frame.rows_of("task_template", kind.template)))
        if str(ids[i]) in sources
    ]
    if not scored:
        return None
    model = _run_model(info, frame, scored)
    by_id, by_scene = _main_rows(frame, kind.source, model)
    reads, base_reads = COMMON_READS | kind.reads, kind.base_reads
    bridge_rows, lines, mismatched = [], [], 0
    for i in scored:
        # the fields read, then the bridge's own and the pairing's, which its line adds
        row = rows.fields(i, reads)
        read = len(row)
        source = sources[str(ids[i])]
        row.update(kind.own(row, source))
        found = next((by_id[str(source[k])] for k in kind.source_fields if str(source[k]) in by_id), None)
        if found is None:
            found = by_scene.get((str(subsets[i]), str(scenes[i])))
        mismatched += kind.pair(row, None if found is None else rows.fields(found, base_reads)) is False
        bridge_rows.append(row)
        lines.append(joined_line(rows.official_text(i), dict(islice(row.items(), read, None))))
    if mismatched:
        raise RosetrainError(
            f"{mismatched} {kind.template} items count another target number than the "
            f"{kind.source} item they pair with: the bridge file of {kind.name} "
            f"(metadata_<split>_{BRIDGE_FILE_TAGS[kind.template]}.jsonl) is not this split's; "
            f"give the split's own bridge file, or score without bridges",
            argument="bridges",
        )
    return _computed(kind, bridge_rows, lines, model, len(sources), info, main_eval)


def _computed(
    kind: Kind,
    rows: list[dict],
    lines: list[bytes],
    model: str,
    expected: int,
    info: RunInfo,
    main_eval: str | None,
) -> Bridge:
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
    case_rows: list[dict] = []
    if kind.template == T2B:
        summary["by_region_case"], case_rows = _by_region_case(kind, rows, model)
    summary["metric_notes"] = kind.notes
    return Bridge(
        kind.name,
        kind.template,
        model,
        summary,
        {"Model": model, **{label: pct(macro.get(key)) for label, key in kind.paper}},
        lines,
        [r.get("pass") != 1 for r in rows],
        [
            r.get("pass") == 1 and r.get("base_lclk_matched") == 1 and r.get("base_lclk_pass") != 1
            for r in rows
        ],
        case_rows,
    )


def _by_region_case(kind: Kind, rows: Sequence[dict], model: str) -> tuple[dict, list[dict]]:
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
