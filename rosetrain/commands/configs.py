"""``rosetrain configs list [KIND]`` and ``rosetrain configs copy KIND NAME DIR``.

Lists the specs, recipes, accelerate configs and evaluation suites rosetrain
ships (the names ``--spec``, ``--recipe`` and ``--suite`` take), and copies one
out to edit; the copy is then given by its path, which always wins over a name.
"""

from __future__ import annotations

import argparse

from rosetrain.commands import path
from rosetrain.core.resources import KINDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = sub.add_parser("list", help="the shipped configs, by kind")
    listing.add_argument("kind", nargs="?", choices=list(KINDS), help="only this kind (default: all)")
    copying = sub.add_parser("copy", help="copy one into a folder to edit (never replaces a file)")
    copying.add_argument("kind", choices=list(KINDS))
    copying.add_argument("name", help="a name from `rosetrain configs list`")
    copying.add_argument("dir", type=path("out-folder"), help="folder to copy it into (created if missing)")


def run(args: argparse.Namespace) -> int:
    from rosetrain.core import resources

    if args.action == "copy":
        for path in resources.copy(args.kind, args.name, args.dir):
            print(path)
        return 0
    for kind in [args.kind] if args.kind else list(KINDS):
        spec = KINDS[kind]
        takes = "PATH (copy one out)" if kind == "accelerate" else "NAME"
        print(f"{spec.plural} ({spec.option} {takes}):")
        for name, path in resources.names(kind).items():
            print(f"  {name:28s} {first_comment(path)}")
    return 0


def first_comment(path, width: int = 72) -> str:
    """The file's opening comment up to its first full stop or colon: what each
    config is for, in its own words."""
    words = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        words += line.lstrip("#").split()
    text = " ".join(words)
    text = text.split(". ")[0].rstrip(":.")
    return text if len(text) <= width else text[: width - 3] + "..."
