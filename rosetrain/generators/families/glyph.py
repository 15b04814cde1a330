"""glyph: confusable characters in one font per scene (ROSE-ChineseGlyph).

The majority cells show one character, the exceptions a look-alike (未/末,
O/0). Pairs are ranked per font by how much their renderings differ, and
``subtlety`` picks from the easy or the confusable end of that ranking and
shrinks the glyph a little. A pair that renders pixel-identically in a font
(Latin O and Greek Omicron in DejaVu), or that the font cannot draw, is never
used in that font.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from typing import Any

from PIL import Image

from rosetrain.generators.families.base import FamilyConfig, VisualFamily, unavailable
from rosetrain.generators.families.common import CellCache, differ, lerp, mean_abs_diff, pick_by_subtlety
from rosetrain.generators.families.fonts import (
    FontRef,
    font_display_name,
    has_glyph,
    render_char,
    resolve_font,
)
from rosetrain.generators.families.rankings import cached_ranking

# Groups of look-alikes; every pair inside a group is a candidate.
# Cross-script homoglyphs whose shapes are meant to be identical (Latin o, Greek
# omicron, Cyrillic o; y and Cyrillic u; 3 and Ze) are left out on purpose: fonts
# only tell them apart by small offsets, which is no fair "different character".
LATIN_GROUPS = (
    "O0Q",
    "Il1|",
    "B8",
    "S5",
    "Z2",
    "CG",
    "EF",
    "PR",
    "DO",
    "UV",
    "VY",
    "MN",
    "bd6",
    "pq",
    "g9q",
    "nhm",
    "uv",
    "ce",
    "ao",
    "ij",
    "tf",
    "G6",
    "A4",
    "T7",
    "38",
    "56",
    "17",
    "KX",
    "OΘ",
    "vν",
    "uυ",
    "nηп",
    "iι",
    "kκ",
    "Bβ",
    "aα",
    "pρ",
    "xχ",
    "yγ",
    "eε",
    "rг",
    "bЬ",
    "NИ",
    "RЯ",
    "6б",
)
CJK_GROUPS = (
    "未末",
    "土士",
    "己已巳",
    "戊戌戍戎",
    "天夭夫",
    "人入八",
    "日曰目",
    "大太犬丈",
    "王玉主",
    "析折拆",
    "架枷",
    "刀力刁",
    "千干于",
    "午牛",
    "今令",
    "鸟乌岛",
    "鳥烏",
    "拔拨",
    "候侯",
    "崇祟",
    "赢羸嬴",
    "免兔",
    "采釆",
    "冶治",
    "汩汨",
    "沽沾",
    "祗祇",
    "徽微",
    "辨辩辫",
    "券卷",
    "刺剌",
    "栗粟",
    "盲肓",
    "壁璧",
    "暑署",
    "历厉",
    "胄胃",
    "幻幼",
    "母毋",
    "竞竟",
    "延廷",
    "炙灸",
    "迫追",
    "鸣呜",
    "茶荼",
    "杨扬",
    "惟帷",
    "晴睛",
    "喝渴",
    "侍待",
    "休体",
    "贝见",
    "貝見",
    "戈弋",
    "币市",
    "仓仑",
    "万方",
    "甲申由田",
    "旦且",
    "白自",
    "史吏",
    "问间",
    "木本术",
    "兵丘乒乓",
    "宇字",
    "买卖",
    "苦若",
    "尤龙",
    "亨享",
    "厂广",
    "北比",
    "洒酒",
    "峰锋",
    "狠狼",
    "孤狐",
    "子孑孓",
    "冗冘",
    "壶壸",
    "汆氽",
    "觅觉",
    "盂孟",
    "氏氐",
    "毫亳",
    "朋明",
    "迅汛",
    "儿几",
    "乙乞",
    "工土",
    "凡丸",
    "元无",
    "師帥",
    "陳陣",
    "末朱",
)
SCRIPT_GROUPS = {"latin": LATIN_GROUPS, "cjk": CJK_GROUPS}
SCRIPT_PROBE = {"latin": "A", "cjk": "未"}  # a font without this cannot serve the script
DEFAULT_FONTS = {
    "latin": ("DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono"),
    "cjk": (
        "Noto Sans CJK SC",
        "Noto Serif CJK SC",
        "Noto Sans CJK TC",
        "Noto Serif CJK TC",
        "Noto Sans CJK JP",
        "Noto Sans CJK SC:style=Bold",
        "Noto Serif CJK JP:style=Bold",
    ),
}
FIX = {
    "latin": "install it (apt-get install fonts-dejavu-core) or change the family's fonts",
    "cjk": "install a CJK font (apt-get install fonts-noto-cjk) or set script: latin",
}
CHECK_CELLS = (24, 64)  # a pair must differ at the smallest and a typical cell size


def pairs_of(groups: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple(pair for group in groups for pair in itertools.combinations(group, 2))


@dataclasses.dataclass(frozen=True)
class GlyphConfig(FamilyConfig):
    """script: latin, cjk or any (a coin flip per scene among the scripts some
    font can draw). fonts: fontconfig names or file paths (``path#index`` for a
    collection face); default a DejaVu pool for latin and a Noto CJK pool for cjk."""

    script: str = "any"
    fonts: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.script not in ("latin", "cjk", "any"):
            raise ValueError(f"script must be 'latin', 'cjk' or 'any', got {self.script!r}")
        if self.fonts is not None:
            if isinstance(self.fonts, str) or not all(isinstance(f, str) and f for f in self.fonts):
                raise ValueError(f"fonts must be a list of font names or paths, got {self.fonts!r}")
            if not self.fonts:
                raise ValueError("fonts must name at least one font")
            object.__setattr__(self, "fonts", tuple(self.fonts))

    @property
    def scripts(self) -> tuple[str, ...]:
        return ("latin", "cjk") if self.script == "any" else (self.script,)

    @property
    def glyph_ratio(self) -> float:
        """Font size as a share of the cell: smaller glyphs hide differences."""
        return round(lerp(0.78, 0.64, self.subtlety), 3)


@functools.lru_cache(maxsize=256)  # (font, script, ratio): a few dozen per spec
def ranked_pairs(font: FontRef, script: str, ratio: float) -> tuple[tuple[str, str], ...]:
    """The script's pairs this font draws with two distinct glyphs that differ at
    every checked cell size, most different first (ties in list order); kept
    on disk between runs (rankings.py)."""
    candidates = pairs_of(SCRIPT_GROUPS[script])

    def rank() -> tuple[tuple[str, str], ...]:
        scored = []
        for order, pair in enumerate(candidates):
            if not all(has_glyph(font, char, CHECK_CELLS[-1], ratio) for char in pair):
                continue
            renders = [
                [render_char(font.file, font.index, c, cell, ratio) for c in pair] for cell in CHECK_CELLS
            ]
            if all(differ(a, b) for a, b in renders):
                scored.append((-mean_abs_diff(*renders[-1]), order, pair))
        return tuple(pair for _, _, pair in sorted(scored))

    settings = {"index": font.index, "ratio": ratio, "cells": CHECK_CELLS}
    return cached_ranking("glyph", font.file, settings, candidates, rank)


class GlyphFamily(VisualFamily):
    name = "glyph"
    primitive_type = "CHINESE_GLYPH"
    config_class = GlyphConfig
    config: GlyphConfig
    rose_subset = "ROSE-ChineseGlyph"

    @classmethod
    def reproduces_rose(cls, config: dict[str, Any] | None = None) -> bool:
        # ROSE's glyphs are Chinese: only a spec that asks for script cjk reproduces them.
        return (config or {}).get("script") == "cjk"

    def __init__(self, config: GlyphConfig | None = None):
        super().__init__(config)
        self._draw = CellCache(self.name, draw_glyph_cells)

    def _pool(self) -> tuple[tuple[str, ...], bool]:
        if self.config.fonts is not None:
            return self.config.fonts, True
        return tuple(dict.fromkeys(f for s in self.config.scripts for f in DEFAULT_FONTS[s])), False

    @functools.cached_property
    def _fonts_by_script(self) -> dict[str, list[FontRef]]:
        """Installed pool fonts that can serve each configured script; raises the
        clear missing-font error when a script ends up with none."""
        names, explicit = self._pool()
        fonts = []
        for name in names:
            font = resolve_font(name)
            if font is None and explicit:
                raise unavailable(
                    self.name,
                    f"font {name!r} (from fonts) is not installed",
                    "install it (Noto CJK: apt-get install fonts-noto-cjk; DejaVu: "
                    "apt-get install fonts-dejavu-core) or remove it from fonts",
                )
            if font is not None:
                fonts.append(font)
        usable = {s: [f for f in fonts if has_glyph(f, SCRIPT_PROBE[s])] for s in self.config.scripts}
        usable = {s: fs for s, fs in usable.items() if fs}
        if not usable:  # with script any, one drawable script is enough
            script = self.config.scripts[-1]
            raise unavailable(
                self.name, f"no installed font among {list(names)} draws {script} characters", FIX[script]
            )
        return usable

    def check_available(self) -> None:
        self._fonts_by_script  # noqa: B018  (resolving raises the clear error)

    def warm_up(self) -> None:
        for script, fonts in self._fonts_by_script.items():
            for font in fonts:
                ranked_pairs(font, script, self.config.glyph_ratio)

    def sample_item(self, rng: random.Random) -> dict[str, Any]:
        by_script = self._fonts_by_script
        script = rng.choice(sorted(by_script))
        font = rng.choice(by_script[script])
        ratio = self.config.glyph_ratio
        pairs = ranked_pairs(font, script, ratio)
        if not pairs:
            raise unavailable(self.name, f"font {font.name!r} draws no distinct {script} pair", FIX[script])
        pair = list(pick_by_subtlety(rng, pairs, self.config.subtlety))
        rng.shuffle(pair)  # either character may be the majority
        return {
            "script": script,
            "font_file": font.file,
            "font_index": font.index,
            "font_name": font_display_name(font.file, font.index),
            "glyph_ratio": ratio,
            "background_char": pair[0],
            "target_char": pair[1],
        }

    def draw_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        return self._draw(item, cell_size)

    def describe(self, item: dict[str, Any]) -> dict[str, Any]:
        majority, target = item["background_char"], item["target_char"]
        undirected = "__".join(sorted((majority, target)))
        return {
            "background_char": majority,
            "target_char": target,
            "source_pair": [majority, target],
            "pair_direction": f"{majority}_majority_{target}_target",
            "pair_key": undirected,
            "undirected_pair_key": undirected,
            "font_name": item["font_name"],
            "font_file": item["font_file"],
            "font_index": item["font_index"],
            "script": item["script"],
        }


def draw_glyph_cells(item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
    def cell(key: str) -> Image.Image:
        return render_char(
            item["font_file"], item["font_index"], item[key], cell_size, item["glyph_ratio"]
        ).convert("RGB")

    return cell("background_char"), cell("target_char")
