"""Run ``rosetrain generate`` and SIGKILL it at an exact point of its writing.

    python kill_generate.py KIND PATTERN N -- GENERATE-ARGS...

The process kills itself (SIGKILL: no cleanup, no finally blocks) at the N-th
operation of KIND whose path matches the regular expression PATTERN. KIND
``write``: a ``rosetrain.core.io.atomic_write`` call of the generator (images,
parts, the manifest), killed after leaving half of the file under the temp
name the writer uses, as a kill midway through the write would. KIND
``rename``: a rename into place (``os.replace``: the Parquet shards and the
joined metadata, and the last step of every atomic write), killed before it.
With ``--num-proc 1`` everything happens in this process. Exits with the
command's code if the run finished before the N-th match.
"""

import os
import re
import signal
import sys

import rosetrain.data.generate as gen
from rosetrain.cli import main
from rosetrain.core.io import temp_path


def die_on(kind: str, pattern: str, nth: int) -> None:
    seen = {"n": 0}
    real_write, real_replace = gen.atomic_write, os.replace

    def hit(this_kind: str, path) -> bool:
        if this_kind == kind and re.search(pattern, str(path)):
            seen["n"] += 1
            return seen["n"] == nth
        return False

    def atomic_write(path, data):
        if hit("write", path):
            half = data[: len(data) // 2]
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = temp_path(path)  # the name the real writer uses (and records in its journal)
            with open(tmp, "wb") as handle:
                handle.write(half.encode() if isinstance(half, str) else half)
            os.kill(os.getpid(), signal.SIGKILL)
        return real_write(path, data)

    def replace(src, dst):
        if hit("rename", dst):
            os.kill(os.getpid(), signal.SIGKILL)
        return real_replace(src, dst)

    gen.atomic_write = atomic_write
    os.replace = replace


if __name__ == "__main__":
    kind, pattern, nth, separator, *args = sys.argv[1:]
    assert kind in ("write", "rename") and separator == "--"
    die_on(kind, pattern, int(nth))
    sys.exit(main(["generate", *args]))
