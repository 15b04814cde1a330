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
the rejected prompts. With ``grpo.frontier_reuse`` it is sampled once: the
filter keeps the samples of each prompt it keeps, and TRL's ``rollout_func``
(``FrontierFilter.rollout``) hands them to TRL as the prompt's group, so every
group TRL trains on holds a pass and a fail, as in DAPO. A prompt TRL asks for
that the filter holds no samples of (the filter stepped aside, a resumed run)
is sampled there and then, with the same settings.
With ``grpo.frontier_greedy`` the last member of every group is the live
policy's greedy answer, the one evaluation reads, so the group's advantage
lands on it too. With ``grpo.frontier_by: reward`` a prompt is kept when its
samples' total reward varies (TRL's own reward functions and weights), so a
group that always fails but earns some SOFT credit still trains.
With ``grpo.frontier_gold`` a prompt whose samples all fail is kept with the
item's own gold completion (its thinking in the policy's style, then its
answer) in place of its first sample: guidance off the policy, as LUFFY
(arXiv 2504.14945) mixes expert traces into GRPO groups, so a prompt the
policy never solves pulls it towards the answer instead of being dropped.

Each batch's counts go to ``OUTPUT_DIR/frontier.jsonl``: per template, the
prompts seen, live, all-pass and all-fail, counted on PASS (and, by reward,
``kept``; with gold, ``gold``); with reuse, each rollout's groups reused and
sampled anew.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.protocol import SHORT_NAME
from rosetrain.train.step_logs import FRONTIER_LOG

logger = logging.getLogger("rosetrain.train")
# At the demo's ~55% acceptance, 128 dead prompts in a row happen by chance with
# probability ~0.45**128: the policy has no frontier left (or never had one, as
# an untrained model). Filtering then stops, with a warning, instead of spinning.
MAX_REJECTED_IN_A_ROW = 128
# Kept groups waiting for TRL: it takes them within a generation batch or two, so
# more than this means TRL's prompts no longer match the filter's (then the
# oldest are dropped, and the rollouts count them as sampled anew).
MAX_PENDING_GROUPS = 4096


@dataclasses.dataclass
class Sampled:
    """Completions of rows, row after row: each row's prompt token ids (without
    padding), and per completion its token ids (up to its first end-of-sequence
    token, kept, as TRL keeps it) and its text."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    texts: list[str]


def prompt_key(messages: Sequence[Mapping[str, Any]], images: Sequence[Any]) -> tuple:
    """A prompt's identity through the copies TRL makes of it: its roles and texts
    in order, and its images' size, mode and a digest of their pixels."""
    texts = []
    for message in messages:
        content = message["content"]
        parts = (
            [content]
            if isinstance(content, str)
            else [part.get("text") for part in content if part.get("type") == "text"]
        )
        texts.append((message["role"], *parts))
    pixels = tuple(
        (image.size, image.mode, hashlib.blake2b(image.tobytes(), digest_size=16).digest())
        for image in images
    )
    return tuple(texts), pixels


