"""Generator specs: what scenes and tasks a dataset holds.

A spec is YAML read with ``yaml.safe_load`` into frozen dataclasses that
validate themselves, so a typo fails before any output is written, with the
field and the file named. A spec with ``levels`` is a curriculum: each level
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

from rosetrain.core import protocol as P
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import read_yaml_mapping

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


class SpecError(RosetrainError):
    pass


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


@dataclasses.dataclass(frozen=True)
class CueSpec:
    """How T4's visual region is drawn on the second copy of the image."""

    style: str = "outline"
    color: tuple[int, int, int] = (255, 0, 0)
    width: int = 4

    def __post_init__(self):
        if self.style not in CUE_STYLES:
            raise ValueError(f"cue.style: {self.style!r} is not one of {', '.join(CUE_STYLES)}")
        if not (
            isinstance(self.color, (list, tuple))
            and len(self.color) == 3
            and all(_is_int(c) and 0 <= c <= 255 for c in self.color)
        ):
            raise ValueError(f"cue.color: expected 3 integers [r, g, b] in 0..255, got {self.color!r}")
        if not _is_int(self.width) or not 1 <= self.width <= 32:
            raise ValueError(f"cue.width: expected an integer 1..32, got {self.width!r}")


@dataclasses.dataclass(frozen=True)
class LevelSpec:
    """Everything that decides what one scene and its tasks look like."""

    name: str = "default"
    weight: float = 1.0
    scenes: int | None = None  # staged curricula: scenes at this level before the next
    families: dict[str, FamilySpec] = dataclasses.field(default_factory=dict)
    profiles: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"small": 0.27, "medium": 0.47, "large": 0.26}
    )
    rows: tuple[int, int] | None = None  # overrides the profile's rows
    cols: tuple[int, int] | None = None
    cell_size: tuple[int, int] = (42, 64)
    exceptions: tuple[int, int] = (1, 8)
    negative_rate: float = 0.05
    region_cases: dict[str, float] = dataclasses.field(
        default_factory=lambda: {"zero": 0.33, "partial": 0.45, "all": 0.22}
    )
    region_types: dict[str, float] = dataclasses.field(
        default_factory=lambda: {P.ROW_RANGE: 1.0, P.COL_RANGE: 1.0, P.RECTANGLE: 1.0}
    )
    tasks: dict[str, float] = dataclasses.field(default_factory=lambda: {t: 1.0 for t in P.TEMPLATES})
    tasks_per_scene: int | None = None  # None: every task with weight > 0
    prompt_style: str = "rose"
    cue: CueSpec = dataclasses.field(default_factory=CueSpec)
    image_multiple: int | None = None  # e.g. 28: both image sides a multiple of it
    noise: float = 0.0  # opt-in per-cell pixel noise amplitude (0..64)

    def __post_init__(self):
        from rosetrain.generators.families import FAMILIES

        self._check_scalar_types()
        if not self.families:
            raise ValueError("families: at least one family is required")
        for name in self.families:
            if name not in FAMILIES:
                raise ValueError(f"families: unknown family {name!r}; valid: {', '.join(FAMILIES)}")
        _weights({k: v.weight for k, v in self.families.items()}, "families")
        _weights(self.profiles, "profiles", tuple(PROFILES))
        _weights(self.region_cases, "region_cases", P.REGION_CASES)
        _weights(self.region_types, "region_types", P.NUMERIC_REGIONS)
        _weights(self.tasks, "tasks", P.TEMPLATES)
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
        if not 0 <= self.negative_rate <= 1:
            raise ValueError(f"negative_rate: expected 0..1, got {self.negative_rate}")
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"prompt_style: {self.prompt_style!r} is not one of {', '.join(PROMPT_STYLES)}")
        n_tasks = sum(1 for w in self.tasks.values() if w > 0)
        if self.tasks_per_scene is not None and not 1 <= self.tasks_per_scene <= n_tasks:
            raise ValueError(f"tasks_per_scene: expected 1..{n_tasks}, got {self.tasks_per_scene}")
        if self.image_multiple is not None and not 1 <= self.image_multiple <= 64:
            raise ValueError(f"image_multiple: expected 1..64, got {self.image_multiple}")
        if not 0 <= self.noise <= 64:
            raise ValueError(f"noise: expected 0..64, got {self.noise}")

    def _check_scalar_types(self) -> None:
        """Named errors for values of the wrong type (a string weight, ``true`` as a count),
        before any comparison would fail with Python's wording or silently accept them."""
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name: expected a non-empty string, got {self.name!r}")
        for field in ("weight", "negative_rate", "noise"):
            if not _is_number(getattr(self, field)):
                raise ValueError(f"{field}: expected a number, got {getattr(self, field)!r}")
        for field in ("scenes", "tasks_per_scene", "image_multiple"):
            value = getattr(self, field)
            if value is not None and not _is_int(value):
                raise ValueError(f"{field}: expected an integer, got {value!r}")
        if self.scenes is not None and self.scenes < 1:
            raise ValueError(f"scenes: expected at least 1, got {self.scenes}")

    def grid_choices(self, axis: str) -> range:
        fixed = getattr(self, axis)
        if fixed is not None:
            return range(fixed[0], fixed[1] + 1)
        lows = [PROFILES[p][axis][0] for p, w in self.profiles.items() if w > 0]
        highs = [PROFILES[p][axis][1] for p, w in self.profiles.items() if w > 0]
        return range(min(lows), max(highs) + 1)


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    path: str
    role: str
    namespace: str
    seed: int
    levels: tuple[LevelSpec, ...]
    curriculum: str = "mixture"  # mixture: level drawn by weight; staged: by scene index
    heldout_family_name: str | None = None  # role heldout: the family no training spec may use
    heldout_spec: str | None = None  # role train: the held-out spec to stay disjoint from
    heldout_scenes: int = 2000  # how many held-out scenes the overlap check covers
    description: str = ""
    layout: str = "rosetrain"  # rose: ROSE subset names, bridges in their own files

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


