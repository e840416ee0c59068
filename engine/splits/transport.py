"""How split iterators reach a coordinator in this process: directly, or over a unix socket.

Threads of the driver call the :class:`SplitCoordinator` directly and resolve block references
in place (no copy). When a split iterator is pickled (to a spawned process, a process pool, a
Ray actor on this machine), it becomes a :class:`SocketCoordinatorClient`: the driver starts a
server on a unix socket in a private directory (mode 0700), and clients must also prove they
know a random key (``multiprocessing.connection``'s HMAC challenge) before any request. Blocks
travel as Arrow IPC streams. A consumer process that disappears mid-epoch is noticed by its
closed connection: its split is finished so the other splits do not wait for it, and a block
that could not be delivered goes back to the others.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import weakref
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from shardflow.engine.api.context import DataContext
from shardflow.engine.execution.refs import MemoryRef, resolve
from shardflow.engine.splits.coordinator import SplitCoordinator, portable_error, restore_error

logger = logging.getLogger(__name__)


class EpochSession:
    """One split's reading of one epoch, as seen by a client."""

    epoch: int

    def get(self) -> tuple[Any, Any] | None:
        """The next (reference, metadata), or None at the end of the split's epoch."""
        raise NotImplementedError

    def finish(self) -> None:
        """Stop reading (idempotent; may be called from another thread during ``get``)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the session's resources (after ``finish``)."""


# -- in-process ---------------------------------------------------------------------------


class _LocalSession(EpochSession):
    def __init__(self, coordinator: SplitCoordinator, split: int):
        self._coordinator = coordinator
        self._split = split
        self.epoch = coordinator.start_epoch(split)

    def get(self) -> tuple[Any, Any] | None:
        return self._coordinator.get(self.epoch, self._split)

    def finish(self) -> None:
        self._coordinator.finish(self.epoch, self._split)


class LocalCoordinatorClient:
    """Calls a coordinator of this process; pickles into a :class:`SocketCoordinatorClient`."""

    def __init__(self, coordinator: SplitCoordinator):
        self._coordinator = coordinator
        self._server: CoordinatorServer | None = None
        self._lock = threading.Lock()
        # When every split iterator of this process is gone (and none was sent elsewhere),
        # stop the execution instead of leaving it paused forever.
        self._finalizer = weakref.finalize(self, coordinator.shutdown)

    def open_epoch(self, split: int) -> EpochSession:
        return _LocalSession(self._coordinator, split)

    def stats(self) -> str:
        return self._coordinator.stats()

    def schema(self) -> Any:
        return self._coordinator.schema()

    def context(self) -> DataContext:
        return DataContext.get_current()

    def __reduce__(self) -> Any:
        with self._lock:
            if self._server is None:
                self._server = CoordinatorServer(self._coordinator)
                # Consumers elsewhere may hold this coordinator for as long as this process
                # lives; it must not stop when the local iterators are dropped.
                self._finalizer.detach()
            server = self._server
        return (SocketCoordinatorClient, (server.address, server.authkey))


# -- across processes ---------------------------------------------------------------------


