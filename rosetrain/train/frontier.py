"""Frontier prompts for GRPO: DAPO-style dynamic sampling as a filtering stream.

A GRPO group whose completions all pass (or all fail) has zero advantage: it
costs a generation and teaches nothing. With ``grpo.frontier: true`` the
training stream is filtered before TRL sees it: for each candidate prompt the
*current* policy samples ``num_generations`` completions (the recipe's
temperature and length), the scorer grades them, and only prompts whose pass
rate lies strictly between 0 and 1 are kept. The generator is unlimited, so
rejected prompts are simply replaced by the next ones. TRL does not offer this.

Why a filtering stream rather than a trainer hook: it needs no TRL internals
(``_generate_and_score_completions`` changes between TRL releases), and it
runs wherever the dataloader runs, with the policy being trained. Its cost:
each kept prompt is sampled twice (once here, once by TRL), plus the samples of
the rejected prompts.

Each batch's counts go to ``OUTPUT_DIR/frontier.jsonl``: per template, the
prompts seen, live (kept), all-pass and all-fail.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import SHORT_NAME

logger = logging.getLogger("rosetrain.train")
FRONTIER_LOG = "frontier.jsonl"
# At the demo's ~55% acceptance, 128 dead prompts in a row happen by chance with
# probability ~0.45**128: the policy has no frontier left (or never had one, as
# an untrained model). Filtering then stops, with a warning, instead of spinning.
MAX_REJECTED_IN_A_ROW = 128


class FrontierFilter:
    """``IterableDataset.filter(FrontierFilter(...), batched=True)``: keeps a row
    when the policy's pass rate on it over ``samples`` samples is in (0, 1)."""

    def __init__(
        self,
        processor: Any,
        *,
        samples: int,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        output_dir: str,
    ):
        from rosetrain.train.rewards import ScoreCache

        self.processor = processor
        self.samples = samples
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.log_path = Path(output_dir) / FRONTIER_LOG
        self.trainer: Any = None  # set once the trainer exists: its model is the live policy
        self.cache = ScoreCache()
        self.rejected_in_a_row = 0
        self.exhausted = False

    def __call__(self, batch: Mapping[str, Sequence[Any]]) -> list[bool]:
        rows = [dict(zip(batch, values)) for values in zip(*batch.values())]
        if self.exhausted:
            return [True] * len(rows)
        passes = self.pass_counts(rows)
        keep = [0 < p < self.samples for p in passes]
        self.record(rows, passes)
        self.rejected_in_a_row = 0 if any(keep) else self.rejected_in_a_row + len(rows)
        if self.rejected_in_a_row >= MAX_REJECTED_IN_A_ROW:
            self.stop_filtering()
            return [True] * len(rows)
        return keep

    def stop_filtering(self) -> None:
        self.exhausted = True
        message = (
            f"grpo.frontier: the policy passed all or none of its samples on the last "
            f"{self.rejected_in_a_row} prompts: no frontier left; training goes on without the filter"
        )
        logger.warning(message)
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": self.step(), "exhausted": message}) + "\n")

    def step(self) -> int | None:
        return getattr(getattr(self.trainer, "state", None), "global_step", None)

    def pass_counts(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        from rosetrain.train.rewards import GOLD_COLUMNS

        texts = self.sample(rows)
        counts = []
        for i, row in enumerate(rows):
            gold = {c: row[c] for c in GOLD_COLUMNS if c in row}
            answers = texts[i * self.samples : (i + 1) * self.samples]
            counts.append(sum(int(self.cache.score(gold, text)["pass"]) for text in answers))
        return counts

    def sample(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        """``samples`` completions per row, row after row, from the live policy."""
        import torch

        model = self.trainer.model if self.trainer is not None else None
        if model is None:
            raise RosetrainError("grpo.frontier: the filter was used before the trainer was attached")
        texts = [
            self.processor.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
            for row in rows
        ]
        images = [list(row["images"]) for row in rows]
        inputs = self.processor(text=texts, images=images, return_tensors="pt", padding=True)
        inputs = inputs.to(model.device)
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                output = model.generate(
                    **inputs,
                    do_sample=True,
                    temperature=self.temperature,
                    top_p=self.top_p,
                    top_k=0,
                    num_return_sequences=self.samples,
                    max_new_tokens=self.max_new_tokens,
                )
        finally:
            model.train(was_training)
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        return tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True)

    def record(self, rows: Sequence[Mapping[str, Any]], passes: Sequence[int]) -> None:
        counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for row, p in zip(rows, passes):
            template = SHORT_NAME.get(row["task_template"], row["task_template"])
            outcome = "all_fail" if p == 0 else "all_pass" if p == self.samples else "live"
            counts[template].update({"seen": 1, outcome: 1})
        with open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": self.step(), "templates": counts}, sort_keys=True) + "\n")


def frontier_summary(output_dir: str | Path) -> dict[str, Any]:
    """Totals of ``frontier.jsonl`` per template: seen, live, all-pass, all-fail, live share."""
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    path = Path(output_dir) / FRONTIER_LOG
    if path.exists():
        for line in path.read_text().splitlines():
            for template, counts in json.loads(line).get("templates", {}).items():
                totals[template].update(counts)
    return {t: {**c, "live_share": round(c["live"] / c["seen"], 4)} for t, c in sorted(totals.items())}
