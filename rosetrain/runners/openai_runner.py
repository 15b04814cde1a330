"""Any OpenAI-compatible chat endpoint (an API model, a vLLM or other server).

Standard library only. The image goes as a base64 data URL in the OpenAI
content format; the key comes from an environment variable and never appears
in a message or log. Requests run with bounded concurrency and a per-request
timeout; 429, 5xx, timeouts and dropped connections are retried with
exponential backoff (honouring ``Retry-After``). An item that still fails
records its error and ``raw_text=None`` instead of stopping the run.

An endpoint that cannot be reached at all (connection refused, unknown host,
no answer to connect) is not an item's failure: the runner checks that it can
connect before the first request, and a connection that still fails after a
few quick tries stops the whole run with one clear error (a rerun resumes).
So does an endpoint that accepts connections but has answered none of the
first ``concurrency + 1`` requests within the timeout (a hung server), instead
of spending every item's retries on it.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import mimetypes
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from rosetrain.core.errors import RosetrainError
from rosetrain.core.images import image_bytes
from rosetrain.core.messages import record_messages
from rosetrain.runners.base import DEFAULT_MAX_NEW_TOKENS, Answer, BaseRunner, image_path

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 60.0
CONNECT_ATTEMPTS = 3  # tries of a connection that fails before the run stops
MAX_CONNECT_BACKOFF_S = 2.0
PROBE_TIMEOUT_S = 10.0  # bound on the connect check before the first request


class ConnectFailed(Exception):
    """The TCP connection (or the host name lookup) failed: no request reached the server."""


class EndpointUnreachable(RosetrainError):
    """The endpoint cannot be reached at all: stop the run instead of failing every item."""


class RetryableError(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(Exception):
    """A request error that retrying will not fix (4xx other than 408/409/429)."""


def image_data_url(record: Mapping[str, Any]) -> str:
    path = image_path(record)
    mime = mimetypes.guess_type(path.name)[0] or "image/png"
    data = image_bytes(path, f"item {record.get('item_id')}")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def openai_messages(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The shared message layout, with the image placeholder filled as an image_url part."""
    messages = record_messages(record)
    for message in messages:
        message["content"] = [
            {"type": "image_url", "image_url": {"url": image_data_url(record)}}
            if part["type"] == "image"
            else part
            for part in message["content"]
        ]
    return messages


