"""Training recipes: one YAML file names the model, the data, the method and the
TRL/PEFT settings.

A recipe is read with ``yaml.safe_load`` into dataclasses that validate
themselves; an unknown key fails with the valid ones and the file. ``--set
key=value`` overrides any key before validation (``lora.r=8``, ``lora=null``,
``rewards.pass=1``), the value read as a YAML scalar. Only the standard library
and yaml are imported here, so a bad recipe fails in well under a second.

Relative paths (model, data, output) are relative to the current directory,
as for any command line tool; the shipped recipes expect the repository root.
"""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from rosetrain.errors import RosetrainError
from rosetrain.io import read_yaml_mapping

METHODS = ("sft", "grpo")
REWARDS = ("pass", "soft", "format")
VLLM_MODES = ("colocate", "server")
# Module-name patterns (regular expressions, matched in full by peft) that hold
# for the Qwen2-VL, Qwen2.5-VL and Qwen3-VL families.
LORA_TARGETS = {
    "attention": r".*language_model.*\.self_attn\.(q_proj|k_proj|v_proj|o_proj)",
    "all-linear": r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)",
}
VISION_LORA_TARGET = r".*visual\.blocks\.\d+\.attn\.(qkv|proj)"


class RecipeError(RosetrainError):
    pass


# ----------------------------------------------------------------- sections

@dataclasses.dataclass
class DataConfig:
    """Training rows: stream them from a generator spec, or read a generated folder."""

    spec: str | None = None          # generator spec YAML, streamed (unlimited: needs max_steps)
    folder: str | None = None        # or a folder from `rosetrain generate` (DIR/hf/<split>/*.parquet)
    split: str = "train"
    seed: int = 0                    # stream seed (item i depends only on spec, seed, i)
    shuffle_buffer: int = 256        # rows; a scene's tasks arrive together, so mix them
    max_rows: int | None = None      # use only the first N rows of a folder

    def __post_init__(self) -> None:
        if (self.spec is None) == (self.folder is None):
            raise ValueError("data: give exactly one of data.spec (stream) or data.folder")
        _positive(self, "shuffle_buffer", allow_zero=True)
        if self.max_rows is not None:
            _positive(self, "max_rows")


@dataclasses.dataclass
class LoraConfig:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target: str = "attention"              # attention | all-linear (language model only)
    vision: bool = False                   # also adapt the vision tower's attention
    target_modules: list[str] | None = None  # explicit module names / one regex: overrides target

    def __post_init__(self) -> None:
        _positive(self, "r")
        _positive(self, "alpha")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"lora.dropout: must be in [0, 1), got {self.dropout}")
        if self.target not in LORA_TARGETS:
            raise ValueError(f"lora.target: {self.target!r} is not one of {', '.join(LORA_TARGETS)}")

    def peft_target_modules(self) -> str | list[str]:
        if self.target_modules:
            return self.target_modules if len(self.target_modules) > 1 else self.target_modules[0]
        pattern = LORA_TARGETS[self.target]
        return f"(?:{pattern})|(?:{VISION_LORA_TARGET})" if self.vision else pattern


@dataclasses.dataclass
class GrpoConfig:
    num_generations: int = 8
    max_completion_length: int = 128       # a ROSE answer is at most ~60 tokens
    temperature: float = 1.0
    top_p: float = 1.0
    loss_type: str = "dapo"
    beta: float = 0.0                      # KL weight; 0 skips the reference model
    epsilon: float = 0.2
    scale_rewards: str = "group"
    num_iterations: int = 1
    vllm: str | None = None                # null (transformers generate) | colocate | server
    vllm_server_base_url: str | None = None
    vllm_gpu_memory_utilization: float = 0.3
    log_completions: bool = False
    frontier: bool = False                 # keep prompts the policy passes sometimes (rosetrain.train.frontier)

    def __post_init__(self) -> None:
        if self.num_generations < 2:
            raise ValueError(f"grpo.num_generations: GRPO needs at least 2, got {self.num_generations}")
        _positive(self, "max_completion_length")
        if self.temperature <= 0:
            raise ValueError(f"grpo.temperature: must be > 0, got {self.temperature}")
        if self.vllm is not None and self.vllm not in VLLM_MODES:
            raise ValueError(f"grpo.vllm: {self.vllm!r} is not one of null, {', '.join(VLLM_MODES)}")


