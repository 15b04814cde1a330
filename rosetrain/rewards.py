"""ROSE rewards as plain TRL reward functions, for your own ``GRPOTrainer``:

    from trl import GRPOConfig, GRPOTrainer
    from rosetrain.rewards import format_reward, pass_reward, soft_reward

    trainer = GRPOTrainer(
        model=model, processing_class=processor, train_dataset=rows,
        reward_funcs=[pass_reward, soft_reward, format_reward],
        args=GRPOConfig(..., remove_unused_columns=False))  # the gold columns reach the rewards

- ``pass_reward``: the exact ROSE PASS of each completion (1.0 or 0.0);
- ``soft_reward``: the ROSE SOFT score (partial credit in [0, 1]);
- ``format_reward``: 1.0 when the completion follows the answer grammar.

Each is ``f(completions, **columns) -> list[float]`` and scores through the
same code as ``rosetrain score`` (``rosetrain.scoring.score_item``), so a
reward is the benchmark's verdict by construction. The dataset rows must
carry the gold columns of rosetrain's Hugging Face rows (``item_id``,
``task_template``, ``task_mode``, ``rows``, ``cols``, ``ground_truth_count``,
``ground_truth_clicks``, ``all_target_cells``, ``region_type``,
``region_params_json``, ...): ``rosetrain generate --formats hf`` writes
them, ``rosetrain.data.hf.load_hf_split`` reads them. TRL logs each reward
under its ``__name__``: ``rewards/pass/mean``, ``rewards/soft/mean``,
``rewards/format/mean``. The three share one cache, so a completion is
scored once however many of them ask.

``make_reward(name)`` builds one with its own cache; ``build_rewards(weights)``
returns the three with their weights (what ``rosetrain train grpo`` uses, with
PASS logged per template). For a model taught to think first,
``make_thinking_reward(style)`` is a process reward: 1.0 when the
``<think>`` block names every cell as the item's thinking in that style does
(``build_rewards(weights, style)`` adds it as ``thinking``).
"""

from __future__ import annotations

from rosetrain.train.rewards import GOLD_COLUMNS, ScoreCache, build_rewards, make_reward, make_thinking_reward

_SHARED = ScoreCache()
pass_reward = make_reward("pass", _SHARED)
soft_reward = make_reward("soft", _SHARED)
format_reward = make_reward("format", _SHARED)

__all__ = [
    "GOLD_COLUMNS",
    "ScoreCache",
    "build_rewards",
    "format_reward",
    "make_reward",
    "make_thinking_reward",
    "pass_reward",
    "soft_reward",
]
