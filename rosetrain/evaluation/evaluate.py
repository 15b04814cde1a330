"""Run a model over a split, writing predictions as it goes, then score it.

The library behind ``rosetrain eval`` (and the demo): :func:`evaluate` takes a
model name or a ready runner object and a split; eval suites (``eval/*.yaml``)
name the split. The run folder gets ``predictions.jsonl`` (appended item by
item, so a rerun of the same call skips what is done), ``eval_run.json`` (what
ran and how fast), and what ``rosetrain score`` writes (``per_item_eval.jsonl``,
``evaluation_summary.json``, Markdown and CSV tables).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosetrain.core import config
from rosetrain.core.config import check_fields, setting
from rosetrain.core.errors import RosetrainError
from rosetrain.core.formats import pct
from rosetrain.core.reasoning import CLOSE, split_reasoning
from rosetrain.data.predictions import PredictionWriter, prediction_row
from rosetrain.data.release import select_records, split_fingerprint, with_image_paths
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS

PREDICTIONS_FILE = "predictions.jsonl"
RUN_FILE = "eval_run.json"
DEFAULT_BATCH_SIZE = {"transformers": 8, "vllm": 256, "openai": 32}
SUITE_NOT_KEYS = frozenset({"source"})


@dataclass
class EvalSuite:
    """An ``eval/*.yaml`` file: which split to evaluate on, and how to get it:
    ``data`` (a local folder) or, without it, ``hub_dataset`` (a dataset repo
    OWNER/NAME on the Hugging Face Hub, at ``revision``, read from the local
    Hub cache and downloaded into it when missing). Keys, types and ranges are
    checked by :mod:`rosetrain.core.config`."""

    name: str = setting(help="the suite's name")
    data: str | None = setting(None, "a local ROSE release folder")
    split: str = setting("test", "the split to evaluate")
    description: str = setting("", "free text")
    limit: int | None = setting(None, "only the first N items of the split", low=1, high=10**12)
    max_new_tokens: int | None = setting(None, "the answer length (default: eval's)", low=1, high=1_000_000)
    hub_dataset: str | None = setting(None, "or a dataset OWNER/NAME on the Hugging Face Hub")
    revision: str | None = setting(None, "of hub_dataset: a branch, tag or commit (default: main)")
    prepare: str | None = setting(None, "how to create `data` when it is missing")
    source: str = "<suite>"  # the file it came from (not a key)

    def __post_init__(self):
        for field in ("name", "split"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise RosetrainError(f"{self.source}: '{field}' must be a non-empty string")
        for field in ("data", "hub_dataset", "revision"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value):
                raise RosetrainError(f"{self.source}: '{field}' must be a non-empty string or null")
        try:
            check_fields(self, hidden=SUITE_NOT_KEYS)
        except ValueError as err:
            raise RosetrainError(f"{self.source}: {err}") from None
        if self.data is None and self.hub_dataset is None:
            raise RosetrainError(
                f"{self.source}: give 'data' (a local release folder) or 'hub_dataset' "
                "(a dataset OWNER/NAME on the Hugging Face Hub)"
            )

    def data_dir(self) -> Path:
        """``data``, or the snapshot of ``hub_dataset`` in the local Hub cache
        (downloaded when missing and the Hub can be reached)."""
        if self.data is None:
            from rosetrain.data.hub import hub_snapshot

            return hub_snapshot(self.hub_dataset, self.revision, f"{self.source}: hub_dataset")
        path = Path(self.data).expanduser()
        if not path.is_dir():
            hint = f" ({self.prepare})" if self.prepare else ""
            raise RosetrainError(f"{self.source}: data folder {path} does not exist{hint}")
        return path


def load_suite(path: str | Path) -> EvalSuite:
    from rosetrain.core.io import read_yaml_mapping

    path = Path(path)
    if not path.is_file():
        raise RosetrainError(f"suite: no such file: {path}", argument="suite")
    keys = config.valid_keys(EvalSuite, SUITE_NOT_KEYS)
    raw = read_yaml_mapping(path, "suite", expected=f"a mapping of {', '.join(keys)}")
    for key in raw:
        if key not in keys:
            raise RosetrainError(f"{path}: {config.unknown_key(key, keys)}")
    if "name" not in raw:
        raise RosetrainError(f"{path}: 'name' is missing")
    return EvalSuite(**raw, source=str(path))


def answers_as_they_come(runner, records: Sequence[Mapping[str, Any]], batch_size: int):
    """(record, (raw_text, error)) pairs: streamed when the runner can, else batch by batch."""
    if hasattr(runner, "generate_stream"):
        yield from runner.generate_stream(records)
        return
    for start in range(0, len(records), batch_size):
        batch = records[start : start + batch_size]
        answers = runner.generate(batch)
        if len(answers) != len(batch):
            raise RuntimeError(f"runner {runner.name} returned {len(answers)} answers for {len(batch)} items")
        yield from zip(batch, answers)


def run_model(
    runner,
    records: Sequence[Mapping[str, Any]],
    writer: PredictionWriter,
    *,
    batch_size: int,
    progress: bool = True,
) -> dict[str, Any]:
    """Ask ``runner`` for every record not yet in ``writer``; write each answer as it comes."""
    from tqdm import tqdm

    todo = [r for r in records if r["item_id"] not in writer.done]
    # A fresh run whose first batch fails completely is misconfigured (wrong URL,
    # key or model name): stop instead of recording the same error for every item.
    check_after = 0 if writer.done else min(batch_size, len(todo))
    bar = tqdm(
        total=len(records),
        initial=len(records) - len(todo),
        unit="item",
        desc=f"eval {runner.name}",
        disable=not progress,
        dynamic_ncols=True,
        file=sys.stderr,
    )
    started, answered, failed, first_error, cut = time.perf_counter(), 0, 0, None, 0
    with bar:
        for record, (text, error) in answers_as_they_come(runner, todo, batch_size):
            reasoning, raw_text = split_reasoning(text)  # the answer is scored, the thinking kept
            writer.write(prediction_row(record["item_id"], raw_text, runner.name, error, reasoning=reasoning))
            cut += reasoning is not None and CLOSE not in text  # the token limit stopped its thinking
            answered, failed = answered + 1, failed + bool(error)
            first_error = first_error or error
            if answered == check_after and failed == answered:
                raise RosetrainError(
                    f"all {failed} items of the first batch failed; first error: {first_error}"
                )
            bar.update(1)
    seconds = time.perf_counter() - started
    return {
        "items_run": answered,
        "items_failed": failed,
        "items_skipped": len(records) - len(todo),
        "items_cut_thinking": cut,
        "seconds": round(seconds, 3),
        "items_per_s": round(answered / seconds, 3) if answered and seconds > 0 else None,
    }


def _check_same_model(writer: PredictionWriter, name: str, path: Path) -> None:
    others = {row.get("model") for row in writer.rows.values()} - {name}
    if others:
        raise RosetrainError(
            f"{path} holds predictions of {sorted(map(str, others))[0]!r}, "
            f"not {name!r}; use another output folder",
            argument="out_dir",
        )


def only_items(records: Sequence[dict[str, Any]], items: Sequence[str], where: str) -> list[dict[str, Any]]:
    """The records of ``items``, in the split's order; an id the split lacks is an error."""
    wanted = set(items)
    kept = [r for r in records if str(r["item_id"]) in wanted]
    if len(kept) < len(wanted):
        missing = sorted(wanted - {str(r["item_id"]) for r in kept})
        raise RosetrainError(
            f"items: {len(missing)} of the {len(wanted)} item ids are not in {where}, e.g. {missing[0]!r}",
            argument="items",
        )
    return kept


def items_identity(items: Sequence[str]) -> str:
    """How eval_run.json names a chosen set of items: their number and a digest."""
    import hashlib

    digest = hashlib.sha256("\n".join(sorted(set(items))).encode()).hexdigest()[:16]
    return f"{len(set(items))} ids, sha256 {digest}"


def evaluate(
    model: str,
    data_dir: str | Path,
    split: str = "test",
    out_dir: str | Path = "runs/eval",
    *,
    runner: Any = "transformers",
    limit: int | None = None,
    items: Sequence[str] | None = None,
    batch_size: int | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    concurrency: int = 8,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    trust_remote_code: bool = False,
    bridges: bool | None = None,
    progress: bool = True,
    runner_options: Mapping[str, Any] | None = None,
    max_error_rate: float = 0.0,
) -> dict[str, Any]:
    """Run ``model`` over the split (resuming), score it, and return the evaluation summary.

    ``runner`` is a runner name (``transformers``, ``vllm``, ``openai``) or a
    ready runner object (anything with ``name`` and ``generate``), e.g. a model
    already loaded in this process. The model is loaded only when items remain.
    ``eval_run.json`` records what this call ran and how fast. Items whose
    request still failed after retries are left out of the figures; when they
    are more than ``max_error_rate`` of the items, the results are written and
    then a RosetrainError says so (a rerun asks those items again).
    """
    from rosetrain.core.io import atomic_write, claim_outputs, output_lock, remove_atomic_temps
    from rosetrain.core.jsonio import json_text
    from rosetrain.data.hub import data_identity

    out = Path(out_dir)
    records, image_root = select_records(data_dir, split, limit, bridges)
    if items is not None:
        records = only_items(records, items, f"{data_dir} (split {split})")
    data = Data(str(data_dir), split, split_fingerprint(data_dir, split, bridges))
    kind = runner if isinstance(runner, str) else "custom"
    batch_size = batch_size or DEFAULT_BATCH_SIZE.get(kind, 8)
    if batch_size < 1:
        raise RosetrainError(f"batch_size must be at least 1, got {batch_size}", argument="batch_size")

    def build_runner():
        if not isinstance(runner, str):
            return runner
        from rosetrain.runners import make_runner

        return make_runner(
            kind,
            model,
            max_new_tokens=max_new_tokens,
            trust_remote_code=trust_remote_code,
            base_url=base_url,
            api_key_env=api_key_env,
            concurrency=concurrency,
            **dict(runner_options or {}),
        )

    name = model if isinstance(runner, str) else runner.name
    identity = data_identity(data_dir, split)
    settings = {
        "model": name,
        "runner": kind,
        "data": str(data_dir),
        "dataset_repo_id": identity["repo_id"],
        "dataset_revision": identity["revision"],
        "split": split,
        "data_fingerprint": data.fingerprint,
        "limit": limit,
        "items": None if items is None else items_identity(items),
        "bridges": bridges,
        "batch_size": batch_size,
        "max_new_tokens": max_new_tokens,
    }
    with output_lock(out, "this eval run"):  # a second eval into `out` is refused
        remove_atomic_temps(out)  # half-written files of a killed run
        claim_outputs(out / PREDICTIONS_FILE, out / RUN_FILE)  # never appended to a foreign file
        check_same_settings(out, settings)
        atomic_write(out / RUN_FILE, json_text({**settings, "finished": False}))
        predictions, stats = predict_missing(
            build_runner,
            name,
            with_image_paths(records, image_root),
            out / PREDICTIONS_FILE,
            batch_size=batch_size,
            progress=progress,
            close=isinstance(runner, str),
            data=data,
        )
        summary = score_run(out, records, predictions, data, {**settings, **stats})
    check_error_rate(summary, max_error_rate, out)
    return summary


# Settings that change a model's answers: predictions made with others are not reused.
ANSWER_SETTINGS = ("runner", "max_new_tokens")


def check_same_settings(out: Path, settings: Mapping[str, Any]) -> None:
    """Refuse to resume a run folder whose predictions were made with other
    answer-changing settings (the model and the data are checked row by row)."""
    import json

    previous_file = out / RUN_FILE
    if not (out / PREDICTIONS_FILE).is_file() or not previous_file.is_file():
        return
    try:
        previous = json.loads(previous_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise RosetrainError(
            f"{previous_file}: not readable JSON; it records how the "
            "predictions beside it were made; use another output folder",
            argument="out_dir",
        ) from None
    if not isinstance(previous, dict) or previous.get("runner") == "custom":
        return  # a runner object's own settings are not known here
    if not has_answers(out / PREDICTIONS_FILE):
        return  # nothing answered (a runner that failed to start): another runner may retry here
    for key in ANSWER_SETTINGS:
        if key in previous and previous[key] != settings[key]:
            raise RosetrainError(
                f"{out}: its predictions were made with {key} {previous[key]!r}, this run asks "
                f"for {settings[key]!r}; use another output folder, or the same {key}",
                argument="out_dir",
            )


def has_answers(path: Path) -> bool:
    """Whether a predictions file holds one answered row (not only failed requests,
    which a rerun asks again whatever the runner)."""
    import json

    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed run
            if isinstance(row, dict) and not row.get("error"):
                return True
    return False


@dataclass(frozen=True)
class Data:
    """The split a run belongs to: where it was read from and its content fingerprint."""

    path: str
    split: str
    fingerprint: str

    def __str__(self) -> str:
        return f"{self.path} (split {self.split})"


def score_run(
    out: Path,
    records: Sequence[Mapping[str, Any]],
    predictions: Mapping[str, Any],
    data: Data,
    run_info: Mapping[str, Any],
) -> dict[str, Any]:
    """Score the predictions into ``out``; ``eval_run.json`` records what ran and how fast."""
    from rosetrain.core.io import atomic_write
    from rosetrain.core.jsonio import json_text
    from rosetrain.data.release import split_files
    from rosetrain.scoring.batch import score_predictions
    from rosetrain.scoring.official_files import RunInfo
    from rosetrain.scoring.writer import write_scored_run

    rows = score_predictions(records, predictions, model=run_info["model"])
    names = RunInfo(
        model=run_info["model"],
        split=run_info["split"],
        predictions_jsonl=str(out / PREDICTIONS_FILE),
        metadata_jsonl=str(split_files(run_info["data"], run_info["split"], run_info["bridges"])[0]),
        data={
            "data": run_info["data"],
            "repo_id": run_info.get("dataset_repo_id"),
            "revision": run_info.get("dataset_revision"),
        },
    )
    summary = write_scored_run(out, records, rows, names, data_fingerprint=data.fingerprint)
    atomic_write(out / RUN_FILE, json_text({**run_info, "n_errors": summary["n_errors"], "finished": True}))
    return summary


def check_error_rate(summary: Mapping[str, Any], max_error_rate: float, out: Path) -> None:
    """Fail when more items errored than the user allows (default: none)."""
    errors, total = summary["n_errors"], summary["n_expected"]
    if errors and errors > max_error_rate * total:
        first = summary["error_examples"][0]
        raise RosetrainError(
            f"{errors} of {total} items ({pct(errors / total)}%) got no answer after "
            f"retries (first: {first['item_id']}: {first['error']}); the figures in {out} "
            f"leave them out; run the same command again to retry them, or set "
            f"max_error_rate={errors / total:.3g} to accept this",
            argument="max_error_rate",
        )


def predict_missing(
    build_runner,
    name: str,
    records: Sequence[Mapping[str, Any]],
    path: Path,
    *,
    batch_size: int,
    progress: bool,
    close: bool,
    data: Data | None = None,
) -> tuple[dict, dict]:
    """Predictions for ``records`` (id -> row) from ``path``, running the model
    (built by ``build_runner()``, only if needed) for the items it lacks.
    With ``data``, rows made on other data are refused, never reused."""
    stats = {
        "items_run": 0,
        "items_failed": 0,
        "items_skipped": len(records),
        "seconds": 0.0,
        "items_per_s": None,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fingerprint = data.fingerprint if data else None
    with PredictionWriter(path, data_fingerprint=fingerprint, data=str(data)) as writer:
        _check_same_model(writer, name, path)
        if any(r["item_id"] not in writer.done for r in records):
            runner = build_runner()
            try:
                stats = run_model(runner, records, writer, batch_size=batch_size, progress=progress)
            finally:
                if close and hasattr(runner, "close"):
                    runner.close()
        wanted = {r["item_id"] for r in records}  # an earlier, larger run may hold more
        return {i: row for i, row in writer.rows.items() if i in wanted}, stats
