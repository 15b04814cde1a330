"""Named things a user picks by name: the one way rosetrain registers them.

A :class:`Registry` is a read-only mapping ``name -> entry`` with a kind
("family", "runner", ...) for its messages. An entry that is code is written as
an import path, ``"module:attr"`` (or ``"module"`` for a whole module), and imported only by :meth:`Registry.load`:
reading a registry (listing names, checking a spec) never imports what it
names, so ``generate`` and ``score`` stay free of torch however many runners
exist. An entry that is plain data (a result field, a folder) is stored as is
and read with :meth:`Registry.lookup`.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

from rosetrain.core.errors import RosetrainError

V = TypeVar("V")


class Registry(Mapping[str, V], Generic[V]):
    """``kind`` names what is registered, for messages ("unknown runner ...");
    ``argument`` is the function argument or key that takes a name, set on the
    error so the command line can add its option."""

    def __init__(self, kind: str, entries: Mapping[str, V] | None = None, *, argument: str | None = None):
        self.kind = kind
        self.argument = argument
        self._entries: dict[str, V] = {}
        self._loaded: dict[str, Any] = {}
        for name, entry in (entries or {}).items():
            self.register(name, entry)

    def register(self, name: str, entry: V) -> None:
        """Add ``name``; a name is registered once (a second one is a bug, not an override)."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry

    def __getitem__(self, name: str) -> V:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)!r})"

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def unknown(self, name: object) -> str:
        """The message for a name that is not registered: the kind, the nearest
        name when one is close, and every known name."""
        close = difflib.get_close_matches(str(name), list(self._entries), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(self._entries)})"

    def check(self, name: str) -> str:
        """``name`` itself when it is registered, else a RosetrainError naming the kind."""
        if name not in self._entries:
            raise RosetrainError(self.unknown(name), argument=self.argument)
        return name

    def lookup(self, name: str) -> V:
        """The entry of ``name`` as registered; an unknown name is a RosetrainError."""
        return self._entries[self.check(name)]

    def load(self, name: str) -> Any:
        """What the ``"module:attr"`` (or ``"module"``) entry of ``name`` points to,
        imported on first use and kept; an unknown name is a RosetrainError."""
        if name not in self._loaded:
            module_name, _, attr = str(self.lookup(name)).partition(":")
            module = importlib.import_module(module_name)
            self._loaded[name] = getattr(module, attr) if attr else module
        return self._loaded[name]
