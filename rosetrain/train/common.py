"""What SFT and GRPO share: checks before training, the TRL config, the model,
LoRA, resuming, and saving.

Order matters: every check runs before the model loads; the TRL config is
built before the model loads too (DeepSpeed ZeRO-3 partitions weights at load
time only when the training arguments already exist).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import json
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from rosetrain.core.errors import first_line
from rosetrain.train import data as D
from rosetrain.train.distributed import bf16_supported, cpu_group_settings
from rosetrain.train.recipe import Recipe, RecipeError, peft_config, recipe_to_dict, valid_keys

logger = logging.getLogger("rosetrain.train")
FINAL_DIR = "checkpoint-final"
MERGED_DIR = "merged"
RECIPE_RECORD = "rosetrain_recipe.yaml"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
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


@dataclasses.dataclass
class Inputs:
    """Everything checked before training: held-out items, scenes to skip, and
    the TRL config the trainer gets."""

    heldout: list[dict[str, Any]]
    exclude_fingerprints: set[str]
    args: Any = None


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# ----------------------------------------------------------------- checks


def check_inputs(recipe: Recipe) -> Inputs:
    """Fail on a bad model path, unusable data, a held-out split that overlaps
    training, or settings TRL, torch or peft would reject (``preflight``), each
    with a message naming it; no weights are loaded."""
    from rosetrain.models.loading import resolve_model_source
    from rosetrain.train.preflight import check_run

    resolve_model_source(recipe.model)  # an adapter's base: checked with the model (check_run)
    check_vllm(recipe)
    if recipe.data.folder is not None:
        D.check_folder(recipe.data)
    else:
        D.check_spec(recipe.data)
    heldout: list[dict[str, Any]] = []
    exclude: set[str] = set()
    if recipe.eval.folder is not None:
        heldout = D.heldout_records(recipe.eval)
        exclude = {r["scene_fingerprint"] for r in heldout if r.get("scene_fingerprint")}
        if recipe.data.folder is not None:
            D.check_no_overlap(D.folder_fingerprints(recipe.data), heldout, recipe.data, recipe.eval)
        else:
            D.check_stream_apart(recipe.data, heldout, recipe.eval)
        heldout = D.pick_items(heldout, recipe.eval.items)
    # eval.folder: null turns held-out evaluation off, whatever eval.every_steps says:
    # it is how a user without the held-out data runs a shipped recipe
    args = check_run(recipe)
    # last: a changed key is validated first, then whether output_dir's checkpoint may resume with it
    check_resumable(recipe)
    return Inputs(heldout=heldout, exclude_fingerprints=exclude, args=args)


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


# ----------------------------------------------------------------- TRL config


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
        dataloader_num_workers=recipe.num_workers,
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


# ----------------------------------------------------------------- model


def load_policy(recipe: Recipe) -> tuple[Any, Any]:
    """The model to train (an adapter given as ``model`` is merged into its base
    first, so LoRA stages stack) on the CPU; the trainer places it."""
    import torch

    from rosetrain.models.loading import load_model_and_processor

    dtype = torch.bfloat16 if bf16_supported() else torch.float32
    if recipe.cpu_threads is not None and not has_gpu():
        torch.set_num_threads(recipe.cpu_threads)
    model, processor = load_model_and_processor(
        recipe.model, device="cpu", dtype=dtype, trust_remote_code=recipe.trust_remote_code
    )
    if getattr(model.generation_config, "pad_token_id", None) is None:
        model.generation_config.pad_token_id = processor.tokenizer.pad_token_id
    set_pixel_budget(processor, recipe.min_pixels, recipe.max_pixels)
    return model, processor


def set_pixel_budget(processor: Any, min_pixels: int | None, max_pixels: int | None) -> None:
    """Qwen-style processors resize each image to hold between min and max pixels;
    the saved processor keeps the budget, so evaluation sees what training saw."""
    if min_pixels is None and max_pixels is None:
        return
    image_processor = getattr(processor, "image_processor", None)
    size = getattr(image_processor, "size", None)
    if image_processor is None or size is None or "longest_edge" not in dict(size):
        raise RecipeError(
            f"min_pixels/max_pixels: the processor of this model "
            f"({type(image_processor).__name__}) has no pixel budget to set"
        )
    size = {key: value for key, value in dict(size).items() if value is not None}
    if min_pixels is not None:
        size["shortest_edge"] = min_pixels
    if max_pixels is not None:
        size["longest_edge"] = max_pixels
    if size["shortest_edge"] > size["longest_edge"]:
        raise RecipeError(f"min_pixels ({size['shortest_edge']}) > max_pixels ({size['longest_edge']})")
    image_processor.size = size


def model_reference(recipe: Recipe) -> str:
    """How a saved adapter names what it stacks on: an absolute folder, or a Hub id."""
    path = Path(recipe.model).expanduser()
    return str(path.resolve()) if path.exists() else recipe.model


# ----------------------------------------------------------------- run


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete ``checkpoint-N``: the trainer writes trainer_state.json
    last (not atomically), so a kill mid-save leaves a folder without a readable one."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    found = [
        (int(m.group(1)), p)
        for p in folder.iterdir()
        if (m := _CHECKPOINT.match(p.name)) and is_complete_checkpoint(p)
    ]
    return str(max(found)[1]) if found else None


def is_complete_checkpoint(folder: Path) -> bool:
    try:
        return isinstance(json.loads((folder / "trainer_state.json").read_text()), dict)
    except (OSError, ValueError):
        return False


def resume_from(recipe: Recipe) -> str | None:
    if recipe.resume == "never":
        return None
    if recipe.resume == "auto":
        found = last_checkpoint(recipe.output_dir)
        if found is not None:  # named by hand (resume: <folder>), a checkpoint resumes without them
            _refuse_missing_training_state(Path(found))
        return found
    if not is_complete_checkpoint(Path(recipe.resume)):
        raise RecipeError(
            f"resume: {recipe.resume} is not a complete training checkpoint (no readable trainer_state.json)"
        )
    return recipe.resume


def _refuse_missing_training_state(checkpoint: Path) -> None:
    from rosetrain.train.checkpoints import missing_training_state

    missing = missing_training_state(checkpoint)
    if missing:
        raise RecipeError(
            f"resume: auto: {checkpoint} has no {' or '.join(missing)}, so the run would go on with a "
            f"fresh optimizer and learning-rate schedule, not as the interrupted one would have; name "
            f"the checkpoint (resume: {checkpoint}) to continue from its weights anyway, or set "
            f"resume: never to start over"
        )


# Keys a resumed run may change: how long and how it logs/saves, not what it trains.
RESUMABLE_CHANGES = {
    "max_steps",
    "logging_steps",
    "save_steps",
    "save_total_limit",
    "resume",
    "output_dir",
    "report_to",
    "cpu_threads",
    "eval",
}


def check_resumable(recipe: Recipe) -> None:
    """``resume: auto`` picks up the last checkpoint in output_dir; if that
    folder was trained with another recipe (another model, learning rate,
    data...), resuming would mix two runs or fail deep inside the optimizer,
    so refuse, naming the keys that differ."""
    from rosetrain.train.checkpoints import refuse_foreign_checkpoints

    if recipe.resume != "auto":
        resume_from(recipe)  # a named checkpoint must be complete
        refuse_foreign_checkpoints(Path(recipe.output_dir))  # the trainer would write into or delete them
        return
    record = Path(recipe.output_dir) / RECIPE_RECORD
    checkpoint = last_checkpoint(recipe.output_dir)
    if checkpoint is None:
        refuse_foreign_checkpoints(Path(recipe.output_dir))
        return
    if not record.is_file():
        # Without the record nothing says what the checkpoint was trained with.
        raise RecipeError(
            f"output_dir {recipe.output_dir} holds {Path(checkpoint).name} but no {RECIPE_RECORD}, "
            f"so rosetrain cannot tell which recipe trained it; name it with resume: <checkpoint folder> "
            f"to continue from it anyway, set resume: never to start over, or use another output_dir"
        )
    before = yaml.safe_load(record.read_text()) or {}
    now = recipe_to_dict(recipe)
    changed = sorted(k for k in now.keys() - RESUMABLE_CHANGES if before.get(k) != now[k])
    if changed:
        detail = "; ".join(f"{k}: {before.get(k)!r} -> {now[k]!r}" for k in changed[:4])
        raise RecipeError(
            f"output_dir {recipe.output_dir} holds {Path(checkpoint).name} of a run "
            f"with another recipe ({detail}); use another output_dir, set "
            f"resume: never to start over there, or delete the folder"
        )
    refuse_foreign_checkpoints(Path(recipe.output_dir))  # the trainer would resume from them, or delete them
    _refuse_missing_training_state(Path(checkpoint))


def record_recipe(recipe: Recipe) -> None:
    from rosetrain.core.io import atomic_write

    out = Path(recipe.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / RECIPE_RECORD, yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False))


def train_and_save(trainer: Any, recipe: Recipe, processor: Any) -> dict[str, Any]:
    """Train (resuming when a checkpoint is there), then save the final model
    (adapter or full) with its processor, and a merged copy on request. The main
    process holds output_dir's lock (and so keeps its ownership marker) throughout."""
    from rosetrain.core.io import holds_output_lock
    from rosetrain.train.distributed import output_dir_lock

    if holds_output_lock(recipe.output_dir):  # taken by rosetrain.train.train, around the build too
        return _train_and_save(trainer, recipe, processor)
    with output_dir_lock(recipe.output_dir):
        return _train_and_save(trainer, recipe, processor)


