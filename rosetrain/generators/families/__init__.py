"""Registry of visual families, by name (``glyph``, ``emoji_content``, ...)."""

from __future__ import annotations

import functools
import json

from rosetrain.core.registry import Registry
from rosetrain.generators.families.base import FamilyConfig, VisualFamily

# Modules are imported on first use so that a family whose fonts are missing
# costs nothing until a spec asks for it.
FAMILIES: Registry[str] = Registry(
    "family",
    {
        "glyph": "rosetrain.generators.families.glyph:GlyphFamily",
        "emoji_content": "rosetrain.generators.families.emoji:EmojiContentFamily",
        "emoji_style": "rosetrain.generators.families.emoji:EmojiStyleFamily",
        "sprite_edit": "rosetrain.generators.families.sprite:SpriteEditFamily",
        "sprite_pair": "rosetrain.generators.families.sprite:SpritePairFamily",
        "attribute": "rosetrain.generators.families.attribute:AttributeFamily",
    },
    argument="families",
)


def family_class(name: str) -> type[VisualFamily]:
    """The class of family ``name``; an unknown name is a RosetrainError naming the known ones."""
    cls: type[VisualFamily] = FAMILIES.load(name)
    return cls


def rose_subsets() -> dict[str, str]:
    """family -> the ROSE subset it reproduces, from each family's ``rose_subset``
    (families of rosetrain's own are left out). Imports every family module."""
    found = {name: family_class(name).rose_subset for name in FAMILIES}
    return {name: subset for name, subset in found.items() if subset is not None}


def get_family(name: str, config: dict | None = None) -> VisualFamily:
    """A family from its name and a plain config dict (validated by the family's
    config dataclass). Instances are shared: families hold caches of drawn cells."""
    return _cached_family(name, json.dumps(config or {}, sort_keys=True))


@functools.lru_cache(maxsize=64)  # one per (family, config): a spec has a dozen or so
def _cached_family(name: str, config_json: str) -> VisualFamily:
    cls = family_class(name)
    return cls(cls.config_class(**json.loads(config_json)))


__all__ = ["FAMILIES", "FamilyConfig", "VisualFamily", "family_class", "get_family", "rose_subsets"]
