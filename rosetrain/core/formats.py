"""How figures are written for people: rates as percentages, intervals as [low, high]."""

from __future__ import annotations

from collections.abc import Sequence


def pct(value: float | None, signed: bool = False) -> str:
    """A rate in 0..1 as a percentage with one decimal (with its sign for a delta); ``-`` when missing."""
    if value is None:
        return "-"
    return f"{100 * value:+.1f}" if signed else f"{100 * value:.1f}"


def ci(interval: Sequence[float | None] | None, signed: bool = True) -> str:
    """A confidence interval as ``[low, high]`` in percentage points (signed: a
    delta's); ``-`` when it could not be estimated."""
    if not interval or interval[0] is None:
        return "-"
    return f"[{pct(interval[0], signed)}, {pct(interval[1], signed)}]"
