"""What the real run would reject, found before any weights load.

``rosetrain train --check`` and every real run call :func:`check_run`: it
builds the same TRL config (``SFTConfig`` / ``GRPOConfig``), optimizer and
learning-rate schedule the trainer will build, reads the model's
``config.json`` (a folder, an adapter's base, or the Hub cache), checks its
weight and tokenizer files are there, and matches the LoRA targets against the
model's module names on the ``meta`` device (no memory). Each failure is one
line naming the recipe key.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError, first_line
from rosetrain.train.distributed import bf16_supported, check_distributed, has_gpu
from rosetrain.train.recipe import Recipe, RecipeError, method_module, peft_config

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# Model types whose text model uses multimodal rotary positions (M-RoPE).
MROPE_MODEL_TYPES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen2_5_omni", "glm4v")
# What torch's optimizers name in their errors -> the recipe key that set it.
OPTIMIZER_WORDS = {
    "learning rate": "learning_rate",
    "weight_decay": "weight_decay",
    "beta": "trl.adam_beta1 / trl.adam_beta2",
    "epsilon": "trl.adam_epsilon",
}


def check_run(recipe: Recipe) -> Any:
    """Every check that needs no weights; returns the TRL config for the trainer."""
    check_output_dir(recipe)
    check_memory(recipe)
    check_precision(recipe)
    args = trl_config(recipe)
    check_distributed(args)
    check_optimizer_and_schedule(recipe, args)
    check_trackers(recipe, args)
    config = check_model(recipe)
    check_mrope_batch(recipe, config)
    check_lora_targets(recipe, config)
    return args


def trl_config(recipe: Recipe) -> Any:
    """The ``SFTConfig`` / ``GRPOConfig`` the trainer will get."""
    return method_module(recipe.method).trl_config(recipe)


# ----------------------------------------------------------------- settings


def check_output_dir(recipe: Recipe) -> None:
    """output_dir must be a folder this user can write, or creatable as one."""
    existing = Path(recipe.output_dir)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise RecipeError(f"output_dir: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RecipeError(f"output_dir: {existing} is not writable")


# A row of a generated folder as the trainer holds it: a ROSE-sized image (up to
# about 1,000 px a side) and its text. A streamed row's size is known from its spec.
FOLDER_ROW_BYTES = 2**20


def row_bytes(recipe: Recipe) -> int:
    """Estimated bytes of one training row: the mean image its spec's levels draw
    (mean grid sides x mean cell side, RGB, twice for T4's second copy), or
    :data:`FOLDER_ROW_BYTES` for a folder. A mean, not the largest image: a
    worst case would refuse buffers that fit."""
    if recipe.data.spec is None:
        return FOLDER_ROW_BYTES
    from statistics import fmean

    from rosetrain.generators.spec import SpecError, load_spec

    try:
        spec = load_spec(recipe.data.spec, check_fonts=False)
    except SpecError:
        return FOLDER_ROW_BYTES  # the data checks name what is wrong with it
    pixels = fmean(
        fmean(level.grid_choices("rows")) * fmean(level.grid_choices("cols")) * fmean(level.cell_size) ** 2
        for level in spec.levels
    )
    return int(2 * 3 * pixels)


def check_memory(recipe: Recipe) -> None:
    """Rows held at once (each data worker's shuffle buffer, a training batch, an
    evaluation batch) must fit in the free memory: a recipe that passes every
    other check would otherwise run until the machine kills it."""
    from rosetrain.core.memory import too_big

    size = row_bytes(recipe)
    held = [  # (key, its value, rows it holds at once)
        (
            "data.shuffle_buffer",
            recipe.data.shuffle_buffer,
            recipe.data.shuffle_buffer * max(1, recipe.num_workers(has_gpu())),
        ),
        ("per_device_train_batch_size", recipe.train_batch_size, recipe.train_batch_size),
        ("eval.batch_size", recipe.eval.batch_size, recipe.eval.batch_size if recipe.eval.folder else 0),
    ]
    key, value, _ = max(held, key=lambda item: item[2])
    rows = sum(count for *_, count in held)
    problem = too_big(rows * size, f"{key} {value} ({rows} rows held at once, about {size // 1024} KiB each)")
    if problem:
        raise RecipeError(f"{recipe.source}: {problem}")


def check_precision(recipe: Recipe) -> None:
    """TRL's own message ("doesn't support bf16/gpu ... use_cpu") names neither
    the recipe key nor the way out."""
    if recipe.bf16 and not bf16_supported():
        raise RecipeError(
            f"{recipe.source}: bf16: true needs a GPU with bf16 support and this machine "
            f"has none; set bf16: false (or null: on with such a GPU, off otherwise)"
        )
    import torch

    if recipe.trl.get("fp16") and not torch.cuda.is_available():
        raise RecipeError(
            f"{recipe.source}: trl.fp16: true needs a GPU and this machine has none; "
            f"remove it (the CPU trains in fp32)"
        )


def check_optimizer_and_schedule(recipe: Recipe, args: Any) -> None:
    """Build the trainer's optimizer (on one dummy weight) and schedule: torch
    rejects a negative learning rate only here, TRL's config accepts it."""
    import torch
    from transformers import Trainer
    from transformers.optimization import get_scheduler

    optimizer_class, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
    kwargs = {k: v for k, v in kwargs.items() if k not in ("fused", "foreach")}  # device details
    try:
        optimizer = optimizer_class([torch.nn.Parameter(torch.zeros(1))], **kwargs)
    except (TypeError, ValueError) as err:
        keys = [key for word, key in OPTIMIZER_WORDS.items() if word in str(err)]
        raise RecipeError(
            f"{recipe.source}: {', '.join(keys) or 'optimizer'}: {optimizer_class.__name__} rejects it: {err}"
        ) from None
    steps = args.max_steps if args.max_steps > 0 else 1000  # epochs: the length is known only later
    try:
        get_scheduler(
            args.lr_scheduler_type,
            optimizer,
            num_warmup_steps=args.get_warmup_steps(steps),
            num_training_steps=steps,
            scheduler_specific_kwargs=args.lr_scheduler_kwargs,
        )
    except (TypeError, ValueError) as err:
        name = getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)
        raise RecipeError(f"{recipe.source}: lr_scheduler_type: {name!r} cannot be built: {err}") from None


