"""Restoring a training checkpoint's weights, strictly.

transformers 5 saves a model in its checkpoint's original key layout (Qwen2-VL:
``visual.*``, ``model.layers.*``) while the loaded model names the same tensors
``model.visual.*``, ``model.language_model.layers.*``. ``Trainer`` resumes with
``load_state_dict(strict=False)`` on the raw file, so every tensor was skipped
with a warning and training went on from the base weights. Here each saved
tensor is matched through the same renaming that saving applied, and any key
that does not match, either way, is an error: a resumed run either continues
the interrupted one or stops.

LoRA checkpoints (``adapter_model.safetensors``) are restored with peft and
checked the same way. DeepSpeed and FSDP restore their own sharded formats
(the trainer's loaders, untouched here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError

WEIGHTS = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


OPTIMIZER, SCHEDULER = "optimizer.pt", "scheduler.pt"  # what Trainer saves beside the weights


def restore_weights_strictly(trainer: Any) -> None:
    """Make ``trainer`` resume through :func:`load_weights` (plain and LoRA
    models); DeepSpeed/FSDP keep the trainer's own loader. The optimizer and
    scheduler states load through the trainer's loader, but a file it cannot
    read is one line naming the checkpoint, not a traceback."""
    trainer_load = trainer._load_from_checkpoint
    trainer_load_state = trainer._load_optimizer_and_scheduler

    def load(checkpoint: str, model: Any = None) -> None:
        if trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled:
            return trainer_load(checkpoint, model)
        load_weights(model if model is not None else trainer.model, Path(checkpoint))

    def load_state(checkpoint: str | None) -> None:
        if checkpoint is None or trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled:
            return trainer_load_state(checkpoint)
        try:
            return trainer_load_state(checkpoint)
        except Exception as err:  # torch.load of a cut or foreign file: any of several types
            raise RosetrainError(
                f"resume: {checkpoint}: its {OPTIMIZER} or {SCHEDULER} cannot be read "
                f"({type(err).__name__}: {_first_line(err)}); the checkpoint is damaged: resume from "
                f"another one (resume: <checkpoint folder>) or start over (resume: never)"
            ) from None

    trainer._load_from_checkpoint = load
    trainer._load_optimizer_and_scheduler = load_state


def missing_training_state(checkpoint: Path) -> list[str]:
    """The optimizer and scheduler files a plain (not DeepSpeed) checkpoint lacks:
    without them the trainer resumes with a fresh optimizer and learning-rate
    schedule, silently."""
    if any(checkpoint.glob("global_step*")):  # DeepSpeed keeps its own optimizer state
        return []
    missing = [] if any(checkpoint.glob("optimizer*")) else [OPTIMIZER]  # FSDP: optimizer_0/, .bin
    return missing + ([] if (checkpoint / SCHEDULER).is_file() else [SCHEDULER])


def checkpoint_steps(checkpoint: Path) -> tuple[int, int] | None:
    """(the step a checkpoint was saved at, the run's last step as the trainer
    planned it), from its ``trainer_state.json``; None where that is unreadable."""
    try:
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        return int(state["global_step"]), int(state.get("max_steps") or 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def finished_steps(checkpoint: Path, max_steps: int) -> int | None:
    """The checkpoint's step when it already reached the run's last step (the
    recipe's ``max_steps``, or the one the trainer computed from the epochs), else
    None: resuming a finished run must not train past it."""
    steps = checkpoint_steps(checkpoint)
    if steps is None:
        return None
    step, planned = steps
    target = max_steps if max_steps > 0 else planned
    return step if target > 0 and step >= target else None


def refuse_foreign_checkpoints(output_dir: Path) -> None:
    """A ``checkpoint-N`` (or ``checkpoint-final``) in output_dir that rosetrain did
    not write (its ``.rosetrain.json`` does not name it) is refused: the trainer would
    resume from it, write into it, or delete it to keep ``save_total_limit``."""
    from rosetrain.core.io import MARKER_NAME, owned_names

    if not output_dir.is_dir():
        return
    owned = owned_names(output_dir)
    if owned is None:  # an older rosetrain's output_dir: all of it is its own
        return
    foreign = sorted(p.name for p in output_dir.glob("checkpoint-*") if p.name not in owned)
    if foreign:
        raise RosetrainError(
            f"output_dir {output_dir}: holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, "
            f"which rosetrain did not write (its {MARKER_NAME} does not name it); the trainer would "
            f"resume from it, write into it or delete it: move it away, or choose another output_dir"
        )


def claim_checkpoints(trainer: Any) -> None:
    """Name each checkpoint in output_dir's marker before the trainer writes it (so a
    kill mid-save never leaves one of ours unnamed); a no-op where this process does
    not hold output_dir's lock (ranks other than the main one)."""
    from transformers import TrainerCallback

    from rosetrain.core.io import claim_outputs

    class ClaimCheckpoints(TrainerCallback):
        def _claim(self, args: Any, state: Any, control: Any) -> None:
            if control.should_save:  # set by the trainer's flow callback, which runs first
                claim_outputs(Path(args.output_dir) / f"checkpoint-{state.global_step}")

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._claim(args, state, control)

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._claim(args, state, control)

    trainer.add_callback(ClaimCheckpoints())


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "no detail"


