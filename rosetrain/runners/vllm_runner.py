"""Offline vLLM engine (optional extra, needs a CUDA GPU).

Prompts are built with the processor's chat template from the same messages
the other runners use; the image goes in ``multi_modal_data``. Greedy decoding
(temperature 0). vllm is imported only here, when this runner is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.messages import record_messages
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS, Answer, BaseRunner, load_rgb_image

INSTALL_HINT = "pip install 'rosetrain[vllm]' on a machine with a CUDA GPU"


def import_vllm():
    try:
        import vllm
    except ImportError as err:
        raise RosetrainError(
            f"runner 'vllm' needs the vllm package, which is not installed "
            f"({err}); {INSTALL_HINT}, or use the 'transformers' runner",
            argument="runner",
        ) from None
    return vllm


def require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise RosetrainError(
            "runner 'vllm' needs a CUDA GPU and none is visible "
            "(torch.cuda.is_available() is False); use the 'transformers' runner",
            argument="runner",
        )


class VLLMRunner(BaseRunner):
    def __init__(
        self,
        model: str,
        *,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        trust_remote_code: bool = False,
        name: str | None = None,
        seed: int = 0,
        **engine_kwargs: Any,
    ):
        """``engine_kwargs`` go to ``vllm.LLM`` (e.g. tensor_parallel_size,
        gpu_memory_utilization, max_model_len)."""
        vllm = import_vllm()
        require_cuda()
        from transformers import AutoProcessor

        super().__init__(model, max_new_tokens=max_new_tokens, name=name)
        self.processor = AutoProcessor.from_pretrained(model, trust_remote_code=trust_remote_code)
        self.llm = vllm.LLM(
            model=str(model),
            trust_remote_code=trust_remote_code,
            seed=seed,
            limit_mm_per_prompt={"image": 1},
            **engine_kwargs,
        )
        self.sampling = vllm.SamplingParams(
            temperature=0.0, max_tokens=self.max_new_tokens, skip_special_tokens=True
        )

    def generate(self, records: Sequence[Mapping[str, Any]]) -> list[Answer]:
        prompts = [
            {
                "prompt": self.processor.apply_chat_template(
                    record_messages(r), tokenize=False, add_generation_prompt=True
                ),
                "multi_modal_data": {"image": load_rgb_image(r)},
            }
            for r in records
        ]
        outputs = self.llm.generate(prompts, self.sampling, use_tqdm=False)
        return [(out.outputs[0].text, None) for out in outputs]
