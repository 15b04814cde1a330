"""A rosetrain split as an lmms-eval task: the exported task scores with rosetrain's
scorer, so lmms-eval's per-item rows and aggregates equal ``rosetrain score``'s."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rosetrain.cli import main as cli_main
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import read_jsonl
from rosetrain.core.protocol import SHORT_NAME
from rosetrain.integrations.lmms_eval import export_task, predictions_from_samples

ROOT = Path(__file__).resolve().parent.parent

# one scene of every template (7 items), images multiples of 28 px for Qwen2.5-VL
SPEC = """
name: lmms
role: eval
namespace: test-lmms
seed: 5
families: [attribute]
rows: [3, 4]
cols: [3, 4]
exceptions: [1, 2]
cell_size: [28, 28]
image_multiple: 28
"""
# the task's metric names (the paper's) -> the key of rosetrain's evaluation_summary.json
FIGURES = {
    "Avg": "avg_pass",
    "Counting": "counting_avg",
    "Action": "action_avg",
    "Gap": "gap",
    "VALID": "valid",
    "SOFT": "soft",
}
NO_LMMS_EVAL = "lmms-eval is not installed (pip install 'rosetrain[lmms-eval]'; make install does)"


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory, write_spec) -> Path:
    root = tmp_path_factory.mktemp("lmms-split")
    command = ["generate", "--spec", str(write_spec(root, SPEC)), "--out", str(root / "data")]
    command += ["--split", "test", "--scenes", "1", "--formats", "release", "--num-proc", "1", "--quiet"]
    assert cli_main(command) == 0
    return root / "data"


def load_utils(task_dir: Path):
    """The exported utils.py, imported as lmms-eval imports it (from its file)."""
    spec = importlib.util.spec_from_file_location(f"utils_{task_dir.name}", task_dir / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rosetrain_score(split_dir: Path, predictions: list[dict], tmp_path: Path) -> tuple[dict, dict]:
    """``rosetrain score`` on ``predictions``: (summary, item_id -> per-item row)."""
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in predictions))
    out = tmp_path / "scored"
    command = ["score", "--data", str(split_dir), "--split", "test", "--predictions", str(path)]
    assert cli_main([*command, "--out", str(out)]) == 0
    summary = json.loads((out / "evaluation_summary.json").read_text())
    return summary, {r["item_id"]: r for r in read_jsonl(out / "per_item_eval.jsonl")}


def rosetrain_figure(summary: dict, name: str):
    if name in FIGURES:
        return summary[FIGURES[name]]
    [template] = [t for t in summary["templates"] if SHORT_NAME[t] == name]
    return summary["templates"][template]["pass"]


def test_task_functions_give_rosetrain_scores_figures(split_dir, tmp_path):
    task_dir = tmp_path / "task"
    yaml_path = export_task(split_dir, "test", task_dir)
    assert yaml_path == task_dir / "rosetrain_test.yaml"
    utils = load_utils(task_dir)
    docs = read_jsonl(task_dir / "docs_test.jsonl")
    assert len(docs) == 7 and all((split_dir / d["image"]).is_file() for d in docs)
    # right answers on every other item, a wrong count or nothing on the rest
    answers = [d["answer"] if i % 2 == 0 else ["COUNT(99)", ""][i % 4 == 1] for i, d in enumerate(docs)]
    scored = [utils.process_results(doc, [answer]) for doc, answer in zip(docs, answers, strict=True)]
    metrics = list(scored[0])
    assert {*FIGURES, "G-Cnt", "L-Clk", "G-Clk"} <= set(metrics)

    predictions = [{"item_id": d["item_id"], "raw_text": a} for d, a in zip(docs, answers, strict=True)]
    summary, per_item = rosetrain_score(split_dir, predictions, tmp_path)
    for row in (s["Avg"] for s in scored):
        same = per_item[row["item_id"]]
        assert (row["pass"], row["unified_soft"], row["format_valid"]) == (
            same["pass"],
            same["unified_soft"],
            same["format_valid"],
        )
    for name in metrics:
        figure = getattr(utils, "aggregate_" + name.replace("-", "_"))([s[name] for s in scored])
        assert figure == rosetrain_figure(summary, name), name
    assert 0 < summary["avg_pass"] < 1  # the comparison saw both outcomes


def test_a_changed_split_or_a_foreign_folder_is_one_clear_error(split_dir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(split_dir, data)
    task_dir = tmp_path / "task"
    export_task(data, "test", task_dir)
    utils = load_utils(task_dir)
    doc = read_jsonl(task_dir / "docs_test.jsonl")[0]
    metadata = data / "metadata_test.jsonl"
    metadata.write_text("".join(metadata.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(RosetrainError, match="changed since the task was exported"):
        utils.process_results(doc, ["COUNT(1)"])
    with pytest.raises(RosetrainError, match="export-lmms-eval wrote"):
        predictions_from_samples(tmp_path, tmp_path)


@pytest.mark.parametrize("task", ["", "../evil", "a b", "x/y", "t;rm"])
def test_a_task_name_that_is_not_plain_is_refused_before_anything_is_written(split_dir, tmp_path, task):
    with pytest.raises(RosetrainError, match="not a plain task name"):
        export_task(split_dir, "test", tmp_path / "task", task=task)
    assert not (tmp_path / "task").exists()


def test_the_task_folder_runs_after_moving_alone_or_with_its_data(split_dir, tmp_path):
    """No absolute path in the folder's files; the split is found beside the task
    (both moved) or where it was at export (the task moved alone)."""
    data = tmp_path / "a" / "data"
    shutil.copytree(split_dir, data)
    export_task(data, "test", tmp_path / "a" / "task")
    for name in ("rosetrain_test.yaml", "docs_test.jsonl"):
        assert str(tmp_path) not in (tmp_path / "a" / "task" / name).read_text(), name
    shutil.move(tmp_path / "a" / "task", tmp_path / "alone")  # the task folder alone
    shutil.move(tmp_path / "a", tmp_path / "b")  # the data, with nothing beside it
    with pytest.raises(RosetrainError, match="neither"):
        load_utils(tmp_path / "alone")
    shutil.copytree(tmp_path / "alone", tmp_path / "b" / "task")  # back beside its data, moved
    utils = load_utils(tmp_path / "b" / "task")
    doc = read_jsonl(tmp_path / "b" / "task" / "docs_test.jsonl")[0]
    assert utils.doc_to_visual(doc)[0].size[0] > 0
    assert utils.process_results(doc, [doc["answer"]])["Avg"]["pass"] == 1
    shutil.rmtree(tmp_path / "b" / "task")
    shutil.move(tmp_path / "b", tmp_path / "a")  # the data where it was at export, the task elsewhere
    utils = load_utils(tmp_path / "alone")
    assert utils.process_results(doc, [doc["answer"]])["Avg"]["pass"] == 1
    # a model that thinks first is scored on its answer, as `rosetrain eval` scores it
    assert utils.process_results(doc, ["<think>odd: none</think>" + doc["answer"]])["Avg"]["pass"] == 1


def test_export_and_scoring_import_neither_torch_nor_lmms_eval(split_dir, tmp_path):
    code = (
        "import sys, rosetrain.cli as c; assert c.main(['export-lmms-eval','--data',sys.argv[1],'--out',sys.argv[2]]) == 0; "
        "import importlib.util as u; s = u.spec_from_file_location('utils', sys.argv[2] + '/utils.py'); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); import json; "
        "doc = json.loads(open(sys.argv[2] + '/docs_test.jsonl').readline()); "
        "m.aggregate_Avg([m.process_results(doc, ['COUNT(1)'])['Avg']]); "
        "heavy = {'torch', 'transformers', 'lmms_eval'} & set(sys.modules); assert not heavy, heavy"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code, str(split_dir), str(tmp_path / "task")], check=True, env=env)


def test_doc_to_messages_renders_what_rosetrain_eval_sends(split_dir, tmp_path, tiny_model_dir):
    pytest.importorskip("lmms_eval", reason=NO_LMMS_EVAL)
    from lmms_eval.protocol import ChatMessages
    from transformers import AutoProcessor

    from rosetrain.core.messages import record_messages
    from rosetrain.data.release import select_records, with_image_paths
    from rosetrain.runners.base import load_rgb_image

    export_task(split_dir, "test", tmp_path / "task")
    utils = load_utils(tmp_path / "task")
    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    records = with_image_paths(*select_records(split_dir, "test", None))
    docs = read_jsonl(tmp_path / "task" / "docs_test.jsonl")
    for record, doc in zip(records, docs, strict=True):
        chat = ChatMessages(messages=utils.doc_to_messages(doc))  # as lmms-eval's chat models read it
        ours = processor.apply_chat_template(
            record_messages(record), tokenize=False, add_generation_prompt=True
        )
        theirs = processor.apply_chat_template(
            chat.to_hf_messages(), tokenize=False, add_generation_prompt=True
        )
        assert theirs == ours
        [image], _, _ = chat.extract_media()
        assert image.tobytes() == load_rgb_image(record).tobytes()


@pytest.mark.slow
def test_lmms_eval_on_a_tiny_model_equals_rosetrain_score(split_dir, tmp_path):
    pytest.importorskip("lmms_eval", reason=NO_LMMS_EVAL)
    pytest.importorskip("decord", reason="lmms-eval's Qwen models import decord (in rosetrain[lmms-eval])")
    from rosetrain.models.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny25", size="tiny", family="qwen2.5-vl")
    task_dir, out = tmp_path / "task", tmp_path / "lmms-out"
    # short answers keep the run fast; every figure below is computed from them either way
    exported = tmp_path / "exported"
    command = ["export-lmms-eval", "--data", str(split_dir), "--out", str(exported), "--max-new-tokens", "6"]
    assert cli_main(command) == 0
    shutil.move(exported, task_dir)  # lmms-eval runs the task from where it was moved to
    # the model's own pixel bounds, as rosetrain eval leaves them (lmms-eval's defaults upscale)
    pixels = json.loads((model / "processor_config.json").read_text())["image_processor"]["size"]
    args = f"pretrained={model},device=cpu,device_map=cpu"
    args += f",min_pixels={pixels['shortest_edge']},max_pixels={pixels['longest_edge']}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    lmms_eval = [sys.executable, "-m", "lmms_eval", "--model", "qwen2_5_vl", "--model_args", args]
    lmms_eval += ["--tasks", "rosetrain_test", "--include_path", str(task_dir), "--batch_size", "1"]
    done = subprocess.run(
        [*lmms_eval, "--log_samples", "--output_path", str(out)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [results_file] = out.rglob("*_results.json")
    [samples_file] = out.rglob("*_samples_rosetrain_test.jsonl")
    results = json.loads(results_file.read_text())["results"]["rosetrain_test"]
    samples = read_jsonl(samples_file)
    assert len(samples) == 7

    predictions = tmp_path / "lmms-predictions.jsonl"
    command = [
        "export-lmms-eval",
        "--samples",
        str(out),
        "--task-dir",
        str(task_dir),
        "--out",
        str(predictions),
    ]
    assert cli_main(command) == 0
    summary, per_item = rosetrain_score(split_dir, read_jsonl(predictions), tmp_path)
    for sample in samples:
        row = sample["Avg"]  # lmms-eval's copy of the item's scored row
        same = per_item[row["item_id"]]
        assert (row["pass"], row["unified_soft"], row["format_valid"]) == (
            same["pass"],
            same["unified_soft"],
            same["format_valid"],
        )
    names = [key.split(",")[0] for key in results if key.endswith(",none") and "_stderr" not in key]
    assert {*FIGURES, "G-Cnt", "Excl-CS"} <= set(names)
    for name in names:
        assert results[f"{name},none"] == rosetrain_figure(summary, name), name
