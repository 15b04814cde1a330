"""The interface every visual family implements.

A family knows how to pick an *item* for a scene (which two things the majority
and the exception cells show) and how to draw one cell of each. It knows
nothing about grids, regions or tasks: the renderer tiles the two cells, so
every majority cell is pixel-identical to every other, and so is every
exception cell (unless the spec opts into per-cell noise).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, ClassVar

from PIL import Image

from rosetrain.core.errors import RosetrainError


@dataclasses.dataclass(frozen=True)
class FamilyConfig:
    """Knobs shared by all families. ``subtlety`` in [0, 1]: 0 makes the exception
    easy to see, 1 makes it as close to the majority as the family allows."""

    subtlety: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.subtlety) <= 1.0:
            raise ValueError(f"subtlety must be in [0, 1], got {self.subtlety!r}")


class VisualFamily:
    """Base class. Subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]  # registry key used in specs, e.g. "glyph"
    primitive_type: ClassVar[str]  # release field, e.g. "CHINESE_GLYPH"
    config_class: ClassVar[type[FamilyConfig]] = FamilyConfig
    # The ROSE subset this family reproduces (its ``rose_subset`` in ``layout: rose``);
    # None for a family of rosetrain's own.
    rose_subset: ClassVar[str | None] = None

    @classmethod
    def reproduces_rose(cls, config: dict[str, Any] | None = None) -> bool:
        """Whether rows drawn with the spec's ``config`` for this family (a plain
        dict, as in a scene) are of :attr:`rose_subset`."""
        return cls.rose_subset is not None

    def __init__(self, config: FamilyConfig | None = None):
        self.config = config or self.config_class()

    def check_available(self) -> None:
        """Raise RosetrainError naming what is missing (a font, say) if this family
        cannot render on this machine. Called once when a spec is validated."""

    def warm_up(self) -> None:
        """Compute now what every scene of this family reuses (fonts resolved,
        pairs ranked). ``generate`` calls it in the parent process before forking
        its workers, which inherit the result instead of each computing it."""

    def sample_item(self, rng: random.Random) -> dict[str, Any]:
        """Pick the scene's item from ``rng`` only. Must return JSON-serialisable
        data that fully determines both cells (it is written into every row and
        into the scene fingerprint)."""
        raise NotImplementedError

    def draw_cells(self, item: dict[str, Any], cell_size: int) -> tuple[Image.Image, Image.Image]:
        """Return ``(majority_cell, exception_cell)``: RGB images of exactly
        ``cell_size`` x ``cell_size`` that differ in at least one pixel."""
        raise NotImplementedError

    def describe(self, item: dict[str, Any]) -> dict[str, Any]:
        """Descriptive release-style fields for a row (e.g. ``background_char``,
        ``target_char``, ``font_name``, ``pair_key``). Defaults to the item."""
        return dict(item)


def unavailable(family: str, what: str, fix: str) -> RosetrainError:
    return RosetrainError(f"family {family!r} cannot render: {what}. {fix}")
