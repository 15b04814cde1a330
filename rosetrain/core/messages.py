"""The one message layout every model sees, in training and in evaluation.

The release's layout: a single user turn holding the prompt prefix, the image
(the cue image for T4) and the task sentence. The chat template of the model's
processor turns it into text; the image travels beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rosetrain.core.protocol import PROMPT_PREFIX


def split_prompt(record: Mapping[str, Any]) -> tuple[str, str]:
    """(prefix, task sentence) of a record, from ``prompt_global``/``prompt_local``
    when present, else by cutting the full ``prompt`` after the shared prefix."""
    if record.get("prompt_local"):
        return record.get("prompt_global") or PROMPT_PREFIX, record["prompt_local"]
    prompt = record["prompt"]
    if prompt.startswith(PROMPT_PREFIX):
        return PROMPT_PREFIX, prompt[len(PROMPT_PREFIX) :].strip()
    return "", prompt.strip()


def user_messages(prefix: str, sentence: str) -> list[dict[str, Any]]:
    """Conversational prompt (TRL's format): text, one image placeholder, text."""
    content: list[dict[str, Any]] = []
    if prefix:
        content.append({"type": "text", "text": prefix})
    content.append({"type": "image"})
    content.append({"type": "text", "text": sentence})
    return [{"role": "user", "content": content}]


def assistant_messages(answer: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": [{"type": "text", "text": answer}]}]


def record_messages(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    return user_messages(*split_prompt(record))
