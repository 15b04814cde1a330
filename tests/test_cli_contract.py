"""The command line's bad-input contract, for every command and every numeric
option, enumerated from the argparse parsers themselves (a new option is covered
the day it is added): an out-of-range, wrong-type or hostile value exits with
code 2 and one line naming the option, never a traceback, before any work."""

from __future__ import annotations

import argparse
import re

import pytest

from rosetrain import cli
from rosetrain.commands import integer, number

NUMERIC_TYPES = {integer(0, 1).__name__, number(0, 1).__name__}
# Values no numeric option takes: negative, too large, not finite, not a number at all.
HOSTILE = ["-1", "-5", "1e20", "99999999999999999999999", "nan", "inf", "-inf", "abc", "", "0x10", "1.5.2"]


def numeric_options() -> list[tuple[str, str, int | None]]:
    found = []
    for command in cli.COMMANDS:
        parser = cli.build_parser(command)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for action in sub.choices[command]._actions:
            if action.type is None or not action.option_strings:
                continue
            name = getattr(action.type, "__name__", "")
            if action.type in (int, float) or name in NUMERIC_TYPES:
                nargs = action.nargs if isinstance(action.nargs, int) else None
                found.append((command, action.option_strings[-1], nargs))
    return found


OPTIONS = numeric_options()


def test_every_numeric_option_uses_the_shared_bounded_types():
    """type=int or type=float would take -1, 1e20 digits or nan: every numeric option
    is a rosetrain.commands.integer / number with its bounds."""
    loose = []
    for command in cli.COMMANDS:
        parser = cli.build_parser(command)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        loose += [
            f"{command} {action.option_strings[-1]}"
            for action in sub.choices[command]._actions
            if action.type in (int, float)
        ]
    assert loose == []
    assert len(OPTIONS) >= 30  # every command's: the enumeration itself works


@pytest.mark.parametrize("command, option, nargs", OPTIONS, ids=[f"{c} {o}" for c, o, _ in OPTIONS])
def test_a_bad_value_of_a_numeric_option_is_exit_2_and_one_line_naming_it(command, option, nargs, capsys):
    for value in HOSTILE:
        if nargs is None:
            argv = [command, f"{option}={value}"]
        else:  # several values (--band LOW HIGH): the bad one last
            argv = [command, option, *["0.5"] * (nargs - 1), value]
        code = cli.main(argv)  # in-process: the exit code comes back, the process lives on
        err = capsys.readouterr().err
        assert code == 2, (option, value, err)
        assert "Traceback" not in err
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"rosetrain {command}: error: argument {option}"), (value, err)
        if nargs is None or not value.startswith("-"):  # argparse reads "-inf" as another option there
            assert "expected an integer" in last or "expected a number" in last, last
            assert repr(value) in last, last  # the value given, as given


@pytest.mark.parametrize(
    "command, message, argument, expected",
    [
        ("generate", "pass overwrite=True to remake it", "overwrite", "pass --overwrite to remake it"),
        (
            "score",
            "allow_partial scores the 3 that do",
            "allow_partial",
            "--allow-partial scores the 3 that do",
        ),
        (
            "eval",
            "or set max_error_rate=0.25 to accept this",
            "max_error_rate",
            "set --max-error-rate 0.25 to",
        ),
        ("generate", "out_dir: data/x is a file", "out_dir", "--out: data/x is a file"),
        ("eval", "model: runs/x is a folder but not a model", "model", "not a model (option --model)"),
    ],
)
def test_a_library_error_speaks_the_command_line(command, message, argument, expected):
    """Messages name options, never the Python parameters behind them."""
    from rosetrain.core.errors import RosetrainError

    line = cli.error_line(command, RosetrainError(message, argument=argument))
    assert expected in line, line
    assert f"{argument}=" not in line
    assert "_" not in argument or not re.search(rf"(?<![\w-]){argument}\b", line), line


def test_a_partial_score_names_the_option_that_allows_it(tmp_path, smoke_split, capsys):
    import json

    split = smoke_split(tmp_path / "data")
    rows = [json.loads(line) for line in (split / "metadata_test.jsonl").read_text().splitlines()]
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"item_id": rows[0]["item_id"], "raw_text": ""}) + "\n")
    argv = ["score", "--data", str(split), "--predictions", str(predictions), "--out", str(tmp_path / "s")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-partial" in err and "allow_partial" not in err, err


def test_the_top_help_shows_no_markup(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    shown = capsys.readouterr().out
    assert "``" not in shown and "rosetrain:" in shown


def test_an_argument_inside_a_path_or_file_name_is_left_as_it_is():
    from rosetrain.core.errors import RosetrainError

    err = RosetrainError(
        "out_dir runs/out_dir/x: holds out_dir.json; choose another out_dir.", argument="out_dir"
    )
    assert (
        cli.error_line("generate", err) == "--out runs/out_dir/x: holds out_dir.json; choose another --out."
    )


def test_an_error_about_a_huge_value_is_one_bounded_line(tmp_path, capsys):
    """A 1 MB value (a split name here; an item id, a path alike) is cut in the
    message, with how much was cut; the message keeps what it names first."""
    huge = "x" * 1_000_000 + "/.."
    argv = ["generate", "--spec", "smoke", "--out", str(tmp_path / "out"), "--scenes", "1", "--split", huge]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 800
    assert "--split" in err and re.search(r"\[[\d,]+ characters cut\]", err)
    assert not (tmp_path / "out").exists()


def test_bounded_keeps_short_messages_and_joins_lines():
    from rosetrain.core.errors import bounded

    assert bounded("a: b") == "a: b"
    assert bounded("one\ntwo") == "one two"
    cut = bounded("field: " + "y" * 5000 + " end")
    assert cut.startswith("field: y") and cut.endswith(" end") and len(cut) < 700


def test_one_flag_name_for_quiet_across_commands():
    """--quiet on every command with a progress bar (eval's and demo's --no-progress
    are the same option)."""
    for command in ("generate", "eval", "demo", "train"):
        parser = cli.build_parser(command)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
        options = {o for action in sub._actions for o in action.option_strings}
        assert "--quiet" in options, command