@dataclasses.dataclass
class EvalConfig:
    """Greedy generation on a held-out folder every N steps, scored with the scorer."""

    folder: str | None = None        # ROSE release layout (metadata_<split>.jsonl + images/)
    split: str = "test"
    every_steps: int = 0             # 0: only at the end (when a folder is given)
    items: int = 64                  # items per evaluation, spread over templates
    max_new_tokens: int = 64
    batch_size: int = 8

    def __post_init__(self) -> None:
        _positive(self, "every_steps", allow_zero=True)
        _positive(self, "items")
        _positive(self, "max_new_tokens")
        _positive(self, "batch_size")


# ----------------------------------------------------------------- the recipe

@dataclasses.dataclass
class Recipe:
    method: str
    model: str
    output_dir: str
    data: DataConfig
    lora: LoraConfig | None = dataclasses.field(default_factory=LoraConfig)  # null: full fine-tuning
    grpo: GrpoConfig = dataclasses.field(default_factory=GrpoConfig)
    rewards: dict[str, float] = dataclasses.field(default_factory=lambda: {"pass": 1.0, "soft": 0.0,
                                                                           "format": 0.0})
    eval: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    trust_remote_code: bool = False
    # The image processor's pixel budget (Qwen: images are resized to fit it, in
    # 28 px steps for Qwen2/2.5-VL, 32 for Qwen3-VL); null keeps the model's own.
    min_pixels: int | None = None
    max_pixels: int | None = None
    seed: int = 0
    save_merged: bool = False        # also write output_dir/merged (LoRA merged into the base)
    resume: str = "auto"             # auto: from the last checkpoint in output_dir; never; or a path
    # The TRL / transformers settings most recipes touch; anything else goes under `trl:`.
    max_steps: int = -1
    num_train_epochs: float = 1.0
    learning_rate: float | None = None   # None: 2e-4 for LoRA SFT, 2e-5 full SFT, 1e-6 GRPO
    per_device_train_batch_size: int | None = None  # None: 8 for SFT, num_generations for GRPO
    gradient_accumulation_steps: int = 1
    lr_scheduler_type: str = "cosine"
    warmup_steps: int | float = 0.03       # a float below 1 is a ratio of the total steps
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    logging_steps: int = 10
    save_steps: int = 500
    save_total_limit: int | None = 2
    report_to: list[str] = dataclasses.field(default_factory=lambda: ["none"])
    run_name: str | None = None
    bf16: bool | None = None                   # None: on with a GPU, off on the CPU
    gradient_checkpointing: bool | None = None  # None: on with a GPU, off on the CPU
    # null: 1 when streaming from a spec (rows are generated in a background
    # process while the model trains), 0 for a folder
    dataloader_num_workers: int | None = None
    # torch threads when training on the CPU (null: torch's default). Tiny models
    # gain nothing from more threads, and OpenMP threads that wait on a busy core
    # made steps 7x slower on a shared 2-core machine: the tiny recipes use 1.
    cpu_threads: int | None = None
    trl: dict[str, Any] = dataclasses.field(default_factory=dict)  # any other SFTConfig/GRPOConfig field
    source: str = "<recipe>"         # the file it came from (set by load_recipe, not a YAML key)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method: {self.method!r} is not one of {', '.join(METHODS)}")
        if not self.model:
            raise ValueError("model: a Hub id or a local folder is required")
        if not self.output_dir:
            raise ValueError("output_dir: required")
        unknown = sorted(set(self.rewards) - set(REWARDS))
        if unknown:
            raise ValueError(f"rewards: unknown reward {unknown[0]!r}; valid: {', '.join(REWARDS)}")
        for name, weight in self.rewards.items():
            if isinstance(weight, bool) or _number(weight, float) is _NO and not isinstance(weight, (int, float)):
                raise ValueError(f"rewards.{name}: expected a number, got {weight!r}")
        self.rewards = {name: float(self.rewards.get(name, 0.0)) for name in REWARDS}
        if self.method == "grpo" and not any(self.rewards.values()):
            raise ValueError("rewards: every weight is 0; give at least one of pass, soft, format a weight")
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"max_steps: must be > 0, or -1 to train num_train_epochs; got {self.max_steps}")
        if self.num_train_epochs <= 0:
            raise ValueError(f"num_train_epochs: must be > 0, got {self.num_train_epochs}")
        if self.data.spec is not None and self.max_steps <= 0:
            raise ValueError("max_steps: streaming from data.spec is unlimited; set max_steps > 0")
        if self.resume not in ("auto", "never") and not Path(self.resume).is_dir():
            raise ValueError(f"resume: {self.resume!r} is neither auto, never, nor a checkpoint folder")
        for name in ("per_device_train_batch_size", "min_pixels", "max_pixels", "cpu_threads"):
            if getattr(self, name) is not None:
                _positive(self, name)
        _positive(self, "gradient_accumulation_steps")
        if self.dataloader_num_workers is not None:
            _positive(self, "dataloader_num_workers", allow_zero=True)
        if isinstance(self.report_to, str):
            self.report_to = [self.report_to]

    @property
    def train_batch_size(self) -> int:
        if self.per_device_train_batch_size is not None:
            return self.per_device_train_batch_size
        return self.grpo.num_generations if self.method == "grpo" else 8

    @property
    def num_workers(self) -> int:
        if self.dataloader_num_workers is not None:
            return self.dataloader_num_workers
        return 1 if self.data.spec is not None else 0

    @property
    def lr(self) -> float:
        if self.learning_rate is not None:
            return self.learning_rate
        if self.method == "grpo":
            return 1e-6
        return 2e-4 if self.lora is not None else 2e-5


