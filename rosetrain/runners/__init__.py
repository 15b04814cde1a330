"""Runners: a model behind ``generate(records) -> [(raw_text, error)]``.

Each backend lives in its own module and is imported only when chosen, so a
user without vllm (or without a GPU) never imports it.
"""

from __future__ import annotations

from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.registry import Registry
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS, BaseRunner, Runner, StreamingRunner

RUNNERS: Registry[str] = Registry(
    "runner",
    {
        "transformers": "rosetrain.runners.transformers_runner:TransformersRunner",
        "vllm": "rosetrain.runners.vllm_runner:VLLMRunner",
        "openai": "rosetrain.runners.openai_runner:OpenAIRunner",
    },
    argument="runner",
)


def make_runner(
    kind: str,
    model: str,
    *,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    trust_remote_code: bool = False,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    concurrency: int = 8,
    **options: Any,
) -> BaseRunner:
    """Build the runner ``kind`` (a name of :data:`RUNNERS`) for ``model`` (a Hub id,
    a local folder, or an endpoint's model name for ``openai``)."""
    RUNNERS.check(kind)
    if kind == "openai":
        if not base_url:
            raise RosetrainError(
                "runner 'openai' needs base_url (e.g. http://127.0.0.1:8000/v1)", argument="base_url"
            )
        options.update(base_url=base_url, api_key_env=api_key_env, concurrency=concurrency)
    else:  # a local model: it may run the model's own code, an endpoint cannot
        options.update(trust_remote_code=trust_remote_code)
    runner: BaseRunner = RUNNERS.load(kind)(model, max_new_tokens=max_new_tokens, **options)
    return runner


__all__ = ["DEFAULT_MAX_NEW_TOKENS", "RUNNERS", "BaseRunner", "Runner", "StreamingRunner", "make_runner"]
