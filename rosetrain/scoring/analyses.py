"""The official analysis outputs of a scored run: the two bridge scripts'
(``bridges.py``) and the scene-consistency script's (``consistency.py``),
computed once from the rows the one scorer wrote, for the summary and the files."""

from __future__ import annotations

import dataclasses
from typing import Any

from rosetrain.scoring.bridges import KINDS, Bridge, ScoredRows, bridge_outputs
from rosetrain.scoring.consistency import consistency_files, scene_consistency
from rosetrain.scoring.frame import Frame
from rosetrain.scoring.official_files import Expected, RunInfo


@dataclasses.dataclass
class Analyses:
    bridges: list[Bridge]
    consistency: dict[str, Any] | None  # the scene-consistency script's bundle
    digits: int = 1

    def files(self) -> dict[str, str | list[bytes]]:
        """File name -> text (or its lines), as the official scripts name and write them."""
        out = {name: text for bridge in self.bridges for name, text in bridge.files().items()}
        if self.consistency is not None:
            out.update(consistency_files(self.consistency, self.digits))
        return out

    def summary(self) -> dict[str, Any]:
        """What ``evaluation_summary.json`` holds of them: each bridge's paper-table
        row (in %, as its ``*_paper_table.json``), each model's consistency figures."""
        out: dict[str, Any] = {}
        if self.bridges:
            out["bridges"] = {bridge.name: bridge.paper for bridge in self.bridges}
        if self.consistency is not None:
            out["scene_consistency"] = {
                r["model"]: r["macro_equal_subset"] for r in self.consistency["models"]
            }
        return out

    def __add__(self, other: Analyses) -> Analyses:
        """The figures of both parts (``analyze``'s ``part``), the first's first."""
        return Analyses(
            self.bridges + other.bridges,
            self.consistency if other.consistency is None else other.consistency,
            self.digits,
        )


# The analyses in two parts, which ``write_scored_split`` computes at once in
# two processes: (the bridges, the scene consistency) of each
PARTS = ((KINDS[:1], False), (KINDS[1:], True))


def analyze(
    expected: Expected,
    frame: Frame,
    rows: ScoredRows,
    run: RunInfo | None = None,
    main_eval: str | None = None,
    part: int | None = None,
) -> Analyses:
    """Every analysis, or those of ``PARTS[part]`` (``a + b`` joins the parts in order)."""
    run = run or RunInfo()
    kinds, consistency = (KINDS, True) if part is None else PARTS[part]
    return Analyses(
        bridge_outputs(expected, frame, rows, run, main_eval, kinds),
        scene_consistency(frame, run.split) if consistency else None,
        run.digits,
    )
