"""The bridge analyses read a scored row from its JSON line as from the row
itself: the same fields, and the same official text, which is the standard
library's spacing of the row's official fields (the scripts write
``json.dumps(row, ensure_ascii=False)``), whatever the row holds."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rosetrain.core.jsonio import jsonl_line
from rosetrain.scoring.bridges.rows import RowLines, RowsInMemory, joined_line
from rosetrain.scoring.fields import OFFICIAL_FIELDS, RESULT_FIELDS

TEXT = st.text(st.characters(blacklist_categories=("Cs",)))  # UTF-8 files hold no lone surrogate
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),  # past 64 bits: the line is the standard library's
    st.floats(allow_nan=False, allow_infinity=False),  # a scored row holds no NaN (orjson would write null)
    st.floats(min_value=1e-12, max_value=1e-3),  # where orjson writes 0.00001 for 1e-05
    TEXT,
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
# a scored row: every field, in the scorer's order
ROWS = st.lists(VALUES, min_size=len(RESULT_FIELDS), max_size=len(RESULT_FIELDS)).map(
    lambda values: dict(zip(RESULT_FIELDS, values))
)
READ = frozenset(("pass", "unified_soft", "gt_count", "raw_text", "gt_clicks", "not_a_field"))


@settings(max_examples=200, deadline=None)
@given(row=ROWS)
def test_a_line_gives_what_the_row_gives(row):
    line = jsonl_line(row)
    from_line, in_memory = RowLines([line]), RowsInMemory([row])
    official = json.dumps({field: row[field] for field in OFFICIAL_FIELDS}, ensure_ascii=False)
    assert from_line.official_text(0) == in_memory.official_text(0) == official[:-1].encode()
    assert (
        from_line.fields(0, READ) == in_memory.fields(0, READ) == {f: row[f] for f in READ - {"not_a_field"}}
    )


def test_a_bridge_line_is_the_whole_row_as_the_scripts_write_it():
    row = {"item_id": "a", "raw_text": "CLICK(R1,C1)\u2028é", "soft": 1e-05}
    own = {"source_item_id": "b", "cardinality_error": -1, "base_soft": 0.5}
    official = json.dumps(row, ensure_ascii=False)[:-1].encode()
    assert joined_line(official, own) == (json.dumps({**row, **own}, ensure_ascii=False) + "\n").encode()


def test_the_scorer_writes_the_official_fields_first(smoke_split, tmp_path):
    """What RowLines counts on: the official fields lead every scored row, in order."""
    from rosetrain.scoring.batch import score_prediction
    from rosetrain.scoring.gold import Gold

    data = smoke_split(tmp_path / "data", scenes=2)
    for line in (data / "metadata_test.jsonl").read_text().splitlines()[:8]:
        record = json.loads(line)
        row = score_prediction(Gold(record), {"raw_text": record["answer"]}, "m")
        assert list(row) == list(RESULT_FIELDS)