def check_trackers(recipe: Recipe, args: Any) -> None:
    """Each ``report_to`` tracker is known and its package installed: the trainer
    builds these callbacks only after the model has loaded."""
    from transformers.integrations import get_reporting_integration_callbacks

    try:
        callbacks = get_reporting_integration_callbacks(args.report_to)
    except ValueError as err:
        raise RecipeError(f"{recipe.source}: report_to: {err}") from None
    for callback in callbacks:
        try:
            callback()  # checks that its package imports; a run starts only with training
        except (ImportError, RuntimeError) as err:
            first = first_line(err)
            raise RecipeError(
                f"{recipe.source}: report_to: {callback.__name__} cannot start: {first}"
            ) from None


def check_mrope_batch(recipe: Recipe, config: Any) -> None:
    """On M-RoPE models keep per_device_train_batch_size == num_generations (TRL's
    position ids go wrong otherwise)."""
    model_type = getattr(config, "model_type", "")
    if (
        recipe.method == "grpo"
        and model_type in MROPE_MODEL_TYPES
        and recipe.train_batch_size != recipe.grpo.num_generations
    ):
        raise RecipeError(
            f"{recipe.source}: per_device_train_batch_size ({recipe.train_batch_size}) must equal "
            f"grpo.num_generations ({recipe.grpo.num_generations}) for {model_type} (M-RoPE) models; "
            f"leave per_device_train_batch_size unset to follow num_generations"
        )


