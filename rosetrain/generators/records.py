"""One step of the data path: (spec, seed, index) -> scene, images, records.

Both writers (the release folder, the Parquet shards) and the streaming
dataset call :func:`build_records`, so a row is the same wherever it ends up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from PIL import Image

from rosetrain.core import protocol as P
from rosetrain.generators.families import FAMILIES, family_class, get_family
from rosetrain.generators.render import render_cue, render_scene
from rosetrain.generators.scene import Scene, sample_scene
from rosetrain.generators.spec import LevelSpec, Spec
from rosetrain.generators.tasks import scene_tasks

ImageT = TypeVar("ImageT", Image.Image, bytes)


@dataclasses.dataclass
class SceneRecords(Generic[ImageT]):
    scene: Scene
    level: LevelSpec
    images: dict[str, ImageT]  # image_id -> image (or its bytes: build_records' ``encode``)
    records: list[dict[str, Any]]

    layout: str = "rosetrain"

    @property
    def subset(self) -> str:
        return subset_name(self.scene.family, self.scene.family_config, self.layout)


def subset_name(family: str, config: dict | None = None, layout: str = "rosetrain") -> str:
    """``rose_subset`` of a family's rows: the unit ROSE averages over first.

    With ``layout: rose`` a family that reproduces a ROSE subset (its class's
    ``rose_subset``; glyph only when its glyphs are Chinese) takes its official
    name, so the official evaluator's tables see it; every other family (and
    every family in rosetrain's own layout) is ``rosetrain-<family>``.
    """
    if layout == "rose" and family in FAMILIES:
        cls = family_class(family)
        if cls.rose_subset is not None and cls.reproduces_rose(config):
            return cls.rose_subset
    return f"rosetrain-{family}"


@overload
def build_records(
    spec: Spec,
    seed: int,
    index: int,
    split: str,
    *,
    heldout_family_name: str | None = ...,
    render: bool = ...,
    encode: None = ...,
    scene: Scene | None = ...,
) -> SceneRecords[Image.Image]: ...


@overload
def build_records(
    spec: Spec,
    seed: int,
    index: int,
    split: str,
    *,
    heldout_family_name: str | None = ...,
    render: bool = ...,
    encode: Callable[[Image.Image], bytes],
    scene: Scene | None = ...,
) -> SceneRecords[bytes]: ...


def build_records(
    spec: Spec,
    seed: int,
    index: int,
    split: str,
    *,
    heldout_family_name: str | None = None,
    render: bool = True,
    encode: Callable[[Image.Image], bytes] | None = None,
    scene: Scene | None = None,
) -> SceneRecords[Any]:
    """``encode`` (e.g. PNG): ``images`` holds each image's bytes, not the image;
    the writers need nothing else, and the last cue is then drawn on the base
    image itself once the base is encoded, sparing a copy of the grid.
    ``scene``: the scene ``sample_scene`` already gave a caller for these
    arguments (a held-out check), so it is not sampled twice."""
    scene = scene or sample_scene(spec, seed, index, split)
    level = next(lv for lv in spec.levels if lv.name == scene.level)
    records = scene_tasks(scene, level, split)
    images: dict[str, Any] = {}
    if render:
        images = _images(scene, level, records, encode)
    subset = subset_name(scene.family, scene.family_config, spec.layout)
    scene_fields = {**_scene_fields(scene, spec, seed, heldout_family_name), "rose_subset": subset}
    for record in records:
        record.update(scene_fields)
        record["image"] = f"images/{subset}/{record['image_id']}.png"
        if record["cue_type"] != P.NO_CUE:  # T4, and a cue_on template
            record["base_image"] = f"images/{subset}/{scene.scene_id}.png"
    return SceneRecords(scene, level, images, records, spec.layout)


def _images(
    scene: Scene,
    level: LevelSpec,
    records: list[dict[str, Any]],
    encode: Callable[[Image.Image], bytes] | None,
) -> dict[str, Any]:
    keep: Callable[[Image.Image], Any] = encode or (lambda image: image)  # PNG bytes, or the image itself
    base = render_scene(scene, level.noise)
    images = {scene.scene_id: keep(base)}
    # the highlighted image's region: T4's, which a cue_on record carries as cue_region_params
    cues = {
        record["image_id"]: record.get("cue_region_params", record["region_params"])
        for record in records
        if record["cue_type"] != P.NO_CUE
    }
    for number, (image_id, params) in enumerate(cues.items(), 1):
        last = encode is not None and number == len(cues)  # the base image is not needed after it
        images[image_id] = keep(render_cue(base, params, scene.cell_size, level.cue, in_place=last))
    return images


def _scene_fields(scene: Scene, spec: Spec, seed: int, heldout_family_name: str | None) -> dict[str, Any]:
    family = get_family(scene.family, scene.family_config)
    return {
        "rows": scene.rows,
        "cols": scene.cols,
        "cell_size": scene.cell_size,
        "image_width": scene.cols * scene.cell_size,
        "image_height": scene.rows * scene.cell_size,
        "grid_size_profile": scene.profile,
        "primitive_type": family.primitive_type,
        "family": scene.family,
        "heldout_family": scene.family == heldout_family_name,
        "negative": scene.negative,
        "level": scene.level,
        "difficulty": scene.level,
        "scene_fingerprint": scene.fingerprint,
        "item_seed": scene.seed,
        "dataset_version": f"rosetrain:{spec.name}",
        "generator_seed": seed,
        "scene_index": scene.index,
        "reference_source": "REF_MAJORITY",
        "selection_predicate": "SELECT_DIFFERENT",
        "target_rule": "ODD_FROM_MAJORITY",
        **family.describe(scene.item),
    }
