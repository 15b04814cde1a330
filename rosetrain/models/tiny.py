"""Tiny Qwen-VL-family models built offline (no Hub): config, tokenizer, processor.

The folder this writes loads through ``AutoModelForImageTextToText`` and
``AutoProcessor.from_pretrained(path)``, the same path real checkpoints take,
so tests and the demo exercise the code users run on GPUs (docs/tiny-models.md).

- Three families: ``qwen2-vl`` (the tests' default), ``qwen2.5-vl`` (the
  architecture of most shipped GPU recipes: windowed vision attention, a
  SwiGLU vision MLP) and ``qwen3-vl`` (the demo's). Qwen2-VL and Qwen3-VL
  differ where the demo needs it: Qwen2-VL's vision tower has only relative
  (rotary) positions, so two identical cells give identical vision tokens and
  "row 2" must be recovered from attention patterns, which a tiny model barely
  learns; Qwen3-VL adds a learned absolute position embedding to every patch,
  so each cell's token says where it is. Qwen3-VL merges 32 px, not 28 px.
- The config has every size overridden (the defaults are multi-billion-sized);
  ``mrope_section`` sums to head_dim/2 and the vision merger's output equals
  the text hidden size, as the models need.
- The tokenizer is a byte-level BPE trained on the protocol's own text (prompt
  prefix, task sentences, answers), so any text encodes (no unknown token) and
  answers are short: a pre-tokenizer keeps ``R12``, ``C5``, ``CLICK(`` and numbers
  whole, and the corpus repeats them enough for BPE to learn each as one token.
- The processor is the stock ``Qwen2VLProcessor`` with small pixel budgets and
  left padding (generation appends on the right).
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rosetrain.core import protocol as P
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import atomic_path, check_replaceable_folder, mark_folder

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
PAD, EOS = "<|endoftext|>", "<|im_end|>"

# Qwen-style template without the default system turn (fewer tokens for a tiny
# model). Content may be a string or a list of {"type": "image"|"video"|"text"}
# parts; only "type" is looked at, since a datasets column of parts gives every
# part every key (a text part carries "image": None).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Words keep trailing digits and an opening parenthesis ("R12", "CLICK("), numbers
# stay whole, punctuation runs stay together; each may carry one leading space.
PRETOKEN_PATTERN = r"\s?\p{L}+\d*\(?|\s?\d+|\s?[^\s\p{L}\d]+|\s+"

MAX_CELL = 30  # cells/counts up to this are in the corpus often enough to be single tokens


@dataclasses.dataclass(frozen=True)
class ModelSize:
    text_hidden: int
    text_layers: int
    text_heads: int
    text_kv_heads: int
    text_intermediate: int
    mrope_section: tuple[int, int, int]
    vision_depth: int
    vision_embed: int
    vision_heads: int
    vision_mlp_ratio: int
    min_pixels: int
    max_pixels: int
    vocab_size: int = 1024


SIZES = {
    # for tests: a forward/backward step in milliseconds on a CPU
    "tiny": ModelSize(
        text_hidden=64,
        text_layers=2,
        text_heads=4,
        text_kv_heads=2,
        text_intermediate=128,
        mrope_section=(2, 3, 3),
        vision_depth=1,
        vision_embed=32,
        vision_heads=2,
        vision_mlp_ratio=2,
        min_pixels=56 * 56,
        max_pixels=112 * 112,
    ),
    # for the demo: learns small-grid counting from scratch in minutes (docs/tiny-models.md)
    "small": ModelSize(
        text_hidden=128,
        text_layers=4,
        text_heads=4,
        text_kv_heads=2,
        text_intermediate=512,
        mrope_section=(4, 6, 6),
        vision_depth=4,
        vision_embed=96,
        vision_heads=4,
        vision_mlp_ratio=4,
        min_pixels=56 * 56,
        max_pixels=224 * 224,
    ),
    # a larger stand-in (12M): twice the widths, half again the depths; a CPU
    # training step costs about 5x small's (docs/experiments.md, round 22)
    "medium": ModelSize(
        text_hidden=256,
        text_layers=6,
        text_heads=8,
        text_kv_heads=4,
        text_intermediate=1024,
        mrope_section=(4, 6, 6),
        vision_depth=6,
        vision_embed=192,
        vision_heads=6,
        vision_mlp_ratio=4,
        min_pixels=56 * 56,
        max_pixels=224 * 224,
    ),
}


def _check_size(size: str) -> ModelSize:
    if size not in SIZES:
        raise RosetrainError(f"size: {size!r} is not one of {', '.join(SIZES)}")
    spec = SIZES[size]
    head_dim = spec.text_hidden // spec.text_heads
    assert sum(spec.mrope_section) * 2 == head_dim, "mrope_section must sum to head_dim/2"
    return spec


MODEL_FAMILIES = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl")
QWEN3_PATCH, QWEN3_MERGE = 16, 2  # one vision token = 32 x 32 px (Qwen2-VL: 14 x 2 = 28)
QWEN25_WINDOW = 56  # px; the real models use 112 (4 x 4 tokens) on much larger images


def _check_family(family: str) -> str:
    if family not in MODEL_FAMILIES:
        raise RosetrainError(f"family: {family!r} is not one of {', '.join(MODEL_FAMILIES)}")
    return family


# ---------------------------------------------------------------- tokenizer corpus


def _random_region(rng: random.Random, rows: int, cols: int) -> tuple[str, dict]:
    kind = rng.choice(P.NUMERIC_REGIONS)
    r1, r2 = sorted(rng.randint(1, rows) for _ in range(2))
    c1, c2 = sorted(rng.randint(1, cols) for _ in range(2))
    params = {
        P.ROW_RANGE: {"r1": r1, "r2": r2},
        P.COL_RANGE: {"c1": c1, "c2": c2},
        P.RECTANGLE: {"r1": r1, "r2": r2, "c1": c1, "c2": c2},
    }[kind]
    return kind, params


# The varied phrasings the tiny tokenizers were trained on, frozen: the tokenizer
# (and so every tiny model, the shipped demo base included, and its rebuild) stays
# byte-identical when rosetrain.generators.prompts' training phrasings change. Only BPE
# merges are learned from these lines; no model is trained on them.
_CORPUS_SENTENCES = {
    P.COUNT: [
        "How many cells are {odd} {where}?",
        "Count the {odd} cells {where}.",
        "Report the number of cells {where} that are {odd}.",
        "Count the number of cells that are different from the majority {where}.",
    ],
    P.CLICK: [
        "Click every cell {where} that is {odd}.",
        "Select all {odd} cells {where}, then finish.",
        "Click all cells that are different from the majority {where}.",
        "Mark each cell {where} that is {odd}; if there is none, just finish.",
    ],
    P.CLICK_COUNT: [
        "Click every cell that is {odd}, except {where}, then submit how many you clicked.",
        "Ignoring {where}, click all {odd} cells and submit their number.",
        "Click all cells that are different from the majority in the whole grid, except {where}, "
        "then submit the number of cells you clicked.",
    ],
}
_CORPUS_ODD = [
    "different from the majority",
    "odd ones out",
    "unlike the others",
    "not the majority item",
    "exceptions to the pattern",
]
_CORPUS_GLOBAL = ["in the whole grid", "in the grid", "anywhere in the image", "across the entire grid"]
_CORPUS_VISUAL = ["inside the highlighted region", "within the marked rectangle", "inside the outlined area"]


def _corpus_varied_sentence(template: str, region_type: str, params: dict, rng: random.Random) -> str:
    from rosetrain.generators.prompts import ANSWER_HINT, exclusion_phrase, region_phrase

    mode = P.TASK_MODE[template]
    if region_type == P.GLOBAL:
        where = rng.choice(_CORPUS_GLOBAL)
    elif region_type == P.VISUAL_REGION:
        where = rng.choice(_CORPUS_VISUAL)
    elif region_type == P.EXCLUSION:
        where = exclusion_phrase(params)
    else:
        where = region_phrase(region_type, params)
    sentence = rng.choice(_CORPUS_SENTENCES[mode]).format(where=where, odd=rng.choice(_CORPUS_ODD))
    return f"{sentence} {ANSWER_HINT[mode]}"


def _sentence(rng: random.Random, rows: int, cols: int) -> str:
    from rosetrain.generators.prompts import task_sentence

    template = rng.choice(P.TEMPLATES)
    params: dict
    if template in (P.T1, P.T1B):
        region_type, params = P.GLOBAL, {}
    elif template == P.T4:
        region_type, params = P.VISUAL_REGION, {}
    elif template == P.T5:
        kind, inner = _random_region(rng, rows, cols)
        region_type, params = P.EXCLUSION, {"exclude_type": kind, "exclude_params": inner}
    else:
        region_type, params = _random_region(rng, rows, cols)
    if rng.choice(("rose", "varied")) == "rose":
        return task_sentence(template, region_type, params, "rose", rng)
    return _corpus_varied_sentence(template, region_type, params, rng)


def _answer(rng: random.Random, rows: int, cols: int) -> str:
    mode = rng.choice(P.TASK_MODES)
    cells = {(rng.randint(1, rows), rng.randint(1, cols)) for _ in range(rng.randint(0, 8))}
    return P.format_answer(mode, cells, rng.randint(0, MAX_CELL) if mode == P.COUNT else None)


def tokenizer_corpus(seed: int = 0, n_lines: int = 6000) -> Iterator[str]:
    """Protocol text: the prefix, task sentences, answers, and every cell and
    number up to MAX_CELL, so BPE learns them as single tokens."""
    rng = random.Random(seed)
    for _ in range(50):
        yield P.PROMPT_PREFIX
    for n in range(MAX_CELL + 1):
        for _ in range(20):
            yield f"R{n},C{n} {n} row {n} column {n} COUNT({n}) SUBMIT({n})"
    for _ in range(n_lines):
        rows, cols = rng.randint(3, 20), rng.randint(3, 20)
        yield _sentence(rng, rows, cols)
        yield _answer(rng, rows, cols)
        yield "user\nassistant\nsystem\n"


def build_tokenizer(seed: int = 0, vocab_size: int = 1024):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with the Qwen family's special tokens."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKEN_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(tokenizer_corpus(seed), trainer=trainer)
    # The release's prompt prefix is the same ~110 tokens on every task. A tiny
    # model gains nothing from reading it token by token, so it is one token
    # here: sequences shrink ~4x and CPU training steps speed up ~4.5x. Real
    # checkpoints keep their own tokenizers; the text they see is identical.
    backend.add_tokens([AddedToken(P.PROMPT_PREFIX, normalized=False, special=False)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=None,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in (EOS, PAD)],
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
        model_max_length=32768,
    )
    return tokenizer


# ---------------------------------------------------------------- model and processor


def build_processor(tokenizer, size: str = "tiny", family: str = "qwen2-vl"):
    from transformers import ProcessorMixin, Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    spec, family = _check_size(size), _check_family(family)
    pixels = {"shortest_edge": spec.min_pixels, "longest_edge": spec.max_pixels}
    if family == "qwen3-vl":
        from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor

        return Qwen3VLProcessor(
            image_processor=Qwen2VLImageProcessor(
                size=pixels, patch_size=QWEN3_PATCH, merge_size=QWEN3_MERGE
            ),
            video_processor=Qwen3VLVideoProcessor(size=pixels),
            tokenizer=tokenizer,
            chat_template=CHAT_TEMPLATE,
        )
    processor_class: type[ProcessorMixin] = Qwen2VLProcessor
    if family == "qwen2.5-vl":
        from transformers import Qwen2_5_VLProcessor

        processor_class = Qwen2_5_VLProcessor
    return processor_class(
        image_processor=Qwen2VLImageProcessor(size=pixels),
        # its default budget upscales small frames; keep it as small as the images'
        video_processor=Qwen2VLVideoProcessor(size=pixels),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )


def build_config(tokenizer, size: str = "tiny", family: str = "qwen2-vl"):
    spec, family = _check_size(size), _check_family(family)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text = dict(
        vocab_size=len(tokenizer),
        hidden_size=spec.text_hidden,
        intermediate_size=spec.text_intermediate,
        num_hidden_layers=spec.text_layers,
        num_attention_heads=spec.text_heads,
        num_key_value_heads=spec.text_kv_heads,
        max_position_embeddings=4096,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": list(spec.mrope_section),
        },
        pad_token_id=ids[PAD],
    )
    tokens = dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    if family == "qwen3-vl":
        from transformers import Qwen3VLConfig

        text["head_dim"] = spec.text_hidden // spec.text_heads
        text["rope_parameters"]["mrope_interleaved"] = True
        depth = spec.vision_depth
        vision = dict(
            depth=depth,
            hidden_size=spec.vision_embed,
            num_heads=spec.vision_heads,
            intermediate_size=spec.vision_embed * spec.vision_mlp_ratio,
            patch_size=QWEN3_PATCH,
            spatial_merge_size=QWEN3_MERGE,
            out_hidden_size=spec.text_hidden,
            # a 16 x 16 table, interpolated to each image's patch grid;
            # it covers max_pixels (256 px = 16 patches) without stretching
            num_position_embeddings=(256 // QWEN3_PATCH) ** 2,
            # early and middle vision layers feed the LM's first layers
            deepstack_visual_indexes=sorted({depth // 4, depth // 2, 3 * depth // 4}),
        )
        return Qwen3VLConfig(text_config=text, vision_config=vision, **tokens)
    text.update(max_window_layers=spec.text_layers, bos_token_id=ids[PAD], eos_token_id=ids[EOS])
    if family == "qwen2.5-vl":
        from transformers import Qwen2_5_VLConfig

        vision = dict(
            depth=spec.vision_depth,
            hidden_size=spec.vision_embed,
            num_heads=spec.vision_heads,
            intermediate_size=spec.vision_embed * spec.vision_mlp_ratio,
            out_hidden_size=spec.text_hidden,
            # windows of 2 x 2 vision tokens (56 px), so a tiny image still has
            # several; the last block attends globally, as in the real models,
            # unless it is the only one (then the windowed path is what gets tested)
            window_size=QWEN25_WINDOW,
            fullatt_block_indexes=[spec.vision_depth - 1] if spec.vision_depth > 1 else [],
        )
        return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **tokens)
    from transformers import Qwen2VLConfig

    vision = dict(
        depth=spec.vision_depth,
        embed_dim=spec.vision_embed,
        num_heads=spec.vision_heads,
        mlp_ratio=spec.vision_mlp_ratio,
        hidden_size=spec.text_hidden,
    )
    return Qwen2VLConfig(text_config=text, vision_config=vision, **tokens)


def build_model(tokenizer, size: str = "tiny", seed: int = 0, family: str = "qwen2-vl"):
    import torch
    from transformers import AutoModelForImageTextToText, GenerationConfig

    config = build_config(tokenizer, size, family)
    torch.manual_seed(seed)  # weight init draws from torch's global generator
    model = AutoModelForImageTextToText.from_config(config)
    model.generation_config = GenerationConfig(
        eos_token_id=[tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(PAD)],
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.pad_token_id,
        do_sample=False,
        max_new_tokens=64,
    )
    return model


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


def build_tiny_model(
    out_dir: str | os.PathLike, size: str = "tiny", seed: int = 0, family: str = "qwen2-vl"
) -> Path:
    """Build model + processor and save them to ``out_dir`` (replaced atomically, and only
    when it is missing, empty, or a folder this function wrote)."""
    spec, family = _check_size(size), _check_family(family)
    out = Path(out_dir)
    check_replaceable_folder(out, argument="out_dir")  # never a user's folder or file, before any work
    tokenizer = build_tokenizer(seed, spec.vocab_size)
    processor = build_processor(tokenizer, size, family)
    model = build_model(tokenizer, size, seed, family)
    with atomic_path(out) as tmp:  # an old folder is removed only after the new one is in place
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        mark_folder(tmp)  # so a rebuild may replace it, and only then
    return out


def describe(path: str | os.PathLike) -> dict[str, Any]:
    """Parameter counts of a saved model (total, vision, language)."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(path)
    vision = sum(p.numel() for n, p in model.named_parameters() if ".visual." in f".{n}")
    total = count_parameters(model)
    return {"parameters": total, "vision_parameters": vision, "language_parameters": total - vision}
