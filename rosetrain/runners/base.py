"""What every runner does: answer a batch of records, one (raw_text, error) each.

Records reach a runner with ``image`` already an absolute path (the evaluator
resolves it against the split folder). The message layout is
``rosetrain.core.messages.record_messages``: one user turn with the prompt prefix,
the image (for T4 the record's ``image`` is the cue image) and the sentence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rosetrain.core.errors import RosetrainError

Answer = tuple["str | None", "str | None"]  # (raw_text, error): one of them is None


@runtime_checkable
class Runner(Protocol):
    """A model behind one interface. ``name`` goes into each prediction's ``model``."""

    name: str

    def generate(self, records: Sequence[Mapping[str, Any]]) -> list[Answer]:
        """One (raw_text, error) per record, in order. A runner that can lose a
        single item (a failed HTTP request) returns (None, message) for it
        instead of raising; anything that would fail every item raises."""
        ...


# A runner may also offer ``generate_stream(records)``, yielding (record, answer)
# pairs in the order they finish (the OpenAI runner does): the evaluator then
# saves each answer the moment it arrives instead of once per batch.


def image_path(record: Mapping[str, Any]) -> Path:
    path = Path(record["image"])
    if not path.is_file():
        raise RosetrainError(f"item {record.get('item_id')}: image file not found: {path}")
    return path


def load_rgb_image(record: Mapping[str, Any]):
    from PIL import Image

    path = image_path(record)
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except OSError as err:
        raise RosetrainError(f"item {record.get('item_id')}: cannot read image {path}: {err}") from None
