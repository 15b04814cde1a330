"""One way to load a multimodal model and its processor, for training and evaluation.

``name_or_path`` is a Hub id (``Qwen/Qwen2.5-VL-3B-Instruct``), a local folder
saved with ``save_pretrained`` (e.g. by ``rosetrain tiny-model``), or a LoRA
adapter folder (it has ``adapter_config.json``): its base model is loaded the
same way and the adapter applied with peft. bf16 on a GPU, fp32 on the CPU;
``trust_remote_code`` stays off unless the caller asks.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError, first_line

ADAPTER_CONFIG = "adapter_config.json"
# Where a rosetrain training run keeps its final model (rosetrain.train.run.FINAL_DIR,
# not imported: that module imports the trainers)
RUN_FINAL = "checkpoint-final"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def resolve_model_source(name_or_path: str | Path) -> tuple[str, Path | None]:
    """("local", path) for a folder on disk, ("hub", None) for a Hub id. A
    rosetrain run folder (a recipe's output_dir) is its final model, as TRL's
    output_dir is: path is then ``RUN/checkpoint-final``.

    A name that looks like a path (absolute, ``./``, ``~``, more than one ``/``,
    or ``dir/name`` where ``dir`` exists here) but is missing fails, naming it,
    instead of being sent to the Hub as an id."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise RosetrainError(f"model: {text} is a file, not a model folder", argument="model")
        if not is_model_folder(path):
            path = run_final_model(path, text)
        return "local", path
    first = text.split("/", 1)[0]
    looks_local = (
        not _HUB_ID.match(text) or text.startswith((".", "~")) or ("/" in text and Path(first).is_dir())
    )
    if looks_local:
        raise RosetrainError(f"model: local path {text} does not exist", argument="model")
    return "hub", None


def model_path(name_or_path: str | Path) -> str:
    """What a command loads for ``name_or_path``: a Hub id or a model folder as
    given, a run folder's final model (``RUN/checkpoint-final``) in its place."""
    _kind, path = resolve_model_source(name_or_path)
    resolved = path is not None and path != Path(str(name_or_path)).expanduser()
    return str(path) if resolved else str(name_or_path)


def is_model_folder(path: Path) -> bool:
    return any((path / name).is_file() for name in ("config.json", ADAPTER_CONFIG))


def run_final_model(folder: Path, text: str) -> Path:
    """A training run's final model (``folder/checkpoint-final``); a run without one
    (stopped before its final save) names its latest checkpoint; any other folder
    is not a model."""
    final = folder / RUN_FINAL
    if final.is_dir() and is_model_folder(final):
        return final
    steps = [
        p for p in folder.glob("checkpoint-*") if p.name.split("-", 1)[1].isdigit() and is_model_folder(p)
    ]
    if steps:
        latest = max(steps, key=lambda p: int(p.name.split("-", 1)[1]))
        raise RosetrainError(
            f"model: {text} is a training run without its final model ({RUN_FINAL}): it stopped "
            f"before the end; give its latest checkpoint {latest}, or run the training again to finish it",
            argument="model",
        )
    raise RosetrainError(
        f"model: {text} is a folder but not a model (it has no config.json or {ADAPTER_CONFIG}, "
        f"and no {RUN_FINAL} of a training run)",
        argument="model",
    )


def default_device_and_dtype(device: str | None = None, dtype: Any = None) -> tuple[str, Any]:
    """cuda + bf16 when a GPU is there, else cpu + fp32; strings like "bfloat16" accepted."""
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if isinstance(dtype, str) and dtype != "auto":
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise RosetrainError(f"dtype: {dtype!r} is not a torch dtype (e.g. bfloat16, float32)")
        dtype = getattr(torch, dtype)
    if dtype is None:
        dtype = torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    return str(device), dtype


def adapter_base(adapter_dir: Path) -> str:
    """The base model an adapter was trained on; a relative path that does not
    exist from here is tried relative to the adapter folder's parent."""
    config = json.loads((adapter_dir / ADAPTER_CONFIG).read_text())
    base = config.get("base_model_name_or_path")
    if not base:
        raise RosetrainError(f"{adapter_dir / ADAPTER_CONFIG}: no base_model_name_or_path")
    if not Path(base).is_absolute() and not Path(base).exists():
        beside = adapter_dir.parent / base
        if beside.exists():
            return str(beside)
    return base


def load_model_and_processor(
    name_or_path: str | Path,
    *,
    device: str | None = None,
    dtype: Any = None,
    trust_remote_code: bool = False,
    merge_lora: bool = True,
) -> tuple[Any, Any]:
    """(model, processor) ready for ``generate``; a LoRA adapter is merged into
    its base unless ``merge_lora=False`` (then a ``PeftModel`` comes back)."""
    kind, path = resolve_model_source(name_or_path)
    device, dtype = default_device_and_dtype(device, dtype)
    quiet_libraries()
    if path is not None and (path / ADAPTER_CONFIG).exists():
        return _load_adapter(path, device, dtype, trust_remote_code, merge_lora)
    if kind == "hub" and not hub_reachable():
        kind = "cache"  # the Hub cannot answer: load from the local cache only, at once
        _hub_offline()
    name = str(name_or_path) if path is None else str(path)  # a run folder: its final model
    model = _load_model(name, kind, dtype, trust_remote_code).to(device)
    return model, _load_processor(name, kind, trust_remote_code)


def quiet_libraries() -> None:
    """For the rest of the process: transformers' own bars ("Loading weights",
    "Writing model shards") are off, since rosetrain's commands show their own
    progress and the library's left ``\x1b[A`` escapes in every log file; and the
    notices one library raises about another's use of a renamed API are ignored
    (peft 0.21 reads ``is_gradient_checkpointing``, TRL's GRPO calls
    ``gradient_checkpointing_enable/disable`` around generation, all renamed in
    transformers 5.23): the user can act on none of them. ``--verbose`` keeps
    both (:mod:`rosetrain.core.verbosity`)."""
    import warnings

    from transformers.utils import logging as transformers_logging

    from rosetrain.core.verbosity import verbose

    if verbose():  # --verbose: as the libraries print on their own
        transformers_logging.enable_progress_bar()
        return
    transformers_logging.disable_progress_bar()
    for renamed in (
        "is_gradient_checkpointing",
        "gradient_checkpointing_enable",
        "gradient_checkpointing_disable",
    ):
        warnings.filterwarnings("ignore", message=f"`{renamed}` is deprecated", category=FutureWarning)


def _hub_offline() -> None:
    """Offline mode for the rest of this process: every Hugging Face call reads the
    local cache instead of retrying an endpoint that cannot answer (for a minute)."""
    from huggingface_hub import constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True  # read at call time by huggingface_hub.is_offline_mode


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face endpoint answers a TCP connect (False when offline,
    or HF_HUB_OFFLINE is set). Without it, a Hub id that is not cached would be
    retried for a minute before failing; with it, cached models load without
    waiting for the network."""
    import socket
    import urllib.parse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    parts = urllib.parse.urlsplit(constants.ENDPOINT)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError:
        return False
    return True


def _load_adapter(
    path: Path, device: str, dtype: Any, trust_remote_code: bool, merge_lora: bool
) -> tuple[Any, Any]:
    from peft import PeftModel

    base = adapter_base(path)
    model, processor = load_model_and_processor(
        base, device=device, dtype=dtype, trust_remote_code=trust_remote_code
    )
    from safetensors import SafetensorError

    try:
        model = PeftModel.from_pretrained(model, str(path))
    except SafetensorError as err:
        raise corrupt_weights(path, err) from None
    if merge_lora:
        model = model.merge_and_unload()
    if (path / "processor_config.json").exists() or (path / "tokenizer_config.json").exists():
        processor = _load_processor(str(path), "local", trust_remote_code)
    return model, processor


def corrupt_weights(folder: str | Path, error: BaseException) -> RosetrainError:
    """One line naming the weights file of ``folder`` that safetensors cannot read
    (its header is checked file by file), for the ``error`` loading raised."""
    from safetensors import safe_open

    for path in sorted(Path(folder).glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except Exception as err:  # safetensors' own error type, or an OSError
            return RosetrainError(f"model: {path}: corrupt weights file ({first_line(err)}); replace it")
    return RosetrainError(f"model: {folder}: corrupt weights ({first_line(error)})")


def _load_model(name: str, kind: str, dtype: Any, trust_remote_code: bool):
    from safetensors import SafetensorError
    from transformers import AutoModelForImageTextToText

    try:
        return AutoModelForImageTextToText.from_pretrained(
            name, dtype=dtype, trust_remote_code=trust_remote_code, local_files_only=kind == "cache"
        )
    except SafetensorError as err:  # a truncated or foreign .safetensors file
        raise corrupt_weights(name, err) from None
    except (OSError, ValueError) as err:  # ValueError: a config.json that names no model type
        if kind == "cache":
            raise RosetrainError(
                f"model: {name} is not in the local Hugging Face cache and the "
                "Hub cannot be reached (offline); download it on a connected "
                "machine, or give a local model folder"
            ) from None
        where = "folder" if kind == "local" else "Hub id (or local cache)"
        raise RosetrainError(f"model: cannot load {name} as a {where}: {err}".splitlines()[0]) from None


def _load_processor(name: str, kind: str, trust_remote_code: bool):
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(
            name, trust_remote_code=trust_remote_code, local_files_only=kind == "cache"
        )
    except (OSError, ValueError) as err:
        raise RosetrainError(f"model: cannot load the processor of {name}: {err}".splitlines()[0]) from None
    tokenizer = getattr(processor, "tokenizer", processor)
    tokenizer.padding_side = "left"  # batched generation appends on the right
    return processor
