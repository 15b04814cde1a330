"""Generator specs: what scenes and tasks a dataset holds.

A spec is YAML read into frozen dataclasses whose fields carry their type,
range and help (:mod:`rosetrain.core.config`), so a typo or a value out of range
fails before any output is written, with the key and the file named. A spec with ``levels`` is a curriculum: each level
overrides some fields of the base spec (reasoning-gym style: difficulty is a
declared attribute level, not code). ``curriculum: staged`` runs the levels in
order (``scenes`` each); ``mixture`` draws a level per scene by weight, after
its leading warm-up levels (those that set ``scenes``) have run in order: a
cell-addressing stage that teaches *where* before the mixture teaches *what*.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rosetrain.core import config
from rosetrain.core import protocol as P
from rosetrain.core.config import SEED_64, check_fields, setting
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import read_yaml_mapping
from rosetrain.core.memory import too_big

# ROSE-like grid size profiles (observed ranges of the v0.1 test split).
PROFILES = {
    "tiny": {"rows": (3, 5), "cols": (3, 5)},
    "small": {"rows": (7, 10), "cols": (7, 10)},
    "medium": {"rows": (9, 14), "cols": (9, 14)},
    "large": {"rows": (12, 18), "cols": (12, 18)},
}
RESERVED_NAMESPACE = "heldout"  # only a spec with role: heldout may draw seeds here
ROLES = ("train", "eval", "heldout")
PROMPT_STYLES = ("rose", "varied")
CUE_STYLES = ("outline", "fill", "dim")
MIN_GRID, MAX_GRID = 3, 20
LAYOUTS = ("rosetrain", "rose")
MAX_SCENES = 10**9  # a level's or a split's scenes: item ids and shard counts stay small integers
# The held-out overlap check samples each scene (about 1 ms each) and keeps its fingerprint.
MAX_HELDOUT_SCENES = 1_000_000
FINGERPRINT_BYTES = 200  # a 64-character hex string in a set, with the set's share


class SpecError(RosetrainError):
    pass


MAX_LEVELS = 256  # a curriculum of more levels than this is a mistake, not a design


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # YAML's true is not a count


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _range(value: Any, field: str) -> tuple[int, int]:
    if _is_int(value):
        return value, value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_int(v) for v in value):
        low, high = value
        if low > high:
            raise ValueError(f"{field}: low {low} > high {high}")
        return low, high
    raise ValueError(f"{field}: expected an int or [low, high], got {value!r}")


def _weights(value: Any, field: str, allowed: tuple[str, ...] | None = None) -> dict[str, float]:
    """A mixture: name -> non-negative weight. Weights are relative unless they look
    like probabilities that do not add up (sum within (0, 1.5) but not 1)."""
    if isinstance(value, (list, tuple)):
        value = {name: 1.0 for name in value}
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"{field}: expected a non-empty mapping name -> weight")
    weights = {}
    for name, weight in value.items():
        if allowed is not None and name not in allowed:
            raise ValueError(f"{field}: unknown name {name!r}; valid: {', '.join(allowed)}")
        if not _is_number(weight) or weight < 0 or not math.isfinite(weight):
            raise ValueError(f"{field}.{name}: weight must be a finite number >= 0, got {weight!r}")
        weights[str(name)] = float(weight)
    total = sum(weights.values())
    if total <= 0:
        raise ValueError(f"{field}: weights sum to 0")
    if all(w <= 1 for w in weights.values()) and len(weights) > 1 and abs(total - 1) > 1e-6 and total < 1.5:
        raise ValueError(f"{field}: looks like probabilities but sums to {total:g}, not 1")
    return weights


@dataclasses.dataclass(frozen=True)
class FamilySpec:
    weight: float = 1.0
    config: dict = dataclasses.field(default_factory=dict)  # the family's own dataclass fields


def _color(value: Any, field: str) -> tuple[int, int, int]:
    if not (
        isinstance(value, (list, tuple))
        and len(value) == 3
        and all(_is_int(c) and 0 <= c <= 255 for c in value)
    ):
        raise ValueError(f"{field}: expected 3 integers [r, g, b] in 0..255, got {value!r}")
    return tuple(value)  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class CueSpec:
    """How T4's visual region is drawn on the second copy of the image."""

    style: str = setting("outline", "how the region is drawn", choices=CUE_STYLES)
    color: tuple[int, int, int] = setting((255, 0, 0), "[r, g, b], each 0..255", parse=_color)
    width: int = setting(4, "line width in px", low=1, high=32)

    def __post_init__(self):
        check_fields(self, "cue.")
        _color(self.color, "cue.color")


