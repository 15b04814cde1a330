"""The command line's bad-input contract for paths, for every command and every
option or positional that names a path, enumerated from the argparse parsers
themselves. The rule: every string argument is either a path, of the type
``rosetrain.commands.path(role)``, or listed in :data:`NOT_PATHS`; so a new path
option is covered the day it is added (or this test names it). Each role has its
table of hostile values (:func:`hostile`): a missing path, a file where a folder
is expected and a folder where a file is, an empty file or folder, a NUL byte, a
name that is not UTF-8, a symlink loop, /dev/null, a FIFO, a foreign file where
an output would go. Each gives exit 2 and one line of stderr naming the option or
the path, no traceback, within :data:`BOUND_S` seconds (a FIFO opened for reading
would wait for ever), and leaves the row's folder byte for byte as it was: a
refused command writes nothing and changes no foreign file. All inside tmp_path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from rosetrain import cli

# String arguments that are not paths: names, choices, ids, text.
NOT_PATHS = {
    "generate": {"split", "formats", "shard", "engine", "push_to_hub", "hub_revision"},
    "preview": {"split", "template"},
    "score": {"split", "model", "display_name"},
    "eval": {"split", "runner", "base_url", "api_key_env"},
    "compare": set(),
    "export-lmms-eval": {"split", "task", "model"},
    "tiny-model": {"size", "family"},
    "train": {"method", "overrides"},
    "demo": {"seeds"},
    "curriculum": {"mode", "axes"},
    "signal": {"split"},
    "configs": {"name"},
}
BOUND_S = 30  # a refusal is a check before work: far less than this


def _command_actions(command: str) -> list[argparse.Action]:
    parser = cli.build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions, parsers = [], [sub.choices[command]]
    while parsers:  # a command's own sub-commands too (configs copy)
        for action in parsers.pop()._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += action.choices.values()
            elif not isinstance(action, argparse._HelpAction):
                actions.append(action)
    return actions


def path_arguments() -> list[tuple[str, str, str]]:
    """(command, option or dest of a positional, role) of every path argument."""
    found = []
    for command in cli.COMMANDS:
        for action in _command_actions(command):
            if getattr(action.type, "__name__", "") == "path":
                name = action.option_strings[-1] if action.option_strings else action.dest
                found.append((command, name, action.type.role))
    return found


def test_every_string_argument_is_a_path_or_named_as_not_one():
    untyped = []
    for command in cli.COMMANDS:
        for action in _command_actions(command):
            takes_text = action.nargs != 0 and action.type is None and not action.choices
            if takes_text and action.dest not in NOT_PATHS[command]:
                untyped.append(f"{command} {action.dest}")
    assert untyped == [], "give these type=rosetrain.commands.path(role), or list them in NOT_PATHS"
    assert len(path_arguments()) >= 25  # the enumeration itself works


def _tree(root: Path) -> dict[str, str]:
    """Every entry under root: a file's sha256, a link's target, a folder's mode."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            entry = Path(folder) / name
            key = str(entry.relative_to(root))
            if entry.is_symlink():
                found[key] = "-> " + os.readlink(entry)
            elif entry.is_dir():
                found[key] = f"dir {entry.stat().st_mode:o}"
            elif entry.is_file():
                found[key] = hashlib.sha256(entry.read_bytes()).hexdigest()
            else:
                found[key] = f"special {entry.stat().st_mode:o}"
    return found


READ = ("file", "folder", "data", "config", "model")


