"""Strict parsing of a model response into the ROSE answer grammar.

The whole stripped response must be the grammar (docs/protocol.md):
tokens are split on ``;``; keywords match case-insensitively; whitespace is
tolerated around numbers and commas (inside the parentheses) and around
tokens, nowhere else (``COUNT (3)`` is invalid).

- COUNT mode: exactly ``COUNT(n)``.
- CLICK mode: ``DONE`` alone, or ``CLICK(Rr,Cc)`` tokens ending in ``DONE``.
- CLICK_COUNT mode: ``SUBMIT(n)`` alone, or CLICK tokens ending in ``SUBMIT(n)``.
Any other token (an empty one from a trailing ``;`` included) makes the answer
invalid.

Choices the protocol leaves open, made here once:
- Keywords are ASCII letters only (no Unicode case folding: the Kelvin sign is
  not a K); digits are ASCII ``0-9``; whitespace is Python's (``str.strip``).
- Numbers are unsigned decimal integers; leading zeros are allowed. Numbers of
  more than 18 digits are kept as ``HUGE_NUMBER`` (never a valid count or cell)
  so no giant integer is ever built.
- Responses longer than ``MAX_RESPONSE_CHARS`` are invalid without being
  parsed: on grids of at most 18 x 18 cells no answer needs a hundredth of it,
  and this bounds the work spent on a runaway generation.

Every function here is linear in the input: the patterns have no nested
ambiguous quantifiers (every ``\\s*`` sits between fixed characters that
whitespace cannot match), so nothing backtracks catastrophically.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from rosetrain.protocol import CLICK, CLICK_COUNT, COUNT, Cell

MAX_RESPONSE_CHARS = 1_000_000
HUGE_NUMBER = 10 ** 18

_CLICK_BODY = r"[Cc][Ll][Ii][Cc][Kk]\(\s*[Rr]\s*[0-9]+\s*,\s*[Cc]\s*[0-9]+\s*\)"
_CLICK_TOKEN = re.compile(r"[Cc][Ll][Ii][Cc][Kk]\(\s*[Rr]\s*([0-9]+)\s*,\s*[Cc]\s*([0-9]+)\s*\)")
_COUNT_TOKEN = re.compile(r"[Cc][Oo][Uu][Nn][Tt]\(\s*([0-9]+)\s*\)")
_SUBMIT_TOKEN = re.compile(r"[Ss][Uu][Bb][Mm][Ii][Tt]\(\s*([0-9]+)\s*\)")
_DONE_TOKEN = re.compile(r"[Dd][Oo][Nn][Ee]")

# Whole-answer patterns: one C-level match for the common valid case; the
# token-by-token path below only runs to explain an invalid answer.
_CLICKS_THEN = r"(?:" + _CLICK_BODY + r"\s*;\s*)*"
_CLICK_ANSWER = re.compile(_CLICKS_THEN + r"[Dd][Oo][Nn][Ee]")
_CLICK_COUNT_ANSWER = re.compile(_CLICKS_THEN + r"[Ss][Uu][Bb][Mm][Ii][Tt]\(\s*([0-9]+)\s*\)")
# In a valid answer ``(R`` only ever opens a CLICK's cell.
_CELL = re.compile(r"\(\s*[Rr]\s*([0-9]+)\s*,\s*[Cc]\s*([0-9]+)")

_TERMINAL = {CLICK: "DONE", CLICK_COUNT: "SUBMIT(n)"}


class ParsedAnswer(NamedTuple):
    """A response read against one task mode.

    ``clicks`` keeps the order and any duplicates of the response; ``count`` is
    the n of ``COUNT(n)`` or ``SUBMIT(n)``; ``error`` says why an answer is invalid.
    """

    valid: bool
    error: str | None = None
    clicks: tuple[Cell, ...] = ()
    count: int | None = None


def _number(digits: str) -> int:
    if len(digits) <= 18:
        return int(digits)
    digits = digits.lstrip("0")
    return int(digits or "0") if len(digits) <= 18 else HUGE_NUMBER


def _snippet(token: str) -> str:
    return repr(token if len(token) <= 40 else token[:37] + "...")


_new_parsed = tuple.__new__  # builds a ParsedAnswer without NamedTuple's Python __new__
_count_fullmatch = _COUNT_TOKEN.fullmatch
_click_fullmatch = _CLICK_ANSWER.fullmatch
_click_count_fullmatch = _CLICK_COUNT_ANSWER.fullmatch
_find_cells = _CELL.findall


def _invalid(error: str) -> ParsedAnswer:
    return _new_parsed(ParsedAnswer, (False, error, (), None))


def _cells(answer: str) -> tuple[Cell, ...]:
    pairs = _find_cells(answer)
    try:
        return tuple([(int(r), int(c)) for r, c in pairs])
    except ValueError:  # a number past Python's int-string limit (4300 digits)
        return tuple([(_number(r), _number(c)) for r, c in pairs])


def parse_answer(text: object, mode: str) -> ParsedAnswer:
    """Parse ``text`` strictly as an answer in ``mode`` (COUNT, CLICK or CLICK_COUNT).

    Never raises on any response: None, non-strings, empty, prose, huge.
    An unknown ``mode`` is a programming error and raises ValueError.
    """
    # The hot path (a plain str that matches the grammar) is kept flat: it runs
    # for every completion of every GRPO step and every evaluated item.
    if type(text) is str and len(text) <= MAX_RESPONSE_CHARS:
        answer = text.strip()
        if mode == CLICK:
            if _click_fullmatch(answer):
                return _new_parsed(ParsedAnswer, (True, None, _cells(answer), None))
        elif mode == COUNT:
            match = _count_fullmatch(answer)
            if match:
                return _new_parsed(ParsedAnswer, (True, None, (), _number(match.group(1))))
        elif mode == CLICK_COUNT:
            match = _click_count_fullmatch(answer)
            if match:
                return _new_parsed(ParsedAnswer,
                                   (True, None, _cells(answer), _number(match.group(1))))
    elif isinstance(text, str) and type(text) is not str:  # a str subclass: its plain value
        return parse_answer(str.__str__(text), mode)
    return _invalid(_why_invalid(text, mode))


def _why_invalid(text: object, mode: str) -> str:
    """The parse error of a response the hot path did not accept."""
    if mode not in (COUNT, CLICK, CLICK_COUNT):
        raise ValueError(f"unknown task mode {mode!r}")
    if text is None:
        return "no response"
    if not isinstance(text, str):
        return f"response is a {type(text).__name__}, not text"
    if len(text) > MAX_RESPONSE_CHARS:
        return f"response longer than {MAX_RESPONSE_CHARS} characters"
    answer = text.strip()
    if not answer:
        return "empty response"
    if mode == COUNT:
        if ";" in answer:
            return "COUNT mode takes exactly one token, COUNT(n)"
        return f"expected COUNT(n), got {_snippet(answer)}"
    return _explain_click_error(answer, mode)


def _explain_click_error(answer: str, mode: str) -> str:
    """Why a CLICK / CLICK_COUNT answer failed the whole-answer pattern."""
    tokens = answer.split(";")
    for index, raw in enumerate(tokens[:-1], start=1):
        token = raw.strip()
        if not _CLICK_TOKEN.fullmatch(token):
            return f"token {index} is not CLICK(Rr,Cc): {_snippet(token)}"
    last = tokens[-1].strip()
    if _CLICK_TOKEN.fullmatch(last):
        return f"answer must end with {_TERMINAL[mode]}"
    terminal = _DONE_TOKEN if mode == CLICK else _SUBMIT_TOKEN
    if not terminal.fullmatch(last):
        return f"last token is not {_TERMINAL[mode]}: {_snippet(last)}"
    return "not a valid answer"  # unreachable while the two paths agree; never crash