def _train_and_save(trainer: Any, recipe: Recipe, processor: Any) -> dict[str, Any]:
    from rosetrain.train.callbacks import set_adapter_base
    from rosetrain.train.card import claim_card
    from rosetrain.train.checkpoints import claim_checkpoints, finished_steps, restore_weights_strictly
    from rosetrain.train.distributed import is_main_process

    if is_main_process():  # one writer of output_dir; a resume checks its checkpoints against this record
        claim_card(recipe)  # TRL writes README.md at each save: refused here if it is the user's
        record_recipe(recipe)
    checkpoint = resume_from(recipe)
    done = finished_steps(Path(checkpoint), recipe.max_steps) if checkpoint else None
    if done is not None and (previous := _finished_summary(recipe, done)) is not None:
        logger.warning("%s already holds this run's last step (%d); nothing to train", checkpoint, done)
        return previous  # a rerun of a finished run changes nothing (the trainer would train one step more)
    claim_checkpoints(trainer)  # output_dir's marker names each checkpoint before it is written
    result: Any = None
    if done is not None and checkpoint:  # killed after its last checkpoint, before the final save
        from rosetrain.train.checkpoints import load_weights

        load_weights(trainer.model, Path(checkpoint))
        trainer.state.global_step = done
    else:
        if checkpoint:
            logger.warning("resuming from %s", checkpoint)
            restore_weights_strictly(trainer)
        result = trainer.train(resume_from_checkpoint=checkpoint)
    final = Path(recipe.output_dir) / FINAL_DIR
    if is_main_process():
        from rosetrain.core.io import claim_outputs

        claim_outputs(final)
    trainer.save_model(str(final))
    if trainer.is_world_process_zero():
        processor.save_pretrained(str(final))
        set_adapter_base(final, model_reference(recipe))
    summary = {
        "final": str(final),
        "global_step": trainer.state.global_step,
        "train_loss": getattr(result, "training_loss", None),
        "train_runtime": (getattr(result, "metrics", None) or {}).get("train_runtime"),
        "world_size": trainer.args.world_size,
        "is_main_process": trainer.is_world_process_zero(),
    }
    if recipe.save_merged:
        summary["merged"] = str(save_merged(trainer, recipe, processor))
    if trainer.is_world_process_zero():
        from rosetrain.core.io import atomic_write
        from rosetrain.train.card import write_model_cards

        write_model_cards(recipe, summary)  # names the base model, data, method (TRL's: "[None]")
        atomic_write(Path(recipe.output_dir) / "train_summary.json", json.dumps(summary, indent=2))
    return summary


