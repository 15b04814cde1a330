"""``MappedLines``: a scored split's per-item lines as the worker processes
wrote them into shared memory, by row, and written out in any order as few
pieces as the rows' places allow."""

from __future__ import annotations

import numpy as np

from rosetrain.scoring.lines import MappedLines, in_order

# three chunks' text, put in memory in the order the workers finished them
# (the second chunk first), and the rows' places in file order
TEXT = b"c1\nc2\n" + b"a1\na2\na3\n" + b"b1\n"
STARTS = np.array([6, 9, 12, 0, 3, 15])
ENDS = np.array([9, 12, 15, 3, 6, 18])
ROWS = [b"a1\n", b"a2\n", b"a3\n", b"c1\n", b"c2\n", b"b1\n"]


def test_a_row_is_its_line():
    lines = MappedLines(TEXT, STARTS, ENDS)
    assert len(lines) == 6 and list(lines) == ROWS and lines[4] == b"c2\n"


def test_rows_that_lie_next_to_each_other_are_one_piece():
    lines = MappedLines(TEXT, STARTS, ENDS)
    for order in ([0, 1, 2, 3, 4, 5], [3, 4, 0, 1, 2, 5], [5, 2, 1, 0], [4, 0], [1], []):
        pieces = in_order(lines, order)
        assert b"".join(bytes(p) for p in pieces) == b"".join(ROWS[i] for i in order)
    assert [bytes(p) for p in in_order(lines, [0, 1, 2, 5])] == [b"a1\na2\na3\nb1\n"]
    assert [bytes(p) for p in in_order(lines, [0, 2, 1])] == [b"a1\n", b"a3\n", b"a2\n"]
    # c2 ends where a1 begins
    assert [bytes(p) for p in in_order(lines, [3, 4, 0, 1])] == [b"c1\nc2\na1\na2\n"]


def test_a_list_of_lines_gives_them_as_they_are():
    assert in_order(ROWS, [5, 0]) == [b"b1\n", b"a1\n"]
