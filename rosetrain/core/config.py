"""One way to read a config (generator spec, training recipe, eval suite) from YAML.

A config is a dataclass whose fields are declared with :func:`setting`: the
field's type, its allowed range or choices and its help text sit beside it.
:func:`from_mapping` checks a mapping read from YAML against those fields and
returns the values to build the dataclass with:

- an unknown key fails with "did you mean" and the valid keys;
- a value of the wrong type fails naming the key and the type; a string is
  never read as a number (YAML reads ``5e-7`` as a float with
  :func:`rosetrain.core.io.load_yaml`) and ``true`` is not an integer;
- a number outside its range, NaN or infinity fails naming the key and the range.

applies an override ``key=value`` (``rosetrain train --set``) to such a mapping, and
:func:`render_keys` writes the Markdown list of keys the docs show. Standard
library only (yaml is imported to read an override's value), so the fast
commands can use it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "ConfigError",
    "Range",
    "apply_override",
    "check_fields",
    "check_value",
    "from_mapping",
    "render_keys",
    "setting",
    "valid_keys",
]

# The largest seed numpy's legacy RandomState (transformers' set_seed) accepts.
SEED_32 = 2**32 - 1
# Seeds that are only hashed (scene seeds): any non-negative 64-bit integer.
SEED_64 = 2**63 - 1


class ConfigError(ValueError):
    """A bad key or value; the message starts with the key. Callers add the file."""


@dataclasses.dataclass(frozen=True)
class Range:
    """Allowed numbers: ``low``/``high`` (None: unbounded), each end open or closed.
    Every number must also be finite."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None and (value > self.high or (self.high_open and value == self.high)))

    def describe(self) -> str:
        low, high = _show(self.low), _show(self.high)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {low}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {high}"
        return "a finite number"


def _show(bound: float | None) -> str:
    if bound is None:
        return ""
    if bound in (SEED_32, SEED_64):
        return f"2**{int(math.log2(bound + 1))}-1"
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


def setting(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    factory: Any = dataclasses.MISSING,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    choices: tuple[Any, ...] | None = None,
    parse: Callable[[Any, str], Any] | None = None,
    shown_default: str | None = None,
) -> Any:
    """A config field: its default, help text, allowed range (numbers, finite) or
    choices, and for values of their own shape (a weight table, a cell range) the
    function that reads them (``parse(value, key) -> value``, raising ValueError).
    ``shown_default`` is what the key table says of a default the code works out
    (``the file's name``)."""
    bounds = None
    if low is not None or high is not None:
        bounds = Range(low, high, low_open, high_open)
    metadata = {
        "help": help,
        "range": bounds,
        "choices": choices,
        "parse": parse,
        "shown_default": shown_default,
    }
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def valid_keys(cls: type, hidden: frozenset[str] | set[str] = frozenset()) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name not in hidden and f.init]


