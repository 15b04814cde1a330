"""Generation on a Ray cluster: one Ray task per shard, the driver writes.

Each task renders its shard with the very code a local worker runs
(:func:`rosetrain.data.generate.render_shard_files`, which generate passes in),
into a scratch folder of its own on whatever node it lands on, and returns the
shard's files as bytes; the driver lands them in ``--out``
(:func:`rosetrain.data.store.store_shard`: atomic, part last). So the cluster needs no shared file system, the bytes are
the same as a one-machine run's, and the folder's manifest, lock, resume and
repair behave as they always do. ``ray.init()`` joins the cluster that
``RAY_ADDRESS`` names (as ``ray job submit`` sets it), else starts a local one.
A shard's files pass through the object store: with the default shard size
(at most 1,000 scenes) that is tens of MB per task.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator

from rosetrain.core.errors import RosetrainError


def map_shards_on_ray(job, shards: list[int], render: Callable[..., dict[str, bytes]]) -> Iterator[int]:
    """Run ``shards`` as Ray tasks (``render(job, shard)`` each: the shard's files as
    bytes); land each one as it finishes; yield its scene count."""
    from rosetrain.data.store import store_shard

    ray = _ray()
    started_here = not ray.is_initialized()
    if started_here:
        check_reachable(os.environ.get("RAY_ADDRESS", ""))  # ray.init would retry an unreachable one forever
        ray.init(log_to_driver=False)
    task = ray.remote(num_cpus=1, max_retries=2)(render)
    job_ref = ray.put(job)
    pending = {task.remote(job_ref, shard): shard for shard in shards}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(done[0])
            store_shard(job, shard, _result(ray, done[0], shard))
            yield len(job.shard_indices(shard))
    finally:
        if pending and started_here:
            # Ray this process started: shutting it down stops every task. ray.cancel of a
            # task finishing at that moment can abort the process inside Ray's core
            # ("Tried to complete task that was not pending"), after the CLI's one line
            with contextlib.suppress(Exception):
                ray.shutdown()
        else:
            for ref in pending:  # on Ctrl-C too: the CLI then says, in one line, to rerun to resume
                with contextlib.suppress(Exception):  # a cluster going away must not hide why we stop
                    ray.cancel(ref)


CONNECT_TIMEOUT_S = 10  # as long as eval waits for an endpoint to accept a connection


def check_reachable(address: str) -> None:
    """``RAY_ADDRESS`` as ``host:port`` or ``ray://host:port``: refuse, within
    CONNECT_TIMEOUT_S, a cluster nothing answers at (``ray.init`` would retry it
    forever, deaf to SIGTERM). ``auto``, ``local`` and no address start or find a
    local cluster, and are not probed."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not (colon and host and port.isdigit()):
        return
    host = host.strip("[]")  # an IPv6 literal
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        reason = "no answer" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise RosetrainError(
            f"RAY_ADDRESS {address}: cannot reach {host}:{port} ({reason}, waited at most "
            f"{CONNECT_TIMEOUT_S} s); is the Ray cluster running? Unset RAY_ADDRESS to start a "
            f"local one"
        ) from None


def _result(ray, ref, shard: int) -> dict[str, bytes]:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:  # one line, the task's own if it was ours
        if isinstance(err.cause, RosetrainError):
            raise err.cause from None
        cause = err.cause or err
        raise RosetrainError(
            f"engine 'ray': shard {shard} failed on the cluster "
            f"({type(cause).__name__}: {str(cause).strip().splitlines()[-1:]}); "
            f"run the same command again to resume"
        ) from None


def _ray():
    try:
        import ray
    except ImportError:
        raise RosetrainError(
            "engine 'ray': Ray is not installed; pip install 'rosetrain[ray]'", argument="engine"
        ) from None
    return ray
