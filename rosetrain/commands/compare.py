"""``rosetrain compare BEFORE AFTER --out DIR``: pair two scored runs item by item.

Writes compare.json (before, after, delta, paired scene-bootstrap 95% CI, McNemar
p), report.md, report.html (the same with the plots inline, for a browser) and PNG
plots. BEFORE and AFTER are folders holding per_item_eval.jsonl (from `rosetrain
score` or `rosetrain eval`).
"""

from __future__ import annotations

import argparse

from rosetrain.commands import integer, path, seed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "before", type=path("folder"), help="scored run before training (holds per_item_eval.jsonl)"
    )
    parser.add_argument("after", type=path("folder"), help="scored run after training, over the same items")
    parser.add_argument(
        "--out",
        type=path("out-folder"),
        required=True,
        help="folder for compare.json, report.md, report.html, plots",
    )
    parser.add_argument(
        "--resamples",
        type=integer(1, 1_000_000),
        default=2000,
        help="paired bootstrap resamples of scenes (default 2000)",
    )
    parser.add_argument("--seed", type=seed(), default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--same-data",
        action="store_true",
        help="the runs were scored on the same data although a summary names no data fingerprint "
        "(an older rosetrain, another tool); without it such runs are refused",
    )


def run(args: argparse.Namespace) -> int:
    from rosetrain.reports.compare import (
        HEADLINE_KEYS,
        HEADLINE_LABELS,
        compare_runs,
        data_unchecked_note,
        provenance_line,
        settings_note,
    )
    from rosetrain.reports.compare_analyses import BRIDGE_TITLES

    result = compare_runs(
        args.before,
        args.after,
        args.out,
        resamples=args.resamples,
        seed=args.seed,
        plots=not args.no_plots,
        assume_same_data=args.same_data,
    )
    if result["data_unchecked"]:
        print(f"WARNING: {data_unchecked_note(result)}")
    if result["settings_differ"]:
        print(f"WARNING: {settings_note(result)}")
    print(f"compared {result['n_items']} items ({result['n_scenes']} scenes) -> {args.out}")
    print(f"  {provenance_line(result).replace('`', '')}")
    excluded = result["errored_excluded"]
    if excluded["pairs"]:
        print(
            f"  ERRORS: {excluded['pairs']} items left out, their request failed "
            f"({excluded['before']} in before, {excluded['after']} in after)"
        )
    rows = [(e["short"], e) for e in result["templates"].values()]
    rows += [(HEADLINE_LABELS[key].split(" (")[0], result[key]) for key in HEADLINE_KEYS]
    rows += [(e["label"].split(" (")[0], e) for e in result["figures"].values()]
    _print_rows(rows)
    sections = {BRIDGE_TITLES[name]: section for name, section in result.get("bridges", {}).items()}
    if result.get("scene_consistency"):
        sections["Same-scene consistency (the scenes whose T1 count passed)"] = result["scene_consistency"]
    for title, section in sections.items():
        print(f"  {title}:")
        _print_rows(list(section["figures"].items()), indent="    ")
    return 0


def _print_rows(rows, indent: str = "  ") -> None:
    from rosetrain.core.formats import ci, pct

    width = max([13, *(len(name) for name, _ in rows)])
    for name, e in rows:
        p = f"  McNemar p {e['mcnemar_p']:.3g}" if "mcnemar_p" in e else ""
        print(
            f"{indent}{name:{width}s} {pct(e['before']):>5s} -> {pct(e['after']):>5s}  "
            f"delta {pct(e['delta'], True):>6s}  CI {ci(e['ci95'])}{p}"
        )
