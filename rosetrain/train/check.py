"""Phase one of a training run: everything checked before any weights load.

:func:`check` reads the recipe once: the model path, vLLM, the training and
held-out data, what TRL, torch and peft would reject (``preflight``), and the
output folder's resume state, each failure one line naming what to change. What
it found (:class:`Checked`) is all the build and run phases need.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
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
    from rosetrain.models.loading import model_path

    check_model_made(recipe)
    recipe.model = model_path(recipe.model)  # a run folder: its final model; an adapter's base: check_run
    check_vllm(recipe)
    check_push_to_hub(recipe)
    heldout, exclude = check_data(recipe.data, recipe.eval)
    args = check_run(recipe)
    # last: a changed key is validated first, then whether output_dir's checkpoint may resume with it
    resume = check_resumable(recipe)
    return Checked(recipe=recipe, args=args, heldout=heldout, exclude_fingerprints=exclude, resume=resume)


def check_push_to_hub(recipe: Recipe) -> None:
    """``trl.push_to_hub: true`` is checked before training, as ``generate
    --push-to-hub`` checks first: huggingface_hub online, a token, a valid repo id.
    Otherwise the push would fail only once the training is done."""
    if not recipe.trl.get("push_to_hub"):
        return
    from huggingface_hub import constants, get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if constants.is_offline_mode():
        raise RecipeError(
            f"{recipe.source}: trl.push_to_hub: huggingface_hub is offline (HF_HUB_OFFLINE), so the "
            "model cannot be pushed; unset it, or set trl.push_to_hub=false"
        )
    if not get_token():
        raise RecipeError(
            f"{recipe.source}: trl.push_to_hub: no Hugging Face token (set HF_TOKEN, or run `hf auth login`)"
        )
    repo_id = recipe.trl.get("hub_model_id")
    if repo_id is not None:
        try:
            validate_repo_id(str(repo_id))
        except HFValidationError as err:
            raise RecipeError(
                f"{recipe.source}: trl.hub_model_id: {repo_id!r:.200} is not a Hub repo id ({err})"
            ) from None


def check_model_made(recipe: Recipe) -> None:
    """A model folder that is not there yet, which the recipe's own header says
    how to make (``rosetrain tiny-model --out models/tiny``), is named with that
    command: the name would otherwise be taken for a Hub id to download."""
    if Path(recipe.model).expanduser().exists():
        return
    command = header_command(Path(recipe.source), recipe.model)
    if command:
        raise RecipeError(
            f"model: {recipe.model} does not exist yet; the recipe's header makes it: "
            f"run `{command}` first (or set model to another folder or Hub id)"
        )


def header_command(source: Path, model: str) -> str | None:
    """The command in the opening comment of the recipe file that writes ``model``
    (``... --out MODEL``), without its own trailing comment."""
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        if not line.startswith("#"):
            break
        command = line.lstrip("#").split(" #")[0].strip()
        words = command.split()
        if words[:1] == ["rosetrain"] and any(
            a == "--out" and b.rstrip("/") == model.rstrip("/") for a, b in zip(words, words[1:])
        ):
            return command
    return None


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