def _finished_summary(recipe: Recipe, step: int) -> dict[str, Any] | None:
    """The summary a finished run wrote (its final model saved at ``step``), if whole."""
    try:
        summary = json.loads((Path(recipe.output_dir) / "train_summary.json").read_text())
    except (OSError, ValueError):
        return None
    whole = isinstance(summary, dict) and summary.get("global_step") == step
    return summary if whole and (Path(recipe.output_dir) / FINAL_DIR).is_dir() else None


def save_merged(trainer: Any, recipe: Recipe, processor: Any) -> Path:
    """``output_dir/merged``: the saved final model with its LoRA merged in, as
    one plain model (e.g. for vLLM). Built from the files on disk, on the CPU,
    so the trainer's own model is left as it was (and sharded weights work)."""
    from rosetrain.models.loading import load_model_and_processor

    final, out = Path(recipe.output_dir) / FINAL_DIR, Path(recipe.output_dir) / MERGED_DIR
    if trainer.is_world_process_zero():
        dtype = next(trainer.model.parameters()).dtype
        model, _ = load_model_and_processor(
            final, device="cpu", dtype=dtype, trust_remote_code=recipe.trust_remote_code
        )
        model.save_pretrained(str(out))
        processor.save_pretrained(str(out))
    return out


def describe_plan(recipe: Recipe, inputs: Inputs, model: Any) -> str:
    params = sum(p.numel() for p in model.parameters())
    data = (
        f"stream {recipe.data.spec} (seed {recipe.data.seed})"
        if recipe.data.spec
        else f"folder {recipe.data.folder} ({recipe.data.split})"
    )
    method = (
        "full fine-tuning"
        if recipe.lora is None
        else (f"LoRA r={recipe.lora.r} on {recipe.lora.target}" + (" + vision" if recipe.lora.vision else ""))
    )
    held = (
        f"{len(inputs.heldout)} held-out items from {recipe.eval.folder}"
        + (f" every {recipe.eval.every_steps} steps" if recipe.eval.every_steps else " at the end")
        if inputs.heldout
        else "no held-out evaluation"
    )
    return (
        f"rosetrain train {recipe.method}: {recipe.model} ({params / 1e6:.2f}M parameters), "
        f"{method}; data: {data}; {held}; output: {recipe.output_dir}"
    )


