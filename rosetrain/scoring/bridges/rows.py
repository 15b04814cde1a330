"""The per-item rows the bridge analyses read, by frame position: held in
memory, or read back from the JSON lines the run writes.

A bridge file's row is the per-item row's official fields, then the bridge's
own. The analyses read only a few fields of each row (its figures, its
pairing), and copy the official fields into the file as text. Read from a
line, neither needs the whole row decoded: the few fields come from a decoder
that skips the rest, and the official fields' text is the line's own first
part, respaced as the scripts write it. At 51,000 items that takes a fifth
less time than decoding each row whole and encoding it again (0.22 against
0.28 s on one core).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rosetrain.core.jsonio import fields_decoder, spaced_line
from rosetrain.scoring.fields import EXTRA_FIELDS, OFFICIAL_FIELDS


class ScoredRows(Protocol):
    def fields(self, i: int, names: frozenset[str]) -> dict[str, Any]:
        """The named fields of row ``i`` (those it lacks left out)."""
        ...

    def official_text(self, i: int) -> bytes:
        """Row ``i``'s official fields as ``json.dumps(..., ensure_ascii=False)``
        writes them (UTF-8), without the closing brace."""
        ...


class RowsInMemory:
    def __init__(self, rows: Sequence[Mapping[str, Any]]):
        self.rows = rows

    def fields(self, i: int, names: frozenset[str]) -> dict[str, Any]:
        row = self.rows[i]
        return {name: row[name] for name in names if name in row}

    def official_text(self, i: int) -> bytes:
        return _spaced_official(self.rows[i])


# Where a scored row's line leaves its official fields: they come first, in
# order (fields.RESULT_FIELDS), and a key's quotes cannot occur inside a
# string of JSON, where a quote is always escaped.
_AFTER_OFFICIAL = b',"' + EXTRA_FIELDS[0].encode() + b'":'


class RowLines:
    """Rows given as the compact lines ``json_line`` wrote (a scored row's
    fields in the scorer's order)."""

    def __init__(self, lines: Sequence[bytes]):
        self.lines = lines

    def fields(self, i: int, names: frozenset[str]) -> dict[str, Any]:
        import msgspec

        record = fields_decoder(names).decode(self.lines[i])
        found = {name: getattr(record, name) for name in names}
        return {name: value for name, value in found.items() if value is not msgspec.UNSET}

    def official_text(self, i: int) -> bytes:
        import msgspec

        line = self.lines[i]
        end = line.find(_AFTER_OFFICIAL)
        head = line[:end]
        # orjson's text is json.dumps's but for a float under 1e-4 (0.00001, 1.5e-7
        # against 1e-05, 1.5e-07); a line that json_line wrote with ASCII escapes
        # (what orjson cannot write) has \u in it. Either way: decode and write it.
        if end < 0 or b"\\u" in head or b"e-" in head or b"0.0000" in head:
            return _spaced_official(msgspec.json.decode(line))
        return msgspec.json.format(head + b"}", indent=0)[:-1]


def _spaced_official(row: Mapping[str, Any]) -> bytes:
    return spaced_line({field: row[field] for field in OFFICIAL_FIELDS})[:-2].encode()


def joined_line(official: bytes, own: Mapping[str, Any]) -> bytes:
    """A bridge file's line (UTF-8): the official fields' text, then the bridge's
    own fields, as ``json.dumps(..., ensure_ascii=False)`` writes the whole row.
    Bytes, not text: they go to a file, and from a forked process (``writer.py``)."""
    return official + b", " + spaced_line(own)[1:].encode()