class CoordinatorServer:
    """Serves a coordinator on a unix socket until this process exits."""

    def __init__(self, coordinator: SplitCoordinator):
        self._coordinator = coordinator
        self._dir = tempfile.mkdtemp(prefix="shardflow-split-")
        self.address = os.path.join(self._dir, "coordinator.sock")
        self.authkey = os.urandom(32)
        self._listener = Listener(self.address, family="AF_UNIX", authkey=self.authkey)
        atexit.register(self._close)
        thread = threading.Thread(
            target=self._accept_loop, name="shardflow-split-server", daemon=True
        )
        thread.start()

    def _close(self) -> None:
        try:
            self._listener.close()  # also removes the socket file
        except OSError:
            pass
        shutil.rmtree(self._dir, ignore_errors=True)

    def _accept_loop(self) -> None:
        while True:
            try:
                conn = self._listener.accept()
            except OSError:
                return  # the listener was closed
            except Exception as exc:  # a client that failed the handshake
                logger.debug("streaming_split: rejected a connection: %s", exc)
                continue
            threading.Thread(
                target=self._serve, args=(conn,), name="shardflow-split-conn", daemon=True
            ).start()

    def _serve(self, conn: Connection) -> None:
        coordinator = self._coordinator
        reading: tuple[int, int] | None = None  # (epoch, split) started on this connection
        try:
            while True:
                try:
                    request = conn.recv()
                except (EOFError, OSError):
                    return
                op, args = request[0], request[1:]
                if op == "get":
                    if not self._send_next(conn, *args):
                        return
                    continue
                try:
                    if op == "start":
                        value = coordinator.start_epoch(*args)
                        reading = (value, args[0])
                    elif op == "finish":
                        value = coordinator.finish(*args)
                    elif op == "stats":
                        value = coordinator.stats()
                    elif op == "schema":
                        value = coordinator.schema()
                    elif op == "context":
                        value = DataContext.get_current()
                    else:
                        raise ValueError(f"unknown request {op!r}")
                    reply: tuple[Any, ...] = ("ok", value)
                except BaseException as exc:
                    reply = ("error", portable_error(exc))
                try:
                    conn.send(reply)
                except OSError:
                    return
        finally:
            if reading is not None:
                # The consumer is gone (or done): its split no longer holds up the others.
                coordinator.finish(*reading)
            conn.close()

    def _send_next(self, conn: Connection, epoch: int, split: int) -> bool:
        coordinator = self._coordinator
        try:
            item = coordinator.get(epoch, split)
        except BaseException as exc:
            return _send(conn, ("error", portable_error(exc)))
        if item is None:
            return _send(conn, ("end",))
        ref, meta = item
        try:
            payload = _to_ipc(resolve(ref))
        except BaseException as exc:
            return _send(conn, ("error", portable_error(exc)))
        try:
            conn.send(("block", meta))
            conn.send_bytes(payload)
            return True
        except OSError:
            coordinator.put_back(epoch, split, item)
            return False


def _send(conn: Connection, message: tuple[Any, ...]) -> bool:
    try:
        conn.send(message)
        return True
    except OSError:
        return False


def _to_ipc(block: pa.Table) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, block.schema) as writer:
        writer.write_table(block)
    return sink.getvalue()


def _from_ipc(payload: bytes) -> pa.Table:
    return ipc.open_stream(pa.py_buffer(payload)).read_all()


class _SocketSession(EpochSession):
    def __init__(self, client: SocketCoordinatorClient, split: int):
        self._client = client
        self._split = split
        self._conn = client._connect()
        self._finished = False
        self._lock = threading.Lock()
        try:
            self.epoch = client._request(self._conn, ("start", split))
        except BaseException:
            self._conn.close()
            raise

    def get(self) -> tuple[Any, Any] | None:
        try:
            self._conn.send(("get", self.epoch, self._split))
            reply = self._conn.recv()
            if reply[0] == "block":
                block = _from_ipc(self._conn.recv_bytes())
                return MemoryRef(block), reply[1]
        except (EOFError, OSError) as exc:
            raise self._client._lost(exc) from exc
        if reply[0] == "end":
            return None
        raise restore_error(reply[1])

    def finish(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
        # The session's own connection may be busy with a get() in another thread.
        try:
            conn = self._client._connect()
        except ConnectionError:
            return  # the coordinator is gone; there is nobody to tell
        try:
            self._client._request(conn, ("finish", self.epoch, self._split))
        except ConnectionError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._conn.close()


class SocketCoordinatorClient:
    """Reaches a coordinator in another process of this machine over its unix socket."""

    def __init__(self, address: str, authkey: bytes):
        self._address = address
        self._authkey = authkey

    def __reduce__(self) -> Any:
        return (SocketCoordinatorClient, (self._address, self._authkey))

    def open_epoch(self, split: int) -> EpochSession:
        return _SocketSession(self, split)

    def stats(self) -> str:
        return self._call(("stats",))

    def schema(self) -> Any:
        return self._call(("schema",))

    def context(self) -> DataContext:
        return self._call(("context",))

    def _call(self, message: tuple[Any, ...]) -> Any:
        conn = self._connect()
        try:
            return self._request(conn, message)
        finally:
            conn.close()

    def _connect(self) -> Connection:
        try:
            return Client(self._address, family="AF_UNIX", authkey=self._authkey)
        except (OSError, EOFError) as exc:
            raise self._lost(exc) from exc

    def _request(self, conn: Connection, message: tuple[Any, ...]) -> Any:
        try:
            conn.send(message)
            status, value = conn.recv()
        except (EOFError, OSError) as exc:
            raise self._lost(exc) from exc
        if status == "error":
            raise restore_error(value)
        return value

    def _lost(self, exc: BaseException) -> ConnectionError:
        return ConnectionError(
            f"Lost the streaming_split coordinator at {self._address} ({type(exc).__name__}: "
            f"{exc}): the process that called streaming_split() has exited, or its iterators "
            "were used after it finished."
        )
