"""attribute: procedural shapes whose exception differs in exactly one attribute.

The majority cells show a filled shape (circle, triangle, square, star, ...)
in one colour, size and orientation; the exception changes one of hue, size,
rotation or shape by an amount set by ``subtlety`` (hue 150 -> 10 degrees,
size ratio 0.55 -> 0.9, rotation up to half the shape's symmetry period -> 5
degrees, shape pairs ranked by how much their outlines differ). Needs no font.
Shapes are drawn at 4x and downsampled for clean, deterministic antialiasing.
"""

from __future__ import annotations

import colorsys
import dataclasses
import functools
import itertools
import math
import random
from typing import Any

from PIL import Image, ImageChops, ImageDraw, ImageOps, ImageStat

from rosetrain.core.errors import RosetrainError
from rosetrain.generators.families.base import FamilyConfig, VisualFamily
from rosetrain.generators.families.common import CellCache, choices, lerp, pick_by_subtlety

ATTRIBUTES = ("hue", "size", "rotation", "shape")
SUPERSAMPLE = 4
BASE_SIZE = 0.8  # circumscribed diameter of the larger shape, as a share of the cell


def _regular(sides: int, start: float = 0.0) -> list[tuple[float, float]]:
    return [
        (math.sin(start + 2 * math.pi * k / sides), -math.cos(start + 2 * math.pi * k / sides))
        for k in range(sides)
    ]


def _star(points: int, inner: float) -> list[tuple[float, float]]:
    return [(r * x, r * y) for k, (x, y) in enumerate(_regular(2 * points)) for r in ((1.0, inner)[k % 2],)]


def _heart() -> list[tuple[float, float]]:
    ts = [2 * math.pi * k / 64 for k in range(64)]
    pts = [
        (
            16 * math.sin(t) ** 3,
            -(13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t) - math.cos(4 * t)),
        )
        for t in ts
    ]
    return [(x / 17, (y + 2) / 17) for x, y in pts]


# name -> (unit outline with circumradius about 1, rotational symmetry period in degrees or None)
SHAPES: dict[str, tuple[list[tuple[float, float]], float | None]] = {
    "circle": (_regular(72), None),
    "triangle": (_regular(3), 120.0),
    "square": (_regular(4, math.pi / 4), 90.0),
    "pentagon": (_regular(5), 72.0),
    "hexagon": (_regular(6), 60.0),
    "octagon": (_regular(8, math.pi / 8), 45.0),
    "diamond": ([(0, -1), (0.6, 0), (0, 1), (-0.6, 0)], 180.0),
    "star": (_star(5, 0.45), 72.0),
    "star6": (_star(6, 0.55), 60.0),
    "cross": (
        [
            (-0.33, -1),
            (0.33, -1),
            (0.33, -0.33),
            (1, -0.33),
            (1, 0.33),
            (0.33, 0.33),
            (0.33, 1),
            (-0.33, 1),
            (-0.33, 0.33),
            (-1, 0.33),
            (-1, -0.33),
            (-0.33, -0.33),
        ],
        90.0,
    ),
    "arrow": (
        [(0, -1), (0.7, -0.2), (0.28, -0.2), (0.28, 1), (-0.28, 1), (-0.28, -0.2), (-0.7, -0.2)],
        360.0,
    ),
    "heart": (_heart(), 360.0),
}