def load_weights(model: Any, checkpoint: Path) -> None:
    """Copy a checkpoint's weights into ``model`` in place, every tensor or none."""
    if _is_peft(model):
        _load_adapter(model, checkpoint)
    else:
        _load_full(model, checkpoint)


def _is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "active_adapter")


def _load_full(model: Any, checkpoint: Path) -> None:
    import torch

    saved = _read_full(checkpoint)
    targets = saved_name_to_tensor(model)
    _check_same_keys(checkpoint, set(saved), set(targets), model)
    own = {tensor.data_ptr() for tensor in model.state_dict().values()}
    with torch.no_grad():
        for name, tensor in saved.items():
            target = targets[name]
            if target.data_ptr() not in own:  # a fused/split tensor: a copy, not the model's own
                raise RosetrainError(
                    f"resume: {checkpoint} stores {name} in a converted layout that rosetrain cannot "
                    f"restore in place for {type(model).__name__}; resume is not supported for this model"
                )
            if target.shape != tensor.shape:
                raise RosetrainError(
                    f"resume: {checkpoint}: {name} has shape {tuple(tensor.shape)}, "
                    f"the model's has {tuple(target.shape)}: another model's checkpoint"
                )
            target.copy_(tensor)


def saved_name_to_tensor(model: Any) -> dict[str, Any]:
    """The model's tensors under the names ``save_pretrained`` writes them with:
    tied copies dropped and renamings reverted exactly as saving does, so each
    value is (for a renaming) the model's own parameter storage."""
    from transformers.core_model_loading import revert_weight_conversion
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    state = remove_tied_weights_from_state_dict(model.state_dict(), model)
    return revert_weight_conversion(model, state)


def _read_full(checkpoint: Path) -> dict[str, Any]:
    if (checkpoint / WEIGHTS).is_file():
        return _load_safetensors(checkpoint / WEIGHTS)
    if (checkpoint / WEIGHTS_INDEX).is_file():
        try:
            shards = sorted(set(json.loads((checkpoint / WEIGHTS_INDEX).read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise _damaged(checkpoint / WEIGHTS_INDEX, err) from None
        saved: dict[str, Any] = {}
        for shard in shards:
            saved.update(_load_safetensors(checkpoint / str(shard)))
        return saved
    raise RosetrainError(
        f"resume: {checkpoint} has no {WEIGHTS} (or {WEIGHTS_INDEX}) to restore "
        f"the model from; it is not a full fine-tuning checkpoint of this run"
    )


def _load_safetensors(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    try:
        return load_file(path, device="cpu")
    except Exception as err:  # safetensors' own error, OSError, a header that is not JSON
        raise _damaged(path, err) from None


def _damaged(path: Path, err: BaseException) -> RosetrainError:
    return RosetrainError(
        f"resume: {path} cannot be read ({type(err).__name__}: {_first_line(err)}); the checkpoint "
        f"is damaged: resume from another one (resume: <checkpoint folder>) or start over (resume: never)"
    )


def _check_same_keys(checkpoint: Path, saved: set[str], expected: set[str], model: Any) -> None:
    missing, unexpected = sorted(expected - saved), sorted(saved - expected)
    if not missing and not unexpected:
        return
    parts = []
    if missing:
        parts.append(f"{len(missing)} of the model's {len(expected)} tensors are missing (e.g. {missing[0]})")
    if unexpected:
        parts.append(f"{len(unexpected)} saved tensors are not in the model (e.g. {unexpected[0]})")
    raise RosetrainError(
        f"resume: {checkpoint} does not match {type(model).__name__}: "
        f"{'; '.join(parts)}; resume from a checkpoint of this model and method, "
        f"or set resume: never"
    )


def _load_adapter(model: Any, checkpoint: Path) -> None:
    from peft import set_peft_model_state_dict
    from peft.utils import get_peft_model_state_dict

    if not (checkpoint / ADAPTER_WEIGHTS).is_file():
        raise RosetrainError(
            f"resume: {checkpoint} has no {ADAPTER_WEIGHTS}: it is not a LoRA "
            f"checkpoint, and this run trains LoRA adapters"
        )
    saved = _load_safetensors(checkpoint / ADAPTER_WEIGHTS)
    adapter = model.active_adapter
    expected = set(get_peft_model_state_dict(model, adapter_name=adapter))
    _check_same_keys(checkpoint, set(saved), expected, model)
    result = set_peft_model_state_dict(model, saved, adapter_name=adapter)
    # peft annotates the result as a bare `namedtuple`; it is torch's _IncompatibleKeys
    unexpected: list[str] = result.unexpected_keys  # type: ignore[attr-defined]
    if unexpected:  # peft names keys it could not place; none may be left out
        raise RosetrainError(
            f"resume: {checkpoint}: {len(unexpected)} adapter tensors were "
            f"not restored (e.g. {unexpected[0]})"
        )
