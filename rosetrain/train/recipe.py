"""Training recipes: one YAML file names the model, the data, the method and the
TRL/PEFT settings.

A recipe is read from YAML into dataclasses that validate themselves
(:mod:`rosetrain.core.config`: each key's type, range and help sit beside it);
an unknown key fails with the valid ones and the file. ``--set
key=value`` overrides any key before validation (``lora.r=8``, ``lora=null``,
``rewards.pass=1``), the value read as a YAML scalar. Only the standard library
and yaml are imported here, so a bad recipe fails in well under a second.

Relative paths (model, data, output) are relative to the current directory,
as for any command line tool; the shipped recipes expect the repository root.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core import config
from rosetrain.core.config import SEED_32, check_fields, setting
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import read_yaml_mapping
from rosetrain.core.reasoning import STYLES as REASONING_STYLES
from rosetrain.core.registry import Registry
from rosetrain.core.resources import shipped as shipped_config
from rosetrain.train.rewards import REWARDS, THINKING

# Each method's module has ``trl_config`` and ``trainer_parts``; it imports TRL,
# so it is imported only when a recipe of that method is built.
METHODS: Registry[str] = Registry(
    "method", {"sft": "rosetrain.train.sft", "grpo": "rosetrain.train.grpo"}, argument="method"
)


def method_module(method: str) -> Any:
    """``rosetrain.train.sft`` or ``.grpo``, by the recipe's method."""
    return METHODS.load(method)


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


def key(
    default: Any = dataclasses.MISSING, help: str = "", factory: Any = dataclasses.MISSING, **allowed: Any
) -> Any:
    """A recipe key with its documentation and allowed values (``low``/``high``,
    ``choices``: :func:`rosetrain.core.config.setting`), as TRL's config fields
    carry theirs: ``recipes/README.md`` lists the keys from these (``recipe_keys.py``)."""
    return setting(default, help, factory=factory, **allowed)


# Sizes no run here can use; memory decides well below them (preflight.check_memory).
MAX_BATCH = 65536
MAX_TOKENS = 1_000_000
MAX_STEPS = 10**9
GPU_WORKERS_MAX = 6  # a stream's DataLoader workers per GPU process by default (num_workers)
# The cpu_threads bound: a recipe moves between machines, so not this machine's CPU count.
MAX_THREADS = 1024
# TRL 1.16's GRPOConfig: loss_type and scale_rewards values (``tests/test_config.py``
# checks them against TRL's own field help).
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
SCALE_REWARDS = ("group", "batch", "none")
FRONTIER_BY = ("pass", "reward")  # grpo.frontier_by: what a kept group's samples differ in


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
    seed: int = key(0, "the stream's seed (item i depends only on spec, seed and i)", low=0, high=SEED_32)
    shuffle_buffer: int = key(
        256, "rows mixed before training (a scene's tasks arrive together)", low=0, high=1_000_000
    )
    max_rows: int | None = key(None, "use only the first N rows of a folder", low=1, high=10**12)
    reasoning: str | None = key(
        None,
        "SFT targets think first, <think>...</think> before the answer (evaluation scores "
        "the answer after it): `odd` lists every exception cell, then those the task is "
        "about; `cells` lists the region's cells between the two; `cells-seen` asks a "
        "highlighted region's task for the highlight's cells alone",
        choices=(None, *REASONING_STYLES),
    )

    def __post_init__(self) -> None:
        check_fields(self, "data.")
        if (self.spec is None) == (self.folder is None):
            raise ValueError("data: give exactly one of data.spec (stream) or data.folder")
        if self.spec is not None:  # a shipped spec's name (`heldout`) when no file is at the path
            self.spec = str(shipped_config("spec", self.spec) or self.spec)


