"""The weighting rule: from a cell's measured passes and failures to its share
of the next round's data.

Per axis (template, region case, family, grid profile, target count), each
value is a cell with ``n`` items of which ``fails`` failed:

- ``failures`` mode: the raw weight is the smoothed failure rate
  ``(fails + prior) / (n + 2 * prior)`` (the mean of a Beta(prior, prior)
  posterior; ``prior`` 1 is add-one smoothing), so a cell of 3 items cannot
  swing the mixture;
- ``balanced`` mode: the same raw weight, but only for cells whose smoothed
  pass rate lies inside the band (0.1..0.9 by default); cells outside it (always
  failed, or learned) get 0 and so end at the floor: the data goes where the
  model passes *sometimes*, which is where RL's groups have signal;

then the raw weights become shares, and every share is held between
``floor / K`` and ``cap / K`` (``K`` cells on the axis; by default half and
three times the uniform share): nothing already learned is dropped, nothing
takes over the mixture. The shares outside the bounds are set to the bound and
the rest is spread over the free cells in proportion to their raw weights:
each share is ``clip(s x raw, floor / K, cap / K)`` for the one scale ``s`` at
which they sum to 1.

A cell the run did not measure (0 items: G-Clk after an eval without
``--bridges``) has no failure rate to weight by: it keeps the source spec's
share, but never more than the least share of a measured cell that failed,
since a failure measured outweighs one guessed (a guess from the axis's pooled
rate gave two unmeasured templates 15.1% each, above the 14.0% of templates that
failed 9 of 9).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rosetrain.core.errors import RosetrainError

MODES = ("failures", "balanced")
EPS = 1e-12
CEILING_STEPS = 60  # bisection steps for the unmeasured cells' ceiling: 2**-60 of a share


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
        if self.axes is not None and not self.axes:  # '' or ',,': weighting nothing is no curriculum
            raise RosetrainError(
                "axes: names no axis; name one or more (template, region_case, family, profile, "
                "target_count), or leave it unset to weight every axis",
                argument="axes",
            )


def smoothed_failure(n: int, fails: int, prior: float = 1.0) -> float:
    return (fails + prior) / (n + 2 * prior)


def raw_weight(n: int, fails: int, rule: Rule) -> float:
    failure = smoothed_failure(n, fails, rule.prior)
    if rule.mode == "balanced":
        low, high = rule.band
        return failure if low <= 1 - failure <= high else 0.0
    return failure


def bounded_shares(raw: Mapping[Any, float], low: float, high: float, total: float = 1.0) -> dict[Any, float]:
    """Shares of ``total``, each ``clip(scale x raw, low, high)`` for the one scale
    at which they sum to ``total`` (uniform where all raw are 0). Where even every
    positive share at the cap leaves some over, the cells of raw 0 share it evenly
    (up to the cap); where the bounds cannot all hold, the shares are uniform.

    Fixing the shares under the floor first and then those over the cap (the old
    way) could leave one over the cap that had room under it: 50% against a 3/7 cap."""
    keys = list(raw)
    largest = max(raw.values(), default=0.0)
    if not largest > 0 or not len(keys) * low < total < len(keys) * high:
        return dict.fromkeys(keys, total / len(keys)) if keys else {}
    # relative to the largest, and not under 1e-300: the breakpoints below stay finite
    rel = {k: max(raw[k] / largest, 1e-300) if raw[k] > 0 else 0.0 for k in keys}

    def clipped(scale: float) -> dict[Any, float]:
        return {k: min(max(scale * rel[k], low), high) for k in keys}

    # their sum rises piecewise linearly with the scale, bending where a share meets a bound
    bends = sorted({b for k in keys if rel[k] > 0 for b in (low / rel[k], high / rel[k])})
    before = 0.0
    for bend in bends:
        reached = sum(clipped(bend).values())
        if reached >= total:
            start = sum(clipped(before).values())  # < total: K x low at scale 0
            return settle_free(
                clipped(before + (total - start) * (bend - before) / (reached - start)), rel, low, high, total
            )
        before = bend
    capped = clipped(bends[-1])  # every positive share at the cap, and some left over
    zeros = [k for k in keys if rel[k] == 0]  # at the floor, with room: total < K x high
    over = (total - sum(capped.values())) / len(zeros)
    return {k: s + over if k in zeros else s for k, s in capped.items()}


def settle_free(
    shares: dict[Any, float], rel: Mapping[Any, float], low: float, high: float, total: float
) -> dict[Any, float]:
    """``shares`` with the free ones (strictly inside the bounds) set to what is left
    of ``total``, in proportion: the sum is then ``total`` to the last bit."""
    free = [k for k, s in shares.items() if low < s < high]
    free_rel = sum(rel[k] for k in free)
    rest = total - sum(s for k, s in shares.items() if k not in free)
    return {k: rest * rel[k] / free_rel if k in free else s for k, s in shares.items()}


def source_of(values: Sequence[Any], source: Mapping[Any, float] | None) -> dict[Any, float]:
    """The source spec's shares over ``values``, summing to 1 (uniform without any)."""
    weights = {v: max(float((source or {}).get(v, 0.0)), 0.0) for v in values}
    total = sum(weights.values())
    return {v: w / total if total > 0 else 1 / len(values) for v, w in weights.items()}


def axis_shares(
    counts: Mapping[Any, tuple[int, int]], rule: Rule, source: Mapping[Any, float] | None = None
) -> dict[Any, float]:
    """``value -> (n, fails)`` to ``value -> share`` by the rule. A value the run
    did not measure (n = 0) keeps its ``source`` share (the source spec's; uniform
    without one), lowered where needed to the least share of a measured value that
    failed; the measured values share the rest, floored and capped."""
    values = list(counts)
    if not values:
        return {}
    kept_source = source_of(values, source)
    measured = {v: raw_weight(n, fails, rule) for v, (n, fails) in counts.items() if n > 0}
    failed = [v for v in measured if counts[v][1] > 0]
    low, high = rule.floor / len(values), rule.cap / len(values)

    def fill(ceiling: float) -> dict[Any, float]:
        kept = {v: min(s, ceiling) for v, s in kept_source.items() if v not in measured}
        shares = bounded_shares(measured, low, high, max(1.0 - sum(kept.values()), 0.0))
        return {v: kept[v] if v in kept else shares[v] for v in values}

    def sound(shares: Mapping[Any, float]) -> bool:
        most_kept = max((s for v, s in shares.items() if v not in measured), default=0.0)
        return most_kept <= min((shares[v] for v in failed), default=1.0) + EPS

    shares = fill(1.0)
    if not measured or sound(shares):
        return shares
    # the largest ceiling that holds: the kept shares rise with it, the measured fall
    good, bad = 0.0, 1.0
    for _ in range(CEILING_STEPS):
        middle = (good + bad) / 2
        good, bad = (middle, bad) if sound(fill(middle)) else (good, middle)
    return fill(good)
