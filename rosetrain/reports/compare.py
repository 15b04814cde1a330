"""Before/after comparison of two scored runs, item by item.

Both runs are folders holding ``per_item_eval.jsonl`` over the same items.
For each template, for counting_avg, action_avg, avg_pass and gap, for every
other figure of the official files (``figures``: Avg. SOFT, VALID, C-F1, R-OK,
each subset's PASS and SOFT) and for the region cases: ``before``, ``after``,
``delta``, ``ci95`` (a paired bootstrap 95% interval of the delta) and each
side's own interval (``ci95_before``, ``ci95_after``). The bootstrap resamples *scenes* (all items of a scene move
together, both runs with the same draw), stratified by subset so every resample
keeps the subset sizes that ROSE's per-subset averaging assumes; figures are
recomputed exactly as the summary does (per subset, then over subsets).
Templates also get an exact McNemar p-value on their discordant pairs.
Every ``ci95`` (and ``ci95_before``/``ci95_after``) is a two-entry list, so
readers can index it; both entries are None where the figure is undefined
(e.g. action_avg of runs without action templates). Items whose request
failed in either run are left out of the pairs and counted in
``errored_excluded``; runs scored on different data are refused.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rosetrain.core.errors import RosetrainError
from rosetrain.core.formats import ci, pct
from rosetrain.core.io import atomic_write, output_lock, remove_atomic_temps
from rosetrain.core.jsonio import json_text
from rosetrain.core.protocol import (
    ACTION_TEMPLATES,
    GLOBAL,
    REGION_CASES,
    SHORT_NAME,
)
from rosetrain.data.release import same_fingerprint, short_fingerprint
from rosetrain.reports.compare_analyses import analyses_markdown, compare_analyses
from rosetrain.reports.html import markdown_to_html
from rosetrain.reports.paired import (
    Column,
    SceneTable,
    bootstrap,
    drop_errored,
    figure_row,
    observed,
    pair_runs,
    paired_entry,
    with_interval,
)
from rosetrain.scoring.files import SUMMARY_FILE, read_scored_rows
from rosetrain.scoring.gold import normalize_region_case
from rosetrain.scoring.metrics import headline, mean, subset_macro, template_order

HEADLINE_KEYS = ("counting_avg", "action_avg", "avg_pass", "gap")


def run_fingerprint(run: str | os.PathLike) -> str | None:
    """The data fingerprint a scored run records in its evaluation_summary.json
    (beside per_item_eval.jsonl); None for runs scored by an older rosetrain."""
    fingerprint = _summary_of(run).get("data_fingerprint")
    # "" or blanks name no data either: unknown, not a match for anything
    return fingerprint if isinstance(fingerprint, str) and fingerprint.strip() else None


def _summary_of(run: str | os.PathLike) -> dict[str, Any]:
    """The run's evaluation_summary.json, {} where it has none."""
    path = Path(run)
    summary = (path if path.is_dir() else path.parent) / SUMMARY_FILE
    if not summary.is_file():
        return {}
    try:
        found = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = None
    if not isinstance(found, dict):
        raise RosetrainError(f"{summary}: not a readable evaluation summary")
    return found


def run_record(run: str | os.PathLike) -> dict[str, Any]:
    """What a scored run says of itself: its model, its data (as given, the Hub
    repo and commit) and, for an eval run, the settings that change answers."""
    from rosetrain.evaluation.evaluate import ANSWER_SETTINGS, RUN_FILE

    path = Path(run)
    folder = path if path.is_dir() else path.parent
    record: dict[str, Any] = {"model": None, "data": None, "settings": {}}
    for name, keep in ((SUMMARY_FILE, ("model", "data")), (RUN_FILE, ANSWER_SETTINGS)):
        try:
            found = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not there (a run scored by another tool): said as unknown
        if isinstance(found, dict):
            for key in keep:
                if name == RUN_FILE:
                    record["settings"][key] = found.get(key)
                else:
                    record[key] = found.get(key)
            if name == RUN_FILE and record["data"] is None and found.get("data"):
                # a summary written before it named its data: the eval run's own record
                record["data"] = {
                    "data": found["data"],
                    "repo_id": found.get("dataset_repo_id"),
                    "revision": found.get("dataset_revision"),
                }
    return record


