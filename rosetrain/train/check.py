"""Phase one of a training run: everything checked before any weights load.

:func:`check` reads the recipe once: the model path, vLLM, the training and
held-out data, what TRL, torch and peft would reject (``preflight``), and the
output folder's resume state, each failure one line naming what to change. What
it found (:class:`Checked`) is all the build and run phases need.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

from rosetrain.train.data import check_data
from rosetrain.train.distributed import has_gpu
from rosetrain.train.preflight import check_run
from rosetrain.train.recipe import Recipe, RecipeError
from rosetrain.train.resume import check_resumable


@dataclasses.dataclass
class Checked:
    """A checked recipe, and what the checks found: the TRL config the trainer
    gets, the held-out items, the scenes a stream skips, and the checkpoint the
    run resumes from (None: it starts afresh)."""

    recipe: Recipe
    args: Any
    heldout: list[dict[str, Any]]
    exclude_fingerprints: set[str]
    resume: str | None


def check(recipe: Recipe) -> Checked:
    """Fail on a bad model path, unusable data, a held-out split that overlaps
    training, settings TRL, torch or peft would reject, or an output folder the
    run cannot resume in, each with a message naming it; no weights are loaded."""
    from rosetrain.models.loading import resolve_model_source

    resolve_model_source(recipe.model)  # an adapter's base: checked with the model (check_run)
    check_vllm(recipe)
    heldout, exclude = check_data(recipe.data, recipe.eval)
    args = check_run(recipe)
    # last: a changed key is validated first, then whether output_dir's checkpoint may resume with it
    resume = check_resumable(recipe)
    return Checked(recipe=recipe, args=args, heldout=heldout, exclude_fingerprints=exclude, resume=resume)


def check_vllm(recipe: Recipe) -> None:
    mode = recipe.grpo.vllm if recipe.method == "grpo" else None
    if mode is None:
        return
    if importlib.util.find_spec("vllm") is None:
        raise RecipeError(
            f"grpo.vllm: {mode!r} needs the vllm package, which is not installed "
            f"(pip install 'rosetrain[vllm]'; TRL 1.16 supports vllm <= 0.31), "
            f"or set grpo.vllm: null to generate with transformers"
        )
    if mode == "colocate" and not has_gpu():
        raise RecipeError("grpo.vllm: colocate needs a CUDA GPU; set grpo.vllm: null on this machine")
