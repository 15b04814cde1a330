"""A trained model's card: ``README.md`` in the folders ``rosetrain train`` saves.

TRL's own card says "fine-tuned version of [None]" (it is never told the base
model) and peft's names only a path. rosetrain knows what the model is: its
base (the recipe's ``model``), its data (a spec stream, or a generated folder
and the spec, sha256, seed and scenes its manifest records), the method (SFT or
GRPO, LoRA or full), the rosetrain and TRL versions, and the recipe itself, so
the card (``huggingface_hub.ModelCard``) says all of that, with the command.
It is written to ``checkpoint-final/``, ``merged/`` (when saved) and the
output folder, replacing the cards peft and TRL wrote there; a README.md of
the user's own in the output folder stops the run before training.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rosetrain import __version__
from rosetrain.core.io import atomic_write
from rosetrain.data.hub import dataset_repo
from rosetrain.train.recipe import Recipe, recipe_to_dict
from rosetrain.train.resume import RECIPE_RECORD

CARD_NAME = "README.md"


def _shown(path: str) -> str:
    """A path as the recipe gave it, or its name when absolute (a card holds no path of this machine)."""
    return Path(path).name if os.path.isabs(path) else path


def _is_local(model: str) -> bool:
    return Path(model).expanduser().exists()


def data_description(recipe: Recipe) -> tuple[str, str, str]:
    """(one line for the card's table, the data's name for its tags, its identity
    for the header's ``datasets`` where no Hub repo holds it: the spec's file,
    sha256 and seed, and for a folder its scenes and split)."""
    data = recipe.data
    if data.spec is not None:
        spec = Path(data.spec)
        digest = hashlib.sha256(spec.read_bytes()).hexdigest()[:12] if spec.is_file() else "unknown"
        return (
            f"stream of spec `{_shown(data.spec)}` (sha256 `{digest}`), seed {data.seed}",
            spec.stem,
            f"{spec.name}@sha256:{digest} (seed {data.seed})",
        )
    from rosetrain.data.manifest import manifest_path

    line = f"folder `{_shown(str(data.folder))}`, split `{data.split}`"
    name = Path(str(data.folder)).name
    try:
        manifest = json.loads(manifest_path(Path(str(data.folder)), data.split).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return line + " (no rosetrain manifest)", name, f"{name} (split {data.split})"
    spec = Path(str(manifest.get("spec")))
    digest = str(manifest.get("spec_sha256"))[:12]
    line += f": spec `{spec.name}` (sha256 `{digest}`), seed {manifest.get('seed')}, {manifest.get('scenes')} scenes"
    identity = (
        f"{spec.name}@sha256:{digest} (seed {manifest.get('seed')}, {manifest.get('scenes')} scenes, "
        f"split {data.split})"
    )
    return line + (f", max {data.max_rows} rows" if data.max_rows else ""), spec.stem, identity


MAX_LINEAGE = 16


def lineage(model: str) -> list[str]:
    """The models this one was trained from, nearest first: a local base that a
    rosetrain run saved (``RUN/checkpoint-final``, or the run folder) names its own
    base in the run's ``rosetrain_recipe.yaml``, back to a Hub id or an unrecorded folder."""
    chain, seen = [model], {model}
    while len(chain) < MAX_LINEAGE and _is_local(chain[-1]):
        folder = Path(chain[-1]).expanduser()
        record = next(
            (p for p in (folder / RECIPE_RECORD, folder.parent / RECIPE_RECORD) if p.is_file()), None
        )
        try:
            base = yaml.safe_load(record.read_text(encoding="utf-8")).get("model") if record else None
        except (OSError, yaml.YAMLError, AttributeError):
            base = None
        if not isinstance(base, str) or base in seen:
            break
        chain.append(base)
        seen.add(base)
    return chain


def heldout_results(output_dir: str | Path) -> dict[str, float] | None:
    """The last held-out evaluation the run logged (``heldout_eval.jsonl``), if any."""
    path = Path(output_dir) / "heldout_eval.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        last = json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None
    return last if isinstance(last, dict) else None


def _eval_results(recipe: Recipe, results: Mapping[str, Any] | None) -> list[Any] | None:
    """The held-out figures in the Hub's model-index form (PASS as a fraction x 100)."""
    if not results or not recipe.eval.folder:
        return None
    from huggingface_hub import EvalResult

    names = {
        "eval_avg_pass": "Avg. PASS",
        "eval_counting_avg": "Counting",
        "eval_action_avg": "Action",
        "eval_gap": "Gap (Counting - Action)",
    }
    dataset = _shown(str(recipe.eval.folder))
    return [
        EvalResult(
            task_type="image-text-to-text",
            dataset_type=dataset,
            dataset_name=f"{dataset} (held-out, {len(results.get('item_ids') or [])} items)",
            metric_type=key.removeprefix("eval_"),
            metric_name=name,
            metric_value=round(100 * float(results[key]), 2),
        )
        for key, name in names.items()
        if isinstance(results.get(key), (int, float))
    ] or None


def method_description(recipe: Recipe) -> str:
    method = recipe.method.upper()
    if recipe.lora is None:
        return f"{method}, full fine-tuning"
    lora = recipe.lora
    vision = " + vision tower" if lora.vision else ""
    return f"{method}, LoRA r={lora.r} alpha={lora.alpha} on {lora.target}{vision}"


