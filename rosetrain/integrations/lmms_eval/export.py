"""Write an lmms-eval task folder for a rosetrain split, and read its samples back.

The folder holds ``<task>.yaml`` (lmms-eval's task config), ``utils.py`` (binds
the functions of :mod:`rosetrain.integrations.lmms_eval.task`),
``rosetrain_task.json`` (the split and its fingerprint, the metrics) and
``docs_<split>.jsonl``: one small row per item (id, template, image path as the
split's metadata gives it, prompt fields, gold answer), which lmms-eval loads
through ``datasets``' JSON builder. The gold records themselves are read from
the split when scoring, so the full metadata (large integers, nested fields)
never passes through Arrow's type inference.

The folder is relocatable: the YAML names its docs file relative to itself
(lmms-eval resolves a local builder's ``data_files`` against the YAML's
folder), and ``rosetrain_task.json`` names the split relative to the task
folder, with the absolute path at export as the fallback, so the task runs
after the task folder moves alone or with its data.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import atomic_write, claim_outputs, iter_jsonl, output_lock
from rosetrain.core.jsonio import jsonl_text
from rosetrain.core.protocol import ACTION_TEMPLATES, COUNTING_TEMPLATES, MAIN_TEMPLATES, SHORT_NAME
from rosetrain.integrations.lmms_eval.task import CONFIG_FILE, RoseTask
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS

DOC_FIELDS = ("item_id", "task_template", "image", "prompt", "prompt_global", "prompt_local")
# lmms-eval metric name (the paper's, as rosetrain's console prints them) -> key
# path in rosetrain's evaluation_summary.json
HEADLINE = {
    "Avg": ["avg_pass"],
    "Counting": ["counting_avg"],
    "Action": ["action_avg"],
    "Gap": ["gap"],
    "VALID": ["valid"],
    "SOFT": ["soft"],
}
UTILS = '''"""Written by `rosetrain export-lmms-eval`: binds rosetrain's task functions
(rosetrain.integrations.lmms_eval.task) to the names the task's YAML names."""

from pathlib import Path

from rosetrain.integrations.lmms_eval.task import RoseTask