# ----------------------------------------------------------------- model


def check_model(recipe: Recipe) -> Any:
    """The model's config (``config.json`` only), after checking that its weights
    and tokenizer are where the real run will look; an adapter is checked with its base."""
    from rosetrain.models.loading import ADAPTER_CONFIG, adapter_base, resolve_model_source

    _kind, path = resolve_model_source(recipe.model)
    source = recipe.model
    if path is not None and (path / ADAPTER_CONFIG).exists():
        if not any((path / name).is_file() for name in ("adapter_model.safetensors", "adapter_model.bin")):
            raise RecipeError(f"model: {path} has {ADAPTER_CONFIG} but no adapter_model.safetensors")
        source = adapter_base(path)
        try:
            _kind, path = resolve_model_source(source)
        except RosetrainError as err:
            raise RecipeError(
                f"model: {recipe.model} is a LoRA adapter whose base model "
                f"(base_model_name_or_path) cannot be used: {err}"
            ) from None
    if path is None and _offline() and not _has_any(source, None, ("config.json",)):
        raise RecipeError(
            f"model: the Hub id {source} is not in the local Hugging Face cache and "
            f"the Hub cannot be reached (offline): download it first "
            f"(hf download {source}) or give a local folder"
        )
    for names, what in ((WEIGHT_FILES, "weights"), (TOKENIZER_FILES, "tokenizer")):
        if not _has_any(source, path, names):
            where = f"folder {path}" if path is not None else f"Hub id {source} (in the local cache)"
            raise RecipeError(
                f"model: the {where} has no {what} ({' or '.join(names[:2])}): "
                f"not a model saved with save_pretrained"
            )
    return _load_config(source, path, recipe.trust_remote_code)


def _has_any(source: str, path: Path | None, names: tuple[str, ...]) -> bool:
    if path is not None:
        return any((path / name).is_file() for name in names)
    from huggingface_hub import try_to_load_from_cache

    if not _offline():
        return True  # online, the real run downloads them
    return any(isinstance(try_to_load_from_cache(source, name), str) for name in names)


def _load_config(source: str, path: Path | None, trust_remote_code: bool) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as err:
        first = first_line(err)
        if path is not None:
            raise RecipeError(f"model: {path} is not a model folder: {first}") from None
        offline = " (offline)" if _offline() else ""
        raise RecipeError(
            f"model: cannot find the Hub id {source} in the local cache or on the Hub{offline}: {first}"
        ) from None


def _offline() -> bool:
    """HF_HUB_OFFLINE, or a Hub that does not answer: then the run reads the cache only."""
    from rosetrain.models.loading import hub_reachable

    return not hub_reachable()


def check_lora_targets(recipe: Recipe, config: Any) -> None:
    """The LoRA target pattern must match some module: peft raises otherwise, once
    the weights are loaded. The module names come from the model built on ``meta``."""
    if recipe.lora is None:
        return
    import torch
    from peft.tuners.tuners_utils import check_target_module_exists
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, trust_remote_code=recipe.trust_remote_code)
    lora = peft_config(recipe)
    if lora.target_modules == "all-linear":  # PEFT's own shorthand: every linear layer but the output head
        return
    if not any(check_target_module_exists(lora, name) for name, _ in model.named_modules()):
        key = "lora.target_modules" if recipe.lora.target_modules else "lora.target"
        raise RecipeError(
            f"{recipe.source}: {key}: {lora.target_modules!r} matches no module of {type(model).__name__}"
        )


def name_recipe_keys(message: str, origins: dict[str, str]) -> list[str]:
    """The recipe keys whose TRL fields an error message names (``origins``: field -> key)."""
    text = message.lower().replace(" ", "_")
    found = [
        key
        for field, key in origins.items()
        if re.search(rf"(?<![a-z0-9]){re.escape(field)}(?![a-z0-9])", text)
    ]
    return list(dict.fromkeys(found))
