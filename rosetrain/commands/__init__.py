"""One module per CLI sub-command (see rosetrain.cli); flags several share live here."""

from __future__ import annotations

import argparse


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