def unknown_key(key: str, keys: list[str], where: str = "the top level") -> ConfigError:
    close = difflib.get_close_matches(str(key), keys, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown key {key!r} at {where}{hint}; valid keys: {', '.join(keys)}")


def from_mapping(
    cls: type,
    raw: Mapping[str, Any],
    prefix: str = "",
    hidden: frozenset[str] | set[str] = frozenset(),
) -> dict[str, Any]:
    """The checked values of ``raw`` for ``cls``'s fields (only the keys given:
    the dataclass's defaults fill in the rest). A field whose type is a config
    dataclass is read recursively from its mapping; null there means its
    defaults, unless the field may be None. ``prefix`` (``"lora."``) starts the
    key in messages; ``hidden`` fields are not keys."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {raw!r}")
    keys = valid_keys(cls, hidden)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in keys:
            raise unknown_key(key, keys, prefix.rstrip(".") or "the top level")
        out[key] = check_value(value, hints[key], prefix + key, fields[key].metadata)
    return out


def check_fields(obj: Any, prefix: str = "", hidden: frozenset[str] | set[str] = frozenset()) -> None:
    """Check (and convert, as :func:`check_value`) every field of a config
    dataclass in place: called by its ``__post_init__``, so one built in Python
    is held to the same types and ranges as one read from YAML. Sections check
    themselves; fields with a ``parse`` hold their parsed value already."""
    hints = _hints(type(obj))
    for field in dataclasses.fields(obj):
        if field.name in hidden or not field.init or field.metadata.get("parse") is not None:
            continue
        options, _ = _options(hints[field.name])
        value = getattr(obj, field.name)
        section = _section(options)
        if section is not None and (value is None or isinstance(value, section)):
            continue
        checked = check_value(value, hints[field.name], prefix + field.name, field.metadata)
        if checked is not value:
            object.__setattr__(obj, field.name, checked)  # frozen dataclasses too


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:  # resolving string annotations is slow; a config class's never change
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def check_value(
    value: Any, hint: Any, name: str, metadata: Mapping[str, Any] = types.MappingProxyType({})
) -> Any:
    """``value`` checked against a type hint and a field's range/choices/parse."""
    options, nullable = _options(hint)
    if value is None:
        section = _section(options)
        if nullable or hint is Any:
            return None
        if section is not None:  # a section given as null: its defaults
            return section()
        raise ConfigError(f"{name}: must not be null")
    if metadata.get("parse") is not None:
        return metadata["parse"](value, name)
    section = _section(options)
    if section is not None:
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{name}: expected a mapping of {', '.join(valid_keys(section))}, got {value!r}"
            )
        return section(**from_mapping(section, value, name + "."))
    for target in options:
        converted = _convert(value, target, name)
        if converted is not _NO:
            break
    else:
        expected = " or ".join(_type_name(t) for t in options)
        raise ConfigError(f"{name}: expected {expected}, got {value!r}")
    choices = metadata.get("choices")
    if choices is not None and converted not in choices:
        shown = ", ".join("null" if c is None else str(c) for c in choices)
        raise ConfigError(f"{name}: {converted!r} is not one of {shown}")
    bounds = metadata.get("range")
    if bounds is not None:
        check_range(converted, bounds, name)
    return converted


def check_range(value: Any, bounds: Range, name: str) -> None:
    """Numbers (also inside a list or a mapping's values) within ``bounds``."""
    items = value.values() if isinstance(value, Mapping) else value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, (int, float)) and not bounds.contains(item):
            raise ConfigError(f"{name}: must be {bounds.describe()}, got {item!r}")


def _options(hint: Any) -> tuple[list[Any], bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        return [a for a in args if a is not type(None)], type(None) in args
    return [hint], False


def _section(options: list[Any]) -> type | None:
    for option in options:
        if isinstance(option, type) and dataclasses.is_dataclass(option):
            return option
    return None


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _type_name(target: Any) -> str:
    origin = typing.get_origin(target)
    if origin is list:
        (item,) = typing.get_args(target) or (Any,)
        return f"a list of {_plural(item)}"
    if origin is dict:
        args = typing.get_args(target)
        return f"a mapping of {_plural(args[1])}" if args else "a mapping"
    if origin is tuple:
        args = typing.get_args(target)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(args[0])}"
        return f"a list of {len(args)} {_plural(args[0]) if len(set(args)) == 1 else 'values'}"
    return _TYPE_NAMES.get(target, getattr(target, "__name__", str(target)))


def _plural(target: Any) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "booleans"}.get(target, "values")


_NO = object()


