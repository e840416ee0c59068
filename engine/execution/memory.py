"""The memory budget: bytes of blocks in flight, with reservations and backpressure.

A block is "in flight" from the moment a task produces it until its consumer releases it
(a downstream task finished with it, or the user's iterator moved past it). Producers reserve
room for a block before making it, sized by the largest block their operator has produced so
far, so concurrent producers cannot overshoot the budget together.

Progress never depends on the budget's size. A producer waiting for room is *parked*; when
every running task of an execution is parked and its consumer waits for a block, nothing
could ever free memory, so the executor grants one parked producer (the most downstream
one) a single block beyond the budget (``grant``). A budget smaller than one block
therefore admits one block at a time instead of waiting forever.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class MemoryBudget:
    """Counts bytes in flight and makes producers wait while the budget is full."""

    def __init__(self, limit_bytes: int):
        self.limit = limit_bytes
        self.in_flight = 0
        self.reserved = 0
        self.peak = 0
        self.consumer_held = 0
        self._cond = threading.Condition()
        self._parked: dict[object, tuple[int, int]] = {}  # waiter -> (nbytes, headroom)
        self._granted: object | None = None

    def reserve(
        self,
        nbytes: int,
        exempt: Callable[[], bool],
        cancelled: Callable[[], bool],
        headroom: int = 0,
        waiter: object | None = None,
    ) -> bool:
        """Wait until ``nbytes`` fit with ``headroom`` bytes to spare, ``exempt()`` holds, or
        the executor grants ``waiter`` a block (see ``grant``); False when ``cancelled()``.

        A pipeline holding nothing but the block in the consumer's hands always admits one
        more block, so a consumer that asks for the next block is never left waiting, and a
        block larger than the whole budget still makes progress instead of hanging.
        """
        key = object() if waiter is None else waiter
        with self._cond:
            try:
                while True:
                    if cancelled():
                        return False
                    used = self.in_flight + self.reserved
                    if self.idle() or used + nbytes + headroom <= self.limit or exempt():
                        self.reserved += nbytes
                        return True
                    if self._granted is key:
                        self._granted = None
                        self.reserved += nbytes
                        return True
                    self._parked[key] = (nbytes, headroom)
                    self._cond.wait(timeout=0.05)
            finally:
                self._parked.pop(key, None)

    def stuck_waiters(self) -> list[object] | None:
        """The parked producers when none of them can pass on its own now (the budget holds
        no room for any), else None. A producer woken by a release but not yet running again
        still counts as able to pass, so a release is never mistaken for a standstill."""
        with self._cond:
            if self.idle():
                return None
            used = self.in_flight + self.reserved
            for nbytes, headroom in self._parked.values():
                if used + nbytes + headroom <= self.limit:
                    return None
            return list(self._parked)

    def grant(self, waiter: object) -> None:
        """Let the parked ``waiter`` pass once, whatever the budget holds (the executor's way
        out of a standstill; see the module docstring)."""
        with self._cond:
            self._granted = waiter
            self._cond.notify_all()

    def idle(self) -> bool:
        """True when no bytes are in flight except those the consumer holds."""
        return self.in_flight - self.consumer_held + self.reserved <= 0

    def used(self) -> int:
        """Bytes in flight plus bytes reserved."""
        with self._cond:
            return self.in_flight + self.reserved

    def has_room(self, nbytes: int) -> bool:
        with self._cond:
            used = self.in_flight + self.reserved
            return self.idle() or used + nbytes <= self.limit

    def hold(self, nbytes: int) -> None:
        """The consumer took a block of ``nbytes`` (still in flight until released)."""
        with self._cond:
            self.consumer_held += nbytes

    def release_held(self, nbytes: int) -> None:
        """The consumer is done with a block it held."""
        with self._cond:
            self.consumer_held -= nbytes
            self.in_flight -= nbytes
            self._cond.notify_all()

    def commit(self, reserved: int, actual: int) -> None:
        """Turn a reservation into ``actual`` bytes in flight."""
        with self._cond:
            self.reserved -= reserved
            self.in_flight += actual
            self.peak = max(self.peak, self.in_flight)
            self._cond.notify_all()

    def unreserve(self, reserved: int) -> None:
        with self._cond:
            self.reserved -= reserved
            self._cond.notify_all()

    def add(self, nbytes: int) -> None:
        """Count bytes that entered flight without a reservation (e.g. a sliced block)."""
        self.commit(0, nbytes)

    def release(self, nbytes: int) -> None:
        with self._cond:
            self.in_flight -= nbytes
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
