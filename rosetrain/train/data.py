"""Training and held-out data for a recipe, checked before any training starts.

Training rows are the generators' HF rows (``rosetrain.data.hf``): streamed
from a spec, or read from a generated folder's Parquet shards. Held-out items
are release records (``metadata_<split>.jsonl``) scored with the scorer. The
two never share a scene: a folder that overlaps the held-out split is an
error; a stream skips the held-out split's scenes (it cannot be listed), with
the stream's own exclusion (``stream_dataset(exclude_fingerprints=...)``).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rosetrain.core.errors import RosetrainError, first_line
from rosetrain.core.protocol import TEMPLATES
from rosetrain.data.manifest import parquet_files
from rosetrain.train.recipe import DataConfig, EvalConfig, RecipeError

R = TypeVar("R", bound=Mapping[str, Any])  # a held-out record, of whichever mapping type


def required(value: str | None, field: str) -> str:
    """``value``, which the caller's branch (folder or spec) needs; a recipe
    reaching it unset is named, not passed on as a None path."""
    if value is None:
        raise RecipeError(f"{field}: not set, and this step reads it")
    return value


def check_data(data: DataConfig, config: EvalConfig) -> tuple[list[dict[str, Any]], set[str]]:
    """The training data is usable and apart from the held-out split; returns the
    held-out items to evaluate (``config.items`` of them, spread over templates)
    and the held-out scenes a stream skips. ``eval.folder: null`` turns held-out
    evaluation off, whatever ``eval.every_steps`` says: it is how a user without
    the held-out data runs a shipped recipe."""
    if data.folder is not None:
        check_folder(data)
    else:
        check_spec(data)
    if config.folder is None:
        return [], set()
    heldout = heldout_records(config)
    exclude = {r["scene_fingerprint"] for r in heldout if r.get("scene_fingerprint")}
    band, family = heldout_of_eval(config)
    if data.folder is not None:
        check_no_overlap(folder_fingerprints(data), heldout, data, config)
        check_folder_rows_apart(data, band, family, config)
    else:
        check_stream_apart(data, heldout, config)
        check_spec_apart(data, band, family, config)
    return pick_items(heldout, config.items), exclude


def check_folder(data: DataConfig) -> None:
    folder = folder_path(data)
    if not Path(folder).is_dir():
        state = "is a file, not a folder" if Path(folder).exists() else "does not exist"
        raise RecipeError(f"data.folder: {folder} {state}")
    shards = parquet_files(folder, data.split)
    if not shards:
        raise RecipeError(missing_split(folder, data.split))
    _check_parquet_footers(shards)
    _refuse_heldout_folder(data)


def folder_path(data: DataConfig) -> str:
    """``data.folder`` as a local folder: ``hf://datasets/OWNER/NAME[@REVISION]``
    (a generated split pushed to the Hub) is its snapshot in the local Hub cache."""
    from rosetrain.data.hub import is_hub_uri, resolve_data

    folder = required(data.folder, "data.folder")
    return str(resolve_data(folder, "data.folder")) if is_hub_uri(folder) else folder


def missing_split(folder: str, split: str) -> str:
    """Why a folder has no training rows for ``split``: most often the split's name
    (the folder holds others), else a split generated without the 'hf' format."""
    parquet = sorted({shard.parent.name for shard in Path(folder).glob("hf/*/*.parquet")})
    if parquet:
        return (
            f"data.split: {folder} has no split {split!r} with Parquet shards (hf/{split}/); "
            f"it has {', '.join(repr(name) for name in parquet)}: set data.split to one of them"
        )
    released = sorted(p.name for p in Path(folder).glob("metadata_*.jsonl"))
    made = f" ({', '.join(released[:3])} only)" if released else ""
    return (
        f"data.folder: {folder} has no Parquet shards under hf/{split}/{made}; training reads "
        f"the 'hf' format: generate the split with the formats release,hf"
    )


def _refuse_heldout_folder(data: DataConfig) -> None:
    """A split generated from a ``role: heldout`` spec (its manifest says so) is
    never training data, whatever the recipe evaluates on."""
    from rosetrain.data.manifest import manifest_path, read_manifest

    folder = folder_path(data)
    try:
        manifest = read_manifest(manifest_path(Path(folder), data.split), data.split)
    except RosetrainError as err:
        raise RecipeError(f"data.folder: {err}") from None
    if manifest is not None and manifest.get("role") == "heldout":
        raise RecipeError(
            f"data.folder: {folder} (split {data.split}) was generated from the "
            f"held-out spec {manifest.get('spec')} (role: heldout); never train on it"
        )


def _check_parquet_footers(shards: list[str]) -> None:
    """A truncated or foreign shard fails here, naming it, not inside the trainer."""
    import pyarrow.parquet as pq

    for shard in shards:
        try:
            pq.read_schema(shard)
        except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
            first = first_line(err)
            raise RecipeError(
                f"data.folder: {shard} is not a readable Parquet file ({first}); "
                f"regenerate the folder with rosetrain generate"
            ) from None


def check_spec(data: DataConfig) -> None:
    """The spec loads and its first row generates (fonts, families, regions)."""
    spec = required(data.spec, "data.spec")
    if not Path(spec).is_file():
        state = "is a folder, not a spec file" if Path(spec).is_dir() else "does not exist"
        raise RecipeError(f"data.spec: {spec} {state}")
    try:
        next(iter(_stream(data)))
    except RosetrainError as err:
        raise RecipeError(f"data.spec: {err}") from None
    except Exception as err:  # anything the generator raises means this spec cannot be streamed
        raise RecipeError(f"data.spec: {spec} cannot be generated: {type(err).__name__}: {err}") from None


def _stream(data: DataConfig, exclude_fingerprints: Iterable[str] = ()):
    from rosetrain.data.hf import stream_dataset

    return stream_dataset(
        required(data.spec, "data.spec"),
        split=data.split,
        seed=data.seed,
        exclude_fingerprints=exclude_fingerprints,
    )


def train_dataset(data: DataConfig, exclude_fingerprints: Iterable[str] = (), seed: int = 0):
    """A ``datasets.Dataset`` (folder) or an unlimited ``IterableDataset`` (spec).
    A stream skips the scenes in ``exclude_fingerprints`` (the held-out split's);
    a folder is checked for overlap before training instead (:func:`check_no_overlap`)."""
    if data.folder is not None:
        from rosetrain.data.hf import load_hf_split

        dataset = load_hf_split(folder_path(data), data.split)
        if data.max_rows is not None:
            dataset = dataset.select(range(min(data.max_rows, len(dataset))))
    else:
        dataset = _stream(data, exclude_fingerprints)
        if data.shuffle_buffer > 1:
            dataset = dataset.shuffle(seed=seed, buffer_size=data.shuffle_buffer)
    if data.reasoning is not None:  # only these columns are read: no image is decoded again
        think = functools.partial(reasoned_completion, data.reasoning)
        dataset = dataset.map(think, input_columns=list(REASONING_COLUMNS))
    return dataset


REASONING_COLUMNS = (
    "all_target_cells",
    "region_target_cells",
    "region_type",
    "region_params_json",
    "rows",
    "cols",
    "answer",
)


def reasoned_completion(style: str, *values: Any) -> dict[str, Any]:
    """The row's SFT target thinking first (``data.reasoning``)."""
    from rosetrain.core.messages import assistant_messages
    from rosetrain.core.reasoning import reasoned_answer

    return {"completion": assistant_messages(reasoned_answer(style, dict(zip(REASONING_COLUMNS, values))))}


def folder_fingerprints(data: DataConfig) -> set[str]:
    """Scene fingerprints of a training folder (one Parquet column, no images read)."""
    import pyarrow.parquet as pq

    found: set[str] = set()
    for path in parquet_files(folder_path(data), data.split):
        if "scene_fingerprint" in pq.read_schema(path).names:
            column = pq.read_table(path, columns=["scene_fingerprint"]).column(0)
            found.update(v for v in column.to_pylist() if v)
    return found


def check_stream_apart(data: DataConfig, records: Sequence[Mapping[str, Any]], config: EvalConfig) -> None:
    """A stream drawn from the held-out split's own random scenes (its spec's
    namespace with the split's seed: the same ``item_seed`` at the same scene
    index) would be the held-out split itself: refused, as an overlapping folder
    is. Single scenes that merely look alike are skipped by the stream instead."""
    from rosetrain.generators.scene import derived_seed
    from rosetrain.generators.spec import load_spec

    spec_path = required(data.spec, "data.spec")
    spec = load_spec(spec_path, check_fonts=False)
    for record in records:
        index = record.get("scene_index")
        if isinstance(index, int) and record.get("item_seed") == derived_seed(
            spec.namespace, data.seed, index
        ):
            raise RecipeError(
                f"data.spec: {spec_path} with data.seed {data.seed} streams the scenes of the held-out "
                f"split {config.folder} ({config.split}), e.g. scene {record.get('scene_id')}; "
                f"change data.seed, or train on a spec with its own namespace"
            )


# ------------------------------------------------ the held-out band and family


def heldout_of_eval(config: EvalConfig) -> tuple[tuple[float, float] | None, str | None]:
    """The hue band and family that ``eval.folder`` holds out of the action data:
    what its manifest records (a split of a ``role: heldout`` spec), else what its
    spec names where that spec is still there, unchanged."""
    from rosetrain.data.manifest import manifest_path, read_manifest
    from rosetrain.generators.spec import load_spec, spec_sha256

    folder = required(config.folder, "eval.folder")
    if "://" in folder:  # a Hub split carries no manifest: its rows are checked by scene only
        return None, None
    try:
        manifest = read_manifest(manifest_path(Path(folder), config.split), config.split)
    except RosetrainError as err:
        raise RecipeError(f"eval.folder: {err}") from None
    if not manifest or manifest.get("role") != "heldout":
        return None, None
    band, family = manifest.get("heldout_hue_band"), manifest.get("heldout_family_name")
    if "heldout_hue_band" not in manifest and isinstance(manifest.get("spec"), str):
        try:  # a split made before manifests recorded the band: its spec, if unchanged
            spec = load_spec(manifest["spec"], check_fonts=False)
        except (RosetrainError, ValueError, OSError):
            spec = None
        if spec is not None and spec_sha256(spec) == manifest.get("spec_sha256"):
            band, family = spec.heldout_hue_band, spec.heldout_family_name
    return (tuple(band) if band else None), family  # type: ignore[return-value]


def check_spec_apart(
    data: DataConfig, band: tuple[float, float] | None, family: str | None, config: EvalConfig
) -> None:
    """A streamed spec's action levels keep out what ``eval.folder`` holds out,
    whether or not the spec names a held-out spec itself."""
    from rosetrain.generators.heldout import check_action_levels
    from rosetrain.generators.spec import load_spec

    if band is None and family is None:
        return
    try:
        check_action_levels(
            load_spec(required(data.spec, "data.spec"), check_fonts=False),
            band,
            family,
            f"eval.folder {config.folder}",
        )
    except RosetrainError as err:
        raise RecipeError(f"data.spec: {err}") from None


def check_folder_rows_apart(
    data: DataConfig, band: tuple[float, float] | None, family: str | None, config: EvalConfig
) -> None:
    """No action row of a training folder shows the held-out family, or a look whose
    hue lies in the held-out band: checked on the rows themselves, whatever made them."""
    import pyarrow.parquet as pq

    from rosetrain.core.protocol import COUNT
    from rosetrain.generators.families.attribute import in_hue_band

    if band is None and family is None:
        return
    held = f"held out of the action data by eval.folder {config.folder}"
    for path in parquet_files(folder_path(data), data.split):
        names = set(pq.read_schema(path).names)
        columns = [c for c in ("scene_id", "task_mode", "family", "hues") if c in names]
        for row in pq.read_table(path, columns=columns).to_pylist():
            if row.get("task_mode") == COUNT:
                continue  # counting rows may show every palette and family
            where = f"data.folder: {path}: scene {row.get('scene_id')}"
            if family is not None and row.get("family") == family:
                raise RecipeError(f"{where}: an action row of the family {family!r}, {held}")
            if band is None or row.get("family") != "attribute":
                continue
            if "hues" not in names:
                raise RecipeError(
                    f"data.folder: {path} has no hues column (an older rosetrain made it), so its "
                    f"action rows cannot be checked against the hue band {list(band)} {held}; "
                    f"generate the folder again"
                )
            shown = [hue for hue in row.get("hues") or () if in_hue_band(hue, band)]
            if shown:
                raise RecipeError(
                    f"{where}: an action row shows hue {shown[0]:g}, inside the band {list(band)} {held}; "
                    f"train on data whose action levels exclude it (hue_exclude)"
                )


# ----------------------------------------------------------------- held-out items


def heldout_records(config: EvalConfig) -> list[dict[str, Any]]:
    """Every record of the held-out split, with absolute image paths."""
    from rosetrain.data.hub import resolve_data
    from rosetrain.data.release import select_records, with_image_paths

    given = required(config.folder, "eval.folder")
    folder = resolve_data(given, "eval.folder")  # a held-out split on the Hub: its local snapshot
    if not folder.is_dir():
        state = "is a file, not a folder" if folder.exists() else "does not exist"
        raise RecipeError(f"eval.folder: {given} {state}")
    try:
        # bridges too, wherever they live (the main file, or the release layout's own files)
        records, root = select_records(folder, config.split, None, bridges=True)
    except RosetrainError as err:
        raise RecipeError(f"eval.folder: {err}") from None
    return with_image_paths(records, root)


def pick_items(records: Sequence[R], n: int) -> list[R]:
    """``n`` items spread evenly over templates (round-robin, file order), so a
    small evaluation still shows every template's PASS; the five main templates
    come first in each round, the bridge controls after them."""
    by_template: dict[str, collections.deque[R]] = collections.defaultdict(collections.deque)
    for record in records:
        by_template[record["task_template"]].append(record)
    picked: list[R] = []
    order = [t for t in TEMPLATES if t in by_template] + sorted(set(by_template) - set(TEMPLATES))
    queues = [by_template[t] for t in order]
    while len(picked) < n and any(queues):
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.popleft())
    return picked


def check_no_overlap(
    train_fingerprints: set[str], records: Sequence[Mapping[str, Any]], data: DataConfig, config: EvalConfig
) -> None:
    shared = {r["scene_fingerprint"] for r in records if r.get("scene_fingerprint")} & train_fingerprints
    if shared:
        examples = sorted({r["scene_id"] for r in records if r.get("scene_fingerprint") in shared})
        raise RecipeError(
            f"eval.folder: the held-out split {config.folder} ({config.split}) shares {len(shared)} "
            f"scene(s) with the training data {data.folder} ({data.split}), e.g. scene "
            f"{examples[0]}; regenerate one of them, excluding the other's scenes"
        )