SECTIONS = {"data": DataConfig, "lora": LoraConfig, "grpo": GrpoConfig, "eval": EvalConfig}
NOT_KEYS = {"source"}


def valid_keys(cls: type = Recipe) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name not in NOT_KEYS]


# ----------------------------------------------------------------- loading

def load_recipe(path: str | Path, overrides: Sequence[str] = (), method: str | None = None) -> Recipe:
    """Read, override (``key=value`` strings) and validate a recipe. ``method``,
    when given (from ``rosetrain train sft|grpo``), must agree with the file's."""
    path = Path(path)
    raw = read_yaml_mapping(path, "recipe", RecipeError, expected="a mapping of recipe keys at the top level")
    for item in overrides:
        apply_override(raw, item, path)
    if method is not None:
        if raw.get("method", method) != method:
            raise RecipeError(f"{path}: method: the recipe is for {raw['method']!r}, "
                              f"but `rosetrain train {method}` was run")
        raw["method"] = method
    return recipe_from_dict(raw, path)


def apply_override(raw: dict, item: str, path: str | Path = "<recipe>") -> None:
    """``a.b.c=value``: set a nested key, creating sections; the value is YAML."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise RecipeError(f"--set {item!r}: expected key=value (e.g. learning_rate=5e-7, lora.r=8)")
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as err:
        raise RecipeError(f"--set {item!r}: the value is not a YAML scalar: {err}") from None
    parts = key.split(".")
    _check_key_path(parts, path, item)
    node = raw
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}  # a section given as null/absent: start it from its defaults
        node = node[part]
    node[parts[-1]] = value


def _check_key_path(parts: list[str], path: str | Path, item: str) -> None:
    cls: type | None = Recipe
    for depth, part in enumerate(parts):
        if cls is None:  # free-form mapping (trl, rewards): checked on validation
            return
        if part not in valid_keys(cls):
            where = ".".join(parts[:depth]) or "the top level"
            raise RecipeError(_unknown_message(part, cls, f"{path} (--set {item})", where))
        cls = SECTIONS.get(part) if cls is Recipe else None
    return


def _unknown_message(key: str, cls: type, source: str, where: str) -> str:
    keys = valid_keys(cls)
    close = difflib.get_close_matches(key, keys, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{source}: unknown key {key!r} at {where}{hint}; valid keys: {', '.join(keys)}"


def recipe_from_dict(raw: Mapping[str, Any], path: str | Path = "<recipe>") -> Recipe:
    raw = dict(raw)
    unknown = [k for k in raw if k not in valid_keys(Recipe)]
    if unknown:
        raise RecipeError(_unknown_message(unknown[0], Recipe, str(path), "the top level"))
    try:
        kwargs = _coerce_fields(Recipe, raw, "")
        for name, cls in SECTIONS.items():
            value = kwargs.get(name, ...)
            if name == "lora" and value in (None, False):  # `lora: null|false`: full fine-tuning
                kwargs[name] = None
                continue
            if value is ... or (value is None and name != "data"):  # absent or null: defaults
                kwargs.pop(name, None)
                continue
            if not isinstance(value, Mapping):
                raise ValueError(f"{name}: expected a mapping of {', '.join(valid_keys(cls))}")
            bad = [k for k in value if k not in valid_keys(cls)]
            if bad:
                raise RecipeError(_unknown_message(bad[0], cls, str(path), name))
            kwargs[name] = cls(**_coerce_fields(cls, value, f"{name}."))
        for name in ("method", "model", "output_dir"):
            if name not in kwargs:
                raise ValueError(f"{name}: required")
        if "data" not in kwargs:
            raise ValueError("data: required (data.spec to stream, or data.folder)")
        return Recipe(**kwargs, source=str(path))
    except RecipeError:
        raise
    except (TypeError, ValueError) as err:
        raise RecipeError(f"{path}: {err}") from None


# ----------------------------------------------------------------- typed fields

def _coerce_fields(cls: type, raw: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Check each value against its field's type; numbers written as strings
    (PyYAML reads ``5e-7`` as a string) become numbers."""
    hints = typing.get_type_hints(cls)
    out = {}
    for key, value in raw.items():
        is_section = cls is Recipe and key in SECTIONS  # checked by the section's own class
        out[key] = value if is_section else _coerce(value, hints[key], prefix + key)
    return out


