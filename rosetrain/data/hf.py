"""The Hugging Face side: Parquet shards TRL can load, and a streaming
``IterableDataset`` that yields the same rows without touching disk.

The schema is declared once (``COLUMNS``) as Arrow types plus the
``datasets`` feature JSON, so the writer needs only pyarrow (fast start) and
``load_dataset("parquet", ...)`` still sees an ``Image`` column.
"""
from __future__ import annotations

import io
import json
from typing import Any, Iterator, Mapping

import pyarrow as pa

from rosetrain.messages import assistant_messages, split_prompt, user_messages

_STR = (pa.string(), {"dtype": "string", "_type": "Value"})
_INT = (pa.int32(), {"dtype": "int32", "_type": "Value"})
_BOOL = (pa.bool_(), {"dtype": "bool", "_type": "Value"})
_STRS = (pa.list_(pa.string()), {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"})
_CONTENT = pa.struct([("type", pa.string()), ("text", pa.string())])
_MESSAGES = (
    pa.list_(pa.struct([("role", pa.string()), ("content", pa.list_(_CONTENT))])),
    {"feature": {"role": _STR[1], "content": {"feature": {"type": _STR[1], "text": _STR[1]},
                                              "_type": "List"}}, "_type": "List"},
)
_IMAGES = (pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
           {"feature": {"_type": "Image"}, "_type": "List"})

COLUMNS = {
    "item_id": _STR, "scene_id": _STR, "task_template": _STR, "task_mode": _STR,
    "prompt": _MESSAGES, "completion": _MESSAGES, "images": _IMAGES, "answer": _STR,
    "rows": _INT, "cols": _INT, "ground_truth_count": _INT, "ground_truth_clicks": _STRS,
    "all_target_cells": _STRS, "region_target_cells": _STRS, "region_type": _STR,
    "region_params_json": _STR, "region_case": _STR, "rose_subset": _STR, "family": _STR,
    "heldout_family": _BOOL, "level": _STR, "grid_size_profile": _STR, "scene_fingerprint": _STR,
}
SCHEMA = pa.schema([(name, arrow) for name, (arrow, _) in COLUMNS.items()]).with_metadata(
    {"huggingface": json.dumps({"info": {"features": {n: f for n, (_, f) in COLUMNS.items()}}})})


def hf_features():
    """The same schema as ``datasets.Features`` (imports datasets)."""
    import datasets

    return datasets.Features.from_dict({n: f for n, (_, f) in COLUMNS.items()})


def png_bytes(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


PNG_COMPRESS_LEVEL = 1  # fast; grids of flat cells compress well even at level 1


def hf_row(record: Mapping[str, Any], image: Any) -> dict[str, Any]:
    """A release record -> a TRL-ready row. ``image`` is PNG bytes (Parquet) or
    a PIL image (streaming)."""
    prefix, sentence = split_prompt(record)
    row = {name: record.get(name) for name in COLUMNS if name in record}
    row.update(
        prompt=user_messages(prefix, sentence),
        completion=assistant_messages(record["answer"]),
        images=[{"bytes": image, "path": None} if isinstance(image, bytes) else image],
        region_params_json=json.dumps(record["region_params"], sort_keys=True),
    )
    for message in row["prompt"] + row["completion"]:  # Arrow structs need every key
        for part in message["content"]:
            part.setdefault("text", None)
    return row


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def load_hf_split(root: str, split: str):
    """The Parquet shards of a generated split as a ``datasets.Dataset``."""
    import glob
    import os

    import datasets

    files = sorted(glob.glob(os.path.join(root, "hf", split, "*.parquet")))
    if not files:
        from rosetrain.errors import RosetrainError

        raise RosetrainError(f"{root}: no Parquet shards under hf/{split}/ "
                             f"(generate with `rosetrain generate --formats release,hf`)")
    return datasets.load_dataset("parquet", data_files={split: files}, split=split)


def iter_rows(spec, seed: int, split: str, start: int = 0, stop: int | None = None,
              heldout_family: str | None = None) -> Iterator[dict[str, Any]]:
    """Rows of scenes ``start, start+1, ...`` generated on the fly (PIL images)."""
    from rosetrain.examples import build_example

    index = start
    while stop is None or index < stop:
        example = build_example(spec, seed, index, split, heldout_family=heldout_family)
        for record in example.records:
            yield hf_row(record, example.images[record["image_id"]])
        index += 1


def stream_dataset(spec_path: str, split: str = "train", seed: int = 0, start: int = 0,
                   stop: int | None = None):
    """An unlimited ``datasets.IterableDataset`` over a spec: the same rows the
    Parquet writer would write, for training without disk."""
    import datasets

    from rosetrain.spec import check_training_spec, load_spec

    spec = load_spec(spec_path)
    heldout = check_training_spec(spec)
    heldout_family = spec.heldout_family if spec.role == "heldout" else (heldout and heldout.heldout_family)
    return datasets.IterableDataset.from_generator(
        iter_rows, features=hf_features(),
        gen_kwargs={"spec": spec, "seed": seed, "split": split, "start": start, "stop": stop,
                    "heldout_family": heldout_family})
