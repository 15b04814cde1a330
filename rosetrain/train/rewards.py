"""GRPO reward functions, built only on the scorer (``rosetrain.scoring.score_item``).

TRL calls each reward as ``f(completions, **columns)``: the dataset's gold
columns arrive as lists, one value per completion. ``pass`` is the exact ROSE
PASS (1 or 0), ``soft`` the ROSE SOFT score, ``format`` grammar validity.
``pass`` also logs PASS per template through TRL's ``log_metric``, so the
counting-versus-action gap shows in the training logs.

``thinking`` is a process reward for a model taught to think first
(``data.reasoning`` of its SFT): 1 when the completion's ``<think>`` block is
the item's own thinking in that style (every cell list right), else 0. A
count can be right with the wrong cells; the thinking cannot.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rosetrain.core.protocol import ACTION_TEMPLATES, COUNTING_TEMPLATES, SHORT_NAME
from rosetrain.core.reasoning import STYLES, rationale, split_reasoning, unknown_style
from rosetrain.core.registry import Registry

# Columns of an HF row the scorer reads (the rest of the row is not gold).
GOLD_COLUMNS = (
    "item_id",
    "scene_id",
    "task_template",
    "task_mode",
    "rows",
    "cols",
    "ground_truth_count",
    "ground_truth_clicks",
    "all_target_cells",
    "region_target_cells",
    "region_type",
    "region_params_json",
    "region_case",
    "rose_subset",
    "family",
    "heldout_family",
    "grid_size_profile",
)
THINKING = "thinking"  # the process reward (make_thinking_reward): no field of the scorer's row
# reward name -> the field of the scorer's per-item row it returns.
REWARDS: Registry[str | None] = Registry(
    "reward",
    {"pass": "pass", "soft": "unified_soft", "format": "format_valid", THINKING: None},
    argument="rewards",
)
SCORER_REWARDS = tuple(name for name in REWARDS.names() if name != THINKING)


def completion_text(completion: Any) -> str:
    """The answer a completion gives: TRL's conversational form
    (``[{"role": "assistant", "content": ...}]``) or a string, read as
    evaluation reads a response (the text after a ``<think>`` block)."""
    return split_reasoning(_whole_text(completion))[1] or ""


def _whole_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(p.get("text") or "" for p in content or () if p.get("type") == "text")
    return "".join(parts)


class ScoreCache:
    """Scores each (item, completion) once although three rewards ask for it.
    Within one training run an item id names one gold, so its prepared sets
    (``prepare_gold``) are built once and reused."""

    def __init__(self, max_items: int = 65536):
        self._golds: dict[str, Any] = {}
        self._scored = functools.lru_cache(maxsize=max_items)(self._score)
        self.max_items = max_items

    def _score(self, item_id: str, text: str) -> dict[str, Any]:
        from rosetrain.scoring import score_item

        return score_item(self._golds[item_id], text)

    def score(self, gold_row: Mapping[str, Any], completion: Any) -> dict[str, Any]:
        """The scorer's row for a completion (a string or TRL's conversational
        form), read as evaluation reads a response: only the answer after any
        ``<think>`` block is scored, so a thinking model is graded on its answer."""
        from rosetrain.scoring import prepare_gold

        item_id = str(gold_row["item_id"])
        if item_id not in self._golds:
            if len(self._golds) >= self.max_items:
                self._golds.clear()
                self._scored.cache_clear()
            self._golds[item_id] = prepare_gold(gold_row)
        return self._scored(item_id, completion_text(completion))


def gold_rows(columns: Mapping[str, Sequence[Any]], n: int) -> list[dict[str, Any]]:
    present = [c for c in GOLD_COLUMNS if c in columns]
    return [{c: columns[c][i] for c in present} for i in range(n)]


def make_reward(name: str, cache: ScoreCache | None = None, log_templates: bool = False) -> Callable:
    """The reward ``name`` (pass | soft | format) as a TRL reward function."""
    field = REWARDS.lookup(name)
    if field is None:
        raise ValueError(f"the {name} reward needs the policy's thinking style: make_thinking_reward(style)")
    cache = cache or ScoreCache()

    def reward(completions: list, log_metric: Callable | None = None, **columns: Any) -> list[float]:
        golds = gold_rows(columns, len(completions))
        results = [cache.score(g, c) for g, c in zip(golds, completions)]
        if log_templates and log_metric is not None:
            log_template_pass(golds, results, log_metric)
        return [float(r[field]) for r in results]

    reward.__name__ = name  # TRL names the logged reward columns after the function
    return reward


def make_thinking_reward(style: str) -> Callable:
    """The ``thinking`` reward: 1.0 when a completion's ``<think>`` block is the
    item's thinking in ``style`` (``rosetrain.core.reasoning.STYLES``), else 0.0."""
    if style not in STYLES:
        raise ValueError(unknown_style(style))

    def thinking(completions: list, **columns: Any) -> list[float]:
        golds = gold_rows(columns, len(completions))
        return [float(thinks_right(style, g, _whole_text(c))) for g, c in zip(golds, completions)]

    thinking.__name__ = THINKING
    return thinking


def thinks_right(style: str, gold: Mapping[str, Any], text: str) -> bool:
    """Whether ``text`` opens with the item's own ``<think>`` block in ``style``."""
    said = split_reasoning(text)[0]
    return said is not None and said == rationale(style, gold)


def log_template_pass(
    golds: Sequence[Mapping[str, Any]],
    results: Sequence[Mapping[str, Any]],
    log_metric: Callable[[str, float], None],
) -> None:
    """One value per completion, so TRL's average over a logging step is the
    PASS rate over that step's completions of each template."""
    for gold, result in zip(golds, results):
        template = gold["task_template"]
        value = float(result["pass"])
        log_metric(f"pass/{SHORT_NAME.get(template, template)}", value)
        if template in COUNTING_TEMPLATES:
            log_metric("pass/counting", value)
        elif template in ACTION_TEMPLATES:
            log_metric("pass/action", value)
    log_live_groups(golds, results, log_metric)


def log_live_groups(
    golds: Sequence[Mapping[str, Any]],
    results: Sequence[Mapping[str, Any]],
    log_metric: Callable[[str, float], None],
) -> None:
    """Share of groups (completions of one prompt) whose PASS varies, per
    template: only those carry a GRPO advantage. Counted on PASS itself, since
    TRL's ``frac_reward_zero_std`` tests a float32 std against 0 and an
    all-correct group with shaping rewards has std ~1e-7. One value per
    completion, so TRL's average is the share of groups (they are equal-sized)."""
    groups: dict[str, list[float]] = {}
    for gold, result in zip(golds, results):
        groups.setdefault(str(gold["item_id"]), []).append(float(result["pass"]))
    for gold in golds:
        passes = groups[str(gold["item_id"])]
        live = float(0 < sum(passes) < len(passes))
        template = gold["task_template"]
        log_metric(f"live/{SHORT_NAME.get(template, template)}", live)
        log_metric("live/all", live)


def build_rewards(
    weights: Mapping[str, float], thinking: str | None = None
) -> tuple[list[Callable], list[float]]:
    """The scorer's three rewards and, given the style the policy thinks in,
    ``thinking`` (a zero weight still logs its mean), and their weights."""
    cache = ScoreCache()
    funcs = [make_reward(name, cache, log_templates=(name == "pass")) for name in SCORER_REWARDS]
    names = list(SCORER_REWARDS)
    if thinking is not None:
        funcs.append(make_thinking_reward(thinking))
        names.append(THINKING)
    return funcs, [float(weights.get(name, 0.0)) for name in names]
