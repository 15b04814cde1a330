"""The TRL config (``SFTConfig`` / ``GRPOConfig``) a recipe sets.

Built during the checks, before the model loads: DeepSpeed ZeRO-3 partitions
weights at load time only when the training arguments already exist.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from rosetrain.core.errors import first_line
from rosetrain.train.distributed import bf16_supported, cpu_group_settings, has_gpu
from rosetrain.train.recipe import Recipe, RecipeError, valid_keys

# Recipe keys that map to TrainingArguments of the same name.
TRAINING_KEYS = (
    "output_dir",
    "seed",
    "max_steps",
    "num_train_epochs",
    "gradient_accumulation_steps",
    "lr_scheduler_type",
    "warmup_steps",
    "weight_decay",
    "max_grad_norm",
    "logging_steps",
    "save_steps",
    "save_total_limit",
    "report_to",
    "run_name",
)


def make_config(
    config_class: type,
    recipe: Recipe,
    method_kwargs: Mapping[str, Any],
    method_origins: Mapping[str, str] = {},
):
    """The TRL config: recipe keys, then the method's, then the recipe's ``trl:`` extras.
    ``method_origins`` names the recipe key behind each method field, so that an
    error of the config names the recipe key to change."""
    gpu = has_gpu()
    fields = {f.name for f in dataclasses.fields(config_class)}
    # transformers 5.23 renamed gradient_checkpointing; older releases (all that
    # vLLM 0.31 accepts) know only the old name, newer ones warn on it
    checkpointing = (
        "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    )
    kwargs: dict[str, Any] = {key: getattr(recipe, key) for key in TRAINING_KEYS}
    kwargs.update(
        learning_rate=recipe.lr,
        per_device_train_batch_size=recipe.train_batch_size,
        dataloader_num_workers=recipe.num_workers(gpu),
        # TRL defaults both on; on a CPU they only cost time (2.2x per step)
        bf16=gpu and bf16_supported() if recipe.bf16 is None else recipe.bf16,
        dataloader_pin_memory=gpu,
        trust_remote_code=recipe.trust_remote_code,
        save_strategy="steps",
    )
    kwargs.update(cpu_group_settings(gpu))  # several processes without a GPU: one gloo group
    kwargs[checkpointing] = gpu if recipe.gradient_checkpointing is None else recipe.gradient_checkpointing
    if kwargs[checkpointing]:
        kwargs[f"{checkpointing}_kwargs"] = {"use_reentrant": False}  # works with LoRA and DDP
    kwargs.update(method_kwargs)
    origins = {
        **{key: key for key in kwargs},
        checkpointing: "gradient_checkpointing",
        # TRL derives these from the batch settings
        "generation_batch_size": "per_device_train_batch_size",
        "steps_per_generation": "gradient_accumulation_steps",
        "schedulertype": "lr_scheduler_type",
        **method_origins,
    }
    for key, value in recipe.trl.items():
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=3)
            raise RecipeError(
                f"{recipe.source}: trl.{key} is not a {config_class.__name__} field"
                + (f" (close: {', '.join(close)})" if close else "")
            )
        if key in valid_keys(Recipe):
            raise RecipeError(f"{recipe.source}: trl.{key}: set it as the recipe key {key!r} instead")
        kwargs[key], origins[key] = value, f"trl.{key}"
    try:
        return config_class(**kwargs)
    except (TypeError, ValueError) as err:
        from rosetrain.train.preflight import name_recipe_keys

        message = first_line(err)
        keys = name_recipe_keys(message, origins)
        raise RecipeError(
            f"{recipe.source}: {', '.join(keys) + ': ' if keys else ''}"
            f"{config_class.__name__} rejects these settings: {message}"
        ) from None