@dataclasses.dataclass(frozen=True)
class AttributeConfig(FamilyConfig):
    """attributes: which attribute the exception may change (one per scene);
    shapes: the shapes scenes may use."""

    attributes: tuple[str, ...] = ATTRIBUTES
    shapes: tuple[str, ...] = tuple(SHAPES)
    hue_range: tuple[float, float] = (0.0, 360.0)  # the base colour's hue, degrees
    # False keeps the base look (hue in hue_range) on the majority, so an
    # exception is recognisable on its own, without comparing cells: what a
    # model trained from scratch in minutes can learn (the demo's base).
    swap_roles: bool = True
    # Hue bands, [low, high] degrees, that neither look may take (the majority's
    # nor the exception's): how a training spec keeps a held-out palette band
    # out of its data. A hue range alone cannot, since the exception's hue is
    # the majority's plus or minus the hue amount.
    hue_exclude: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        low, high = (float(v) for v in self.hue_range)
        if not 0 <= low <= high <= 360:
            raise ValueError(f"hue_range must be [low, high] within 0..360, got {self.hue_range!r}")
        object.__setattr__(self, "hue_range", (low, high))
        object.__setattr__(self, "hue_exclude", _hue_bands(self.hue_exclude))
        if self.hue_exclude and not allowed_hues(self.hue_range, self.hue_exclude):
            raise ValueError(
                f"hue_exclude {self.hue_exclude_list} leaves no hue of hue_range {list(self.hue_range)}"
            )
        if self.hue_exclude and "hue" in self.attributes and not _has_hue_pair(self):
            raise ValueError(
                f"hue_exclude {self.hue_exclude_list} leaves no majority hue in hue_range "
                f"whose exception hue (plus or minus {hue_amount(self.subtlety):g} degrees) is allowed"
            )
        if not isinstance(self.swap_roles, bool):
            raise ValueError(f"swap_roles must be true or false, got {self.swap_roles!r}")
        for field, allowed in (("attributes", ATTRIBUTES), ("shapes", tuple(SHAPES))):
            object.__setattr__(self, field, choices(getattr(self, field), allowed, field))
        if len(self.shapes) < 2 and "shape" in self.attributes:
            raise ValueError("shapes must list at least two shapes when attributes include 'shape'")
        if self.attributes == ("rotation",) and all(SHAPES[s][1] is None for s in self.shapes):
            raise ValueError("shapes must include a non-circular shape when attributes is ['rotation']")

    @property
    def hue_exclude_list(self) -> list[list[float]]:
        return [list(band) for band in self.hue_exclude]

    def hue_allowed(self, hue: float) -> bool:
        """Outside every excluded band, on the hue circle."""
        return not any(in_hue_band(hue, band) for band in self.hue_exclude)


def in_hue_band(hue: float, band: tuple[float, float]) -> bool:
    """Whether ``hue`` lies in ``band`` ([low, high] within 0..360) on the hue
    circle: hue 360 is hue 0, so a band that starts at 0 or ends at 360 holds both."""
    hue, (low, high) = float(hue) % 360.0, band
    return low <= hue <= high or (hue == 0.0 and high >= 360.0)


MAX_HUE_BANDS = 64  # a held-out palette is a band or a few; more is a mistake, and costs every draw
MAX_REDRAWS = 100_000  # hue draws before a spec is called too narrow to sample (never near it in practice)


def _hue_bands(value: Any) -> tuple[tuple[float, float], ...]:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"hue_exclude must be a list of [low, high] hue bands, got {value!r:.100}")
    if len(value) > MAX_HUE_BANDS:
        raise ValueError(f"hue_exclude: at most {MAX_HUE_BANDS} bands, got {len(value):,}")
    bands = []
    for band in value:
        if not (isinstance(band, (list, tuple)) and len(band) == 2 and all(number(v) for v in band)):
            raise ValueError(f"hue_exclude: each band must be [low, high] in degrees, got {band!r:.100}")
        low, high = float(band[0]), float(band[1])
        if not 0 <= low <= high <= 360:
            raise ValueError(f"hue_exclude: band {list(band)} must be [low, high] within 0..360")
        bands.append((low, high))
    return tuple(sorted(bands))


def allowed_hues(
    hue_range: tuple[float, float], exclude: tuple[tuple[float, float], ...]
) -> list[tuple[float, float]]:
    """The parts of ``hue_range`` outside every excluded band (open at the bands' edges);
    a range of one hue is itself its part when no band holds it."""
    if hue_range[0] == hue_range[1]:
        return [] if any(in_hue_band(hue_range[0], band) for band in exclude) else [hue_range]
    parts = [hue_range]
    for low, high in exclude:
        parts = [
            piece
            for start, end in parts
            for piece in ((start, min(end, low)), (max(start, high), end))
            if piece[1] > piece[0]
        ]
    return parts


