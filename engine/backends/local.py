"""The local backend: tasks run in this process's threads, or in worker processes.

Arrow, NumPy and Pillow release the GIL, so threads use every core for them. Pure-Python
row functions hold the GIL; those tasks run in a pool of long-lived worker processes
(started on first use) that receive the pickled transform and its inputs.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, List, Optional

import cloudpickle
import pyarrow as pa

from shardflow.engine.backends.base import PROCESS, THREAD, Backend, TaskSpec
from shardflow.engine.backends.process_worker import receive, send, serve
from shardflow.engine.backends.task_runner import BLOCK, DONE, ERROR, drive_task
from shardflow.engine.errors import TaskFailure, WorkerCrashedError
from shardflow.engine.refs import MemoryRef
from shardflow.engine.spill import spill_block
from shardflow.sdk.block import BlockMetadata

logger = logging.getLogger(__name__)
_MAX_THREADS = 256


class LocalBackend(Backend):
    """Runs tasks in threads of this process, or in local worker processes."""

    name = "local"

    def __init__(self, num_cpus: int):
        self._num_cpus = num_cpus
        # Each execution caps its own running tasks at num_cpus. The pools are larger so that
        # one execution whose tasks wait for its paused consumer (say, a loop over
        # iter_batches that calls count() inside) never blocks another execution.
        self._threads = ThreadPoolExecutor(max_workers=_MAX_THREADS, thread_name_prefix="shardflow")
        self._process_drivers = ThreadPoolExecutor(
            max_workers=_MAX_THREADS, thread_name_prefix="shardflow-proc"
        )

    def num_slots(self, kind: str) -> int:
        return self._num_cpus

    def launch(self, spec: TaskSpec) -> None:
        if spec.kind == PROCESS:
            self._process_drivers.submit(_run_in_process, spec)
        else:
            self._threads.submit(_run_in_thread, spec)

    def put(self, block: Any) -> Any:
        return MemoryRef(block)

    def prepare_source_item(self, item: Any) -> Any:
        if isinstance(item, pa.Table):
            return MemoryRef(item)
        return item

    @property
    def spills_locally(self) -> bool:
        return True


def store_for(spec: TaskSpec) -> Callable[[Any], Any]:
    """How a block a task produced becomes a reference: in memory, or spilled to disk."""
    if spec.spill_dir is None:
        return MemoryRef
    folder = spec.spill_dir
    return lambda block: spill_block(block, folder)


def _run_in_thread(spec: TaskSpec) -> None:
    try:
        blocks = spec.transform(spec.inputs, spec.ctx)
    except BaseException as exc:
        spec.events.put((ERROR, spec.task_id, TaskFailure(spec.op_name, exc), None))
        return
    drive_task(spec, blocks, store=store_for(spec))


def _run_in_process(spec: TaskSpec) -> None:
    pool = WorkerProcessPool.instance()
    worker = pool.checkout()
    healthy = False
    try:
        healthy = worker.run(spec)
    finally:
        pool.checkin(worker, healthy)


class WorkerProcess:
    """One long-lived Python worker process and the protocol to drive it.

    On Linux the worker is forked from this process, so it starts in milliseconds with every
    module already imported; the child closes the pipes of every other worker so that a
    dead worker is always seen as end-of-file. Elsewhere a fresh interpreter is spawned.
    """

    _open_fds: set = set()
    _fds_lock = threading.Lock()

    def __init__(self) -> None:
        self._exit_code: Optional[int] = None
        if hasattr(os, "fork") and sys.platform.startswith("linux"):
            self._start_forked()
        else:
            self._start_spawned()

    def _start_forked(self) -> None:
        # Pipes are made, forked over and closed on our side under one lock, so that no other
        # worker forked at the same moment inherits an end of them (a dead worker's pipe
        # would then never reach end-of-file).
        with WorkerProcess._fds_lock:
            to_child_r, to_child_w = os.pipe()
            from_child_r, from_child_w = os.pipe()
            inherited = set(WorkerProcess._open_fds)
            pid = os.fork()
            if pid == 0:  # the child: serve tasks, never return into the driver's code
                code = 0
                try:
                    for fd in inherited | {to_child_w, from_child_r}:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                    os.environ["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"
                    serve(os.fdopen(to_child_r, "rb"), os.fdopen(from_child_w, "wb"))
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            WorkerProcess._open_fds |= {to_child_w, from_child_r}
            os.close(to_child_r)
            os.close(from_child_w)
        self.pid = pid
        self._fds = (to_child_w, from_child_r)
        self.inbox = os.fdopen(to_child_w, "wb")
        self.outbox = os.fdopen(from_child_r, "rb")
        self._proc = None

    def _start_spawned(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        env["SHARDFLOW_DISABLE_PROGRESS_BARS"] = "1"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "shardflow.engine.backends.process_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.pid = self._proc.pid
        self._fds = ()
        self.inbox, self.outbox = self._proc.stdin, self._proc.stdout

    def poll(self) -> Optional[int]:
        """The exit code if the process has ended, else None."""
        if self._proc is not None:
            return self._proc.poll()
        if self._exit_code is not None:
            return self._exit_code
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self._exit_code = -1
            return self._exit_code
        if pid == 0:
            return None
        self._exit_code = os.waitstatus_to_exitcode(status)
        return self._exit_code

    def kill(self) -> None:
        try:
            if self._proc is not None:
                self._proc.kill()
                self._proc.wait(timeout=5)
            elif self._exit_code is None:  # never signal a reaped pid: it may be reused
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
                self._exit_code = -9
        except (OSError, ChildProcessError, subprocess.TimeoutExpired):
            pass
        self._close_pipes()

    def _close_pipes(self) -> None:
        for stream in (self.inbox, self.outbox):
            try:
                stream.close()
            except OSError:
                pass
        with WorkerProcess._fds_lock:
            WorkerProcess._open_fds -= set(self._fds)

    def _receive(self) -> Any:
        """The worker's next message; EOFError when the process has ended, even if another
        process still holds its pipe open."""
        return receive(_LivenessReader(self.outbox.fileno(), self.poll))

    def _crash(self, spec: TaskSpec) -> WorkerCrashedError:
        code = self.poll()
        for _ in range(20):  # the pipe closes a moment before the process can be reaped
            if code is not None:
                break
            time.sleep(0.025)
            code = self.poll()
        return WorkerCrashedError(
            f"{spec.op_name}: the worker process (pid {self.pid}) died"
            f"{'' if code is None else f' with exit code {code}'} while running a task; "
            "a user function may have crashed the interpreter or run out of memory."
        )

    def run(self, spec: TaskSpec) -> bool:
        """Run one task to its end, posting events. Returns whether the worker is reusable."""
        try:
            payload = cloudpickle.dumps((spec.transform, spec.inputs, spec.ctx, spec.op_name))
        except Exception as exc:
            spec.events.put((ERROR, spec.task_id, TaskFailure(spec.op_name, exc), None))
            return True
        try:
            send(self.inbox, ("run", payload))
            reply = self._receive()
            if reply[0] == "error":
                spec.events.put((ERROR, spec.task_id, reply[1], None))
                return True
            counters = None
            store = store_for(spec)
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
                block = reply[1]
                spec.gate.produced(block.nbytes)
                spec.events.put((BLOCK, spec.task_id, store(block), BlockMetadata.of(block)))
            spec.events.put((DONE, spec.task_id, counters or None, None))
            return True
        except (EOFError, BrokenPipeError, OSError):
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
        for _ in range(40):
            if self.poll() is not None:
                self._close_pipes()
                return
            time.sleep(0.05)
        self.kill()


class _LivenessReader:
    """Reads a pipe with ``os.read``, giving up (end-of-file) once its writer has exited."""

    def __init__(self, fd: int, exited: Any):
        self._fd = fd
        self._exited = exited

    def read(self, n: int) -> bytes:
        while True:
            ready, _, _ = select.select([self._fd], [], [], 0.5)
            if ready:
                return os.read(self._fd, n)
            if self._exited() is not None:
                return b""


class WorkerProcessPool:
    """Process-wide pool of worker processes, created on first use and stopped at exit."""

    _instance: Optional["WorkerProcessPool"] = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._idle: "queue.LifoQueue[WorkerProcess]" = queue.LifoQueue()
        self._all: List[WorkerProcess] = []
        self._guard = threading.Lock()

    @classmethod
    def instance(cls) -> "WorkerProcessPool":
        with cls._lock:
            if cls._instance is None:
                cls._instance = WorkerProcessPool()
                # Stop workers before Python joins the threads that drive them at exit
                # (concurrent.futures joins its threads then); plain atexit runs too late.
                register = getattr(threading, "_register_atexit", atexit.register)
                register(cls._instance.stop)
            return cls._instance

    def checkout(self) -> WorkerProcess:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            worker = WorkerProcess()
            with self._guard:
                self._all.append(worker)
            return worker

    def checkin(self, worker: WorkerProcess, healthy: bool) -> None:
        if healthy and worker.poll() is None:
            self._idle.put(worker)
            return
        worker.kill()
        with self._guard:
            if worker in self._all:
                self._all.remove(worker)

    def stop(self) -> None:
        with self._guard:
            workers, self._all = list(self._all), []
        for worker in workers:
            worker.stop()


__all__ = ["LocalBackend", "THREAD", "PROCESS", "DONE"]
