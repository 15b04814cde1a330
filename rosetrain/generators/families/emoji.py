"""emoji_content and emoji_style: emoji drawn with a colour emoji font.

emoji_content (ROSE-EmojiContent): two related but different emoji in one
style (🐣 against 🐤); pairs are ranked by how much their renderings differ and
``subtlety`` picks from the easy or the close end.
emoji_style (ROSE-EmojiStyle): one emoji in two renderings, the colour bitmap
against a derived style (hue shift, greyscale, posterized, pixelated, soft,
flat silhouette, outline, monochrome text glyph); ``subtlety`` sets how far
the derived style departs, and the drastic ones are only offered below 0.5.

Noto Color Emoji is a CBDT bitmap font: Pillow loads it only at size 109 and
draws it only on RGB/RGBA images with embedded_color=True, so every emoji is
drawn once at 109 on a fixed square canvas (same frame for all, so relative
sizes survive), cached, then scaled to the cell.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from typing import Any

from PIL import Image, ImageChops, ImageDraw, ImageFilter, ImageOps

from rosetrain.generators.families.base import FamilyConfig, VisualFamily, unavailable
from rosetrain.generators.families.common import (
    CellCache,
    choices,
    differ,
    fit_square,
    lerp,
    mean_abs_diff,
    pick_by_subtlety,
)
from rosetrain.generators.families.fonts import FontRef, has_glyph, load_font, resolve_font
from rosetrain.generators.families.rankings import cached_ranking

# Related emoji, one code point each; every pair inside a group is a candidate.
CONTENT_GROUPS = (
    "🐣🐤🐥",
    "😀😃😄😁",
    "🙂🙃😊",
    "😐😑😶",
    "😗😙😚",
    "😮😯😲",
    "😦😧",
    "😢😥😓",
    "😤😠😡",
    "😺😸😹",
    "😼😽",
    "🙀😿",
    "😪😴",
    "🤒🤕",
    "😷🤧",
    "🍎🍏🍅",
    "🍊🍋",
    "🍐🍏",
    "🌑🌒",
    "🌒🌓",
    "🌓🌔",
    "🌔🌕",
    "🌕🌖",
    "🌖🌗",
    "🌗🌘",
    "🌛🌜",
    "🌝🌚",
    "🕐🕑",
    "🕒🕓",
    "🕔🕕",
    "🐶🐕",
    "🐱🐈",
    "🐭🐹",
    "🐰🐇",
    "🐵🙈",
    "🙈🙉🙊",
    "🐮🐄",
    "🐷🐖",
    "🐻🐼🐨",
    "🐯🦁",
    "🐴🦄🦓",
    "🐔🐓",
    "🐧🐦",
    "🦆🦢",
    "🐠🐟🐡",
    "🐳🐋🐬",
    "🦐🦞🦀",
    "🐌🐛",
    "🌷🌹",
    "🌸🌼🌻",
    "🍁🍂",
    "🌲🌳",
    "🌴🌵",
    "🍇🫐",
    "🍒🍓",
    "🍑🥭",
    "🥒🥬",
    "🥐🥖",
    "🍔🥪",
    "🍕🥧",
    "🍩🍪",
    "🍰🎂",
    "🍦🍧🍨",
    "☕🍵",
    "🍺🍻",
    "🍷🍸",
    "🥂🍾",
    "⚽🏀🏐",
    "🏈🏉",
    "⚾🥎🎾",
    "🔴🟠",
    "🔵🟣",
    "🟥🟧",
    "🔶🔸",
    "🔷🔹",
    "📕📙",
    "📗📘",
    "📒📓",
    "🔒🔓",
    "🔈🔉🔊",
    "🔔🔕",
    "🚗🚙",
    "🚌🚎",
    "🚓🚔",
    "🚕🚖",
    "🚑🚒",
    "✋🤚",
    "👍👎",
    "👆👇",
    "👈👉",
    "✊👊",
    "👦👧",
    "👴👵",
    "💛🧡",
    "💚💙",
    "💜🖤",
    "💓💗💖",
    "💕💞",
    "📈📉",
    "⏪⏩",
    "⏫⏬",
    "🔼🔽",
    "🏠🏡",
    "🏢🏬",
    "🌋🗻",
    "💧💦",
    "⭐🌟",
    "🎃👻",
    "🎈🎉",
    "🎁📦",
)
STYLE_EMOJI = tuple(dict.fromkeys(itertools.chain.from_iterable(CONTENT_GROUPS)))
EMOJI_FIX = "install it (apt-get install fonts-noto-color-emoji) or set font: to another colour emoji font"
EMOJI_SCALE = 0.86  # share of the cell the emoji frame fills
CHECK_CELLS = (24, 64)  # two renderings must differ at the smallest and a typical cell

# Derived styles: name -> (strength parameter at subtlety 0, at subtlety 1, offered up to subtlety).
STYLES = {
    "hue": (180.0, 30.0, 1.0),  # hue rotation in degrees
    "gray": (1.0, 0.6, 1.0),  # share of colour removed
    "posterize": (1.0, 3.0, 1.0),  # bits kept per channel
    "pixelate": (12.0, 36.0, 1.0),  # blocks across the frame
    "soft": (6.0, 2.5, 1.0),  # blur radius at the 109 px render
    "flat": (0.0, 0.0, 0.5),  # one-colour silhouette
    "outline": (6.0, 3.0, 0.5),  # outline width at the 109 px render
    "text": (0.0, 0.0, 0.5),  # monochrome glyph from the text font
}


@dataclasses.dataclass(frozen=True)
class EmojiConfig(FamilyConfig):
    """font: a colour emoji font (name or path); render_size: the size it loads at
    (109 for the Noto Color Emoji bitmaps); text_font: the monochrome font of the
    'text' style; styles: the derived styles emoji_style may use."""

    font: str = "Noto Color Emoji"
    render_size: int = 109
    text_font: str = "DejaVu Sans"
    styles: tuple[str, ...] = tuple(STYLES)

    def __post_init__(self) -> None:
        super().__post_init__()
        for field in ("font", "text_font"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ValueError(f"{field} must be a font name or path, got {getattr(self, field)!r}")
        if not isinstance(self.render_size, int) or not 8 <= self.render_size <= 512:
            raise ValueError(f"render_size must be an int in [8, 512], got {self.render_size!r}")
        object.__setattr__(self, "styles", choices(self.styles, tuple(STYLES), "styles"))


class _EmojiFamily(VisualFamily):
    config_class = EmojiConfig
    config: EmojiConfig

    def __init__(self, config: EmojiConfig | None = None):
        super().__init__(config)
        self._draw = CellCache(self.name, self._render_cells)

    @functools.cached_property
    def font(self) -> FontRef:
        font = resolve_font(self.config.font)
        if font is None:
            raise unavailable(self.name, f"emoji font {self.config.font!r} is not installed", EMOJI_FIX)
        try:
            load_font(font.file, font.index, self.config.render_size)
        except OSError as error:  # a bitmap font refuses other sizes ("invalid pixel size")
            raise unavailable(
                self.name,
                f"font {self.config.font!r} does not load at render_size {self.config.render_size} ({error})",
                "set render_size (109 for Noto Color Emoji)",
            ) from None
        if raw_emoji(font.file, font.index, self.config.render_size, "🙂").getbbox() is None:
            raise unavailable(self.name, f"font {self.config.font!r} draws no emoji", EMOJI_FIX)
        return font

    def check_available(self) -> None:
        self.font  # noqa: B018  (resolving raises the clear error)

    def warm_up(self) -> None:
        self.font  # noqa: B018

    def raw(self, item: dict[str, Any], char: str) -> Image.Image:
        return raw_emoji(item["font_file"], item["font_index"], item["render_size"], char)

    def _render_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        """The (majority, exception) cells of ``item``, uncached."""
        raise NotImplementedError

    def font_fields(self) -> dict[str, Any]:
        return {
            "font_file": self.font.file,
            "font_index": self.font.index,
            "render_size": self.config.render_size,
        }

    def draw_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        return self._draw(item, cell_size)


@functools.lru_cache(maxsize=512)  # ~70 KB each at 109 px; one font's emoji set is ~240
def raw_emoji(file: str, index: int, size: int, char: str) -> Image.Image:
    """One emoji on a transparent square canvas, centred, at the font's own size."""
    side = round(size * 1.25)
    canvas = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    ImageDraw.Draw(canvas).text(
        (side / 2, side / 2), char, font=load_font(file, index, size), embedded_color=True, anchor="mm"
    )
    return canvas


