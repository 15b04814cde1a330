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


def restore_weights_strictly(trainer: Any) -> None:
    """Make ``trainer`` resume through :func:`load_weights` (plain and LoRA
    models); DeepSpeed/FSDP keep the trainer's own loader."""
    trainer_load = trainer._load_from_checkpoint

    def load(checkpoint: str, model: Any = None) -> None:
        if trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled:
            return trainer_load(checkpoint, model)
        load_weights(model if model is not None else trainer.model, Path(checkpoint))

    trainer._load_from_checkpoint = load


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
    from safetensors.torch import load_file

    if (checkpoint / WEIGHTS).is_file():
        return load_file(checkpoint / WEIGHTS, device="cpu")
    if (checkpoint / WEIGHTS_INDEX).is_file():
        index = json.loads((checkpoint / WEIGHTS_INDEX).read_text())
        saved: dict[str, Any] = {}
        for shard in sorted(set(index["weight_map"].values())):
            saved.update(load_file(checkpoint / shard, device="cpu"))
        return saved
    raise RosetrainError(
        f"resume: {checkpoint} has no {WEIGHTS} (or {WEIGHTS_INDEX}) to restore "
        f"the model from; it is not a full fine-tuning checkpoint of this run"
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
    from safetensors.torch import load_file

    if not (checkpoint / ADAPTER_WEIGHTS).is_file():
        raise RosetrainError(
            f"resume: {checkpoint} has no {ADAPTER_WEIGHTS}: it is not a LoRA "
            f"checkpoint, and this run trains LoRA adapters"
        )
    saved = load_file(checkpoint / ADAPTER_WEIGHTS, device="cpu")
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
