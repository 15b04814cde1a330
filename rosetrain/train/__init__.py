"""Training through TRL from a recipe: LoRA/full SFT and GRPO with the scorer's rewards.

A run is three phases, each a function in its own module:

- ``check.py``: :func:`check` reads the recipe once and checks the model, the
  data, the settings TRL, torch and peft would reject, the output folder and its
  resume state; no weights load (``--check`` stops here)
- ``build.py``: :func:`build` loads the model and processor, the training rows
  and the callbacks, and constructs the method's TRL trainer
- ``run.py``: :func:`run` resumes, trains, saves the model, cards and summary

What they use:

- ``recipe.py``: the YAML recipe (dataclasses, ``--set`` overrides)
- ``sft.py``, ``grpo.py``: each method's TRL config and trainer parts
- ``grpo_trainer.py``: TRL's GRPO trainer, its prompt groups kept whole when each
  process reads its own shards of a stream
- ``trl_config.py``: the TRL config the recipe's keys set
- ``preflight.py``: what the run would reject, found before weights load
- ``data.py``: training rows (a stream or a folder) and held-out items, checked
- ``resume.py``: which checkpoint a run resumes from, and the recipe record
- ``checkpoints.py``: restoring a checkpoint's weights, strictly; foreign checkpoints
- ``rewards.py``: pass / soft / format rewards on ``rosetrain.scoring``
- ``callbacks.py``: held-out evaluation every N steps; adapter provenance
- ``card.py``: the model card of the saved folders
- ``distributed.py``: one distributed job or none; the output_dir lock

Heavy imports (torch, transformers, trl) happen only inside the functions
(``grpo_trainer.py``, a subclass of TRL's trainer, is itself imported only there).
"""

from __future__ import annotations

from typing import Any


def train(recipe, checked=None) -> dict[str, Any]:
    """Run a ``Recipe``: check it (unless ``checked``, from ``check.check``, is
    given), build the trainer, run it; returns the run summary (final folder,
    steps, mean loss). The main process holds ``output_dir``'s lock throughout:
    a second run there is refused."""
    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.distributed import output_dir_lock
    from rosetrain.train.run import run

    with output_dir_lock(recipe.output_dir):
        return run(build(checked or check(recipe)))