_LEVEL_FIELDS = {f.name for f in dataclasses.fields(LevelSpec)}
_SPEC_FIELDS = {
    "name",
    "role",
    "namespace",
    "seed",
    "levels",
    "curriculum",
    "heldout_family_name",
    "heldout_spec",
    "heldout_scenes",
    "description",
    "layout",
}
LAYOUTS = ("rosetrain", "rose")


def _build_level(raw: Mapping[str, Any], where: str) -> LevelSpec:
    unknown = set(raw) - _LEVEL_FIELDS
    if unknown:
        raise ValueError(
            f"{where}unknown field {sorted(unknown)[0]!r}; valid: {', '.join(sorted(_LEVEL_FIELDS | _SPEC_FIELDS))}"
        )
    kwargs = dict(raw)
    if "families" in kwargs:
        kwargs["families"] = _families(kwargs["families"])
    if "profiles" in kwargs:
        kwargs["profiles"] = _weights(kwargs["profiles"], "profiles", tuple(PROFILES))
    for field in ("rows", "cols", "cell_size", "exceptions"):
        if kwargs.get(field) is not None:
            kwargs[field] = _range(kwargs[field], field)
    for field in ("region_cases", "region_types", "tasks"):
        if field in kwargs:
            kwargs[field] = _weights(kwargs[field], field)
    if "cue" in kwargs:
        kwargs["cue"] = _cue(kwargs["cue"])
    return LevelSpec(**kwargs)


def _cue(raw: Any) -> CueSpec:
    if raw is None:
        return CueSpec()
    if not isinstance(raw, Mapping):
        raise ValueError(f"cue: expected a mapping (style, color, width), got {raw!r}")
    valid = [f.name for f in dataclasses.fields(CueSpec)]
    unknown = sorted(str(key) for key in raw if key not in valid)
    if unknown:
        raise ValueError(f"cue: unknown field {unknown[0]!r}; valid: {', '.join(valid)}")
    cue = dict(raw)
    if isinstance(cue.get("color"), list):
        cue["color"] = tuple(cue["color"])
    return CueSpec(**cue)


