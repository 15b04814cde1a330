"""Training through TRL from a recipe: LoRA/full SFT and GRPO with the scorer's rewards.

- ``recipe.py``: the YAML recipe (dataclasses, ``--set`` overrides)
- ``data.py``: training rows (a stream or a folder) and held-out items, checked
- ``rewards.py``: pass / soft / format rewards on ``rosetrain.scoring``
- ``callbacks.py``: held-out evaluation every N steps; adapter provenance
- ``common.py``: checks, TRL config, model loading, resume, saving
- ``sft.py``, ``grpo.py``: the two trainers

Heavy imports (torch, transformers, trl) happen only inside the functions.
"""
from __future__ import annotations

from typing import Any


def train(recipe, inputs=None) -> dict[str, Any]:
    """Run a ``Recipe`` (checked first unless ``inputs`` from ``check_inputs`` is
    given); returns the run summary (final folder, steps, mean loss). The main
    process holds ``output_dir``'s lock throughout: a second run there is refused."""
    from rosetrain.train.distributed import output_dir_lock

    with output_dir_lock(recipe.output_dir):
        if recipe.method == "sft":
            from rosetrain.train.sft import train_sft

            return train_sft(recipe, inputs)
        from rosetrain.train.grpo import train_grpo

        return train_grpo(recipe, inputs)
