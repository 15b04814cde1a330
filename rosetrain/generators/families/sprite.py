"""sprite_edit and sprite_pair: procedural pixel-art sprites (unlimited supply).

A sprite is a left-right symmetric creature grown from random noise: a blob
silhouette, a dark outline, two fill colours and a few accent pixels, on a
white background, in a small palette. Items carry the pixel grids themselves
(rows of palette digits) so drawing needs nothing but the item.

sprite_edit (ROSE-PixelEdit): the exception is the same sprite with one local
edit, a compact patch of exactly ``edit_pixels`` pixels recoloured; subtlety
shrinks the patch from 14% of the sprite's square to a single pixel.
sprite_pair (ROSE-PixelContent): the exception is a sibling grown from the same
noise with part of it re-drawn: at subtlety 0 a new silhouette and colouring,
at subtlety 1 the same silhouette with a partly re-drawn colouring.
"""

from __future__ import annotations

import colorsys
import dataclasses
import math
import random
from typing import Any

from PIL import Image

from rosetrain.generators.families.base import FamilyConfig, VisualFamily
from rosetrain.generators.families.common import CellCache, lerp

BACKGROUND, OUTLINE, MAIN, SECOND, ACCENT = range(5)
SPRITE_SCALE = 0.88  # share of the cell the sprite may fill


@dataclasses.dataclass(frozen=True)
class SpriteConfig(FamilyConfig):
    """sizes: [smallest, largest] sprite side in pixels (before upscaling)."""

    sizes: tuple[int, int] = (8, 14)

    def __post_init__(self) -> None:
        super().__post_init__()
        sizes = tuple(self.sizes) if isinstance(self.sizes, (list, tuple)) else ()
        if (
            len(sizes) != 2
            or not all(isinstance(s, int) for s in sizes)
            or not 5 <= sizes[0] <= sizes[1] <= 32
        ):
            raise ValueError(
                f"sizes must be [smallest, largest] with 5 <= smallest <= largest <= 32, got {self.sizes!r}"
            )
        object.__setattr__(self, "sizes", sizes)


@dataclasses.dataclass
class Genome:
    """The noise a sprite grows from (left half including the centre column)."""

    size: int
    shape: list[list[float]]
    colour: list[list[float]]

    @classmethod
    def sampled(cls, rng: random.Random, size: int) -> Genome:  # not "random": it would hide the module
        half = (size + 1) // 2
        return cls(size, *([[rng.random() for _ in range(half)] for _ in range(size)] for _ in range(2)))

    def mutated(self, rng: random.Random, shape_share: float, colour_share: float) -> Genome:
        def redraw(noise: list[list[float]], share: float) -> list[list[float]]:
            return [[rng.random() if rng.random() < share else v for v in row] for row in noise]

        return Genome(self.size, redraw(self.shape, shape_share), redraw(self.colour, colour_share))

    def grid(self) -> list[str]:
        """Rows of palette digits: silhouette from the shape noise (likelier near
        the centre, then smoothed), outline on its border, fills from the colour noise."""
        n, half = self.size, (self.size + 1) // 2
        centre = (n - 1) / 2

        def alive_at(r: int, c: int) -> bool:
            distance = math.hypot((r - centre) / (n / 2), (half - 1 - c) / half)
            return self.shape[r][c] < 0.95 - 0.85 * distance

        left = [[alive_at(r, c) for c in range(half)] for r in range(n)]
        mask = [row + row[: n - half][::-1] for row in left]
        mask = _drop_specks(_smooth(mask))
        rows = []
        for r in range(n):
            row = ""
            for c in range(n):
                noise = self.colour[r][min(c, n - 1 - c)]
                if not mask[r][c]:
                    row += str(BACKGROUND)
                elif _on_border(mask, r, c):
                    row += str(OUTLINE)
                else:
                    row += str(ACCENT if noise > 0.9 else SECOND if noise > 0.58 else MAIN)
            rows.append(row)
        return rows


_SIDES = ((-1, 0), (1, 0), (0, -1), (0, 1))
_ALL_EIGHT = _SIDES + ((-1, -1), (-1, 1), (1, -1), (1, 1))


def _neighbours(mask: list[list[bool]], r: int, c: int, diagonal: bool = True) -> int:
    steps = _ALL_EIGHT if diagonal else _SIDES
    n = len(mask)
    return sum(1 for dr, dc in steps if 0 <= r + dr < n and 0 <= c + dc < n and mask[r + dr][c + dc])


def _smooth(mask: list[list[bool]]) -> list[list[bool]]:
    """One cellular-automaton step: fills pinholes, drops stray pixels; symmetric rule."""
    counts = [[_neighbours(mask, r, c) for c in range(len(row))] for r, row in enumerate(mask)]
    return [
        [count >= 5 or (alive and count >= 2) for alive, count in zip(row, row_counts)]
        for row, row_counts in zip(mask, counts)
    ]


def _drop_specks(mask: list[list[bool]], smallest: int = 4) -> list[list[bool]]:
    """Remove 8-connected pieces under ``smallest`` pixels (stray dots read as noise).
    Mirror twins have equal sizes, so the result stays symmetric."""
    n, seen = len(mask), set()
    keep = [[False] * n for _ in range(n)]
    for start in ((r, c) for r in range(n) for c in range(n) if mask[r][c]):
        if start in seen:
            continue
        piece, stack = [], [start]
        seen.add(start)
        while stack:
            r, c = stack.pop()
            piece.append((r, c))
            for nr in range(max(0, r - 1), min(n, r + 2)):
                for nc in range(max(0, c - 1), min(n, c + 2)):
                    if mask[nr][nc] and (nr, nc) not in seen:
                        seen.add((nr, nc))
                        stack.append((nr, nc))
        if len(piece) >= smallest:
            for r, c in piece:
                keep[r][c] = True
    return keep


