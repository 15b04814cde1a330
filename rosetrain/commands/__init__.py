"""One module per CLI sub-command (see rosetrain.cli); flags several share live here,
and the types of every numeric option."""

from __future__ import annotations

import argparse
import errno
import math
import os
from collections.abc import Callable

from rosetrain.core.config import SEED_32, SEED_64, Range

# Bounds the numeric options share (a value past them cannot run; memory decides below).
MAX_PROCESSES = 1024
MAX_TOKENS = 1_000_000
MAX_SCENES = 10**9


def integer(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer in [low, high]. argparse turns the error into
    one line naming the option, and exit code 2."""
    bounds = Range(low, high)

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or not bounds.contains(value):
            raise argparse.ArgumentTypeError(f"expected an integer {bounds.describe()}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


def number(low: float, high: float, low_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in [low, high] (``(low, high]`` when
    ``low_open``); NaN and infinity are refused."""
    bounds = Range(low, high, low_open=low_open)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not bounds.contains(value):
            raise argparse.ArgumentTypeError(f"expected a number {bounds.describe()}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def seed(high: int = SEED_64) -> Callable[[str], int]:
    """A seed: scene seeds are hashed (any 64-bit one); seeds that reach numpy or
    torch (training, the tiny model) stop at 2**32-1."""
    return integer(0, high)


SEED_NUMPY = SEED_32


def add_bridges_flags(parser: argparse.ArgumentParser, what: str = "read") -> None:
    """``--bridges`` / ``--no-bridges``: whether the release's bridge files
    (metadata_<split>_global_click_bridge.jsonl, ..._matched_local_count_bridge.jsonl)
    are used beside the main metadata file; neither: only when there is no main file."""
    bridges = parser.add_mutually_exclusive_group()
    bridges.add_argument(
        "--bridges",
        dest="bridges",
        action="store_true",
        default=None,
        help=f"also {what} the release's bridge files (metadata_<split>_*_bridge.jsonl)",
    )
    bridges.add_argument(
        "--no-bridges", dest="bridges", action="store_false", help=f"never {what} bridge files"
    )


# What a path option names; tests/test_cli_paths.py gives each role its hostile values.
PATH_ROLES = (
    "file",  # an input file that must exist
    "folder",  # an input folder that must exist
    "data",  # a split: a release folder, a metadata .jsonl, or hf://datasets/...
    "config",  # a YAML file, or the name of a shipped config
    "model",  # a model folder, or a Hub id
    "out-folder",  # a folder rosetrain writes into (made if missing)
    "out-file",  # a file rosetrain writes
)


def path(role: str) -> Callable[[str], str]:
    """An argparse ``type`` for every option or positional that names a path (its
    ``role`` one of :data:`PATH_ROLES`): the text as given, refused in one line when
    no path could be it. An empty path, a NUL byte (no system call takes one) and
    text that is not UTF-8 (a name the shell passed as undecodable bytes: rosetrain
    writes the paths it read into JSON records, which hold only text) are refused,
    and so is an output that is a link (:func:`_refuse_output_link`); whether the
    path exists, and is a file or a folder, is the command's to check, as some
    take a name or a Hub id as well."""
    if role not in PATH_ROLES:
        raise ValueError(f"unknown path role {role!r}")

    def parse(text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError("expected a path, got ''")
        if "\0" in text:
            raise argparse.ArgumentTypeError(f"a path cannot hold a NUL byte, got {text!r}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise argparse.ArgumentTypeError(f"expected a path in UTF-8, got {text!r}") from None
        try:
            os.stat(text)
        except OSError as err:  # a loop: pathlib's resolve() raises RuntimeError on one, deep in a command
            if err.errno == errno.ELOOP:
                raise argparse.ArgumentTypeError(f"{text!r} is a symbolic link loop") from None
        if role.startswith("out-"):
            _refuse_output_link(text, role)
        return text

    parse.__name__ = "path"
    parse.role = role  # type: ignore[attr-defined]
    return parse


def _refuse_output_link(text: str, role: str) -> None:
    """An output file that is a symbolic link, dangling or not, is refused: writing
    would replace the user's link with a file (a dangling one "does not exist").
    An output folder may be a link to a folder (its files, marker included, are
    those inside it), never a dangling one, where no folder can be made."""
    if not os.path.islink(text):
        return
    if role == "out-file":
        raise argparse.ArgumentTypeError(
            f"{text!r} is a symbolic link (to {os.readlink(text)}); rosetrain never writes an "
            f"output file over or through a link: remove it, or choose another path"
        )
    if not os.path.isdir(text):
        what = "a file" if os.path.exists(text) else "nothing"
        raise argparse.ArgumentTypeError(
            f"{text!r} is a symbolic link to {what} ({os.readlink(text)}); an output folder may be "
            f"a link only to a folder: remove it, or choose another path"
        )


def check_out_folder(value: str, option: str) -> None:
    """Refuse, before any work, an output folder that cannot be one: a file or a
    device is there, a file stands where one of its parents would be, or the
    nearest folder that exists may not be written (a command that writes only
    at the end would learn it after all its work)."""
    from pathlib import Path

    from rosetrain.core.errors import RosetrainError

    folder = Path(value)
    for place in (folder, *folder.parents):
        if place.exists():
            if not place.is_dir():
                what = "is not a folder" if place == folder else f"cannot hold a folder: {place} is a file"
                raise RosetrainError(f"{option} {value}: {what}")
            if not os.access(place, os.W_OK | os.X_OK):
                raise RosetrainError(f"{option} {value}: {place} may not be written")
            return


def resolve_model(text: str) -> str:
    """The model a command loads for ``--model TEXT``: itself, or for a rosetrain
    run folder its final model (``RUN/checkpoint-final``), said on stderr. Every
    command that takes a model runs it (rosetrain.models.loading.model_path)."""
    import sys

    from rosetrain.models.loading import model_path

    resolved = model_path(text)
    if resolved != text:
        print(f"model {text}: a training run; using its final model {resolved}", file=sys.stderr)
    return resolved
