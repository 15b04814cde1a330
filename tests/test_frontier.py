"""Frontier prompts for GRPO: the filter keeps prompts the policy passes
sometimes, records what it saw per template, steps aside when nothing is left; the
live-group share is counted on PASS, per template."""

import json
from types import SimpleNamespace

from rosetrain.train import frontier as F
from rosetrain.train.rewards import log_live_groups


def make_filter(tmp_path, passes_by_item):
    keep = F.FrontierFilter(
        processor=None, samples=4, temperature=1.0, top_p=1.0, max_new_tokens=8, output_dir=str(tmp_path)
    )
    keep.generate = lambda rows, samples: F.Sampled([], [], [""] * (samples * len(rows)))
    keep.passes = lambda rows, texts: [passes_by_item[r["item_id"]] for r in rows]
    return keep


def test_keeps_only_prompts_with_pass_rate_strictly_between_0_and_1(tmp_path):
    keep = make_filter(tmp_path, {"a": 0, "b": 2, "c": 4, "d": 1})
    batch = {
        "item_id": ["a", "b", "c", "d"],
        "task_template": ["T3_CLICK_LOCAL_NUMERIC"] * 2 + ["T1_COUNT_GLOBAL"] * 2,
    }
    assert keep(batch) == [False, True, False, True]
    summary = F.frontier_summary(tmp_path)
    assert summary["L-Clk"] == {"seen": 2, "all_fail": 1, "live": 1, "live_share": 0.5}
    assert summary["G-Cnt"]["all_pass"] == 1 and summary["G-Cnt"]["live"] == 1


def test_no_frontier_left_stops_filtering_with_a_warning_not_an_endless_loop(tmp_path, caplog):
    keep = make_filter(tmp_path, {"a": 4})
    batch = {"item_id": ["a"] * 64, "task_template": ["T1_COUNT_GLOBAL"] * 64}
    assert keep(batch) == [False] * 64
    assert keep(batch) == [True] * 64  # 128 dead prompts in a row: the filter steps aside
    assert keep(batch) == [True] * 64
    assert "no frontier left" in caplog.text
    assert "no frontier left" in (tmp_path / F.FRONTIER_LOG).read_text()
    assert F.frontier_summary(tmp_path)["G-Cnt"]["seen"] == 128


def test_live_groups_counted_on_pass_per_template():
    logged = []
    golds = [
        {"item_id": i, "task_template": t}
        for i, t in [("x", "T3_CLICK_LOCAL_NUMERIC")] * 2 + [("y", "T1_COUNT_GLOBAL")] * 2
    ]
    results = [{"pass": 1}, {"pass": 0}, {"pass": 1}, {"pass": 1}]  # x varies, y is all-correct
    log_live_groups(golds, results, lambda name, value: logged.append((name, value)))
    assert [v for n, v in logged if n == "live/L-Clk"] == [1.0, 1.0]
    assert [v for n, v in logged if n == "live/G-Cnt"] == [0.0, 0.0]
    assert sum(v for n, v in logged if n == "live/all") / 4 == 0.5
    assert json.dumps(logged)


def test_reuse_hands_each_kept_group_to_trl_once_and_samples_what_it_does_not_hold(tmp_path, monkeypatch):
    """TRL's copies of a prompt (deep-copied, its image put into the message) find
    the group the filter kept it with; a prompt drawn twice in a row is two
    groups; a prompt the filter holds nothing of is sampled there and then."""
    import copy

    from PIL import Image
    from trl.data_utils import prepare_multimodal_messages

    keep = make_filter(tmp_path, {"a": 2, "b": 0})
    keep.reuse = True
    red, blue = Image.new("RGB", (8, 8), "red"), Image.new("RGB", (8, 8), "blue")
    prompt = [
        {"role": "user", "content": [{"type": "image", "text": None}, {"type": "text", "text": "Count."}]}
    ]
    keep.generate = lambda rows, samples: F.Sampled(
        [[7]] * len(rows), [[len(rows), i] for i in range(samples * len(rows))], [""] * (samples * len(rows))
    )
    batch = {"item_id": ["a", "b"], "task_template": ["T1_COUNT_GLOBAL"] * 2, "prompt": [prompt] * 2}
    batch["images"] = [[red], [blue]]
    assert keep(batch) == [True, False]  # only a's group is held
    for_trl = [prepare_multimodal_messages(copy.deepcopy(prompt), images=[red.copy()]) for _ in range(4)]
    out = keep.rollout(for_trl, SimpleNamespace(num_generations=4))
    assert out["completion_ids"][:4] == [
        [2, 0],
        [2, 1],
        [2, 2],
        [2, 3],
    ]  # a's group, as the filter sampled it
    assert keep.held.count == 0
    out = keep.rollout(for_trl + for_trl, SimpleNamespace(num_generations=4))  # nothing held now
    assert out["completion_ids"] == [[1, i] for i in range(4)] * 2 and out["prompt_ids"] == [[7]] * 8
    counts = [json.loads(line)["groups"] for line in (tmp_path / F.FRONTIER_LOG).read_text().splitlines()[1:]]
    assert counts == [{"reused": 1, "resampled": 0}, {"reused": 0, "resampled": 2}]


