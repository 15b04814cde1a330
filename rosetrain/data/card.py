"""The dataset card of a generated folder: ``README.md``, as the Hugging Face Hub reads it.

The card's YAML header (written with ``huggingface_hub.DatasetCardData``) is
what the Hub and ``datasets.load_dataset`` read: one config (``datasets`` reads
all of a repo's configs with one builder), over the Parquet shards
(``hf/<split>/``) with their features and row counts, or in a release-only
folder over the ROSE metadata files (bridge files as splits of their own) with
the union of their columns. Its body says which spec (its text embedded),
seed and rosetrain version made each split, how many scenes and rows, the
template and family mix, and the command that remakes it byte for byte.

The card covers every finished split of the folder (its manifest lists its
files; a ``--shard`` job's folder is a part, and gets none). It depends only
on those splits' files and settings: no time, no absolute path, so the same
spec and seed give the same bytes. rosetrain replaces only a card it wrote:
``.parts/card.json`` records the card's sha256 (and each split's command), and
a ``README.md`` that is not that card (the user's own, or one the user edited)
is left as it is.

huggingface_hub, msgspec and pyarrow; never ``datasets`` (it imports pandas, which
``rosetrain generate`` keeps out of its process): the features are written in
the form ``datasets`` writes them, from the schema in :mod:`rosetrain.data.hf`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from rosetrain import __version__
from rosetrain.core.errors import RosetrainError
from rosetrain.core.io import atomic_write, output_lock
from rosetrain.core.protocol import TEMPLATES
from rosetrain.data.bridges import BRIDGE_FILE_TAGS, split_names
from rosetrain.data.manifest import PARTS_DIR, manifest_path, metadata_name, parts_dir, read_manifest

CARD_NAME = "README.md"
OUT = "OUT"  # the card's commands name no output folder: the folder's name is not part of its bytes
RECORD_NAME = f"{PARTS_DIR}/card.json"
LICENSE = "apache-2.0"  # rosetrain's; edit the card to publish under another (an edited card is kept)
TASK_CATEGORIES = ["image-text-to-text", "visual-question-answering"]
TAGS = ["rosetrain", "rose", "synthetic", "grid", "counting", "clicking"]
# datasets accepts only these split names in data_files (rosetrain's may also hold '-')
_HUB_SPLIT = re.compile(r"\w+(\.\w+)*\Z", re.ASCII)
_SIZES: tuple[tuple[int, str], ...] = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
)


# ----------------------------------------------------------------- what a split holds


class _Row(msgspec.Struct):
    """The fields of a metadata row the card counts (msgspec skips the rest unread)."""

    scene_index: int
    task_template: str
    family: str | None = None


_ROW = msgspec.json.Decoder(_Row)


@dataclasses.dataclass
class SplitFacts:
    name: str
    settings: dict[str, Any]  # the split's manifest
    record: dict[str, Any]  # what card.json says of it: command, spec text ({} when unknown)
    scenes: int
    rows: int
    mix: collections.Counter[tuple[str, str]]  # (template, family) -> rows
    # split name -> its Parquet shards' rows (their footers) and bytes: the split, and with
    # `layout: rose` its bridge splits; None: no hf
    parquet: dict[str, tuple[int, int]] | None
    release_files: dict[str, tuple[int, int]]  # metadata file -> rows, bytes

    @property
    def on_hub(self) -> bool:
        return bool(_HUB_SPLIT.match(self.name))


def finished_splits(out_dir: Path) -> list[str]:
    """The folder's splits whose manifest lists their files (a ``--shard`` job's not included)."""
    found = []
    for path in sorted((out_dir / PARTS_DIR).glob("*.manifest.json")):
        split = path.name[: -len(".manifest.json")]
        manifest = read_manifest(path, split)
        if manifest and manifest.get("files") is not None and "shard" not in manifest:
            found.append(split)
    return found


def split_facts(out_dir: Path, split: str, record: Mapping[str, Any]) -> SplitFacts:
    manifest = read_manifest(manifest_path(out_dir, split), split) or {}
    files = set(manifest.get("files") or ())
    mix: collections.Counter[tuple[str, str]] = collections.Counter()
    n_scenes = 0
    for part in sorted(parts_dir(out_dir, split).glob("part-*.jsonl")):
        scenes = set()  # per part: a part is a shard, and shards hold disjoint scenes
        for line in part.read_bytes().splitlines():
            row = _ROW.decode(line)
            scenes.add(row.scene_index)
            mix[row.task_template, row.family or "none"] += 1
        n_scenes += len(scenes)
    parquet = None
    if "hf" in manifest.get("formats", ()):
        import pyarrow.parquet as pq

        parquet = {}
        for name in split_names(split, rose_layout=True).values():
            shards = [out_dir / file for file in sorted(files) if file.startswith(f"hf/{name}/")]
            if shards or name == split:
                parquet[name] = (
                    sum(pq.read_metadata(path).num_rows for path in shards),
                    sum(path.stat().st_size for path in shards),  # on disk: deterministic, as the bytes are
                )
    release_files = {}
    if "release" in manifest.get("formats", ()):
        names = [metadata_name(split)]
        names += [f"metadata_{split}_{tag}.jsonl" for tag in BRIDGE_FILE_TAGS.values()]
        release_files = {
            name: (_count_lines(out_dir / name), (out_dir / name).stat().st_size)
            for name in names
            if name in files
        }
    kept = dict(record) if _record_matches(record, manifest) else {}
    return SplitFacts(split, manifest, kept, n_scenes, sum(mix.values()), mix, parquet, release_files)


def _record_matches(record: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    """A split remade since its command was recorded (another spec, seed, size) keeps no stale record."""
    return all(record.get(key) == manifest.get(key) for key in ("spec_sha256", "seed", "scenes"))


def _count_lines(path: Path) -> int:
    count = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            count += chunk.count(b"\n")
    return count


# ----------------------------------------------------------------- the command and the spec


def reproduce_command(
    spec: str,
    out: str,
    split: str,
    scenes: int,
    seed: int,
    formats: Iterable[str],
    shard_size: int | None = None,
    exclude: Iterable[str] = (),
) -> str:
    """The ``rosetrain generate`` command that makes a split's bytes again (``--num-proc``,
    ``--shard`` and ``--merge`` change nothing in them, so they are left out). A path
    given as absolute is shown by its name: a card holds no path of the machine."""
    words = ["rosetrain", "generate", "--spec", _shown(spec), "--out", out]
    words += ["--split", split, "--scenes", str(scenes), "--seed", str(seed)]
    if tuple(formats) != ("release", "hf"):
        words += ["--formats", ",".join(formats)]
    if shard_size is not None:
        words += ["--shard-size", str(shard_size)]
    for path in exclude:
        words += ["--exclude", _shown(path)]
    return " ".join(_quoted(word) for word in words)


def _shown(path: str) -> str:
    return Path(path).name if os.path.isabs(path) else str(path)


def _quoted(word: str) -> str:
    import shlex

    return shlex.quote(word)


def split_record(spec_path: str, settings: Mapping[str, Any], command: str) -> dict[str, Any]:
    """What card.json keeps of a split: its command, and its spec's text (and
    its held-out spec's) when the file is still the one the split was made with."""
    record: dict[str, Any] = {key: settings.get(key) for key in ("spec_sha256", "seed", "scenes")}
    record["command"] = command
    record["rosetrain_version"] = __version__
    specs = []
    path = Path(spec_path)
    data = path.read_bytes() if path.is_file() else b""
    if hashlib.sha256(data).hexdigest() == settings.get("spec_sha256"):
        specs.append({"file": path.name, "sha256": settings["spec_sha256"], "text": data.decode("utf-8")})
        heldout = _heldout_spec(path, data)
        if heldout is not None and heldout.is_file():
            held = heldout.read_bytes()
            specs.append(
                {
                    "file": heldout.name,
                    "sha256": hashlib.sha256(held).hexdigest(),
                    "text": held.decode("utf-8"),
                }
            )
    record["specs"] = specs
    return record