def response_text(body: Mapping[str, Any]) -> str:
    """The assistant's text from a chat completion (content may be a list of parts)."""
    try:
        content = body["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ValueError(f"no choices[0].message in the response: {str(body)[:200]}") from None
    if isinstance(content, list):  # text parts; other parts (refusals, images) carry no answer text
        texts = [part.get("text") for part in content if isinstance(part, dict) and "text" in part]
        if not all(isinstance(text, str) for text in texts):
            raise ValueError(f"a text part of the response's content is not a string: {str(content)[:200]}")
        content = "".join(text for text in texts if isinstance(text, str))  # all are: checked above
    if content is not None and not isinstance(content, str):  # recorded as the item's error
        raise ValueError(f"the response's content is not text: {str(content)[:200]}")
    return content or ""


class OpenAIRunner(BaseRunner):
    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        name: str | None = None,
    ):
        if not base_url or not base_url.startswith(("http://", "https://")):
            raise RosetrainError(f"base_url must be an http(s) URL, got {base_url!r}", argument="base_url")
        if concurrency < 1:
            raise RosetrainError(f"concurrency must be at least 1, got {concurrency}", argument="concurrency")
        super().__init__(model, max_new_tokens=max_new_tokens, name=name)
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._silence = threading.Lock()  # guards the two fields below (worker threads)
        self._server_answered = False
        self._unanswered_timeouts = 0
        # Read once; kept only in the header dict, never in a message.
        key = os.environ.get(api_key_env)
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        probe_endpoint(self.url, min(timeout_s, PROBE_TIMEOUT_S))
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai")

    def generate(self, records: Sequence[Mapping[str, Any]]) -> list[Answer]:
        return list(self._pool.map(self._answer, records))

    def generate_stream(
        self, records: Iterable[Mapping[str, Any]]
    ) -> Iterator[tuple[Mapping[str, Any], Answer]]:
        """(record, answer) pairs as requests finish, so each can be saved at once
        and a slow request holds up nobody. At most ``concurrency`` requests run
        and as many wait; an interrupt cancels the waiting ones, unsent."""
        records = iter(records)
        pending: dict[Future, Mapping[str, Any]] = {}

        def top_up() -> None:
            while len(pending) < 2 * self.concurrency:
                record = next(records, None)
                if record is None:
                    return
                pending[self._pool.submit(self._answer, record)] = record

        top_up()
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield pending.pop(future), future.result()
                top_up()
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _answer(self, record: Mapping[str, Any]) -> Answer:
        try:
            payload = json.dumps(
                {
                    "model": self.model,
                    "messages": openai_messages(record),
                    "max_tokens": self.max_new_tokens,
                    "temperature": 0.0,
                }
            )
        except RosetrainError as err:
            return None, str(err)
        attempt = connect_failures = 0
        while True:
            try:
                return response_text(self._post(payload.encode("utf-8"))), None
            except ConnectFailed as err:
                connect_failures += 1
                if connect_failures >= min(CONNECT_ATTEMPTS, self.max_retries + 1):
                    raise EndpointUnreachable(
                        f"base_url: cannot reach {self.url} ({err}, {connect_failures} "
                        "attempts); is the server running? Run the same command again to "
                        "resume",
                        argument="base_url",
                    ) from None
                time.sleep(min(self.backoff_s * 2 ** (connect_failures - 1), MAX_CONNECT_BACKOFF_S))
            except RetryableError as err:
                if attempt == self.max_retries:
                    return None, f"gave up after {attempt + 1} attempts: {err}"
                time.sleep(self._delay(attempt, err.retry_after))
                attempt += 1
            except (ValueError, PermanentError) as err:
                return None, str(err)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_BACKOFF_S)
        return min(self.backoff_s * 2**attempt, MAX_BACKOFF_S)

    def _post(self, data: bytes) -> dict[str, Any]:
        request = urllib.request.Request(self.url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                self._heard_from_server()
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            self._heard_from_server()
            detail = _error_detail(err)
            if err.code in RETRY_STATUS:
                raise RetryableError(f"HTTP {err.code}: {detail}", _retry_after(err)) from None
            raise PermanentError(f"HTTP {err.code} from {self.url}: {detail}") from None
        except urllib.error.URLError as err:
            # urllib wraps only errors of connecting and sending: nothing reached the server
            if isinstance(err.reason, OSError):
                raise ConnectFailed(describe_os_error(err.reason)) from None
            raise PermanentError(f"{self.url}: {err.reason}") from None
        except (TimeoutError, ConnectionError, http.client.HTTPException) as err:
            if isinstance(err, TimeoutError):  # socket.timeout is TimeoutError
                self._count_unanswered_timeout()
            reason = getattr(err, "reason", err)
            raise RetryableError(f"{type(reason).__name__}: {reason}") from None
        except json.JSONDecodeError as err:
            raise RetryableError(f"response is not JSON: {err}") from None

    def _heard_from_server(self) -> None:
        with self._silence:
            self._server_answered = True

    def _count_unanswered_timeout(self) -> None:
        """Stop the run when the server has answered nothing and more requests than
        can be in flight at once have timed out: it is hung, not slow on some items."""
        with self._silence:
            self._unanswered_timeouts += 1
            hung = not self._server_answered and self._unanswered_timeouts > self.concurrency
        if hung:
            raise EndpointUnreachable(
                f"base_url: {self.url} accepted connections but answered none of "
                f"{self._unanswered_timeouts} requests within request_timeout_s="
                f"{self.timeout_s:g}; is the server hung or overloaded? Run the same "
                "command again to resume (a larger request_timeout_s for a slow model)",
                argument="request_timeout",
            )


def describe_os_error(err: OSError) -> str:
    """A short reason: "connection refused", "unknown host (...)", "timed out"."""
    if isinstance(err, socket.gaierror):
        return f"unknown host ({err.strerror or err})"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, (TimeoutError, socket.timeout)):
        return "no answer (timed out)"
    return err.strerror or str(err) or type(err).__name__


def probe_endpoint(url: str, timeout_s: float) -> None:
    """Fail at once, in one line, when ``url``'s host and port cannot be connected to.

    Skipped when a proxy would carry the requests (the proxy is what we reach)."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as err:
        raise RosetrainError(f"base_url: {err} in {url}", argument="base_url") from None
    if not parts.hostname:
        raise RosetrainError(f"base_url: no host name in {url}", argument="base_url")
    if parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(parts.hostname):
        return
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout_s).close()
    except OSError as err:
        raise EndpointUnreachable(
            f"base_url: cannot reach {parts.hostname}:{port} "
            f"({describe_os_error(err)}); is the server running?",
            argument="base_url",
        ) from None


def _retry_after(err: urllib.error.HTTPError) -> float | None:
    value = err.headers.get("Retry-After") if err.headers else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to exponential backoff
    # "nan", "inf", "-5": no wait a sleep can take; exponential backoff instead
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


def _error_detail(err: urllib.error.HTTPError) -> str:
    try:
        return err.read(300).decode("utf-8", "replace").strip() or err.reason
    except Exception:  # a body we cannot read must not hide the status code
        return str(err.reason)