def place(frame: Image.Image, cell_size: int) -> Image.Image:
    """Scale a square RGBA frame to EMOJI_SCALE of the cell, centred on white."""
    side = max(1, round(cell_size * EMOJI_SCALE))
    cell = Image.new("RGB", (cell_size, cell_size), (255, 255, 255))
    offset = (cell_size - side) // 2
    cell.paste(fit_square(frame, side), (offset, offset))
    return cell


class EmojiContentFamily(_EmojiFamily):
    name = "emoji_content"
    primitive_type = "EMOJI_CONTENT"
    rose_subset = "ROSE-EmojiContent"

    @functools.cached_property
    def ranked_pairs(self) -> tuple[tuple[str, str], ...]:
        """Pairs the font draws, both non-empty and distinct at every checked
        cell size, most different first; kept on disk between runs (rankings.py)."""
        item = self.font_fields()
        candidates = tuple(p for g in CONTENT_GROUPS for p in itertools.combinations(g, 2))

        def rank() -> tuple[tuple[str, str], ...]:
            placed: dict[tuple[str, int], Image.Image] = {}  # an emoji is in several pairs: place it once
            scored = []
            for order, pair in enumerate(candidates):
                raws = [self.raw(item, char) for char in pair]
                if any(raw.getbbox() is None for raw in raws):
                    continue
                for char, raw in zip(pair, raws):
                    for cell in CHECK_CELLS:
                        if (char, cell) not in placed:
                            placed[char, cell] = place(raw, cell)
                cells = [[placed[char, cell] for char in pair] for cell in CHECK_CELLS]
                if all(differ(a, b) for a, b in cells):
                    scored.append((-mean_abs_diff(*cells[-1]), order, pair))
            return tuple(pair for _, _, pair in sorted(scored))

        settings = {
            "index": self.font.index,
            "render_size": self.config.render_size,
            "scale": EMOJI_SCALE,
            "cells": CHECK_CELLS,
        }
        return cached_ranking("emoji_content", self.font.file, settings, candidates, rank)

    def warm_up(self) -> None:
        super().warm_up()
        self.ranked_pairs  # noqa: B018  (ranked once, before the workers fork)

    def sample_item(self, rng: random.Random) -> dict[str, Any]:
        pair = list(pick_by_subtlety(rng, self.ranked_pairs, self.config.subtlety))
        rng.shuffle(pair)
        return {**self.font_fields(), "background_emoji": pair[0], "target_emoji": pair[1]}

    def _render_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        def cell(key: str) -> Image.Image:
            return place(self.raw(item, item[key]), cell_size)

        return cell("background_emoji"), cell("target_emoji")

    def describe(self, item: dict[str, Any]) -> dict[str, Any]:
        codes = [f"{ord(item[key]):x}" for key in ("background_emoji", "target_emoji")]
        return {
            "background_emoji": item["background_emoji"],
            "target_emoji": item["target_emoji"],
            "background_unicode": codes[0],
            "target_unicode": codes[1],
            "pair_key": "__".join(sorted(codes)),
            "font_file": item["font_file"],
        }


