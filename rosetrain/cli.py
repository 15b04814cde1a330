"""The ``rosetrain`` command line.

Each sub-command lives in its own module under ``rosetrain.commands`` with two
functions, ``add_arguments(parser)`` and ``run(args) -> int``. Modules are
imported only when their command runs, and import torch/transformers/trl only
inside ``run``, so ``rosetrain generate`` and ``rosetrain score`` start fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import Any, NoReturn

from rosetrain.core.errors import RosetrainError, bounded
from rosetrain.core.verbosity import ENV as VERBOSE_ENV

# What `rosetrain --help` says first (the module's docstring is RST, which a terminal shows raw).
DESCRIPTION = (
    "rosetrain: training data, TRL recipes and gap evaluation for the ROSE perception-to-action benchmark"
)

# name -> (module, one-line help)
COMMANDS = {
    "generate": ("rosetrain.commands.generate", "generate scenes and tasks from a YAML spec"),
    "preview": ("rosetrain.commands.preview", "draw a contact sheet of a generated split"),
    "score": ("rosetrain.commands.score", "score predictions against a split"),
    "eval": ("rosetrain.commands.evaluate", "run a model over a split, then score it"),
    "compare": ("rosetrain.commands.compare", "compare two scored runs item by item"),
    "export-lmms-eval": (
        "rosetrain.commands.export_lmms_eval",
        "write an lmms-eval task for a split, scored by rosetrain's scorer",
    ),
    "tiny-model": (
        "rosetrain.commands.tiny_model",
        "build a tiny Qwen2-VL, Qwen2.5-VL or Qwen3-VL model offline",
    ),
    "train": ("rosetrain.commands.train", "LoRA/full SFT or GRPO through TRL from a recipe"),
    "demo": ("rosetrain.commands.demo", "the end-to-end demo: base, SFT, GRPO, compare"),
    "curriculum": (
        "rosetrain.commands.curriculum",
        "weight a generator spec by the failures a scored run measured",
    ),
    "signal": ("rosetrain.commands.signal", "pre-RL check: would GRPO's sampled groups carry signal?"),
    "configs": (
        "rosetrain.commands.configs",
        "list the shipped specs, recipes and suites, or copy one out to edit",
    ),
}


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help says its default: appended (``(default: 8)``, ``(default:
    none)``) unless the help already says it in words; flags and required options
    have none to say."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            not action.option_strings  # a positional is always given
            or action.nargs == 0  # a flag: off unless given
            or action.required
            or action.default is argparse.SUPPRESS
            or "default" in text
        ):
            return text
        shown = "none" if action.default is None or action.default == [] else "%(default)s"
        return f"{text} (default: {shown})" if text else f"default: {shown}"


class Parser(argparse.ArgumentParser):
    """A bad option is one line that names it, as every other error is: argparse's
    own error() prints the whole usage block above it. The subcommands' parsers are
    of this class too (argparse makes them of their parent's)."""

    command: str | None = None  # the command whose module was imported (build_parser)

    def error(self, message: str) -> NoReturn:
        prog = self.prog if self.command is None else f"{self.prog} {self.command}"
        self.exit(2, f"{self.prog}: error: {bounded(message)} (see {prog} --help)\n")


class _Version(argparse.Action):
    """``--version``, looked up when asked: ``importlib.metadata`` took 18 ms of
    every command's start."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"rosetrain {version()}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = Parser(prog="rosetrain", description=DESCRIPTION)
    parser.command = command if command in COMMANDS else None
    parser.add_argument("--version", action=_Version, help="show rosetrain's version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub_parser = sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=HelpFormatter
        )
        if name == command:  # only the chosen command's module is imported
            importlib.import_module(module_name).add_arguments(sub_parser)
    return parser


# A library argument whose option has another dest: out_dir is --out, ...
ARGUMENT_DESTS = {
    "out_dir": "out",
    "exclude_metadata": "exclude",
    "folders": "merge",
    "assume_same_data": "same_data",
}


def error_line(command: str, err: RosetrainError) -> str:
    """A library error as the command line speaks: the argument it names (an
    option's ``dest``, or the dest :data:`ARGUMENT_DESTS` gives) written as its
    option (``pass overwrite=True`` -> ``pass --overwrite``, ``allow_partial`` ->
    ``--allow-partial``), or " (option --flag)" added where the text does not say it."""
    text = str(err)
    action = argument_action(command, err.argument) if err.argument else None
    if action is None:
        return text
    option = action.option_strings[0]
    spoken = text
    for dest in {err.argument, action.dest} - {None}:
        spoken = speak_option(spoken, str(dest), option, action.nargs == 0)
    return spoken if option in spoken else f"{spoken} (option {option})"


NOT_IN_A_NAME = r"(?<![\w./-])"  # the word starts here, not inside a path or a longer name


def speak_option(text: str, dest: str, option: str, flag: bool) -> str:
    """``text`` with the Python spellings of ``dest`` replaced by ``option``:
    ``dest=True`` (a flag), ``dest=VALUE`` and, for a name with '_' (never an
    English word), ``dest`` alone."""
    if flag:
        text = re.sub(rf"{NOT_IN_A_NAME}{dest}=True\b", option, text)
    text = re.sub(rf"{NOT_IN_A_NAME}{dest}=(?=[^\s=])", f"{option} ", text)
    if "_" in dest:  # not part of a path or file name (runs/out_dir/x, out_dir.json)
        text = re.sub(rf"{NOT_IN_A_NAME}{dest}(?![\w=/-])(?!\.\w)", option, text)
    return text


def argument_action(command: str, argument: str) -> argparse.Action | None:
    """The option of ``command`` that sets ``argument`` (a dest, or one
    :data:`ARGUMENT_DESTS` maps to a dest), if any."""
    parser = build_parser(command)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    wanted = (argument, ARGUMENT_DESTS.get(argument))
    for action in commands.choices[command]._actions:
        if action.dest in wanted and action.option_strings:
            return action
    return None


def version() -> str:
    """The installed distribution's version (pyproject.toml's, in a clone's editable install)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("rosetrain")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    owns_process = argv is None  # the command line's own process, not a caller's
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command not in COMMANDS:
        command = None
    else:  # a command may speak another tool's dialect (train: TRL's --learning_rate 1e-4)
        rewrite = getattr(importlib.import_module(COMMANDS[command][0]), "rewrite_argv", None)
        if rewrite is not None:
            at = argv.index(command) + 1
            argv = argv[:at] + rewrite(argv[at:])
    try:
        args = build_parser(command).parse_args(argv)
    except SystemExit as stop:  # argparse has printed its one line (or the help)
        if owns_process:
            raise
        return int(stop.code or 0)  # a caller's main(argv) gets the exit code, its process lives on
    args.owns_process = owns_process  # only then may a command change process-wide state
    if args.command is None:
        build_parser().print_help()
        return 2
    if getattr(args, "verbose", False):  # an environment variable, so that child processes hear it too
        os.environ[VERBOSE_ENV] = "1"
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.run(args) or 0)
    except RosetrainError as err:
        print(f"rosetrain {args.command}: error: {bounded(error_line(args.command, err))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`rosetrain configs list | head`): not an error of ours
        if owns_process:  # stop the interpreter's own flush at exit from failing again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a process ended by SIGPIPE
    except OSError as err:  # the machine refused: disk full, permission denied, I/O error
        where = f"{err.filename}: " if err.filename else ""
        print(f"rosetrain {args.command}: error: {bounded(f'{where}{err.strerror or err}')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"\nrosetrain {args.command}: interrupted; run the same command again to resume", file=sys.stderr
        )
        return 130
