"""--engine ray waits a bounded time: an unreachable RAY_ADDRESS is one line
within CONNECT_TIMEOUT_S, never endless retries; a Ctrl-C is the CLI's one line,
and the scratch folders of the tasks it killed do not stay."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rosetrain.cli import main
from rosetrain.core.scratch import remove_orphans

SMOKE = Path(__file__).resolve().parent.parent / "generators" / "smoke.yaml"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_unreachable_ray_address_is_one_line_at_once(tmp_path, small_spec, scheme):
    pytest.importorskip("ray")
    env = {**os.environ, "RAY_ADDRESS": f"{scheme}127.0.0.1:{free_port()}"}
    command = ["generate", "--spec", str(small_spec), "--out", str(tmp_path / "out"), "--split", "test"]
    command += ["--scenes", "4", "--quiet"]
    code = "import sys; from rosetrain.cli import main; sys.exit(main(sys.argv[1:]))"
    # in a process of its own, with a bound: ray.init retried such an address forever
    result = subprocess.run(
        [sys.executable, "-c", code, *command, "--engine", "ray"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.count("\n") == 1 and "RAY_ADDRESS" in result.stderr and "cannot reach" in result.stderr
    )
    assert main(command) == 0  # the same folder resumes locally


def test_a_silent_host_is_given_up_after_the_timeout(monkeypatch):
    from rosetrain.core.errors import RosetrainError
    from rosetrain.data import ray_engine

    def silent(address, timeout):
        assert timeout == ray_engine.CONNECT_TIMEOUT_S  # the bound the wait is given
        raise TimeoutError("timed out")

    monkeypatch.setattr(ray_engine.socket, "create_connection", silent)
    with pytest.raises(RosetrainError, match=r"no answer, waited at most 10 s"):
        ray_engine.check_reachable("10.255.255.1:6379")
    ray_engine.check_reachable("auto")  # not an address to probe: Ray finds the cluster


@pytest.mark.slow
def test_ctrl_c_under_ray_is_the_one_interrupted_line(tmp_path):
    pytest.importorskip("ray")
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}  # a local cluster
    # the tasks' scratch folders in this test's own folder; Ray's sockets where they always are
    env.setdefault("RAY_TMPDIR", os.environ.get("TMPDIR", "/tmp"))  # Ray's own choice, on Linux
    env["TMPDIR"] = str(scratch_root := tmp_path / "tmp")
    scratch_root.mkdir()
    out = tmp_path / "out"
    command = [
        "generate",
        "--spec",
        str(SMOKE),
        "--out",
        str(out),
        "--split",
        "test",
        "--scenes",
        "2000",
    ]  # ample: the run must still be going when SIGINT lands
    code = "import sys; from rosetrain.cli import main; sys.exit(main(sys.argv[1:]))"
    process = subprocess.Popen(
        [sys.executable, "-c", code, *command, "--shard-size", "10", "--engine", "ray", "--quiet"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        # a child inherits an ignored SIGINT (something earlier in the suite may leave it so),
        # and Python then installs no KeyboardInterrupt: the Ctrl-C must reach it as a user's does
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not list((out / ".parts" / "test").glob("part-*")):  # tasks are landing shards
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130 and "Traceback" not in err, err
    assert (
        err.strip().splitlines()[-1]
        == "rosetrain generate: interrupted; run the same command again to resume"
    )
    # what the killed tasks left is rosetrain's, and the next scratch folder removes it
    deadline = time.monotonic() + 120  # the cluster's workers exit after the driver (slowly under load)
    while any(scratch_root.iterdir()) and time.monotonic() < deadline:
        remove_orphans(scratch_root, min_age_s=0)
        time.sleep(0.5)
    left = {path.name: _process_state(path.name.split("-")[2]) for path in scratch_root.iterdir()}
    # any folder left is a live worker's (Ray's to stop), never an orphan the next one missed
    orphans = {name: state for name, state in left.items() if state == "gone" or state.split()[2][0] == "Z"}
    assert orphans == {}, left


def _process_state(pid: str) -> str:
    """What ``ps`` says of a process, for a failure's message."""
    shown = subprocess.run(
        ["ps", "-o", "pid,ppid,stat,etime,args", "-p", pid], capture_output=True, text=True
    )
    return shown.stdout.strip().splitlines()[-1] if shown.stdout.strip() else "gone"
