"""A scene: a grid, one majority item, and the cells that show the exception.

A scene is pure data and a pure function of (spec, seed, index): item ``i``
of a spec never depends on items before it, so shards can be made anywhere,
in any order, by any number of processes, and agree byte for byte.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import math
import os
import random
from typing import Any

from rosetrain.core.protocol import Cell
from rosetrain.core.regions import grid_cells
from rosetrain.generators.spec import PROFILES, LevelSpec, Spec


def derived_seed(*parts: Any) -> int:
    """A 64-bit seed from any parts; stable across processes and Python runs
    (unlike ``hash``), and independent streams for different part tuples."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclasses.dataclass(frozen=True)
class Scene:
    scene_id: str
    index: int
    seed: int  # the scene's own seed (from spec namespace, seed, index)
    level: str
    family: str
    family_config: dict
    item: dict  # what the family draws: fully determines both cells
    rows: int
    cols: int
    cell_size: int
    profile: str
    targets: tuple[Cell, ...]  # exception cells, 1-based (row, col), row-major order

    @property
    def negative(self) -> bool:
        return not self.targets

    @property
    def fingerprint(self) -> str:
        """Identity of what a model sees, independent of ids, seeds and cell size:
        two scenes with equal fingerprints are the same training example."""
        content = json.dumps(
            [self.family, _portable(self.item), self.rows, self.cols, self.targets],
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(content.encode()).hexdigest()[:20]


def _portable(value: Any) -> Any:
    """Font files are named by their base name: the same scene on another
    machine (fonts elsewhere on disk) keeps its fingerprint."""
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_portable(v) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        return os.path.basename(value)
    return value


def weighted_choice(rng: random.Random, weights: dict[str, float]) -> str:
    names = sorted(weights)  # sorted: mapping order must not change the draw
    cumulative, total = [], 0.0
    for name in names:
        total += weights[name]
        cumulative.append(total)
    return names[min(bisect.bisect_right(cumulative, rng.random() * total), len(names) - 1)]


def choose_level(spec: Spec, index: int, rng: random.Random) -> LevelSpec:
    """Staged: the levels in order, ``scenes`` each. Mixture: the leading levels
    that set ``scenes`` (warm-up stages, e.g. cell addressing) in order, then a
    draw by weight among the others."""
    start = 0
    for level in spec.levels[:-1] if spec.curriculum == "staged" else spec.warmup_levels:
        assert level.scenes is not None  # Spec validation: staged and warm-up levels set it
        start += level.scenes
        if index < start:
            return level
    if spec.curriculum == "staged":
        return spec.levels[-1]
    mixed = spec.levels[len(spec.warmup_levels) :]
    name = weighted_choice(rng, {lv.name: lv.weight for lv in mixed})
    return next(lv for lv in mixed if lv.name == name)


def _cell_size(level: LevelSpec, rows: int, cols: int, rng: random.Random) -> int:
    low, high = level.cell_size
    size = rng.randint(low, high)
    if level.image_multiple:
        # Both sides (rows*cell, cols*cell) must be multiples of m: the cell must
        # be a multiple of m/gcd(m, rows) and of m/gcd(m, cols).
        m = level.image_multiple
        step = math.lcm(m // math.gcd(m, rows), m // math.gcd(m, cols))
        size = max(step, round(size / step) * step)
    return size


def sample_scene(spec: Spec, seed: int, index: int, split: str = "train") -> Scene:
    """Scene ``index`` of ``spec`` under ``seed``."""
    scene_seed = derived_seed(spec.namespace, seed, index)
    rng = random.Random(scene_seed)
    level = choose_level(spec, index, rng)
    family = weighted_choice(rng, {name: f.weight for name, f in level.families.items() if f.weight > 0})
    profile = weighted_choice(rng, {p: w for p, w in level.profiles.items() if w > 0})
    rows = rng.choice(range(*_bounds(level.rows or PROFILES[profile]["rows"])))
    cols = rng.choice(range(*_bounds(level.cols or PROFILES[profile]["cols"])))
    cell_size = _cell_size(level, rows, cols, rng)
    n_targets = 0 if rng.random() < level.negative_rate else rng.randint(*level.exceptions)
    n_targets = min(n_targets, rows * cols // 2)  # the majority must stay a majority
    flat = rng.sample(range(rows * cols), n_targets)
    cells = grid_cells(rows, cols)
    targets = tuple(sorted(cells[i] for i in flat))
    family_spec = level.families[family]
    from rosetrain.generators.families import get_family

    item = get_family(family, family_spec.config).sample_item(random.Random(derived_seed(scene_seed, "item")))
    return Scene(
        scene_id=f"{split}-{index:07d}",
        index=index,
        seed=scene_seed,
        level=level.name,
        family=family,
        family_config=dict(family_spec.config),
        item=item,
        rows=rows,
        cols=cols,
        cell_size=cell_size,
        profile=profile if not level.rows else "custom",
        targets=targets,
    )


def _bounds(pair: tuple[int, int]) -> tuple[int, int]:
    return pair[0], pair[1] + 1
