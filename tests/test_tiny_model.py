"""Tiny Qwen2-VL and Qwen3-VL models built offline load through the Auto classes, like real ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.core import protocol as P
from rosetrain.core.errors import RosetrainError


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("models") / "tiny"
    assert cli_main(["tiny-model", "--out", str(out), "--size", "tiny", "--seed", "0"]) == 0
    return out


@pytest.fixture(scope="module")
def tokenizer():
    from rosetrain.models.tiny import build_tokenizer

    return build_tokenizer(seed=0)


def test_answers_tokenize_compactly(tokenizer):
    # every cell coordinate and count up to 20 is one token, so answers stay short
    for n in range(1, 21):
        assert len(tokenizer(f"R{n}")["input_ids"]) == 1
        assert len(tokenizer(f"C{n}")["input_ids"]) == 1
        assert tokenizer(f"COUNT({n})")["input_ids"].__len__() == 3
    answer = P.format_answer(P.CLICK, [(2, 5), (14, 17), (9, 3)])
    assert len(tokenizer(answer)["input_ids"]) == 3 * 5 + 1  # CLICK( R C , C ); per click, then DONE
    assert len(tokenizer(P.PROMPT_PREFIX)["input_ids"]) < 130


@pytest.mark.parametrize("text", ["CLICK(R2,C5); SUBMIT(1)", "héllo 你好 🙂 <b>", "  two  spaces\n\ttab", ""])
def test_any_text_round_trips_without_unknown_tokens(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert tokenizer.unk_token_id is None


def test_tiny_model_loads_through_auto_classes(tiny_dir):
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(tiny_dir)
    processor = AutoProcessor.from_pretrained(tiny_dir)
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen2VLProcessor"
    assert type(processor.video_processor).__name__ == "Qwen2VLVideoProcessor"
    assert processor.tokenizer.padding_side == "left"
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    text_config = model.config.text_config
    head_dim = text_config.hidden_size // text_config.num_attention_heads
    assert sum(text_config.rope_parameters["mrope_section"]) * 2 == head_dim
    assert model.config.vision_config.hidden_size == text_config.hidden_size
    assert model.config.image_token_id == processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")

    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": P.PROMPT_PREFIX, "image": None},
                {"type": "image", "text": None},
                {"type": "text", "text": "Count.", "image": None},
            ],
        }
    ]
    prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>user\n" + P.PROMPT_PREFIX + "<|vision_start|><|image_pad|>")
    assert prompt.endswith("Count.<|im_end|>\n<|im_start|>assistant\n")

    image = Image.new("RGB", (112, 84), "white")  # 4 x 3 cells of 28 px
    inputs = processor(text=[prompt], images=[[image]], return_tensors="pt")
    assert (inputs["input_ids"] == model.config.image_token_id).sum() == (112 // 28) * (84 // 28)
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]


def test_qwen3_vl_family_loads_through_auto_classes(tmp_path):
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    out = tmp_path / "q3"
    assert cli_main(["tiny-model", "--out", str(out), "--family", "qwen3-vl"]) == 0
    model = AutoModelForImageTextToText.from_pretrained(out)
    processor = AutoProcessor.from_pretrained(out)
    assert type(model).__name__ == "Qwen3VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen3VLProcessor"
    assert processor.tokenizer.padding_side == "left"
    text_config, vision_config = model.config.text_config, model.config.vision_config
    assert sum(text_config.rope_parameters["mrope_section"]) * 2 == text_config.head_dim
    assert vision_config.out_hidden_size == text_config.hidden_size
    assert max(vision_config.deepstack_visual_indexes) < vision_config.depth

    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Count."}]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    image = Image.new("RGB", (128, 96), "white")  # 4 x 3 cells of 32 px
    inputs = processor(text=[prompt], images=[[image]], return_tensors="pt")
    assert (inputs["input_ids"] == model.config.image_token_id).sum() == 4 * 3
    with torch.inference_mode():
        out_ids = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out_ids.shape[1] > inputs["input_ids"].shape[1]


@pytest.mark.parametrize("family, cell, position_aware", [("qwen2-vl", 28, False), ("qwen3-vl", 32, True)])
def test_only_qwen3_vl_tells_identical_cells_apart_by_position(tokenizer, family, cell, position_aware):
    """Why the demo uses Qwen3-VL: in a uniform grid, Qwen2-VL's vision tokens are
    all the same vector (rotary attention over identical values averages to the
    same value), so "row 2" is invisible to the vision tower; Qwen3-VL adds a
    learned absolute position embedding to every patch."""
    import torch
    from PIL import Image

    from rosetrain.models.tiny import build_model, build_processor

    processor = build_processor(tokenizer, "tiny", family)
    model = build_model(tokenizer, "tiny", seed=0, family=family).eval()
    pixels = processor.image_processor(
        images=[Image.new("RGB", (3 * cell, 3 * cell), (0, 190, 200))], return_tensors="pt"
    )
    with torch.inference_mode():
        features = model.model.get_image_features(pixels["pixel_values"], pixels["image_grid_thw"])
    tokens = torch.cat(list(features.pooler_output))
    assert tokens.shape[0] == 9  # one token per cell
    spread = (tokens - tokens[0]).abs().max().item()
    assert (spread > 1e-4) == position_aware, spread


def test_build_is_deterministic_per_seed(tokenizer):
    import torch

    from rosetrain.models.tiny import build_model, build_tokenizer

    again = build_tokenizer(seed=0)
    assert again.backend_tokenizer.to_str() == tokenizer.backend_tokenizer.to_str()
    a, b, c = (build_model(tokenizer, "tiny", seed=s) for s in (0, 0, 1))
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_small_size_is_a_few_million_parameters(tokenizer):
    from rosetrain.models.tiny import build_model, count_parameters

    assert 1_000_000 < count_parameters(build_model(tokenizer, "small")) < 5_000_000


def test_medium_size_is_a_larger_stand_in_of_the_same_architecture(tokenizer):
    from rosetrain.models.tiny import build_model, count_parameters

    assert 10_000_000 < count_parameters(build_model(tokenizer, "medium", family="qwen3-vl")) < 15_000_000


def test_loader_names_a_missing_local_path(tmp_path):
    from rosetrain.models.loading import load_model_and_processor

    for missing in (tmp_path / "nope", "./models/does-not-exist"):
        with pytest.raises(RosetrainError, match="does not exist") as err:
            load_model_and_processor(missing)
        assert str(missing) in str(err.value)


def test_loader_returns_fp32_cpu_model_with_left_padding(tiny_dir):
    import torch

    from rosetrain.models.loading import load_model_and_processor

    model, processor = load_model_and_processor(str(tiny_dir), device="cpu")
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    assert processor.tokenizer.padding_side == "left"
    assert not json.loads((tiny_dir / "config.json").read_text()).get("auto_map")  # no remote code


def test_unknown_size_or_family_is_a_user_error(tmp_path):
    from rosetrain.models.tiny import build_tiny_model

    with pytest.raises(RosetrainError, match="size"):
        build_tiny_model(tmp_path / "m", size="huge")
    with pytest.raises(RosetrainError, match="family"):
        build_tiny_model(tmp_path / "m", family="llava")


def test_loading_silences_only_the_libraries_notices_about_each_other(tiny_dir):
    """peft and TRL call transformers APIs that 5.23 renamed (GRPO toggles gradient
    checkpointing around generation): the user can act on none of those notices."""
    import warnings

    from rosetrain.models.loading import load_model_and_processor

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, _ = load_model_and_processor(str(tiny_dir), device="cpu")
        model.gradient_checkpointing_enable()
        model.gradient_checkpointing_disable()
        warnings.warn("a notice of rosetrain's own", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == [
        "a notice of rosetrain's own"
    ]
