"""Async user functions: ``async def`` functions and async generators, run as Ray Data runs them.

Inputs (batches or rows) are handed to the function as they come, up to a bound running at
once on an event loop in a background thread; results come back in input order. An async
generator's outputs for one input are gathered before the next result is returned.
"""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

#: Inputs in flight at once, as Ray Data 2.60's defaults for batch and row functions.
ASYNC_BATCH_CONCURRENCY = 4
ASYNC_ROW_CONCURRENCY = 16


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine or an async generator."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else getattr(fn, "__call__", None)  # noqa: B004
    return inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target)


async def call_to_list(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list:
    """Await ``fn(*args)``: the list of an async generator's items, or ``[result]``."""
    result = fn(*args, **kwargs)
    if inspect.isasyncgen(result):
        return [item async for item in result]
    if inspect.isawaitable(result):
        return [await result]
    return [result]


class EventLoopThread:
    """An asyncio event loop running in a daemon thread until ``close()``."""

    def __init__(self) -> None:
        import asyncio  # only when a UDF is async: importing asyncio costs ~12 ms

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="shardflow-async-udf", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import asyncio

        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def map_ordered(
        self,
        make: Callable[[Any], Awaitable[Any]],
        items: Iterable[Any],
        max_in_flight: int,
    ) -> Iterator[Any]:
        """``await make(item)`` for each item, up to ``max_in_flight`` at once, in order."""
        from asyncio import run_coroutine_threadsafe

        pending: deque[Any] = deque()
        source = iter(items)
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < max_in_flight:
                    try:
                        item = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    pending.append(run_coroutine_threadsafe(make(item), self.loop))
                if not pending:
                    return
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()
