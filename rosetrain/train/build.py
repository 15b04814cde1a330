"""Phase two of a training run: the trainer, built once from what the checks found.

:func:`build` loads the policy (an adapter given as ``model`` is merged into its
base first, so LoRA stages stack) with its processor, reads the training rows,
makes the callbacks and constructs the method's TRL trainer (``sft.py``,
``grpo.py``: :class:`TrainerParts`). Nothing has trained yet.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rosetrain.core.verbosity import verbose
from rosetrain.train.check import Checked
from rosetrain.train.data import train_dataset
from rosetrain.train.distributed import bf16_supported, gradients_in_buckets, has_gpu, is_main_process
from rosetrain.train.log_lines import use_log_lines
from rosetrain.train.recipe import Recipe, RecipeError, method_module, peft_config
from rosetrain.train.shared_memory import share_memory

logger = logging.getLogger("rosetrain.train")


@dataclasses.dataclass
class PreparedRows:
    """What ``TrainerParts.prepare_rows`` returns: the rows the trainer reads,
    objects that need the trainer once it exists (``attach``), and more of the
    trainer's own arguments (GRPO's ``rollout_func``)."""

    rows: Any
    needs_trainer: list[Any] = dataclasses.field(default_factory=list)
    trainer_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TrainerParts:
    """What a method adds to the shared build: its TRL trainer class, the trainer's
    own arguments (GRPO: ``reward_funcs``), and ``prepare_rows(rows, processor, args)``,
    which may replace the rows (GRPO's frontier filter)."""

    trainer_class: type
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    prepare_rows: Callable[[Any, Any, Any], PreparedRows] | None = None


@dataclasses.dataclass
class Built:
    """A trainer ready to run, its processor, and the checks it was built from."""

    checked: Checked
    trainer: Any
    processor: Any


def build(checked: Checked) -> Built:
    """The policy (left-padded: generation appends on the right), the rows, the
    callbacks, LoRA, then the method's TRL trainer with its own arguments."""
    recipe = checked.recipe
    parts: TrainerParts = method_module(recipe.method).trainer_parts(recipe)
    model, processor = load_policy(recipe)
    processor.tokenizer.padding_side = "left"
    rows = train_dataset(recipe.data, checked.exclude_fingerprints, recipe.seed)
    prepared = PreparedRows(rows)
    if parts.prepare_rows is not None:
        prepared = parts.prepare_rows(rows, processor, checked.args)
    callbacks = callbacks_for(checked, processor)
    if is_main_process():  # one plan line for the job, not one a process
        logger.warning(describe_plan(checked, model))
    with warnings.catch_warnings():
        # TRL's experimental rollout_func is passed only where a recipe key asks for
        # it (grpo.frontier_reuse), and the tests run it against the TRL installed
        if not verbose():
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
        trainer = parts.trainer_class(
            model=model,
            args=checked.args,
            train_dataset=prepared.rows,
            processing_class=processor,
            peft_config=peft_config(recipe),
            callbacks=callbacks,
            **parts.kwargs,
            **prepared.trainer_kwargs,
        )
    attach(trainer, callbacks + prepared.needs_trainer)
    use_log_lines(trainer)
    gradients_in_buckets(trainer)
    share_memory(trainer)
    if recipe.vision_lr_scale != 1.0:
        scale_vision_lr(trainer, recipe.vision_lr_scale)
    return Built(checked=checked, trainer=trainer, processor=processor)


def load_policy(recipe: Recipe) -> tuple[Any, Any]:
    """The model to train (an adapter given as ``model`` is merged into its base
    first, so LoRA stages stack) on the CPU; the trainer places it."""
    import torch

    from rosetrain.core.allocator import keep_freed_memory
    from rosetrain.core.cpus import pin_local_rank
    from rosetrain.models.loading import load_model_and_processor

    # a recipe's `bf16: false` keeps float32 weights on a GPU too (the tiny demo models need it)
    bf16 = bf16_supported() if recipe.bf16 is None else recipe.bf16 and bf16_supported()
    dtype = torch.bfloat16 if bf16 else torch.float32
    if not has_gpu():
        keep_freed_memory()  # a CPU step frees and asks again for the same memory
        pin_local_rank()  # several processes: each keeps to its own core(s)
        if recipe.cpu_threads is not None:
            torch.set_num_threads(recipe.cpu_threads)
    model, processor = load_model_and_processor(
        recipe.model, device="cpu", dtype=dtype, trust_remote_code=recipe.trust_remote_code
    )
    if getattr(model.generation_config, "pad_token_id", None) is None:
        model.generation_config.pad_token_id = processor.tokenizer.pad_token_id
    set_pixel_budget(processor, recipe.min_pixels, recipe.max_pixels)
    if recipe.freeze_vision:
        freeze_vision_tower(model)
    return model, processor


def vision_tower(model: Any, key: str) -> Any:
    """The model's vision tower (with its merger), or a :class:`RecipeError` naming ``key``."""
    tower = getattr(getattr(model, "model", model), "visual", None)
    if tower is None:
        raise RecipeError(f"{key}: {type(model).__name__} has no vision tower (model.visual)")
    return tower


def freeze_vision_tower(model: Any) -> None:
    """No gradient for the vision tower: what the base perceives stays as it was."""
    for parameter in vision_tower(model, "freeze_vision").parameters():
        parameter.requires_grad_(False)


def scale_vision_lr(trainer: Any, scale: float) -> None:
    """The trainer's own optimizer (its class, betas, weight-decay split), with the
    vision tower's parameters in groups of their own at ``scale`` x the learning
    rate; the scheduler scales each group's rate alike. Parameters are matched by
    identity, so the groups hold through a PEFT or DDP wrapper."""
    model = trainer.model
    vision = {
        id(p)
        for p in vision_tower(
            model.get_base_model() if hasattr(model, "get_base_model") else model, "vision_lr_scale"
        ).parameters()
    }
    optimizer_class, kwargs = trainer.get_optimizer_cls_and_kwargs(trainer.args, model)
    decay = set(trainer.get_decay_parameter_names(model))
    groups: dict[tuple[bool, bool], list[Any]] = {}
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            groups.setdefault((id(parameter) in vision, name in decay), []).append(parameter)
    kwargs["params"] = [
        {
            "params": parameters,
            "lr": trainer.args.learning_rate * (scale if in_vision else 1.0),
            "weight_decay": trainer.args.weight_decay if decays else 0.0,
        }
        for (in_vision, decays), parameters in sorted(groups.items())
    ]
    trainer.optimizer_cls_and_kwargs = (optimizer_class, kwargs)


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


def callbacks_for(checked: Checked, processor: Any) -> list[Any]:
    from rosetrain.train.callbacks import AdapterBaseCallback, CheckpointCardCallback, HeldoutEvalCallback

    recipe = checked.recipe
    callbacks: list[Any] = [AdapterBaseCallback(model_reference(recipe)), CheckpointCardCallback(recipe)]
    if checked.heldout:
        callbacks.append(
            HeldoutEvalCallback(
                checked.heldout,
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


def describe_plan(checked: Checked, model: Any) -> str:
    recipe = checked.recipe
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
        f"{len(checked.heldout)} held-out items from {recipe.eval.folder}"
        + (f" every {recipe.eval.every_steps} steps" if recipe.eval.every_steps else " at the end")
        if checked.heldout
        else "no held-out evaluation"
    )
    return (
        f"rosetrain train {recipe.method}: {recipe.model} ({params / 1e6:.2f}M parameters), "
        f"{method}; data: {data}; {held}; output: {recipe.output_dir}"
    )
