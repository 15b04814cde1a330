"""Derive the ROSE tasks of one scene: T1..T5, the bridges T1B, T2B and the
training-only counting twins T4C, T5C.

Tasks only know the grid and the set of exception cells. Each local task gets
a region drawn to land in a wanted ``region_case`` (zero, partial or all of
the scene's targets inside it); when the scene makes the wanted case
impossible (one target cannot be "partial"), the nearest possible case is
drawn instead and ``region_case_wanted`` records the wish.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from rosetrain.core import protocol as P
from rosetrain.core.regions import Box, cells_in_region, grid_cells, region_box
from rosetrain.generators.prompts import task_sentence
from rosetrain.generators.scene import Scene, derived_seed, weighted_choice
from rosetrain.generators.spec import LevelSpec

_TRIES = 48
_NEAREST = {"partial": ("all", "zero"), "all": ("partial", "zero"), "zero": ("partial", "all")}


@dataclasses.dataclass(frozen=True)
class Region:
    type: str
    params: dict

    def cells(self, rows: int, cols: int) -> set[P.Cell]:
        return cells_in_region(self.type, self.params, rows, cols)

    @property
    def box(self) -> Box:
        """Bounds only: the search below sizes and tests hundreds of regions a
        scene, and building each one's cell set cost more than drawing the scene."""
        return region_box(self.type, self.params)


def _case(inside: int, total: int) -> str:
    if inside == 0:
        return "zero"
    return "all" if inside == total else "partial"


