"""The specs, recipes, accelerate configs and evaluation suites rosetrain ships.

They live once, in the checkout's top-level ``generators/``, ``recipes/`` and
``eval/``; ``rosetrain/resources/`` holds links to those folders, which the
wheel build follows, so an installed rosetrain carries the same files as a
clone. Commands take a path or a name (``--spec rose-protocol``, ``--recipe
tiny-sft``, ``--suite heldout``): a file that exists at the path given always
wins; otherwise the reference is looked up among the shipped configs of the
option's kind, so ``heldout`` is a spec for ``--spec`` and a suite for
``--suite``. A path written as in the checkout (``generators/heldout.yaml``)
also finds the shipped file, so the README's commands run from any folder.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path, PurePosixPath

from rosetrain.core.errors import RosetrainError
from rosetrain.core.registry import Registry

ROOT = Path(__file__).resolve().parent.parent / "resources"
SUFFIXES = (".yaml", ".yml")


@dataclasses.dataclass(frozen=True)
class Kind:
    folder: str  # under ROOT, as in the checkout
    option: str  # the flag or key that takes it, for messages
    plural: str
    recursive: bool = False  # specs: generators/demo/*.yaml too, named demo/<name>


KINDS: Registry[Kind] = Registry(
    "config kind",
    {
        "spec": Kind("generators", "--spec", "specs", recursive=True),
        "recipe": Kind("recipes", "--recipe", "recipes"),
        # accelerate reads --config_file itself, a path only: `rosetrain configs copy` gives one
        "accelerate": Kind("recipes/accelerate", "accelerate launch --config_file", "accelerate configs"),
        "suite": Kind("eval", "--suite", "suites"),
    },
)


def _kind(kind: str) -> Kind:
    return KINDS.lookup(kind)


def names(kind: str) -> dict[str, Path]:
    """Shipped configs of a kind, name -> file, sorted by name (each name once)."""
    spec = _kind(kind)
    folder = ROOT / spec.folder
    found: dict[str, Path] = {}
    # os.walk, not Path.glob("**"): in a checkout generators/demo is a link, which glob does not enter
    for here, dirs, files in os.walk(folder, followlinks=True):
        if not spec.recursive:
            dirs.clear()
        for file in files:
            path = Path(here) / file
            if path.suffix in SUFFIXES and path.is_file():
                found.setdefault(path.relative_to(folder).with_suffix("").as_posix(), path)
    return dict(sorted(found.items()))


def _name_of(kind: Kind, ref: str) -> str:
    """``generators/demo/train.yaml`` or ``demo/train.yaml`` -> ``demo/train``."""
    path = PurePosixPath(ref.replace("\\", "/"))
    if path.suffix in SUFFIXES:
        path = path.with_suffix("")
    prefix = PurePosixPath(kind.folder)
    if not path.is_absolute() and path.parts[: len(prefix.parts)] == prefix.parts:
        path = (
            PurePosixPath(*path.parts[len(prefix.parts) :]) if len(path.parts) > len(prefix.parts) else path
        )
    return path.as_posix()


PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent  # the checkout, or site-packages


def shipped_path(ref: str) -> str:
    """A relative path inside a shipped config (``model: rosetrain/assets/demo-base``)
    as it was written, when it exists from here; else the one that ships with
    rosetrain, where one does: a shipped recipe runs by name from any directory."""
    if os.path.isabs(ref) or Path(ref).expanduser().exists():
        return ref
    packaged = PACKAGE_PARENT / ref
    return str(packaged) if ref.startswith("rosetrain/") and packaged.exists() else ref


def shipped(kind: str, ref: str | Path) -> Path | None:
    """The shipped config ``ref`` names when no file exists at ``ref`` (a path
    wins), else None: for keys inside a config (a recipe's ``data.spec``) whose
    own errors say what is missing."""
    if Path(ref).expanduser().exists():
        return None
    return names(kind).get(_name_of(_kind(kind), str(ref)))


def find(kind: str, ref: str | Path, option: str | None = None) -> Path:
    """The file ``ref`` names: the path itself when it is a file, else the shipped
    config of that name. An unknown reference fails naming the option and listing
    the known names."""
    spec = _kind(kind)
    option = option or spec.option
    path = Path(ref).expanduser()
    if path.is_file():
        return path
    known = names(kind)
    name = _name_of(spec, str(ref))
    if name in known:  # a folder of that name (say runs/heldout/) is no config: the name wins
        return known[name]
    if path.is_dir():
        raise RosetrainError(f"{option}: {ref} is a folder, not a {kind} file")
    listing = ", ".join(known) or "none"
    raise RosetrainError(
        f"{option}: {ref} is neither a file nor a known {kind}; known {spec.plural}: {listing} "
        f"(`rosetrain configs list`)"
    )


def copy(kind: str, name: str, folder: str | Path) -> list[Path]:
    """Copy a shipped config into ``folder`` to edit, with the held-out spec a
    spec names (``heldout_spec``, a path relative to the spec) beside it. Never
    replaces a file: an existing one fails before anything is written."""
    from rosetrain.core.io import atomic_write, read_yaml_mapping

    spec = _kind(kind)
    known = names(kind)
    key = _name_of(spec, name)
    if key not in known:
        raise RosetrainError(f"no {kind} named {name!r}; known {spec.plural}: {', '.join(known) or 'none'}")
    sources = [known[key]]
    if kind == "spec":
        companion = read_yaml_mapping(sources[0], "spec").get("heldout_spec")
        if isinstance(companion, str) and "/" not in companion:
            sources.append(sources[0].parent / companion)
    out = Path(folder).expanduser()
    targets = [out / source.name for source in sources]
    for target in targets:
        if os.path.lexists(target):  # a dangling link too, which "does not exist"
            what = f"is a symbolic link (to {os.readlink(target)})" if target.is_symlink() else "exists"
            raise RosetrainError(f"{target} {what}; rosetrain copies a config only to a new file")
    out.mkdir(parents=True, exist_ok=True)
    for source, target in zip(sources, targets):
        atomic_write(target, source.read_bytes())
    return targets