def _heldout_spec(path: Path, data: bytes) -> Path | None:
    from rosetrain.core.io import load_yaml

    try:
        raw = load_yaml(data.decode("utf-8"))
    except (RosetrainError, ValueError):
        return None
    name = raw.get("heldout_spec") if isinstance(raw, dict) else None
    return (path.parent / name) if isinstance(name, str) else None


# ----------------------------------------------------------------- the card


def features_yaml(features: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``datasets``' feature dicts (``Features.to_dict()``) in the list form
    ``datasets`` writes to a card's ``dataset_info`` (``Features._to_yaml_list``);
    a test holds the two equal."""
    return [{"name": name, **_yaml_type(feature)} for name, feature in features.items()]


def _yaml_type(feature: Any) -> dict[str, Any]:
    if isinstance(feature, dict) and "_type" not in feature:  # a struct: its fields, in order
        return {"struct": features_yaml(feature)}
    kind = feature["_type"]
    if kind == "Value":
        return {"dtype": feature["dtype"]}
    if kind == "List":
        inner = _yaml_type(feature["feature"])
        return {"list": inner.get("dtype", inner.get("struct", inner))}
    return {"dtype": kind.lower()}  # Image, Audio: datasets writes the type's name


RELEASE_SCHEMA_BYTES = 1 << 30  # above this much release metadata, no features are declared


def release_features(paths: list[Path]) -> list[dict[str, Any]] | None:
    """The columns of release metadata files: every file's, united. A release row
    carries its family's and template's own fields, and ``datasets`` takes a
    config's columns from its first file (then fails to cast the next), so the card
    declares the union (a field a file lacks reads as null there). Read with
    pyarrow's JSON reader, as ``datasets`` reads them (a 64-bit ``item_seed`` reads
    as a float there too); None above :data:`RELEASE_SCHEMA_BYTES` of files, and
    None when a field has no one type (a family parameter that is a number in some
    rows and text in others): pyarrow, and so ``datasets``, cannot read such
    metadata as a table, while its Parquet shards (``formats: hf``) stay readable."""
    import pyarrow as pa
    import pyarrow.json as pj

    if not paths or sum(path.stat().st_size for path in paths) > RELEASE_SCHEMA_BYTES:
        return None
    try:
        schemas = [pj.read_json(path).schema for path in paths]
    except pa.ArrowInvalid:
        return None
    schema = pa.unify_schemas(schemas, promote_options="permissive")
    return [
        {
            "name": field.name,
            **({"dtype": "json"} if field.name in EXACT_INTEGERS else _arrow_yaml_type(field.type)),
        }
        for field in schema
    ]


# 64-bit unsigned seeds, above 2^53: read as JSON numbers they become floats and
# lose their last digits. A `json` feature is re-encoded from the parsed line
# before Arrow sees it, so `datasets` returns them as exact Python ints.
EXACT_INTEGERS = frozenset({"item_seed"})


_ARROW_DTYPES = {"string": "string", "large_string": "string", "double": "float64", "bool": "bool"}


def _arrow_yaml_type(kind: Any) -> dict[str, Any]:
    import pyarrow as pa

    if pa.types.is_struct(kind):
        return {"struct": [{"name": field.name, **_arrow_yaml_type(field.type)} for field in kind]}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        inner = _arrow_yaml_type(kind.value_type)
        return {"list": inner.get("dtype", inner.get("struct", inner))}
    return {"dtype": _ARROW_DTYPES.get(str(kind), str(kind))}  # int64, uint64, null: datasets' names


def _parquet_notes() -> list[str]:
    return [
        "- The Parquet rows carry their images (PNG bytes), so they load from any working directory.",
        "- A `layout: rose` folder keeps the bridge templates (G-Clk, mL-Cnt) in splits of their "
        "own (`<split>_global_click_bridge`, `<split>_matched_local_count_bridge`), as the ROSE "
        "release's `metadata_<split>_*_bridge.jsonl` files do: a split name means the same rows "
        "in the Parquet shards and in the release metadata.",
        "- `item_seed` (a 64-bit seed) is in the release metadata, not in the Parquet rows.",
    ]


def _release_notes() -> list[str]:
    return [
        "- `image` is a path relative to this folder (as in the ROSE release). To open the "
        "images from any working directory, join it to the folder:",
        "",
        "```python",
        "import os",
        "from datasets import Image, load_dataset",
        "",
        'folder = "path/to/this/folder"',
        'rows = load_dataset(folder, split="test")',
        'rows = rows.map(lambda r: {"image": os.path.join(folder, r["image"])}).cast_column("image", Image())',
        "```",
        "",
        "- `item_seed` is a 64-bit unsigned integer, often above 2^53. The card declares it a "
        "`json` feature, so `datasets` returns it as an exact Python int (a plain JSON number "
        "would read as a float and lose its last digits).",
        "- The bridge templates' files (`metadata_<split>_*_bridge.jsonl`), where present, are "
        "splits of their own (`<split>_global_click_bridge`, ...), as in the ROSE release.",
    ]


def card_text(out_dir: Path, facts: list[SplitFacts]) -> str:
    from huggingface_hub import DatasetCardData  # DatasetCard would import hf_api: 0.2 s of every generate

    from rosetrain.data.hf import COLUMNS

    # datasets reads every config of a repo with one builder (the first config's file
    # type), so the one config is the Parquet shards, or without them the release metadata
    parquet = [f for f in facts if f.parquet is not None and f.on_hub]
    files: list[tuple[str, str, int, int]]  # (split, path, rows, bytes)
    features: list[dict[str, Any]] | None
    if parquet:
        files = [
            (name, f"hf/{name}/shard-*.parquet", *found)
            for f in parquet
            for name, found in (f.parquet or {}).items()
        ]
        features = features_yaml({n: feature for n, (_, feature) in COLUMNS.items()})
    else:  # the bridge files, in the release beside each split's metadata, are splits of their own
        files = [
            (name[len("metadata_") : -len(".jsonl")], name, *found)
            for f in facts
            if f.on_hub
            for name, found in f.release_files.items()
        ]
        features = release_features([out_dir / name for _, name, _, _ in files])
    info: dict[str, Any] = {"config_name": "default"}
    if features is not None:
        info["features"] = features
    info["splits"] = [{"name": s, "num_bytes": size, "num_examples": n} for s, _, n, size in files]
    configs = [{"config_name": "default", "data_files": [{"split": s, "path": p} for s, p, _, _ in files]}]
    hub_splits = {s for s, _, _, _ in files}
    rows = sum(f.rows for f in facts)
    names = sorted({Path(str(f.settings.get("spec"))).stem for f in facts})
    data = DatasetCardData(
        license=LICENSE,
        language=["en"],
        task_categories=TASK_CATEGORIES,
        tags=TAGS,
        size_categories=[next((label for limit, label in _SIZES if rows < limit), "n>1B")],
        pretty_name="rosetrain " + ", ".join(names),
        configs=configs,
        dataset_info=info,
    )
    body = _body(facts, bool(parquet), hub_splits)
    # what str(DatasetCard(...)) of this text gives (tests/test_hub_cards.py checks it)
    return f"---\n{data.to_yaml()}\n---\n\n{body}"


def _body(facts: list[SplitFacts], parquet: bool, hub_splits: set[str]) -> str:
    lines = [
        "# rosetrain: ROSE-style grid tasks",
        "",
        "Synthetic ROSE-style items: a grid of cells, some of which differ from the rest, with "
        "counting and clicking tasks (T1..T5 and the bridges) in the ROSE release format, made by "
        f"rosetrain {__version__}. Item *i* depends only on (spec, seed, *i*), so the "
        "command under *Reproduce* makes these files again byte for byte.",
        "",
        "## Splits",
        "",
        "| split | spec | spec sha256 | seed | scenes | rows | formats | rosetrain |",
        "|---|---|---|---|---:|---:|---|---|",
    ]
    for f in facts:
        specs = f.record.get("specs") or [{"file": Path(str(f.settings.get("spec"))).name}]
        lines.append(
            f"| {f.name} | {specs[0]['file']} | `{str(f.settings.get('spec_sha256'))[:12]}` | "
            f"{f.settings.get('seed')} | {f.scenes} | {f.rows} | {', '.join(f.settings.get('formats', []))} | "
            f"{f.record.get('rosetrain_version', 'unknown')} |"
        )
    left_out = [f.name for f in facts if f.name not in hub_splits]
    if left_out:  # a name with '-' (not a datasets split name), or release-only beside Parquet splits
        lines += ["", f"Files only, not in the `datasets` config: {', '.join(left_out)}."]
    names = [f.name for f in facts]
    for title, column, key in (("Templates", "template", 0), ("Families", "family", 1)):
        totals: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for f in facts:
            for pair, count in f.mix.items():
                totals[pair[key]][f.name] = totals[pair[key]].get(f.name, 0) + count
        lines += ["", f"## {title} (rows)", "", f"| {column} | {' | '.join(names)} |"]
        lines.append("|---|" + "---:|" * len(names))
        for label in sorted(totals, key=_template_order if key == 0 else None):
            lines.append(f"| {label} | {' | '.join(str(totals[label].get(n, 0)) for n in names)} |")
    mix: dict[tuple[str, str], int] = collections.Counter()
    for f in facts:
        mix.update(f.mix)
    families = sorted({family for _, family in mix})
    lines += ["", "## Template x family (rows, all splits)", "", f"| template | {' | '.join(families)} |"]
    lines.append("|---|" + "---:|" * len(families))
    for template in sorted({t for t, _ in mix}, key=_template_order):
        lines.append(f"| {template} | {' | '.join(str(mix.get((template, fam), 0)) for fam in families)} |")
    lines += ["", "## Loading", "", "```python", "from datasets import load_dataset", ""]
    if parquet:
        lines.append('rows = load_dataset("OWNER/NAME")  # prompt, completion, images and gold fields')
        lines.append('rows = load_dataset("path/to/this/folder")  # a local copy reads the same')
    else:
        lines.append('rows = load_dataset("OWNER/NAME")  # the ROSE metadata rows (images as paths)')
        lines.append('rows = load_dataset("path/to/this/folder")  # a local copy reads the same')
    lines += [
        "```",
        "",
        "The ROSE release layout (`metadata_<split>.jsonl`, `images/<subset>/`), where present, is "
        "what the official ROSE evaluator and `rosetrain score` / `rosetrain eval` read.",
        "",
        "Read with care:",
        "",
        *(_parquet_notes() if parquet else _release_notes()),
        "",
    ]
    lines += [
        "## Reproduce",
        "",
        f"Into an empty folder {OUT} (`--num-proc` changes no byte):",
        "",
        "```bash",
    ]
    for f in facts:
        lines.append(f.record.get("command") or _command_from_manifest(f.settings))
    lines += ["```"]
    seen = set()
    for f in facts:
        for spec in f.record.get("specs", []):
            if spec["sha256"] in seen:
                continue
            seen.add(spec["sha256"])
            lines += ["", f"### `{spec['file']}` (sha256 `{spec['sha256']}`)", "", "```yaml"]
            lines += [spec["text"].rstrip("\n"), "```"]
    lines += [
        "",
        "Glyph and emoji images are drawn with fonts installed where the data was made "
        "(DejaVu, Noto); their own licences cover the glyph shapes.",
    ]
    return "\n".join(lines) + "\n"


def _template_order(template: str) -> tuple[int, str]:
    """The protocol's order (T1..T5, then the bridges), unknown templates last."""
    return (TEMPLATES.index(template) if template in TEMPLATES else len(TEMPLATES), template)


