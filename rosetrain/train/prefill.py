"""Several sampled completions of each prompt, its prefill computed once.

``model.generate(..., num_return_sequences=n)`` copies every prompt ``n`` times
before the first forward pass, so the image encoder and the prompt's
attention run ``n`` times on the same input. Here the prompts (all but their
last token) run once, their key/value cache is copied ``n`` times, and
generation goes on from there. The samples are the same: with the same seed,
token for token (``tests/test_frontier.py``). Measured on the frontier
filter's calls (4 prompts of the transfer design's GRPO, 8 samples each, up
to 96 new tokens, one CPU thread): 0.35 to 0.30 s on the 2.5M stand-in, 1.47
to 1.16 s on the 12.2M one. A real model's prompt, with its thousand image
tokens, weighs far more.

Only for models whose generation reads its M-RoPE offsets from
``model.model.rope_deltas`` (the Qwen-VL family), which the prefill here sets
for one copy of each prompt and which is copied like the cache; any other
model samples through plain ``generate``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

# what only the prompt's own forward pass reads: the images
PROMPT_ONLY = frozenset({"pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw"})


def sample(model: Any, inputs: Mapping[str, Any], copies: int, generation: Mapping[str, Any]) -> Any:
    """What ``model.generate(**inputs, **generation)`` returns with ``copies``
    completions a prompt (each prompt's rows together), each prompt's prefill
    run once. ``generation``: generate's arguments, or a ``generation_config``
    alone (the count goes into a copy of it, as transformers wants)."""
    deltas_holder: Any = getattr(model, "model", None)
    if copies < 2 or not hasattr(deltas_holder, "rope_deltas"):
        return model.generate(**inputs, **_counted(generation, copies))
    ids = inputs["input_ids"]

    def per_token(value: Any) -> bool:  # the ids' companions: the attention mask, token types
        return getattr(value, "shape", None) == ids.shape

    prompt = {key: value[:, :-1] if per_token(value) else value for key, value in inputs.items()}
    cache = model(**prompt, use_cache=True, logits_to_keep=1).past_key_values
    deltas = deltas_holder.rope_deltas
    if deltas is None:  # not what this shortcut knows: generate as usual
        return model.generate(**inputs, **_counted(generation, copies))
    cache.batch_repeat_interleave(copies)
    deltas_holder.rope_deltas = deltas.repeat_interleave(copies, dim=0)
    expanded = {
        key: value.repeat_interleave(copies, dim=0) if per_token(value) else value
        for key, value in inputs.items()
        if key not in PROMPT_ONLY
    }
    return model.generate(**expanded, past_key_values=cache, **_counted(generation, 1))


def _counted(generation: Mapping[str, Any], count: int) -> dict[str, Any]:
    config = generation.get("generation_config")
    if config is None:
        return {**generation, "num_return_sequences": count}
    config = copy.deepcopy(config)
    config.num_return_sequences = count
    return {**generation, "generation_config": config}
