"""rosetrain preview data/rose --split test --out data/rose/preview.png"""
from __future__ import annotations

from pathlib import Path


def add_arguments(parser) -> None:
    parser.add_argument("data", help="a split folder in the ROSE release layout")
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", default=None, help="PNG path (default: DATA/preview_<split>.png)")
    parser.add_argument("--limit", type=int, default=24, help="number of scenes on the sheet")
    parser.add_argument("--columns", type=int, default=6)
    parser.add_argument("--template", default=None, help="outline only this task's region, e.g. T5_CLICK_COUNT_EXCLUSION")


def run(args) -> int:
    import io

    from rosetrain.errors import RosetrainError
    from rosetrain.io import atomic_write, read_jsonl
    from rosetrain.preview import contact_sheet

    metadata = Path(args.data) / f"metadata_{args.split}.jsonl"
    if not metadata.exists():
        raise RosetrainError(f"{metadata} does not exist (generate the split first)")
    out = Path(args.out or Path(args.data) / f"preview_{args.split}.png")
    sheet = contact_sheet(args.data, read_jsonl(metadata), args.limit, args.columns, args.template)
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    atomic_write(out, buffer.getvalue())
    print(out)
    return 0