class EmojiStyleFamily(_EmojiFamily):
    name = "emoji_style"
    primitive_type = "EMOJI_STYLE"
    rose_subset = "ROSE-EmojiStyle"

    @functools.cached_property
    def text_font(self) -> FontRef | None:
        return resolve_font(self.config.text_font)

    def _styles_for(self, char: str) -> list[str]:
        offered = [s for s in self.config.styles if self.config.subtlety <= STYLES[s][2]]
        if "text" in offered and (self.text_font is None or not has_glyph(self.text_font, char)):
            offered.remove("text")
        return offered or ["hue"]

    def sample_item(self, rng: random.Random) -> dict[str, Any]:
        # Rare combinations leave the two renderings identical (a hue shift of a
        # grey emoji): draw again; the loop is bounded and uses only rng.
        for _ in range(50):
            char = rng.choice(STYLE_EMOJI)
            name = rng.choice(self._styles_for(char))
            start, end, _ = STYLES[name]
            derived = {"name": name, "amount": round(lerp(start, end, self.config.subtlety), 2)}
            if name == "text":
                font = self.text_font
                assert font is not None  # _styles_for offers "text" only with a text font
                derived.update(font_file=font.file, font_index=font.index)
            styles = [{"name": "color"}, derived]
            rng.shuffle(styles)  # the colour rendering may be the majority or the exception
            item = {
                **self.font_fields(),
                "emoji": char,
                "majority_style": styles[0],
                "target_style": styles[1],
            }
            if self.raw(item, char).getbbox() and differ(*self._render_cells(item, CHECK_CELLS[0])):
                return item
        raise unavailable(self.name, "no emoji gives two distinct renderings", EMOJI_FIX)

    def _render_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        raw = self.raw(item, item["emoji"])

        def cell(key: str) -> Image.Image:
            return place(styled(raw, item["emoji"], item[key]), cell_size)

        return cell("majority_style"), cell("target_style")

    def describe(self, item: dict[str, Any]) -> dict[str, Any]:
        def label(style: dict[str, Any]) -> str:
            return style["name"] + (f"_{style['amount']:g}" if style.get("amount") else "")

        return {
            "emoji_char": item["emoji"],
            "background_emoji": item["emoji"],
            "target_emoji": item["emoji"],
            "unicode_key": f"{ord(item['emoji']):x}",
            "majority_style": label(item["majority_style"]),
            "target_style": label(item["target_style"]),
            "pair_key": f"{ord(item['emoji']):x}",
        }


