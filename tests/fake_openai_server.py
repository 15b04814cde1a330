"""A real OpenAI-compatible HTTP server for tests, answering with a rule-based "model".

    python tests/fake_openai_server.py --data DIR --split test [--key-env VAR]

It prints ``PORT <n>`` on its first stdout line once it listens on 127.0.0.1
(port 0 lets the OS choose a free one). It reads the split's metadata, and for
a chat completion finds the item from the request itself: the PNG bytes of the
base64 data URL plus the last text part (the task sentence). The "model" then
follows :func:`behaviour` for the item's position in the split:

- items whose position is a multiple of 3 get a garbage answer, the rest gold;
- the first attempt of some items fails with 500, 429 (``Retry-After: 0``) or
  is answered too slowly (after ``--slow-s`` seconds, past the client timeout);
- one item is always refused with 400 (the client must record an error);
- with ``--fail-every N``, every item whose position is N-1 modulo N fails
  with 500 on every attempt (an endpoint that is broken for a third of items).

``GET /stats`` returns request counts, attempts per item and the most requests
that were ever in flight at once (to check bounded concurrency).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rosetrain.core.messages import split_prompt  # noqa: E402

GARBAGE = "I think there are a few odd cells here."
REFUSED_POSITION = 7


def behaviour(position: int) -> tuple[str, bool]:
    """(first-attempt failure: "" | "500" | "429" | "slow" | "400", answers gold?)."""
    if position == REFUSED_POSITION:
        return "400", False
    first = {1: "500", 2: "429", 4: "slow"}.get(position % 5, "")
    return first, position % 3 != 0


def item_key(image_bytes: bytes, sentence: str) -> str:
    return hashlib.sha256(image_bytes + b"\0" + sentence.encode("utf-8")).hexdigest()


def load_items(data_dir: Path, split: str) -> dict[str, tuple[int, dict]]:
    items = {}
    lines = (data_dir / f"metadata_{split}.jsonl").read_text(encoding="utf-8").splitlines()
    for position, line in enumerate(filter(None, lines)):
        record = json.loads(line)
        image = (data_dir / record["image"]).read_bytes()
        items[item_key(image, split_prompt(record)[1])] = (position, record)
    return items


class State:
    def __init__(self, items, key, slow_s, delay_s, fail_every=0):
        self.items, self.key, self.slow_s, self.delay_s = items, key, slow_s, delay_s
        self.fail_every = fail_every
        self.lock = threading.Lock()
        self.attempts: dict[str, int] = {}
        self.requests = self.in_flight = self.max_in_flight = 0


class Handler(BaseHTTPRequestHandler):
    state: State

    def log_message(self, *args):  # keep test output quiet
        pass

    def _reply(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        # counted out before the client can hear back and send its next request
        self._count_out()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left: expected for the "slow" items

    def do_GET(self):
        state = self.state
        with state.lock:
            self._reply(
                200,
                {
                    "requests": state.requests,
                    "max_in_flight": state.max_in_flight,
                    "attempts": dict(state.attempts),
                },
            )

    def do_POST(self):
        state = self.state
        with state.lock:
            state.requests += 1
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        self._counted = True
        try:
            self._complete()
        finally:
            self._count_out()

    def _count_out(self) -> None:
        """This request is no longer in flight (once, whichever way it ends)."""
        if getattr(self, "_counted", False):
            self._counted = False
            with self.state.lock:
                self.state.in_flight -= 1

    def _complete(self):
        state = self.state
        if not self.path.endswith("/chat/completions"):
            return self._reply(404, {"error": {"message": f"no route {self.path}"}})
        if state.key and self.headers.get("Authorization") != f"Bearer {state.key}":
            return self._reply(401, {"error": {"message": "bad or missing API key"}})
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        found = self._find_item(body)
        if found is None:
            return self._reply(400, {"error": {"message": "request does not match any item"}})
        position, record = found
        with state.lock:
            attempt = state.attempts.get(record["item_id"], 0) + 1
            state.attempts[record["item_id"]] = attempt
        failure, gold = behaviour(position)
        if state.fail_every and position % state.fail_every == state.fail_every - 1:
            return self._reply(500, {"error": {"message": "always failing (test)"}})
        if failure == "400":
            return self._reply(400, {"error": {"message": "content policy (test refusal)"}})
        if attempt == 1 and failure == "500":
            return self._reply(500, {"error": {"message": "internal error (test)"}})
        if attempt == 1 and failure == "429":
            return self._reply(429, {"error": {"message": "rate limited (test)"}}, {"Retry-After": "0"})
        if attempt == 1 and failure == "slow":
            self._count_out()  # the client gives up meanwhile: not one of its requests in flight
            time.sleep(state.slow_s)
        else:
            time.sleep(state.delay_s)  # a little work, so concurrent requests overlap
        text = record["answer"] if gold else GARBAGE
        self._reply(
            200,
            {
                "id": f"cmpl-{position}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                ],
            },
        )

    def _find_item(self, body):
        try:
            content = body["messages"][0]["content"]
            url = next(p["image_url"]["url"] for p in content if p["type"] == "image_url")
            sentence = [p["text"] for p in content if p["type"] == "text"][-1]
            image = base64.b64decode(url.split(",", 1)[1])
        except (KeyError, IndexError, StopIteration, TypeError, ValueError):
            return None
        return self.state.items.get(item_key(image, sentence))


@contextlib.contextmanager
def serve_in_subprocess(
    data_dir,
    split: str = "test",
    *,
    key_env: str | None = None,
    env: dict | None = None,
    slow_s: float = 1.0,
    delay_s: float = 0.02,
    fail_every: int = 0,
):
    """Start this server as a separate process; yield its base URL (".../v1")."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--data",
        str(data_dir),
        "--split",
        split,
        "--slow-s",
        str(slow_s),
        "--delay-s",
        str(delay_s),
        "--fail-every",
        str(fail_every),
    ]
    if key_env:
        command += ["--key-env", key_env]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    try:
        line = process.stdout.readline()  # "" if the server died before listening
        if not line.startswith("PORT "):
            raise RuntimeError(f"fake server did not start (exit code {process.poll()})")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()


def fetch_stats(base_url: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(base_url.rsplit("/v1", 1)[0] + "/stats", timeout=5) as response:
        return json.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--key-env", help="require 'Bearer $VAR' in Authorization")
    parser.add_argument("--slow-s", type=float, default=2.0, help="first-attempt delay of slow items")
    parser.add_argument("--delay-s", type=float, default=0.02, help="time to answer any request")
    parser.add_argument(
        "--fail-every", type=int, default=0, help="items at position N-1 modulo N always fail with 500"
    )
    args = parser.parse_args()
    key = os.environ[args.key_env] if args.key_env else None
    Handler.state = State(load_items(args.data, args.split), key, args.slow_s, args.delay_s, args.fail_every)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
