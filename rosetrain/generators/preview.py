"""Contact sheets: a grid of scenes with their targets boxed and the regions
of their tasks outlined, for a person to check labels at a glance."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from rosetrain.core import protocol as P
from rosetrain.core.images import open_rgb
from rosetrain.core.regions import cells_in_region

TILE = 256  # each scene is scaled to fit a TILE x TILE box
CAPTION = 30
TARGET_COLOR = (255, 0, 160)
REGION_COLORS = {
    P.T2: (0, 120, 255),
    P.T3: (0, 170, 0),
    P.T4: (255, 140, 0),
    P.T5: (120, 0, 200),
    # the counting twins, in a training split: their actions' colours, darker
    P.T4C: (150, 90, 30),
    P.T5C: (70, 0, 120),
}


def _scenes(records: Iterable[dict[str, Any]]) -> OrderedDict[str, list[dict]]:
    scenes: OrderedDict[str, list[dict]] = OrderedDict()
    for record in records:
        scenes.setdefault(record["scene_id"], []).append(record)
    return scenes


def _tile(root: Path, tasks: list[dict], template: str | None) -> Image.Image:
    first = tasks[0]
    base = next((t.get("base_image") or t["image"] for t in tasks if t["task_template"] != P.T4), None)
    base = base or first.get("base_image") or first["image"]
    image = _open_rgb(root / base)
    cell = first["cell_size"]
    draw = ImageDraw.Draw(image)
    for text in first["all_target_cells"]:
        r, c = P.parse_cell_str(text)
        draw.rectangle(
            ((c - 1) * cell + 2, (r - 1) * cell + 2, c * cell - 3, r * cell - 3),
            outline=TARGET_COLOR,
            width=max(2, cell // 16),
        )
    for task in tasks:
        color = REGION_COLORS.get(task["task_template"])
        if color is None or (template and task["task_template"] != template):
            continue
        cells = cells_in_region(task["region_type"], task["region_params"], first["rows"], first["cols"])
        _outline_cells(draw, cells, cell, color, width=max(2, cell // 20))
    scale = TILE / max(image.size)
    image = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    tile = Image.new("RGB", (TILE, TILE + CAPTION), "white")
    tile.paste(image, ((TILE - image.width) // 2, 0))
    caption = (
        f"{first['scene_id']} {first.get('family', first.get('rose_subset', ''))}\n"
        f"{first['rows']}x{first['cols']} targets={len(first['all_target_cells'])}"
    )
    ImageDraw.Draw(tile).multiline_text((4, TILE + 1), caption, fill="black", spacing=1)
    return tile


def _open_rgb(path: Path) -> Image.Image:
    return open_rgb(path, str(path))


def _outline_cells(draw: ImageDraw.ImageDraw, cells: set, size: int, color, width: int) -> None:
    """Outline the border of a set of cells: an edge is drawn where a region
    cell meets a cell outside it (works for exclusion's non-convex regions)."""
    for r, c in cells:
        x0, y0, x1, y1 = (c - 1) * size, (r - 1) * size, c * size - 1, r * size - 1
        if (r - 1, c) not in cells:
            draw.line((x0, y0, x1, y0), fill=color, width=width)
        if (r + 1, c) not in cells:
            draw.line((x0, y1, x1, y1), fill=color, width=width)
        if (r, c - 1) not in cells:
            draw.line((x0, y0, x0, y1), fill=color, width=width)
        if (r, c + 1) not in cells:
            draw.line((x1, y0, x1, y1), fill=color, width=width)


def contact_sheet(
    root: str | Path,
    records: Iterable[dict[str, Any]],
    limit: int = 24,
    columns: int = 6,
    template: str | None = None,
) -> Image.Image:
    """Sheet of the first ``limit`` scenes. ``template`` shows only that task's region."""
    root = Path(root)
    scenes = list(_scenes(records).values())[:limit]
    if not scenes:
        raise ValueError("no scenes to preview")
    tiles = [_tile(root, tasks, template) for tasks in scenes]
    columns = min(columns, len(tiles))
    rows = -(-len(tiles) // columns)
    legend_h = 22
    sheet = Image.new("RGB", (columns * TILE, rows * (TILE + CAPTION) + legend_h), "white")
    for i, tile in enumerate(tiles):
        sheet.paste(tile, ((i % columns) * TILE, legend_h + (i // columns) * (TILE + CAPTION)))
    draw = ImageDraw.Draw(sheet)
    x = 4
    shown = {task["task_template"] for tasks in scenes for task in tasks}
    keys = [
        (P.SHORT_NAME[t], c) for t, c in REGION_COLORS.items() if t not in P.TRAINING_TEMPLATES or t in shown
    ]
    for name, color in [("target", TARGET_COLOR), *keys]:
        draw.rectangle((x, 5, x + 12, 17), outline=color, width=3)
        draw.text((x + 16, 5), name, fill="black")
        x += 24 + 7 * len(name)
    return sheet
