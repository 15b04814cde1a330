"""One module per CLI sub-command (see rosetrain.cli); flags several share live here,
and the types of every numeric option."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from rosetrain.core.config import SEED_32, SEED_64, Range

# Bounds the numeric options share (a value past them cannot run; memory decides below).
MAX_PROCESSES = 1024
MAX_TOKENS = 1_000_000
MAX_SCENES = 10**9


def integer(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in [low, high]. argparse turns the error into
    one line naming the option, and exit code 2."""
    bounds = Range(low, high)

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or not bounds.contains(value):
            raise argparse.ArgumentTypeError(f"expected an integer {bounds.describe()}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def number(low: float, high: float, low_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in [low, high] (``(low, high]`` when
    ``low_open``); NaN and infinity are refused."""
    bounds = Range(low, high, low_open=low_open)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not bounds.contains(value):
            raise argparse.ArgumentTypeError(f"expected a number {bounds.describe()}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def seed(high: int = SEED_64) -> Callable[[str], int]:
    """A seed: scene seeds are hashed (any 64-bit one); seeds that reach numpy or
    torch (training, the tiny model) stop at 2**32-1."""
    return integer(0, high)


SEED_NUMPY = SEED_32


def add_bridges_flags(parser: argparse.ArgumentParser, what: str = "read") -> None:
    """``--bridges`` / ``--no-bridges``: whether the release's bridge files
    (metadata_<split>_global_click_bridge.jsonl, ..._matched_local_count_bridge.jsonl)
    are used beside the main metadata file; neither: only when there is no main file."""
    bridges = parser.add_mutually_exclusive_group()
    bridges.add_argument(
        "--bridges",
        dest="bridges",
        action="store_true",
        default=None,
        help=f"also {what} the release's bridge files (metadata_<split>_*_bridge.jsonl)",
    )
    bridges.add_argument(
        "--no-bridges", dest="bridges", action="store_false", help=f"never {what} bridge files"
    )
