"""Every shipped recipe (recipes/*.yaml) trains for two steps on a tiny model of
its own architecture and leaves a checkpoint that `rosetrain eval` loads.

Only what a CPU needs is overridden: the model (a tiny one built offline), the
step count, the output folder, the held-out folder (a small generated one where
the recipe evaluates) and the stream's shuffle buffer (filling 512 rows costs
~10 s of CPU per recipe before its first step; the rows are the same kind).
Everything else (LoRA targets, pixel budgets, batch sizes, gradient
accumulation, GRPO settings, the streamed curriculum spec) is the recipe's own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.train.recipe import load_recipe

ROOT = Path(__file__).resolve().parent.parent
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))

# Architecture of a recipe's model: Hub ids name it; local models are the ones
# the recipes' own comments say how to build (tiny-model / the demo's stages).
LOCAL_MODELS = {
    "models/tiny": "qwen2-vl",
    "runs/tiny-sft/checkpoint-final": "qwen2-vl",
    "models/demo-small": "qwen3-vl",
    "rosetrain/assets/demo-base": "qwen3-vl",
    "rosetrain/assets/demo-base-palettes": "qwen3-vl",
    "runs/demo-base/checkpoint-final": "qwen3-vl",
    "runs/demo/sft/checkpoint-final": "qwen3-vl",
}
HUB_FAMILY = re.compile(r"Qwen(2\.5|2|3)-VL", re.IGNORECASE)
MODEL_CLASS = {
    "qwen2-vl": "Qwen2VLForConditionalGeneration",
    "qwen2.5-vl": "Qwen2_5_VLForConditionalGeneration",
    "qwen3-vl": "Qwen3VLForConditionalGeneration",
}

HELDOUT_SPEC = """
name: recipes-heldout
role: eval
namespace: recipes-heldout
seed: 5
rows: [3, 4]
cols: [3, 4]
cell_size: [32, 32]
image_multiple: 32
exceptions: [1, 2]
negative_rate: 0.0
families: [attribute]
"""


def architecture(model: str) -> str:
    if model in LOCAL_MODELS:
        return LOCAL_MODELS[model]
    found = HUB_FAMILY.search(model)
    assert found, f"no tiny architecture known for model {model!r}: add it to LOCAL_MODELS"
    return f"qwen{found.group(1)}-vl"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, tiny_model_dir):
    """One tiny model per architecture, built once (qwen2-vl is conftest's)."""
    from rosetrain.models.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("tiny-families")
    built = {"qwen2-vl": tiny_model_dir}
    for family in ("qwen2.5-vl", "qwen3-vl"):
        built[family] = build_tiny_model(root / family, size="tiny", family=family)
    return built


@pytest.fixture(scope="session")
def heldout(tmp_path_factory, write_spec, release_split) -> Path:
    root = tmp_path_factory.mktemp("recipes-heldout")
    return release_split(write_spec(root, HELDOUT_SPEC), root / "heldout", scenes=1)


def test_every_shipped_recipe_has_a_known_architecture():
    assert len(RECIPES) >= 11  # 6 GPU recipes, 3 demo stages, 2 tiny CPU recipes
    families = {architecture(load_recipe(path).model) for path in RECIPES}
    assert families == set(MODEL_CLASS)


def test_tiny_qwen2_5_vl_loads_through_auto_classes_with_windowed_vision(tiny_models):
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen2.5-vl"])
    processor = AutoProcessor.from_pretrained(tiny_models["qwen2.5-vl"])
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert type(processor).__name__ == "Qwen2_5_VLProcessor"
    assert type(processor.video_processor).__name__ == "Qwen2VLVideoProcessor"
    assert processor.tokenizer.padding_side == "left"
    vision, text = model.config.vision_config, model.config.text_config
    assert vision.out_hidden_size == text.hidden_size and vision.window_size == 56
    assert sum(p.numel() for p in model.parameters()) < 1_000_000

    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Count."}]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    image = Image.new("RGB", (112, 84), "white")  # 4 x 3 cells of 28 px: 12 tokens, 4 windows
    inputs = processor(text=[prompt], images=[[image]], return_tensors="pt")
    assert (inputs["input_ids"] == model.config.image_token_id).sum() == 12
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]


def cpu_overrides(path: Path, model: Path, out: Path, heldout: Path) -> list[str]:
    """The only changes a CPU run needs; the held-out folder only where the recipe evaluates.
    A GRPO recipe's completions are cut to 16 tokens: the random stand-in never
    stops early, and its 96-128-token groups (refilled again and again by the
    frontier filter, which the random model never passes) cost a minute a recipe."""
    recipe = load_recipe(path)
    overrides = [f"model={model}", "max_steps=2", f"output_dir={out}", "data.shuffle_buffer=8"]
    if recipe.eval.folder is not None:
        overrides.append(f"eval.folder={heldout}")
    if recipe.method == "grpo":
        overrides.append("grpo.max_completion_length=16")
    return overrides


@pytest.mark.slow
@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_shipped_recipe_trains_two_steps_and_its_checkpoint_evaluates(path, tiny_models, heldout, tmp_path):
    from rosetrain.models.loading import load_model_and_processor
    from rosetrain.train import train

    family = architecture(load_recipe(path).model)
    recipe = load_recipe(path, cpu_overrides(path, tiny_models[family], tmp_path / "run", heldout))
    summary = train(recipe)
    assert summary["global_step"] == 2
    final = Path(summary["final"])
    is_adapter = (final / "adapter_config.json").is_file()
    assert is_adapter == (recipe.lora is not None)
    model, _ = load_model_and_processor(final)  # an adapter comes back merged into its base
    assert type(model).__name__ == MODEL_CLASS[family]
    if recipe.eval.folder is not None:
        evals = (tmp_path / "run" / "heldout_eval.jsonl").read_text().splitlines()
        assert json.loads(evals[-1])["step"] == 2

    assert (
        cli_main(
            [
                "eval",
                "--model",
                str(final),
                "--data",
                str(heldout),
                "--split",
                "test",
                "--out",
                str(tmp_path / "eval"),
                "--limit",
                "2",
                "--max-new-tokens",
                "8",
                "--no-progress",
            ]
        )
        == 0
    )
    predictions = (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()
    assert len(predictions) == 2 and all(json.loads(p)["error"] is None for p in predictions)
