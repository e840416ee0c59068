"""Worker processes of the local backend, driven from the driver.

Workers are forked by the zygote (engine/execution/backends/zygote.py), never by the driver itself. A
``WorkerProcess`` runs one task at a time, block by block, so backpressure reaches into the
worker; ``WorkerProcessPool`` keeps idle workers for reuse, checks that a worker is alive
before handing it out, and kills the worker of a cancelled task at once.
"""

from __future__ import annotations

import atexit
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import cloudpickle

from shardflow.engine.execution.arrow_memory import child_environment
from shardflow.engine.execution.backends import code_pickling
from shardflow.engine.execution.backends.base import TaskSpec
from shardflow.engine.execution.backends.process_worker import receive, send
from shardflow.engine.execution.backends.task_runner import BLOCK, DONE, ERROR
from shardflow.engine.execution.backends.zygote import (
    ZYGOTE_ENVIRONMENT,
    receive_message,
    send_message,
)
from shardflow.engine.execution.errors import TaskFailure, WorkerCrashedError
from shardflow.engine.execution.shm import (
    SHM_DIR_ENV,
    ShmRef,
    for_transfer,
    private_folder,
    received,
    remove_files_of,
    unlink,
)
from shardflow.sdk.block import BlockMetadata


class Zygote:
    """The driver's handle on its zygote process, started on first use."""

    _instance: Zygote | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**ZYGOTE_ENVIRONMENT, **os.environ, **child_environment()}
        try:  # blocks to and from workers go through this run's private folder
            env[SHM_DIR_ENV] = private_folder()
        except OSError:  # no folder: blocks are pickled through the pipes instead
            env[SHM_DIR_ENV] = ""
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "shardflow.engine.execution.backends.zygote",
                str(theirs.fileno()),
                str(os.getpid()),
            ],
            pass_fds=[theirs.fileno()],
            env=env,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._control = ours
        self._guard = threading.Lock()

    @classmethod
    def instance(cls) -> Zygote:
        with cls._lock:
            if cls._instance is None or cls._instance._process.poll() is not None:
                cls._instance = Zygote()
            return cls._instance

    def fork(
        self,
        inbox_fd: int,
        outbox_fd: int,
        env: dict[str, str] | None = None,
        preload: list[str] | None = None,
    ) -> int:
        """A new worker reading ``inbox_fd`` and writing ``outbox_fd``; returns its pid.

        ``preload``: modules the zygote imports first (see zygote.PRELOADABLE)."""
        message = {"op": "fork", "env": env or {}, "preload": list(preload or [])}
        with self._guard:
            send_message(self._control, message, [inbox_fd, outbox_fd])
            reply, _ = receive_message(self._control)
        return int(reply["pid"])

    def exit_code(self, pid: int) -> int | None:
        """A worker's exit code once it has ended (None while it runs or when unknown)."""
        try:
            with self._guard:
                send_message(self._control, {"op": "status", "pid": pid})
                reply, _ = receive_message(self._control)
        except (OSError, EOFError):
            return None
        return reply["code"]

    def stop(self) -> None:
        try:
            self._control.close()
            self._process.wait(timeout=5)
        except Exception:
            self._process.kill()


