"""Whether the libraries may speak for themselves.

rosetrain's commands show their own progress and one summary line, so they
turn off what transformers, peft and TRL print on their own (progress bars
that leave ``\\x1b[A`` escapes in log files, notices about one library's use
of another's renamed API, which the user can act on none of). ``--verbose``
on a command that loads a model, or ``ROSETRAIN_VERBOSE=1`` in the
environment (which child processes, torchrun's among them, inherit), lets
them all through, for debugging a load or a library upgrade.
"""

from __future__ import annotations

import os

ENV = "ROSETRAIN_VERBOSE"


def verbose() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0")


def add_verbose_argument(parser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help=f"let the libraries' own progress bars and notices through (the same: {ENV}=1)",
    )