def message_images(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The images TRL put into a prompt's content parts, in order."""
    return [
        part["image"]
        for message in messages
        if not isinstance(message["content"], str)
        for part in message["content"]
        if part.get("type") == "image"
    ]


Group = tuple[list[int], list[list[int]]]  # a prompt's token ids, its completions' token ids


class HeldGroups:
    """The groups the filter kept prompts with, by ``prompt_key``, oldest first,
    until TRL takes them (``FrontierFilter.rollout``)."""

    def __init__(self) -> None:
        self.by_key: dict[tuple, collections.deque[Group]] = {}
        self.count = 0

    def put(self, key: tuple, prompt_ids: list[int], completions: list[list[int]]) -> None:
        self.by_key.setdefault(key, collections.deque()).append((prompt_ids, completions))
        self.count += 1
        while self.count > MAX_PENDING_GROUPS:  # TRL is not taking them: drop the oldest
            self._pop(next(iter(self.by_key)))

    def take(self, key: tuple, copies: int) -> Group | None:
        """The oldest group held for ``key``, if it has ``copies`` completions."""
        if not self.by_key.get(key):
            return None
        group = self._pop(key)
        return group if len(group[1]) == copies else None

    def _pop(self, key: tuple) -> Group:
        held = self.by_key[key]
        group = held.popleft()
        self.count -= 1
        if not held:
            del self.by_key[key]
        return group


class FrontierFilter:
    """``IterableDataset.filter(FrontierFilter(...), batched=True)``: keeps a row
    when the policy's pass rate on it over ``samples`` samples is in (0, 1), or
    given ``rewards`` (TRL's reward functions and their weights), when the
    samples' weighted total reward is not the same for all."""

    def __init__(
        self,
        processor: Any,
        *,
        samples: int,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        output_dir: str,
        reuse: bool = False,
        greedy: bool = False,
        thinking: str | None = None,
        loss_from: str | None = None,
        rewards: tuple[Sequence[Any], Sequence[float]] | None = None,
        gold: Callable[[Mapping[str, Any]], str] | None = None,
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
        self.reuse = reuse
        self.greedy = greedy  # the last completion of each group is the greedy answer
        self.thinking = thinking  # a style: a pass counts only with the item's own <think> block
        self.loss_from = loss_from  # with reuse: TRL trains a completion only after this text
        self.held = HeldGroups()  # with reuse: the kept prompts' groups, until TRL takes them
        self.rewards = rewards  # keep by the total reward's spread instead of PASS
        self.gold = gold  # a row's gold completion text: an all-fail group keeps it, and is kept

    def __call__(self, batch: Mapping[str, Sequence[Any]]) -> list[bool]:
        rows = [dict(zip(batch, values)) for values in zip(*batch.values())]
        if self.exhausted:
            return [True] * len(rows)
        sampled = self.group(rows, self.samples)
        passes = self.passes(rows, sampled.texts)
        if self.rewards is None:
            keep = [0 < p < self.samples for p in passes]
        else:
            keep = self.varies(rows, sampled.texts)
        guided = [self.gold is not None and p == 0 for p in passes]
        if any(guided):
            self.put_gold(rows, sampled, guided)
            keep = [k or g for k, g in zip(keep, guided)]
        self.record(rows, passes, keep if self.rewards is not None else None, guided)
        if self.reuse:
            for i, (row, kept) in enumerate(zip(rows, keep)):
                if kept:
                    group = sampled.completion_ids[i * self.samples : (i + 1) * self.samples]
                    self.held.put(prompt_key(row["prompt"], row["images"]), sampled.prompt_ids[i], group)
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
        self.log({"exhausted": message})

    def step(self) -> int | None:
        return getattr(getattr(self.trainer, "state", None), "global_step", None)

    def log(self, entry: dict[str, Any]) -> None:
        """One line of frontier.jsonl: the step, then ``entry``; on several
        processes, each filtering its own shards of the stream, also the rank."""
        args = getattr(self.trainer, "args", None)
        rank = {}
        if args is not None and args.world_size > 1:
            rank["rank"] = args.process_index
        with open(self.log_path, "a", encoding="utf-8") as handle:  # one short write a line
            handle.write(json.dumps({"step": self.step(), **rank, **entry}) + "\n")

    def passes(self, rows: Sequence[Mapping[str, Any]], texts: Sequence[str]) -> list[int]:
        """Each row's number of passing samples among ``texts`` (``samples`` a row)."""
        from rosetrain.train.rewards import GOLD_COLUMNS

        counts = []
        for i, row in enumerate(rows):
            gold = {c: row[c] for c in GOLD_COLUMNS if c in row}
            answers = texts[i * self.samples : (i + 1) * self.samples]
            counts.append(sum(self.solved(gold, text) for text in answers))
        return counts

    def varies(self, rows: Sequence[Mapping[str, Any]], texts: Sequence[str]) -> list[bool]:
        """Whether each row's samples earn different weighted total rewards, each
        reward function called as TRL calls it (the row's columns once a sample)."""
        if self.rewards is None:
            raise RosetrainError("grpo.frontier: varies() needs the reward functions (frontier_by: reward)")
        funcs, weights = self.rewards
        columns = {c: [row[c] for row in rows for _ in range(self.samples)] for c in rows[0]}
        totals = [0.0] * len(texts)
        for func, weight in zip(funcs, weights):
            if weight:
                for i, value in enumerate(func(completions=list(texts), **columns)):
                    totals[i] += weight * value
        groups = [totals[i * self.samples : (i + 1) * self.samples] for i in range(len(rows))]
        # a float tolerance: SOFT's means of fractions differ in the last bits
        return [max(g) - min(g) > 1e-6 for g in groups]

    def put_gold(self, rows: Sequence[Mapping[str, Any]], sampled: Sampled, guided: Sequence[bool]) -> None:
        """In place: the first member of each ``guided`` row's group becomes the
        row's gold completion, tokenized as the SFT tokenized its target and
        ended by the token the policy ends a turn with."""
        if self.gold is None:
            raise RosetrainError("grpo.frontier: put_gold() needs the gold completions (frontier_gold)")
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        end = self.turn_end()
        for i, (row, wanted) in enumerate(zip(rows, guided)):
            if wanted:
                text = self.gold(row)
                first = i * self.samples
                sampled.completion_ids[first] = tokenizer(text, add_special_tokens=False)["input_ids"] + [end]
                sampled.texts[first] = text

    def turn_end(self) -> int:
        """The end token a gold completion gets: the tokenizer's end of turn
        when it is one of the tokens that end a completion, else the first of those."""
        ends = self.end_ids(self.trainer.model)
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos in ends:
            return eos
        if not ends:
            raise RosetrainError("grpo.frontier_gold: the model names no end-of-sequence token")
        return ends[0]

    def solved(self, gold: Mapping[str, Any], text: str) -> bool:
        """The scorer's PASS; with ``thinking``, also the item's own <think> block."""
        if not self.cache.score(gold, text)["pass"]:
            return False
        if self.thinking is None:
            return True
        from rosetrain.train.rewards import thinks_right

        return thinks_right(self.thinking, gold, text)

    def sample(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        """``samples`` completions per row, row after row, from the live policy."""
        return self.generate(rows, self.samples).texts

    def group(self, rows: Sequence[Mapping[str, Any]], size: int) -> Sampled:
        """Each row's group of ``size`` completions from the live policy: all
        sampled, or with ``greedy`` all but the last, which is the greedy answer."""
        if not self.greedy or size < 2:  # a lone completion is sampled, as TRL would
            return self.generate(rows, size)
        sampled, answers = self.generate(rows, size - 1), self.generate(rows, 1, greedy=True)
        merged = Sampled(sampled.prompt_ids, [], [])
        for i in range(len(rows)):
            own = slice(i * (size - 1), (i + 1) * (size - 1))
            merged.completion_ids += [*sampled.completion_ids[own], answers.completion_ids[i]]
            merged.texts += [*sampled.texts[own], answers.texts[i]]
        return merged

    def generate(self, rows: Sequence[Mapping[str, Any]], samples: int, greedy: bool = False) -> Sampled:
        """``samples`` completions per row from the live policy (``sampling``), or
        with ``greedy`` its one greedy completion of each row."""
        import torch

        from rosetrain.train.prefill import sample

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
            with torch.inference_mode():  # each prompt's prefill once for its samples
                output = sample(model, inputs, samples, self.greedy_decoding() if greedy else self.sampling())
        finally:
            model.train(was_training)
        completions = output[:, inputs["input_ids"].shape[1] :]
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        prompts = [
            ids[mask.bool()].tolist() for ids, mask in zip(inputs["input_ids"], inputs["attention_mask"])
        ]
        ends = set(self.end_ids(model))
        return Sampled(
            prompt_ids=prompts,
            completion_ids=[_up_to_end(ids, ends) for ids in completions.tolist()],
            texts=tokenizer.batch_decode(completions, skip_special_tokens=True),
        )

    def sampling(self) -> dict[str, Any]:
        """How the filter samples (``prefill.sample`` adds how many a prompt).
        Reused samples are TRL's rollouts, so they are drawn with TRL's own
        generation config, which among other things never samples an image
        token (one in a completion breaks the training forward: "image features
        and image tokens do not match"); the count goes into a copy of it, as
        transformers deprecates generation arguments given beside a config.
        Samples that only decide keep the recipe's temperature, top_p and
        length, as the demo's recorded GRPO runs drew them."""
        trl_config = getattr(self.trainer, "generation_config", None)
        if self.reuse and trl_config is not None:
            return {"generation_config": trl_config}
        return {
            "do_sample": True,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": 0,
            "max_new_tokens": self.max_new_tokens,
        }

    def greedy_decoding(self) -> dict[str, Any]:
        """``sampling``'s settings, greedy: the answer ``rosetrain eval`` would read."""
        sampling = self.sampling()
        config = sampling.get("generation_config")
        if config is None:
            return {"do_sample": False, "max_new_tokens": self.max_new_tokens}
        config = copy.deepcopy(config)
        config.do_sample = False
        # sampling's own settings, unset: transformers warns of them beside greedy decoding
        config.temperature = config.top_p = config.top_k = None
        return {"generation_config": config}

    def end_ids(self, model: Any) -> list[int]:
        """The tokens that end a completion: TRL's list, else the model's."""
        ends = getattr(self.trainer, "eos_token_ids", None)
        if ends is None:
            ends = model.generation_config.eos_token_id
        return [ends] if isinstance(ends, int) else list(ends or [])

    def rollout(self, prompts: list[list[dict[str, Any]]], trainer: Any) -> dict[str, Any]:
        """TRL's ``rollout_func``: ``prompts`` holds each prompt ``num_generations``
        times in a row; each run of copies gets the group the filter kept the
        prompt with, or a group sampled now when it holds none."""
        prompt_ids: list[list[int]] = []
        completion_ids: list[list[int]] = []
        reused = resampled = 0
        for messages, key, copies in _runs(prompts, getattr(trainer, "num_generations", self.samples)):
            held = self.held.take(key, copies)
            if held is None:
                sampled = self.group([{"prompt": messages, "images": message_images(messages)}], copies)
                held = (sampled.prompt_ids[0], sampled.completion_ids)
                resampled += 1
            else:
                reused += 1
            prompt_ids += [held[0]] * copies
            completion_ids += held[1]
        self.log({"groups": {"reused": reused, "resampled": resampled}})
        out = {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}
        if self.loss_from is not None:  # TRL multiplies its loss mask by this one
            tokenizer = getattr(self.processor, "tokenizer", self.processor)
            out["env_mask"] = [loss_mask(ids, self.loss_from, tokenizer.decode) for ids in completion_ids]
        return out

    def record(
        self,
        rows: Sequence[Mapping[str, Any]],
        passes: Sequence[int],
        kept: Sequence[bool] | None = None,
        guided: Sequence[bool] = (),
    ) -> None:
        """Per template, the prompts seen and their PASS outcome; given ``kept``
        (the filter keeps by reward), also how many it kept; given ``guided``,
        how many it kept with their gold completion."""
        counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for i, (row, p) in enumerate(zip(rows, passes)):
            template = SHORT_NAME.get(row["task_template"], row["task_template"])
            outcome = "all_fail" if p == 0 else "all_pass" if p == self.samples else "live"
            counts[template].update({"seen": 1, outcome: 1})
            if kept and kept[i]:
                counts[template]["kept"] += 1
            if guided and guided[i]:
                counts[template]["gold"] += 1
        self.log({"templates": {t: dict(sorted(c.items())) for t, c in sorted(counts.items())}})


def loss_mask(ids: list[int], marker: str, decode: Any) -> list[int]:
    """1 for the tokens of ``ids`` after the first ``marker`` in their text (the
    token that completes it is the last 0), else 1 for every token: a completion
    that never writes it still learns its format."""
    if marker not in decode(ids):
        return [1] * len(ids)
    low, high = 1, len(ids)  # the fewest tokens whose text holds the marker whole
    while low < high:
        middle = (low + high) // 2
        if marker in decode(ids[:middle]):
            high = middle
        else:
            low = middle + 1
    return [0] * low + [1] * (len(ids) - low)


def _up_to_end(ids: list[int], ends: set[int]) -> list[int]:
    """A completion's token ids up to its first end token (kept), as TRL cuts them."""
    for i, token in enumerate(ids):
        if token in ends:
            return ids[: i + 1]
    return ids


def _runs(
    prompts: Sequence[list[dict[str, Any]]], size: int
) -> Iterator[tuple[list[dict[str, Any]], tuple, int]]:
    """Each run of copies of one prompt (TRL copies each prompt ``num_generations``
    times, one after the other): the prompt, its key and the run's length, at
    most ``size`` (the same prompt drawn twice in a row is two groups)."""
    keys = [prompt_key(messages, message_images(messages)) for messages in prompts]
    i = 0
    while i < len(prompts):
        j = i + 1
        while j < len(prompts) and j - i < size and keys[j] == keys[i]:
            j += 1
        yield prompts[i], keys[i], j - i
        i = j


def frontier_summary(output_dir: str | Path) -> dict[str, Any]:
    """Totals of ``frontier.jsonl`` per template: seen, live, all-pass, all-fail, live share."""
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    path = Path(output_dir) / FRONTIER_LOG
    if path.exists():
        for line in path.read_text().splitlines():
            for template, counts in json.loads(line).get("templates", {}).items():
                totals[template].update(counts)
    return {t: {**c, "live_share": round(c["live"] / c["seen"], 4)} for t, c in sorted(totals.items())}