def _redrawn(redraws: int, config: AttributeConfig) -> int:
    """One more redraw of a hue that fell in an excluded band; a spec whose allowed
    hues are slivers (gaps that round onto the bands' edges) is an error, not a hang."""
    if redraws >= MAX_REDRAWS:
        raise RosetrainError(
            f"hue_exclude {config.hue_exclude_list} leaves hue_range {list(config.hue_range)} too "
            f"little room: {MAX_REDRAWS:,} draws found no allowed hue pair; widen the gaps between bands"
        )
    return redraws + 1


def hue_amount(subtlety: float) -> float:
    """How far the exception's hue is from the majority's, in degrees."""
    return round(lerp(150, 10, subtlety), 2)


def _has_hue_pair(config: AttributeConfig) -> bool:
    """Whether some allowed majority hue has an allowed partner (checked on a
    0.1-degree grid: sampling rejects draws until it finds one)."""
    amount = hue_amount(config.subtlety)
    for start, end in allowed_hues(config.hue_range, config.hue_exclude):
        for step in range(int((end - start) * 10) + 1):
            hue = start + step / 10
            if config.hue_allowed(hue) and any(config.hue_allowed((hue + s * amount) % 360) for s in (-1, 1)):
                return True
    return False


def draw_shape(spec: dict[str, Any], cell_size: int) -> Image.Image:
    big = cell_size * max(2, min(SUPERSAMPLE, 256 // cell_size))  # big cells need less supersampling
    radius = spec["size"] * big / 2
    turn = math.radians(spec["rotation"])
    cos, sin = math.cos(turn), math.sin(turn)
    points = [
        (big / 2 + radius * (x * cos - y * sin), big / 2 + radius * (x * sin + y * cos))
        for x, y in SHAPES[spec["shape"]][0]
    ]
    colour = tuple(
        round(255 * v) for v in colorsys.hsv_to_rgb(spec["hue"] / 360, spec["saturation"], spec["value"])
    )
    canvas = Image.new("RGB", (big, big), (255, 255, 255))
    ImageDraw.Draw(canvas).polygon(points, fill=colour)
    return canvas.resize((cell_size, cell_size), Image.Resampling.BOX)


def draw_attribute_cells(item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
    return draw_shape(item["majority"], cell_size), draw_shape(item["target"], cell_size)


# Perceptual kinship for the shape attribute: shapes of one kind with close
# corner counts (hexagon/octagon) look alike; pure area overlap would call a
# triangle close to a six-pointed star.
SHAPE_KIND = {
    "circle": ("polygon", 16),
    "triangle": ("polygon", 3),
    "square": ("polygon", 4),
    "diamond": ("polygon", 4),
    "pentagon": ("polygon", 5),
    "hexagon": ("polygon", 6),
    "octagon": ("polygon", 8),
    "star": ("star", 5),
    "star6": ("star", 6),
    "cross": ("cross", 4),
    "arrow": ("arrow", 1),
    "heart": ("heart", 1),
}


@functools.lru_cache(maxsize=64)  # keyed by the config's shape list
def ranked_shape_pairs(shapes: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Shape pairs, most different first: another kind counts most, then the
    corner-count ratio, then how little their filled areas overlap (1 - IoU)."""

    def ink(shape: str) -> Image.Image:
        spec = {
            "shape": shape,
            "size": BASE_SIZE,
            "rotation": 0.0,
            "hue": 0.0,
            "saturation": 0.0,
            "value": 0.0,
        }
        return ImageOps.invert(draw_shape(spec, 48).convert("L"))

    def distance(a: str, b: str) -> float:
        (kind_a, corners_a), (kind_b, corners_b) = SHAPE_KIND[a], SHAPE_KIND[b]
        x, y = ink(a), ink(b)
        overlap = (
            1
            - ImageStat.Stat(ImageChops.darker(x, y)).sum[0] / ImageStat.Stat(ImageChops.lighter(x, y)).sum[0]
        )
        return (kind_a != kind_b) + abs(math.log(corners_a / corners_b)) / math.log(16) + overlap

    scored = sorted((-distance(a, b), a, b) for a, b in itertools.combinations(shapes, 2))
    return tuple((a, b) for _, a, b in scored)


class AttributeFamily(VisualFamily):
    name = "attribute"
    primitive_type = "ATTRIBUTE"
    config_class = AttributeConfig
    config: AttributeConfig

    def __init__(self, config: AttributeConfig | None = None):
        super().__init__(config)
        self._draw = CellCache(self.name, draw_attribute_cells)

    def sample_item(self, rng: random.Random) -> dict[str, Any]:
        s = self.config.subtlety
        attribute = rng.choice(self.config.attributes)
        rotatable = [shape for shape in self.config.shapes if SHAPES[shape][1] is not None]
        shape = rng.choice(rotatable if attribute == "rotation" else self.config.shapes)
        base: dict[str, Any] = {
            "shape": shape,
            "size": BASE_SIZE,
            "rotation": round(rng.uniform(-20, 20), 2),
            "hue": self._sample_hue(rng),
            "saturation": round(rng.uniform(0.55, 0.9), 3),
            "value": round(rng.uniform(0.6, 0.9), 3),
        }
        if SHAPES[shape][1] is None:
            base["rotation"] = 0.0
        other, sign = dict(base), rng.choice((-1, 1))
        amount: float | str  # how far the exception's attribute is from the majority's
        if attribute == "hue":
            amount = hue_amount(s)

            def partner(sign: int) -> float:
                return round((base["hue"] + sign * amount) % 360, 2)

            other["hue"] = partner(sign)
            redraws = 0
            while not self.config.hue_allowed(other["hue"]):  # only with hue_exclude
                redraws = _redrawn(redraws, self.config)
                if self.config.hue_allowed(partner(-sign)):
                    sign = -sign
                else:  # neither partner allowed: another majority hue
                    base["hue"] = self._sample_hue(rng)
                other["hue"] = partner(sign)
        elif attribute == "size":
            amount = round(lerp(0.55, 0.9, s), 3)
            other["size"] = round(BASE_SIZE * amount, 4)
        elif attribute == "rotation":
            period = SHAPES[shape][1]
            assert period is not None  # the shape was drawn from the rotatable ones
            amount = round(lerp(min(period / 2, 90), 5, s), 2)
            other["rotation"] = round(base["rotation"] + sign * amount, 2)
        else:
            pair = list(pick_by_subtlety(rng, ranked_shape_pairs(self.config.shapes), s))
            rng.shuffle(pair)
            amount = "__".join(sorted(pair))
            base["shape"], other["shape"] = pair
            base["rotation"] = other["rotation"] = 0.0
        looks = [base, other]
        if self.config.swap_roles:
            rng.shuffle(looks)  # the changed look may be the majority or the exception
        return {"attribute": attribute, "amount": amount, "majority": looks[0], "target": looks[1]}

    def _sample_hue(self, rng: random.Random) -> float:
        if not self.config.hue_exclude:
            return round(rng.uniform(*self.config.hue_range), 2)
        # uniform over the allowed parts of hue_range; a draw that rounds onto a band's edge is redrawn
        parts = allowed_hues(self.config.hue_range, self.config.hue_exclude)
        redraws = 0
        while True:
            redraws = _redrawn(redraws, self.config)
            x = rng.uniform(0, sum(end - start for start, end in parts))
            hue = parts[-1][1]  # x at the total's float edge
            for start, end in parts:
                if x <= end - start:
                    hue = round(start + x, 2)
                    break
                x -= end - start
            if self.config.hue_allowed(hue):
                return hue

    def draw_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        return self._draw(item, cell_size)

    def describe(self, item: dict[str, Any]) -> dict[str, Any]:
        majority, target = item["majority"], item["target"]
        return {
            "attribute": item["attribute"],
            "amount": item["amount"],
            "background_shape": majority["shape"],
            "target_shape": target["shape"],
            "pair_key": f"{item['attribute']}:{majority['shape']}__{target['shape']}",
            "background_spec": majority,
            "target_spec": target,
        }