def _rect_around(rng: random.Random, kind: str, rows: int, cols: int, anchor: list[P.Cell]) -> Region:
    """A random region of ``kind`` that contains every cell of ``anchor``."""

    def span(lo: int, hi: int, size: int) -> tuple[int, int]:
        reach = rng.randint(0, max(1, size // 3))
        return rng.randint(max(1, lo - reach), lo), rng.randint(hi, min(size, hi + reach))

    r1, r2 = span(min(r for r, _ in anchor), max(r for r, _ in anchor), rows)
    c1, c2 = span(min(c for _, c in anchor), max(c for _, c in anchor), cols)
    if kind == P.ROW_RANGE:
        return Region(kind, {"r1": r1, "r2": r2})
    if kind == P.COL_RANGE:
        return Region(kind, {"c1": c1, "c2": c2})
    return Region(kind, {"r1": r1, "r2": r2, "c1": c1, "c2": c2})


def sample_region(
    rng: random.Random,
    kind: str,
    scene: Scene,
    want: str,
    *,
    exclusion: bool = False,
    avoid: Region | None = None,
) -> tuple[Region, str]:
    """A local region of ``kind`` whose case is ``want`` when the scene allows it.

    With ``exclusion`` the region is EXCLUSION of a ``kind`` region and the case
    is judged on the cells outside it, the cells the task is about. When the
    wanted case is impossible (one target cannot be "partial"), the nearest
    possible case is searched for in turn (partial -> all -> zero)."""
    found: dict[str, Region] = {}
    for case in (want, *_NEAREST[want]):
        if case in found:
            return found[case], case
        hit = _search(rng, kind, scene, case, exclusion, avoid, found)
        if hit is not None:
            return hit
    # Targets span the grid: fall back to a one-cell-wide region.
    inner = _rect_around(
        random.Random(0), kind, scene.rows, scene.cols, [rng.choice(grid_cells(scene.rows, scene.cols))]
    )
    region = _task_region(Region(kind, inner.params | _single(inner.params)), exclusion)
    return region, _case_of(region, scene)


def _task_region(inner: Region, exclusion: bool) -> Region:
    """``inner`` itself, or with ``exclusion`` every cell outside it."""
    return (
        Region(P.EXCLUSION, {"exclude_type": inner.type, "exclude_params": inner.params})
        if exclusion
        else inner
    )


def _case_of(region: Region, scene: Scene) -> str:
    box = region.box  # targets lie on the grid, so the box's membership is the cell set's
    return _case(sum(1 for t in scene.targets if box.contains(t)), len(scene.targets))


def _search(
    rng: random.Random,
    kind: str,
    scene: Scene,
    want: str,
    exclusion: bool,
    avoid: Region | None,
    found: dict[str, Region],
) -> tuple[Region, str] | None:
    """Up to _TRIES regions grown around an anchor chosen for ``want``; the
    first of each other case met on the way is kept in ``found``."""
    rows, cols, targets = scene.rows, scene.cols, list(scene.targets)
    all_cells = grid_cells(scene.rows, scene.cols)
    target_set = set(targets)
    others = [cell for cell in all_cells if cell not in target_set]
    # The anchor decides the case: the region (or, for exclusion, the excluded
    # part) is grown around no target, one target, or all of them.
    inner_want = {"zero": "all", "all": "zero"}.get(want, want) if exclusion else want
    for _ in range(_TRIES):
        if inner_want == "all" and targets:
            anchor = targets
        elif inner_want == "partial" and targets:
            anchor = [rng.choice(targets)]
        else:
            anchor = [rng.choice(others or all_cells)]
        inner = _rect_around(rng, kind, rows, cols, anchor)
        if inner.box.size(rows, cols) == rows * cols:  # the whole grid is not a local region
            continue
        region = _task_region(inner, exclusion)
        if avoid is not None and region == avoid:
            continue
        case = _case_of(region, scene)
        if case == want or not targets and case == "zero":
            return region, case
        found.setdefault(case, region)
    return None


def _single(params: dict) -> dict:
    """Shrink bounds to their first row/column: never the whole grid."""
    out: dict[str, int] = {}
    if "r1" in params:
        out.update(r2=params["r1"])
    if "c1" in params:
        out.update(c2=params["c1"])
    return out


def _plan(
    scene: Scene, level: LevelSpec, rng: random.Random
) -> tuple[list[tuple[str, Region, str, str]], Region]:
    """(template, region, case, wanted case) for each task of the scene, and T4's
    region (the highlighted image's, drawn for T4 and ``cue_on``'s templates)."""

    def numeric(avoid=None, exclusion=False):
        want = weighted_choice(rng, level.region_cases)
        kind = weighted_choice(rng, level.region_types)
        region, case = sample_region(rng, kind, scene, want, exclusion=exclusion, avoid=avoid)
        return region, case, want

    whole = Region(P.GLOBAL, {})
    everything = "zero" if scene.negative else "all"
    t2 = numeric()
    t3 = numeric(avoid=t2[0])
    want4 = weighted_choice(rng, level.region_cases)
    t4_region, t4_case = sample_region(rng, P.RECTANGLE, scene, want4)
    t4 = Region(P.VISUAL_REGION, t4_region.params), t4_case, want4
    t5 = numeric(exclusion=True)
    plan = {
        P.T1: (whole, everything, everything),
        P.T1B: (whole, everything, everything),
        P.T2: t2,
        P.T3: t3,
        P.T2B: t3,
        P.T4: t4,
        P.T4C: t4,  # V-Clk's counting twin asks of the same highlighted image
        P.T5: t5,
        P.T5C: t5,  # Excl-CS's counting twin counts what it clicks: the same excluded cells
    }
    wanted = [t for t, w in level.tasks.items() if w > 0]
    if level.tasks_per_scene is not None:
        chosen: list[str] = []
        weights = {t: level.tasks[t] for t in wanted}
        while len(chosen) < level.tasks_per_scene:
            pick = weighted_choice(rng, weights)
            chosen.append(pick)
            del weights[pick]
        wanted = chosen
    return [(t, *plan[t]) for t in P.SPEC_TEMPLATES if t in wanted], t4[0]


def scene_tasks(scene: Scene, level: LevelSpec, split: str) -> list[dict[str, Any]]:
    """The records of a scene, in template order. Deterministic in the scene's seed."""
    rng = random.Random(derived_seed(scene.seed, "tasks"))
    targets = list(scene.targets)
    cue_image_id = f"{scene.scene_id}-cue"
    records = []
    tasks, highlighted = _plan(scene, level, rng)
    for template, region, case, want in tasks:
        mode = P.TASK_MODE[template]
        cells = region.cells(scene.rows, scene.cols)
        inside = [t for t in targets if t in cells]
        sentence = task_sentence(template, region.type, region.params, level.prompt_style, rng)
        visual = region.type == P.VISUAL_REGION  # T4, T4C
        on_cue = visual or template in level.cue_on
        image_id = cue_image_id if on_cue else scene.scene_id
        # a global question on the highlighted image (cue_on) says which region is drawn;
        # T4's own record holds it as its region, as in the release
        cue_fields = {"cue_region_params": highlighted.params} if on_cue and not visual else {}
        records.append(
            {
                "item_id": f"{scene.scene_id}-{template.split('_')[0]}",
                "scene_id": scene.scene_id,
                "image_id": image_id,
                "split": split,
                "task_template": template,
                "task_mode": mode,
                "region_type": region.type,
                "region_params": region.params,
                "region_case": case,
                "region_case_wanted": want,
                "cue_type": P.CUE_HIGHLIGHT if on_cue else P.NO_CUE,
                "prompt_global": P.PROMPT_PREFIX,
                "prompt_local": sentence,
                "prompt": P.PROMPT_PREFIX + "\n" + sentence,
                "expected_output_format": P.EXPECTED_FORMAT[mode],
                "ground_truth_count": len(inside),
                "ground_truth_clicks": [P.cell_str(c) for c in inside],
                "ground_truth_formal_answer": P.format_answer(mode, inside),
                "answer": P.format_answer(mode, inside),
                "all_target_cells": [P.cell_str(c) for c in targets],
                "region_target_cells": [P.cell_str(c) for c in inside],
                "target_cells": [list(c) for c in targets],
                "global_target_count": len(targets),
                "region_target_count": len(inside),
                "num_out_region_targets": len(targets) - len(inside),
                "region_cell_count": len(cells),
                "region_non_target_count": len(cells) - len(inside),
                "region_ratio": round(len(cells) / (scene.rows * scene.cols), 6),
                "bridge_task": template in P.BRIDGE_TEMPLATES,
                "source_item_id": f"{scene.scene_id}-T3" if template == P.T2B else None,
                **cue_fields,
            }
        )
    return records