def test_with_greedy_each_group_ends_with_the_greedy_answer_where_it_is_sampled(tmp_path):
    """grpo.frontier_greedy: the filter's groups, and those TRL asks for that it
    does not hold, are the samples and then the greedy answer; the pass count
    (what keeps a prompt) counts the greedy answer too."""
    import copy

    from PIL import Image
    from trl.data_utils import prepare_multimodal_messages

    keep = make_filter(tmp_path, {})
    keep.reuse = keep.greedy = True
    drawn, judged = [], []

    def generate(rows, samples, greedy=False):
        drawn.append((len(rows), samples, greedy))
        mark = 9 if greedy else 1
        ids = [[mark, i] for i in range(samples * len(rows))]
        return F.Sampled([[7]] * len(rows), ids, [str(i) for i in ids])

    keep.generate = generate
    group = keep.group([{}, {}], 4)
    assert drawn == [(2, 3, False), (2, 1, True)]
    assert group.completion_ids == [[1, 0], [1, 1], [1, 2], [9, 0], [1, 3], [1, 4], [1, 5], [9, 1]]
    assert group.texts == [str(ids) for ids in group.completion_ids] and group.prompt_ids == [[7], [7]]
    keep.passes = lambda rows, texts: judged.append(texts) or [1] * len(rows)
    red = Image.new("RGB", (8, 8), "red")
    prompt = [
        {"role": "user", "content": [{"type": "image", "text": None}, {"type": "text", "text": "Count."}]}
    ]
    batch = {"item_id": ["a"], "task_template": ["T1_COUNT_GLOBAL"], "prompt": [prompt], "images": [[red]]}
    assert keep(batch) == [True]
    # the greedy answer is judged with the samples
    assert judged == [["[1, 0]", "[1, 1]", "[1, 2]", "[9, 0]"]]
    for_trl = [prepare_multimodal_messages(copy.deepcopy(prompt), images=[red.copy()]) for _ in range(4)]
    held = keep.rollout(for_trl, SimpleNamespace(num_generations=4))["completion_ids"]
    fresh = keep.rollout(for_trl, SimpleNamespace(num_generations=4))["completion_ids"]  # sampled now
    assert held[3] == fresh[3] == [9, 0]
    assert drawn[-2:] == [(1, 3, False), (1, 1, True)]
    assert keep.group([{}], 1).completion_ids == [[1, 0]]  # a lone completion is sampled


def test_the_greedy_answer_is_what_greedy_generate_writes(tiny_model_dir, tiny_train_spec, tmp_path):
    """The filter's greedy member of a group, decoded from a copy of TRL's
    sampling config, is ``generate(do_sample=False)``'s answer; TRL's config is
    left as it was."""
    import itertools

    import pytest

    torch = pytest.importorskip("torch")
    from transformers import GenerationConfig

    from rosetrain.data.hf import stream_dataset
    from rosetrain.models.loading import load_model_and_processor

    model, processor = load_model_and_processor(str(tiny_model_dir), device="cpu", dtype=torch.float32)
    processor.tokenizer.padding_side = "left"
    (tmp_path / "spec.yaml").write_text(tiny_train_spec("t-greedy"))
    rows = list(itertools.islice(iter(stream_dataset(str(tmp_path / "spec.yaml"))), 2))
    trl_config = GenerationConfig(
        do_sample=True,
        temperature=0.7,
        top_k=0,
        max_new_tokens=6,
        pad_token_id=processor.tokenizer.pad_token_id,
    )
    keep = F.FrontierFilter(
        processor,
        samples=3,
        temperature=0.7,
        top_p=1.0,
        max_new_tokens=6,
        output_dir=str(tmp_path),
        reuse=True,
        greedy=True,
    )
    keep.trainer = SimpleNamespace(model=model, generation_config=trl_config, eos_token_ids=None)
    group = keep.group(rows, 3)
    texts = [
        processor.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows
    ]
    inputs = processor(
        text=texts, images=[list(r["images"]) for r in rows], return_tensors="pt", padding=True
    )
    with torch.inference_mode():
        greedy = model.generate(**inputs, do_sample=False, max_new_tokens=6)
    ends = set(keep.end_ids(model))
    expected = [F._up_to_end(ids, ends) for ids in greedy[:, inputs["input_ids"].shape[1] :].tolist()]
    assert [group.completion_ids[2], group.completion_ids[5]] == expected
    assert trl_config.do_sample and trl_config.temperature == 0.7