def _hue_band(value: Any, field: str) -> tuple[float, float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) for v in value)):
        raise ValueError(f"{field}: expected [low, high] in hue degrees, got {value!r}")
    low, high = float(value[0]), float(value[1])
    if not 0 <= low <= high <= 360:
        raise ValueError(f"{field}: expected 0 <= low <= high <= 360, got {list(value)}")
    return low, high


def _profiles(value: Any, field: str) -> dict[str, float]:
    return _weights(value, field, tuple(PROFILES))


CUE_AUGMENTABLE = (P.T1, P.T1B)  # global questions: no region decides their answer


def _cue_on(value: Any, field: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{field}: expected a list of task templates, got {value!r}")
    wrong = [t for t in value if t not in CUE_AUGMENTABLE]
    if wrong:
        raise ValueError(
            f"{field}: only {', '.join(CUE_AUGMENTABLE)} can be shown on the highlighted image "
            f"(their answer does not depend on a region), got {wrong[0]!r}"
        )
    return tuple(dict.fromkeys(value))


@dataclasses.dataclass(frozen=True)
class LevelSpec:
    """Everything that decides what one scene and its tasks look like."""

    name: str = setting("default", "the level's name (a curriculum's levels each have their own)")
    weight: float = setting(1.0, "mixture curricula: how often a scene is drawn at this level", low=0)
    scenes: int | None = setting(
        None, "staged curricula: scenes at this level before the next", low=1, high=MAX_SCENES
    )
    families: dict[str, FamilySpec] = setting(
        help="visual families: a list of names, or name -> weight or {weight, ...its config}",
        factory=dict,
        parse=lambda value, field: _families(value, field),
    )
    profiles: dict[str, float] = setting(
        help="grid size profiles (tiny, small, medium, large) -> weight",
        factory=lambda: {"small": 0.27, "medium": 0.47, "large": 0.26},
        parse=_profiles,
    )
    rows: tuple[int, int] | None = setting(
        None, "overrides the profile's rows: n or [low, high]", parse=_range
    )
    cols: tuple[int, int] | None = setting(None, "overrides the profile's columns", parse=_range)
    cell_size: tuple[int, int] = setting((42, 64), "cell side in px: n or [low, high], 16..256", parse=_range)
    exceptions: tuple[int, int] = setting((1, 8), "exception cells per scene: n or [low, high]", parse=_range)
    negative_rate: float = setting(0.05, "share of scenes with no exception", low=0, high=1)
    region_cases: dict[str, float] = setting(
        help="zero / partial / all -> weight",
        factory=lambda: {"zero": 0.33, "partial": 0.45, "all": 0.22},
        parse=_weights,
    )
    region_types: dict[str, float] = setting(
        help="numeric region kinds -> weight",
        factory=lambda: {P.ROW_RANGE: 1.0, P.COL_RANGE: 1.0, P.RECTANGLE: 1.0},
        parse=_weights,
    )
    tasks: dict[str, float] = setting(
        help="task templates -> weight; role train may also weight the training-only counting twins "
        "T4C_COUNT_VISUAL_REGION (V-Cnt: V-Clk's, the count inside the highlighted region) and "
        "T5C_COUNT_EXCLUSION (Excl-Cnt: Excl-CS's, the count of every exception cell but the excluded "
        "ones); `preview` and `signal` read a split holding them, `eval` and `score` grade ROSE items only",
        factory=lambda: {t: 1.0 for t in P.TEMPLATES},
        parse=_weights,
    )
    tasks_per_scene: int | None = setting(None, "null: every task with weight > 0", low=1)
    prompt_style: str = setting("rose", "prompt wording", choices=PROMPT_STYLES)
    cue: CueSpec = setting(help="T4's drawn region", factory=CueSpec)
    cue_on: tuple[str, ...] = setting(
        (),
        "role train: global templates (T1_COUNT_GLOBAL, T1B_CLICK_GLOBAL) shown on T4's highlighted "
        "image too, their question unchanged: reading cells through the cue without a region task",
        parse=_cue_on,
    )
    image_multiple: int | None = setting(None, "e.g. 28: both image sides a multiple of it", low=1, high=64)
    noise: float = setting(0.0, "opt-in per-cell pixel noise amplitude", low=0, high=64)

    def __post_init__(self):
        from rosetrain.generators.families import FAMILIES

        check_fields(self)
        if not self.name:
            raise ValueError(f"name: expected a non-empty string, got {self.name!r}")
        if not self.families:
            raise ValueError("families: at least one family is required")
        for name in self.families:
            if name not in FAMILIES:
                raise ValueError(f"families: {FAMILIES.unknown(name)}")
        _weights({k: v.weight for k, v in self.families.items()}, "families")
        _weights(self.profiles, "profiles", tuple(PROFILES))
        _weights(self.region_cases, "region_cases", P.REGION_CASES)
        _weights(self.region_types, "region_types", P.NUMERIC_REGIONS)
        _weights(self.tasks, "tasks", P.SPEC_TEMPLATES)
        for field in ("rows", "cols"):
            value = getattr(self, field)
            if value is not None and not (MIN_GRID <= value[0] and value[1] <= MAX_GRID):
                raise ValueError(f"{field}: grid sides must lie in {MIN_GRID}..{MAX_GRID}, got {list(value)}")
        if not 16 <= self.cell_size[0] <= self.cell_size[1] <= 256:
            raise ValueError(f"cell_size: expected 16..256 px, got {list(self.cell_size)}")
        if self.exceptions[0] < 0:
            raise ValueError(f"exceptions: must be >= 0, got {list(self.exceptions)}")
        smallest_grid = min(self.grid_choices("rows")) * min(self.grid_choices("cols"))
        if self.exceptions[1] > smallest_grid // 2:  # never capped while sampling: refused here
            raise ValueError(
                f"exceptions: up to {self.exceptions[1]} exceptions do not leave a majority "
                f"in the smallest grid ({smallest_grid} cells allow at most "
                f"{smallest_grid // 2}); use fewer exceptions or larger grids"
            )
        n_tasks = sum(1 for w in self.tasks.values() if w > 0)
        idle = [t for t in self.cue_on if self.tasks.get(t, 0) <= 0]
        if idle:
            raise ValueError(f"cue_on: {idle[0]} has no weight in this level's tasks, so nothing is shown")
        if self.tasks_per_scene is not None and not 1 <= self.tasks_per_scene <= n_tasks:
            raise ValueError(f"tasks_per_scene: expected 1..{n_tasks}, got {self.tasks_per_scene}")

    def grid_choices(self, axis: str) -> range:
        fixed = getattr(self, axis)
        if fixed is not None:
            return range(fixed[0], fixed[1] + 1)
        lows = [PROFILES[p][axis][0] for p, w in self.profiles.items() if w > 0]
        highs = [PROFILES[p][axis][1] for p, w in self.profiles.items() if w > 0]
        return range(min(lows), max(highs) + 1)


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str = setting(help="the spec's name", shown_default="the file's name")
    path: str = setting(help="the file it came from (not a key)")
    role: str = setting(help="what its data is for", choices=ROLES, shown_default="`train`")
    namespace: str = setting(
        help="seed namespace; `heldout` belongs to held-out specs only", shown_default="the role"
    )
    seed: int = setting(help="generator seed", low=0, high=SEED_64, shown_default="`0`")
    levels: tuple[LevelSpec, ...] = setting(
        help="a curriculum: a list of levels, each a mapping of level keys that override the top level's",
        shown_default="one level, of the top-level keys",
    )
    curriculum: str = setting(
        "mixture", "mixture: level drawn by weight; staged: by scene index", choices=("mixture", "staged")
    )
    heldout_family_name: str | None = setting(
        None, "role heldout: the family no training level with click tasks may use"
    )
    heldout_hue_band: tuple[float, float] | None = setting(
        None,
        "role heldout: [low, high] hue degrees no training level with click tasks may show",
        parse=lambda value, field: _hue_band(value, field),
    )
    heldout_spec: str | None = setting(None, "role train: the held-out spec to stay disjoint from")
    heldout_scenes: int = setting(
        2000, "how many held-out scenes the overlap check covers", low=0, high=MAX_HELDOUT_SCENES
    )
    description: str = setting("", "free text")
    layout: str = setting("rosetrain", "rose: ROSE subset names, bridges in their own files", choices=LAYOUTS)

    @property
    def warmup_levels(self) -> tuple[LevelSpec, ...]:
        """Mixture curricula: the leading levels with ``scenes``, run in order first."""
        if self.curriculum != "mixture":
            return ()
        count = next((i for i, level in enumerate(self.levels) if level.scenes is None), len(self.levels))
        return self.levels[:count]

    @property
    def families(self) -> set[str]:
        return {name for level in self.levels for name, f in level.families.items() if f.weight > 0}

    def resolve(self, relative: str) -> Path:
        return (Path(self.path).parent / relative).resolve()


_LEVEL_FIELDS = [f.name for f in dataclasses.fields(LevelSpec)]
_NOT_KEYS = frozenset({"path", "levels"})  # not keys of a spec's top level checked by value
_SPEC_FIELDS = ["levels", *config.valid_keys(Spec, _NOT_KEYS)]


def _build_level(raw: Mapping[str, Any], where: str) -> LevelSpec:
    for key in raw:
        if key not in _LEVEL_FIELDS:
            raise config.unknown_key(key, sorted({*_LEVEL_FIELDS, *_SPEC_FIELDS}))
    return LevelSpec(**config.from_mapping(LevelSpec, raw))


def _families(raw: Any, field: str = "families") -> dict[str, FamilySpec]:
    """``[glyph, attribute]`` or ``{glyph: 2}`` or ``{glyph: {weight: 2, subtlety: 0.8}}``;
    a family's config is checked against its config class's fields (types, unknown keys)."""
    from rosetrain.generators.families import FAMILIES, family_class

    if isinstance(raw, (list, tuple)):
        raw = {name: 1.0 for name in raw}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{field}: expected a list of names or a mapping name -> weight/config")
    out = {}
    for name, value in raw.items():
        if _is_number(value):
            out[name] = FamilySpec(weight=float(value))
        elif isinstance(value, Mapping):
            family_config = dict(value)
            weight = family_config.pop("weight", 1.0)
            if not _is_number(weight):
                raise ValueError(f"{field}.{name}.weight: expected a number, got {weight!r}")
            if name in FAMILIES:  # an unknown name is refused with the valid names by LevelSpec
                config.from_mapping(family_class(name).config_class, family_config, f"{field}.{name}.")
            out[name] = FamilySpec(weight=float(weight), config=family_config)
        else:
            raise ValueError(f"{field}.{name}: expected a weight or a mapping, got {value!r}")
    return out


def load_spec(path: str | Path, *, check_fonts: bool = True) -> Spec:
    """Read and validate a spec file. Every error names the file and the field."""
    path = Path(path)
    raw = read_yaml_mapping(path, "spec", SpecError)
    try:
        spec = spec_from_dict(raw, path)
    except (ValueError, TypeError) as err:
        raise SpecError(f"{path}: {err}") from None
    if check_fonts:
        check_families_available(spec)
    return spec


def spec_from_dict(raw: Mapping[str, Any], path: str | Path = "<dict>") -> Spec:
    raw = dict(raw)
    if "heldout_family" in raw:  # the key's old name; in rows, heldout_family is a bool
        raise ValueError("heldout_family: the key is now heldout_family_name (the family held out)")
    top = {k: raw.pop(k) for k in list(raw) if k in _SPEC_FIELDS}
    values = config.from_mapping(Spec, {k: v for k, v in top.items() if k != "levels"}, hidden=_NOT_KEYS)
    role = values.get("role", "train")
    namespace = values.get("namespace", role)
    if (namespace == RESERVED_NAMESPACE) != (role == "heldout"):
        raise ValueError(
            f"namespace: {namespace!r} with role {role!r}: the namespace "
            f"{RESERVED_NAMESPACE!r} belongs to held-out specs and only to them"
        )
    level_dicts = top.get("levels")
    if level_dicts is None:
        level_dicts = [{}]  # no levels: the top-level fields are the one level
    if not isinstance(level_dicts, list) or not level_dicts:
        raise ValueError(f"levels: expected a non-empty list of level mappings, got {level_dicts!r:.200}")
    if len(level_dicts) > MAX_LEVELS:
        raise ValueError(f"levels: at most {MAX_LEVELS} levels, got {len(level_dicts):,}")
    base_fields = {k: v for k, v in raw.items()}
    levels = []
    for i, level_raw in enumerate(level_dicts):
        if not isinstance(level_raw, Mapping):
            raise ValueError(f"levels[{i}]: expected a mapping")
        merged = {**base_fields, **level_raw}
        merged.setdefault("name", f"level{i}" if len(level_dicts) > 1 else "default")
        where = f"levels[{i}] ({merged['name']}): " if len(level_dicts) > 1 else ""
        try:
            levels.append(_build_level(merged, where))
        except (ValueError, TypeError) as err:
            message = str(err)
            raise ValueError(message if message.startswith(where) else where + message) from None
    _refuse_duplicate_names(levels)
    curriculum = values.get("curriculum", "mixture")
    if curriculum == "staged" and any(level.scenes is None for level in levels[:-1]):
        raise ValueError("levels: a staged curriculum needs `scenes` on every level but the last")
    if curriculum == "mixture":
        _check_warmup(levels)
    _weights(
        {lv.name: lv.weight for lv in levels if curriculum == "staged" or lv.scenes is None},
        "levels (weights)",
    )
    spec = Spec(
        **{
            "name": Path(str(path)).stem,
            "seed": 0,
            **values,
            "path": str(path),
            "role": role,
            "namespace": namespace,
            "levels": tuple(levels),
        }
    )
    if role == "heldout":  # the overlap check holds every one of these scenes' fingerprints
        problem = too_big(
            spec.heldout_scenes * FINGERPRINT_BYTES, f"heldout_scenes ({spec.heldout_scenes} scenes)"
        )
        if problem:
            raise ValueError(problem)
    if spec.heldout_family_name is not None:
        from rosetrain.generators.families import FAMILIES

        if role != "heldout":
            raise ValueError("heldout_family_name: only a spec with role: heldout names a held-out family")
        if spec.heldout_family_name not in FAMILIES:
            raise ValueError(f"heldout_family_name: {FAMILIES.unknown(spec.heldout_family_name)}")
    cued = next((level.name for level in spec.levels if level.cue_on), None)
    if cued is not None and role != "train":
        raise ValueError(
            f"levels: {cued}: cue_on is a training augmentation (not a ROSE item); "
            f"a spec with role {role!r} cannot use it"
        )
    for level in spec.levels:
        extra = next((t for t in P.TRAINING_TEMPLATES if level.tasks.get(t, 0) > 0), None)
        if extra is not None and role != "train":
            raise ValueError(
                f"levels: {level.name}: tasks: {extra} is a training-only template (not a ROSE item); "
                f"a spec with role {role!r} cannot use it"
            )
    if spec.heldout_hue_band is not None and role != "heldout":
        raise ValueError("heldout_hue_band: only a spec with role: heldout names a held-out hue band")
    return spec


def _refuse_duplicate_names(levels: list[LevelSpec]) -> None:
    # a mixture would never draw the second level, a staged curriculum would use the first one's settings
    first: dict[str, int] = {}
    for i, level in enumerate(levels):
        if level.name in first:
            raise ValueError(
                f"levels[{i}]: name {level.name!r} is already the name of "
                f"levels[{first[level.name]}]; give every level its own name"
            )
        first[level.name] = i


def _check_warmup(levels: list[LevelSpec]) -> None:
    """In a mixture, levels with ``scenes`` are warm-up stages: they lead, and at
    least one level (without ``scenes``) is left to mix."""
    mixed = [i for i, level in enumerate(levels) if level.scenes is None]
    if not mixed:
        raise ValueError(
            "levels: a mixture needs at least one level without `scenes` "
            "(levels with `scenes` are warm-up stages that run first)"
        )
    late = [level.name for level in levels[mixed[0] :] if level.scenes is not None]
    if late:
        raise ValueError(
            f"levels ({late[0]}): a warm-up level (one with `scenes`) must come before every mixed level"
        )


def check_families_available(spec: Spec) -> None:
    """Build each family once (validates its config) and check its fonts."""
    from rosetrain.generators.families import get_family

    for level in spec.levels:
        for name, fam in level.families.items():
            try:
                family = get_family(name, fam.config)
            except (TypeError, ValueError) as err:
                raise SpecError(f"{spec.path}: families.{name}: {err}") from None
            try:
                family.check_available()
            except RosetrainError as err:
                raise SpecError(f"{spec.path}: families.{name}: {err}") from None


def spec_sha256(spec: Spec) -> str:
    return hashlib.sha256(Path(spec.path).read_bytes()).hexdigest()