def model_card_text(recipe: Recipe, summary: Mapping[str, Any], adapter: bool) -> str:
    from huggingface_hub import ModelCard, ModelCardData
    from trl import __version__ as trl_version

    data_line, data_name, data_identity = data_description(recipe)
    tags = ["rosetrain", "trl", recipe.method, "rose"] + (["lora"] if recipe.lora is not None else [])
    chain = lineage(recipe.model)
    hub_base = next((m for m in chain if not _is_local(m)), None)  # the Hub takes only a repo id
    # the Hub repo that holds the data (hf://, the Hub cache, or a folder pushed as it is), else the spec's identity
    hub_data = dataset_repo(recipe.data.folder, recipe.data.split)
    results = _eval_results(recipe, heldout_results(recipe.output_dir))
    card_data = ModelCardData(
        base_model=hub_base,
        datasets=[hub_data or data_identity],
        library_name="peft" if adapter else "transformers",
        pipeline_tag="image-text-to-text",
        tags=tags,
        model_name=Path(recipe.output_dir).name if results else None,
        eval_results=results,
    )
    loss = summary.get("train_loss")
    rows = [
        (
            "base model",
            f"`{_shown(recipe.model)}`" + (" (a local folder)" if _is_local(recipe.model) else ""),
        ),
        (
            "lineage",
            " <- ".join(f"`{_shown(m)}`" for m in chain) if len(chain) > 1 else "trained from the base",
        ),
        ("method", method_description(recipe)),
        ("saved as", "a LoRA adapter" if adapter else "a full model"),
        ("data", data_line),
        ("held-out evaluation", f"`{_shown(recipe.eval.folder)}`" if recipe.eval.folder else "none"),
        ("steps", str(summary.get("global_step"))),
        ("mean training loss", f"{loss:.4f}" if isinstance(loss, float) else "n/a"),
        ("rosetrain", __version__),
        ("TRL", trl_version),
    ]
    source = _shown(str(recipe.source)) if getattr(recipe, "source", None) else "recipe.yaml"
    recipe_yaml = _from_here(yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False).rstrip("\n"))
    body = [
        f"# {recipe.method.upper()} of {_shown(recipe.model)} on {data_name}",
        "",
        f"Trained with [TRL](https://github.com/huggingface/trl) through rosetrain {__version__} "
        f"(`rosetrain train {recipe.method}`), on ROSE-style grid tasks: counting and clicking the "
        "cells of a grid that differ from the rest.",
        "",
        "| | |",
        "|---|---|",
        *[f"| {key} | {value} |" for key, value in rows],
        "",
        "## Command",
        "",
        "```bash",
        _from_here(
            shlex.join(["rosetrain", "train", recipe.method, "--recipe", source, *_sets(recipe.overrides)])
        ),
        "```",
        "",
        *_resumed_note(recipe),
        "The recipe as it ran (`--set` overrides applied; also `rosetrain_recipe.yaml` in the "
        "output folder):",
        "",
        "```yaml",
        recipe_yaml,
        "```",
        "",
    ]
    return str(ModelCard(f"---\n{card_data.to_yaml()}\n---\n\n" + "\n".join(body)))


def _from_here(text: str) -> str:
    """``text`` with the paths under the working directory written relative to it
    (a script that passes absolute paths, as ``benchmarks/transfer_curves.py``
    does): the command still runs from where the run's own output_dir is, and the
    card names no folder of this machine."""
    here = os.path.join(os.getcwd(), "")
    if here == os.sep:
        return text
    # only where a path starts (not inside another one: /data/work/... stays whole)
    return re.sub(r"(?<![^\s='\"])" + re.escape(here), "", text)


def _sets(overrides: tuple[str, ...]) -> list[str]:
    """The overrides as ``--set`` flags, less ``resume=CHECKPOINT``: a checkpoint is
    where this run went on from, not what it trains, and elsewhere it is not there."""
    return [part for item in overrides if not _is_resume(item) for part in ("--set", item)]


def _is_resume(override: str) -> bool:
    return override.partition("=")[0].strip() == "resume"


def _resumed_note(recipe: Recipe) -> list[str]:
    if recipe.resume in ("auto", "never") or not any(map(_is_resume, recipe.overrides)):
        return []
    return [
        f"This run went on from `{_shown(recipe.resume)}` (`--set resume=...`, left out above): the "
        "trainer resumes exactly, so the command above trains the same weights in one go.",
        "",
    ]


def claim_card(recipe: Recipe) -> None:
    """Before training: claim ``output_dir/README.md`` for rosetrain (TRL writes its
    card there at every save, and rosetrain's replaces it at the end). A README.md
    rosetrain did not write is refused now, before any step, and left as it is."""
    from rosetrain.core.io import claim_outputs

    claim_outputs(Path(recipe.output_dir) / CARD_NAME)


def write_model_cards(recipe: Recipe, summary: Mapping[str, Any]) -> list[Path]:
    """The card in every folder the run saved a model in (replacing peft's), and in
    the output folder (replacing TRL's, claimed by :func:`claim_card`)."""
    from rosetrain.models.loading import ADAPTER_CONFIG

    written = []
    for key in ("final", "merged"):
        folder = Path(str(summary[key])) if summary.get(key) else None
        if folder is not None and folder.is_dir():
            adapter = (folder / ADAPTER_CONFIG).is_file()
            written.append(atomic_write(folder / CARD_NAME, model_card_text(recipe, summary, adapter)))
    if written:  # the output folder's card describes its final model
        adapter = (Path(str(summary["final"])) / ADAPTER_CONFIG).is_file()
        written.append(
            atomic_write(Path(recipe.output_dir) / CARD_NAME, model_card_text(recipe, summary, adapter))
        )
    return written