def _command_from_manifest(settings: Mapping[str, Any]) -> str:
    """A split whose command was not recorded (made by an older rosetrain): the
    command its manifest implies (any ``--exclude`` it had is not recorded)."""
    return reproduce_command(
        str(settings.get("spec")),
        OUT,
        str(settings.get("split")),
        int(settings.get("scenes", 0)),
        int(settings.get("seed", 0)),
        settings.get("formats", ()),
        settings.get("shard_size"),
    )


# ----------------------------------------------------------------- writing it


@dataclasses.dataclass
class CardResult:
    path: Path | None  # the card written; None when a README.md that is not rosetrain's was kept
    note: str | None = None


def write_card(
    out_dir: Path, split: str | None = None, record: Mapping[str, Any] | None = None
) -> CardResult:
    """Record ``split``'s command (``record``), then (re)write the folder's card,
    holding the folder's lock. A ``README.md`` that is not the card rosetrain
    last wrote is left untouched, and the result says so."""
    out_dir = Path(out_dir)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(output_lock(out_dir, "this output folder"))
        except RosetrainError as err:  # another generate is writing here: it writes the card when done
            return CardResult(None, f"the dataset card was not written: {err}")
        state = _read_record(out_dir)
        if split is not None and record is not None:
            state["splits"][split] = dict(record)
        splits = finished_splits(out_dir)
        state["splits"] = {name: state["splits"][name] for name in splits if name in state["splits"]}
        facts = [split_facts(out_dir, name, state["splits"].get(name, {})) for name in splits]
        text = card_text(out_dir, facts) if facts else None
        card = out_dir / CARD_NAME
        kept = _foreign_card(card, state.get("card_sha256"))
        if text is not None and not kept:
            atomic_write(card, text)
            state["card_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        atomic_write(out_dir / RECORD_NAME, json.dumps(state, indent=1, sort_keys=True) + "\n")
    if kept:
        return CardResult(
            None,
            f"{card}: not the card rosetrain wrote (your own, or edited since), so it was left as it "
            f"is; remove it and run the same command to get rosetrain's card",
        )
    return CardResult(card if text is not None else None)


def card_for_job(
    job: Any, spec: str, out: str, shard_size: int | None = None, exclude: Iterable[str] = ()
) -> CardResult:
    """After ``rosetrain generate`` made ``job``'s split (``spec``, ``out``, ``shard_size``
    and ``exclude`` as the user gave them): record its command, write the card."""
    settings = read_manifest(manifest_path(job.out_dir, job.split), job.split) or {}
    command = reproduce_command(spec, OUT, job.split, job.scenes, job.seed, job.formats, shard_size, exclude)
    return write_card(job.out_dir, job.split, split_record(job.spec.path, settings, command))


def _foreign_card(card: Path, sha256: str | None) -> bool:
    if not os.path.lexists(card):
        return False
    if card.is_symlink() or not card.is_file():
        return True
    return hashlib.sha256(card.read_bytes()).hexdigest() != sha256


def _read_record(out_dir: Path) -> dict[str, Any]:
    path = out_dir / RECORD_NAME
    if not path.exists():
        return {"splits": {}}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not isinstance(state.get("splits"), dict):
            raise ValueError("not an object with 'splits'")
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise RosetrainError(
            f"{path}: corrupt rosetrain card record ({err}); remove it (and {CARD_NAME}, if rosetrain "
            f"wrote it) and run the same command again"
        ) from None
    return state


def card_is_rosetrains(out_dir: Path) -> bool:
    """Whether the folder's README.md is the card rosetrain last wrote there."""
    card = Path(out_dir) / CARD_NAME
    return os.path.lexists(card) and not _foreign_card(card, _read_record(Path(out_dir)).get("card_sha256"))
