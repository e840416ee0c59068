"""A worker process of the local backend: runs fused transforms for pure-Python UDFs.

Forked by the zygote (engine/execution/backends/zygote.py). It talks to the driver over two pipes with
length-prefixed pickles; a user function's prints go to the inherited stdout and stderr.

Driver to worker: ("run", payload) | ("next",) | ("close",) | ("exit",)
Worker to driver: ("started",) | ("block", table) | ("done",) | ("error", TaskFailure) | ("closed",)

An actor (a worker of an actor pool) first receives ("setup", payload): the pickled transform,
whose ``setup()`` constructs the user's classes once (reply ("ready",) or ("error", ...)).
Each of its tasks is then ("call", payload) with only the inputs; the rest is as for "run".

Every driver message but "exit" gets exactly one reply.
"""

from __future__ import annotations

import os
import struct
from typing import Any, BinaryIO

import cloudpickle

_HEADER = struct.Struct("<Q")


def send(stream: BinaryIO, message: Any) -> None:
    payload = cloudpickle.dumps(message, protocol=5)
    stream.write(_HEADER.pack(len(payload)))
    stream.write(payload)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    header = _read_exactly(stream, _HEADER.size)
    if header is None:
        raise EOFError("the other side closed the pipe")
    (length,) = _HEADER.unpack(header)
    payload = _read_exactly(stream, length)
    if payload is None:
        raise EOFError("the pipe closed in the middle of a message")
    return cloudpickle.loads(payload)


def _read_exactly(stream: BinaryIO, n: int):
    chunks, remaining = [], n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def serve(inbox: BinaryIO, outbox: BinaryIO) -> None:
    from shardflow.engine.execution import task_timing
    from shardflow.engine.execution.errors import TaskFailure
    from shardflow.engine.execution.shm import for_transfer
    from shardflow.sdk import task_stats

    blocks = None
    op_name = "task"
    actor_transform = None
    begun = task_timing.begin()
    while True:
        message = receive(inbox)
        kind = message[0]
        if kind == "exit":
            return
        try:
            if kind == "run":
                transform, inputs, ctx, op_name = cloudpickle.loads(message[1])
                task_stats.reset()
                begun = task_timing.begin()
                blocks = transform(inputs, ctx)
                send(outbox, ("started",))
                continue
            if kind == "setup":
                actor_transform, op_name = cloudpickle.loads(message[1])
                actor_transform.setup()
                send(outbox, ("ready",))
                continue
            if kind == "call":
                inputs, ctx, op_name = cloudpickle.loads(message[1])
                task_stats.reset()
                begun = task_timing.begin()
                blocks = actor_transform(inputs, ctx)
                send(outbox, ("started",))
                continue
            if kind == "close":
                if blocks is not None:
                    blocks.close()
                blocks = None
                send(outbox, ("closed",))
                continue
            if kind == "next":
                if blocks is None:
                    send(outbox, ("done",))
                    continue
                try:
                    block = next(blocks)
                except StopIteration:
                    blocks = None
                    counters = dict(task_stats.take())
                    counters["timing"] = task_timing.finish(begun)
                    send(outbox, ("done", counters))
                    continue
                send(outbox, ("block", for_transfer(block)))
        except BaseException as exc:
            blocks = None
            send(outbox, ("error", TaskFailure(op_name, exc)))


#: Set in every worker process; pipelines run inside a worker use threads only.
IN_WORKER_ENV = "SHARDFLOW_IN_WORKER"


def run_worker(inbox_fd: int, outbox_fd: int, driver_pid: int) -> None:
    """Serve tasks until the driver says exit, closes the pipe, or dies."""
    os.environ[IN_WORKER_ENV] = "1"
    os.environ["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"
    _watch_driver(driver_pid)
    try:
        serve(os.fdopen(inbox_fd, "rb"), os.fdopen(outbox_fd, "wb"))
    except EOFError:
        pass


def _watch_driver(driver_pid: int) -> None:
    """Exit as soon as the driver is gone, even in the middle of a user function."""
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(0.5)
            try:
                os.kill(driver_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="shardflow-driver-watch", daemon=True).start()


def in_worker() -> bool:
    """Whether this process is a shardflow worker."""
    return os.environ.get(IN_WORKER_ENV) == "1"
