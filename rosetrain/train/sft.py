"""Supervised fine-tuning with TRL's ``SFTTrainer`` on prompt/completion rows with images.

Completion-only loss (the prompt and image tokens carry no loss), no
truncation (``max_length=None``: cutting a sequence would cut image tokens),
no packing. LoRA on the language model's attention by default (``lora:``),
the vision tower optional (``lora.vision``), or full fine-tuning (``lora: null``).
"""

from __future__ import annotations

from rosetrain.train.build import TrainerParts
from rosetrain.train.recipe import Recipe
from rosetrain.train.trl_config import make_config

# Not recipe keys: rosetrain's SFT rows need them (see above).
SFT_SETTINGS = {"max_length": None, "packing": False, "completion_only_loss": True}


def trl_config(recipe: Recipe):
    from trl import SFTConfig

    return make_config(SFTConfig, recipe, SFT_SETTINGS)


def trainer_parts(recipe: Recipe) -> TrainerParts:
    """``SFTTrainer``, with nothing of its own to add (``build.build`` makes it)."""
    from trl import SFTTrainer

    return TrainerParts(SFTTrainer)
