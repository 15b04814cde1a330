"""Memo tables for the values a split repeats (parsed cell lists, regions, cell
labels): each is filled while a split is read and scored, and bounded.

``clear_memos`` empties them all once a run no longer needs them. Kept to the
end of a process, their hundreds of thousands of small containers are walked by
each of the interpreter's last garbage collections: about half a second after
scoring 50,000 items.
"""

from __future__ import annotations

from typing import Any

_TABLES: list[dict] = []


def memo_table() -> dict[Any, Any]:
    """A new, empty memo table that ``clear_memos`` empties."""
    table: dict[Any, Any] = {}
    _TABLES.append(table)
    return table


def clear_memos() -> None:
    for table in _TABLES:
        table.clear()
