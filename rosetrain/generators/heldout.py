"""Keeping held-out scenes out of training.

A spec with ``role: heldout`` (seed namespace ``heldout``, reserved to it) may
name a family with ``heldout_family_name``; its rows say ``heldout_family:
true`` for that family. It may also name a hue band (``heldout_hue_band``): a
palette the action data must never show. A training spec names its held-out
spec (``heldout_spec``): no level of it with click tasks may draw the held-out
family, or attribute scenes that can show a hue of the band (the level's
``hue_exclude`` must cover it, for the majority and the exception alike).
Counting-only levels may show both: perception of every palette and family is
kept, as a real MLLM keeps it, while the action is tested where it was never
taught. A scene with the fingerprint of one of the held-out spec's first
``heldout_scenes`` scenes is skipped (small grids repeat by chance). Both the
writers and the stream ask :func:`heldout_guard` what to mark and what to skip.
"""

from __future__ import annotations

import functools

from rosetrain.core import protocol as P
from rosetrain.generators.scene import sample_scene
from rosetrain.generators.spec import LevelSpec, Spec, SpecError, load_spec, spec_sha256


def acts(level: LevelSpec) -> bool:
    """Whether a level's tasks include one answered with clicks (the action data)."""
    return any(weight > 0 and P.TASK_MODE[t] != P.COUNT for t, weight in level.tasks.items())


def check_training_spec(spec: Spec) -> Spec | None:
    """The levels with click tasks of a spec that names a held-out spec may not
    show the held-out family nor the held-out hue band, whatever the spec's own
    role (an ``eval`` spec streamed into training is training data too).
    Returns the held-out spec."""
    if spec.role == "heldout" or not spec.heldout_spec:
        return None
    try:
        heldout = load_spec(spec.resolve(spec.heldout_spec), check_fonts=False)
    except SpecError as err:
        raise SpecError(f"{spec.path}: heldout_spec: {err}") from None
    if heldout.role != "heldout":
        raise SpecError(f"{spec.path}: heldout_spec: {heldout.path} has role {heldout.role!r}, not 'heldout'")
    check_action_levels(spec, heldout.heldout_hue_band, heldout.heldout_family_name, str(heldout.path))
    return heldout


def check_action_levels(
    spec: Spec, band: tuple[float, float] | None, family: str | None, named_by: str
) -> None:
    """No level of ``spec`` with click tasks may draw the held-out ``family``, or
    attribute scenes that can show a hue of ``band`` (``named_by``: where the
    band and family come from, for the message)."""
    for level in spec.levels:
        if not acts(level):
            continue
        where = f"levels ({level.name}): " if len(spec.levels) > 1 else ""
        if family and family in level.families and level.families[family].weight > 0:
            raise SpecError(
                f"{spec.path}: {where}families: {family!r} is held out of the action data "
                f"by {named_by}; remove it from this level, or keep only counting tasks in it"
            )
        attribute = level.families.get("attribute")
        if band and attribute is not None and attribute.weight > 0:
            _check_hue_band(spec, where, attribute.config, band, named_by)


def _check_hue_band(spec: Spec, where: str, config: dict, band: tuple[float, float], named_by: str) -> None:
    from rosetrain.generators.families.attribute import AttributeConfig

    low, high = band
    try:
        exclude = AttributeConfig(**config).hue_exclude
    except (TypeError, ValueError) as err:
        raise SpecError(f"{spec.path}: {where}families.attribute: {err}") from None
    if not _covered((low, high), exclude):
        raise SpecError(
            f"{spec.path}: {where}families.attribute: the hue band [{low:g}, {high:g}] is held out "
            f"of the action data by {named_by}; add it to hue_exclude (now "
            f"{[list(b) for b in exclude]}), or keep only counting tasks in this level"
        )


def _covered(band: tuple[float, float], bands: tuple[tuple[float, float], ...]) -> bool:
    """Whether the union of ``bands`` (sorted) contains ``band``."""
    reach = band[0]
    for low, high in bands:
        if low > reach:
            break
        reach = max(reach, high)
    return reach >= band[1]


def heldout_fingerprints(spec: Spec) -> set[str]:
    """Fingerprints of the held-out spec's first ``heldout_scenes`` scenes, under
    its own seed: recomputed from the spec, no data on disk needed."""
    return {sample_scene(spec, spec.seed, i, "test").fingerprint for i in range(spec.heldout_scenes)}


def heldout_guard(spec: Spec) -> tuple[str | None, frozenset[str]]:
    """What a spec's data must mark and avoid: the held-out family (its rows get
    ``heldout_family: true``) and the fingerprints of the held-out spec that a
    training spec names (none of those scenes may be generated)."""
    heldout = check_training_spec(spec)
    family = spec.heldout_family_name if spec.role == "heldout" else (heldout and heldout.heldout_family_name)
    fingerprints = (
        _heldout_fingerprints_of(str(heldout.path), spec_sha256(heldout)) if heldout else frozenset()
    )
    return family or None, fingerprints


@functools.lru_cache(maxsize=4)
def _heldout_fingerprints_of(path: str, sha256: str) -> frozenset[str]:
    # thousands of scenes take seconds; training checks a spec, then streams it: compute once
    # per file content (``sha256`` is part of the key so an edited file is read again)
    return frozenset(heldout_fingerprints(load_spec(path, check_fonts=False)))
