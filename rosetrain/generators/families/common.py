"""Helpers shared by the visual families: a per-item cell cache that also checks
the interface's promises, subtlety-driven choice from a ranked list, and small
numeric helpers. Nothing here knows about a particular family."""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from PIL import Image, ImageChops, ImageStat

from rosetrain.core.errors import RosetrainError

T = TypeVar("T")
Cells = tuple[Image.Image, Image.Image]
MIN_CELL_SIZE = 16
WHITE = (255, 255, 255)


def choices(value: Any, allowed: Sequence[str], field: str) -> tuple[str, ...]:
    """A config list of distinct names drawn from ``allowed`` (so never longer than
    it), or a ValueError naming ``field`` (the value cut: it may be huge)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{field} must be a non-empty list drawn from {list(allowed)}, got {value!r:.200}")
    unknown = next((v for v in value if v not in allowed), None)
    if unknown is not None:
        raise ValueError(f"{field}: {unknown!r:.100} is not one of {list(allowed)}")
    if len(set(value)) != len(value):
        twice = next(v for i, v in enumerate(value) if v in value[:i])
        raise ValueError(f"{field}: lists {twice!r} more than once")
    return tuple(value)


def lerp(a: float, b: float, t: float) -> float:
    return a + (b - a) * t


def item_key(item: dict[str, Any]) -> str:
    """A canonical string for an item: equal items give equal keys whatever the
    dict order (sort_keys), so caches and fingerprints never depend on it."""
    return json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def pick_by_subtlety(rng: random.Random, ranked: Sequence[T], subtlety: float, window: float = 0.3) -> T:
    """Choose from ``ranked`` (easiest first, most subtle last): a uniform pick in a
    window of ``window`` of the list centred at position ``subtlety``."""
    if not ranked:
        raise ValueError("nothing to choose from")
    last = len(ranked) - 1
    centre = subtlety * last
    half = max(1.0, window * len(ranked) / 2)
    lo, hi = max(0, round(centre - half)), min(last, round(centre + half))
    return ranked[rng.randint(lo, hi)]


def mean_abs_diff(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference of two same-sized images, in [0, 255]."""
    bands = ImageStat.Stat(ImageChops.difference(a, b)).mean
    return sum(bands) / len(bands)


def differ(a: Image.Image, b: Image.Image) -> bool:
    return ImageChops.difference(a, b).getbbox() is not None


def fit_square(image: Image.Image, side: int, background=WHITE) -> Image.Image:
    """Scale an RGBA image (kept square by the caller) to ``side`` and flatten it on
    ``background`` as RGB. LANCZOS is deterministic, so bytes repeat across runs."""
    scaled = image.resize((side, side), Image.Resampling.LANCZOS) if image.size != (side, side) else image
    flat = Image.new("RGBA", (side, side), background + (255,))
    flat.alpha_composite(scaled)
    return flat.convert("RGB")


class CellCache:
    """LRU cache of rendered cell pairs per (item, cell_size), shared by every
    scene that uses the same item. It validates what ``render`` returns, so each
    family keeps the interface's promises (size, mode, cells differ) in one place,
    and hands out copies so a caller drawing on a cell cannot corrupt the cache.
    Kept small: items rarely repeat across scenes (under 10% hits in the
    curriculum), and there is one cache per family config, each pair up to ~40 KB."""

    def __init__(self, family: str, render: Callable[[dict[str, Any], int], Cells], maxsize: int = 32):
        self.family, self.render, self.maxsize = family, render, maxsize
        self._cells: OrderedDict[tuple[str, int], Cells] = OrderedDict()

    def __call__(self, item: dict[str, Any], cell_size: int) -> Cells:
        if not isinstance(cell_size, int) or cell_size < MIN_CELL_SIZE:
            raise ValueError(f"cell_size must be an int >= {MIN_CELL_SIZE}, got {cell_size!r}")
        key = (item_key(item), cell_size)
        cells = self._cells.get(key)
        if cells is None:
            cells = self._checked(self.render(json.loads(key[0]), cell_size), key)
            self._cells[key] = cells
            if len(self._cells) > self.maxsize:
                self._cells.popitem(last=False)
        else:
            self._cells.move_to_end(key)
        return cells[0].copy(), cells[1].copy()

    def _checked(self, cells: Cells, key: tuple[str, int]) -> Cells:
        size = (key[1], key[1])
        for cell in cells:
            if cell.mode != "RGB" or cell.size != size:
                raise AssertionError(f"{self.family}: cell is {cell.mode} {cell.size}, want RGB {size}")
        if not differ(*cells):
            raise RosetrainError(
                f"family {self.family!r}: majority and exception cells are identical at "
                f"cell_size {key[1]} for item {key[0]}; use a larger cell_size or a lower subtlety"
            )
        return cells
