"""``rosetrain.rewards`` as a user would use it: plain reward functions in their
own TRL ``GRPOTrainer`` script, agreeing with ``rosetrain score`` on every
completion."""

from __future__ import annotations

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.scoring import score_item

SPEC = """
name: rewards-user
role: train
namespace: rewards-user
seed: 3
rows: [3, 4]
cols: [3, 4]
cell_size: [28, 28]
image_multiple: 28
exceptions: [1, 3]
families: [attribute]
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory, write_spec):
    from rosetrain.data.hf import load_hf_split

    root = tmp_path_factory.mktemp("rewards-user")
    spec = write_spec(root, SPEC)
    assert (
        cli_main(
            [
                "generate",
                "--spec",
                str(spec),
                "--out",
                str(root / "data"),
                "--split",
                "train",
                "--scenes",
                "4",
                "--formats",
                "hf",
                "--quiet",
            ]
        )
        == 0
    )
    return load_hf_split(str(root / "data"), "train")


def _columns(dataset) -> dict:
    return {name: dataset[name] for name in dataset.column_names if name != "images"}


def test_rewards_are_the_scorers_verdicts(rows):
    from rosetrain.rewards import format_reward, pass_reward, soft_reward

    texts = [
        row["answer"] if i % 3 == 0 else ("COUNT(1) ;;" if i % 3 == 1 else "no idea")
        for i, row in enumerate(rows)
    ]
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    columns = _columns(rows)
    expected = [score_item(row, text) for row, text in zip(rows, texts)]
    assert pass_reward(completions, **columns) == [float(r["pass"]) for r in expected]
    assert soft_reward(completions, **columns) == [r["unified_soft"] for r in expected]
    assert format_reward(completions, **columns) == [float(r["format_valid"]) for r in expected]
    assert pass_reward.__name__ == "pass" and soft_reward.__name__ == "soft"


@pytest.mark.slow
# TRL's own trainer, as a user's script builds it, calls transformers' renamed
# gradient-checkpointing API (TRL 1.16, transformers 5.23): nothing rosetrain sets
@pytest.mark.filterwarnings(
    "ignore:`(is_)?gradient_checkpointing(_enable|_disable)?` is deprecated:FutureWarning"
)
def test_a_users_own_grpo_trainer_runs_on_the_rewards(rows, tiny_model_dir, tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from trl import GRPOConfig, GRPOTrainer

    from rosetrain.rewards import format_reward, pass_reward, soft_reward

    seen = []

    def pass_recorded(completions, **columns):  # a user's own wrapper, to check agreement
        values = pass_reward(completions, **columns)
        seen.extend(zip(completions, values, columns["item_id"]))
        return values

    pass_recorded.__name__ = "pass"
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    processor.tokenizer.padding_side = "left"
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        learning_rate=1e-5,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=6,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        bf16=False,
        remove_unused_columns=False,
        use_cpu=True,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=processor,
        train_dataset=rows,
        args=args,
        reward_funcs=[pass_recorded, soft_reward, format_reward],
    )
    trainer.train()
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"rewards/pass/mean", "rewards/soft/mean", "rewards/format/mean"} <= logged
    gold = {row["item_id"]: row for row in rows}
    assert seen
    for completion, value, item_id in seen:
        text = completion if isinstance(completion, str) else completion[0]["content"]
        assert value == float(score_item(gold[item_id], text)["pass"])