def test_held_groups_stay_bounded_when_trl_takes_none(monkeypatch):
    monkeypatch.setattr(F, "MAX_PENDING_GROUPS", 3)
    held = F.HeldGroups()
    for key in "abcde":
        held.put(key, [1], [[2]])
    assert list(held.by_key) == ["c", "d", "e"] and held.count == 3
    assert held.take("c", copies=2) is None  # a group of another size is not TRL's
    assert held.take("d", copies=1) == ([1], [[2]]) and held.count == 1


def test_a_completion_ends_at_its_first_end_token_kept_as_trl_cuts_it():
    assert F._up_to_end([5, 6, 9, 0, 0], {0, 9}) == [5, 6, 9]
    assert F._up_to_end([5, 6], {0}) == [5, 6]  # cut by the length limit: all of it


def test_samples_with_each_prompts_prefill_once_are_the_samples_generate_draws(
    tiny_model_dir, tiny_train_spec, tmp_path
):
    """prefill.sample runs each prompt once and copies its cache: with the same
    seed, the very token ids of ``generate(num_return_sequences=n)``, with a
    generation config or with generate's own arguments."""
    import itertools

    import pytest

    torch = pytest.importorskip("torch")
    from transformers import GenerationConfig

    from rosetrain.data.hf import stream_dataset
    from rosetrain.models.loading import load_model_and_processor
    from rosetrain.train.prefill import sample

    model, processor = load_model_and_processor(str(tiny_model_dir), device="cpu", dtype=torch.float32)
    processor.tokenizer.padding_side = "left"
    model.eval()
    assert hasattr(model.model, "rope_deltas")  # the tiny Qwen3-VL: the shortcut is what runs
    (tmp_path / "spec.yaml").write_text(tiny_train_spec("t-prefill"))
    rows = list(itertools.islice(iter(stream_dataset(str(tmp_path / "spec.yaml"))), 3))
    texts = [
        processor.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows
    ]
    inputs = processor(
        text=texts, images=[list(r["images"]) for r in rows], return_tensors="pt", padding=True
    )
    assert len({int(m.sum()) for m in inputs["attention_mask"]}) > 1  # left padding is in the test
    config = GenerationConfig(
        do_sample=True, top_k=0, max_new_tokens=6, pad_token_id=processor.tokenizer.pad_token_id
    )
    arguments = {"do_sample": True, "top_k": 0, "max_new_tokens": 6}
    counted = GenerationConfig(**{**config.to_dict(), "num_return_sequences": 4})
    ways = [  # what sample is given, and what generate is given for the same draws
        ({"generation_config": config}, {"generation_config": counted}),
        (arguments, {**arguments, "num_return_sequences": 4}),
    ]
    for given, plain_generation in ways:
        with torch.inference_mode():
            torch.manual_seed(0)
            plain = model.generate(**inputs, **plain_generation)
            torch.manual_seed(0)
            shared = sample(model, inputs, 4, given)
        assert shared.shape == plain.shape and torch.equal(shared, plain)
    assert config.num_return_sequences in (None, 1)  # the caller's config is left as it was


def test_the_loss_mask_starts_after_the_marker_in_the_completions_text():
    """grpo.loss_from: 0 up to the token that completes the marker's first
    occurrence, 1 after it; no marker, every token trains."""
    tokens = ["<think>", "region", ": R1,C1", "; ins", "ide:", " R1", ",C1", "</think>", "COUNT(1)"]
    ids = list(range(len(tokens)))

    def decode(some):
        return "".join(tokens[i] for i in some)

    assert F.loss_mask(ids, "inside:", decode) == [0] * 5 + [1] * 4
    assert F.loss_mask(ids, "region", decode) == [0, 0] + [1] * 7
    assert F.loss_mask(ids, "odd:", decode) == [1] * 9
    assert F.loss_mask([], "inside:", decode) == []


