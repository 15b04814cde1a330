"""Which checkpoint a run resumes from, and whether it may.

``resume: auto`` picks the newest complete ``checkpoint-N`` in output_dir,
``resume: <folder>`` names one, ``resume: never`` starts over. The recipe a run
trained with is recorded in output_dir (:data:`RECIPE_RECORD`), so a later run
with another recipe is refused instead of mixing two runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from rosetrain.core.io import read_yaml_mapping
from rosetrain.train.checkpoints import missing_training_state, refuse_foreign_checkpoints
from rosetrain.train.recipe import Recipe, RecipeError, recipe_to_dict

RECIPE_RECORD = "rosetrain_recipe.yaml"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# Keys a resumed run may change: how long and how it logs/saves, not what it trains.
RESUMABLE_CHANGES = {
    "max_steps",
    "logging_steps",
    "save_steps",
    "save_total_limit",
    "resume",
    "output_dir",
    "report_to",
    "cpu_threads",
    "eval",
}
# The same inside the ``trl:`` passthrough: a resumed run may add or drop --quiet.
RESUMABLE_TRL_CHANGES = {
    "disable_tqdm",
    "logging_steps",
    "logging_first_step",
    "logging_strategy",
    "log_level",
    "report_to",
    "run_name",
    "save_steps",
    "save_strategy",
    "save_total_limit",
}


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete ``checkpoint-N``: the trainer writes trainer_state.json
    last (not atomically), so a kill mid-save leaves a folder without a readable one."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    found = [
        (int(m.group(1)), p)
        for p in folder.iterdir()
        if (m := _CHECKPOINT.match(p.name)) and is_complete_checkpoint(p)
    ]
    return str(max(found)[1]) if found else None


def is_complete_checkpoint(folder: Path) -> bool:
    try:
        return isinstance(json.loads((folder / "trainer_state.json").read_text()), dict)
    except (OSError, ValueError):
        return False


def check_resumable(recipe: Recipe) -> str | None:
    """The checkpoint this run resumes from (None: it starts afresh), after refusing
    what cannot be resumed: a named checkpoint that is not complete; for ``resume:
    auto``, a checkpoint of another recipe (another model, learning rate, data...:
    resuming would mix two runs or fail deep inside the optimizer), naming the keys
    that differ, or one without its optimizer and schedule; and, whatever ``resume``
    says, a checkpoint in output_dir that rosetrain did not write."""
    output_dir = Path(recipe.output_dir)
    if recipe.resume != "auto":
        checkpoint = _named_checkpoint(recipe.resume)
        refuse_foreign_checkpoints(output_dir)  # the trainer would write into or delete them
        return checkpoint
    record = output_dir / RECIPE_RECORD
    checkpoint = last_checkpoint(output_dir)
    if checkpoint is None:
        refuse_foreign_checkpoints(output_dir)
        return None
    if not record.is_file():
        # Without the record nothing says what the checkpoint was trained with.
        raise RecipeError(
            f"output_dir {recipe.output_dir} holds {Path(checkpoint).name} but no {RECIPE_RECORD}, "
            f"so rosetrain cannot tell which recipe trained it; name it with resume: <checkpoint folder> "
            f"to continue from it anyway, set resume: never to start over, or use another output_dir"
        )
    recorded = read_yaml_mapping(
        record,
        "recipe record",
        RecipeError,
        "the recipe a run trained with, as rosetrain writes it; set resume: never to start over",
    )
    before = _what_trains(recorded)
    now = _without_new_keys_at_rest(before, _what_trains(recipe_to_dict(recipe)))
    _same_spec_moved(before, now)
    changed = sorted(k for k in now if before.get(k) != now[k])
    if changed:
        detail = "; ".join(f"{k}: {before.get(k)!r} -> {now[k]!r}" for k in changed[:4])
        raise RecipeError(
            f"output_dir {recipe.output_dir} holds {Path(checkpoint).name} of a run "
            f"with another recipe ({detail}); use another output_dir, set "
            f"resume: never to start over there, name the checkpoint (resume: {checkpoint}) "
            f"to go on from it anyway, or delete the folder"
        )
    refuse_foreign_checkpoints(output_dir)  # the trainer would resume from them, or delete them
    _refuse_missing_training_state(Path(checkpoint))  # named by hand, a checkpoint resumes without them
    return checkpoint


def _what_trains(recipe: dict) -> dict:
    """A recipe record without the keys a resumed run may change."""
    out = {k: v for k, v in recipe.items() if k not in RESUMABLE_CHANGES}
    if isinstance(out.get("trl"), dict):
        out["trl"] = {k: v for k, v in out["trl"].items() if k not in RESUMABLE_TRL_CHANGES}
    return out


def _without_new_keys_at_rest(before: dict, now: dict) -> dict:
    """``now`` less the keys ``before`` lacks whose value is off (None, 0, false):
    keys a later rosetrain added (``rewards.thinking``, ``grpo.thinking``) do
    not make a run recorded before them another recipe while they are unused."""
    out = {}
    for key, value in now.items():
        if key not in before:
            if value is None or value is False or value == 0:
                continue
        elif isinstance(value, dict) and isinstance(before[key], dict):
            value = _without_new_keys_at_rest(before[key], value)
        out[key] = value
    return out


def _same_spec_moved(before: dict, now: dict) -> None:
    """A data spec at another path with the same bytes (a checkout moved or
    copied: the record holds absolute paths) is the same data: ``before`` takes
    the new path, so only a changed spec is named."""
    old: dict = before["data"] if isinstance(before.get("data"), dict) else {}
    spec, moved = old.get("spec"), (now.get("data") or {}).get("spec")
    if not isinstance(spec, str) or not isinstance(moved, str) or spec == moved:
        return
    try:
        same = Path(spec).read_bytes() == Path(moved).read_bytes()
    except OSError:  # the old path is gone: nothing shows it was the same spec
        return
    if same:
        before["data"] = {**old, "spec": moved}


def _named_checkpoint(resume: str) -> str | None:
    """``resume: never`` (None), or the folder ``resume`` names, which must be complete."""
    if resume == "never":
        return None
    if not is_complete_checkpoint(Path(resume)):
        raise RecipeError(
            f"resume: {resume} is not a complete training checkpoint (no readable trainer_state.json)"
        )
    return resume


def _refuse_missing_training_state(checkpoint: Path) -> None:
    missing = missing_training_state(checkpoint)
    if missing:
        raise RecipeError(
            f"resume: auto: {checkpoint} has no {' or '.join(missing)}, so the run would go on with a "
            f"fresh optimizer and learning-rate schedule, not as the interrupted one would have; name "
            f"the checkpoint (resume: {checkpoint}) to continue from its weights anyway, or set "
            f"resume: never to start over"
        )


def record_recipe(recipe: Recipe) -> None:
    """output_dir's record of the recipe it trains with, which a resume is checked against."""
    from rosetrain.core.io import atomic_write

    out = Path(recipe.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / RECIPE_RECORD, yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False))