_task = RoseTask(Path(__file__).resolve().parent)
doc_to_messages = _task.doc_to_messages
doc_to_visual = _task.doc_to_visual
doc_to_text = _task.doc_to_text
doc_to_target = _task.doc_to_target
process_results = _task.process_results
'''


def metric_name(template: str) -> str:
    """``G-Cnt`` for ``T1_COUNT_GLOBAL``: the paper's name of the template (its PASS)."""
    return SHORT_NAME.get(template, template)


def function_name(metric: str) -> str:
    """``aggregate_G_Cnt``: the metric's aggregation, as a Python name in utils.py."""
    return "aggregate_" + re.sub(r"\W", "_", metric)


def task_metrics(templates: Iterable[str]) -> dict[str, list[str]]:
    """The figures the split's templates define: the headline ones, then PASS per template."""
    present = set(templates)
    needs = {"Avg": MAIN_TEMPLATES, "Counting": COUNTING_TEMPLATES, "Action": ACTION_TEMPLATES}
    metrics = {}
    for name, keys in HEADLINE.items():
        if name == "Gap" and not (present & set(COUNTING_TEMPLATES) and present & set(ACTION_TEMPLATES)):
            continue
        if name in needs and not present & set(needs[name]):
            continue
        metrics[name] = keys
    from rosetrain.scoring.metrics import template_order

    for template in template_order(present):
        metrics[metric_name(template)] = ["templates", template, "pass"]
    return metrics


def doc_row(record: dict[str, Any]) -> dict[str, Any]:
    row = {field: record.get(field) for field in DOC_FIELDS}
    row["answer"] = record.get("answer") or record.get("ground_truth_formal_answer") or ""
    return row


def task_yaml(task: str, docs: str, metrics: Iterable[str], max_new_tokens: int) -> str:
    """lmms-eval's task config; ``docs`` relative to it. JSON strings are valid
    YAML scalars, so names need no escaping."""
    lines = [
        "# Written by `rosetrain export-lmms-eval`; scored by rosetrain's scorer (utils.py).",
        f"task: {json.dumps(task)}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {json.dumps(docs)}",
        "test_split: test",
        "output_type: generate_until",
        "doc_to_messages: !function utils.doc_to_messages",
        "doc_to_visual: !function utils.doc_to_visual",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_target: !function utils.doc_to_target",
        "process_results: !function utils.process_results",
        "generation_kwargs:  # greedy, as rosetrain eval",
        f"  max_new_tokens: {max_new_tokens}",
        "  temperature: 0",
        "  do_sample: false",
        "metric_list:",
    ]
    for name in metrics:
        lines += [
            f"  - metric: {json.dumps(name)}",
            f"    aggregation: !function utils.{function_name(name)}",
            "    higher_is_better: " + ("false" if name == "Gap" else "true"),
        ]
    lines += ["metadata:", "  version: 1"]
    return "\n".join(lines) + "\n"


def export_task(
    data: str | os.PathLike,
    split: str,
    out: str | os.PathLike,
    task: str | None = None,
    bridges: bool | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
) -> Path:
    """Write the task folder ``out`` for ``split`` of ``data``; return its YAML's path.

    ``task`` names the task for ``lmms-eval --tasks`` (default ``rosetrain_<split>``).
    """
    from rosetrain.data.release import select_records, split_fingerprint, with_image_paths

    task = f"rosetrain_{split}" if task is None else task  # "" (an unset shell variable) is refused
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", task):
        raise RosetrainError(
            f"task: {task!r} is not a plain task name (letters, digits, '_', '-', '.')", argument="task"
        )
    data = Path(data).resolve()
    records, image_root = select_records(data, split, None, bridges)
    out = Path(out).resolve()
    docs = out / f"docs_{split}.jsonl"
    metrics = task_metrics(r["task_template"] for r in records)
    with_image_paths(records, image_root)  # every image inside the split's folder, or one clear error
    config = {
        "task": task,
        "data": os.path.relpath(data, out),
        "data_at_export": str(data),
        "image_root": os.path.relpath(image_root, data),
        "split": split,
        "bridges": bridges,
        "data_fingerprint": split_fingerprint(data, split, bridges),
        "metrics": metrics,
    }
    rows = [doc_row(r) for r in records]
    yaml_path = out / f"{task}.yaml"
    with output_lock(out, "this task folder"):  # replaces only files rosetrain wrote there
        claim_outputs(docs, out / CONFIG_FILE, out / "utils.py", yaml_path)
        atomic_write(docs, jsonl_text(rows))
        atomic_write(out / CONFIG_FILE, json.dumps(config, indent=2) + "\n")
        bindings = "".join(f"{function_name(name)} = _task.aggregation({name!r})\n" for name in metrics)
        atomic_write(out / "utils.py", UTILS + bindings)
        atomic_write(yaml_path, task_yaml(task, docs.name, metrics, max_new_tokens))
    return yaml_path


def samples_files(output: str | os.PathLike, task: str) -> list[Path]:
    """The ``*_samples_<task>.jsonl`` files under an lmms-eval ``--output_path`` (or that one file)."""
    output = Path(output)
    if output.is_file():
        return [output]
    found = sorted(output.rglob(f"*_samples_{task}.jsonl"))
    if not found:
        raise RosetrainError(f"{output}: no *_samples_{task}.jsonl (did lmms-eval run with --log_samples?)")
    return found


def predictions_from_samples(
    samples: str | os.PathLike, task_dir: str | os.PathLike, model: str | None = None
) -> list[dict[str, Any]]:
    """Prediction rows (``rosetrain score``'s input) from an lmms-eval run of the
    task in ``task_dir``: each sample's answer as the task scored it
    (``filtered_resps``), under the item id of its ``doc_id``. ``samples`` is the
    run's ``--output_path`` or one samples file; a folder holding several runs of
    the task is an error, since their answers would mix.
    """
    task_dir = Path(task_dir)
    config = RoseTask(task_dir)
    files = samples_files(samples, config.task)
    if len(files) > 1:
        raise RosetrainError(f"{samples}: {len(files)} samples files of {config.task}; name one of them")
    docs = [row for _, row in iter_jsonl(task_dir / f"docs_{config.split}.jsonl")]
    item_ids = [row["item_id"] for row in docs]
    rows = []
    seen: dict[int, int] = {}  # doc_id -> the line that answered it
    for number, sample in iter_jsonl(files[0]):
        doc_id, answer = sample.get("doc_id"), sample.get("filtered_resps")
        if not isinstance(doc_id, int) or not 0 <= doc_id < len(item_ids):
            raise RosetrainError(f"{files[0]}:{number}: doc_id {doc_id!r} is not an item of {task_dir}")
        _check_same_doc(sample, docs[doc_id], f"{files[0]}:{number}", task_dir)
        if doc_id in seen:
            raise RosetrainError(
                f"{files[0]}:{number}: doc_id {doc_id} already answered at line {seen[doc_id]}"
            )
        seen[doc_id] = number
        if isinstance(answer, list):  # lmms-eval unwraps a single response; some versions keep the list
            answer = answer[0] if answer else None
        rows.append(
            {
                "item_id": item_ids[doc_id],
                "raw_text": answer,
                "model": model,
                "error": None,
                "data_fingerprint": config.fingerprint,
            }
        )
    return rows


def _check_same_doc(sample: dict[str, Any], doc: dict[str, Any], where: str, task_dir: Path) -> None:
    """A doc_id is a position in the docs file: a sample is this task folder's only
    when the doc lmms-eval logged with it (its item_id) or, without one, its target
    (the gold answer) is this folder's; a run of another export would otherwise be
    scored against the wrong items."""
    logged = sample.get("doc")
    if isinstance(logged, dict) and "item_id" in logged:
        if str(logged["item_id"]) != str(doc["item_id"]):
            raise RosetrainError(
                f"{where}: doc_id {sample['doc_id']} is item {logged['item_id']!r} in the run, "
                f"{doc['item_id']!r} in {task_dir}: the samples are of another export of the task"
            )
    elif "target" in sample:
        if str(sample["target"]) != str(doc.get("answer")):
            raise RosetrainError(
                f"{where}: doc_id {sample['doc_id']}'s target is not the answer of item "
                f"{doc['item_id']!r} in {task_dir}: the samples are of another export of the task"
            )
    else:
        raise RosetrainError(
            f"{where}: the sample logs neither its doc nor its target, so rosetrain cannot check "
            f"that doc_id {sample.get('doc_id')} is item {doc['item_id']!r} of {task_dir}"
        )
