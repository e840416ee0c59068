"""Base of operators whose outputs are the blocks their own tasks produce (map, rebatch, zip)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from shardflow.engine.execution.operators.base import PhysicalOperator
from shardflow.engine.execution.operators.task_pool import TaskPool
from shardflow.engine.execution.refs import RefBundle


class PooledOperator(PhysicalOperator):
    """Runs tasks in a TaskPool and offers their blocks as outputs (in task order when the
    execution preserves order, or when ``always_ordered``).

    Subclasses hold their pending input, say when it is all consumed (``_input_drained``), and
    list it for release on cancellation (``_pending_input``).
    """

    runs_tasks = True
    always_ordered = False

    def __init__(self, name: str, inputs: Any):
        super().__init__(name, inputs)
        self._ready: deque[RefBundle] = deque()
        self._pool: TaskPool | None = None

    def start(self, runtime: Any) -> None:
        self._pool = self._new_pool(runtime)
        super().start(runtime)

    def _new_pool(self, runtime: Any) -> TaskPool:
        return TaskPool(self, self.always_ordered or runtime.preserve_order)

    def _input_drained(self) -> bool:
        raise NotImplementedError

    def _pending_input(self) -> Iterable[RefBundle]:
        raise NotImplementedError

    def _clear_input(self) -> None:
        raise NotImplementedError

    def on_task_event(self, task_id: int, event: str, payload: Any, meta: Any) -> None:
        self._pool.on_event(task_id, event, payload, meta)

    def has_next(self) -> bool:
        if not self._ready:
            self._ready.extend(self._pool.pop_ready())
        return bool(self._ready)

    def get_next(self) -> RefBundle:
        return self._ready.popleft()

    def completed(self) -> bool:
        if self.cancelled:
            return not self._pool.running
        return (
            self.inputs_complete and self._input_drained() and not self._ready and self._pool.idle
        )

    def held_bytes(self) -> int:
        pending = sum(b.charge for b in self._pending_input())
        return pending + sum(b.charge for b in self._ready) + self._pool.held_bytes()

    def cancel(self) -> None:
        super().cancel()
        for bundle in list(self._pending_input()) + list(self._ready):
            self.runtime.budget.release(bundle.charge)
        self._clear_input()
        self._ready.clear()
        self._pool.cancel()
