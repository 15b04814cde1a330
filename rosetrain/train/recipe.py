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
import importlib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import read_yaml_mapping

METHODS = ("sft", "grpo")


def method_module(method: str):
    """``rosetrain.train.sft`` or ``.grpo``: each has ``trl_config`` and ``build_trainer``."""
    return importlib.import_module(f"rosetrain.train.{method}")


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


def key(default: Any = dataclasses.MISSING, help: str = "", factory: Any = dataclasses.MISSING) -> Any:
    """A recipe key with its documentation, as TRL's config fields carry theirs:
    ``recipes/README.md`` lists the keys from this ``help`` (``recipe_keys.py``)."""
    return dataclasses.field(default=default, default_factory=factory, metadata={"help": help})


# ----------------------------------------------------------------- sections


@dataclasses.dataclass
class DataConfig:
    """Training rows: stream them from a generator spec, or read a generated folder."""

    spec: str | None = key(
        None,
        "a generator spec YAML, streamed: unlimited rows, so max_steps is needed; "
        "the held-out split's scenes are skipped",
    )
    folder: str | None = key(
        None,
        "or a folder from `rosetrain generate --formats release,hf` "
        "(DIR/hf/<split>/*.parquet); one that shares a scene with the held-out "
        "split is an error",
    )
    split: str = key("train", "the folder's split")
    seed: int = key(0, "the stream's seed (item i depends only on spec, seed and i)")
    shuffle_buffer: int = key(256, "rows mixed before training (a scene's tasks arrive together)")
    max_rows: int | None = key(None, "use only the first N rows of a folder")

    def __post_init__(self) -> None:
        if (self.spec is None) == (self.folder is None):
            raise ValueError("data: give exactly one of data.spec (stream) or data.folder")
        _positive(self, "shuffle_buffer", allow_zero=True)
        if self.max_rows is not None:
            _positive(self, "max_rows")


@dataclasses.dataclass
class LoraConfig:
    r: int = key(16, "the adapters' rank")
    alpha: int = key(32, "LoRA alpha (scale alpha / r)")
    dropout: float = key(0.05, "dropout on the adapters' input")
    target: str = key("attention", "`attention` | `all-linear`: those layers of the language model")
    vision: bool = key(False, "also the vision tower's attention")
    target_modules: list[str] | None = key(
        None, "explicit module names, or one regular expression: replaces target"
    )

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
    num_generations: int = key(8, "completions per prompt (a group)")
    max_completion_length: int = key(128, "tokens per completion (a ROSE answer is at most ~60)")
    temperature: float = key(1.0, "sampling temperature")
    top_p: float = key(1.0, "nucleus sampling")
    loss_type: str = key("dapo", "TRL's GRPO loss (`grpo`, `dapo`, `dr_grpo`, `bnpo`, ...)")
    beta: float = key(0.0, "KL weight; 0 loads no reference model")
    epsilon: float = key(0.2, "the clipping range")
    scale_rewards: str = key("group", "how advantages are scaled (`group`, `batch`, `none`)")
    num_iterations: int = key(1, "optimisation steps per generated batch")
    vllm: str | None = key(None, "`null` (transformers generates) | `colocate` | `server`")
    vllm_server_base_url: str | None = key(None, "the vLLM server in `server` mode")
    vllm_gpu_memory_utilization: float = key(0.3, "the GPU share vLLM reserves in `colocate` mode")
    log_completions: bool = key(False, "log sampled completions to the trackers")
    frontier: bool = key(
        False,
        "train only on prompts the current policy passes in some but not all of "
        "num_generations samples: a filtering stream in front of TRL samples each "
        "candidate prompt with the live policy and drops the rest, refilled from the "
        "unlimited spec stream, as DAPO's dynamic sampling; needs data.spec; costs one "
        "extra round of sampling per candidate; counts per template in "
        "OUTPUT_DIR/frontier.jsonl (rosetrain.train.frontier); after 128 dead "
        "prompts in a row (e.g. an untrained policy) it stops filtering, with a warning",
    )

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

    folder: str | None = key(
        None,
        "a held-out folder in the ROSE release layout (metadata_<split>.jsonl "
        "+ images/); null: no held-out evaluation (the other eval keys are unused)",
    )
    split: str = key("test", "its split")
    every_steps: int = key(0, "evaluate every N steps; 0: at the end only")
    items: int = key(64, "items per evaluation, spread over templates")
    max_new_tokens: int = key(64, "greedy answer length")
    batch_size: int = key(8, "items per generation batch")

    def __post_init__(self) -> None:
        _positive(self, "every_steps", allow_zero=True)
        _positive(self, "items")
        _positive(self, "max_new_tokens")
        _positive(self, "batch_size")


# ----------------------------------------------------------------- the recipe


