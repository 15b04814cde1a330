"""A scored split's per-item JSON lines, by row: a list of them (scored in this
process), or the text the worker processes wrote into shared memory
(``MappedLines``), which is never cut into one Python object per line.

At 51,000 items the lines are 110 MB. Taken from the workers line by line,
the main process unpickled some 84,000 objects and copied each into the
per-item files; mapped, the files are written from the memory in one piece
per run of lines that lie there in file order (a chunk's, when its item ids
are sorted), and only the rows the bridge analyses read become objects.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

import numpy as np


class MappedLines(Sequence[bytes]):
    """Line ``i`` is ``text[starts[i]:ends[i]]`` (its newline included)."""

    def __init__(self, text: mmap.mmap | bytes, starts: np.ndarray, ends: np.ndarray):
        self.text, self.starts, self.ends = text, starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i):  # type: ignore[override]  # an int only: no row is taken by slice
        return self.text[self.starts[i] : self.ends[i]]

    def pieces(self, positions: Sequence[int]) -> list[bytes | memoryview]:
        """The lines at ``positions``, in that order, as few pieces of the text as
        there are runs of them that lie next to each other in it."""
        if not len(positions):
            return []
        at = np.asarray(positions, dtype=np.intp)
        starts, ends = self.starts[at], self.ends[at]
        cuts = np.flatnonzero(starts[1:] != ends[:-1]) + 1  # where a run ends and the next begins
        firsts = np.concatenate(([0], cuts))
        lasts = np.concatenate((cuts, [len(at)])) - 1
        view = memoryview(self.text)
        return [view[a:b] for a, b in zip(starts[firsts].tolist(), ends[lasts].tolist())]


def in_order(lines: Sequence[bytes], positions: Sequence[int]) -> list[bytes | memoryview]:
    """The lines at ``positions``, in that order, as pieces to write one after another."""
    if isinstance(lines, MappedLines):
        return lines.pieces(positions)
    return [lines[i] for i in positions]