def _coerce(value: Any, hint: Any, name: str) -> Any:
    is_union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    args = typing.get_args(hint) if is_union else ()
    if value is None:
        if type(None) in args or hint is Any:
            return None
        raise ValueError(f"{name}: must not be null")
    options = [a for a in args if a is not type(None)] or [hint]
    for target in options:
        coerced = _coerce_one(value, target)
        if coerced is not _NO:
            return coerced
    expected = " or ".join(getattr(t, "__name__", str(t)) for t in options)
    raise ValueError(f"{name}: expected {expected}, got {value!r}")


_NO = object()


def _coerce_one(value: Any, target: Any) -> Any:
    origin = typing.get_origin(target) or target
    if target is Any:
        return value
    if origin is bool:
        return value if isinstance(value, bool) else _NO
    if origin is int:
        if isinstance(value, bool):
            return _NO
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return _number(value, int)
    if origin is float:
        if isinstance(value, bool):
            return _NO
        return float(value) if isinstance(value, (int, float)) else _number(value, float)
    if origin is str:
        return value if isinstance(value, str) else _NO
    if origin is list:
        items = value if isinstance(value, list) else [value]
        (item_type,) = typing.get_args(target) or (Any,)
        out = [_coerce_one(v, item_type) for v in items]
        return _NO if any(v is _NO for v in out) else out
    if origin is dict:
        return dict(value) if isinstance(value, Mapping) else _NO
    return value  # sections and other types are checked by their own class


def _number(value: Any, kind: type) -> Any:
    if not isinstance(value, str):
        return _NO
    try:
        number = float(value)
    except ValueError:
        return _NO
    if kind is int:
        return int(number) if number.is_integer() else _NO
    return number


def _positive(obj: Any, field: str, allow_zero: bool = False) -> None:
    value = getattr(obj, field)
    if value < 0 or (value == 0 and not allow_zero):
        section = {DataConfig: "data.", LoraConfig: "lora.", GrpoConfig: "grpo.",
                   EvalConfig: "eval."}.get(type(obj), "")
        raise ValueError(f"{section}{field}: must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """Plain data (for the run's record of what it trained with)."""
    out = dataclasses.asdict(recipe)
    out.pop("source", None)
    return out