class WorkerProcess:
    """One long-lived worker process and the protocol to drive it."""

    def __init__(self, env: dict[str, str] | None = None, preload: list[str] | None = None) -> None:
        self._zygote = Zygote.instance()
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        try:
            self.pid = self._zygote.fork(to_worker_r, from_worker_w, env, preload)
        finally:
            os.close(to_worker_r)
            os.close(from_worker_w)
        self.inbox = os.fdopen(to_worker_w, "wb")
        self.outbox = os.fdopen(from_worker_r, "rb")
        self._ended = False
        self._exit_code: int | None = None
        self.killed = False

    def alive(self) -> bool:
        """Whether the process still runs (a dead idle worker must not be reused)."""
        if self._ended:
            return False
        try:
            ready, _, _ = select.select([self.outbox.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        if ready:  # an idle worker never writes: readable means end-of-file, it died
            self._ended = True
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            self._ended = True
            return False
        return True

    def exit_code(self) -> int | None:
        if self._exit_code is None:
            for _ in range(40):  # the pipe closes a moment before the zygote reaps the process
                self._exit_code = self._zygote.exit_code(self.pid)
                if self._exit_code is not None:
                    break
                time.sleep(0.025)
        return self._exit_code

    def kill(self) -> None:
        """End the process now (a cancelled task's worker, or one that misbehaved)."""
        self.killed = True
        if not self._ended:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._close()
        remove_files_of(self.pid)  # a block it wrote that the driver will never read

    def _close(self) -> None:
        self._ended = True
        for stream in (self.inbox, self.outbox):
            try:
                stream.close()
            except OSError:
                pass

    def _receive(self) -> Any:
        return receive(_EndAwareReader(self.outbox.fileno(), self))

    def _crash(self, spec: TaskSpec) -> WorkerCrashedError:
        code = self.exit_code()
        return WorkerCrashedError(
            f"{spec.op_name}: the worker process (pid {self.pid}) died"
            f"{'' if code is None else f' with exit code {code}'} while running a task; "
            "a user function may have crashed the interpreter or run out of memory."
        )

    def setup(self, transform: Any, op_name: str) -> TaskFailure | None:
        """Make this worker an actor: ``transform.setup()`` runs in it once.

        Returns the failure (the user's constructor raised, or the worker died), or None.
        """
        try:
            payload = code_pickling.dumps((transform, op_name))
        except Exception as exc:
            return TaskFailure(op_name, exc)
        try:
            send(self.inbox, ("setup", payload))
            reply = self._receive()
        except (EOFError, BrokenPipeError, OSError, ValueError):
            code = self.exit_code()
            return TaskFailure(
                op_name,
                WorkerCrashedError(
                    f"{op_name}: the actor process (pid {self.pid}) died"
                    f"{'' if code is None else f' with exit code {code}'} while constructing the "
                    "user's class."
                ),
            )
        return reply[1] if reply[0] == "error" else None

    def run(
        self,
        spec: TaskSpec,
        store: Any,
        actor_call: bool = False,
        before_done: Callable[[], None] | None = None,
    ) -> bool:
        """Run one task to its end, posting events. Returns whether the worker is reusable.

        ``actor_call``: the worker is an actor (see ``setup``) and receives only the inputs.
        ``before_done``: called once the worker has finished the task and waits for the next,
        just before the task's DONE event is posted (a pool returns the worker then, so that
        the task the executor starts on hearing DONE finds it idle).
        """
        shared: list[Any] = []
        try:
            inputs = [for_transfer(item) for item in spec.inputs]
            shared = [item for item in inputs if isinstance(item, ShmRef)]
            if actor_call:
                message = ("call", cloudpickle.dumps((inputs, spec.ctx, spec.op_name)))
            else:
                payload = (spec.transform, inputs, spec.ctx, spec.op_name)
                message = ("run", code_pickling.dumps(payload))
        except Exception as exc:
            for item in shared:
                unlink(item.path)
            spec.events.put((ERROR, spec.task_id, TaskFailure(spec.op_name, exc), None))
            return True
        try:
            return self._drive(spec, store, message, before_done)
        finally:
            for item in shared:  # the worker unlinks what it mapped; this is what it did not
                unlink(item.path)

    def _drive(
        self, spec: TaskSpec, store: Any, message: tuple, before_done: Callable[[], None] | None
    ) -> bool:
        try:
            send(self.inbox, message)
            reply = self._receive()
            if reply[0] == "error":
                spec.events.put((ERROR, spec.task_id, reply[1], None))
                return True
            counters = None
            while True:
                if not spec.gate.acquire():
                    send(self.inbox, ("close",))
                    self._receive()
                    break
                send(self.inbox, ("next",))
                reply = self._receive()
                if reply[0] == "done":
                    spec.gate.unused()
                    counters = reply[1] if len(reply) > 1 else None
                    break
                if reply[0] == "error":
                    spec.gate.unused()
                    spec.events.put((ERROR, spec.task_id, reply[1], None))
                    return True
                block = received(reply[1])
                spec.gate.produced(block.nbytes)
                spec.events.put((BLOCK, spec.task_id, store(block), BlockMetadata.of(block)))
            if before_done is not None:
                before_done()
            spec.events.put((DONE, spec.task_id, counters or None, None))
            return True
        except (EOFError, BrokenPipeError, OSError, ValueError):
            spec.gate.unused()
            error = self._crash(spec)
            spec.events.put((ERROR, spec.task_id, TaskFailure(spec.op_name, error), None))
            return False

    def stop(self) -> None:
        try:
            send(self.inbox, ("exit",))
            self.inbox.close()
        except Exception:
            pass
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and self.alive():
            time.sleep(0.02)
        self.kill()


class _EndAwareReader:
    """Reads a pipe with ``os.read``; end-of-file once the worker was killed or has exited."""

    def __init__(self, fd: int, worker: WorkerProcess):
        self._fd = fd
        self._worker = worker

    def read(self, n: int) -> bytes:
        while True:
            if self._worker.killed:
                return b""
            try:
                ready, _, _ = select.select([self._fd], [], [], 0.2)
            except (OSError, ValueError):
                return b""
            if ready:
                return os.read(self._fd, n)
            try:
                os.kill(self._worker.pid, 0)
            except ProcessLookupError:
                return b""


class WorkerProcessPool:
    """Process-wide pool of worker processes, created on first use and stopped at exit."""

    _instance: WorkerProcessPool | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._idle: queue.LifoQueue[WorkerProcess] = queue.LifoQueue()
        self._all: list[WorkerProcess] = []
        self._busy: dict[int, WorkerProcess] = {}
        self._guard = threading.Lock()

    @classmethod
    def instance(cls) -> WorkerProcessPool:
        with cls._lock:
            if cls._instance is None:
                cls._instance = WorkerProcessPool()
                # Stop workers before Python joins the threads that drive them at exit
                # (concurrent.futures joins its threads then); plain atexit runs too late.
                register = getattr(threading, "_register_atexit", atexit.register)
                register(cls._instance.stop)
            return cls._instance

    def checkout(self, task_id: int) -> WorkerProcess:
        """An idle live worker (a dead one is dropped), or a new one."""
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                worker = WorkerProcess()
                with self._guard:
                    self._all.append(worker)
                break
            if worker.alive():
                break
            self._forget(worker)
        with self._guard:
            self._busy[task_id] = worker
        return worker

    def checkin(self, task_id: int, worker: WorkerProcess, healthy: bool) -> None:
        with self._guard:
            self._busy.pop(task_id, None)
        if healthy and not worker.killed and worker.alive():
            self._idle.put(worker)
            return
        worker.kill()
        self._forget(worker)

    def cancel(self, task_id: int) -> None:
        """Kill the worker running ``task_id`` (user code cannot be interrupted otherwise)."""
        with self._guard:
            worker = self._busy.get(task_id)
        if worker is not None:
            worker.kill()

    def _forget(self, worker: WorkerProcess) -> None:
        with self._guard:
            if worker in self._all:
                self._all.remove(worker)

    def stop(self) -> None:
        with self._guard:
            workers, self._all = list(self._all), []
        for worker in workers:
            worker.stop()
        with Zygote._lock:
            if Zygote._instance is not None:
                Zygote._instance.stop()
                Zygote._instance = None