@dataclasses.dataclass
class LoraConfig:
    r: int = key(16, "the adapters' rank", low=1, high=MAX_BATCH)
    alpha: int = key(32, "LoRA alpha (scale alpha / r)", low=1, high=10**6)
    dropout: float = key(0.05, "dropout on the adapters' input", low=0, high=1, high_open=True)
    target: str = key(
        "attention",
        "`attention` | `all-linear`: those layers of the language model",
        choices=tuple(LORA_TARGETS),
    )
    vision: bool = key(False, "also the vision tower's attention")
    target_modules: list[str] | None = key(
        None, "explicit module names, or one regular expression: replaces target"
    )

    def __post_init__(self) -> None:
        check_fields(self, "lora.")

    def peft_target_modules(self) -> str | list[str]:
        if self.target_modules:
            return self.target_modules if len(self.target_modules) > 1 else self.target_modules[0]
        pattern = LORA_TARGETS[self.target]
        return f"(?:{pattern})|(?:{VISION_LORA_TARGET})" if self.vision else pattern


@dataclasses.dataclass
class GrpoConfig:
    num_generations: int = key(
        8, "completions per prompt (a group); GRPO needs at least 2", low=2, high=MAX_BATCH
    )
    max_completion_length: int = key(
        128, "tokens per completion (a ROSE answer is at most ~60)", low=1, high=MAX_TOKENS
    )
    temperature: float = key(1.0, "sampling temperature", low=0, low_open=True, high=100)
    top_p: float = key(1.0, "nucleus sampling", low=0, low_open=True, high=1)
    loss_type: str = key("dapo", "TRL's GRPO loss", choices=LOSS_TYPES)
    beta: float = key(0.0, "KL weight; 0 loads no reference model", low=0)
    epsilon: float = key(0.2, "the clipping range", low=0, low_open=True)
    scale_rewards: str = key("group", "how advantages are scaled", choices=SCALE_REWARDS)
    num_iterations: int = key(1, "optimisation steps per generated batch", low=1, high=1000)
    vllm: str | None = key(
        None, "`null` (transformers generates) | `colocate` | `server`", choices=(None, *VLLM_MODES)
    )
    vllm_server_base_url: str | None = key(None, "the vLLM server in `server` mode")
    vllm_gpu_memory_utilization: float = key(
        0.3, "the GPU share vLLM reserves in `colocate` mode", low=0, low_open=True, high=1
    )
    log_completions: bool = key(False, "log sampled completions to the trackers")
    thinking: str | None = key(
        None,
        "the thinking style the policy was taught (its SFT's data.reasoning): the "
        "`thinking` reward checks each completion's <think> block against the item's "
        "own thinking in it (null: no thinking reward)",
        choices=(None, *REASONING_STYLES),
    )
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
    frontier_by: str = key(
        "pass",
        "with frontier: what a kept prompt's samples must differ in. `pass`: some pass "
        "and some fail; `reward`: their weighted total reward (rewards) is not the same "
        "for all, so a prompt the policy always fails still trains where SOFT or the "
        "thinking reward tells its samples apart",
        choices=FRONTIER_BY,
    )
    frontier_reuse: bool = key(
        False,
        "with frontier: TRL trains each kept prompt on the very samples that kept it (DAPO's "
        "dynamic sampling: every group it trains on holds a pass and a fail) instead of "
        "sampling the prompt again, which saves TRL's own sampling; through TRL's "
        "experimental rollout_func; needs vllm null; reused and resampled groups are "
        "counted in frontier.jsonl",
    )
    frontier_thinking: bool = key(
        False,
        "with frontier and grpo.thinking: a sample counts as solved only when it passes "
        "and its <think> block is the item's own, so a prompt the policy answers right "
        "from the wrong cells stays live (give rewards.thinking a weight, or such a "
        "group's samples all earn the same)",
    )
    frontier_greedy: bool = key(
        False,
        "with frontier_reuse: the last completion of every group is the live policy's "
        "greedy answer (the others sampled as usual), so the group's advantage falls on "
        "the answer evaluation reads: a greedy answer that fails beside samples that pass "
        "is pushed down, one that passes beside samples that fail is pushed up; costs one "
        "greedy decoding per candidate prompt",
    )
    frontier_gold: bool = key(
        False,
        "with frontier_reuse: a prompt whose samples all fail is kept, with the item's own "
        "gold completion (its thinking in grpo.thinking's style when set, then its answer) "
        "in place of its first sample, so the group's advantage pulls the policy towards "
        "the answer it never samples (off-policy guidance, as LUFFY); counted as `gold` "
        "in frontier.jsonl; set grpo.thinking to the style a thinking policy was taught",
    )
    loss_from: str | None = key(
        None,
        "with frontier_reuse: train each completion only on its tokens after the first "
        "`loss_from` text it writes (e.g. `inside:`, the in-region list of the cells-seen "
        "thinking, then the answer), so the loss falls where the answer is decided; a "
        "completion without it trains on every token (null: every token always)",
    )

    def __post_init__(self) -> None:
        check_fields(self, "grpo.")
        if self.loss_from is not None and not (self.frontier_reuse and self.loss_from):
            raise ValueError(
                "grpo.loss_from: needs grpo.frontier_reuse: true (the token mask goes to TRL "
                "with the filter's samples) and a non-empty text"
            )
        if self.frontier_thinking and not (self.frontier and self.thinking):
            raise ValueError(
                "grpo.frontier_thinking: needs grpo.frontier: true and grpo.thinking "
                "(the style whose <think> block it checks)"
            )
        if self.frontier_greedy and not self.frontier_reuse:
            raise ValueError(
                "grpo.frontier_greedy: needs grpo.frontier_reuse: true (TRL must train on the "
                "filter's groups, which hold the greedy answer)"
            )
        if self.frontier_by != "pass" and not self.frontier:
            raise ValueError("grpo.frontier_by: needs grpo.frontier: true (it says what the filter keeps)")
        if self.frontier_gold and not self.frontier_reuse:
            raise ValueError(
                "grpo.frontier_gold: needs grpo.frontier_reuse: true (TRL must train on the "
                "filter's groups, which hold the gold completion)"
            )
        if self.frontier_reuse and not self.frontier:
            raise ValueError(
                "grpo.frontier_reuse: needs grpo.frontier: true (it reuses the filter's samples)"
            )
        if self.frontier_reuse and self.vllm is not None:
            raise ValueError(
                "grpo.frontier_reuse: needs grpo.vllm: null (the filter samples with transformers, "
                "so vLLM would never generate)"
            )