def settings_differ(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The answer-changing settings two eval runs were made with differently
    (only where both runs record them)."""
    a, b = before["settings"], after["settings"]
    return {key: [a[key], b[key]] for key in a.keys() & b.keys() if a[key] != b[key]}


def same_data(before_run: str | os.PathLike, after_run: str | os.PathLike) -> str | None:
    """The fingerprint of the data both runs were scored on; runs of different data
    are an error naming both (item ids repeat across datasets, so ids alone cannot tell)."""
    before, after = run_fingerprint(before_run), run_fingerprint(after_run)
    if before and after and not same_fingerprint(before, after):
        raise RosetrainError(
            f"the runs were scored on different data: {before_run} on data "
            f"{short_fingerprint(before)}, {after_run} on data {short_fingerprint(after)}; "
            "compare runs of the same split"
        )
    return before or after


def check_fingerprints_known(
    before_run: str | os.PathLike, after_run: str | os.PathLike, assume_same_data: bool
) -> list[str]:
    """A run whose summary names no data (an older rosetrain, another tool) cannot be
    shown to hold the other run's data: refused unless the user says it does.
    Returns those runs (compared on the user's word: the report says so first)."""
    unknown = [str(run) for run in (before_run, after_run) if run_fingerprint(run) is None]
    if unknown and not assume_same_data:
        raise RosetrainError(
            f"{' and '.join(unknown)}: its {SUMMARY_FILE} names no data fingerprint, so rosetrain "
            f"cannot check that both runs were scored on the same data (item ids repeat across "
            f"datasets); rescore it with rosetrain score, or set assume_same_data if you know they were",
            argument="assume_same_data",
        )
    return unknown


def figures(rows: Sequence[Mapping]) -> dict[str, Any]:
    """Template PASS rates and the headline figures, as evaluation_summary computes them."""
    per_template = defaultdict(list)
    for row in rows:
        per_template[row["task_template"]].append(row)
    table = {t: {"pass": subset_macro(per_template[t], "pass")} for t in template_order(per_template)}
    return {"templates": {t: v["pass"] for t, v in table.items()}, **headline(table)}


def _pass_of(template: str) -> Callable[[Mapping], float | None]:
    return lambda row: row["pass"] if row["task_template"] == template else None


def _field(name: str) -> Callable[[Mapping], float | None]:
    return lambda row: row.get(name)


def _field_of_subset(field: str, subset: str) -> Callable[[Mapping], float | None]:
    return lambda row: row.get(field) if row["rose_subset"] == subset else None


def _case_of(case: str) -> Callable[[Mapping], float | None]:
    def value(row: Mapping) -> float | None:  # every local task, as region_case_breakdown counts them
        local = row["region_type"] != GLOBAL and normalize_region_case(row["region_case"]) == case
        return row["pass"] if local else None

    return value


# The official files' other figures (Table 1 and 2 beside the templates' PASS):
# each a mean over the rows where the field is set, per subset, then over subsets
FIGURE_COLUMNS = (
    Column("soft", "Avg. SOFT", _field("unified_soft")),
    Column("valid", "VALID", _field("format_valid")),
    Column("click_f1", "C-F1 (click F1, strict)", _field("click_f1_strict")),
    Column("region_ok", "R-OK (clicks inside the region)", _field("region_ok")),
)


def columns_of(pairs: Sequence[tuple[Mapping, Mapping]]) -> list[Column]:
    """Every figure compared: each template's PASS, the official files' other
    figures, PASS and SOFT of each subset (Table 1), and the local tasks' PASS
    by region case (plain means, as the breakdown reports them)."""
    templates = template_order(b["task_template"] for b, _ in pairs)
    columns = [Column(t, SHORT_NAME.get(t, t), _pass_of(t)) for t in templates]
    columns += FIGURE_COLUMNS
    for subset in sorted({b["rose_subset"] for b, _ in pairs}):
        for field, label in (("pass", "PASS"), ("unified_soft", "SOFT")):
            columns.append(Column(f"{subset}:{field}", f"{subset} {label}", _field_of_subset(field, subset)))
    columns += [Column(f"case:{case}", case, _case_of(case), macro=False) for case in REGION_CASES]
    return columns


def mcnemar_p(pairs: Sequence[tuple[Mapping, Mapping]]) -> tuple[float, int, int]:
    """Exact McNemar p-value (two-sided binomial test on the discordant pairs)."""
    only_before = sum(1 for b, a in pairs if b["pass"] and not a["pass"])
    only_after = sum(1 for b, a in pairs if a["pass"] and not b["pass"])
    if only_before + only_after == 0:
        return 1.0, 0, 0
    from scipy.stats import binomtest

    p = binomtest(only_after, only_before + only_after, 0.5).pvalue
    return float(p), only_before, only_after


def region_case_breakdown(pairs: Sequence[tuple[Mapping, Mapping]]) -> dict[str, Any]:
    """Plain PASS means of the local tasks by zero/partial/all, per action template too."""
    result = {}
    for case in REGION_CASES:
        kept = [
            (b, a)
            for b, a in pairs
            if b["region_type"] != GLOBAL and normalize_region_case(b["region_case"]) == case
        ]
        per_template = {}
        for template in ACTION_TEMPLATES:
            rows = [(b, a) for b, a in kept if b["task_template"] == template]
            if rows:
                per_template[template] = _plain(rows)
        result[case] = {**_plain(kept), "templates": per_template}
    return result


def _plain(pairs: Sequence[tuple[Mapping, Mapping]]) -> dict[str, Any]:
    before = mean(b["pass"] for b, _ in pairs)
    after = mean(a["pass"] for _, a in pairs)
    delta = None if before is None or after is None else after - before
    return {"n": len(pairs), "before": before, "after": after, "delta": delta}


def compare_pairs(
    pairs: Sequence[tuple[Mapping, Mapping]], resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """compare.json's figures (without paths) from paired rows."""
    if not pairs:
        raise RosetrainError("nothing to compare: the runs hold no items")
    before = figures([b for b, _ in pairs])
    after = figures([a for _, a in pairs])
    # one table of every figure's per-scene sums: resampled, and read as it is
    table = SceneTable(pairs, columns_of(pairs))
    samples = bootstrap(table, list(before["templates"]), resamples, seed)
    templates = {}
    for template, value in before["templates"].items():
        subset = [(b, a) for b, a in pairs if b["task_template"] == template]
        p, only_before, only_after = mcnemar_p(subset)
        templates[template] = {
            "short": SHORT_NAME.get(template, template),
            "n": len(subset),
            **paired_entry(value, after["templates"][template], samples[template]),
            "mcnemar_p": p,
            "pass_only_before": only_before,
            "pass_only_after": only_after,
        }
    result = {
        "n_items": len(pairs),
        "n_scenes": len({b["scene_id"] for b, _ in pairs}),
        "resamples": resamples,
        "seed": seed,
        "templates": templates,
    }
    for key in HEADLINE_KEYS:
        result[key] = paired_entry(before[key], after[key], samples[key])
    columns = [c for c in table.columns if c.name not in templates]
    values = observed(table)
    result["figures"] = {
        c.name: {
            "label": c.label,
            **paired_entry(values[c.name]["before"], values[c.name]["after"], samples[c.name]),
        }
        for c in columns
        if not c.name.startswith("case:")
    }
    cases = region_case_breakdown(pairs)
    result["by_region_case"] = cases
    for case, entry in cases.items():
        interval = paired_entry(entry["before"], entry["after"], samples[f"case:{case}"])
        entry.update({key: interval[key] for key in ("ci95", "ci95_before", "ci95_after")})
    return result


def compare_runs(
    before_dir: str | os.PathLike,
    after_dir: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    *,
    resamples: int = 2000,
    seed: int = 0,
    plots: bool = True,
    assume_same_data: bool = False,
) -> dict[str, Any]:
    """Pair two scored runs; write compare.json, report.md, report.html (the same, plots
    inline, for a browser) and PNG plots into ``out_dir``. Runs whose summaries name
    no data fingerprint are refused unless ``assume_same_data``."""
    if resamples < 1:
        raise RosetrainError(f"resamples must be at least 1, got {resamples}")
    fingerprint = same_data(before_dir, after_dir)
    paired = pair_runs(read_scored_rows(before_dir), read_scored_rows(after_dir))
    unchecked = check_fingerprints_known(before_dir, after_dir, assume_same_data)
    pairs, excluded = drop_errored(paired)
    if not pairs and excluded["pairs"]:
        raise RosetrainError(
            f"nothing to compare: every one of the {excluded['pairs']} items "
            "errored (no answer) in at least one run; rerun eval to retry them"
        )
    before, after = run_record(before_dir), run_record(after_dir)
    result = {
        "before_run": str(before_dir),
        "after_run": str(after_dir),
        "before_model": before["model"],
        "after_model": after["model"],
        "data": before["data"] or after["data"],
        "settings_differ": settings_differ(before, after),  # e.g. max_new_tokens 48 against 64
        "data_fingerprint": fingerprint,
        "data_unchecked": unchecked,  # runs naming no data, compared on the user's word
        "errored_excluded": excluded,
        **compare_pairs(pairs, resamples, seed),
    }
    summaries = (_summary_of(before_dir), _summary_of(after_dir))
    result.update(compare_analyses(before_dir, after_dir, pairs, summaries, resamples, seed))
    if out_dir is not None:
        with output_lock(out_dir, "this comparison") as out:
            remove_atomic_temps(out)  # half-written files of a killed run
            atomic_write(out / "compare.json", json_text(result))
            images = write_plots(result, out) if plots else []
            markdown = report_markdown(result, images)
            atomic_write(out / "report.md", markdown)
            atomic_write(out / "report.html", markdown_to_html(markdown, out, "Before/after comparison"))
    return result


def _errored_note(result: Mapping[str, Any]) -> str:
    excluded = result.get("errored_excluded") or {}
    if not excluded.get("pairs"):
        return ""
    return (
        f"**{excluded['pairs']} items left out** because their request failed (errored: "
        f"{excluded['before']} before, {excluded['after']} after); they are not wrong "
        "answers.\n"
    )


HEADLINE_LABELS = {
    "counting_avg": "Counting (mean PASS of the counting templates)",
    "action_avg": "Action (mean PASS of the action templates)",
    "avg_pass": "Avg. PASS (the five templates)",
    "gap": "Gap (Counting - Action)",
}


def before_after_rows(result: Mapping[str, Any]) -> list[str]:
    """The comparison as a Markdown table: each template, the headline figures,
    then every other figure of the official files, each side with its 95% CI."""
    lines = [
        "| figure | before [95% CI] | after [95% CI] | delta [paired 95% CI] | McNemar p |",
        "|---|---|---|---|---|",
    ]
    for template, e in result["templates"].items():
        lines.append(figure_row(f"{e['short']} ({template})", e, f"{e['mcnemar_p']:.3g}"))
    for key in HEADLINE_KEYS:
        lines.append(figure_row(f"**{HEADLINE_LABELS[key]}**", result[key]))
    for e in result.get("figures", {}).values():
        lines.append(figure_row(e["label"], e))
    return lines


def region_case_rows(result: Mapping[str, Any]) -> list[str]:
    """Local action PASS by region case (zero / partial / all) as a Markdown table."""
    lines = [
        "| case | n | before [95% CI] | after [95% CI] | delta [paired 95% CI] |",
        "|---|---|---|---|---|",
    ]
    for case, e in result["by_region_case"].items():
        lines.append(
            f"| {case} | {e['n']} | {with_interval(e['before'], e.get('ci95_before', (None, None)))} | "
            f"{with_interval(e['after'], e.get('ci95_after', (None, None)))} | "
            f"{with_interval(e['delta'], e.get('ci95', (None, None)), True)} |"
        )
    return lines


def settings_note(result: Mapping[str, Any]) -> str:
    """The first thing said of runs made with other answer-changing settings."""
    said = "; ".join(
        f"{key} {a} before, {b} after" for key, (a, b) in sorted(result["settings_differ"].items())
    )
    return (
        f"The runs were made with different settings ({said}): a difference may come from them, not the model"
    )


def provenance_line(result: Mapping[str, Any]) -> str:
    """Which models, on which data: the Hub repo and commit, or the folder as given."""
    data = result.get("data") or {}
    where = (
        f"{data['repo_id']} at commit {data.get('revision') or '?'}"
        if data.get("repo_id")
        else (data.get("data") or "a folder not recorded")
    )
    before, after = result.get("before_model") or "?", result.get("after_model") or "?"
    return f"models: before `{before}`, after `{after}`; data: `{where}`"


def data_unchecked_note(result: Mapping[str, Any]) -> str:
    """The first thing said of a comparison whose data could not be checked."""
    runs = " and ".join(result["data_unchecked"])
    return (
        f"Data not checked: {runs} names no data fingerprint; compared because you said "
        "both runs were scored on the same data (--same-data)"
    )


def report_markdown(result: Mapping[str, Any], images: Sequence[str] = ()) -> str:
    """report.md: the figures in percentage points, then the plots."""
    lines = [
        "# Before/after comparison\n",
        *([f"**{data_unchecked_note(result)}**\n"] if result.get("data_unchecked") else []),
        *([f"**{settings_note(result)}**\n"] if result.get("settings_differ") else []),
        f"{provenance_line(result)}\n",
        f"before: `{result['before_run']}`  \nafter: `{result['after_run']}`  \n"
        f"{result['n_items']} paired items over {result['n_scenes']} scenes; 95% CIs from "
        f"{result['resamples']} paired scene-bootstrap resamples (seed {result['seed']}); "
        f"data `{short_fingerprint(result['data_fingerprint']) if result.get('data_fingerprint') else 'not recorded'}`"
        " (in full in compare.json).\n",
        _errored_note(result),
        *before_after_rows(result),
        "",
        "## Local tasks by region case (PASS, plain means over items)",
        "",
        *region_case_rows(result),
        *analyses_markdown(result),
    ]
    lines.append("")
    lines += [f"![{Path(name).stem}]({name})\n" for name in images]
    return "\n".join(lines) + "\n"


def write_plots(result: Mapping[str, Any], out_dir: str | os.PathLike) -> list[str]:
    """PNG plots (matplotlib Agg, imported here only): PASS per template, the gap with
    its CIs, and the zero/partial/all breakdown. Returns the file names written."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(fig, name):
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
        plt.close(fig)
        atomic_write(Path(out_dir) / name, buffer.getvalue())
        return name

    def error_bars(entries, run):
        """Each side's own 95% interval, as bar errors below and above its value."""
        out = []
        for e in entries:
            value, interval = e[run], e.get(f"ci95_{run}", (None, None))
            out.append(
                (0.0, 0.0)
                if value is None or interval[0] is None
                else (max(0.0, value - interval[0]), max(0.0, interval[1] - value))
            )
        return out

    def bars(ax, labels, entries):
        x = np.arange(len(labels))
        for k, run in enumerate(("before", "after")):
            heights = [100 * (e[run] or 0.0) for e in entries]
            yerr = np.array(error_bars(entries, run)).T * 100
            # the legend names each run's folder: "before" alone does not say which model
            folder = result.get(f"{run}_run")
            label = f"{run}: {Path(folder).name}" if folder else run
            ax.bar(x + (k - 0.5) * 0.38, heights, 0.38, label=label, yerr=yerr, capsize=3)
        ax.set_xticks(x, labels)
        ax.axhline(0, color="black", linewidth=0.6)
        # beside the axes, never over the bars
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)

    names = []
    templates = result["templates"]
    fig, ax = plt.subplots(figsize=(2.6 + 1.1 * len(templates), 3.6))
    bars(ax, [e["short"] for e in templates.values()], list(templates.values()))
    ax.set_ylabel("PASS (%), 95% CI")
    ax.set_ylim(0, 105)
    ax.set_title("PASS per template")
    names.append(save(fig, "pass_per_template.png"))

    keys = [k for k in ("counting_avg", "action_avg", "gap") if result[k]["before"] is not None]
    if keys:
        fig, ax = plt.subplots(figsize=(6.6, 3.6))
        labels = {"counting_avg": "Counting", "action_avg": "Action", "gap": "Gap"}
        bars(ax, [labels[k] for k in keys], [result[k] for k in keys])
        gap = result["gap"]
        ax.set_ylabel("percentage points, 95% CI")
        ax.set_title(
            f"Counting-to-action gap: {pct(gap['before'])} -> {pct(gap['after'])} "
            f"(delta {pct(gap['delta'], True)}, CI {ci(gap['ci95'])})",
            fontsize=9,
        )
        names.append(save(fig, "gap.png"))

    cases = result["by_region_case"]
    fig, ax = plt.subplots(figsize=(6.6, 3.6))
    bars(ax, [f"{c}\n(n={cases[c]['n']})" for c in cases], [cases[c] for c in cases])
    ax.set_ylabel("PASS (%), 95% CI")
    ax.set_ylim(0, 105)
    ax.set_title("Local tasks by region case")
    names.append(save(fig, "region_case.png"))
    return names