def _convert(value: Any, target: Any, name: str) -> Any:
    """``value`` as ``target``, or ``_NO``. Numbers must be finite; a whole float
    is an int (YAML's ``1e3``), an int is a number; strings and booleans are
    never numbers."""
    origin = typing.get_origin(target) or target
    if target is Any:
        return value
    if origin is bool:
        return value if isinstance(value, bool) else _NO
    if origin in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _NO
        if not math.isfinite(value):
            raise ConfigError(f"{name}: must be a finite number, got {value!r}")
        if origin is float:
            return value  # an int stays one: a spec's weights are part of what it hashes and writes
        return (
            int(value)
            if isinstance(value, float) and value.is_integer()
            else value
            if isinstance(value, int)
            else _NO
        )
    if origin is str:
        return value if isinstance(value, str) else _NO
    if origin is list:
        items = value if isinstance(value, list) else [value]  # `report_to: none` is a list of one
        (item_type,) = typing.get_args(target) or (Any,)
        out = [_convert(v, item_type, f"{name}[{i}]") for i, v in enumerate(items)]
        return _NO if any(v is _NO for v in out) else out
    if origin is dict:
        if not isinstance(value, Mapping):
            return _NO
        args = typing.get_args(target)
        if not args:
            return dict(value)
        converted = {}
        for key, item in value.items():
            checked = _convert(item, args[1], f"{name}.{key}")
            if checked is _NO:
                raise ConfigError(f"{name}.{key}: expected {_type_name(args[1])}, got {item!r}")
            converted[key] = checked
        return converted
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            return _NO
        args = typing.get_args(target)
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        if len(args) != len(value):
            return _NO
        out = [_convert(v, t, name) for v, t in zip(value, args, strict=True)]
        return _NO if any(v is _NO for v in out) else tuple(out)
    return value if isinstance(value, origin) else _NO


# ----------------------------------------------------------------- overrides


def apply_override(
    raw: dict[str, Any], item: str, cls: type, hidden: frozenset[str] | set[str] = frozenset()
) -> None:
    """``a.b.c=value`` (the value read as YAML): set a nested key of ``raw``,
    creating sections; each part of the key must be a key of its section."""
    from rosetrain.core.io import load_yaml

    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {item!r}: expected key=value (e.g. learning_rate=5e-7, lora.r=8)")
    try:
        value = load_yaml(text) if text.strip() else None
    except ValueError as err:
        raise ConfigError(f"override {item!r}: the value is not YAML: {err}") from None
    parts = key.split(".")
    section: type | None = cls
    hint: Any = None  # the key's type, where a section declares it
    for depth, part in enumerate(parts):
        if section is None:  # a free-form mapping (trl, rewards): checked when validated
            hint = None
            break
        keys = valid_keys(section, hidden if section is cls else frozenset())
        if part not in keys:
            raise unknown_key(part, keys, ".".join(parts[:depth]) or "the top level")
        hint = typing.get_type_hints(section)[part]
        section = _section(_options(hint)[0])
    if value is not None and not isinstance(value, str) and hint is not None and _options(hint)[0] == [str]:
        # a key that only takes a string takes the text as written: `loss_from=inside:`
        # means the text "inside:", not the YAML mapping {inside: null}
        value = text.strip()
    node = raw
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}  # a section given as null/absent: start it from its defaults
        node = node[part]
    node[parts[-1]] = value


# ----------------------------------------------------------------- docs


def render_keys(cls: type, hidden: frozenset[str] | set[str] = frozenset(), indent: str = "") -> list[str]:
    """Markdown list items: each key with its default, allowed values and help;
    a section's keys nested under it."""
    hints = typing.get_type_hints(cls)
    lines = []
    for field in dataclasses.fields(cls):
        if field.name in hidden or not field.init:
            continue
        section = _section(_options(hints[field.name])[0])
        help_text = field.metadata.get("help", "")
        if section is not None:
            lines.append(f"{indent}- `{field.name}:` {help_text}")
            lines += render_keys(section, indent=indent + "  ")
            continue
        lines.append(f"{indent}- `{field.name}` ({_default(field)}{_allowed(field)}): {help_text}")
    return lines


def replace_between(text: str, begin: str, end: str, body: str) -> str:
    """``text`` with what lies between the ``begin`` and ``end`` marker lines replaced
    by ``body``: how a document's generated key list is rewritten in place."""
    if begin not in text or end not in text:
        raise ValueError(f"the markers {begin!r} and {end!r} are missing")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def _default(field: dataclasses.Field) -> str:
    if field.metadata.get("shown_default"):
        return f"default: {field.metadata['shown_default']}"
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    return f"default `{json.dumps(value)}`"


def _allowed(field: dataclasses.Field) -> str:
    bounds, choices = field.metadata.get("range"), field.metadata.get("choices")
    if bounds is not None:
        return f"; {bounds.describe()}"
    if choices is not None:
        return "; one of " + ", ".join(f"`{'null' if c is None else c}`" for c in choices)
    return ""
