"""What every runner does: answer a batch of records, one (raw_text, error) each.

Records reach a runner with ``image`` already an absolute path (the evaluator
resolves it against the split folder). The message layout is
``rosetrain.core.messages.record_messages``: one user turn with the prompt prefix,
the image (for T4 the record's ``image`` is the cue image) and the sentence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rosetrain.core.errors import RosetrainError

Answer = tuple["str | None", "str | None"]  # (raw_text, error): one of them is None

# New tokens a runner may generate for one answer: the longest formal answer
# (a CLICK list over a large grid) fits with room. Every runner, `rosetrain eval`
# and the lmms-eval task default to it.
DEFAULT_MAX_NEW_TOKENS = 256


@runtime_checkable
class Runner(Protocol):
    """A model behind one interface. ``name`` goes into each prediction's ``model``.
    Any object with these two members is a runner (a test's stub, a caller's own);
    rosetrain's runners are :class:`BaseRunner` subclasses."""

    name: str

    def generate(self, records: Sequence[Mapping[str, Any]]) -> list[Answer]:
        """One (raw_text, error) per record, in order. A runner that can lose a
        single item (a failed HTTP request) returns (None, message) for it
        instead of raising; anything that would fail every item raises."""
        ...


@runtime_checkable
class StreamingRunner(Runner, Protocol):
    """A runner that also yields answers in the order they finish (the OpenAI
    runner does): the evaluator then saves each answer the moment it arrives
    instead of once per batch."""

    def generate_stream(
        self, records: Iterable[Mapping[str, Any]]
    ) -> Iterator[tuple[Mapping[str, Any], Answer]]: ...


class BaseRunner(ABC):
    """What rosetrain's runners share: the name their predictions carry, the
    generation length, and a ``close`` for what they hold (threads, engines)."""

    def __init__(
        self,
        model: str | PathLike,
        *,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        name: str | None = None,
    ) -> None:
        self.name = name or str(model)
        self.max_new_tokens = max_new_tokens

    @abstractmethod
    def generate(self, records: Sequence[Mapping[str, Any]]) -> list[Answer]:
        """One (raw_text, error) per record, in order (see :class:`Runner`)."""

    def close(self) -> None:
        """Release what the runner holds; the default holds nothing to release."""
        return


def image_path(record: Mapping[str, Any]) -> Path:
    from rosetrain.core.io import not_a_file

    path = Path(record["image"])
    what = not_a_file(path)
    if what is not None:
        raise RosetrainError(f"item {record.get('item_id')}: image {path} is {what}, not a regular file")
    if not path.exists():
        raise RosetrainError(f"item {record.get('item_id')}: image file not found: {path}")
    return path


def load_rgb_image(record: Mapping[str, Any]):
    from rosetrain.core.images import open_rgb

    return open_rgb(image_path(record), f"item {record.get('item_id')}")
