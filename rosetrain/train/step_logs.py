"""A run's own JSON-lines logs, as of the step its training starts from.

``frontier.jsonl`` (the frontier filter's counts) and ``heldout_eval.jsonl``
(evaluation during training) are appended to line by line as a run goes. A
run stopped after its last checkpoint has logged steps past it, which the
resumed run trains and logs again; a run stopped before its first checkpoint
has logged a run whose weights are gone, and the next one starts afresh. So
before training each log keeps only what the checkpoint it starts from holds
(nothing on a fresh start), and a log is named in output_dir's ownership
marker before its first line, so that a later run may rewrite it. A log an
older rosetrain wrote (not named) is left as it is, with a warning.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from rosetrain.core.io import atomic_write, claim_outputs, owned_names

logger = logging.getLogger("rosetrain.train")

FRONTIER_LOG = "frontier.jsonl"
HELDOUT_LOG = "heldout_eval.jsonl"
# The last step whose lines a checkpoint at step N holds, as N + this: the filter
# logs while it samples for the next step (its lines of step N are step N + 1's
# work), and an evaluation at step N is logged before checkpoint N is saved.
HELD_THROUGH = {FRONTIER_LOG: -1, HELDOUT_LOG: 0}


def start_step_logs(output_dir: str | Path, checkpoint_step: int | None) -> None:
    """Cut each log to the lines a run starting at ``checkpoint_step`` keeps (None:
    a fresh start keeps none). The main process only, in the held output_dir,
    before any process trains."""
    folder = Path(output_dir)
    owned = owned_names(folder)
    for name, offset in HELD_THROUGH.items():
        path = folder / name
        if not path.exists():
            claim_outputs(path)  # named before the first line makes it
            continue
        if owned is not None and name not in owned:
            logger.warning("%s: written by an older rosetrain; its lines are kept as they are", path)
            continue
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        last = None if checkpoint_step is None else checkpoint_step + offset
        kept = [line for line in lines if last is not None and _step(line) <= last]
        if len(kept) < len(lines):
            atomic_write(path, "".join(kept))
            logger.warning(
                "%s: %d lines of steps %s dropped (trained again now)",
                path,
                len(lines) - len(kept),
                "past the checkpoint's" if last is not None else "of an earlier start",
            )


def _step(line: str) -> float:
    """A line's step; infinite (never kept) for a line cut short by a kill, or one
    without a step."""
    try:
        step = json.loads(line).get("step")
    except (ValueError, AttributeError):
        return math.inf
    return step if type(step) is int else math.inf
