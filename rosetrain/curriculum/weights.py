"""The weighting rule: from a cell's measured passes and failures to its share
of the next round's data.

Per axis (template, region case, family, grid profile, target count), each
value is a cell with ``n`` items of which ``fails`` failed:

- ``failures`` mode: the raw weight is the smoothed failure rate
  ``(fails + prior) / (n + 2 * prior)`` (the mean of a Beta(prior, prior)
  posterior; ``prior`` 1 is add-one smoothing), so a cell of 3 items cannot
  swing the mixture; a cell never measured gets the axis's pooled rate;
- ``balanced`` mode: the same raw weight, but only for cells whose smoothed
  pass rate lies inside the band (0.1..0.9 by default); cells outside it (always
  failed, or learned) get 0 and so end at the floor: the data goes where the
  model passes *sometimes*, which is where RL's groups have signal;

then the raw weights become shares, and every share is held between
``floor / K`` and ``cap / K`` (``K`` cells on the axis; by default half and
three times the uniform share): nothing already learned is dropped, nothing
takes over the mixture. The shares outside the bounds are set to the bound and
the rest is spread over the free cells in proportion to their raw weights,
until none is outside.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from rosetrain.core.errors import RosetrainError

MODES = ("failures", "balanced")
EPS = 1e-12


@dataclasses.dataclass(frozen=True)
class Rule:
    """The options of the weighting rule (the CLI's flags, with their defaults)."""

    mode: str = "failures"
    prior: float = 1.0  # Beta(prior, prior): 1 is add-one smoothing
    floor: float = 0.5  # x the uniform share
    cap: float = 3.0  # x the uniform share
    band: tuple[float, float] = (0.1, 0.9)  # balanced mode: smoothed pass rates that count
    axes: tuple[str, ...] | None = None  # the axes to weight (None: all); the rest keep the source's

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise RosetrainError(f"mode: {self.mode!r} is not one of {', '.join(MODES)}", argument="mode")
        if not self.prior > 0:
            raise RosetrainError(f"prior: expected a number > 0, got {self.prior}", argument="prior")
        if not 0 <= self.floor <= 1:
            raise RosetrainError(
                f"floor: expected 0..1 (a multiple of the uniform share), got {self.floor}", argument="floor"
            )
        if not self.cap >= 1:
            raise RosetrainError(
                f"cap: expected >= 1 (a multiple of the uniform share), got {self.cap}", argument="cap"
            )
        low, high = self.band
        if not 0 <= low < high <= 1:
            raise RosetrainError(f"band: expected 0 <= low < high <= 1, got {low} {high}", argument="band")


def smoothed_failure(n: int, fails: int, prior: float = 1.0) -> float:
    return (fails + prior) / (n + 2 * prior)


def raw_weight(n: int, fails: int, rule: Rule) -> float:
    failure = smoothed_failure(n, fails, rule.prior)
    if rule.mode == "balanced":
        low, high = rule.band
        return failure if low <= 1 - failure <= high else 0.0
    return failure


def bounded_shares(raw: Mapping[str, float], floor: float, cap: float) -> dict[str, float]:
    """Shares proportional to ``raw`` (uniform where all are 0), each held in
    ``[floor / K, cap / K]``; they sum to 1."""
    keys = list(raw)
    if not keys:
        return {}
    low, high = floor / len(keys), cap / len(keys)
    fixed: dict[str, float] = {}
    while True:
        free = [k for k in keys if k not in fixed]
        if not free:
            total = sum(fixed.values())
            return {k: fixed[k] / total for k in keys}
        remaining = 1.0 - sum(fixed.values())
        free_total = sum(raw[k] for k in free)
        shares = {k: remaining * (raw[k] / free_total if free_total > 0 else 1 / len(free)) for k in free}
        # lows first: lifting them lowers every free share, which may settle the highs
        below = [k for k in free if shares[k] < low - EPS]
        above = [k for k in free if shares[k] > high + EPS]
        if below:
            fixed.update(dict.fromkeys(below, low))
        elif above:
            fixed.update(dict.fromkeys(above, high))
        else:
            return {k: fixed[k] if k in fixed else shares[k] for k in keys}


def axis_shares(counts: Mapping[Any, tuple[int, int]], rule: Rule) -> dict[Any, float]:
    """``value -> (n, fails)`` to ``value -> share`` by the rule. A value the run
    did not measure (n = 0) is taken to fail as often as the axis's measured
    items pooled: with the bare prior (0.5) a model passing 90% would get most of
    its data on whatever the probe split happened not to hold."""
    n_all = sum(n for n, _ in counts.values())
    fails_all = sum(f for _, f in counts.values())
    raw = {
        value: raw_weight(n, fails, rule) if n else raw_weight(n_all, fails_all, rule)
        for value, (n, fails) in counts.items()
    }
    return bounded_shares(raw, rule.floor, rule.cap)
