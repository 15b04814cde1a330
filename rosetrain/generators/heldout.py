"""Keeping held-out scenes out of training.

A spec with ``role: heldout`` (seed namespace ``heldout``, reserved to it) may
name a family with ``heldout_family_name``; its rows say ``heldout_family:
true`` for that family. A training spec names its held-out spec
(``heldout_spec``): it may not draw the held-out family, and a scene with the
fingerprint of one of the held-out spec's first ``heldout_scenes`` scenes is
skipped (small grids repeat by chance). Both the writers and the stream ask
:func:`heldout_guard` what to mark and what to skip.
"""

from __future__ import annotations

import functools

from rosetrain.generators.scene import sample_scene
from rosetrain.generators.spec import Spec, SpecError, load_spec, spec_sha256


def check_training_spec(spec: Spec) -> Spec | None:
    """A training spec may not use the held-out family. Returns the held-out spec."""
    if spec.role != "train" or not spec.heldout_spec:
        return None
    try:
        heldout = load_spec(spec.resolve(spec.heldout_spec), check_fonts=False)
    except SpecError as err:
        raise SpecError(f"{spec.path}: heldout_spec: {err}") from None
    if heldout.role != "heldout":
        raise SpecError(f"{spec.path}: heldout_spec: {heldout.path} has role {heldout.role!r}, not 'heldout'")
    if heldout.heldout_family_name and heldout.heldout_family_name in spec.families:
        raise SpecError(
            f"{spec.path}: families: {heldout.heldout_family_name!r} is held out of training "
            f"by {heldout.path}; remove it from this spec"
        )
    return heldout


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