@dataclasses.dataclass
class EvalConfig:
    """Greedy generation on a held-out folder every N steps, scored with the scorer."""

    folder: str | None = key(
        None,
        "a held-out folder in the ROSE release layout (metadata_<split>.jsonl "
        "+ images/); null: no held-out evaluation (the other eval keys are unused)",
    )
    split: str = key("test", "its split")
    every_steps: int = key(0, "evaluate every N steps; 0: at the end only", low=0, high=MAX_STEPS)
    items: int = key(64, "items per evaluation, spread over templates", low=1, high=10**6)
    max_new_tokens: int = key(64, "greedy answer length", low=1, high=MAX_TOKENS)
    batch_size: int = key(8, "items per generation batch", low=1, high=MAX_BATCH)

    def __post_init__(self) -> None:
        check_fields(self, "eval.")


# ----------------------------------------------------------------- the recipe


@dataclasses.dataclass
class Recipe:
    method: str = key(help="`sft` | `grpo`", choices=METHODS.names())
    model: str = key(
        help="a Hub id, a local folder, or a LoRA adapter folder (merged into its base at "
        "load, so GRPO can stack on an SFT adapter)"
    )
    output_dir: str = key(help="checkpoints, the final model, the run's record; one run at a time")
    data: DataConfig = key(help="training rows")
    lora: LoraConfig | None = key(help="LoRA adapters; `lora: null` is full fine-tuning", factory=LoraConfig)
    freeze_vision: bool = key(
        False,
        "keep the vision tower's weights (its merger too) as they are: with "
        "`lora: null` only the language model trains, as LoRA on the language "
        "model leaves perception to the base",
    )
    vision_lr_scale: float = key(
        1.0,
        "the vision tower's (and its merger's) learning rate as a share of "
        "`learning_rate`: between freezing perception (`freeze_vision`) and "
        "training it at the language model's pace",
        low=0,
        low_open=True,
        high=1,
    )
    grpo: GrpoConfig = key(help="GRPO settings", factory=GrpoConfig)
    rewards: dict[str, float] = key(
        help="GRPO reward weights of `pass` (exact ROSE PASS), `soft` (ROSE "
        "SOFT), `format` (grammar-valid) and `thinking` (1 when the <think> block "
        "names every cell right, in grpo.thinking's style); GRPO also logs pass/<template>, "
        "pass/counting, pass/action, and live/<template>, live/all: the "
        "share of groups whose PASS varies (the only groups with an "
        "advantage; TRL's frac_reward_zero_std misses all-correct groups, "
        "whose float32 reward std is ~1e-7 with shaping rewards, not 0)",
        factory=lambda: {"pass": 1.0, "soft": 0.0, "format": 0.0},
    )
    eval: EvalConfig = key(
        help="held-out evaluation during training, scored with the scorer; logged as "
        "eval/... (keys eval_<name>) to every report_to tracker and OUTPUT_DIR/heldout_eval.jsonl "
        "(with its item ids and token limit: `rosetrain eval --items OUTPUT_DIR/heldout_eval.jsonl "
        "--max-new-tokens N` gives the same figures)",
        factory=EvalConfig,
    )
    trust_remote_code: bool = key(False, "run a model repository's own code")
    min_pixels: int | None = key(
        None,
        "the processor's image budget (Qwen resizes images to fit it, in "
        "28 px steps, 32 for Qwen3-VL; saved with the model); null: the model's",
        low=1,
        high=2**31 - 1,
    )
    max_pixels: int | None = key(None, "the upper end of that budget", low=1, high=2**31 - 1)
    seed: int = key(0, "the trainer's seed", low=0, high=SEED_32)
    save_merged: bool = key(False, "also write output_dir/merged: the LoRA merged into its base (for vLLM)")
    resume: str = key(
        "auto", "`auto`: from the last complete checkpoint in output_dir; `never`; or a checkpoint folder"
    )
    # The TRL / transformers settings most recipes touch; anything else goes under `trl:`.
    max_steps: int = key(-1, "optimizer steps; -1: num_train_epochs over a folder", low=-1, high=MAX_STEPS)
    num_train_epochs: float = key(
        1.0, "epochs over a folder (when max_steps is -1)", low=0, low_open=True, high=10**6
    )
    learning_rate: float | None = key(None, "null: 2e-4 for LoRA SFT, 2e-5 full SFT, 1e-6 GRPO", low=0)
    per_device_train_batch_size: int | None = key(
        None,
        "null: 8 for SFT, num_generations for GRPO (Qwen-VL GRPO: must equal it)",
        low=1,
        high=MAX_BATCH,
    )
    gradient_accumulation_steps: int = key(1, "micro-batches per optimizer step", low=1, high=MAX_BATCH)
    lr_scheduler_type: str = key("cosine", "a transformers schedule name")
    warmup_steps: int | float = key(
        0.03, "warmup steps; below 1: a ratio of the total", low=0, high=MAX_STEPS
    )
    # The trainer passes weight_decay per parameter group, where torch never checks its sign.
    weight_decay: float = key(0.0, "AdamW weight decay", low=0)
    max_grad_norm: float = key(1.0, "gradient clipping", low=0)
    logging_steps: int = key(10, "log every N steps", low=1, high=MAX_STEPS)
    save_steps: int = key(500, "write a resumable checkpoint-N every N steps", low=1, high=MAX_STEPS)
    save_total_limit: int | None = key(2, "checkpoints kept", low=0, high=MAX_STEPS)
    report_to: list[str] = key(
        help="trackers (`tensorboard`, `wandb`, `trackio`, ...); `none`", factory=lambda: ["none"]
    )
    run_name: str | None = key(None, "the trackers' run name")
    bf16: bool | None = key(None, "null: on with a GPU that supports it, off on the CPU")
    gradient_checkpointing: bool | None = key(None, "null: on with a GPU, off on the CPU")
    dataloader_num_workers: int | None = key(
        None,
        "null: 0 for a folder; for a stream 1 on the CPU (rows are "
        "generated while the model trains), up to 6 per GPU process "
        "on a GPU (the CPUs per process less one); a stream has 64 "
        "shards, so several workers, or ranks, each generate their "
        "own scenes",
        low=0,
        high=256,
    )
    cpu_threads: int | None = key(
        None,
        "torch threads on the CPU; null: torch's default (the tiny "
        "recipes use 1: waiting OpenMP threads made steps 7x slower on a "
        "shared 2-core machine)",
        low=1,
        high=MAX_THREADS,
    )
    trl: dict[str, Any] = key(help="any other `SFTConfig` / `GRPOConfig` field", factory=dict)
    source: str = "<recipe>"  # the file it came from (set by load_recipe, not a YAML key)
    overrides: tuple[str, ...] = ()  # the --set items it was loaded with (its card gives the command)

    def __post_init__(self) -> None:
        if isinstance(self.report_to, str):
            self.report_to = [self.report_to]
        check_fields(self, "", hidden=NOT_KEYS)
        if not self.model:
            raise ValueError("model: a Hub id or a local folder is required")
        if not self.output_dir:
            raise ValueError("output_dir: required")
        unknown = sorted(set(self.rewards) - set(REWARDS))
        if unknown:
            raise ValueError(f"rewards: {REWARDS.unknown(unknown[0])}")
        self.rewards = {name: float(self.rewards.get(name, 0.0)) for name in REWARDS}
        if self.rewards[THINKING] and self.grpo.thinking is None:
            raise ValueError(
                "rewards.thinking: needs grpo.thinking, the style the policy thinks in "
                "(the data.reasoning of its SFT)"
            )
        if self.method == "grpo" and not any(self.rewards.values()):
            raise ValueError(
                f"rewards: every weight is 0; give at least one of {', '.join(REWARDS)} a weight"
            )
        if self.method == "grpo" and self.data.reasoning is not None:
            raise ValueError(
                "data.reasoning: shapes SFT targets; GRPO samples its own completions, and its rewards "
                "score the answer after any <think> block (SFT a model with data.reasoning first)"
            )
        if self.max_steps == 0:
            raise ValueError(f"max_steps: must be > 0, or -1 to train num_train_epochs; got {self.max_steps}")
        if self.data.spec is not None and self.max_steps <= 0:
            raise ValueError("max_steps: streaming from data.spec is unlimited; set max_steps > 0")
        if self.resume not in ("auto", "never") and not Path(self.resume).is_dir():
            raise ValueError(f"resume: {self.resume!r} is neither auto, never, nor a checkpoint folder")
        _refuse_non_finite(self.trl, "trl")
        if self.freeze_vision and self.vision_lr_scale != 1.0:
            raise ValueError(
                "vision_lr_scale: the vision tower is frozen (freeze_vision: true); set one of the two"
            )

    @property
    def train_batch_size(self) -> int:
        if self.per_device_train_batch_size is not None:
            return self.per_device_train_batch_size
        return self.grpo.num_generations if self.method == "grpo" else 8

    def num_workers(self, gpu: bool = False) -> int:
        """DataLoader workers: the recipe's, else 0 for a folder or GRPO; for a stream 1 on
        the CPU (rows are generated on a second core while the model trains), and on
        a GPU enough that the model never waits: a 16-row batch costs a worker about
        17 ms of CPU (``benchmarks/train_step.py``), more than a tiny model's GPU step."""
        if self.dataloader_num_workers is not None:
            return self.dataloader_num_workers
        if self.data.spec is None or self.method == "grpo":
            return 0  # GRPO: TRL requires 0 for a stream (it keeps each prompt's group together)
        if not gpu:
            return 1
        import os

        per_process = (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        )
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        return max(1, min(GPU_WORKERS_MAX, per_process // max(1, local) - 1))

    @property
    def lr(self) -> float:
        if self.learning_rate is not None:
            return self.learning_rate
        if self.method == "grpo":
            return 1e-6
        return 2e-4 if self.lora is not None else 2e-5


def _refuse_non_finite(value: Any, name: str) -> None:
    """``trl:`` is passed to TRL as it is: NaN or infinity there would train an all-NaN model."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name}: must be a finite number, got {value!r}")
    if isinstance(value, Mapping):
        for sub, item in value.items():
            _refuse_non_finite(item, f"{name}.{sub}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_non_finite(item, f"{name}[{i}]")


SECTIONS = {"data": DataConfig, "lora": LoraConfig, "grpo": GrpoConfig, "eval": EvalConfig}
NOT_KEYS = frozenset({"source", "overrides"})


def valid_keys(cls: type = Recipe) -> list[str]:
    return config.valid_keys(cls, NOT_KEYS)


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
    recipe = recipe_from_dict(raw, path, overrides)
    recipe.overrides = tuple(overrides)
    return recipe


def apply_override(raw: dict, item: str, path: str | Path = "<recipe>") -> None:
    """``a.b.c=value``: set a nested key, creating sections; the value is YAML."""
    try:
        config.apply_override(raw, item, Recipe, NOT_KEYS)
    except ValueError as err:
        message = trl_key_hint(str(err), item, raw.get("method"))
        where = "" if message.startswith("override") else f"{path} (override {item}): "
        raise RecipeError(where + message, argument="overrides") from None


def trl_key_hint(message: str, item: str, method: object) -> str:
    """A top-level key that is no recipe key, and no misspelt one, is most likely
    a TRL config field set as TRL's scripts set it (``optim=adafactor``): the
    message says that such fields go under ``trl.``."""
    key = item.partition("=")[0].strip()
    unknown = f"unknown key {key!r} at the top level; "
    if not message.startswith(unknown) or not key.isidentifier():
        return message  # a nested key, or "did you mean" already names the recipe key
    trainer = {"sft": "SFTConfig", "grpo": "GRPOConfig"}.get(str(method), "SFTConfig / GRPOConfig")
    return (
        f"unknown key {key!r} at the top level; a TRL {trainer} field goes under trl: "
        f"trl.{item.strip()} (TRL checks the name); " + message[len(unknown) :]
    )


# A TRL script's YAML (trl sft --config x.yaml) names these keys its own way
TRL_YAML_KEYS = {"model_name_or_path": "model"}
TRL_DATA_KEYS = ("dataset_name", "dataset_config", "dataset_train_split", "dataset_mixture")


def recipe_from_dict(
    raw: Mapping[str, Any], path: str | Path = "<recipe>", overrides: Sequence[str] = ()
) -> Recipe:
    """The recipe, validated; an error names the file, and the override that
    gave the bad value when one did (the file itself may be fine)."""
    raw = dict(raw)
    if raw.get("lora") is False:  # `lora: false`: full fine-tuning, as `lora: null`
        raw["lora"] = None
    for trl_name, key in TRL_YAML_KEYS.items():
        if trl_name in raw:
            if key in raw:
                raise RecipeError(f"{path}: {trl_name} and {key} both name the model; keep one")
            raw[key] = raw.pop(trl_name)
    named = next((k for k in TRL_DATA_KEYS if k in raw), None)
    if named is not None:
        raise RecipeError(
            f"{path}: {named}: rosetrain trains on its own data, not a Hub dataset by name: set "
            "data.spec (a generator spec, streamed) or data.folder (a generated split, or "
            "hf://datasets/OWNER/NAME of one)"
        )
    try:
        kwargs = config.from_mapping(Recipe, raw, hidden=NOT_KEYS)
        for name in ("method", "model", "output_dir"):
            if name not in kwargs:
                raise ValueError(f"{name}: required")
        if "data" not in kwargs:
            raise ValueError("data: required (data.spec to stream, or data.folder)")
        return Recipe(**kwargs, source=str(path))
    except (TypeError, ValueError) as err:
        raise RecipeError(f"{_origin(str(err), path, overrides)}: {err}") from None


def _origin(message: str, path: str | Path, overrides: Sequence[str]) -> str:
    """The recipe file, with the last override that set the key ``message``
    starts with (or a section above it)."""
    key = message.partition(":")[0]
    for item in reversed(overrides):
        name = item.partition("=")[0].strip()
        if key == name or key.startswith(name + "."):
            return f"{path} (override {item.strip()})"
    return str(path)


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """Plain data (for the run's record of what it trained with)."""
    out = dataclasses.asdict(recipe)
    out.pop("source", None)
    out.pop("overrides", None)
    return out


def peft_config(recipe: Recipe):
    if recipe.lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=recipe.lora.r,
        lora_alpha=recipe.lora.alpha,
        lora_dropout=recipe.lora.dropout,
        target_modules=recipe.lora.peft_target_modules(),
        task_type="CAUSAL_LM",
    )
