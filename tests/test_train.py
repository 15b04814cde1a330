"""Training recipes on the CPU with the tiny model: SFT with LoRA, GRPO with the
scorer's rewards, held-out evaluation, resume, and errors before training."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from rosetrain.cli import main as cli_main
from rosetrain.train.recipe import RecipeError, load_recipe


def _generate(spec: Path, out: Path, split: str, scenes: int, formats: str) -> Path:
    assert (
        cli_main(
            [
                "generate",
                "--spec",
                str(spec),
                "--out",
                str(out),
                "--split",
                split,
                "--scenes",
                str(scenes),
                "--formats",
                formats,
                "--num-proc",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory, tiny_model_dir, tiny_train_spec):
    """A tiny model, a training folder (Parquet) and a held-out folder (release layout)."""
    root = tmp_path_factory.mktemp("train-env")
    (root / "train.yaml").write_text(tiny_train_spec("t-train"))
    (root / "heldout.yaml").write_text(tiny_train_spec("t-held").replace("seed: 1", "seed: 2"))
    return {
        "root": root,
        "model": tiny_model_dir,
        "train": _generate(root / "train.yaml", root / "train", "train", 6, "release,hf"),
        "heldout": _generate(root / "heldout.yaml", root / "heldout", "test", 2, "release"),
        "spec": root / "train.yaml",
    }


def write_recipe(path: Path, env, **changes) -> Path:
    recipe = {
        "method": "sft",
        "model": str(env["model"]),
        "output_dir": str(path.parent / "run"),
        "data": {"folder": str(env["train"])},
        "eval": {"folder": str(env["heldout"]), "items": 6, "max_new_tokens": 12, "every_steps": 0},
        "max_steps": 4,
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-2,
        "logging_steps": 1,
        "save_steps": 100,
        "lora": {"r": 8, "alpha": 16, "dropout": 0.0},
        "cpu_threads": 1,
    }
    recipe.update(changes)
    path.write_text(yaml.safe_dump(recipe))
    return path


# ----------------------------------------------------------------- recipe errors (fast)


def test_unknown_key_lists_the_valid_keys_and_the_file(tmp_path, env):
    path = write_recipe(tmp_path / "r.yaml", env, lerning_rate=1e-4)
    with pytest.raises(RecipeError) as err:
        load_recipe(path)
    message = str(err.value)
    assert str(path) in message and "'lerning_rate'" in message and "learning_rate" in message
    assert "valid keys: method, model, output_dir" in message
    with pytest.raises(RecipeError, match=r"unknown key 'rank' at lora.*valid keys: r, alpha"):
        load_recipe(write_recipe(tmp_path / "r.yaml", env), ["lora.rank=4"])


def test_set_overrides_nested_keys_with_yaml_values(tmp_path, env):
    path = write_recipe(tmp_path / "r.yaml", env)
    recipe = load_recipe(
        path,
        [
            "learning_rate=5e-7",
            "lora.r=4",
            "max_steps=2",
            "report_to=[tensorboard]",
            "grpo.vllm=null",
            "trl.warmup_steps=3",
            "output_dir=elsewhere",
        ],
    )
    assert recipe.learning_rate == 5e-7 and recipe.lora.r == 4 and recipe.max_steps == 2
    assert recipe.report_to == ["tensorboard"] and recipe.trl == {"warmup_steps": 3}
    assert recipe.output_dir == "elsewhere"
    assert load_recipe(path, ["lora=null"]).lora is None
    assert load_recipe(path, ["lora=false"]).lora is None
    with pytest.raises(RecipeError, match="max_steps: expected an integer"):
        load_recipe(path, ["max_steps=many"])
    with pytest.raises(RecipeError, match="method"):
        load_recipe(path, method="grpo")  # `rosetrain train grpo` on an SFT recipe


def test_shipped_recipes_load(tmp_path):
    recipes = sorted((Path(__file__).resolve().parent.parent / "recipes").glob("*.yaml"))
    assert len(recipes) >= 8
    for path in recipes:
        recipe = load_recipe(path)
        assert recipe.method in path.name


def test_missing_model_path_fails_before_training(tmp_path, env, capsys):
    path = write_recipe(tmp_path / "r.yaml", env, model=str(tmp_path / "no-model"))
    assert cli_main(["train", "sft", "--recipe", str(path)]) == 2
    assert f"local path {tmp_path / 'no-model'} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_spec_that_cannot_be_generated_fails_naming_it(tmp_path, env, capsys):
    bad = tmp_path / "bad.yaml"
    spec = (env["root"] / "train.yaml").read_text()
    bad.write_text(spec.replace("families: [attribute]", "families: [no_such_family]"))
    path = write_recipe(tmp_path / "r.yaml", env, data={"spec": str(bad)})
    assert cli_main(["train", "sft", "--recipe", str(path)]) == 2
    err = capsys.readouterr().err
    assert "data.spec" in err and "no_such_family" in err
    assert not (tmp_path / "run").exists()


def test_heldout_split_overlapping_training_fails(tmp_path, env, capsys):
    path = write_recipe(tmp_path / "r.yaml", env, eval={"folder": str(env["train"]), "split": "train"})
    assert cli_main(["train", "sft", "--recipe", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert "eval.folder" in err and "shares" in err and str(env["train"]) in err


def test_check_accepts_a_good_recipe(tmp_path, env, capsys):
    path = write_recipe(tmp_path / "r.yaml", env)
    assert cli_main(["train", "sft", "--recipe", str(path), "--check"]) == 0
    assert "OK" in capsys.readouterr().out


def test_vllm_without_the_package_is_a_clear_error(tmp_path, env):
    pytest.importorskip("trl")
    if __import__("importlib").util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed")
    from rosetrain.train.check import check

    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, method="grpo"), ["grpo.vllm=colocate"])
    with pytest.raises(RecipeError, match="grpo.vllm.*vllm package"):
        check(recipe)


def test_train_is_check_then_build_then_run_each_once(tmp_path, monkeypatch):
    """A run reads the recipe in one pass: check, build what was checked, run what
    was built; a recipe the caller checked already (the CLI) is not checked again."""
    from types import SimpleNamespace

    from rosetrain.train import build, check, run, train

    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(check, "check", lambda recipe: calls.append(("check", recipe)) or "checked")
    monkeypatch.setattr(build, "build", lambda checked: calls.append(("build", checked)) or "built")
    monkeypatch.setattr(run, "run", lambda built: calls.append(("run", built)) or {"global_step": 1})
    recipe = SimpleNamespace(output_dir=str(tmp_path / "run"))
    assert train(recipe) == {"global_step": 1}
    assert calls == [("check", recipe), ("build", "checked"), ("run", "built")]
    calls.clear()
    train(recipe, "checked by the caller")
    assert calls == [("build", "checked by the caller"), ("run", "built")]
    for phase in (check, build, run):  # each phase stays readable in one sitting
        assert len(Path(phase.__file__).read_text().splitlines()) <= 250, phase.__name__


def test_trl_extras_are_checked_and_cpu_defaults_apply(tmp_path, env):
    from trl import SFTConfig

    from rosetrain.train.trl_config import make_config

    path = write_recipe(tmp_path / "r.yaml", env, output_dir=str(tmp_path / "run"))
    config = make_config(SFTConfig, load_recipe(path, ["trl.adam_beta2=0.95"]), {"max_length": None})
    assert config.adam_beta2 == 0.95 and config.max_length is None
    checkpointing = getattr(
        config, "activation_checkpointing", config.gradient_checkpointing
    )  # old name before 5.23
    assert config.bf16 is False and checkpointing is False  # no GPU here
    with pytest.raises(RecipeError, match="trl.adam_beta is not a SFTConfig field.*adam_beta1"):
        make_config(SFTConfig, load_recipe(path, ["trl.adam_beta=0.9"]), {})
    with pytest.raises(RecipeError, match="trl.learning_rate: set it as the recipe key"):
        make_config(SFTConfig, load_recipe(path, ["trl.learning_rate=1"]), {})


def test_a_streamed_training_set_skips_the_heldout_scenes(env):
    import itertools

    from rosetrain.generators.scene import sample_scene
    from rosetrain.generators.spec import load_spec
    from rosetrain.train.data import train_dataset
    from rosetrain.train.recipe import DataConfig

    data = DataConfig(spec=str(env["spec"]), shuffle_buffer=0)
    spec = load_spec(env["spec"])
    heldout = {sample_scene(spec, data.seed, i).fingerprint for i in (0, 2)}
    rows = itertools.islice(train_dataset(data, heldout).select_columns(["scene_id"]), 40)
    first = list(dict.fromkeys(r["scene_id"] for r in rows))[:3]
    assert first == ["train-0000001", "train-0000003", "train-0000004"]


def test_a_data_check_on_the_other_source_names_the_unset_field(tmp_path):
    from rosetrain.train.data import check_folder, check_spec, heldout_records
    from rosetrain.train.recipe import DataConfig, EvalConfig

    with pytest.raises(RecipeError, match="data.folder: not set"):
        check_folder(DataConfig(spec=str(tmp_path / "spec.yaml")))
    with pytest.raises(RecipeError, match="data.spec: not set"):
        check_spec(DataConfig(folder=str(tmp_path)))
    with pytest.raises(RecipeError, match="eval.folder: not set"):
        heldout_records(EvalConfig())


def test_heldout_items_cover_the_main_templates_first():
    from rosetrain.train.data import pick_items

    records = [
        {"item_id": f"{t}-{i}", "task_template": t}
        for i in range(3)
        for t in (
            "T1B_CLICK_GLOBAL",
            "T5_CLICK_COUNT_EXCLUSION",
            "T1_COUNT_GLOBAL",
            "T3_CLICK_LOCAL_NUMERIC",
            "T2_COUNT_LOCAL_NUMERIC",
            "T4_CLICK_VISUAL_REGION",
        )
    ]
    picked = [r["task_template"][:3] for r in pick_items(records, 6)]
    assert picked == ["T1_", "T2_", "T3_", "T4_", "T5_", "T1B"]
    assert len(pick_items(records, 100)) == len(records)


# ----------------------------------------------------------------- rewards = scorer


def _hf_rows(env) -> list[dict]:
    from rosetrain.data.hf import load_hf_split

    return list(load_hf_split(str(env["train"]), "train").remove_columns(["images"]))


def test_each_reward_agrees_with_rosetrain_score(tmp_path, env):
    from rosetrain.train.rewards import build_rewards

    rows = _hf_rows(env)
    wrong = {"COUNT": "COUNT(99)", "CLICK": "CLICK(R1,C1); DONE", "CLICK_COUNT": "SUBMIT(0)"}
    texts = []
    for i, row in enumerate(rows):  # gold, wrong, prose and junk answers, in turn
        texts.append(
            [
                row["answer"],
                wrong[row["task_mode"]],
                f"The answer is {row['answer']}",
                "",
                "CLICK(R1,C1); CLICK(R1,C1); DONE",
            ][i % 5]
        )
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text(
        "".join(
            json.dumps({"item_id": r["item_id"], "raw_text": t, "model": "m", "error": None}) + "\n"
            for r, t in zip(rows, texts)
        )
    )
    assert (
        cli_main(
            [
                "score",
                "--data",
                str(env["train"]),
                "--split",
                "train",
                "--predictions",
                str(predictions),
                "--out",
                str(tmp_path / "scored"),
            ]
        )
        == 0
    )
    scored = {
        r["item_id"]: r
        for r in map(json.loads, (tmp_path / "scored" / "per_item_eval.jsonl").read_text().splitlines())
    }
    funcs, _ = build_rewards({"pass": 1.0})
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    field = {"pass": "pass", "soft": "unified_soft", "format": "format_valid"}
    for func in funcs:
        values = func(completions=completions, **columns)
        expected = [float(scored[r["item_id"]][field[func.__name__]]) for r in rows]
        assert values == pytest.approx(expected), func.__name__
    assert 0 < sum(funcs[0](completions=completions, **columns)) < len(rows)  # both outcomes occur


# ----------------------------------------------------------------- training (slow)


def _loss_on(trainer, rows) -> float:
    import torch

    batch = trainer.data_collator([dict(r) for r in rows])
    trainer.model.eval()
    with torch.no_grad():
        loss = trainer.model(**batch).loss.item()
    trainer.model.train()
    return loss


@pytest.mark.slow
def test_sft_lora_trains_only_adapters_lowers_loss_and_saves_a_loadable_adapter(tmp_path, env):
    import torch

    from rosetrain.models.loading import load_model_and_processor
    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.run import run

    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, max_steps=6, save_merged=True))
    built = build(check(recipe))
    trainer = built.trainer
    rows = [trainer.train_dataset[i] for i in range(8)]
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    loss_before = _loss_on(trainer, rows)
    summary = run(built)
    after = dict(trainer.model.named_parameters())
    changed = {n for n in before if not torch.equal(before[n], after[n].detach())}
    assert changed and all("lora_" in n for n in changed)
    assert any("lora_B" in n for n in changed)
    assert _loss_on(trainer, rows) < loss_before

    final = Path(summary["final"])
    assert (final / "adapter_config.json").is_file() and (final / "processor_config.json").is_file()
    model, loaded_processor = load_model_and_processor(final)  # the adapter, merged into its base
    base, _ = load_model_and_processor(env["model"])
    q_proj = "model.language_model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(model.state_dict()[q_proj], base.state_dict()[q_proj])
    merged, _ = load_model_and_processor(summary["merged"])  # save_merged: a plain full model
    assert not (Path(summary["merged"]) / "adapter_config.json").exists()
    assert torch.allclose(merged.state_dict()[q_proj], model.state_dict()[q_proj], atol=1e-6)
    assert loaded_processor.tokenizer.padding_side == "left"
    evals = [
        json.loads(line) for line in (Path(recipe.output_dir) / "heldout_eval.jsonl").read_text().splitlines()
    ]
    assert evals[-1]["step"] == 6 and 0 <= evals[-1]["eval_avg_pass"] <= 1
    assert len(evals[-1]["item_ids"]) == 6 and evals[-1]["max_new_tokens"] == 12  # eval reproduces them
    assert any("eval_gap" in entry for entry in trainer.state.log_history)


@pytest.mark.slow
def test_full_finetuning_with_lora_null_trains_every_weight_and_saves_a_model(tmp_path, env):
    from rosetrain.models.loading import load_model_and_processor
    from rosetrain.train import train

    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, max_steps=2, eval={}), ["lora=null"])
    summary = train(recipe)
    final = Path(summary["final"])
    assert (final / "model.safetensors").is_file() and not (final / "adapter_config.json").exists()
    model, _ = load_model_and_processor(final)
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration"


@pytest.mark.slow
def test_freeze_vision_trains_the_language_model_and_leaves_the_vision_tower_as_it_was(tmp_path, env):
    import torch

    from rosetrain.models.loading import load_model_and_processor
    from rosetrain.train import train

    recipe = load_recipe(
        write_recipe(tmp_path / "r.yaml", env, max_steps=2, eval={}), ["lora=null", "freeze_vision=true"]
    )
    trained, _ = load_model_and_processor(train(recipe)["final"])
    base, _ = load_model_and_processor(env["model"])
    before, after = base.state_dict(), trained.state_dict()
    vision = [n for n in before if ".visual." in f".{n}"]
    assert vision and all(torch.equal(before[n], after[n]) for n in vision)
    assert any(not torch.equal(before[n], after[n]) for n in before if "language_model" in n)


@pytest.mark.parametrize("lora", ["lora=null", "lora.r=4"])
def test_vision_lr_scale_gives_the_vision_tower_its_share_of_the_learning_rate(tmp_path, env, lora):
    from rosetrain.train.build import build, vision_tower
    from rosetrain.train.check import check

    recipe = load_recipe(
        write_recipe(tmp_path / "r.yaml", env, max_steps=2, eval={}),
        [lora, "vision_lr_scale=0.25", "learning_rate=0.001", "lora.vision=true"],
    )
    trainer = build(check(recipe)).trainer
    optimizer = trainer.create_optimizer()
    model = trainer.model.get_base_model() if hasattr(trainer.model, "get_base_model") else trainer.model
    vision = {id(p) for p in vision_tower(model, "test").parameters()}
    rates = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    trained = {id(p) for p in trainer.model.parameters() if p.requires_grad}
    assert rates.keys() == trained and vision & trained and trained - vision
    assert {rates[i] for i in trained & vision} == {0.00025}
    assert {rates[i] for i in trained - vision} == {0.001}


def test_lora_target_modules_takes_pefts_all_linear_shorthand(tmp_path, env):
    from rosetrain.train.build import build
    from rosetrain.train.check import check

    recipe = load_recipe(
        write_recipe(tmp_path / "r.yaml", env, max_steps=2, eval={}), ["lora.target_modules=all-linear"]
    )
    model = build(check(recipe)).trainer.model
    adapted = {name.split(".lora_A")[0] for name, _ in model.named_parameters() if ".lora_A" in name}
    assert any("mlp" in name for name in adapted) and any("visual" in name for name in adapted)


def test_vision_lr_scale_refuses_a_frozen_tower_and_zero(tmp_path, env):
    recipe = write_recipe(tmp_path / "r.yaml", env, max_steps=2, eval={})
    with pytest.raises(RecipeError, match="vision_lr_scale: the vision tower is frozen"):
        load_recipe(recipe, ["freeze_vision=true", "vision_lr_scale=0.5"])
    with pytest.raises(RecipeError, match="vision_lr_scale"):
        load_recipe(recipe, ["vision_lr_scale=0"])


def test_freeze_vision_names_a_model_without_a_vision_tower():
    from types import SimpleNamespace

    from rosetrain.train.build import freeze_vision_tower

    with pytest.raises(RecipeError, match="freeze_vision: SimpleNamespace has no vision tower"):
        freeze_vision_tower(SimpleNamespace(model=SimpleNamespace()))


class _Interrupt:
    """A callback that stops training like Ctrl-C after ``at`` steps."""

    def __init__(self, at: int):
        from transformers import TrainerCallback

        class Stop(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == at:
                    raise KeyboardInterrupt

        self.callback = Stop()


@pytest.mark.slow
def test_training_resumes_from_the_last_checkpoint_after_an_interrupt(tmp_path, env):
    from transformers import TrainerCallback

    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.resume import last_checkpoint
    from rosetrain.train.run import run

    every_step = {"folder": str(env["heldout"]), "items": 2, "max_new_tokens": 4, "every_steps": 1}
    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, max_steps=4, save_steps=2, eval=every_step))
    built = build(check(recipe))
    built.trainer.add_callback(_Interrupt(at=3).callback)
    with pytest.raises(KeyboardInterrupt):
        run(built)
    assert last_checkpoint(recipe.output_dir).endswith("checkpoint-2")
    log = Path(recipe.output_dir) / "heldout_eval.jsonl"
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2, 3]

    steps = []

    class Count(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            steps.append(state.global_step)

    built = build(check(recipe))
    built.trainer.add_callback(Count())
    summary = run(built)
    assert steps == [3, 4] and summary["global_step"] == 4
    # step 3 is trained and evaluated again: its line from before the interrupt is gone
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2, 3, 4]


@pytest.mark.slow
def test_sft_streams_rows_from_a_spec(tmp_path, env):
    from rosetrain.train import train

    recipe = load_recipe(
        write_recipe(tmp_path / "r.yaml", env, data={"spec": str(env["spec"])}, max_steps=2, eval={})
    )
    assert train(recipe)["global_step"] == 2


@pytest.mark.slow
def test_grpo_rewards_get_gold_columns_and_per_template_pass_is_logged(tmp_path, env):
    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.run import run

    recipe = load_recipe(
        write_recipe(
            tmp_path / "r.yaml",
            env,
            method="grpo",
            max_steps=3,
            learning_rate=1e-5,
            eval={},
            per_device_train_batch_size=None,
            grpo={"num_generations": 2, "max_completion_length": 6},
            rewards={"pass": 1.0, "soft": 0.5, "format": 0.1},
        )
    )
    built = build(check(recipe))
    trainer = built.trainer
    assert trainer.args.per_device_train_batch_size == 2  # follows num_generations (M-RoPE)
    assert trainer.args.reward_weights == [1.0, 0.5, 0.1]
    calls = []
    original = trainer.reward_funcs[0]

    def recording_pass(completions, **columns):
        calls.append(columns)
        return original(completions=completions, **columns)

    recording_pass.__name__ = "pass"
    trainer.reward_funcs[0] = recording_pass
    run(built)

    gold = {r["item_id"]: r for r in _hf_rows(env)}
    assert calls
    for columns in calls:
        for i, item_id in enumerate(columns["item_id"]):
            for key in ("ground_truth_clicks", "ground_truth_count", "region_params_json", "task_template"):
                assert columns[key][i] == gold[item_id][key]
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"rewards/pass/mean", "rewards/soft/mean", "rewards/format/mean"} <= logged
    short = {
        "T1_COUNT_GLOBAL": "G-Cnt",
        "T2_COUNT_LOCAL_NUMERIC": "L-Cnt",
        "T3_CLICK_LOCAL_NUMERIC": "L-Clk",
        "T4_CLICK_VISUAL_REGION": "V-Clk",
        "T5_CLICK_COUNT_EXCLUSION": "Excl-CS",
        "T1B_CLICK_GLOBAL": "G-Clk",
        "T2B_COUNT_LOCAL_MATCHED": "mL-Cnt",
    }
    seen = {short[t] for columns in calls for t in columns["task_template"]}
    assert {f"pass/{name}" for name in seen} <= logged


@pytest.mark.slow
@pytest.mark.parametrize(
    "greedy, by, gold",
    [(False, "pass", False), (True, "pass", False), (False, "reward", False), (False, "pass", True)],
    ids=["sampled", "greedy-last", "by-reward", "gold-first"],
)
def test_grpo_trains_on_the_frontier_filters_own_samples_with_frontier_reuse(
    tmp_path, env, monkeypatch, recwarn, greedy, by, gold
):
    """grpo.frontier_reuse: every group TRL trains on is the one the filter kept
    its prompt with (TRL's own sampling never runs), through TRL's rollout_func;
    with grpo.loss_from, TRL's loss mask is the filter's token mask. With
    grpo.frontier_greedy, each group's last member is decoded greedily; with
    grpo.frontier_by: reward, the filter keeps by the recipe's own rewards; with
    grpo.frontier_gold, a group no sample of which passes trains with the row's
    answer as its first member."""
    from trl import GRPOTrainer

    from rosetrain.train import frontier as F
    from rosetrain.train.build import build
    from rosetrain.train.check import check
    from rosetrain.train.run import run

    held, given = [], []
    # an untrained model passes nothing: call every prompt live, one sample of two
    # passing (with gold, leave every prompt failing, so each group gets the answer)
    monkeypatch.setattr(F.FrontierFilter, "passes", lambda self, rows, texts: [int(not gold)] * len(rows))
    golds, put_gold = [], F.FrontierFilter.put_gold

    def recording_put_gold(self, rows, sampled, guided):
        put_gold(self, rows, sampled, guided)
        golds.extend(sampled.completion_ids[i * self.samples] for i, g in enumerate(guided) if g)

    monkeypatch.setattr(F.FrontierFilter, "put_gold", recording_put_gold)
    varies = []

    def every_group_varies(self, rows, texts):
        varies.append(self.rewards)
        return [True] * len(rows)

    monkeypatch.setattr(F.FrontierFilter, "varies", every_group_varies)
    put, rollout = F.HeldGroups.put, F.FrontierFilter.rollout
    monkeypatch.setattr(
        F.HeldGroups, "put", lambda self, key, ids, group: held.append(group) or put(self, key, ids, group)
    )

    def recording_rollout(self, prompts, trainer):
        out = rollout(self, prompts, trainer)
        given.append(out["completion_ids"])
        return out

    def never(*args, **kwargs):
        raise AssertionError("TRL sampled a prompt the filter had sampled")

    # an untrained model never writes the marker: mask each completion's first token instead
    monkeypatch.setattr(F, "loss_mask", lambda ids, marker, decode: [0] + [1] * (len(ids) - 1))

    monkeypatch.setattr(F.FrontierFilter, "rollout", recording_rollout)
    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", never)
    recipe = load_recipe(
        write_recipe(
            tmp_path / "r.yaml",
            env,
            method="grpo",
            data={"spec": str(env["spec"])},
            max_steps=2,
            learning_rate=1e-5,
            eval={},
            per_device_train_batch_size=None,
            rewards={"pass": 1.0, "soft": 0.5, "format": 0.1},
            grpo={
                "num_generations": 2,
                "max_completion_length": 6,
                "frontier": True,
                "frontier_reuse": True,
                "frontier_greedy": greedy,
                "frontier_by": by,
                "frontier_gold": gold,
                "loss_from": "inside:",
            },
        )
    )
    # recwarn records every warning, and its filters last the whole test (a
    # `catch_warnings` block would drop those the model's loading sets for the run)
    built = build(check(recipe))
    assert not [w for w in recwarn if "rollout_func" in str(w.message)]  # rosetrain's choice: no notice
    keep = built.trainer.rollout_func.__self__
    # a resumed run starts the filtered stream over instead of re-sampling the steps it skips
    assert built.trainer.args.ignore_data_skip
    # the rollouts are drawn as TRL draws its own: never an image token, which would break the forward
    trl_config = built.trainer.generation_config
    assert trl_config.suppress_tokens == [built.trainer.model.config.image_token_id]
    assert keep.sampling() == {"generation_config": trl_config}
    calls = []
    generate = built.trainer.model.generate

    def recording_generate(**kwargs):
        calls.append(kwargs)
        return generate(**kwargs)

    built.trainer.model.generate = recording_generate
    masks = []
    compute_loss = built.trainer.compute_loss

    def recording_compute_loss(model, inputs, *args, **kwargs):
        masks.append((inputs["tool_mask"] * inputs["completion_mask"]).tolist())
        return compute_loss(model, inputs, *args, **kwargs)

    built.trainer.compute_loss = recording_compute_loss
    run(built)
    # each completion's loss skips its first token, and only that
    assert masks and all(row[0] == 0 and 1 in row for batch in masks for row in batch)
    # a generation config alone, no generation argument beside it (transformers deprecates that)
    assert calls and all(
        "generation_config" in kwargs and not {"num_return_sequences", "do_sample"} & set(kwargs)
        for kwargs in calls
    )
    # the count goes into a copy: TRL's own config is left as it was
    assert all(kwargs["generation_config"] is not trl_config for kwargs in calls)
    # with greedy, the calls for each group's last member decode greedily, the others sample
    assert {kwargs["generation_config"].do_sample for kwargs in calls} == (
        {True, False} if greedy else {True}
    )
    assert trl_config.num_return_sequences != 2
    assert built.trainer.state.global_step == 2
    assert given and all(group in held for batch in given for group in (batch[:2], batch[2:]) if group)
    lines = [json.loads(line) for line in (tmp_path / "run" / F.FRONTIER_LOG).read_text().splitlines()]
    groups = [line["groups"] for line in lines if "groups" in line]
    assert groups and sum(g["reused"] for g in groups) >= 2 and sum(g["resampled"] for g in groups) == 0
    # with gold, each group TRL trained on opens with its row's answer, ended as a turn ends
    eos = built.trainer.processing_class.tokenizer.eos_token_id
    assert all(ids[-1] == eos for ids in golds)
    assert all((group[0] in golds) == gold for batch in given for group in (batch[:2], batch[2:]) if group)
    # by reward, the filter weighs TRL's own reward functions with the recipe's weights
    if by == "reward":
        funcs, weights = varies[0]
        assert [f.__name__ for f in funcs] == ["pass", "soft", "format"] and weights == [1.0, 0.5, 0.1]
    else:
        assert not varies


def test_frontier_reuse_needs_the_frontier_and_transformers_sampling(tmp_path, env):
    recipe = write_recipe(tmp_path / "r.yaml", env, method="grpo", data={"spec": str(env["spec"])})
    with pytest.raises(RecipeError, match="grpo.frontier_reuse: needs grpo.frontier: true"):
        load_recipe(recipe, ["grpo.frontier_reuse=true"])
    with pytest.raises(RecipeError, match="grpo.frontier_reuse: needs grpo.vllm: null"):
        load_recipe(recipe, ["grpo.frontier=true", "grpo.frontier_reuse=true", "grpo.vllm=server"])
    with pytest.raises(RecipeError, match="grpo.loss_from: needs grpo.frontier_reuse: true"):
        load_recipe(recipe, ["grpo.frontier=true", "grpo.loss_from='inside:'"])
    with pytest.raises(RecipeError, match="grpo.loss_from: needs .* a non-empty text"):
        load_recipe(recipe, ["grpo.frontier=true", "grpo.frontier_reuse=true", "grpo.loss_from=''"])
    with pytest.raises(RecipeError, match="grpo.frontier_greedy: needs grpo.frontier_reuse: true"):
        load_recipe(recipe, ["grpo.frontier=true", "grpo.frontier_greedy=true"])
    reuse = ["grpo.frontier=true", "grpo.frontier_reuse=true", "grpo.frontier_greedy=true"]
    assert load_recipe(recipe, reuse).grpo.frontier_greedy
    with pytest.raises(RecipeError, match="grpo.frontier_gold: needs grpo.frontier_reuse: true"):
        load_recipe(recipe, ["grpo.frontier=true", "grpo.frontier_gold=true"])
    assert load_recipe(recipe, [*reuse[:2], "grpo.frontier_gold=true"]).grpo.frontier_gold
    with pytest.raises(RecipeError, match="grpo.frontier_by: needs grpo.frontier: true"):
        load_recipe(recipe, ["grpo.frontier_by=reward"])
    with pytest.raises(RecipeError, match="grpo.frontier_by"):
        load_recipe(recipe, ["grpo.frontier=true", "grpo.frontier_by=soft"])
    assert load_recipe(recipe, ["grpo.frontier=true", "grpo.frontier_by=reward"]).grpo.frontier_by == "reward"


@pytest.mark.slow
def test_grpo_refuses_a_batch_other_than_num_generations_on_mrope_models(tmp_path, env):
    from rosetrain.train.check import check

    recipe = load_recipe(
        write_recipe(
            tmp_path / "r.yaml",
            env,
            method="grpo",
            eval={},
            per_device_train_batch_size=4,
            grpo={"num_generations": 2},
        )
    )
    with pytest.raises(
        RecipeError, match="per_device_train_batch_size .4. must equal grpo.num_generations .2."
    ):
        check(recipe)


def test_resuming_a_checkpoint_of_another_recipe_is_refused_by_name(tmp_path, env):
    from rosetrain.core.io import claim_outputs, output_lock
    from rosetrain.train.resume import check_resumable, record_recipe

    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, max_steps=4, eval={}))
    record_recipe(recipe)
    checkpoint = Path(recipe.output_dir) / "checkpoint-2"
    with output_lock(recipe.output_dir):
        claim_outputs(checkpoint)  # as a run names its checkpoints in output_dir's marker
    checkpoint.mkdir()
    for name in ("trainer_state.json", "optimizer.pt", "scheduler.pt"):  # what a checkpoint holds
        (checkpoint / name).write_text("{}")

    check_resumable(load_recipe(tmp_path / "r.yaml", ["max_steps=8", "save_steps=1"]))  # longer: fine
    # with or without a progress bar (--quiet) it is the same run; a trl key that trains is not
    check_resumable(load_recipe(tmp_path / "r.yaml", ["trl.disable_tqdm=true"]))
    with pytest.raises(RecipeError, match=r"checkpoint-2 .*trl: .*weight_decay"):
        check_resumable(load_recipe(tmp_path / "r.yaml", ["trl.weight_decay=0.1"]))
    with pytest.raises(RecipeError, match=r"checkpoint-2 .*learning_rate: 0.01 -> 0.001"):
        check_resumable(load_recipe(tmp_path / "r.yaml", ["learning_rate=1e-3"]))
    check_resumable(load_recipe(tmp_path / "r.yaml", ["learning_rate=1e-3", "resume=never"]))
    # a record edited by hand into no recipe at all is named, never a traceback
    record = Path(recipe.output_dir) / "rosetrain_recipe.yaml"
    for text in ("- a list\n", "a: [unclosed\n"):
        record.write_text(text)
        with pytest.raises(RecipeError, match=r"rosetrain_recipe.yaml: (expected the recipe|not valid YAML)"):
            check_resumable(load_recipe(tmp_path / "r.yaml"))


def test_a_run_resumes_with_its_spec_at_another_path_but_not_with_another_spec(tmp_path, env):
    """The record holds absolute paths: a checkout moved or copied elsewhere gives
    the same spec another path, which is the same data; a changed spec is not."""
    from rosetrain.core.io import claim_outputs, output_lock
    from rosetrain.train.resume import check_resumable, record_recipe

    spec = tmp_path / "a" / "train.yaml"
    spec.parent.mkdir()
    spec.write_bytes(Path(env["spec"]).read_bytes())
    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, data={"spec": str(spec)}, eval={}))
    record_recipe(recipe)
    checkpoint = Path(recipe.output_dir) / "checkpoint-2"
    with output_lock(recipe.output_dir):
        claim_outputs(checkpoint)
    checkpoint.mkdir()
    for name in ("trainer_state.json", "optimizer.pt", "scheduler.pt"):
        (checkpoint / name).write_text("{}")

    moved = tmp_path / "b" / "train.yaml"
    moved.parent.mkdir()
    moved.write_bytes(spec.read_bytes())
    assert check_resumable(load_recipe(tmp_path / "r.yaml", [f"data.spec={moved}"])) == str(checkpoint)
    moved.write_text(spec.read_text().replace("seed: 1", "seed: 5"))
    with pytest.raises(RecipeError, match=r"checkpoint-2 .*data: .*name the checkpoint \(resume: "):
        check_resumable(load_recipe(tmp_path / "r.yaml", [f"data.spec={moved}"]))


@pytest.mark.slow
def test_the_final_model_and_card_are_on_disk_before_the_final_evaluation(tmp_path, env, monkeypatch):
    """An evaluation that fails at the end loses no trained weights."""
    from rosetrain.train import train
    from rosetrain.train.callbacks import HeldoutEvalCallback

    def broken(self, model):
        raise RuntimeError("the final evaluation failed")

    monkeypatch.setattr(HeldoutEvalCallback, "evaluate", broken)
    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, max_steps=2))
    with pytest.raises(RuntimeError, match="the final evaluation failed"):
        train(recipe)
    final = Path(recipe.output_dir) / "checkpoint-final"
    assert (final / "adapter_config.json").is_file() and (Path(recipe.output_dir) / "README.md").is_file()


@pytest.mark.slow
def test_an_intermediate_checkpoint_carries_rosetrains_card(tmp_path, env):
    from huggingface_hub import ModelCard

    from rosetrain.train import train

    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, max_steps=2, save_steps=1, eval={}))
    train(recipe)
    card = ModelCard.load(Path(recipe.output_dir) / "checkpoint-1" / "README.md")
    assert "rosetrain" in card.data.tags and "| steps | 1 |" in card.text


@pytest.mark.slow
@pytest.mark.parametrize("lora", ["lora=null", "lora.r=4"])
def test_the_run_folder_loads_as_its_final_model_with_transformers(tmp_path, env, lora):
    """As TRL's output_dir: from_pretrained(run folder) gives the final model and its
    processor (a LoRA run: the adapter on the base its config names)."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from rosetrain.train import train

    recipe = load_recipe(write_recipe(tmp_path / "r.yaml", env, max_steps=2, eval={}), [lora])
    final = Path(train(recipe)["final"])
    run = Path(recipe.output_dir)
    model = AutoModelForImageTextToText.from_pretrained(run)
    AutoProcessor.from_pretrained(run)
    saved = AutoModelForImageTextToText.from_pretrained(final)
    assert model.state_dict().keys() == saved.state_dict().keys()
    assert all(p.is_symlink() for p in run.iterdir() if (final / p.name).is_file() and p.name != "README.md")


@pytest.mark.parametrize("quiet", [True, False])
def test_training_logs_are_readable_lines_and_end_with_one_summary(tmp_path, env, capsys, quiet):
    """transformers prints each log as a dict of string fractions; rosetrain prints
    `step N/M  loss ...` lines, with the bar or without (--quiet), and one summary."""
    recipe = write_recipe(tmp_path / "r.yaml", env, max_steps=2, eval={}, lora=None)
    assert cli_main(["train", "sft", "--recipe", str(recipe), *(["--quiet"] if quiet else [])]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "{'" not in text  # no dict of a log anywhere
    lines = [line for line in text.replace("\r", "\n").splitlines() if line.startswith("step ")]
    assert [line.split("  ")[0] for line in lines] == ["step 1/2", "step 2/2"]
    assert all("  loss " in line and "  lr " in line for line in lines)
    assert re.search(r"^trained 2 steps in \d+ s, mean loss \d\.\d{4}; final model: ", captured.out, re.M)


def test_eval_items_reproduces_the_figures_training_logged(tmp_path, env, capsys):
    """The log names its items and token limit; `rosetrain eval --items LOG
    --max-new-tokens N` scores the same items and gives the same figures."""
    evaluation = {
        "folder": str(env["heldout"]),
        "items": 5,
        "max_new_tokens": 12,
        "every_steps": 0,
        "batch_size": 1,
    }
    recipe = write_recipe(tmp_path / "r.yaml", env, max_steps=2, lora=None, eval=evaluation)
    assert cli_main(["train", "sft", "--recipe", str(recipe), "--quiet"]) == 0
    log = tmp_path / "run" / "heldout_eval.jsonl"
    logged = json.loads(log.read_text().splitlines()[-1])
    out = tmp_path / "eval"
    command = ["eval", "--model", str(tmp_path / "run"), "--data", str(env["heldout"]), "--out", str(out)]
    command += ["--items", str(log), "--max-new-tokens", str(logged["max_new_tokens"]), "--batch-size", "1"]
    assert cli_main([*command, "--quiet"]) == 0
    summary = json.loads((out / "evaluation_summary.json").read_text())
    assert summary["n"] == len(logged["item_ids"]) == 5
    for key in ("avg_pass", "counting_avg", "action_avg", "valid", "soft"):
        if f"eval_{key}" in logged:
            assert summary[key] == pytest.approx(logged[f"eval_{key}"]), key
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join([*logged["item_ids"][:2], "no-such-item"]) + "\n")
    other = ["eval", "--model", str(tmp_path / "run"), "--data", str(env["heldout"]), "--items", str(ids)]
    assert cli_main([*other, "--out", str(tmp_path / "e2")]) == 2
    assert "1 of the 3 item ids are not in" in capsys.readouterr().err
