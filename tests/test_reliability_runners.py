"""The OpenAI runner reads whatever an endpoint sends without a traceback: text
parts that are not strings are the item's error, and a Retry-After that is not
a usable number of seconds falls back to exponential backoff."""

from __future__ import annotations

import email.message
import urllib.error

import pytest

from rosetrain.runners.openai_runner import _retry_after, response_text


def body(content):
    return {"choices": [{"message": {"content": content}}]}


def test_text_parts_are_joined():
    parts = [
        {"type": "text", "text": "CLICK(R1,C1); "},
        {"type": "refusal"},
        {"type": "text", "text": "DONE"},
    ]
    assert response_text(body(parts)) == "CLICK(R1,C1); DONE"
    assert response_text(body(None)) == ""


@pytest.mark.parametrize(
    "content", [[{"type": "text", "text": 5}], [{"type": "text", "text": None}], {"text": "x"}, 7, ["a"]]
)
def test_content_that_is_not_text_is_the_items_error(content):
    if content == ["a"]:  # a list of bare strings has no text parts: no answer, not a crash
        assert response_text(body(content)) == ""
        return
    with pytest.raises(ValueError, match="not"):  # the runner records ValueError as the item's error
        response_text(body(content))


def http_error(retry_after: str) -> urllib.error.HTTPError:
    headers = email.message.Message()
    headers["Retry-After"] = retry_after
    return urllib.error.HTTPError("http://x", 503, "busy", headers, None)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "NaN", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_a_retry_after_that_is_no_wait_falls_back_to_backoff(value):
    assert _retry_after(http_error(value)) is None


def test_a_retry_after_in_seconds_is_honoured():
    assert _retry_after(http_error("1.5")) == 1.5
