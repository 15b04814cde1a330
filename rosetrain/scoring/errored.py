"""Items whose request failed are not wrong answers.

A prediction row with a non-empty ``error`` (an HTTP failure, an item out of
memory, ...) means the model was never heard on that item. The scorer still
writes a per-item row for it, scored as the official ROSE evaluator scores it
(a failure), with the official ``api_error`` = 1 and the error in
``api_error_text`` (an error of "" or "None" is none, as there); rosetrain's own figures (the
summary's PASS rates, Avg, gap, and ``compare``) leave such rows out and count
them apart, so a flaky endpoint shows up as errors, never as a worse model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ERROR_EXAMPLES = 5  # errored items named in a summary


def is_errored(row: Mapping[str, Any]) -> bool:
    """True for a per-item row whose prediction recorded an error."""
    return bool(row.get("api_error"))


def error_examples(errored: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The first few errored items as {"item_id", "error"}, for summaries and messages."""
    return [
        {"item_id": r["item_id"], "error": r["api_error_text"]}
        for _, r in zip(range(ERROR_EXAMPLES), errored)
    ]