def build_trainer(
    recipe: Recipe,
    inputs: Inputs | None,
    trainer_class: type,
    prepare_rows: Callable[[Any, Any, Any], tuple[Any, list[Any]]] | None = None,
    **method_kwargs: Any,
):
    """What every trainer needs, built once: checks, the policy (left-padded:
    generation appends on the right), the rows, the callbacks, LoRA; then the TRL
    ``trainer_class`` with the method's own arguments (GRPO: ``reward_funcs``).
    ``prepare_rows(rows, processor, args)`` may replace the rows (GRPO's frontier
    filter) and returns callbacks that need the trainer once it exists."""
    inputs = inputs or check_inputs(recipe)
    model, processor = load_policy(recipe)
    processor.tokenizer.padding_side = "left"
    train_dataset = D.train_dataset(recipe.data, inputs.exclude_fingerprints, recipe.seed)
    needs_trainer: list[Any] = []
    if prepare_rows is not None:
        train_dataset, needs_trainer = prepare_rows(train_dataset, processor, inputs.args)
    callbacks = callbacks_for(recipe, inputs, processor)
    logger.warning(describe_plan(recipe, inputs, model))
    trainer = trainer_class(
        model=model,
        args=inputs.args,
        train_dataset=train_dataset,
        processing_class=processor,
        peft_config=peft_config(recipe),
        callbacks=callbacks,
        **method_kwargs,
    )
    attach(trainer, callbacks + needs_trainer)
    return trainer, processor


def callbacks_for(recipe: Recipe, inputs: Inputs, processor: Any) -> list[Any]:
    from rosetrain.train.callbacks import AdapterBaseCallback, HeldoutEvalCallback

    callbacks: list[Any] = [AdapterBaseCallback(model_reference(recipe))]
    if inputs.heldout:
        callbacks.append(
            HeldoutEvalCallback(
                inputs.heldout,
                processor,
                every_steps=recipe.eval.every_steps,
                max_new_tokens=recipe.eval.max_new_tokens,
                batch_size=recipe.eval.batch_size,
                output_dir=recipe.output_dir,
            )
        )
    return callbacks


def attach(trainer: Any, callbacks: list[Any]) -> None:
    """Callbacks that log through the trainer need it, and it exists only now."""
    for callback in callbacks:
        if hasattr(callback, "trainer"):
            callback.trainer = trainer
