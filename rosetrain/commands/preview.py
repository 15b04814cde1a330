"""rosetrain preview --data data/rose --split test --out data/rose/preview.png"""

from __future__ import annotations

from pathlib import Path

from rosetrain.commands import integer, path

PREVIEW_FIELDS = ("scene_id", "cell_size", "image")  # beyond what the release loader requires
# The PNG text chunk that marks a sheet as preview's: only such a file is replaced.
MARK_KEY, MARK_VALUE = "Software", "rosetrain preview"


def check_replaceable(out: Path) -> None:
    """Refuse an --out that preview did not write: a rerun replaces its own sheet,
    never a user's picture or file of that name."""
    from PIL import Image, UnidentifiedImageError

    from rosetrain.core.errors import RosetrainError

    if not out.is_file():  # none; a folder, a device or a pipe (never opened): atomic_write refuses them
        return
    try:
        with Image.open(out) as image:
            ours = getattr(image, "text", {}).get(MARK_KEY) == MARK_VALUE
    except (UnidentifiedImageError, OSError, ValueError):
        ours = False
    if not ours:
        raise RosetrainError(f"--out {out}: exists and was not written by rosetrain preview; not replaced")


def default_out(given: str, data: Path) -> Path:
    """The folder of the default sheet: the split's folder, the folder of a .jsonl,
    and for a Hub dataset the working folder (never the Hub cache)."""
    from rosetrain.data.hub import is_hub_uri

    if is_hub_uri(given):
        return Path(".")
    return data.parent if data.is_file() else data


def add_arguments(parser) -> None:
    help_data = (
        "a split: a folder in the ROSE release layout, a metadata .jsonl, or "
        "hf://datasets/OWNER/NAME[@REVISION] (read from the local Hugging Face cache)"
    )
    parser.add_argument("--data", type=path("data"), default=None, help=help_data)
    # the first form preview had; --data is what every other command reading a split takes
    parser.add_argument(
        "data_positional", nargs="?", type=path("data"), metavar="DATA", help="the same as --data"
    )
    parser.add_argument("--split", default="test", help="split name")
    parser.add_argument(
        "--out",
        type=path("out-file"),
        default=None,
        help="PNG path (default: DATA/preview_<split>.png; beside a .jsonl; "
        "for an hf:// dataset, in the working folder)",
    )
    parser.add_argument("--limit", type=integer(1, 10_000), default=24, help="number of scenes on the sheet")
    parser.add_argument("--columns", type=integer(1, 1000), default=6, help="scenes per row of the sheet")
    parser.add_argument(
        "--template", default=None, help="outline only this task's region, e.g. T5_CLICK_COUNT_EXCLUSION"
    )


def run(args) -> int:
    import io

    from rosetrain.core.errors import RosetrainError
    from rosetrain.core.io import atomic_write
    from rosetrain.core.protocol import SPEC_TEMPLATES
    from rosetrain.data.hub import resolve_split
    from rosetrain.data.paths import check_split_name
    from rosetrain.data.release import select_records
    from rosetrain.generators.preview import contact_sheet

    if (args.data is None) == (args.data_positional is None):
        raise RosetrainError(
            "--data: give the split once, as --data DATA (or DATA alone)"
            if args.data is not None
            else "--data: a split is needed: rosetrain preview --data DATA"
        )
    args.data = args.data or args.data_positional
    check_split_name(args.split)
    if args.template is not None and args.template not in SPEC_TEMPLATES:
        raise RosetrainError(
            f"--template: unknown template {args.template!r}; known: {', '.join(SPEC_TEMPLATES)}"
        )
    for flag, value in (("--limit", args.limit), ("--columns", args.columns)):
        if value < 1:
            raise RosetrainError(f"{flag} must be at least 1, got {value}")
    data = resolve_split(args.data)
    records, root = select_records(data, args.split, None, training=True)  # a training split's twins too
    for record in records:
        missing = [field for field in PREVIEW_FIELDS if record.get(field) is None]
        if missing:
            raise RosetrainError(
                f"{args.data}: item {record['item_id']!r} lacks {', '.join(missing)}, which a preview needs"
            )
    out = Path(args.out or default_out(args.data, data) / f"preview_{args.split}.png")
    check_replaceable(out)
    sheet = contact_sheet(root, records, args.limit, args.columns, args.template)
    buffer = io.BytesIO()
    from PIL.PngImagePlugin import PngInfo

    mark = PngInfo()
    mark.add_text(MARK_KEY, MARK_VALUE)
    sheet.save(buffer, format="PNG", pnginfo=mark)
    try:
        atomic_write(out, buffer.getvalue())
    except OSError as err:
        raise RosetrainError(f"--out {out}: cannot write ({err.strerror or err})") from None
    print(out)
    return 0
