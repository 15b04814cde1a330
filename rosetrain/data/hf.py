"""The Hugging Face side: Parquet shards TRL can load, and a streaming
``IterableDataset`` that yields the same rows without touching disk.

The schema is declared once (``COLUMNS``) as Arrow types plus the
``datasets`` feature JSON, so the writer needs only pyarrow (fast start) and
``load_dataset("parquet", ...)`` still sees an ``Image`` column.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from rosetrain.core.messages import assistant_messages, split_prompt, user_messages

_STR = (pa.string(), {"dtype": "string", "_type": "Value"})
_INT = (pa.int32(), {"dtype": "int32", "_type": "Value"})
_BOOL = (pa.bool_(), {"dtype": "bool", "_type": "Value"})
_STRS = (pa.list_(pa.string()), {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"})
_FLOATS = (pa.list_(pa.float64()), {"feature": {"dtype": "float64", "_type": "Value"}, "_type": "List"})
_CONTENT = pa.struct([("type", pa.string()), ("text", pa.string())])
_MESSAGES = (
    pa.list_(pa.struct([("role", pa.string()), ("content", pa.list_(_CONTENT))])),
    {
        "feature": {
            "role": _STR[1],
            "content": {"feature": {"type": _STR[1], "text": _STR[1]}, "_type": "List"},
        },
        "_type": "List",
    },
)
_IMAGES = (
    pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
    {"feature": {"_type": "Image"}, "_type": "List"},
)

COLUMNS = {
    "item_id": _STR,
    "scene_id": _STR,
    "task_template": _STR,
    "task_mode": _STR,
    "prompt": _MESSAGES,
    "completion": _MESSAGES,
    "images": _IMAGES,
    "answer": _STR,
    "rows": _INT,
    "cols": _INT,
    "ground_truth_count": _INT,
    "ground_truth_clicks": _STRS,
    "all_target_cells": _STRS,
    "region_target_cells": _STRS,
    "region_type": _STR,
    "region_params_json": _STR,
    "region_case": _STR,
    "rose_subset": _STR,
    "family": _STR,
    "heldout_family": _BOOL,
    "level": _STR,
    "grid_size_profile": _STR,
    "scene_fingerprint": _STR,
    # the two looks' hues (majority, exception) of an attribute scene: what lets
    # training check a folder's action rows against a held-out palette band
    "hues": _FLOATS,
}
SCHEMA = pa.schema([(name, arrow) for name, (arrow, _) in COLUMNS.items()]).with_metadata(
    {"huggingface": json.dumps({"info": {"features": {n: f for n, (_, f) in COLUMNS.items()}}})}
)


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
    row: dict[str, Any] = {name: record.get(name) for name in COLUMNS if name in record}
    row.update(
        prompt=user_messages(prefix, sentence),
        completion=assistant_messages(record["answer"]),
        images=[{"bytes": image, "path": None} if isinstance(image, bytes) else image],
        region_params_json=json.dumps(record["region_params"], sort_keys=True),
        hues=look_hues(record),
    )
    for message in row["prompt"] + row["completion"]:  # Arrow structs need every key
        for part in message["content"]:
            part.setdefault("text", None)
    return row


def look_hues(record: Mapping[str, Any]) -> list[float] | None:
    """The hues of a scene's two looks, where its family draws them (attribute)."""
    hues = []
    for look in (record.get("background_spec"), record.get("target_spec")):
        if not (isinstance(look, Mapping) and isinstance(look.get("hue"), (int, float))):
            return None
        hues.append(float(look["hue"]))
    return hues


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def load_hf_split(root: str, split: str):
    """The Parquet shards of a generated split as a ``datasets.Dataset``."""
    import datasets

    from rosetrain.data.manifest import parquet_files

    files = parquet_files(root, split)
    if not files:
        from rosetrain.core.errors import RosetrainError

        raise RosetrainError(
            f"{root}: no Parquet shards under hf/{split}/ (generate the split with the 'hf' format too)"
        )
    return datasets.load_dataset("parquet", data_files={split: files}, split=split)


STREAM_SHARDS = 64  # fixed: which rows exist never depends on the number of workers or ranks