def _families(raw: Any) -> dict[str, FamilySpec]:
    """``[glyph, attribute]`` or ``{glyph: 2}`` or ``{glyph: {weight: 2, subtlety: 0.8}}``."""
    if isinstance(raw, (list, tuple)):
        raw = {name: 1.0 for name in raw}
    if not isinstance(raw, Mapping):
        raise ValueError("families: expected a list of names or a mapping name -> weight/config")
    out = {}
    for name, value in raw.items():
        if _is_number(value):
            out[name] = FamilySpec(weight=float(value))
        elif isinstance(value, Mapping):
            config = dict(value)
            weight = config.pop("weight", 1.0)
            if not _is_number(weight):
                raise ValueError(f"families.{name}.weight: expected a number, got {weight!r}")
            out[name] = FamilySpec(weight=float(weight), config=config)
        else:
            raise ValueError(f"families.{name}: expected a weight or a mapping, got {value!r}")
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
    role = top.get("role", "train")
    if role not in ROLES:
        raise ValueError(f"role: {role!r} is not one of {', '.join(ROLES)}")
    namespace = str(top.get("namespace", role))
    if (namespace == RESERVED_NAMESPACE) != (role == "heldout"):
        raise ValueError(
            f"namespace: {namespace!r} with role {role!r}: the namespace "
            f"{RESERVED_NAMESPACE!r} belongs to held-out specs and only to them"
        )
    level_dicts = top.get("levels")
    if level_dicts is None:
        level_dicts = [{}]  # no levels: the top-level fields are the one level
    if not isinstance(level_dicts, list) or not level_dicts:
        raise ValueError(f"levels: expected a non-empty list of level mappings, got {level_dicts!r}")
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
    curriculum = top.get("curriculum", "mixture")
    if curriculum not in ("mixture", "staged"):
        raise ValueError(f"curriculum: {curriculum!r} is not one of mixture, staged")
    if curriculum == "staged" and any(level.scenes is None for level in levels[:-1]):
        raise ValueError("levels: a staged curriculum needs `scenes` on every level but the last")
    if curriculum == "mixture":
        _check_warmup(levels)
    _weights(
        {lv.name: lv.weight for lv in levels if curriculum == "staged" or lv.scenes is None},
        "levels (weights)",
    )
    spec = Spec(
        name=str(top.get("name", Path(str(path)).stem)),
        path=str(path),
        role=role,
        namespace=namespace,
        seed=_top_int(top, "seed", 0),
        levels=tuple(levels),
        curriculum=curriculum,
        heldout_family_name=top.get("heldout_family_name"),
        heldout_spec=_top_str(top, "heldout_spec"),
        heldout_scenes=_top_int(top, "heldout_scenes", 2000, minimum=0),
        description=str(top.get("description", "")),
        layout=str(top.get("layout", "rosetrain")),
    )
    if spec.layout not in LAYOUTS:
        raise ValueError(f"layout: {spec.layout!r} is not one of {', '.join(LAYOUTS)}")
    if spec.heldout_family_name is not None:
        from rosetrain.generators.families import FAMILIES

        if role != "heldout":
            raise ValueError("heldout_family_name: only a spec with role: heldout names a held-out family")
        if spec.heldout_family_name not in FAMILIES:
            raise ValueError(
                f"heldout_family_name: unknown family {spec.heldout_family_name!r}; valid: {', '.join(FAMILIES)}"
            )
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


def _top_int(top: Mapping[str, Any], field: str, default: int, minimum: int | None = None) -> int:
    value = top.get(field, default)
    if not _is_int(value) or (minimum is not None and value < minimum):
        raise ValueError(
            f"{field}: expected an integer{'' if minimum is None else f' >= {minimum}'}, got {value!r}"
        )
    return value


def _top_str(top: Mapping[str, Any], field: str) -> str | None:
    value = top.get(field)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{field}: expected a string, got {value!r}")
    return value


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
