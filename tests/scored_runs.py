"""Scored runs made by hand for the curriculum tests: one per-item row of a
scored run (the fields ``rosetrain curriculum`` reads) and the run folder.
A helper module the test files import (``from scored_runs import row``);
fixtures live in conftest.py."""

from __future__ import annotations

import json
from pathlib import Path

from rosetrain.core.protocol import T1, T1B


def row(i, template, passed, *, family="attribute", case="partial", count=1, subset=None, errored=False):
    """Item ``i`` of ``template``: passed or not, its region case (a global task's
    is "all"), target count, family and subset, and whether its request failed."""
    local = template not in (T1, T1B)
    return {
        "item_id": f"item-{i}",
        "scene_id": f"scene-{i}",
        "pass": int(passed),
        "task_template": template,
        "region_type": "ROW_RANGE" if local else "GLOBAL",
        "region_case": case if local else "all",
        "family": family,
        "rose_subset": subset or f"rosetrain-{family}",
        "grid_size_profile": "custom",
        "target_count": count,
        "api_error": int(errored),
    }


def write_run(folder: Path, rows: list[dict]) -> Path:
    """A run folder holding ``rows`` as its per_item_eval.jsonl."""
    folder.mkdir(parents=True)
    (folder / "per_item_eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder
