"""The pre-RL signal check: before GPU hours go into GRPO, would its groups
carry any signal?

For every prompt of a split the model answers once greedily and ``k`` times
by sampling with the GRPO recipe's settings (temperature, top_p, completion
length; ``k`` its ``num_generations``), and the one scorer grades every
answer, as the rewards do (``rosetrain.train.rewards.ScoreCache``). Per
template:

- ``pass@1``: greedy PASS rate, what ``eval`` measures;
- ``pass@k``: share of prompts where at least one of the k samples passes;
- ``no_signal``: share of prompts whose k samples all pass or all fail; a
  GRPO group of them has zero advantage under the PASS reward and teaches
  nothing;
- ``rescue``: share of prompts where greedy fails but some sample passes,
  the answers RL can move probability towards.

Sampling reuses ``rosetrain.train.frontier.FrontierFilter.sample``, the code
that samples groups for frontier GRPO, so the check sees what training would.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rosetrain.core.errors import RosetrainError
from rosetrain.core.formats import pct
from rosetrain.core.protocol import SHORT_NAME, TEMPLATES

ALL = "all"
# Thresholds of the plain-words prediction (shares of prompts).
LITTLE_SIGNAL = 0.2  # below: most groups teach nothing
SOME_RESCUE = 0.05  # above: sampling finds passes greedy misses


class Sampler(Protocol):
    """A model that answers records greedily and by sampling."""

    def greedy(self, records: Sequence[Mapping[str, Any]]) -> list[str]: ...

    def sample(self, records: Sequence[Mapping[str, Any]], k: int) -> list[list[str]]: ...


@dataclasses.dataclass(frozen=True)
class Prompt:
    template: str
    greedy_pass: bool
    sample_passes: int
    k: int

    @property
    def no_signal(self) -> bool:
        return self.sample_passes in (0, self.k)

    @property
    def rescue(self) -> bool:
        return not self.greedy_pass and self.sample_passes > 0


def grade(
    records: Sequence[Mapping[str, Any]], greedy: Sequence[str], samples: Sequence[Sequence[str]], k: int
) -> list[Prompt]:
    """Each prompt's greedy result and sample pass count, by the rewards' scorer."""
    from rosetrain.train.rewards import ScoreCache

    if not len(records) == len(greedy) == len(samples):
        raise RosetrainError(
            f"signal check: {len(records)} prompts but {len(greedy)} greedy answers and {len(samples)} sample groups"
        )
    cache = ScoreCache()
    prompts = []
    for record, answer, group in zip(records, greedy, samples):
        if len(group) != k:
            raise RosetrainError(
                f"signal check: item {record.get('item_id')}: {len(group)} samples, expected {k}"
            )
        prompts.append(
            Prompt(
                template=str(record["task_template"]),
                greedy_pass=bool(cache.score(record, answer)["pass"]),
                sample_passes=sum(int(cache.score(record, text)["pass"]) for text in group),
                k=k,
            )
        )
    return prompts


def summarize(prompts: Sequence[Prompt], k: int) -> dict[str, Any]:
    """Per template (short names, in protocol order) and over all prompts."""
    groups: dict[str, list[Prompt]] = defaultdict(list)
    for prompt in prompts:
        groups[prompt.template].append(prompt)
    order = [t for t in TEMPLATES if t in groups] + sorted(t for t in groups if t not in TEMPLATES)

    def figures(rows: Sequence[Prompt]) -> dict[str, Any]:
        n = len(rows)
        return {
            "n": n,
            "pass@1": sum(p.greedy_pass for p in rows) / n,
            f"pass@{k}": sum(p.sample_passes > 0 for p in rows) / n,
            "sample_pass": sum(p.sample_passes for p in rows) / (n * k),
            "no_signal": sum(p.no_signal for p in rows) / n,
            "rescue": sum(p.rescue for p in rows) / n,
        }

    templates = {SHORT_NAME.get(t, t): figures(groups[t]) for t in order}
    return {
        "k": k,
        "templates": templates,
        ALL: figures(prompts),
        "prediction": prediction(templates, figures(prompts), k),
    }


def prediction(templates: Mapping[str, Mapping[str, Any]], total: Mapping[str, Any], k: int) -> str:
    """What the figures predict for GRPO, in plain words."""
    live = 1 - total["no_signal"]
    lines = [
        f"{pct(live)}% of prompts give GRPO a group with both passing and failing samples "
        f"(k = {k}); {pct(total['rescue'])}% are failed by greedy decoding but passed by some sample."
    ]
    if live < LITTLE_SIGNAL:
        lines.append(
            "Prediction: little to gain from GRPO on this split: most groups have zero advantage. "
            "Filter to frontier prompts (grpo.frontier: true), train on a curriculum first "
            "(rosetrain curriculum), or raise the temperature."
        )
    elif total["rescue"] < SOME_RESCUE:
        lines.append(
            "Prediction: GRPO has groups to learn from, but sampling rarely finds what greedy "
            "misses: expect it to sharpen answers the model already gives, not to lift greedy PASS much."
        )
    else:
        lines.append(
            "Prediction: GRPO has signal here: samples pass where greedy fails, so moving "
            f"probability towards them can lift greedy PASS, at most towards pass@{k} "
            f"({pct(total[f'pass@{k}'])}%). Signal is needed, not sufficient: where answers are "
            "few (a count of 0-2 on a small grid) samples also pass by chance."
        )
    gaining = [t for t, f in templates.items() if f["rescue"] >= SOME_RESCUE]
    dead = [t for t, f in templates.items() if f["no_signal"] > 1 - LITTLE_SIGNAL]
    if gaining:
        lines.append(f"Templates with the most room: {', '.join(gaining)}.")
    if dead:
        lines.append(f"Templates with (almost) no signal: {', '.join(dead)}.")
    return " ".join(lines)


def signal_check(
    records: Sequence[Mapping[str, Any]],
    sampler: Sampler,
    k: int,
    batch_size: int = 8,
    progress: bool = False,
) -> dict[str, Any]:
    if k < 2:
        raise RosetrainError(f"k: a GRPO group needs at least 2 samples, got {k}", argument="k")
    if batch_size < 1:
        raise RosetrainError(f"batch_size: expected at least 1, got {batch_size}", argument="batch_size")
    from tqdm.auto import tqdm

    prompts: list[Prompt] = []
    with tqdm(total=len(records), desc="signal check", unit="prompt", disable=not progress) as bar:
        for start in range(0, len(records), batch_size):
            batch = records[start : start + batch_size]
            prompts += grade(batch, sampler.greedy(batch), sampler.sample(batch, k), k)
            bar.update(len(batch))
    return summarize(prompts, k)


def signal_table(summary: Mapping[str, Any]) -> str:
    k = summary["k"]
    lines = [
        f"| template | prompts | pass@1 (greedy) | pass@{k} | sample PASS | no signal (all {k} agree) | rescue (greedy fails, a sample passes) |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [*summary["templates"].items(), (ALL, summary[ALL])]
    for name, f in rows:
        lines.append(
            f"| {name} | {f['n']} | {pct(f['pass@1'])} | {pct(f[f'pass@{k}'])} | {pct(f['sample_pass'])} | "
            f"{pct(f['no_signal'])} | {pct(f['rescue'])} |"
        )
    return "\n".join(lines)


class TransformersSampler:
    """A local model: greedy answers through the eval runner, samples through the
    frontier filter's sampling (the GRPO recipe's temperature, top_p and length)."""

    def __init__(self, model: str, *, temperature: float, top_p: float, max_new_tokens: int, output_dir: str):
        from types import SimpleNamespace

        from rosetrain.runners.transformers_runner import TransformersRunner
        from rosetrain.train.frontier import FrontierFilter

        self.runner = TransformersRunner(model, max_new_tokens=max_new_tokens)
        self.frontier = FrontierFilter(
            self.runner.processor,
            samples=1,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            output_dir=output_dir,
        )
        self.frontier.trainer = SimpleNamespace(model=self.runner.model)  # the policy it samples

    def greedy(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        answers = self.runner.generate(records)
        return [text or "" for text, _ in answers]

    def sample(self, records: Sequence[Mapping[str, Any]], k: int) -> list[list[str]]:
        from rosetrain.core.messages import record_messages
        from rosetrain.runners.base import load_rgb_image

        self.frontier.samples = k
        rows = [{"prompt": record_messages(r), "images": [load_rgb_image(r)]} for r in records]
        texts = self.frontier.sample(rows)
        return [texts[i * k : (i + 1) * k] for i in range(len(records))]
