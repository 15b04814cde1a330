"""Registry of visual families, by name (``glyph``, ``emoji_content``, ...)."""
from __future__ import annotations

import importlib

from rosetrain.families.base import FamilyConfig, VisualFamily

# name -> "module:Class"; modules are imported on first use so that a family
# whose fonts are missing costs nothing until a spec asks for it.
FAMILIES = {
    "glyph": "rosetrain.families.glyph:GlyphFamily",
    "emoji_content": "rosetrain.families.emoji:EmojiContentFamily",
    "emoji_style": "rosetrain.families.emoji:EmojiStyleFamily",
    "sprite_edit": "rosetrain.families.sprite:SpriteEditFamily",
    "sprite_pair": "rosetrain.families.sprite:SpritePairFamily",
    "attribute": "rosetrain.families.attribute:AttributeFamily",
}


def family_class(name: str) -> type[VisualFamily]:
    if name not in FAMILIES:
        raise KeyError(name)
    module_name, class_name = FAMILIES[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def get_family(name: str, config: dict | None = None) -> VisualFamily:
    """Build a family from its name and a plain config dict (validated)."""
    cls = family_class(name)
    return cls(cls.config_class(**(config or {})))


__all__ = ["FAMILIES", "FamilyConfig", "VisualFamily", "family_class", "get_family"]
