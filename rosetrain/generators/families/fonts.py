"""Font discovery and loading for the font-based families.

A font is named in a config either by fontconfig pattern ("DejaVu Sans",
"Noto Sans CJK SC", "Noto Serif CJK TC:style=Bold") or by file path, with an
optional face index for collections ("/usr/share/fonts/.../NotoSansCJK-Regular.ttc#2").
Noto CJK ships as .ttc collections whose face index picks the regional glyph
shapes (0 JP, 1 KR, 2 SC, 3 TC, 4 HK), so a resolved font is always a
(file, index) pair, and that pair is what items store.

fc-match silently substitutes a fallback for a family it does not have, so a
match only counts when the requested family is among the returned ones.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import shutil
import subprocess

from PIL import Image, ImageDraw, ImageFont

# A code point no real font maps (plane-16 private use): it renders as the
# font's .notdef box, which a missing character renders as too.
MISSING_PROBE = "\U0010fffd"


@dataclasses.dataclass(frozen=True)
class FontRef:
    name: str  # what the config said, shown in errors and rows
    file: str
    index: int = 0


def _split_index(spec: str) -> tuple[str, int]:
    path, sep, index = spec.rpartition("#")
    if sep and index.isdigit():
        return path, int(index)
    return spec, 0


def _is_path(spec: str) -> bool:
    return os.sep in spec or _split_index(spec)[0].lower().endswith((".ttf", ".otf", ".ttc", ".otc"))


# Every cache here is bounded: a `generate` worker renders scenes for hours, and
# a cache keyed by anything that varies per scene grows until the process is killed.


@functools.lru_cache(maxsize=256)  # keyed by the config's font names: a handful per spec
def resolve_font(spec: str) -> FontRef | None:
    """The installed font a config entry names, or None if it is not installed."""
    if _is_path(spec):
        path, index = _split_index(spec)
        return FontRef(spec, path, index) if os.path.isfile(path) else None
    found = _fc_match(spec)
    if found is None and spec.split(":")[0].strip().lower() == "dejavu sans":
        found = _bundled_dejavu()
    return FontRef(spec, *found) if found else None


def _fc_match(pattern: str) -> tuple[str, int] | None:
    if shutil.which("fc-match") is None:
        return None
    result = subprocess.run(
        ["fc-match", "-f", "%{file}|%{index}|%{family}", pattern], capture_output=True, text=True, check=False
    )
    parts = result.stdout.strip().split("|")
    if result.returncode != 0 or len(parts) != 3 or not os.path.isfile(parts[0]):
        return None
    wanted = pattern.split(":")[0].strip().lower()
    families = [name.strip().lower() for name in parts[2].split(",")]
    if wanted not in families:
        return None  # fontconfig substituted another family
    return parts[0], int(parts[1] or 0)


def _bundled_dejavu() -> tuple[str, int] | None:
    """matplotlib ships DejaVu Sans, so Latin glyphs work even without fontconfig."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or not spec.origin:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "mpl-data", "fonts", "ttf", "DejaVuSans.ttf")
    return (path, 0) if os.path.isfile(path) else None


@functools.lru_cache(maxsize=16)
def load_font(file: str, index: int, size: int) -> ImageFont.FreeTypeFont:
    # Each face maps its font file anew and FreeType touches megabytes of it (a
    # Noto CJK face holds ~4 MB resident), so keep few: with 128 faces a generate
    # worker grew past 650 MB. Faces are only needed when render_char misses, and
    # opening one costs ~2 ms (CJK), ~0.1 ms (DejaVu).
    return ImageFont.truetype(file, size, index=index)


@functools.lru_cache(maxsize=256)  # called per glyph scene: don't hold a face open for it
def font_display_name(file: str, index: int) -> str:
    """The font's own name, e.g. 'Noto Sans CJK SC Regular' (the release's font_name)."""
    family, style = load_font(file, index, 32).getname()
    return f"{family} {style}".strip()


@functools.lru_cache(maxsize=4096)  # <= ~30 MB at 84 px cells; holds a ranking pass's probes
def render_char(file: str, index: int, char: str, cell: int, ratio: float) -> Image.Image:
    """One character, black on white, centred with anchor='mm' (Pillow's default
    anchor leaves the ink low in the cell), at font size ratio * cell."""
    image = Image.new("L", (cell, cell), 255)
    font = load_font(file, index, max(1, round(cell * ratio)))
    ImageDraw.Draw(image).text((cell / 2, cell / 2), char, font=font, fill=0, anchor="mm")
    return image


@functools.lru_cache(maxsize=4096)  # a ranking pass asks once per pair a character is in
def has_glyph(font: FontRef, char: str, cell: int = 48, ratio: float = 0.7) -> bool:
    """True if the font really draws ``char``: some ink, and not its .notdef box.
    (cell, ratio) only pick the probe rendering; callers pass the ones they draw
    at anyway so the cached rendering is reused."""
    probe = render_char(font.file, font.index, char, cell, ratio)
    if probe.getextrema()[0] == 255:
        return False
    return probe.tobytes() != _notdef_bytes(font.file, font.index, cell, ratio)


@functools.lru_cache(maxsize=256)
def _notdef_bytes(file: str, index: int, cell: int, ratio: float) -> bytes:
    return render_char(file, index, MISSING_PROBE, cell, ratio).tobytes()
