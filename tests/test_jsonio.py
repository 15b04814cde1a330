"""The official scripts' spacing is the standard library's, byte for byte,
whichever encoder writes it: the bridge files are compared with the scripts'
own (tests/test_scoring_official_analysis.py) on a few hundred rows; these
cover every value a row may hold."""

from __future__ import annotations

import json
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rosetrain.core.jsonio import spaced_line

FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=1e-12, max_value=1e-3),  # where orjson writes 0.00001 for 1e-05
    st.sampled_from([0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e16, 1e15, 0.5, 2 / 3]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits too: orjson refuses those
    FLOATS,
    st.text(),  # every code point, lone surrogates and control characters included
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=12,
)
ROWS = st.dictionaries(st.text(), VALUES, max_size=8)


@settings(max_examples=300, deadline=None)
@given(row=ROWS)
def test_spaced_line_is_json_dumps_text(row):
    assert spaced_line(row) == json.dumps(row, ensure_ascii=False) + "\n"


@pytest.mark.parametrize(
    "row",
    [
        {"f1": 1e-05, "n": None},
        {"nan": float("nan"), "inf": float("-inf")},
        {"seed": 2**64 + 1},
        {"t": (1, 2.5, "x")},
        {"s": "\ud800 lone"},
        {"nested": {"deep": [0.00001234]}},
        {1: "a key not a str", None: 2.5},
        OrderedDict(a=float("nan"), b=[1e-05]),  # a mapping not a plain dict
    ],
)
def test_spaced_line_takes_the_standard_library_where_orjson_differs(row):
    assert spaced_line(row) == json.dumps(row, ensure_ascii=False) + "\n"