def _null_device(row: Path) -> str:
    """A null device of the row's own: a rosetrain that wrote over it, as root,
    would have replaced the machine's /dev/null."""
    if os.geteuid() != 0:
        return "/dev/null"  # no one but root may replace it
    os.mknod(row / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return str(row / "null")


IMMUTABLE: list[Path] = []  # folders made immutable, made writable again after each test


def _read_only(folder: Path) -> bool:
    """Make a folder no one may write into: its mode, or for root (who ignores
    modes) the immutable attribute, where the file system has one."""
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return True
    if (
        shutil.which("chattr")
        and subprocess.run(["chattr", "+i", folder], capture_output=True).returncode == 0
    ):
        IMMUTABLE.append(folder)
        return True
    return False


@pytest.fixture(autouse=True)
def _writable_again():
    yield
    while IMMUTABLE:  # else tmp_path's cleanup could not remove them
        subprocess.run(["chattr", "-i", IMMUTABLE.pop()], check=True)


def hostile(role: str, row: Path) -> dict[str, str]:
    """label -> a bad value of a path of this role, made under ``row``."""
    loop = row / "loop"
    loop.symlink_to(loop)
    os.mkfifo(row / "fifo")
    (row / "folder").mkdir()
    (row / "folder" / "keep.txt").write_text("the user's\n")
    (row / "file.txt").write_text("the user's file\n")
    (row / "empty.jsonl").write_bytes(b"")
    values = {
        "nul byte": str(row / "a\0b"),
        "not utf-8": str(row / "bad\udcff"),
        "empty text": "",
        "symlink loop": str(loop),
        "/dev/null": "/dev/null" if role in READ else _null_device(row),
        "fifo": str(row / "fifo"),
    }
    if role in READ:
        values["missing"] = str(row / "missing" / "x.jsonl")
        values["empty folder"] = str(row / "empty-folder")
        (row / "empty-folder").mkdir()
    if role in ("file", "data", "config"):
        values["a folder"] = str(row / "folder")
        values["empty file"] = str(row / "empty.jsonl")
    if role in ("folder", "model"):
        values["a file"] = str(row / "file.txt")
    if role in ("out-folder", "out-file") and _read_only(row / "read-only"):
        values["in a read-only folder"] = str(row / "read-only" / "out")
    if role == "out-folder":
        values["a foreign file"] = str(row / "file.txt")
        values["inside a file"] = str(row / "file.txt" / "out")
    if role == "out-file":
        values["a foreign file"] = str(row / "file.txt")
        values["a folder"] = str(row / "folder")
        values["inside a file"] = str(row / "file.txt" / "out.yaml")
    if role in ("out-folder", "out-file"):  # an output link, dangling ("not there") or not, is refused
        (row / "dangling").symlink_to(row / "gone")
        (row / "link-to-file").symlink_to(row / "file.txt")
        values["a dangling link"] = str(row / "dangling")
        values["a link to a file"] = str(row / "link-to-file")
    return values


@pytest.fixture(scope="module")
def world(tmp_path_factory, smoke_split) -> dict[str, str]:
    """Valid values for every path argument: a split, its predictions, a scored run."""
    root = tmp_path_factory.mktemp("world")
    split = smoke_split(root / "data")
    rows = [json.loads(line) for line in (split / "metadata_test.jsonl").read_text().splitlines()]
    predictions = root / "predictions.jsonl"
    predictions.write_text(
        "".join(json.dumps({"item_id": r["item_id"], "raw_text": "", "model": "m"}) + "\n" for r in rows)
    )
    run = root / "run"
    assert (
        cli.main(["score", "--data", str(split), "--predictions", str(predictions), "--out", str(run)]) == 0
    )
    return {"split": str(split), "predictions": str(predictions), "run": str(run), "root": str(root)}


# where each command writes, under the test's output folder
OUT_NAMES = {
    "generate": "gen",
    "preview": "sheet.png",
    "score": "score",
    "eval": "eval",
    "compare": "compare",
    "export-lmms-eval": "task",
    "tiny-model": "tiny",
    "curriculum": "new.yaml",
    "demo": "demo",
    "configs": "configs",
}


def base_argv(command: str, world: dict[str, str], out: Path, name: str, command_line) -> list[str]:
    """A command line of ``command`` with every other argument valid (outputs under
    ``out``), so the path under test is the one refused."""
    split, predictions, run = world["split"], world["predictions"], world["run"]
    if command == "train":
        return ["train", "sft", "--recipe", "demo-sft", "--check"]
    if command == "signal":
        return ["signal", "--model", str(out / "no-model"), "--data", split]
    if (command, name) == ("eval", "--model"):  # a model folder or Hub id: the transformers runner
        return ["eval", "--model", "m", "--data", split, "--out", str(out / "eval"), "--no-progress"]
    argv = command_line(command, out / OUT_NAMES[command], split, predictions, run)
    if (command, name) == ("export-lmms-eval", "--task-dir"):  # read only with --samples
        argv += ["--samples", predictions, "--task-dir", "t"]
    return argv


def _replace(argv: list[str], name: str, value: str, command: str) -> list[str]:
    if name.startswith("-"):
        if name in argv:
            index = argv.index(name)
            return [*argv[: index + 1], value, *argv[index + 2 :]]
        return [*argv, name, value]
    if (command, name) == ("preview", "data_positional"):  # preview's first form: DATA, not --data DATA
        index = argv.index("--data")
        return [argv[0], value, *argv[1:index], *argv[index + 2 :]]
    positionals = {"compare": {"before": 1, "after": 2}, "configs": {"dir": 4}}[command]
    index = positionals[name]
    return [*argv[:index], value, *argv[index + 1 :]]


class Hung(Exception):
    pass


def _alarm(signum, frame):
    raise Hung


ROWS = path_arguments()


@pytest.mark.parametrize("command, name, role", ROWS, ids=[f"{c} {n}" for c, n, _ in ROWS])
def test_a_bad_path_is_exit_2_and_one_line_naming_it(
    command, name, role, world, tmp_path, capsys, monkeypatch, command_line
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a Hub id is looked up in the cache only
    failures = []
    probe = tmp_path / "probe"
    probe.mkdir()
    for label in hostile(role, probe):
        row = tmp_path / label.replace("/", "_").replace(" ", "-")
        row.mkdir()
        value = hostile(role, row)[label]
        argv = base_argv(command, world, row / "outputs", name, command_line)
        argv = _replace(argv, name, value, command)
        before = _tree(row)
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(BOUND_S)
        try:
            code = cli.main(argv)
        except Hung:
            code = "hung"
        except BaseException as err:  # noqa: BLE001 - the contract is no traceback at all
            code = f"raised {type(err).__name__}: {err}"
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        # the option, the value, or the part of it that is wrong (a file where a parent folder would be)
        places = [name, repr(value)] + ([value, str(Path(value).parent)] if value else [])
        named = bool(lines) and any(place in lines[-1] for place in places)
        if code != 2 or "Traceback" in err or len(lines) != 1 or not named:
            failures.append(f"{label}: exit {code}, stderr {err.strip()[-300:]!r}")
        elif _tree(row) != before:
            failures.append(f"{label}: exit 2 but the folder changed")
    assert failures == [], "\n".join(failures)


def test_preview_replaces_its_own_sheet_but_never_a_users_picture(world, tmp_path, capsys):
    from PIL import Image

    sheet = tmp_path / "sheet.png"
    argv = ["preview", world["split"], "--out", str(sheet), "--limit", "1"]
    assert cli.main(argv) == 0
    assert cli.main(argv) == 0  # a rerun replaces the sheet it wrote
    picture = tmp_path / "picture.png"
    Image.new("RGB", (4, 4)).save(picture)  # a PNG, but not preview's
    before = picture.read_bytes()
    capsys.readouterr()
    assert cli.main(["preview", world["split"], "--out", str(picture), "--limit", "1"]) == 2
    assert "not written by rosetrain preview" in capsys.readouterr().err
    assert picture.read_bytes() == before


def test_preview_takes_data_as_every_command_does_and_as_it_first_did(world, tmp_path, capsys):
    sheets = {}
    for form, data in (("--data", ["--data", world["split"]]), ("positional", [world["split"]])):
        sheet = tmp_path / f"{form}.png"
        assert cli.main(["preview", *data, "--out", str(sheet), "--limit", "1"]) == 0
        sheets[form] = sheet.read_bytes()
    assert sheets["--data"] == sheets["positional"]
    capsys.readouterr()
    for data, said in (
        (["--data", world["split"], world["split"]], "--data: give the split once"),
        ([], "--data: a split is needed: rosetrain preview --data DATA"),
    ):
        assert cli.main(["preview", *data, "--out", str(tmp_path / "x.png")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], lines
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("link", ["dangling", "to a file"])
def test_configs_copy_never_replaces_a_link_where_its_copy_would_go(world, tmp_path, capsys, link):
    """``configs copy`` "never replaces a file": a link is not replaced either, a
    dangling one (which "does not exist") included."""
    folder = tmp_path / "configs"
    folder.mkdir()
    target = tmp_path / ("gone.yaml" if link == "dangling" else "mine.yaml")
    if link != "dangling":
        target.write_text("# the user's spec\n")
    (folder / "smoke.yaml").symlink_to(target)
    before = _tree(tmp_path)
    assert cli.main(["configs", "copy", "spec", "smoke", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{folder / 'smoke.yaml'} is a symbolic link" in err
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("link", ["dangling", "to its own spec"])
def test_curriculum_out_never_replaces_a_link(world, tmp_path, capsys, link):
    """``curriculum --out`` a link, dangling or to a spec curriculum wrote, is refused
    before any work: no spec, no report folder."""
    out = tmp_path / "next.yaml"
    argv = ["curriculum", "--from", world["run"], "--spec", "smoke", "--out"]
    if link == "dangling":
        out.symlink_to(tmp_path / "gone.yaml")
    else:
        assert cli.main([*argv, str(tmp_path / "mine.yaml")]) == 0
        shutil.rmtree(tmp_path / "mine-report")
        out.symlink_to(tmp_path / "mine.yaml")
    capsys.readouterr()
    before = _tree(tmp_path)
    assert cli.main([*argv, str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{str(out)!r} is a symbolic link" in err
    assert _tree(tmp_path) == before
