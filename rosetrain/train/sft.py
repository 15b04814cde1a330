"""Supervised fine-tuning with TRL's ``SFTTrainer`` on prompt/completion rows with images.

Completion-only loss (the prompt and image tokens carry no loss), no
truncation (``max_length=None``: cutting a sequence would cut image tokens),
no packing. LoRA on the language model's attention by default (``lora:``),
the vision tower optional (``lora.vision``), or full fine-tuning (``lora: null``).
"""
from __future__ import annotations

import logging
from typing import Any

from rosetrain.train import common as C
from rosetrain.train.recipe import Recipe

logger = logging.getLogger("rosetrain.train")


# Not recipe keys: rosetrain's SFT rows need them (see above).
SFT_SETTINGS = {"max_length": None, "packing": False, "completion_only_loss": True}


def trl_config(recipe: Recipe):
    from trl import SFTConfig

    return C.make_config(SFTConfig, recipe, SFT_SETTINGS)


def build_trainer(recipe: Recipe, inputs: C.Inputs | None = None):
    """Check everything, then return (trainer, processor): nothing has trained yet."""
    from trl import SFTTrainer

    inputs = inputs or C.check_inputs(recipe)
    args = inputs.args
    model, processor = C.load_policy(recipe)
    train_dataset = C.D.train_dataset(recipe.data, inputs.exclude_fingerprints, recipe.seed)
    callbacks = C.callbacks_for(recipe, inputs, processor)
    logger.warning(C.describe_plan(recipe, inputs, model))
    trainer = SFTTrainer(model=model, args=args, train_dataset=train_dataset,
                         processing_class=processor, peft_config=C.peft_config(recipe),
                         callbacks=callbacks)
    C.attach(trainer, callbacks)
    return trainer, processor


def train_sft(recipe: Recipe, inputs: C.Inputs | None = None) -> dict[str, Any]:
    trainer, processor = build_trainer(recipe, inputs)
    C.record_recipe(recipe)
    return C.train_and_save(trainer, recipe, processor)
