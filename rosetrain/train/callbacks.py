"""Trainer callbacks: held-out evaluation with the scorer, and adapter folders
that name the model they stack on.

The held-out evaluation generates greedily on a fixed set of held-out items
(spread over templates) with the model being trained, scores the answers with
``rosetrain.scoring``, logs PASS per template, Counting Avg, Action Avg and the
gap through the trainer as ``eval_<name>`` (so every ``report_to`` tracker gets
them, under ``eval/``), and appends one line per evaluation to
``OUTPUT_DIR/heldout_eval.jsonl``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback

from rosetrain.core.protocol import SHORT_NAME
from rosetrain.train.step_logs import HELDOUT_LOG

logger = logging.getLogger("rosetrain.train")


class HeldoutEvalCallback(TrainerCallback):
    def __init__(
        self,
        records: Sequence[Mapping[str, Any]],
        processor: Any,
        *,
        every_steps: int,
        max_new_tokens: int,
        batch_size: int,
        output_dir: str,
    ):
        self.records = list(records)
        self.processor = processor
        self.every_steps = every_steps
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.log_path = Path(output_dir) / HELDOUT_LOG
        self.trainer: Trainer | None = None  # set once the trainer exists (it logs for us)
        self._last_step = -1

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.every_steps and state.global_step % self.every_steps == 0:
            self._evaluate(state, model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        # the final figures come after the final model is on disk (rosetrain.train.run.save
        # calls evaluate_final): an evaluation that fails then loses no trained weights
        return

    def evaluate_final(self, trainer: Trainer) -> None:
        """The final figures, whatever every_steps says (a step already evaluated is not again)."""
        self._evaluate(trainer.state, trainer.model)

    def _evaluate(self, state, model) -> None:
        if state.global_step == self._last_step or model is None:
            return
        self._last_step = state.global_step
        if not state.is_world_process_zero:
            return  # one process evaluates; the others wait at the next collective
        if _sharded(self.trainer):
            logger.warning(
                "held-out evaluation during training is skipped with ZeRO-3/FSDP "
                "(parameters are sharded); run `rosetrain eval` on the saved model"
            )
            return
        metrics = self.evaluate(model)
        # eval_<name>, the trainer's own convention (eval_loss): transformers' TensorBoard,
        # W&B and trackio callbacks file these under eval/, where their users look
        metrics = {"eval_" + k: v for k, v in metrics.items()}
        record = {
            "step": state.global_step,
            **metrics,
            # what `rosetrain eval` needs to give the same figures: these items, this token limit
            "max_new_tokens": self.max_new_tokens,
            "item_ids": [r["item_id"] for r in self.records],
        }
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        logger.warning("held-out evaluation at step %d: %s", state.global_step, readable(metrics))
        if self.trainer is not None:
            # Trainer.log (not a TRL override): adds to log_history and every tracker
            # without flushing the metrics a TRL trainer is still averaging.
            due = self.trainer.control.should_log
            Trainer.log(self.trainer, metrics)
            # on_log clears the flag; without this, the training loss of a step that
            # also evaluates would never be logged (nor reach the trackers)
            self.trainer.control.should_log = due

    def evaluate(self, model) -> dict[str, float]:
        """Greedy answers on the held-out items, scored; returns flat metrics."""
        from rosetrain.runners.transformers_runner import TransformersRunner
        from rosetrain.scoring import score_item, summarize

        was_training = model.training
        started = time.perf_counter()
        runner = TransformersRunner(
            "training", max_new_tokens=self.max_new_tokens, loaded=(model, self.processor)
        )
        quiet = self.trainer is None or bool(getattr(self.trainer.args, "disable_tqdm", False))
        # the training bar stands still meanwhile: this one says why (gone when done)
        bar = tqdm(
            total=len(self.records), desc="held-out evaluation", unit="item", leave=False, disable=quiet
        )
        try:
            texts: list[str | None] = []
            for start in range(0, len(self.records), self.batch_size):
                batch = self.records[start : start + self.batch_size]
                texts += [text for text, _ in runner.generate(batch)]
                bar.update(len(batch))
        finally:
            bar.close()
            model.train(was_training)
        results = [score_item(r, t) for r, t in zip(self.records, texts)]
        return flat_metrics(summarize(self.records, results), time.perf_counter() - started)


def readable(metrics: Mapping[str, float]) -> str:
    """The held-out figures in eval's terms: percentages, short names."""
    names = {
        "eval_avg_pass": "Avg",
        "eval_counting_avg": "Counting",
        "eval_action_avg": "Action",
        "eval_gap": "Gap",
    }
    return "  ".join(f"{label} {100 * metrics[key]:.1f}" for key, label in names.items() if key in metrics)


def flat_metrics(summary: Mapping[str, Any], seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in ("avg_pass", "counting_avg", "action_avg", "gap", "valid", "soft"):
        if summary.get(key) is not None:
            out[key] = float(summary[key])
    for template, row in (summary.get("templates") or {}).items():
        if row.get("pass") is not None:
            out[f"pass/{SHORT_NAME.get(template, template)}"] = float(row["pass"])
    out["seconds"] = round(seconds, 3)
    return out


def _sharded(trainer: Trainer | None) -> bool:
    if trainer is None:
        return False
    if getattr(trainer, "is_fsdp_enabled", False):
        return True
    plugin = getattr(getattr(trainer, "accelerator", None), "state", None)
    plugin = getattr(plugin, "deepspeed_plugin", None)
    return plugin is not None and getattr(plugin, "zero_stage", 0) == 3


class AdapterBaseCallback(TrainerCallback):
    """A saved LoRA adapter records the model it was trained on. peft writes the
    underlying base; when training started from another adapter (merged at load,
    e.g. GRPO after LoRA SFT) the adapter must point at that adapter instead."""

    def __init__(self, base: str):
        self.base = base

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            set_adapter_base(checkpoint, self.base)


class CheckpointCardCallback(TrainerCallback):
    """Each saved checkpoint carries rosetrain's model card (base, data, method,
    the command, its step) in place of the boilerplate peft writes there."""

    def __init__(self, recipe: Any):
        self.recipe = recipe

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        from rosetrain.core.io import atomic_write
        from rosetrain.models.loading import ADAPTER_CONFIG
        from rosetrain.train.card import CARD_NAME, model_card_text

        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.is_dir():
            adapter = (checkpoint / ADAPTER_CONFIG).is_file()
            text = model_card_text(self.recipe, {"global_step": state.global_step}, adapter)
            atomic_write(checkpoint / CARD_NAME, text)


def set_adapter_base(folder: Path, base: str) -> None:
    from rosetrain.core.io import atomic_write
    from rosetrain.models.loading import ADAPTER_CONFIG

    path = Path(folder) / ADAPTER_CONFIG
    if not path.is_file():
        return
    config = json.loads(path.read_text())
    if config.get("base_model_name_or_path") != base:
        config["base_model_name_or_path"] = base
        atomic_write(path, json.dumps(config, indent=2, sort_keys=True))
