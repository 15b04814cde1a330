"""Run ``rosetrain eval`` and SIGKILL it at an exact point of its writing.

    python kill_eval.py KIND WHICH -- EVAL-ARGS...

The process kills itself (SIGKILL: no cleanup, no finally blocks):

- ``torn-line N``: while saving the N-th prediction, leaving half its line;
- ``saved-line N``: right after the N-th prediction is saved (fsync'd);
- ``torn-file NAME``: while writing the scored file NAME (its temp file half
  written, as a kill midway through ``rosetrain.core.io.atomic_write`` leaves it);
- ``before-rename NAME``: with NAME fully written under its temp name, just
  before it is renamed into place.

Exits with the command's code if the run finished before the kill point.
"""

import os
import signal
import sys

import rosetrain.data.predictions as predictions
from rosetrain.cli import main


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def die_saving(kind: str, nth: int) -> None:
    real_write = predictions.PredictionWriter.write
    seen = {"n": 0}

    def write(self, row):
        real_write(self, row)
        seen["n"] += 1
        if seen["n"] != nth:
            return
        if kind == "torn-line":  # cut the line just saved in half
            size = self.path.stat().st_size
            last = self.path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
            os.truncate(self.path, size - (len(last) + 1) // 2)
        die()

    predictions.PredictionWriter.write = write


def die_writing(kind: str, name: str) -> None:
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(dst) == name:
            if kind == "torn-file":
                os.truncate(src, os.path.getsize(src) // 2)
            die()
        return real_replace(src, dst)

    os.replace = replace


if __name__ == "__main__":
    kind, which, separator, *args = sys.argv[1:]
    assert separator == "--"
    if kind in ("torn-line", "saved-line"):
        die_saving(kind, int(which))
    else:
        assert kind in ("torn-file", "before-rename")
        die_writing(kind, which)
    sys.exit(main(["eval", *args]))
