"""From a scored run and a generator spec to the next round's spec.

The five axes are weighted *independently* (one share table each, from the
marginal cells of ``cells.py``), not by their joint cells: the 2,224 rows of
the real ROSE v0.1 bridge files (tests/data/rose-v0.1) fall into 266 joint
cells of template x region case x family x profile x target count, median 6
items, 106 of them under 5: too few to set a weight by, while its marginal
cells hold 18 to 1,112 (the smallest: rare target counts). The spec format already holds one weight table per
axis within a level (tasks, region_cases, profiles), so those three are
written as tables; families and target counts have none (a level has one
family config list and an ``exceptions`` range), so they become levels: one
level per (family, target count), with weight share(family) x share(count),
``exceptions: [c, c]``, and the share of count 0 (negative scenes) as every
level's ``negative_rate``. No format extension was needed.

Each level copies the source spec's mixed level of its family (the first one
that has it), so everything the curriculum does not weight (cell sizes, cues,
prompt style, noise) stays as the source set it. Warm-up levels (those with
``scenes``) are not copied: a second round starts from a model that has had
them. Template weights are drawn without replacement when ``tasks_per_scene``
is set, which flattens the realised shares; the written weights are fitted
(computed exactly, not sampled) so that the realised item shares match the
chosen ones as closely as ``tasks_per_scene`` allows. A template appears at most
once a scene, so no share above ``1 / tasks_per_scene`` can be realised: such a
share is fitted at that bound, the rest spread over the others, and a note says
so (fitting the share itself drove the other weights to 0 and divided by them).

What the spec cannot teach is listed, never dropped silently: items of a
family the spec lacks (or a ROSE subset with no rosetrain family), templates
the generator does not make, region cases it does not know, target counts
outside the spec's ``exceptions`` range, grid profiles where the spec fixes
the grid size.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core import protocol as P
from rosetrain.core.errors import RosetrainError
from rosetrain.core.formats import pct
from rosetrain.curriculum.cells import AXES, Cell, Item, Run, cells, joint_cells
from rosetrain.curriculum.weights import Rule, axis_shares, bounded_shares
from rosetrain.generators.heldout import check_training_spec
from rosetrain.generators.spec import PROFILES, LevelSpec, Spec, spec_from_dict

MARKER = "# Written by `rosetrain curriculum`"
NEGATIVE = 0  # target count of a negative scene
REACH_MARGIN = 1e-4  # x 1/k: the highest template share fitted (1/k itself needs a weight of infinity)
LOG_WEIGHT_BOUND = 30.0  # fitted task weights lie within e^+-30 of each other
EXACT_DRAW_LIMIT = 20000  # sets of templates followed when computing realised shares


@dataclasses.dataclass
class Axis:
    """One axis: measured cells, the shares chosen, and what it cannot teach."""

    name: str
    cells: dict[Any, Cell]  # every value the spec may weight (unmeasured: n = 0)
    shares: dict[Any, float]
    source_shares: dict[Any, float]  # the source spec's, for the report
    untaught: dict[Any, tuple[Cell, str]] = dataclasses.field(default_factory=dict)
    expressible: bool = True  # False: the spec has no such weight (e.g. a fixed grid size)
    note: str = ""
    realised: dict[Any, float] | None = None  # templates: item shares the written weights give


@dataclasses.dataclass
class Plan:
    run: Run
    spec: Spec
    rule: Rule
    axes: dict[str, Axis]
    untaught_items: list[tuple[str, Item]]  # (reason, item): left out of every axis
    spec_dict: dict[str, Any]
    joint: dict[tuple, Cell]
    notes: list[str] = dataclasses.field(default_factory=list)


def mixed_levels(spec: Spec) -> list[LevelSpec]:
    if spec.curriculum == "staged":
        return [spec.levels[-1]]  # the level a staged curriculum stays on
    warm = set(id(level) for level in spec.warmup_levels)
    return [level for level in spec.levels if id(level) not in warm]


def shares_of(weights: Mapping[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items() if w > 0}


def family_levels(spec: Spec) -> dict[str, LevelSpec]:
    """Family -> the first mixed level drawing it."""
    out: dict[str, LevelSpec] = {}
    for level in mixed_levels(spec):
        for name, family in level.families.items():
            if family.weight > 0:
                out.setdefault(name, level)
    return out


def plan_curriculum(run: Run, spec: Spec, rule: Rule, out_path: str | os.PathLike) -> Plan:
    levels = family_levels(spec)
    base = mixed_levels(spec)[0]
    untaught_items: list[tuple[str, Item]] = []
    taught: list[Item] = []
    for item in run.items:
        if item.family is None:
            untaught_items.append((f"subset {item.subset}: no rosetrain family reproduces it", item))
        elif item.family not in levels:
            untaught_items.append((f"family {item.family}: not in the spec", item))
        elif item.template not in P.TEMPLATES:
            untaught_items.append((f"template {item.template}: the generator does not make it", item))
        else:
            taught.append(item)
    if not taught:
        raise RosetrainError(
            f"run {run.path}: none of its {len(run.items)} items can be taught by {spec.path} "
            f"(first: {untaught_items[0][0]})",
            argument="run",
        )
    axes = {
        "family": make_axis("family", taught, list(levels), _family_shares(spec, levels), rule),
        "template": make_axis(
            "template",
            taught,
            _ordered(set(shares_of(base.tasks)) | {i.template for i in taught}, P.SPEC_TEMPLATES),
            shares_of(base.tasks),
            rule,
        ),
        "region_case": make_axis(
            "region_case", taught, list(P.REGION_CASES), shares_of(base.region_cases), rule
        ),
        "profile": profile_axis(taught, base, rule),
        "target_count": count_axis(taught, base, rule),
    }
    weighted = AXES if rule.axes is None else rule.axes
    unknown = [a for a in weighted if a not in AXES]
    if unknown:
        raise RosetrainError(f"axes: unknown axis {unknown[0]!r}; valid: {', '.join(AXES)}", argument="axes")
    for name in AXES:
        axis = axes[name]
        if name not in weighted and axis.expressible:
            total = sum(axis.source_shares.get(v, 0.0) for v in axis.cells)
            axis.shares = {v: axis.source_shares.get(v, 0.0) / total for v in axis.cells}
            axis.note = "kept at the source spec's shares (not among the axes to weight)"
    notes: list[str] = []
    draws = base.tasks_per_scene
    if draws is not None and "template" not in weighted:
        template = axes["template"]
        task_weights = {t: base.tasks.get(t, 0.0) for t in template.shares}
        template.realised = realised_shares(task_weights, draws)
    elif draws is not None:
        task_weights, draws = fit_templates(axes["template"], draws, notes)
    else:
        template = axes["template"]
        template.expressible = False
        template.note = (
            "the spec sets no tasks_per_scene: every scene gets every template with a weight > 0, "
            "so template weights change nothing; set tasks_per_scene in the source spec to weight them"
        )
        task_weights = dict.fromkeys(template.shares, 1.0)
    spec_dict = write_spec_dict(spec, levels, axes, task_weights, draws, run, rule, out_path)
    mixed = mixed_levels(spec)
    if len(mixed) > 1:
        notes.append(
            f"the source spec mixes {len(mixed)} levels ({', '.join(lv.name for lv in mixed)}); each family's "
            f"first one ({', '.join(sorted({lv.name for lv in levels.values()}))}) is the template of its "
            "new levels: the others' grid sizes and settings are not copied"
        )
    if spec.warmup_levels:
        notes.append(f"warm-up levels not copied: {', '.join(lv.name for lv in spec.warmup_levels)}")
    return Plan(run, spec, rule, axes, untaught_items, spec_dict, joint_cells(taught), notes)


def _ordered(values: set, order: Sequence) -> list:
    return [v for v in order if v in values]


def _family_shares(spec: Spec, levels: Mapping[str, LevelSpec]) -> dict[str, float]:
    weights: dict[str, float] = {}
    mixed = mixed_levels(spec)
    for level in mixed:
        fams = shares_of({n: f.weight for n, f in level.families.items()})
        for name, share in fams.items():
            weights[name] = weights.get(name, 0.0) + level.weight * share
    return shares_of({name: weights.get(name, 0.0) for name in levels})


def make_axis(
    name: str, items: Sequence[Item], values: Sequence[Any], source: Mapping[Any, float], rule: Rule
) -> Axis:
    measured = cells(items, name)
    axis_cells = {value: measured.get(value, Cell()) for value in values}
    untaught = {
        value: (cell, f"not a {name} the spec can weight")
        for value, cell in measured.items()
        if value not in values
    }
    shares = axis_shares({v: (c.n, c.fails) for v, c in axis_cells.items()}, rule, source)
    return Axis(name, axis_cells, shares, dict(source), untaught)


def profile_axis(items: Sequence[Item], base: LevelSpec, rule: Rule) -> Axis:
    source = shares_of(base.profiles)
    if base.rows is not None and base.cols is not None:
        measured = cells(items, "profile")
        axis = Axis("profile", {}, {}, source, expressible=False)
        axis.note = (
            f"the spec fixes the grid ({base.rows[0]}-{base.rows[1]} rows, {base.cols[0]}-{base.cols[1]} "
            "cols): grid profiles are not an axis of it; its profiles are kept"
        )
        axis.untaught = {v: (c, "the spec fixes the grid size") for v, c in measured.items() if v in PROFILES}
        return axis
    values = _ordered(set(source) | {i.profile for i in items if i.profile in PROFILES}, tuple(PROFILES))
    axis = make_axis("profile", items, values, source, rule)
    for value, (cell, _) in axis.untaught.items():
        axis.untaught[value] = (cell, "not a grid profile of the generator (a grid size set by hand)")
    return axis


def count_axis(items: Sequence[Item], base: LevelSpec, rule: Rule) -> Axis:
    low, high = base.exceptions
    measured = cells(items, "target_count")
    values = list(range(max(low, 1), high + 1))
    if base.negative_rate > 0 or NEGATIVE in measured or low == 0:
        values = [NEGATIVE, *values]
    source = {c: 0.0 for c in values}
    positive = [c for c in values if c != NEGATIVE]
    for c in positive:  # exceptions are drawn uniformly from the range
        source[c] = (1 - base.negative_rate) / len(positive)
    if NEGATIVE in source:
        source[NEGATIVE] = base.negative_rate
    axis = make_axis("target_count", items, values, source, rule)
    for value, (cell, _) in axis.untaught.items():
        axis.untaught[value] = (cell, f"outside the spec's exceptions range [{low}, {high}]")
    return axis


# -- template weights drawn without replacement ---------------------------------


def fit_templates(axis: Axis, k: int, notes: list[str]) -> tuple[dict[str, float], int]:
    """The task weights and ``tasks_per_scene`` to write for the template shares
    chosen; sets ``axis.realised`` (the item shares they give) and notes what
    cannot be realised."""
    wanted = {t: s for t, s in axis.shares.items() if s > 0}
    if k >= len(axis.shares):
        axis.expressible = False
        axis.note = (
            f"tasks_per_scene {k} draws every template on every scene, so template weights change "
            "nothing; lower tasks_per_scene in the source spec to weight them"
        )
        weights = dict.fromkeys(axis.shares, 1.0)
        axis.realised = realised_shares(weights, k)
        return weights, k
    if len(wanted) < k:  # k distinct templates a scene cannot come from fewer: the loader refuses it
        notes.append(
            f"tasks_per_scene lowered from {k} to {len(wanted)}: only {len(wanted)} templates have a share"
        )
        k = len(wanted)
    target = reachable_shares(wanted, k)
    over = [t for t, s in wanted.items() if s > 1 / k + 1e-9]  # not those REACH_MARGIN trims
    if over:
        lost = ", ".join(f"{P.SHORT_NAME.get(t, t)} {pct(wanted[t])}% -> {pct(target[t])}%" for t in over)
        notes.append(
            f"a template appears at most once a scene, so with tasks_per_scene {k} no template share "
            f"can exceed {pct(1 / k)}%: {lost}, the rest spread over the others in proportion; "
            f"tasks_per_scene {max(1, math.floor(1 / max(wanted.values())))} in the source spec would reach it"
        )
    weights = fit_draw_weights(target, k)
    axis.realised = realised_shares(percent(weights), k)  # what the written, rounded weights give
    return weights, k


def reachable_shares(target: Mapping[str, float], k: int) -> dict[str, float]:
    """The item shares nearest ``target`` that ``k`` draws a scene without
    replacement can give: none above ``1 / k`` (a hair under: exactly 1/k needs the
    others' weights at 0), the excess spread over the others in proportion (as
    the rule's cap spreads it)."""
    return bounded_shares(target, 0.0, (1 - REACH_MARGIN) / k)


def realised_shares(weights: Mapping[str, float], k: int) -> dict[str, float]:
    """Item shares of each template when ``k`` are drawn per scene without
    replacement, each draw by weight (``rosetrain.generators.tasks``): exact, from
    the probability of each set of templates being the first drawn."""
    names = [n for n, w in weights.items() if w > 0]
    if not names:
        return {}
    if k >= len(names):
        return {n: 1 / len(names) for n in names}
    if 2 ** len(names) > EXACT_DRAW_LIMIT:
        raise RosetrainError(
            f"tasks_per_scene {k} of {len(names)} templates: too many draw orders to fit template weights"
        )
    w = [float(weights[n]) for n in names]
    total = sum(w)
    first = {0: 1.0}  # bit set of the templates drawn so far -> its probability
    for _ in range(k):
        after: dict[int, float] = {}
        for drawn, p in first.items():
            left = total - sum(w[i] for i in range(len(w)) if drawn >> i & 1)
            for i in range(len(w)):
                if not drawn >> i & 1:
                    after[drawn | 1 << i] = after.get(drawn | 1 << i, 0.0) + p * w[i] / left
        first = after
    return {n: sum(p for drawn, p in first.items() if drawn >> i & 1) / k for i, n in enumerate(names)}


def fit_draw_weights(target: Mapping[str, float], k: int) -> dict[str, float]:
    """Weights (summing to 1) whose realised item shares (``realised_shares``) come
    closest to ``target``, by least squares on the log weights (each within
    e^+-LOG_WEIGHT_BOUND of the first: none reaches 0). A target share at or above
    1/k cannot be realised; the old fixed-point steps drove the other weights to 0
    there and divided by them. Pass ``reachable_shares`` to fit what can be fitted."""
    import numpy as np
    from scipy.optimize import least_squares

    names = [n for n, s in target.items() if s > 0]
    if k >= len(names) or k == 1:  # every template a scene, or one draw: weights are shares
        total = sum(target[n] for n in names)
        return {n: target[n] / total for n in names}
    goal = np.array([target[n] for n in names], dtype=float)

    def weights_of(logs: np.ndarray) -> dict[str, float]:
        return dict(zip(names, np.exp(np.concatenate([[0.0], logs])).tolist()))

    def gap(logs: np.ndarray) -> np.ndarray:
        realised = realised_shares(weights_of(logs), k)
        return np.array([realised[n] for n in names]) - goal

    start = np.clip(np.log(goal[1:] / goal[0]), -LOG_WEIGHT_BOUND + 1, LOG_WEIGHT_BOUND - 1)
    bounds = (-LOG_WEIGHT_BOUND, LOG_WEIGHT_BOUND)
    fit = least_squares(gap, start, bounds=bounds, xtol=1e-12, ftol=1e-12, gtol=1e-12)
    weights = weights_of(fit.x)
    total = sum(weights.values())
    return {n: w / total for n, w in weights.items()}


# -- the spec ----------------------------------------------------------------------


def level_dict(level: LevelSpec) -> dict[str, Any]:
    """A level's fields as spec YAML holds them (every field written out)."""
    out: dict[str, Any] = {}
    for field in dataclasses.fields(LevelSpec):
        value = getattr(level, field.name)
        if field.name == "families":
            value = {n: {"weight": f.weight, **f.config} for n, f in value.items()}
        elif field.name == "cue":
            value = {"style": value.style, "color": list(value.color), "width": value.width}
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = dict(value)
        if value is not None:
            out[field.name] = value
    out.pop("scenes", None)
    return out


def percent(shares: Mapping[Any, float]) -> dict[Any, float]:
    """Shares as percentages to 4 significant digits: relative weights the loader
    reads as such (rounded probabilities would fail its sum-to-1 check), and a
    small share stays above 0 (rounded to 0.01, a fitted 0.004% would vanish)."""
    return {k: float(f"{100 * s:.4g}") for k, s in shares.items()}


def write_spec_dict(
    spec: Spec,
    levels: Mapping[str, LevelSpec],
    axes: Mapping[str, Axis],
    task_weights: Mapping[str, float],
    tasks_per_scene: int | None,
    run: Run,
    rule: Rule,
    out_path: str | os.PathLike,
) -> dict[str, Any]:
    counts = axes["target_count"].shares
    negative = counts.get(NEGATIVE, 0.0)
    positive = {c: s for c, s in counts.items() if c != NEGATIVE}
    positive_total = sum(positive.values())
    new_levels = []
    for family, family_share in axes["family"].shares.items():
        source = levels[family]
        for count, count_share in positive.items():
            level = level_dict(source)
            level["name"] = f"{family}-t{count}"
            level["weight"] = round(100 * family_share * count_share / positive_total, 4)
            level["families"] = {family: level["families"][family]}
            level["exceptions"] = [count, count]
            level["negative_rate"] = round(negative, 4)
            level["tasks"] = percent(task_weights)
            if tasks_per_scene is not None:  # the draws the task weights were fitted to
                level["tasks_per_scene"] = tasks_per_scene
            level["region_cases"] = percent(axes["region_case"].shares)
            if axes["profile"].expressible:
                level["profiles"] = percent(axes["profile"].shares)
            new_levels.append(level)
    top: dict[str, Any] = {
        "name": f"{spec.name}-curriculum",
        "role": "train",
        "namespace": f"{spec.namespace}-curriculum",  # new scenes, not the source's again
        "seed": spec.seed,
        "description": (
            f"from {run.path} by rosetrain curriculum ({rule.mode}, prior {rule.prior:g}, "
            f"floor {rule.floor:g}, cap {rule.cap:g}); source spec {spec.path}"
        ),
        "layout": spec.layout,
        "curriculum": "mixture",
    }
    if spec.heldout_spec:
        top["heldout_spec"] = str(spec.resolve(spec.heldout_spec))  # absolute: valid from any folder
        top["heldout_scenes"] = spec.heldout_scenes
    if spec.role == "heldout":
        raise RosetrainError(
            f"spec {spec.path}: a held-out spec is not a training spec to weight", argument="spec"
        )
    raw = {**top, "levels": new_levels}
    try:
        written = spec_from_dict(raw, Path(out_path))  # the loader that validates hand-written specs
    except (ValueError, TypeError) as err:
        raise RosetrainError(f"the curriculum spec for {out_path} does not validate: {err}") from None
    try:
        check_training_spec(written)  # what generate and the stream would refuse is refused here
    except RosetrainError as err:
        raise RosetrainError(
            f"the curriculum spec for {out_path} would show held-out data to the action tasks "
            f"({err}); weight fewer axes (the template axis alone keeps each level's tasks), "
            f"or add the band to the source level's hue_exclude",
            argument="axes",
        ) from None
    return raw


def spec_yaml(plan: Plan) -> str:
    import yaml

    header = [
        MARKER,
        f"# from the scored run {plan.run.path} and the spec {plan.spec.path}.",
        "# Weights follow the measured failures; the report beside this file shows the cells,",
        "# their confidence intervals and the weights chosen. Edit freely (then drop the first line).",
    ]

    class NoAliases(yaml.SafeDumper):  # a shared config list is written out in every level
        def ignore_aliases(self, data: Any) -> bool:
            return True

    body = yaml.dump(plan.spec_dict, Dumper=NoAliases, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(header) + "\n" + body


def check_out_path(out: Path) -> None:
    """Never overwrite a file rosetrain curriculum did not write."""
    if out.is_dir():
        raise RosetrainError(
            f"out {out}: is a folder; give the spec file to write (e.g. next.yaml)", argument="out"
        )
    if out.exists() and not out.is_file():  # reading a pipe's first line would wait for ever
        raise RosetrainError(
            f"out {out}: not a regular file (a device or a pipe); not overwritten", argument="out"
        )
    if out.exists():
        first = out.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        if first != MARKER:
            raise RosetrainError(
                f"out {out}: exists and was not written by rosetrain curriculum; not overwritten",
                argument="out",
            )


def untaught_summary(plan: Plan) -> list[dict[str, Any]]:
    """Everything measured that the spec cannot teach, grouped by reason."""
    groups: dict[str, Cell] = {}
    for reason, item in plan.untaught_items:
        cell = groups.get(reason, Cell())
        groups[reason] = Cell(cell.n + 1, cell.fails + (not item.passed))
    out = [{"axis": "item", "what": reason, "n": c.n, "fails": c.fails} for reason, c in groups.items()]
    for name in AXES:
        for value, (cell, reason) in plan.axes[name].untaught.items():
            out.append({"axis": name, "what": f"{value}: {reason}", "n": cell.n, "fails": cell.fails})
    return out
