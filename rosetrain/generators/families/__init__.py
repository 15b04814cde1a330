"""Registry of visual families, by name (``glyph``, ``emoji_content``, ...)."""

from __future__ import annotations

import functools
import importlib
import json

from rosetrain.generators.families.base import FamilyConfig, VisualFamily

# name -> "module:Class"; modules are imported on first use so that a family
# whose fonts are missing costs nothing until a spec asks for it.
FAMILIES = {
    "glyph": "rosetrain.generators.families.glyph:GlyphFamily",
    "emoji_content": "rosetrain.generators.families.emoji:EmojiContentFamily",
    "emoji_style": "rosetrain.generators.families.emoji:EmojiStyleFamily",
    "sprite_edit": "rosetrain.generators.families.sprite:SpriteEditFamily",
    "sprite_pair": "rosetrain.generators.families.sprite:SpritePairFamily",
    "attribute": "rosetrain.generators.families.attribute:AttributeFamily",
}


def family_class(name: str) -> type[VisualFamily]:
    if name not in FAMILIES:
        raise KeyError(name)
    module_name, class_name = FAMILIES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def get_family(name: str, config: dict | None = None) -> VisualFamily:
    """A family from its name and a plain config dict (validated by the family's
    config dataclass). Instances are shared: families hold caches of drawn cells."""
    return _cached_family(name, json.dumps(config or {}, sort_keys=True))


@functools.lru_cache(maxsize=64)  # one per (family, config): a spec has a dozen or so
def _cached_family(name: str, config_json: str) -> VisualFamily:
    cls = family_class(name)
    return cls(cls.config_class(**json.loads(config_json)))


__all__ = ["FAMILIES", "FamilyConfig", "VisualFamily", "family_class", "get_family"]