def _on_border(mask: list[list[bool]], r: int, c: int) -> bool:
    n = len(mask)
    return r in (0, n - 1) or c in (0, n - 1) or _neighbours(mask, r, c, diagonal=False) < 4


def random_palette(rng: random.Random) -> list[str]:
    hue = rng.random()
    second = (hue + rng.choice((0.08, 0.5, 0.62, -0.1))) % 1.0
    hsv = [(0, 0, 1), (hue, 0.7, 0.22), (hue, 0.7, 0.85), (second, 0.6, 0.7), ((hue + 0.5) % 1, 0.25, 1.0)]
    return ["#{:02x}{:02x}{:02x}".format(*(round(255 * v) for v in colorsys.hsv_to_rgb(*c))) for c in hsv]


def draw_sprite(rows: list[str], palette: list[str], cell_size: int) -> Image.Image:
    """Upscale with NEAREST (crisp pixels) by the largest whole factor that fits;
    in small cells, where that would waste a third of the cell, stretch instead
    (every sprite pixel still covers at least one cell pixel)."""
    n = len(rows)
    colours = [tuple(int(p[i : i + 2], 16) for i in (1, 3, 5)) for p in palette]
    sprite = Image.new("RGB", (n, n))
    sprite.putdata([colours[int(ch)] for row in rows for ch in row])
    room = int(cell_size * SPRITE_SCALE)
    side = n * (room // n) if room // n >= 3 else max(n, room)
    sprite = sprite.resize((side, side), Image.Resampling.NEAREST)
    cell = Image.new("RGB", (cell_size, cell_size), colours[BACKGROUND])
    offset = (cell_size - side) // 2
    cell.paste(sprite, (offset, offset))
    return cell


def draw_sprite_cells(item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
    return draw_sprite(item["majority"], item["palette"], cell_size), draw_sprite(
        item["target"], item["palette"], cell_size
    )


def local_edit(rng: random.Random, rows: list[str], pixels: int) -> list[str]:
    """Recolour exactly ``pixels`` pixels (or all that can change) nearest to a
    random sprite pixel with one new palette colour: a compact, local patch."""
    grid = [list(row) for row in rows]
    n = len(grid)
    inked = [(r, c) for r in range(n) for c in range(n) if grid[r][c] != str(BACKGROUND)]
    r0, c0 = rng.choice(inked)
    new = str(rng.choice((BACKGROUND, OUTLINE, MAIN, SECOND, ACCENT)))
    order = sorted(((r - r0) ** 2 + (c - c0) ** 2, rng.random(), r, c) for r in range(n) for c in range(n))
    changed = 0
    for _, _, r, c in order:
        if changed == pixels:
            break
        if grid[r][c] != new:
            grid[r][c] = new
            changed += 1
    return ["".join(row) for row in grid]


class _SpriteFamily(VisualFamily):
    config_class = SpriteConfig
    config: SpriteConfig

    def __init__(self, config: SpriteConfig | None = None):
        super().__init__(config)
        self._draw = CellCache(self.name, draw_sprite_cells)

    def _base(self, rng: random.Random) -> tuple[int, random.Random, Genome, list[str], list[str]]:
        seed = rng.getrandbits(48)
        own = random.Random(seed)  # the sprite depends on its seed alone, so the seed names it
        size = own.randint(*self.config.sizes)
        while True:
            genome = Genome.sampled(own, size)
            rows = genome.grid()
            if sum(ch != str(BACKGROUND) for row in rows for ch in row) >= size * size // 5:
                return seed, own, genome, rows, random_palette(own)  # else too thin: grow another

    def draw_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        return self._draw(item, cell_size)

    def describe(self, item: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in item.items() if key not in ("majority", "target")}


class SpriteEditFamily(_SpriteFamily):
    name = "sprite_edit"
    primitive_type = "PIXEL_EDIT"
    rose_subset = "ROSE-PixelEdit"

    def sample_item(self, rng: random.Random) -> dict[str, Any]:
        seed, own, genome, rows, palette = self._base(rng)
        pixels = max(1, round(lerp(0.14 * len(rows) ** 2, 1, self.config.subtlety)))
        return {
            "pair_key": f"sprite-{seed:012x}",
            "palette": palette,
            "majority": rows,
            "target": local_edit(own, rows, pixels),
            "edit_pixels": pixels,
        }


class SpritePairFamily(_SpriteFamily):
    name = "sprite_pair"
    primitive_type = "PIXEL_CONTENT"
    rose_subset = "ROSE-PixelContent"

    def sample_item(self, rng: random.Random) -> dict[str, Any]:
        seed, own, genome, rows, palette = self._base(rng)
        s = self.config.subtlety
        shape_share, colour_share = lerp(0.6, 0.0, s), lerp(1.0, 0.3, s)
        for attempt in range(100):  # nothing changed (few inner pixels): redraw more colour, then shape
            colour = min(1.0, colour_share + 0.1 * attempt)
            shape = min(1.0, shape_share + 0.05 * max(0, attempt - 8))
            sibling = genome.mutated(own, shape, colour).grid()
            if sibling != rows:
                break
        else:
            raise AssertionError("sprite_pair: could not grow a distinct sibling")
        return {
            "pair_key": f"sprite-{seed:012x}__sibling",
            "palette": palette,
            "majority": rows,
            "target": sibling,
            "shape_redrawn": round(shape_share, 3),
            "colour_redrawn": round(colour_share, 3),
        }