@dataclasses.dataclass
class Recipe:
    method: str = key(help="`sft` | `grpo`")
    model: str = key(
        help="a Hub id, a local folder, or a LoRA adapter folder (merged into its base at "
        "load, so GRPO can stack on an SFT adapter)"
    )
    output_dir: str = key(help="checkpoints, the final model, the run's record; one run at a time")
    data: DataConfig = key(help="training rows")
    lora: LoraConfig | None = key(help="LoRA adapters; `lora: null` is full fine-tuning", factory=LoraConfig)
    grpo: GrpoConfig = key(help="GRPO settings", factory=GrpoConfig)
    rewards: dict[str, float] = key(
        help="GRPO reward weights of `pass` (exact ROSE PASS), `soft` (ROSE "
        "SOFT) and `format` (grammar-valid); GRPO also logs pass/<template>, "
        "pass/counting, pass/action, and live/<template>, live/all: the "
        "share of groups whose PASS varies (the only groups with an "
        "advantage; TRL's frac_reward_zero_std misses all-correct groups, "
        "whose float32 reward std is ~1e-7 with shaping rewards, not 0)",
        factory=lambda: {"pass": 1.0, "soft": 0.0, "format": 0.0},
    )
    eval: EvalConfig = key(
        help="held-out evaluation during training, scored with the scorer; logged as "
        "heldout/... to every report_to tracker and OUTPUT_DIR/heldout_eval.jsonl",
        factory=EvalConfig,
    )
    trust_remote_code: bool = key(False, "run a model repository's own code")
    min_pixels: int | None = key(
        None,
        "the processor's image budget (Qwen resizes images to fit it, in "
        "28 px steps, 32 for Qwen3-VL; saved with the model); null: the model's",
    )
    max_pixels: int | None = key(None, "the upper end of that budget")
    seed: int = key(0, "the trainer's seed")
    save_merged: bool = key(False, "also write output_dir/merged: the LoRA merged into its base (for vLLM)")
    resume: str = key(
        "auto", "`auto`: from the last complete checkpoint in output_dir; `never`; or a checkpoint folder"
    )
    # The TRL / transformers settings most recipes touch; anything else goes under `trl:`.
    max_steps: int = key(-1, "optimizer steps; -1: num_train_epochs over a folder")
    num_train_epochs: float = key(1.0, "epochs over a folder (when max_steps is -1)")
    learning_rate: float | None = key(None, "null: 2e-4 for LoRA SFT, 2e-5 full SFT, 1e-6 GRPO")
    per_device_train_batch_size: int | None = key(
        None, "null: 8 for SFT, num_generations for GRPO (Qwen-VL GRPO: must equal it)"
    )
    gradient_accumulation_steps: int = key(1, "micro-batches per optimizer step")
    lr_scheduler_type: str = key("cosine", "a transformers schedule name")
    warmup_steps: int | float = key(0.03, "warmup steps; below 1: a ratio of the total")
    weight_decay: float = key(0.0, "AdamW weight decay")
    max_grad_norm: float = key(1.0, "gradient clipping")
    logging_steps: int = key(10, "log every N steps")
    save_steps: int = key(500, "write a resumable checkpoint-N every N steps")
    save_total_limit: int | None = key(2, "checkpoints kept")
    report_to: list[str] = key(
        help="trackers (`tensorboard`, `wandb`, `trackio`, ...); `none`", factory=lambda: ["none"]
    )
    run_name: str | None = key(None, "the trackers' run name")
    bf16: bool | None = key(None, "null: on with a GPU that supports it, off on the CPU")
    gradient_checkpointing: bool | None = key(None, "null: on with a GPU, off on the CPU")
    dataloader_num_workers: int | None = key(
        None,
        "null: 1 for a stream (rows are generated while the "
        "model trains), 0 for a folder; a stream has 64 shards, "
        "so several workers, or ranks with `trl: "
        "{accelerator_config: {dispatch_batches: false}}`, each "
        "generate their own scenes",
    )
    cpu_threads: int | None = key(
        None,
        "torch threads on the CPU; null: torch's default (the tiny "
        "recipes use 1: waiting OpenMP threads made steps 7x slower on a "
        "shared 2-core machine)",
    )
    trl: dict[str, Any] = key(help="any other `SFTConfig` / `GRPOConfig` field", factory=dict)
    source: str = "<recipe>"  # the file it came from (set by load_recipe, not a YAML key)

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
            if (
                isinstance(weight, bool)
                or _number(weight, float) is _NO
                and not isinstance(weight, (int, float))
            ):
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
        # The trainer passes weight_decay per parameter group, where torch never checks its sign.
        _positive(self, "weight_decay", allow_zero=True)
        _positive(self, "max_grad_norm", allow_zero=True)
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
            raise RecipeError(
                f"{path}: method: the recipe is for {raw['method']!r}, but `rosetrain train {method}` was run"
            )
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
        section = {DataConfig: "data.", LoraConfig: "lora.", GrpoConfig: "grpo.", EvalConfig: "eval."}.get(
            type(obj), ""
        )
        raise ValueError(f"{section}{field}: must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """Plain data (for the run's record of what it trained with)."""
    out = dataclasses.asdict(recipe)
    out.pop("source", None)
    return out


def peft_config(recipe: Recipe):
    if recipe.lora is None:
        return None
    import warnings

    from peft import LoraConfig

    # peft 0.21 still reads the attribute transformers 5 renamed, once per wrap: noise
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated")
    return LoraConfig(
        r=recipe.lora.r,
        lora_alpha=recipe.lora.alpha,
        lora_dropout=recipe.lora.dropout,
        target_modules=recipe.lora.peft_target_modules(),
        task_type="CAUSAL_LM",
    )
