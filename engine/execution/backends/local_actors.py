"""Actors of the local backend: long-lived worker processes that construct the user's class once.

An actor is a worker process forked by the zygote (never by the driver, whose threads would
make a fork unsafe), with its own environment: ``CUDA_VISIBLE_DEVICES`` naming only its
GPUs, and the thread counts of common math libraries set to its CPUs (as Ray does). A driver
thread per actor sends it the transform once (``setup``), then its tasks one after another;
tasks wait in the actor's queue while it is busy. A task of an actor that dies fails with
WorkerCrashedError, and so does every task queued behind it, so the pool can retry them
elsewhere.

Inside a worker process (a pipeline run by a user function), actors are threads of that
process instead: no workers of workers.
"""

from __future__ import annotations

import os
import queue
import sys
import threading

from shardflow.engine.execution.backends.base import ActorSpec, TaskSpec
from shardflow.engine.execution.backends.task_runner import DONE, ERROR, drive_task
from shardflow.engine.execution.errors import TaskFailure, WorkerCrashedError
from shardflow.engine.execution.refs import MemoryRef

#: Environment variables that bound the threads of math libraries in an actor.
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def actor_env(num_cpus: float, gpu_ids: list[str] | None) -> dict[str, str]:
    """The environment overrides of one actor process."""
    env: dict[str, str] = {}
    threads = str(max(1, int(num_cpus)))
    for name in THREAD_ENV:
        if name not in os.environ:  # the user's own setting wins
            env[name] = threads
    if gpu_ids is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids)
    return env


def preloads() -> list[str]:
    """Heavy modules the driver uses that actors will likely import too (a driver that
    defines a torch model has imported torch): the zygote imports them once for all."""
    from shardflow.engine.execution.backends.zygote import PRELOADABLE

    return [name for name in PRELOADABLE if name in sys.modules]


class _QueuedActor:
    """What both kinds of local actor share: a task queue served by one driver thread."""

    def __init__(self, spec: ActorSpec, gpus: list[tuple[str, float]] | None):
        self.spec = spec
        self.gpus = gpus
        self._tasks: queue.Queue[TaskSpec | None] = queue.Queue()
        self._lock = threading.Lock()
        self._ended = False
        self._killed = threading.Event()
        self._thread = threading.Thread(
            target=self._main, name=f"shardflow-actor-{spec.actor_id}", daemon=True
        )

    @property
    def gpu_ids(self) -> list[str] | None:
        return None if self.gpus is None else [device for device, _ in self.gpus]

    def start(self) -> _QueuedActor:
        self._thread.start()
        return self

    def submit(self, spec: TaskSpec) -> None:
        with self._lock:
            if not self._ended:
                self._tasks.put(spec)
                return
        self._fail(spec)

    def alive(self) -> bool:
        return not self._ended and not self._killed.is_set()

    def stop(self) -> None:
        self._tasks.put(None)

    def kill(self) -> None:
        self._killed.set()
        self._tasks.put(None)

    def _post_started(self, failure: TaskFailure | None) -> None:
        if failure is None:
            self.spec.events.put((DONE, self.spec.actor_id, None, None))
        else:
            self.spec.events.put((ERROR, self.spec.actor_id, failure, None))

    def _next_task(self) -> TaskSpec | None:
        task = self._tasks.get()
        return None if self._killed.is_set() else task

    def _fail(self, task: TaskSpec) -> None:
        error = WorkerCrashedError(f"{task.op_name}: the actor ended before running this task.")
        task.events.put((ERROR, task.task_id, TaskFailure(task.op_name, error), None))

    def _end(self) -> None:
        with self._lock:
            self._ended = True
        while True:  # tasks queued behind a dead actor fail, to be retried elsewhere
            try:
                task = self._tasks.get_nowait()
            except queue.Empty:
                break
            if task is not None:
                self._fail(task)
        if self.spec.on_exit is not None:
            self.spec.on_exit()

    def _main(self) -> None:
        try:
            self._serve()
        finally:
            self._end()

    def _serve(self) -> None:
        raise NotImplementedError


class ProcessActor(_QueuedActor):
    """An actor in a worker process of its own."""

    def __init__(self, spec: ActorSpec, gpus: list[tuple[str, float]] | None):
        super().__init__(spec, gpus)
        self._worker = None

    def kill(self) -> None:
        super().kill()
        worker = self._worker
        if worker is not None:
            worker.kill()

    def alive(self) -> bool:
        # A signal-0 check only: reading the worker's pipe here would race with the driver
        # thread that reads its replies.
        worker = self._worker
        if worker is not None and not worker.killed:
            try:
                os.kill(worker.pid, 0)
            except ProcessLookupError:
                return False
        return super().alive()

    @property
    def pid(self) -> int | None:
        return None if self._worker is None else self._worker.pid

    def _serve(self) -> None:
        from shardflow.engine.execution.backends.worker_pool import WorkerProcess

        spec = self.spec
        try:
            self._worker = worker = WorkerProcess(
                actor_env(spec.num_cpus, self.gpu_ids), preload=preloads()
            )
        except Exception as exc:  # the zygote could not start a process
            self._post_started(TaskFailure(spec.op_name, exc))
            return
        try:
            if self._killed.is_set():
                self._post_started(TaskFailure(spec.op_name, WorkerCrashedError("actor stopped")))
                return
            failure = worker.setup(spec.transform, spec.op_name)
            self._post_started(failure)
            if failure is not None:
                return
            while True:
                task = self._next_task()
                if task is None:
                    return
                if not worker.run(task, MemoryRef, actor_call=True):
                    return  # the process died: the task was failed as a crash
        finally:
            if self._killed.is_set():
                worker.kill()
            else:
                worker.stop()


class ThreadActor(_QueuedActor):
    """An actor in a thread of this process (used inside worker processes)."""

    def _serve(self) -> None:
        import cloudpickle

        spec = self.spec
        try:
            transform = cloudpickle.loads(cloudpickle.dumps(spec.transform))
            transform.setup()
        except BaseException as exc:
            self._post_started(TaskFailure(spec.op_name, exc))
            return
        self._post_started(None)
        try:
            while True:
                task = self._next_task()
                if task is None:
                    return
                try:
                    blocks = transform(task.inputs, task.ctx)
                except BaseException as exc:
                    task.events.put((ERROR, task.task_id, TaskFailure(task.op_name, exc), None))
                    continue
                drive_task(task, blocks, store=MemoryRef)
        finally:
            transform.teardown()
