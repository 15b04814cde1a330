"""Local models through transformers: AutoModelForImageTextToText + AutoProcessor.

Batched greedy generation with left padding (new tokens start at the same
column for every row, so they can be cut off in one slice); bf16 on a GPU,
fp32 on the CPU. Loading goes through ``rosetrain.models.loading``, the path
training uses too, so Hub ids, local folders and LoRA adapters all work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rosetrain.core.messages import record_messages
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS, Answer, BaseRunner, load_rgb_image


class TransformersRunner(BaseRunner):
    def __init__(
        self,
        model: str,
        *,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        device: str | None = None,
        dtype: Any = None,
        trust_remote_code: bool = False,
        name: str | None = None,
        loaded: tuple[Any, Any] | None = None,
    ):
        """``loaded``: an already loaded (model, processor) pair, e.g. from a
        trainer in the same process; otherwise ``model`` is loaded."""
        super().__init__(model, max_new_tokens=max_new_tokens, name=name)
        if loaded is None:
            from rosetrain.models.loading import load_model_and_processor

            loaded = load_model_and_processor(
                model, device=device, dtype=dtype, trust_remote_code=trust_remote_code
            )
        self.model, self.processor = loaded
        self.model.eval()
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.tokenizer.padding_side = "left"  # generation appends on the right
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.generation_config = self._greedy_config()

    def _greedy_config(self):
        import copy

        config = copy.deepcopy(self.model.generation_config)
        # Greedy: clear the sampling knobs a checkpoint may ship, so nothing warns or samples.
        config.do_sample, config.num_beams = False, 1
        config.temperature = config.top_p = config.top_k = None
        config.max_new_tokens = self.max_new_tokens
        if config.pad_token_id is None:
            config.pad_token_id = self.tokenizer.pad_token_id
        return config

    def generate(self, records: Sequence[Mapping[str, Any]]) -> list[Answer]:
        import torch

        try:
            return self._generate_batch(records)
        except torch.OutOfMemoryError as err:
            if self.model.device.type == "cuda":
                torch.cuda.empty_cache()
            if len(records) == 1:
                return [(None, f"out of memory: {err}".splitlines()[0])]
            half = len(records) // 2  # smaller batches before giving up on an item
            return self.generate(records[:half]) + self.generate(records[half:])

    def _generate_batch(self, records: Sequence[Mapping[str, Any]]) -> list[Answer]:
        import torch

        texts = [
            self.processor.apply_chat_template(record_messages(r), tokenize=False, add_generation_prompt=True)
            for r in records
        ]
        images = [[load_rgb_image(r)] for r in records]  # one image per prompt
        inputs = self.processor(text=texts, images=images, return_tensors="pt", padding=True)
        # dtype casts only the floating tensors (pixel values), never the token ids.
        inputs = inputs.to(self.model.device, dtype=self.model.dtype)
        with torch.inference_mode():
            output = self.model.generate(**inputs, generation_config=self.generation_config)
        new_tokens = output[:, inputs["input_ids"].shape[1] :]
        decoded = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [(text, None) for text in decoded]