def test_by_reward_keeps_a_group_that_always_fails_but_earns_different_soft_credit(tmp_path):
    """``grpo.frontier_by: reward``: the filter calls the reward functions as TRL
    does and keeps a group whose weighted totals differ, PASS or not."""
    soft = {"near": 0.5, "far": 0.0, "same": 0.25}

    def pass_reward(completions, **columns):
        return [0.0] * len(completions)

    def soft_reward(completions, item_id, **columns):
        return [soft[text] if item == "a" else 0.25 for text, item in zip(completions, item_id)]

    keep = F.FrontierFilter(
        processor=None,
        samples=2,
        temperature=1.0,
        top_p=1.0,
        max_new_tokens=8,
        output_dir=str(tmp_path),
        rewards=([pass_reward, soft_reward], [1.0, 0.5]),
    )
    keep.generate = lambda rows, samples: F.Sampled([], [], ["near", "far", "same", "same"])
    keep.passes = lambda rows, texts: [0, 0]
    batch = {"item_id": ["a", "b"], "task_template": ["T4_CLICK_VISUAL_REGION"] * 2}
    assert keep(batch) == [True, False]  # a: 0.25 against 0.0; b: 0.125 twice
    assert F.frontier_summary(tmp_path)["V-Clk"] == {"seen": 2, "all_fail": 2, "kept": 1, "live_share": 0.0}


def test_with_gold_an_all_fail_group_is_kept_with_the_gold_completion_first(tmp_path):
    """grpo.frontier_gold: a prompt none of whose samples pass is kept, its group's
    first member replaced by the row's gold completion, tokenized as text and
    ended by the tokenizer's end of turn; a live group keeps its samples; the
    log counts the gold groups per template."""
    import copy

    from PIL import Image
    from trl.data_utils import prepare_multimodal_messages

    class Tokenizer:
        eos_token_id = 5

        def __call__(self, text, add_special_tokens=True):
            assert not add_special_tokens
            return {"input_ids": [ord(c) for c in text]}

    keep = make_filter(tmp_path, {"a": 0, "b": 2, "c": 4})
    keep.processor = SimpleNamespace(tokenizer=Tokenizer())
    keep.reuse = True
    keep.gold = lambda row: f"<{row['answer']}>"
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=[0, 5]))
    keep.trainer = SimpleNamespace(model=model)
    keep.generate = lambda rows, samples: F.Sampled(
        [[7]] * len(rows), [[9, i] for i in range(samples * len(rows))], ["x"] * (samples * len(rows))
    )
    red = Image.new("RGB", (8, 8), "red")
    prompt = [
        {"role": "user", "content": [{"type": "image", "text": None}, {"type": "text", "text": "Count."}]}
    ]
    batch = {
        "item_id": ["a", "b", "c"],
        "answer": ["COUNT(1)", "COUNT(2)", "COUNT(0)"],
        "task_template": ["T4C_COUNT_VISUAL_REGION"] * 3,
        "prompt": [prompt] * 3,
        "images": [[red], [Image.new("RGB", (8, 8), "blue")], [Image.new("RGB", (8, 8), "green")]],
    }
    assert keep(batch) == [True, True, False]  # a by its gold, b live, c all-pass
    for_trl = [prepare_multimodal_messages(copy.deepcopy(prompt), images=[red.copy()]) for _ in range(4)]
    group = keep.rollout(for_trl, SimpleNamespace(num_generations=4))["completion_ids"]
    assert group == [[ord(c) for c in "<COUNT(1)>"] + [5], [9, 1], [9, 2], [9, 3]]
    assert F.frontier_summary(tmp_path)["V-Cnt"] == {
        "seen": 3,
        "all_fail": 1,
        "gold": 1,
        "live": 1,
        "all_pass": 1,
        "live_share": 0.3333,
    }
    # without the tokenizer's end of turn among the ending tokens, the first of them
    model.generation_config.eos_token_id = [3, 4]
    assert keep.turn_end() == 3


def test_the_gold_completion_is_the_sft_target_thinking_first():
    from rosetrain.core.reasoning import reasoned_answer
    from rosetrain.train.grpo import gold_completion

    row = {
        "all_target_cells": ["R1,C2"],
        "region_target_cells": ["R1,C2"],
        "region_type": "VISUAL_REGION",
        "region_params_json": '{"r1": 1, "r2": 1, "c1": 1, "c2": 2}',
        "rows": 3,
        "cols": 3,
        "answer": "CLICK(R1,C2); DONE",
    }
    assert gold_completion(None, row) == "CLICK(R1,C2); DONE"
    thought = gold_completion("cells-seen", row)
    assert thought == reasoned_answer("cells-seen", row) and thought.endswith("</think>CLICK(R1,C2); DONE")
