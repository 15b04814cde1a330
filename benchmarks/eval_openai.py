"""OpenAI-runner throughput: items/s of ``rosetrain eval --runner openai`` by
``--concurrency``, against a local server that takes a fixed time per request.

The server (this script with ``--serve``, a separate process) answers every
chat completion with ``DONE`` after ``--latency-s`` seconds, like a model
endpoint whose answers take that long; it handles requests in parallel. The
figure is the whole eval (requests, one fsync'd prediction line per item,
scoring), run into a fresh folder at each concurrency.

The floor for concurrency c, from the same run: the server's own latency for c
requests at once, c / latency items/s (what a client with no cost of its own
would get). Prints items/s, the speed-up over concurrency 1 and the ratio to
that floor.

    python benchmarks/eval_openai.py [--scenes 20] [--latency-s 0.1] [--concurrency 1 2 4 8 16]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def serve(latency_s: float) -> None:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(latency_s)  # the model "thinking"
            body = json.dumps(
                {"choices": [{"index": 0, "message": {"role": "assistant", "content": "DONE"}}]}
            ).encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 128
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


def run_eval(data: Path, out: Path, base_url: str, concurrency: int) -> tuple[int, float]:
    from rosetrain.evaluation.evaluate import evaluate

    started = time.perf_counter()
    summary = evaluate(
        "bench",
        data,
        "test",
        out,
        runner="openai",
        base_url=base_url,
        concurrency=concurrency,
        batch_size=concurrency,
        progress=False,
        runner_options={"max_retries": 0},
    )
    return summary["n"], time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=20, help="smoke-spec scenes (7 items each)")
    parser.add_argument("--latency-s", type=float, default=0.1, help="server time per request")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.latency_s)

    from rosetrain.cli import main as cli

    with tempfile.TemporaryDirectory(prefix="rosetrain-bench-eval-") as tmp:
        data = Path(tmp) / "data"
        cli(
            [
                "generate",
                "--spec",
                str(ROOT / "generators/smoke.yaml"),
                "--out",
                str(data),
                "--split",
                "test",
                "--scenes",
                str(args.scenes),
                "--formats",
                "release",
                "--num-proc",
                "1",
                "--quiet",
            ]
        )
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--latency-s", str(args.latency_s)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            base_url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}/v1"
            print(f"server latency {args.latency_s * 1000:.0f} ms per request")
            print(
                f"{'concurrency':>11s} {'items':>6s} {'seconds':>8s} {'items/s':>8s} "
                f"{'speed-up':>8s} {'floor/s':>8s} {'ratio':>6s}"
            )
            first_rate = None
            for concurrency in args.concurrency:
                n, seconds = run_eval(data, Path(tmp) / f"run-{concurrency}", base_url, concurrency)
                rate = n / seconds
                first_rate = first_rate or rate
                floor = concurrency / args.latency_s
                print(
                    f"{concurrency:>11d} {n:>6d} {seconds:>8.2f} {rate:>8.1f} "
                    f"{rate / first_rate:>7.2f}x {floor:>8.1f} {rate / floor:>6.2f}"
                )
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
