"""GRPO with TRL's ``GRPOTrainer``: conversational prompts plus the image column,
a left-padded processor, and rewards built only on the scorer (``rewards.py``).

The recipe's ``grpo:`` section sets ``num_generations``, ``loss_type``,
``beta``, the sampling temperature and vLLM (``colocate`` or ``server``, with a
clear error where vllm is missing), and ``frontier`` (train only on prompts the
policy passes sometimes: ``frontier.py``; with ``frontier_reuse``, on the very
samples that kept them); ``rewards:`` weighs pass, soft and format.
On M-RoPE (Qwen-VL) models the per-device batch equals ``num_generations``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from rosetrain.train.build import PreparedRows, TrainerParts
from rosetrain.train.recipe import Recipe
from rosetrain.train.rewards import build_rewards
from rosetrain.train.trl_config import make_config


def grpo_kwargs(recipe: Recipe) -> dict[str, Any]:
    grpo = recipe.grpo
    kwargs: dict[str, Any] = dict(
        num_generations=grpo.num_generations,
        max_completion_length=grpo.max_completion_length,
        temperature=grpo.temperature,
        top_p=grpo.top_p,
        loss_type=grpo.loss_type,
        beta=grpo.beta,
        epsilon=grpo.epsilon,
        scale_rewards=grpo.scale_rewards,
        num_iterations=grpo.num_iterations,
        log_completions=grpo.log_completions,
        remove_unused_columns=False,  # gold columns reach the rewards
        use_vllm=grpo.vllm is not None,
    )
    if grpo.vllm is not None:
        kwargs.update(vllm_mode=grpo.vllm, vllm_gpu_memory_utilization=grpo.vllm_gpu_memory_utilization)
        if grpo.vllm_server_base_url:
            kwargs["vllm_server_base_url"] = grpo.vllm_server_base_url
    return kwargs


def trl_config(recipe: Recipe):
    from trl import GRPOConfig

    _, weights = build_rewards(recipe.rewards, recipe.grpo.thinking)
    origins = {
        **{key: f"grpo.{key}" for key in grpo_kwargs(recipe)},
        "use_vllm": "grpo.vllm",
        "vllm_mode": "grpo.vllm",
        "reward_weights": "rewards",
    }
    return make_config(GRPOConfig, recipe, {**grpo_kwargs(recipe), "reward_weights": weights}, origins)


def trainer_parts(recipe: Recipe) -> TrainerParts:
    """``GRPOTrainer`` with the rewards, and the frontier filter when ``grpo.frontier``."""
    from rosetrain.train.grpo_trainer import GRPOTrainer

    reward_funcs, weights = build_rewards(recipe.rewards, recipe.grpo.thinking)
    # the filter judges by the very functions TRL calls, so they share one score cache
    rewards = (reward_funcs, weights)
    frontier = functools.partial(frontier_stream, recipe, rewards=rewards) if recipe.grpo.frontier else None
    return TrainerParts(GRPOTrainer, kwargs={"reward_funcs": reward_funcs}, prepare_rows=frontier)


def gold_completion(style: str | None, row: Mapping[str, Any]) -> str:
    """A row's SFT target: its answer, after its thinking in ``style`` when the
    policy was taught to think first (``grpo.thinking``)."""
    from rosetrain.core.reasoning import reasoned_answer

    return reasoned_answer(style, row) if style is not None else str(row["answer"])


def frontier_stream(
    recipe: Recipe,
    dataset: Any,
    processor: Any,
    args: Any,
    *,
    rewards: tuple[list, list[float]] | None = None,
) -> PreparedRows:
    """The stream filtered to frontier prompts (``grpo.frontier``), and the filter,
    which needs the trainer (its live policy samples each candidate); with
    ``grpo.frontier_reuse``, TRL's rollouts are the filter's own samples.
    ``rewards``: the trainer's reward functions and weights, which
    ``grpo.frontier_by: reward`` keeps prompts by (built from the recipe when
    not given: never a silent fall back to PASS)."""
    from rosetrain.core.errors import RosetrainError
    from rosetrain.train.frontier import FrontierFilter
    from rosetrain.train.grpo_trainer import prompts_per_generation

    if recipe.data.folder is not None:
        raise RosetrainError(
            "grpo.frontier: needs a streamed spec (data.spec), which refills what it rejects"
        )
    if args.world_size > dataset.n_shards:
        # each process must filter a stream of its own: read together, the
        # processes' own keep decisions would split a batch's prompts unevenly
        raise RosetrainError(
            f"grpo.frontier: {args.world_size} training processes, more than the stream's "
            f"{dataset.n_shards} shards; each process filters shards of its own"
        )
    grpo = recipe.grpo
    if grpo.frontier_by == "reward" and rewards is None:  # a caller without the trainer's
        rewards = build_rewards(recipe.rewards, grpo.thinking)
    keep = FrontierFilter(
        processor,
        samples=grpo.num_generations,
        temperature=grpo.temperature,
        top_p=grpo.top_p,
        max_new_tokens=grpo.max_completion_length,
        output_dir=recipe.output_dir,
        reuse=grpo.frontier_reuse,
        greedy=grpo.frontier_greedy,
        thinking=grpo.thinking if grpo.frontier_thinking else None,
        loss_from=grpo.loss_from,
        rewards=rewards if grpo.frontier_by == "reward" else None,
        gold=functools.partial(gold_completion, grpo.thinking) if grpo.frontier_gold else None,
    )
    # TRL's own shuffle buffer (1,000 rows) would pull, and so pre-sample, far ahead of
    # the policy; the stream is already shuffled (data.shuffle_buffer).
    args.shuffle_dataset = False
    # On resume the trainer would draw and drop the batches of the steps already
    # trained, and the filter would sample every candidate prompt of them again
    # (resumed at step 1,200: about 35 minutes before the first new step). Its
    # choices depend on the live policy's samples, so that place in the stream
    # would not be the interrupted run's anyway: a resumed run starts it over.
    args.ignore_data_skip = True
    # one process's prompts of a generation: each process filters its own shards
    prompts = prompts_per_generation(args, grpo.num_generations)
    return PreparedRows(
        dataset.filter(keep, batched=True, batch_size=prompts),
        needs_trainer=[keep],
        trainer_kwargs={"rollout_func": keep.rollout} if grpo.frontier_reuse else {},
    )
