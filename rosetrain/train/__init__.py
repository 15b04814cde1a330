"""Training through TRL from a recipe: LoRA/full SFT and GRPO with the scorer's rewards.

- ``recipe.py``: the YAML recipe (dataclasses, ``--set`` overrides)
- ``data.py``: training rows (a stream or a folder) and held-out items, checked
- ``rewards.py``: pass / soft / format rewards on ``rosetrain.scoring``
- ``callbacks.py``: held-out evaluation every N steps; adapter provenance
- ``common.py``: checks, TRL config, model loading, trainer construction, resume, saving
- ``preflight.py``: what the run would reject, found before weights load (``--check``)
- ``checkpoints.py``: restoring a checkpoint's weights, strictly
- ``distributed.py``: one distributed job or none; the output_dir lock
- ``sft.py``, ``grpo.py``: each method's TRL config and trainer class (built in ``common``)

Heavy imports (torch, transformers, trl) happen only inside the functions.
"""

from __future__ import annotations

from typing import Any


def train(recipe, inputs=None) -> dict[str, Any]:
    """Run a ``Recipe`` (checked first unless ``inputs`` from ``check_inputs`` is
    given); returns the run summary (final folder, steps, mean loss). The main
    process holds ``output_dir``'s lock throughout: a second run there is refused."""
    from rosetrain.train import common
    from rosetrain.train.distributed import output_dir_lock
    from rosetrain.train.recipe import method_module

    with output_dir_lock(recipe.output_dir):
        trainer, processor = method_module(recipe.method).build_trainer(recipe, inputs)
        return common.train_and_save(trainer, recipe, processor)
