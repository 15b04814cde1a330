"""Phase three of a training run: resume, train, save, summarize.

:func:`run` trains a built trainer (from the checkpoint the checks chose, if
any), saves the final model (adapter or full) with its processor, a merged copy
on request, the model cards and ``train_summary.json``. Only the main process
writes output_dir, and it holds output_dir's lock (and so keeps its ownership
marker, which names each file the run writes before it is written) throughout.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from rosetrain.core.io import atomic_write, claim_outputs, holds_output_lock
from rosetrain.train.build import Built, model_reference
from rosetrain.train.card import claim_card, write_model_cards
from rosetrain.train.checkpoints import (
    checkpoint_steps,
    claim_checkpoints,
    finished_steps,
    load_weights,
    restore_weights_strictly,
)
from rosetrain.train.distributed import (
    is_main_process,
    leave_process_group,
    output_dir_lock,
    wait_for_every_process,
)
from rosetrain.train.recipe import Recipe
from rosetrain.train.resume import record_recipe
from rosetrain.train.step_logs import start_step_logs

logger = logging.getLogger("rosetrain.train")
FINAL_DIR = "checkpoint-final"
MERGED_DIR = "merged"
SUMMARY = "train_summary.json"


def run(built: Built) -> dict[str, Any]:
    """Train, save, and return the run summary (final folder, steps, mean loss)."""
    output_dir = built.checked.recipe.output_dir
    if holds_output_lock(output_dir):  # taken by rosetrain.train.train, around the checks and build too
        summary = _run(built)
    else:
        with output_dir_lock(output_dir):
            summary = _run(built)
    leave_process_group()  # not on an error: a barrier would wait for ranks that are gone
    return summary


def _run(built: Built) -> dict[str, Any]:
    recipe, trainer, checkpoint = built.checked.recipe, built.trainer, built.checked.resume
    if is_main_process():  # one writer of output_dir; a resume checks its checkpoints against this record
        claim_card(recipe)  # TRL writes README.md at each save: refused here if it is the user's
        record_recipe(recipe)
    done = finished_steps(Path(checkpoint), recipe.max_steps) if checkpoint else None
    if done is not None and (previous := finished_summary(recipe, done)) is not None:
        logger.warning("%s already holds this run's last step (%d); nothing to train", checkpoint, done)
        return previous  # a rerun of a finished run changes nothing (the trainer would train one step more)
    claim_checkpoints(trainer)  # output_dir's marker names each checkpoint before it is written
    result: Any = None
    if done is not None and checkpoint:  # killed after its last checkpoint, before the final save
        load_weights(trainer.model, Path(checkpoint))
        trainer.state.global_step = done
    else:
        if checkpoint:
            logger.warning("resuming from %s", checkpoint)
            restore_weights_strictly(trainer)
        steps = checkpoint_steps(Path(checkpoint)) if checkpoint else None
        if is_main_process() and (steps or not checkpoint):  # the logs as of the step training starts from
            start_step_logs(recipe.output_dir, steps[0] if steps else None)  # None: afresh, keep none
        wait_for_every_process()  # before any process logs a line
        result = trainer.train(resume_from_checkpoint=checkpoint)
    return save(built, result)


def save(built: Built, result: Any) -> dict[str, Any]:
    """The final model and processor, the merged copy on request, the cards and the summary."""
    recipe, trainer, processor = built.checked.recipe, built.trainer, built.processor
    final = Path(recipe.output_dir) / FINAL_DIR
    if is_main_process():
        claim_outputs(final)
    trainer.save_model(str(final))
    if trainer.is_world_process_zero():
        from rosetrain.train.callbacks import set_adapter_base  # transformers: imported when training

        processor.save_pretrained(str(final))
        set_adapter_base(final, model_reference(recipe))
        link_final_model(Path(recipe.output_dir), final)
    summary = {
        "final": str(final),
        "global_step": trainer.state.global_step,
        "train_loss": getattr(result, "training_loss", None),
        "train_runtime": (getattr(result, "metrics", None) or {}).get("train_runtime"),
        "world_size": trainer.args.world_size,
        "is_main_process": trainer.is_world_process_zero(),
    }
    if recipe.save_merged:
        summary["merged"] = str(save_merged(built))
    if trainer.is_world_process_zero():
        write_model_cards(recipe, summary)  # names the base model, data, method (TRL's: "[None]")
        atomic_write(Path(recipe.output_dir) / SUMMARY, json.dumps(summary, indent=2))
    if result is not None:  # trained in this call: the final held-out figures, the model safe on disk
        from rosetrain.train.callbacks import HeldoutEvalCallback

        evaluators = [c for c in trainer.callback_handler.callbacks if isinstance(c, HeldoutEvalCallback)]
        for callback in evaluators:
            callback.evaluate_final(trainer)
        if evaluators and trainer.is_world_process_zero():
            write_model_cards(recipe, summary)  # again, with the final held-out figures
    return summary


def link_final_model(output_dir: Path, final: Path) -> None:
    """``output_dir`` loads as its final model, as TRL's output folder does
    (``from_pretrained(output_dir)``): a relative link to each file of
    ``checkpoint-final``, not a second copy of the weights. The folder's own
    card (README.md) describes that model."""
    from rosetrain.core.io import claim_outputs
    from rosetrain.train.card import CARD_NAME

    for path in sorted(final.iterdir()):
        if path.name == CARD_NAME or not path.is_file():
            continue
        link = output_dir / path.name
        claim_outputs(link)  # a file of the user's there is refused, never replaced
        if link.is_symlink():
            link.unlink()  # the previous run's link
        elif link.exists():
            continue
        link.symlink_to(Path(FINAL_DIR) / path.name)


def finished_summary(recipe: Recipe, step: int) -> dict[str, Any] | None:
    """The summary a finished run wrote (its final model saved at ``step``), if whole."""
    try:
        summary = json.loads((Path(recipe.output_dir) / SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    whole = isinstance(summary, dict) and summary.get("global_step") == step
    return summary if whole and (Path(recipe.output_dir) / FINAL_DIR).is_dir() else None


def save_merged(built: Built) -> Path:
    """``output_dir/merged``: the saved final model with its LoRA merged in, as
    one plain model (e.g. for vLLM). Built from the files on disk, on the CPU,
    so the trainer's own model is left as it was (and sharded weights work)."""
    from rosetrain.models.loading import load_model_and_processor

    recipe, trainer = built.checked.recipe, built.trainer
    final, out = Path(recipe.output_dir) / FINAL_DIR, Path(recipe.output_dir) / MERGED_DIR
    if trainer.is_world_process_zero():
        dtype = next(trainer.model.parameters()).dtype
        model, _ = load_model_and_processor(
            final, device="cpu", dtype=dtype, trust_remote_code=recipe.trust_remote_code
        )
        model.save_pretrained(str(out))
        built.processor.save_pretrained(str(out))
    return out
