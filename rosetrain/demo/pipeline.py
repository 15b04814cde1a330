"""The end-to-end demo: a base model with a perception-to-action gap, then
SFT and GRPO on the rosetrain curriculum, each stage evaluated on the same
held-out items, and the gap measured before and after.

Every stage records the settings it runs with (``OUT/stages/<name>.settings.json``,
written before it starts) and its result when it has finished
(``OUT/stages/<name>.json``). A rerun with the same settings skips finished
stages, and an interrupted stage resumes (training from its last checkpoint,
evaluation from its predictions file); a rerun with other settings (another
seed, other steps, another base) is refused, so old results are never
relabelled. The stages call the same functions as the CLI: ``generate``,
``train``, ``eval``, ``signal``, ``compare``. Specs and recipes are package data
(``rosetrain/assets/demo/``): the demo runs from any directory and writes only
under ``--out``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rosetrain.core import protocol as P
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import (
    MARKER_NAME,
    atomic_path,
    atomic_write,
    check_replaceable_folder,
    claim_outputs,
    mark_folder,
    output_lock,
    remove_atomic_temps,
)

ASSETS = Path(__file__).resolve().parent.parent / "assets"
ASSET_BASE = ASSETS / "demo-base"
ASSET_BASE_PALETTES = ASSETS / "demo-base-palettes"
GENERATORS = ASSETS / "demo" / "generators"  # also reachable as generators/demo in a checkout
RECIPES = ASSETS / "demo" / "recipes"  # also reachable as recipes/demo-*.yaml

# What the demo must show, checked and stated in the report.
TARGETS = {
    "base_gap_min": 0.30,  # the base counts but cannot act
    "action_gain_min": 0.30,  # final action_avg - base action_avg
    "gap_ratio_max": 0.5,  # final gap <= half the base gap
    "counting_drop_max": 0.05,  # counting may not fall by more than this
    "action_over_majority_min": 0.20,  # final action_avg - always-the-most-common-answer's
}
# Transfer: the same bars on a split whose palettes (or family) the action data never
# shows; the final model's counting there is compared with the base's.
TRANSFER_TARGETS = {
    "action_over_majority_min": 0.20,
    "gap_ratio_max": 0.5,
    "counting_drop_max": 0.05,
}
# Every stage is evaluated on these held-out splits: (name, spec, DemoConfig field of its scenes).
SPLITS = (
    ("heldout", "heldout.yaml", "heldout_scenes"),  # in distribution
    ("heldout-palette", "heldout-palette.yaml", "palette_scenes"),  # a hue band no action data shows
    ("heldout-family", "heldout-family.yaml", "family_scenes"),  # a family no action data shows
)
TRANSFER_SPLITS = ("heldout-palette", "heldout-family")
REPRO_TOLERANCE = 0.02  # two runs with the same seed agree within this (PASS rates)
SIGNAL_BATCH = 8  # prompts per generate call of the signal check (it draws the sampling RNG per batch)


@dataclasses.dataclass(frozen=True)
class Design:
    """What the demo trains: its base, SFT recipe and the SFT and GRPO specs."""

    base: Path
    sft_recipe: Path
    sft_spec: str  # in GENERATORS
    rl_spec: str
    what: str


DESIGNS = {
    # the proven demo: one palette, fixed roles; closes the gap in distribution only
    "palette": Design(
        ASSET_BASE,
        RECIPES / "demo-sft.yaml",
        "train.yaml",
        "rl.yaml",
        "SFT on the rosetrain curriculum (a cell-addressing warm-up, then counting + "
        "action, zero-target, negatives)",
    ),
    # built to transfer: a base that counts every palette, action data on every palette
    # outside the held-out band with the roles swapped (docs/experiments.md, issue 30)
    "transfer": Design(
        ASSET_BASE_PALETTES,
        RECIPES / "demo-sft-transfer.yaml",
        "transfer.yaml",
        "rl-transfer.yaml",
        "SFT built to transfer (a cell-addressing warm-up, then counting + action on varied "
        "palettes with swapped roles, counting on every palette)",
    ),
}


@dataclasses.dataclass
class DemoConfig:
    out: Path
    design: str = "transfer"  # a DESIGNS key: sets base and sft_recipe where they are not given
    base: Path = None  # type: ignore[assignment]  # None: the design's base
    seed: int = 0
    heldout_scenes: int = 80  # in-distribution held-out scenes (x 5 tasks)
    palette_scenes: int = 100  # scenes of the held-out palette band
    family_scenes: int = 30  # scenes of the held-out visual family
    sft_recipe: Path = None  # type: ignore[assignment]  # None: the design's recipe
    grpo_recipe: Path = RECIPES / "demo-grpo.yaml"
    sft_steps: int | None = None  # None: the recipe's
    grpo_steps: int | None = None  # None: the recipe's; 0 skips GRPO
    # GRPO prompts the pre-RL signal check samples (k = the GRPO recipe's num_generations):
    # 128 took 11-20 s on the demo's SFT model (two loaded cores); 64 took 7 s, but its
    # no-signal share read 51.6% against 39.8% for 128
    signal_prompts: int = 128
    eval_batch_size: int = 32
    # the transfer design thinks before it answers: the longest completion its specs allow is
    # 84 tokens (<think> and the answer; tests/test_demo.py); the palette design's end by ~25
    max_new_tokens: int = 96
    # CPU cores: SFT trains on this many processes with the batch split (rosetrain.train.launch);
    # GRPO (a few minutes) and evaluation run in this process on one thread, which measured
    # faster than two for the tiny model. 2 on any machine, so that a seed gives the same
    # numbers everywhere (the split batch changes them: recorded per stage)
    cores: int = 2
    progress: bool = True

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise RosetrainError(
                f"design: expected one of {', '.join(DESIGNS)}, got {self.design!r}", argument="design"
            )
        self.base = DESIGNS[self.design].base if self.base is None else self.base
        if self.sft_recipe is None:
            self.sft_recipe = DESIGNS[self.design].sft_recipe
        for name in ("out", "base", "sft_recipe", "grpo_recipe"):
            setattr(self, name, Path(getattr(self, name)))
        self.out = self.out.absolute()  # stage results name their folders: valid from any directory
        for name in ("heldout_scenes", "palette_scenes", "family_scenes"):
            if getattr(self, name) < 1:
                raise RosetrainError(
                    f"{name}: expected at least 1 scene, got {getattr(self, name)}", argument=name
                )
        if self.cores < 1:
            raise RosetrainError(f"cores: expected at least 1, got {self.cores}", argument="cores")
        if self.signal_prompts < 1:
            raise RosetrainError(
                f"signal_prompts: expected at least 1 prompt, got {self.signal_prompts}",
                argument="signal_prompts",
            )
        for name, least in (("sft_steps", 1), ("grpo_steps", 0)):  # 0 GRPO steps skips GRPO
            if getattr(self, name) is not None and getattr(self, name) < least:
                raise RosetrainError(f"{name}: expected >= {least}, got {getattr(self, name)}", argument=name)

    @property
    def plan(self) -> Design:
        return DESIGNS[self.design]

    @property
    def stages_dir(self) -> Path:
        return self.out / "stages"


def log(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


class Stages:
    """Stage markers: the settings a stage runs with (written before it starts)
    and its result (written once it is complete)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def run(
        self, name: str, what: str, settings: dict[str, Any], work: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        marker = self.folder / f"{name}.json"
        self.check_settings(name, settings)
        if marker.exists():
            result = json.loads(marker.read_text())
            log(f"{name}: done in an earlier run ({result['seconds']:.0f} s), skipped")
            return result
        atomic_write(self.folder / f"{name}.settings.json", json.dumps(settings, indent=2, sort_keys=True))
        log(f"{name}: {what}")
        start = time.perf_counter()
        result = {"result": work(), "seconds": round(time.perf_counter() - start, 1), "settings": settings}
        atomic_write(marker, json.dumps(result, indent=2))
        log(f"{name}: finished in {result['seconds']:.0f} s")
        return result

    def check_settings(self, name: str, settings: dict[str, Any]) -> None:
        """Work made with other settings is never reused nor resumed: refused."""
        recorded_file = self.folder / f"{name}.settings.json"
        if not recorded_file.exists():
            if (self.folder / f"{name}.json").exists():
                raise RosetrainError(
                    f"{self.folder.parent}: stage {name} has no recorded settings "
                    f"(an older demo run); use a new output folder",
                    argument="out",
                )
            return
        recorded = json.loads(recorded_file.read_text())
        changed = sorted(k for k in set(recorded) | set(settings) if recorded.get(k) != settings.get(k))
        if changed:
            key = changed[0]
            raise RosetrainError(
                f"{self.folder.parent}: stage {name} was run with {key}={recorded.get(key)!r}, "
                f"this run asks for {key}={settings.get(key)!r}; its results are not relabelled: "
                f"use another output folder (or delete this one)",
                argument="out",
            )


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def yaml_digest(path: Path) -> str:
    """What a spec or recipe says, not how: comments and layout do not count."""
    import yaml

    content = json.dumps(yaml.safe_load(Path(path).read_text(encoding="utf-8")), sort_keys=True)
    return hashlib.sha256(content.encode()).hexdigest()[:16]


def model_digest(model: Path) -> str:
    """What a model folder holds (its weights and config), not where it is."""
    files = sorted(p for p in Path(model).iterdir() if p.suffix in (".safetensors", ".json") and p.is_file())
    return hashlib.sha256("".join(f"{p.name}:{file_digest(p)}" for p in files).encode()).hexdigest()[:16]


def stage_settings(config: DemoConfig) -> dict[str, dict[str, Any]]:
    """Each stage's settings, including those of the stages it builds on."""
    data = {
        **{field: getattr(config, field) for _, _, field in SPLITS},
        "specs": {p.name: yaml_digest(p) for p in sorted(GENERATORS.glob("*.yaml"))},
    }
    # cores change the stages' times and, through the split batch and torch's sums, their
    # numbers: a rerun with others is refused (check_settings), never reported under them
    evaluation = {"max_new_tokens": config.max_new_tokens, "cores": config.cores}
    base = {**data, **evaluation, "base": model_digest(config.base)}
    sft = {
        **base,
        "design": config.design,
        "seed": config.seed,
        "sft_recipe": yaml_digest(config.sft_recipe),
        "sft_steps": config.sft_steps,
    }
    grpo = {**sft, "grpo_recipe": yaml_digest(config.grpo_recipe), "grpo_steps": config.grpo_steps}
    # the check samples with the GRPO recipe's settings, on the SFT model GRPO starts from
    signal = {**sft, "grpo_recipe": grpo["grpo_recipe"], "signal_prompts": config.signal_prompts}
    return {
        "data": data,
        "eval-base": base,
        "sft": sft,
        "eval-sft": sft,
        "signal": signal,
        "grpo": grpo,
        "eval-grpo": grpo,
        "compare": grpo,
    }


def make_data(config: DemoConfig) -> dict[str, Any]:
    from rosetrain.data.generate import make_job, run_job
    from rosetrain.generators.spec import load_spec

    out = {}
    for name, spec_file, field in SPLITS:
        job = make_job(
            load_spec(GENERATORS / spec_file),
            config.out / "data" / name,
            "test",
            getattr(config, field),
            formats=("release",),
        )
        out[name] = run_job(job, progress=config.progress)
    return out


RUN_PATH_KEYS = ("model", "display_name", "metadata_jsonl", "predictions_jsonl")


def evaluate_model(config: DemoConfig, model: Path, stage: str) -> dict[str, Any]:
    from rosetrain.evaluation.evaluate import evaluate

    summaries = {}
    for split, _, _ in SPLITS:
        summary = evaluate(
            str(model),
            config.out / "data" / split,
            "test",
            config.out / "eval" / f"{stage}-{split}",
            batch_size=config.eval_batch_size,
            max_new_tokens=config.max_new_tokens,
            progress=config.progress,
        )
        # the official keys name the run's paths; a stage's result is its figures
        summaries[split] = {k: v for k, v in summary.items() if k not in RUN_PATH_KEYS}
        log(f"{stage} on {split}: {figures_line(summaries[split])}")
    return summaries


def figures_line(summary: dict[str, Any]) -> str:
    return (
        f"counting {summary['counting_avg']:.3f}, action {summary['action_avg']:.3f}, "
        f"gap {summary['gap']:.3f}, avg PASS {summary['avg_pass']:.3f}"
    )


def train_stage(
    config: DemoConfig,
    recipe_path: Path,
    model: Path,
    output: Path,
    steps: int | None,
    seed_offset: int,
    spec: str,
) -> dict[str, Any]:
    overrides = [
        f"model={model}",
        f"output_dir={output}",
        f"seed={config.seed + seed_offset}",
        f"data.spec={GENERATORS / spec}",
        f"data.seed={config.seed + seed_offset}",
    ]
    if steps is not None:
        overrides.append(f"max_steps={steps}")
    if not config.progress:  # --quiet: the trainer logs lines instead of its bar
        overrides.append("trl.disable_tqdm=true")
    return train_recipe(recipe_path, overrides, config.cores)


def train_recipe(recipe_path: Path, overrides: list[str], cores: int) -> dict[str, Any]:
    """SFT on ``cores`` processes of one thread each, the recipe's batch split
    among them (``launch.core_overrides``); GRPO, and SFT on one core, in this
    process as the recipe says. Returns the run summary."""
    from rosetrain.train import train
    from rosetrain.train.launch import core_overrides, train_on_cores
    from rosetrain.train.recipe import load_recipe

    recipe = load_recipe(recipe_path, overrides)
    if recipe.method == "sft" and cores > 1:
        split = core_overrides(recipe.train_batch_size, cores)
        return train_on_cores("sft", recipe_path, [*overrides, *split], cores, Path(recipe.output_dir))
    return train(recipe)


def signal_stage(config: DemoConfig, model: Path) -> dict[str, Any]:
    """The pre-RL signal check on the model GRPO starts from: the first
    ``signal_prompts`` prompts of the GRPO stage's own stream (rl.yaml with the
    stage's data seed, before its shuffle), sampled with the GRPO recipe's
    settings. Written to ``OUT/signal/`` as ``rosetrain signal --out`` writes."""
    import math

    import torch

    from rosetrain.curriculum.signal import TransformersSampler, signal_check, signal_table
    from rosetrain.data.generate import make_job, run_job
    from rosetrain.data.release import select_records, with_image_paths
    from rosetrain.demo.report import signal_line
    from rosetrain.generators.spec import load_spec
    from rosetrain.train.recipe import load_recipe

    grpo = load_recipe(config.grpo_recipe, [f"model={model}"]).grpo
    spec = load_spec(GENERATORS / config.plan.rl_spec)
    seed = config.seed + 2  # the GRPO stage's data and training seed (train_stage's offset)
    sample = config.out / "data" / "grpo-sample"
    per_scene = min(lv.tasks_per_scene or sum(w > 0 for w in lv.tasks.values()) for lv in spec.levels)
    scenes = math.ceil(config.signal_prompts / per_scene)
    job = make_job(spec, sample, "train", scenes, seed=seed, formats=("release",))
    run_job(job, progress=config.progress)
    records, root = select_records(sample, "train", config.signal_prompts)
    torch.manual_seed(seed)
    folder = config.out / "signal"
    sampler = TransformersSampler(
        str(model),
        temperature=grpo.temperature,
        top_p=grpo.top_p,
        max_new_tokens=grpo.max_completion_length,
        output_dir=str(folder),
    )
    summary = signal_check(with_image_paths(records, root), sampler, grpo.num_generations, SIGNAL_BATCH)
    summary["settings"] = {
        "model": str(model),
        "data": str(sample),
        "split": "train",
        "prompts": len(records),
        "recipe": str(config.grpo_recipe),
        "spec": config.plan.rl_spec,
        "temperature": grpo.temperature,
        "top_p": grpo.top_p,
        "max_completion_length": grpo.max_completion_length,
        "seed": seed,
    }
    table = signal_table(summary)
    atomic_write(folder / "signal.json", json.dumps(summary, indent=2))
    atomic_write(folder / "signal.md", f"# Pre-RL signal check\n\n{table}\n\n{summary['prediction']}\n")
    log(f"signal check: {signal_line(summary)}")
    return summary


def check_base(base: Path) -> Path:
    """The base model's folder: ``base`` itself, or a training run folder's final
    model (as eval, signal and train take one)."""
    from rosetrain.models.loading import model_path

    if base.is_dir() and not (base / "config.json").exists():
        base = Path(model_path(base))  # a run folder's final model, or an error naming what it is
    if not (base / "config.json").exists():
        raise RosetrainError(
            f"demo base model not found at {base}; build it with rebuild_base (recipes/demo-base-sft.yaml)",
            argument="rebuild_base",
        )
    return base


def run_demo(config: DemoConfig) -> dict[str, Any]:
    """All stages; returns the summary also written to OUT/summary.json."""
    from rosetrain.demo.report import majority_baseline, write_report
    from rosetrain.reports.compare import compare_runs

    config.base = check_base(config.base)
    settings = stage_settings(config)
    import torch

    torch.set_num_threads(1)  # evaluation: one thread measured faster (rosetrain eval --threads)
    stages = Stages(config.stages_dir)
    evals: dict[str, dict[str, Any]] = {}
    timings: dict[str, float] = {}

    def step(name: str, what: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        done = stages.run(name, what, settings[name], work)
        timings[name] = done["seconds"]
        return done["result"]

    step("data", "generating the held-out splits (scenes never trained on)", lambda: make_data(config))
    evals["base"] = step(
        "eval-base",
        f"evaluating the base model {config.base}",
        lambda: evaluate_model(config, config.base, "base"),
    )
    sft = step(
        "sft",
        config.plan.what,
        lambda: train_stage(
            config,
            config.sft_recipe,
            config.base,
            config.out / "sft",
            config.sft_steps,
            1,
            config.plan.sft_spec,
        ),
    )
    evals["sft"] = step(
        "eval-sft", "evaluating after SFT", lambda: evaluate_model(config, Path(sft["final"]), "sft")
    )
    final_stage = "sft"
    signal = None
    if config.grpo_steps != 0:
        signal = step(
            "signal",
            "pre-RL signal check: would GRPO's groups carry signal on its own prompts?",
            lambda: signal_stage(config, Path(sft["final"])),
        )
        grpo = step(
            "grpo",
            "GRPO with the exact-match rewards (the scorer's PASS and SOFT)",
            lambda: train_stage(
                config,
                config.grpo_recipe,
                Path(sft["final"]),
                config.out / "grpo",
                config.grpo_steps,
                2,
                config.plan.rl_spec,
            ),
        )
        evals["grpo"] = step(
            "eval-grpo", "evaluating after GRPO", lambda: evaluate_model(config, Path(grpo["final"]), "grpo")
        )
        final_stage = "grpo"

    def compare_all() -> dict[str, Any]:
        pairs = {"base-vs-final": ("base", final_stage), "sft-vs-grpo": ("sft", "grpo")}
        out = {}
        for label, (before, after) in pairs.items():
            if after not in evals or before == after:
                continue
            for split, _, _ in SPLITS:
                out[f"{label}/{split}"] = compare_runs(
                    config.out / "eval" / f"{before}-{split}",
                    config.out / "eval" / f"{after}-{split}",
                    config.out / "compare" / label / split,
                    plots=split == "heldout",
                )
        return out

    compares = step("compare", f"comparing base and {final_stage}, item by item", compare_all)
    summary = {
        "stages": {name: result["heldout"] for name, result in evals.items()},
        "heldout_palette": {name: result["heldout-palette"] for name, result in evals.items()},
        "heldout_family": {name: result["heldout-family"] for name, result in evals.items()},
        "compare": compares["base-vs-final/heldout"],
        "compare_heldout_palette": compares["base-vs-final/heldout-palette"],
        "compare_heldout_family": compares["base-vs-final/heldout-family"],
        "compare_sft_grpo": compares.get("sft-vs-grpo/heldout"),
        "compare_sft_grpo_palette": compares.get("sft-vs-grpo/heldout-palette"),
        "signal": signal,  # the pre-RL signal check on the SFT model (None: GRPO skipped)
        "majority_baseline": {
            split: majority_baseline(config.out / "data" / split / "metadata_test.jsonl")
            for split, _, _ in SPLITS
        },
        "final_stage": final_stage,
        "seed": config.seed,
        "stage_seconds": timings,
        "seconds": round(sum(timings.values()), 1),  # the stages' own time, over resumed runs too
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(config).items()},
    }
    summary["targets"] = check_targets(summary)
    summary["transfer_targets"] = {split: transfer_targets(summary, split) for split in TRANSFER_SPLITS}
    atomic_write(config.out / "summary.json", json.dumps(summary, indent=2))
    write_report(config.out, summary)
    log(f"report: {config.out / 'report.md'}")
    return summary


def check_targets(summary: dict[str, Any]) -> dict[str, Any]:
    from rosetrain.demo.report import majority_action_avg

    base = summary["stages"]["base"]
    final = summary["stages"][summary["final_stage"]]
    action_ci = summary["compare"]["action_avg"].get("ci95")  # None where it cannot be estimated
    majority = summary["majority_baseline"]["heldout"]
    over_majority = final["action_avg"] - majority_action_avg(majority)
    template_margin = min(
        final["templates"].get(t, {}).get("pass", 0.0) - majority[t]
        for t in P.ACTION_TEMPLATES
        if t in majority
    )
    checks = {
        "base_gap": (base["gap"], base["gap"] >= TARGETS["base_gap_min"], f">= {TARGETS['base_gap_min']}"),
        "action_gain": (
            final["action_avg"] - base["action_avg"],
            final["action_avg"] - base["action_avg"] >= TARGETS["action_gain_min"]
            and action_ci is not None
            and action_ci[0] > 0,
            f">= {TARGETS['action_gain_min']}, CI above 0",
        ),
        "gap_ratio": (
            final["gap"] / base["gap"] if base["gap"] > 0 else None,
            base["gap"] > 0 and final["gap"] <= TARGETS["gap_ratio_max"] * base["gap"],
            f"<= {TARGETS['gap_ratio_max']}",
        ),
        "counting_drop": (
            base["counting_avg"] - final["counting_avg"],
            base["counting_avg"] - final["counting_avg"] <= TARGETS["counting_drop_max"],
            f"<= {TARGETS['counting_drop_max']}",
        ),
        "action_over_majority": (
            over_majority,
            over_majority >= TARGETS["action_over_majority_min"],
            (f">= {TARGETS['action_over_majority_min']} (Action Avg minus the majority answer's)"),
        ),
        "templates_over_majority": (
            template_margin,
            template_margin > 0,
            ("> 0 (the smallest margin of an action template over its majority answer)"),
        ),
    }
    return {
        name: {"value": None if value is None else round(value, 4), "met": bool(met), "target": target}
        for name, (value, met, target) in checks.items()
    }


def transfer_targets(summary: dict[str, Any], split: str) -> dict[str, Any]:
    """The transfer bars on one held-out split (palette or family): Action
    above its majority level, the gap at most half the base's, and counting
    kept (no more than 5 points below the base's on that split)."""
    from rosetrain.demo.report import majority_action_avg

    stages = summary[split.replace("-", "_")]
    base, final = stages["base"], stages[summary["final_stage"]]
    over = final["action_avg"] - majority_action_avg(summary["majority_baseline"][split])
    ratio = final["gap"] / base["gap"] if base["gap"] > 0 else None
    drop = base["counting_avg"] - final["counting_avg"]
    t = TRANSFER_TARGETS
    checks = {
        "action_over_majority": (
            over,
            over >= t["action_over_majority_min"],
            f">= {t['action_over_majority_min']}",
        ),
        "gap_ratio": (ratio, ratio is not None and ratio <= t["gap_ratio_max"], f"<= {t['gap_ratio_max']}"),
        "counting_drop": (drop, drop <= t["counting_drop_max"], f"<= {t['counting_drop_max']}"),
    }
    return {
        name: {"value": None if value is None else round(value, 4), "met": bool(met), "target": target}
        for name, (value, met, target) in checks.items()
    }


BASE_MARKER = "rosetrain-demo-base.json"


def rebuild_base(
    out: Path,
    steps: int | None = None,
    cores: int = 2,
    palette_steps: int | None = None,
    design: str = "transfer",
) -> Path:
    """Reproduce a design's shipped base under ``out`` (never inside the package)
    with counting only: a fresh `small` tiny model trained on the demo's one
    palette (``recipes/demo-base-sft.yaml``; ``steps`` overrides its max_steps),
    then, for the ``transfer`` design, on every palette with the roles swapped
    (``recipes/demo-base-sft-palettes.yaml``; ``palette_steps`` overrides its
    max_steps), copied to ``OUT/base`` (weights + processor). Use it with
    ``rosetrain demo --base OUT/base``."""
    import shutil

    from rosetrain.models.tiny import build_tiny_model

    if design not in DESIGNS:
        raise RosetrainError(
            f"design: expected one of {', '.join(DESIGNS)}, got {design!r}", argument="design"
        )
    out = Path(out)
    final = out / "base"
    if final.exists() and not (final / BASE_MARKER).exists():
        raise RosetrainError(
            f"{final} exists and was not written by rebuild_base; choose another output folder",
            argument="out",
        )
    # a base of ours is replaced whole, so only while every file in it is ours (its marker
    # names them): a file a user added there is refused, never deleted
    if (final / MARKER_NAME).exists():  # a base of an older rosetrain has none: all its own
        check_replaceable_folder(final, argument="out")
    # held while it builds: a killed rebuild's half-copied OUT/base temp is named in the
    # folder's marker, so the next rebuild removes exactly it
    with output_lock(out, "the rebuilt base"):
        if not (final / BASE_MARKER).exists():
            claim_outputs(final)
        work = out / "base-build"
        model = build_tiny_model(work / "init", size="small", seed=0, family="qwen3-vl")
        stages = [("train", "demo-base-sft.yaml", "base.yaml", steps)]
        if design == "transfer":
            stages.append(
                ("train-palettes", "demo-base-sft-palettes.yaml", "base-palettes.yaml", palette_steps)
            )
        for folder, recipe, spec, max_steps in stages:
            overrides = [f"model={model}", f"output_dir={work / folder}", f"data.spec={GENERATORS / spec}"]
            if max_steps is not None:
                overrides.append(f"max_steps={max_steps}")
            model = Path(train_recipe(RECIPES / recipe, overrides, cores)["final"])
        remove_atomic_temps(out, "base")  # a killed rebuild's half-copied folder
        with atomic_path(final) as tmp:  # the old base stays whole until the new one is
            shutil.copytree(model, tmp, ignore=shutil.ignore_patterns("training_args.bin", "*.pt"))
            recipes = {
                "recipes": [recipe for _, recipe, _, _ in stages],
                "max_steps": [s for *_, s in stages],
            }
            atomic_write(tmp / BASE_MARKER, json.dumps(recipes))
            mark_folder(tmp)  # names every file of the new base: a later rebuild may replace it
    return final
