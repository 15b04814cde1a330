"""Turn a scene into pixels: tile two cell images into the grid, and draw
T4's visual cue on a second copy. No margins, no labels: the image is exactly
``cols * cell_size`` wide and ``rows * cell_size`` high, as in the release.
"""

from __future__ import annotations

import functools
import json

from PIL import Image, ImageDraw

from rosetrain.generators.families import get_family
from rosetrain.generators.scene import Scene
from rosetrain.generators.spec import CueSpec


@functools.lru_cache(maxsize=64)
def _cells(family: str, config_json: str, item_json: str, cell_size: int) -> tuple[Image.Image, Image.Image]:
    family_obj = get_family(family, json.loads(config_json))
    majority, exception = family_obj.draw_cells(json.loads(item_json), cell_size)
    if majority.size != (cell_size, cell_size) or exception.size != (cell_size, cell_size):
        raise RuntimeError(
            f"family {family!r} drew cells of {majority.size}/{exception.size}, "
            f"expected {cell_size}x{cell_size}"
        )
    return majority.convert("RGB"), exception.convert("RGB")


def scene_cells(scene: Scene) -> tuple[Image.Image, Image.Image]:
    """(majority cell, exception cell) of a scene, cached across scenes that share them."""
    return _cells(
        scene.family,
        json.dumps(scene.family_config, sort_keys=True),
        json.dumps(scene.item, sort_keys=True),
        scene.cell_size,
    )


def render_scene(scene: Scene, noise: float = 0.0) -> Image.Image:
    majority, exception = scene_cells(scene)
    size = scene.cell_size
    # One row of majority cells, pasted once per row, then the exceptions on top:
    # rows + cols + targets pastes instead of rows x cols. Every pixel is pasted,
    # so the images start unfilled (color=None).
    strip = Image.new("RGB", (scene.cols * size, size), None)
    for col in range(scene.cols):
        strip.paste(majority, (col * size, 0))
    image = Image.new("RGB", (scene.cols * size, scene.rows * size), None)
    for row in range(scene.rows):
        image.paste(strip, (0, row * size))
    for row, col in scene.targets:
        image.paste(exception, ((col - 1) * size, (row - 1) * size))
    if noise > 0:
        image = _add_noise(image, noise, scene.seed)
    return image


def _add_noise(image: Image.Image, amplitude: float, seed: int) -> Image.Image:
    """Opt-in per-pixel noise, seeded by the scene: cells stop being pixel-identical."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pixels = np.asarray(image, dtype=np.int16)
    noisy = pixels + rng.integers(-int(amplitude), int(amplitude) + 1, pixels.shape, dtype=np.int16)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8), "RGB")


def render_cue(
    base: Image.Image, params: dict, cell_size: int, cue: CueSpec, in_place: bool = False
) -> Image.Image:
    """``base`` with the VISUAL_REGION rectangle highlighted: a copy, or with
    ``in_place`` (a caller done with ``base``) possibly ``base`` itself, drawn on."""
    box = (
        (params["c1"] - 1) * cell_size,
        (params["r1"] - 1) * cell_size,
        params["c2"] * cell_size - 1,
        params["r2"] * cell_size - 1,
    )
    if cue.style == "outline":
        image = base if in_place else base.copy()
        ImageDraw.Draw(image).rectangle(box, outline=tuple(cue.color), width=cue.width)
    else:
        # fill: tint the region; dim: darken everything outside it (composite: a new image).
        overlay = Image.new("RGB", base.size, tuple(cue.color) if cue.style == "fill" else (0, 0, 0))
        mask = Image.new("L", base.size, 0 if cue.style == "fill" else 110)
        ImageDraw.Draw(mask).rectangle(box, fill=90 if cue.style == "fill" else 0)
        image = Image.composite(overlay, base, mask)
        ImageDraw.Draw(image).rectangle(box, outline=tuple(cue.color), width=max(1, cue.width // 2))
    return image
