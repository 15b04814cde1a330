"""The paper's bridge figures, as the official analysis scripts compute them.

ROSE v0.1 reports its bridge controls through two scripts of its repository:
``analysis/evaluate_global_click_bridge.py`` (T1B, paired with the scene's
T1) and ``analysis/evaluate_matched_local_count_bridge.py`` (T2B, paired with
the T3 item whose region it counts). This module writes the files those
scripts write, with their names, keys and values, as they write them when
given the bridge's own predictions and the main run's ``per_item_eval.jsonl``
(so no prediction is "extra" and none is a duplicate). The per-item rows are
the ones rosetrain scored (their official fields); the figures are computed
here, over rows sorted by item id, the scripts' order of addition, so every
float is theirs. Pairing follows the scripts: the main row of the bridge's
source item id (T2B: its click item id first), else the last main row of the
same subset and scene, of the same model.
"""

from __future__ import annotations

from collections.abc import Sequence

from rosetrain.scoring.bridges import global_click, matched_count
from rosetrain.scoring.bridges.common import Bridge, Kind, analyze_kind
from rosetrain.scoring.bridges.rows import RowLines, RowsInMemory, ScoredRows
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.official_files import Expected, RunInfo

__all__ = ["KINDS", "Bridge", "RowLines", "RowsInMemory", "ScoredRows", "bridge_outputs"]

KINDS = (global_click.KIND, matched_count.KIND)


def bridge_outputs(
    expected: Expected,
    frame: Frame,
    rows: ScoredRows,
    info: RunInfo | None = None,
    main_eval: str | None = None,
    kinds: Sequence[Kind] = KINDS,
) -> list[Bridge]:
    """The official figures of each bridge of ``kinds`` the run scored rows of
    (``rows``: the per-item rows by frame position; ``main_eval``: the path the
    summaries name as the main run's per-item file)."""
    info = info or RunInfo()
    found = (analyze_kind(kind, expected, frame, rows, info, main_eval) for kind in kinds)
    return [bridge for bridge in found if bridge is not None]