def styled(raw: Image.Image, char: str, style: dict[str, Any]) -> Image.Image:
    """Apply one rendering style to an RGBA emoji frame (pure function of its inputs)."""
    name, amount = style["name"], style.get("amount", 0.0)
    rgb, alpha = raw.convert("RGB"), raw.getchannel("A")
    if name == "color":
        return raw
    if name == "hue":
        h, s, v = rgb.convert("HSV").split()
        shift = round(amount / 360 * 256)
        rgb = Image.merge("HSV", (h.point(lambda x: (x + shift) % 256), s, v)).convert("RGB")
    elif name == "gray":
        rgb = Image.blend(rgb, ImageOps.grayscale(rgb).convert("RGB"), amount)
    elif name == "posterize":
        rgb = ImageOps.posterize(rgb, int(amount))
    elif name == "pixelate":
        blocks = int(amount)
        return raw.resize((blocks, blocks), Image.Resampling.BOX).resize(raw.size, Image.Resampling.NEAREST)
    elif name == "soft":
        return raw.filter(ImageFilter.GaussianBlur(amount))
    elif name == "flat":
        rgb = Image.new("RGB", raw.size, (70, 70, 78))
    elif name == "outline":
        inner = alpha
        for _ in range(round(amount)):  # erode 1 px a step: a 3x3 filter n times beats one (2n+1) filter
            inner = inner.filter(ImageFilter.MinFilter(3))
        alpha = ImageChops.subtract(alpha, inner)
        rgb = Image.new("RGB", raw.size, (40, 40, 48))
    elif name == "text":
        return text_glyph(style["font_file"], style["font_index"], char, raw.size[0])
    out = rgb.convert("RGBA")
    out.putalpha(alpha)
    return out


def text_glyph(file: str, index: int, char: str, side: int) -> Image.Image:
    canvas = Image.new("RGBA", (side, side), (0, 0, 0, 0))
    ImageDraw.Draw(canvas).text(
        (side / 2, side / 2),
        char,
        font=load_font(file, index, round(side * 0.7)),
        fill=(20, 20, 20, 255),
        anchor="mm",
    )
    return canvas
