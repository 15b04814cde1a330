"""The functions an exported task hands to lmms-eval (its ``utils.py`` binds them).

The prompt is ``rosetrain.core.messages.record_messages`` with the image loaded as
``rosetrain eval``'s transformers runner loads it, so a chat model in lmms-eval
sees what ``rosetrain eval`` sends. Each answer is scored by
``rosetrain.scoring.batch.score_predictions`` and every aggregate is a figure of
``rosetrain.scoring.summarize``: the code ``rosetrain score`` runs, so
the numbers equal its ``evaluation_summary.json`` on the same answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.messages import record_messages, split_prompt

CONFIG_FILE = "rosetrain_task.json"


class RoseTask:
    """One exported task: the split it scores against, read lazily and once."""

    def __init__(self, folder: str | Path):
        path = Path(folder) / CONFIG_FILE
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise RosetrainError(
                f"{path}: cannot read the task's settings ({err}); is {folder} a folder "
                "rosetrain export-lmms-eval wrote?"
            ) from None
        self.task: str = config["task"]
        self.data: str = self._data_folder(Path(folder), config)
        self.image_root = Path(self.data) / config.get("image_root", ".")
        self.split: str = config["split"]
        self.bridges: bool | None = config["bridges"]
        self.fingerprint: str = config["data_fingerprint"]
        self.metrics: dict[str, list[str]] = config["metrics"]  # metric name -> key path in the summary
        self._golds: dict[str, dict[str, Any]] | None = None

    @staticmethod
    def _data_folder(folder: Path, config: Mapping[str, Any]) -> str:
        """The split's folder: where it lies relative to the task folder (both moved
        together), else where it was at export (the task folder moved alone)."""
        data = Path(config["data"])
        candidates = (
            [data] if data.is_absolute() else [folder / data, Path(config.get("data_at_export", data))]
        )
        for candidate in candidates:
            if candidate.is_dir():
                return str(candidate.resolve())
        raise RosetrainError(
            f"{folder / CONFIG_FILE}: the split's folder is at neither "
            + " nor ".join(str(c) for c in dict.fromkeys(candidates))
            + "; move it back beside the task folder, or run rosetrain export-lmms-eval again"
        )

    def _with_image(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        """The doc with its image path resolved in the split's folder, wherever that now is."""
        from rosetrain.data.paths import confined_path

        image = confined_path(self.image_root, doc.get("image"), f"item {doc.get('item_id')!r}: image")
        return {**doc, "image": str(image)}

    def golds(self) -> dict[str, dict[str, Any]]:
        """item_id -> gold record, from the split as ``rosetrain score`` reads it."""
        if self._golds is None:
            from rosetrain.data.release import (
                load_split,
                same_fingerprint,
                short_fingerprint,
                split_fingerprint,
            )

            found = split_fingerprint(self.data, self.split, self.bridges)
            if not same_fingerprint(found, self.fingerprint):
                raise RosetrainError(
                    f"{self.data} (split {self.split}): the metadata changed since the task was exported "
                    f"(data {short_fingerprint(found)}, task {short_fingerprint(self.fingerprint)}); "
                    "run rosetrain export-lmms-eval again"
                )
            records = load_split(self.data, self.split, bridges=self.bridges)
            self._golds = {str(r["item_id"]): r for r in records}
        return self._golds

    def doc_to_messages(self, doc: Mapping[str, Any], lmms_eval_specific_kwargs: Any = None) -> list[dict]:
        """lmms-eval's chat format: rosetrain's one user turn, the image part holding the image."""
        from rosetrain.runners.base import load_rgb_image

        messages = record_messages(doc)
        for part in messages[0]["content"]:
            if part["type"] == "image":
                part["url"] = load_rgb_image(self._with_image(doc))
        return messages

    def doc_to_visual(self, doc: Mapping[str, Any]) -> list:
        from rosetrain.runners.base import load_rgb_image

        return [load_rgb_image(self._with_image(doc))]

    def doc_to_text(self, doc: Mapping[str, Any], lmms_eval_specific_kwargs: Any = None) -> str:
        """For lmms-eval's simple (non-chat) models, which place the image themselves."""
        prefix, sentence = split_prompt(doc)
        return f"{prefix.rstrip()}\n\n{sentence}" if prefix else sentence

    def doc_to_target(self, doc: Mapping[str, Any]) -> str:
        return str(doc["answer"])

    def process_results(self, doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
        """The item's scored row (``rosetrain score``'s per-item row), under every metric."""
        from rosetrain.core.reasoning import split_reasoning
        from rosetrain.scoring.batch import score_predictions

        item_id = str(doc["item_id"])
        gold = self.golds().get(item_id)
        if gold is None:
            raise RosetrainError(f"item {item_id!r} is not in {self.data} (split {self.split})")
        # the answer after any <think> block, as `rosetrain eval` scores it
        raw_text = split_reasoning(results[0])[1] if results else None
        prediction = {"item_id": item_id, "raw_text": raw_text, "error": None}
        [row] = score_predictions([gold], {item_id: prediction})
        return {name: row for name in self.metrics}

    def aggregation(self, name: str) -> Callable[[Sequence[Mapping[str, Any]]], Any]:
        """The aggregation of metric ``name``: its figure in ``summarize`` of the scored rows."""
        keys = self.metrics[name]

        def aggregate(rows: Sequence[Mapping[str, Any]]) -> Any:
            from rosetrain.scoring.summaries import summarize

            golds = self.golds()
            value: Any = summarize([golds[str(r["item_id"])] for r in rows], rows)
            for key in keys:  # a template --limit left out has no figure
                value = value.get(key) if isinstance(value, Mapping) else None
            return value

        aggregate.__name__ = f"rosetrain_{name}"
        return aggregate
