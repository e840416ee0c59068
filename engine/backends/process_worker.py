"""A worker process of the local backend: runs fused transforms for pure-Python UDFs.

Started as ``python -m shardflow.engine.backends.process_worker``. It talks to the driver
over its stdin and a duplicate of its original stdout with length-prefixed pickles, so that a
user function's prints go to stderr instead of corrupting the protocol.

Driver to worker: ("run", payload) | ("next",) | ("close",) | ("exit",)
Worker to driver: ("started",) | ("block", table) | ("done",) | ("error", TaskFailure) | ("closed",)

Every driver message but "exit" gets exactly one reply.
"""

from __future__ import annotations

import os
import struct
import sys
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
    from shardflow.engine.errors import TaskFailure
    from shardflow.sdk import task_stats

    blocks = None
    op_name = "task"
    while True:
        message = receive(inbox)
        kind = message[0]
        if kind == "exit":
            return
        try:
            if kind == "run":
                transform, inputs, ctx, op_name = cloudpickle.loads(message[1])
                task_stats.reset()
                blocks = transform(inputs, ctx)
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
                    send(outbox, ("done", task_stats.take()))
                    continue
                send(outbox, ("block", block))
        except BaseException as exc:
            blocks = None
            send(outbox, ("error", TaskFailure(op_name, exc)))


def main() -> None:
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inbox = os.fdopen(os.dup(0), "rb")
    try:
        serve(inbox, outbox)
    except EOFError:
        pass


if __name__ == "__main__":
    main()