def scene_indices(shards: Sequence[int], start: int = 0, stop: int | None = None) -> Iterator[int]:
    """The scenes of ``shards`` (scene ``i`` is in shard ``i % STREAM_SHARDS``)
    within ``[start, stop)``, round-robin: round ``k`` gives ``k * STREAM_SHARDS + s``
    for each shard ``s`` in the given order. All the shards in order give
    ``start, start+1, ...``; the shards ``w, w+W, ...`` give ``w, w+W, w+2W, ...``
    (from ``start``)."""
    if not shards:
        return
    for base in itertools.count(start - start % STREAM_SHARDS, STREAM_SHARDS):
        if stop is not None and base >= stop:
            return
        for shard in shards:
            index = base + shard
            if index >= start and (stop is None or index < stop):
                yield index


def iter_rows(
    spec,
    seed: int,
    split: str,
    shards: Sequence[int] = tuple(range(STREAM_SHARDS)),
    start: int = 0,
    stop: int | None = None,
    heldout_family_name: str | None = None,
    exclude: frozenset[str] = frozenset(),
) -> Iterator[dict[str, Any]]:
    """Rows of the scenes of ``shards`` (order: :func:`scene_indices`), generated
    on the fly (PIL images); a scene whose fingerprint is in ``exclude`` is skipped."""
    from rosetrain.generators.records import build_records
    from rosetrain.generators.scene import sample_scene

    for index in scene_indices(shards, start, stop):
        scene = sample_scene(spec, seed, index, split) if exclude else None
        if scene is not None and scene.fingerprint in exclude:
            continue  # checked before rendering: cheap
        example = build_records(
            spec, seed, index, split, heldout_family_name=heldout_family_name, scene=scene
        )
        for record in example.records:
            yield hf_row(record, example.images[record["image_id"]])


def stream_dataset(
    spec_path: str,
    split: str = "train",
    seed: int = 0,
    start: int = 0,
    stop: int | None = None,
    exclude_fingerprints: Iterable[str] = (),
):
    """An unlimited ``datasets.IterableDataset`` over a spec (a YAML path, or the
    name of a shipped spec: ``"curriculum"``): the same rows the Parquet writer
    would write, for training without disk.

    Shards: scene ``i`` belongs to shard ``i % STREAM_SHARDS``. ``datasets``
    hands dataloader workers (and ``split_dataset_by_node`` or accelerate's
    ``shard`` hands ranks) disjoint sets of shards, so no two consumers make
    the same row and together they make exactly the rows of one consumer.
    Order: one consumer reads scenes ``start, start+1, ...``; a consumer holding
    some of the shards reads them round-robin (worker ``w`` of ``W`` reads
    ``w, w+W, w+2W, ...``; see :func:`scene_indices`), so a staged curriculum
    advances at the same pace however many consumers there are. ``shuffle()``
    permutes the shards, the same way in every round. Deterministic for a
    given (spec, seed) and number of consumers.

    Images: each row's ``images`` are the rendered PIL images, handed to the
    collator as they are. The stream declares no ``features``: typed as
    ``datasets.Image``, every image would be PNG-encoded and decoded again on
    its way to the collator (17-18 ms a 16-row batch, more than generating
    its rows, 7 ms: ``benchmarks/train_step.py``), for bytes nobody keeps. The Parquet shards
    keep the typed schema (:func:`hf_features`); ``.cast(hf_features())``
    types a stream the same way.

    Refused: a spec with ``role: heldout``.
    Skipped: scenes whose fingerprint is in ``exclude_fingerprints``, and
    always those of the held-out spec the spec names (``heldout_spec``), so a
    training stream never yields a held-out scene.
    """
    from rosetrain.core.errors import RosetrainError
    from rosetrain.core.resources import find as find_config
    from rosetrain.data.shards import interleaved_dataset
    from rosetrain.generators.heldout import heldout_guard
    from rosetrain.generators.spec import load_spec

    spec = load_spec(find_config("spec", spec_path, option="spec"))  # a path, or a shipped spec's name
    if spec.role == "heldout":
        raise RosetrainError(
            f"{spec_path}: role: heldout; a held-out spec is never streamed for "
            f"training (its scenes are what the model is evaluated on): stream a "
            f"spec with role: train that names it as heldout_spec"
        )
    heldout_family_name, heldout = heldout_guard(spec)
    return interleaved_dataset(
        iter_rows,
        features=None,  # untyped on purpose: see the docstring's "Images"
        gen_kwargs={
            "spec": spec,
            "seed": seed,
            "split": split,
            "shards": list(range(STREAM_SHARDS)),
            "start": start,
            "stop": stop,
            "heldout_family_name": heldout_family_name,
            "exclude": frozenset(exclude_fingerprints) | heldout,
        },
    )
