"""Strict parsing of a model response into the ROSE answer grammar.

The rules are those of the official ROSE v0.1 evaluator (``demo/evaluate_rose.py``
of the public ROSE-v0.1 repository), so that a reward never punishes an answer
the benchmark accepts:

- The response (``str()`` of it; None is empty) is stripped; surrounding prose
  makes it invalid.
- COUNT mode: the whole answer is one ``COUNT(n)`` (no ``;`` splitting).
- CLICK / CLICK_COUNT: the answer is split on ``;``, each part stripped, and
  empty parts dropped (``;;`` and a trailing ``;`` are fine). The last part
  must be ``DONE`` (CLICK) or ``SUBMIT(n)`` (CLICK_COUNT); every other part a
  ``CLICK(Rr,Cc)``.
- Keywords match case-insensitively as Python's ``re.IGNORECASE`` does (so the
  Kelvin sign matches ``K``, ``ſ`` matches ``S``); whitespace is allowed
  between every part of a token (``CLICK ( R4 , C11 )``); numbers are any
  Unicode decimal digits (``COUNT(١)``).

An invalid answer still carries what could be read from it, as the official
evaluator keeps it: the CLICK tokens that did parse when only some other part
was bad (``invalid_CLICK_token``), and the SUBMIT number when the last part
was a valid ``SUBMIT(n)``. Error codes are the official ones: ``empty``,
``expected_COUNT_only``, ``missing_DONE``, ``missing_SUBMIT``,
``invalid_CLICK_token``; ``detail`` says the same in words.

A number of 10**300 or more is kept as ``HUGE_NUMBER`` (never a valid count
or cell), so that no count error overflows a float: the official evaluator
fails on such numbers (from about 1.8 * 10**308 the float of its count score
overflows; past 4300 digits, Python's int-string limit, it cannot read them).
Smaller numbers keep their exact value, as the official evaluator keeps them.
Every pattern is linear in the input: each ``\\s*`` sits between fixed
characters whitespace cannot match.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

from rosetrain.core.protocol import CLICK, CLICK_COUNT, COUNT, Cell

HUGE_NUMBER = 10**18

_I = re.IGNORECASE
_CLICK_BODY = r"CLICK\s*\(\s*R\s*(\d+)\s*,\s*C\s*(\d+)\s*\)"
_SUBMIT_BODY = r"SUBMIT\s*\(\s*(\d+)\s*\)"
# One part of a split answer (already stripped, but the patterns tolerate edges).
_CLICK_PART = re.compile(r"\s*" + _CLICK_BODY + r"\s*", _I)
_SUBMIT_PART = re.compile(r"\s*" + _SUBMIT_BODY + r"\s*", _I)
_DONE_PART = re.compile(r"\s*DONE\s*", _I)
_COUNT_ANSWER = re.compile(r"\s*COUNT\s*\(\s*(\d+)\s*\)\s*", _I)

# Whole-answer patterns for the common valid case: one C-level match. Empty
# parts are runs of ``;`` and whitespace, allowed before, between and after.
_CLICKS_THEN = r"[\s;]*(?:CLICK\s*\(\s*R\s*\d+\s*,\s*C\s*\d+\s*\)\s*;[\s;]*)*"
_CLICK_ANSWER = re.compile(_CLICKS_THEN + r"DONE[\s;]*", _I)
_CLICK_COUNT_ANSWER = re.compile(_CLICKS_THEN + _SUBMIT_BODY + r"[\s;]*", _I)
# In a valid answer ``(R`` only ever opens a CLICK's cell.
_CELL = re.compile(r"\(\s*R\s*(\d+)\s*,\s*C\s*(\d+)", _I)

_TERMINAL = {CLICK: "DONE", CLICK_COUNT: "SUBMIT(n)"}


class ParsedAnswer(NamedTuple):
    """A response read against one task mode.

    ``clicks`` keeps the order and duplicates of the CLICK tokens that parsed
    (also in an invalid answer, as the official evaluator reads them);
    ``count`` is the n of ``COUNT(n)`` or of a final ``SUBMIT(n)``; ``error``
    is the official parse-error code (None when valid), ``detail`` the same in
    words; ``invalid_tokens`` the parts the grammar rejected.
    """

    valid: bool
    error: str | None = None
    clicks: tuple[Cell, ...] = ()
    count: int | None = None  # type: ignore[assignment]  # shadows tuple.count: the answer's n
    invalid_tokens: tuple[str, ...] = ()
    detail: str | None = None


HUGE_FROM = 10**300  # numbers from here on are HUGE_NUMBER: float(count error) must not overflow
_HUGE_DIGITS = 300  # a number of more digits (no leading zeros) is at least HUGE_FROM


def _number(digits: str) -> int:
    try:
        value = int(digits)
    except ValueError:  # past Python's int-string limit: read the digits without int()
        digits = "".join(str(unicodedata.decimal(d)) for d in digits).lstrip("0")
        return int(digits or "0") if len(digits) <= _HUGE_DIGITS else HUGE_NUMBER
    return value if value < HUGE_FROM else HUGE_NUMBER


def _snippet(token: str) -> str:
    return repr(token if len(token) <= 40 else token[:37] + "...")


_new_parsed = tuple.__new__  # builds a ParsedAnswer without NamedTuple's Python __new__


def _cells(pairs) -> tuple[Cell, ...]:
    return tuple([(_number(r), _number(c)) for r, c in pairs])


def parse_answer(text: object, mode: str) -> ParsedAnswer:
    """Parse ``text`` strictly as an answer in ``mode`` (COUNT, CLICK or CLICK_COUNT).

    Never raises on any response (None, non-strings, empty, prose, huge).
    An unknown ``mode`` is a programming error and raises ValueError.
    """
    # The hot path (a str that matches the grammar) is kept flat: it runs for
    # every completion of every GRPO step and every evaluated item.
    if type(text) is str:
        answer = text.strip()
        if mode == CLICK:
            if _CLICK_ANSWER.fullmatch(answer):
                return _new_parsed(ParsedAnswer, (True, None, _cells(_CELL.findall(answer)), None, (), None))
        elif mode == COUNT:
            match = _COUNT_ANSWER.fullmatch(answer)
            if match:
                return _new_parsed(ParsedAnswer, (True, None, (), _number(match.group(1)), (), None))
        elif mode == CLICK_COUNT:
            match = _CLICK_COUNT_ANSWER.fullmatch(answer)
            if match:
                return _new_parsed(
                    ParsedAnswer,
                    (True, None, _cells(_CELL.findall(answer)), _number(match.group(1)), (), None),
                )
    return parse_by_parts(text, mode)


def parse_by_parts(text: object, mode: str) -> ParsedAnswer:
    """The part-by-part reading (valid or not); ``parse_answer`` agrees with it."""
    if mode not in (COUNT, CLICK, CLICK_COUNT):
        raise ValueError(f"unknown task mode {mode!r}")
    if text is None:
        return ParsedAnswer(False, "empty", detail="no response")
    try:
        answer = (text if type(text) is str else str(text)).strip()
    except Exception:  # an object whose str() fails is no answer
        answer = ""
    if not answer:
        return ParsedAnswer(False, "empty", detail="empty response")
    if mode == COUNT:
        match = _COUNT_ANSWER.fullmatch(answer)
        if match:
            return ParsedAnswer(True, count=_number(match.group(1)))
        return ParsedAnswer(
            False,
            "expected_COUNT_only",
            invalid_tokens=(answer,),
            detail=f"expected COUNT(n), got {_snippet(answer)}",
        )
    parts = [p.strip() for p in answer.split(";")]
    parts = [p for p in parts if p]
    return _parse_click_parts(parts, mode)


def _parse_click_parts(parts: list[str], mode: str) -> ParsedAnswer:
    if not parts:  # only ';' and whitespace
        code = "missing_DONE" if mode == CLICK else "empty"
        return ParsedAnswer(False, code, detail="no token between the ';'")
    count = None
    if mode == CLICK:
        ends_right = _DONE_PART.fullmatch(parts[-1]) is not None
    else:
        submit = _SUBMIT_PART.fullmatch(parts[-1])
        ends_right = submit is not None
        count = _number(submit.group(1)) if submit else None
    if not ends_right:
        code = "missing_DONE" if mode == CLICK else "missing_SUBMIT"
        why = "answer must end with" if _CLICK_PART.fullmatch(parts[-1]) else "last token is not"
        return ParsedAnswer(
            False, code, invalid_tokens=tuple(parts), detail=f"{why} {_TERMINAL[mode]}: {_snippet(parts[-1])}"
        )
    clicks, invalid, first_bad = [], [], None
    for index, part in enumerate(parts[:-1], start=1):
        match = _CLICK_PART.fullmatch(part)
        if match:
            clicks.append((_number(match.group(1)), _number(match.group(2))))
        else:
            invalid.append(part)
            first_bad = first_bad or index
    if invalid:
        return ParsedAnswer(
            False,
            "invalid_CLICK_token",
            tuple(clicks),
            count,
            tuple(invalid),
            f"token {first_bad} is not CLICK(Rr,Cc): {_snippet(invalid[0])}",
        )
    return ParsedAnswer(True, None, tuple(clicks), count)
