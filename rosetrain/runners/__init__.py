"""Runners: a model behind ``generate(records) -> [(raw_text, error)]``.

Each backend lives in its own module and is imported only when chosen, so a
user without vllm (or without a GPU) never imports it.
"""

from __future__ import annotations

from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS, BaseRunner, Runner, StreamingRunner

RUNNERS = ("transformers", "vllm", "openai")


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
    """Build the runner ``kind`` for ``model`` (a Hub id, a local folder, or an
    endpoint's model name for ``openai``)."""
    if kind == "transformers":
        from rosetrain.runners.transformers_runner import TransformersRunner

        return TransformersRunner(
            model, max_new_tokens=max_new_tokens, trust_remote_code=trust_remote_code, **options
        )
    if kind == "vllm":
        from rosetrain.runners.vllm_runner import VLLMRunner

        return VLLMRunner(
            model, max_new_tokens=max_new_tokens, trust_remote_code=trust_remote_code, **options
        )
    if kind == "openai":
        from rosetrain.runners.openai_runner import OpenAIRunner

        if not base_url:
            raise RosetrainError(
                "runner 'openai' needs base_url (e.g. http://127.0.0.1:8000/v1)", argument="base_url"
            )
        return OpenAIRunner(
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            max_new_tokens=max_new_tokens,
            concurrency=concurrency,
            **options,
        )
    raise RosetrainError(f"runner must be one of {', '.join(RUNNERS)}, got {kind!r}", argument="runner")


__all__ = ["DEFAULT_MAX_NEW_TOKENS", "RUNNERS", "BaseRunner", "Runner", "StreamingRunner", "make_runner"]
