"""What sampling costs a stand-in on one CPU thread: 8 completions of 96 tokens
(GRPO's group at the transfer recipes' length) of one V-Clk prompt on a 96 px
image, after a short warm-up (docs/experiments.md, round 22).

    python experiments/transfer/sampling_cost.py MODEL...
"""

from __future__ import annotations

import sys
import time

import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

SENTENCE = "Click all cells that are different from the majority inside the highlighted region."


def sampling_seconds(path: str, samples: int = 8, tokens: int = 96) -> float:
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    processor = AutoProcessor.from_pretrained(path)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": SENTENCE}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    image = Image.new("RGB", (96, 96), (120, 200, 90))
    batch = processor(text=[text] * samples, images=[image] * samples, return_tensors="pt", padding=True)
    with torch.no_grad():
        model.generate(**batch, max_new_tokens=8, min_new_tokens=8, do_sample=True)
        start = time.perf_counter()
        model.generate(**batch, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True)
    return time.perf_counter() - start


if __name__ == "__main__":
    torch.set_num_threads(1)
    for path in sys.argv[1:]:
        print(f"{path}: 8 completions of 96 tokens in {sampling_seconds(path):.2f} s")
