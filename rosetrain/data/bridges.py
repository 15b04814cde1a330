"""Where a split's bridge controls live on disk.

The ROSE release keeps its bridge controls (T1B, T2B) out of the main
metadata file, in ``metadata_<split>_global_click_bridge.jsonl`` and
``metadata_<split>_matched_local_count_bridge.jsonl``, so the official
evaluator's figures cover the five main templates only. A spec with
``layout: rose`` writes its splits the same way; rosetrain's own layout keeps
every row in the main file.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from rosetrain.core.protocol import T1B, T2B

BRIDGE_FILE_TAGS = {T1B: "global_click_bridge", T2B: "matched_local_count_bridge"}
# How a metadata line (written with sorted keys) names each bridge template.
_MARKERS = {template: f'"task_template": "{template}"'.encode() for template in BRIDGE_FILE_TAGS}


def split_names(split: str, rose_layout: bool) -> dict[str | None, str]:
    """The split each row of ``split`` is read as, by its bridge template (None:
    the main templates): with ``layout: rose`` a bridge row belongs to the
    release's split of its bridge file (``test_global_click_bridge``), in every
    format; otherwise every row is ``split``'s."""
    names: dict[str | None, str] = {None: split}
    if rose_layout:
        names.update({template: f"{split}_{tag}" for template, tag in BRIDGE_FILE_TAGS.items()})
    return names


def bridge_paths(out_dir: Path, split: str) -> dict[str, Path]:
    return {template: out_dir / f"metadata_{split}_{tag}.jsonl" for template, tag in BRIDGE_FILE_TAGS.items()}


def bridge_template(line: bytes) -> str | None:
    """The bridge template a metadata line belongs to, or None for a main-template row."""
    for template, marker in _MARKERS.items():
        if marker in line:
            return template
    return None


def route_lines(data: bytes, main: BinaryIO, bridges: dict[str, BinaryIO]) -> int:
    """Write each line of ``data`` to ``main``, or to its bridge file when
    ``bridges`` has one for its template; returns the number of lines."""
    if not bridges:
        main.write(data)
        return data.count(b"\n")
    lines = data.splitlines(keepends=True)
    for line in lines:
        template = bridge_template(line)
        (bridges[template] if template in bridges else main).write(line)
    return len(lines)
