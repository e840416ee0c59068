"""The split coordinator: one execution of a dataset shared by n consumers (streaming_split).

The coordinator runs the dataset once per epoch and hands its blocks to n splits. It is plain
thread-safe Python; the transports in engine/splits/transport.py and engine/splits/ray_coordinator.py let
consumers in other processes or Ray actors call it.

- **Epochs.** A split starts an epoch with ``start_epoch``; the epoch (a new execution)
  begins when all n splits have started it, as in Ray Data. A split that starts the next
  epoch before finishing the current one abandons the current one.
- **Dispatch.** With ``equal=False`` a split gets the next block when it asks for one, so a
  faster consumer takes more blocks and no consumer waits for another. With ``equal=True``
  every split gets exactly the same number of rows: blocks are handed out only while the
  rows still buffered can even out the splits that lag behind, blocks are cut (zero-copy
  slices) where needed, and the remainder that cannot be shared equally is dropped.
- **Locality.** With ``locality_hints`` (one node id per split), a split that asks gets a
  buffered block held on its node when there is one; the buffer then holds up to 2n blocks,
  so that each split finds blocks of its own node, and only a full buffer (or the end of
  the execution) hands a split a block from another node.
- **Early stop and failures.** A split that finishes early no longer counts (the others go on,
  and with ``equal=True`` they stay equal among themselves). An error in the execution reaches
  every split on its next request. Waits that depend on other consumers (the start of an epoch,
  an equal split waiting for lagging splits) end with a TimeoutError after ``timeout_s``.
"""

from __future__ import annotations

import collections
import logging
import pickle
import threading
import time
from typing import Any

from shardflow.engine.execution.errors import TaskFailure, UserCodeError
from shardflow.engine.execution.refs import (
    MemoryRef,
    SliceRef,
    SpilledRef,
    resolve,
    slice_metadata,
    slice_ref,
)

logger = logging.getLogger(__name__)

_WARN_AFTER_S = 30.0
_POLL_S = 0.5


class SplitCoordinator:
    """Runs a dataset for ``n`` splits; see the module docstring.

    Args:
        dataset: The Dataset to execute (once per epoch).
        n: Number of splits.
        equal: Give every split exactly the same number of rows.
        timeout_s: Longest wait for other consumers, or None to wait without end.
    """

    def __init__(
        self,
        dataset: Any,
        n: int,
        equal: bool,
        timeout_s: float | None,
        locality_hints: list[str] | None = None,
    ):
        self._dataset = dataset
        self.n = n
        self.equal = equal
        self.timeout_s = timeout_s
        self.locality_hints = list(locality_hints) if locality_hints is not None else None
        self.locality_hits = self.locality_misses = 0  # blocks, over every epoch
        self._cond = threading.Condition()
        self._epoch = -1
        self._arrived: set[int] = set()
        self._run: _EpochRun | None = None
        self._schema: Any = None
        self._schema_known = False

    # -- the protocol the iterators use -----------------------------------------------

    def start_epoch(self, split: int) -> int:
        """Wait until every split has started the next epoch; return the epoch's number."""
        self._check_split(split)
        started = time.monotonic()
        warned = False
        previous: _EpochRun | None = None
        with self._cond:
            if self._run is not None:
                self._run.finish(split)  # an iteration left open is abandoned
            if split in self._arrived:
                raise ValueError(
                    f"Split {split} is already waiting for the next epoch in another consumer; "
                    "iterate each split with one consumer at a time."
                )
            target = self._epoch + 1
            self._arrived.add(split)
            if len(self._arrived) == self.n:
                previous = self._run
                self._arrived = set()
                self._epoch = target
                self._run = _EpochRun(
                    self._dataset, self.n, self.equal, self.timeout_s, self._cond, self
                )
                self._cond.notify_all()
            while self._epoch < target:
                waited = time.monotonic() - started
                if self.timeout_s is not None and waited >= self.timeout_s:
                    self._arrived.discard(split)
                    missing = sorted(set(range(self.n)) - self._arrived - {split})
                    raise TimeoutError(
                        f"streaming_split: split {split} waited {waited:.0f}s at the start of "
                        f"epoch {target} for split(s) {missing} to start iterating. Every split "
                        "must be iterated by its own consumer, and an epoch starts when all of "
                        "them have started it; raise DataContext.streaming_split_timeout_s if "
                        "consumers start far apart."
                    )
                if not warned and waited >= _WARN_AFTER_S:
                    warned = True
                    logger.warning(
                        "streaming_split: split %d has waited %.0fs for the other splits to "
                        "start epoch %d; all splits must be iterated at the same time.",
                        split,
                        waited,
                        target,
                    )
                self._cond.wait(timeout=_POLL_S)
            run = self._run
        if previous is not None:
            previous.stop()
        if run is not None:
            run.start()
        return target

    def get(self, epoch: int, split: int) -> tuple[Any, Any] | None:
        """The next (reference, metadata) for ``split``, or None when its epoch is over."""
        return self._current(epoch).get(split)

    def finish(self, epoch: int, split: int) -> None:
        """``split`` stops reading ``epoch`` (at its end, or early)."""
        with self._cond:
            if epoch == self._epoch and self._run is not None:
                self._run.finish(split)

    def put_back(self, epoch: int, split: int, item: tuple[Any, Any]) -> None:
        """Return a block that could not be delivered to ``split`` (its consumer is gone)."""
        with self._cond:
            if epoch == self._epoch and self._run is not None:
                self._run.put_back(split, item)

    def stats(self) -> str:
        text = self._dataset.stats()
        given = self.locality_hits + self.locality_misses
        if self.locality_hints is not None and given:
            text += (
                f"\nstreaming_split: {self.locality_hits} of {given} blocks went to a split "
                "on their node"
            )
        return text

    def schema(self) -> Any:
        if not self._schema_known:
            self._schema = self._dataset.schema()
            self._schema_known = True
        return self._schema

    def shutdown(self) -> None:
        """Stop the current execution (used when the coordinator is discarded)."""
        with self._cond:
            run, self._run = self._run, None
            self._epoch += 1
            self._cond.notify_all()
        if run is not None:
            run.stop()

    # -- helpers ---------------------------------------------------------------------

    def _current(self, epoch: int) -> _EpochRun:
        with self._cond:
            if epoch != self._epoch or self._run is None:
                raise ValueError(
                    "Invalid iterator: the dataset has moved on to another epoch. Start a new "
                    "iteration to read the current epoch."
                )
            return self._run

    def _check_split(self, split: int) -> None:
        if not isinstance(split, int) or not 0 <= split < self.n:
            raise ValueError(f"split must be in [0, {self.n}), got {split!r}.")


class _EpochRun:
    """One execution of the dataset and the state of its dispatch to the splits.

    All state is guarded by the coordinator's condition. A pump thread owns the execution's
    generator: it pulls a block only when a split asks for more than the buffer can give, so
    the executor's backpressure reaches the consumers.
    """

    def __init__(
        self,
        dataset: Any,
        n: int,
        equal: bool,
        timeout_s: float | None,
        cond: threading.Condition,
        coordinator: SplitCoordinator,
    ):
        self._coordinator = coordinator
        self._hints = coordinator.locality_hints
        self._dataset = dataset
        self._n = n
        self._equal = equal
        self._timeout_s = timeout_s
        self._cond = cond
        self._buffer: collections.deque[tuple[Any, Any]] = collections.deque()
        self._buffered_rows = 0
        self._given: list[int] = [0] * n
        self._finished: set[int] = set()
        self._exhausted = False
        self._final_rows: int | None = None  # equal splits: every split's count at the end
        self._error: bytes | None = None  # pickled portable_error of the execution
        self._hungry = False
        self._stopping = False
        # Equal splits buffer enough blocks to even out the splits; on demand, one is enough.
        self._max_buffered = 2 * n + 2 if equal else 1
        if self._hints is not None:
            self._max_buffered = max(self._max_buffered, 2 * n)
        self._thread: threading.Thread | None = None
        self._backend: Any = None  # finds where blocks live (locality), set by the pump

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._pump, name="shardflow-split-pump", daemon=True
            )
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    # -- called by the coordinator under its condition ---------------------------------

    def finish(self, split: int) -> None:
        if split in self._finished:
            return
        self._finished.add(split)
        if len(self._finished) == self._n:
            self._stopping = True
        self._cond.notify_all()

    def put_back(self, split: int, item: tuple[Any, Any]) -> None:
        rows = item[1].num_rows or 0
        self._buffer.appendleft(item)
        self._buffered_rows += rows
        self._given[split] -= rows
        self._cond.notify_all()

    # -- dispatch ----------------------------------------------------------------------

    def get(self, split: int) -> tuple[Any, Any] | None:
        waiting_since: float | None = None
        with self._cond:
            while True:
                if split in self._finished:
                    return None
                if self._error is not None:
                    # A fresh exception per consumer: one object raised in several threads
                    # would share (and grow) one traceback.
                    raise restore_error(pickle.loads(self._error))
                decision = self._take(split) if self._equal else self._take_next(split)
                if decision is _END:
                    return None
                if decision is _NEED_BLOCK:
                    waiting_since = None
                    self._hungry = True
                    self._cond.notify_all()
                elif decision is _WAIT_FOR_PEERS:
                    waiting_since = waiting_since or time.monotonic()
                    self._check_peer_wait(split, waiting_since)
                else:
                    return decision
                self._cond.wait(timeout=_POLL_S)

    def _take_next(self, split: int) -> Any:
        if self._hints is not None and self._buffer:
            local = self._local_block(split, None)
            if local is not None:
                return self._pop(split, local)
            if not self._exhausted and len(self._buffer) < self._max_buffered:
                return _NEED_BLOCK  # another block may be on this split's node
        if self._buffer:
            return self._pop(split)
        return _END if self._exhausted else _NEED_BLOCK

    def _local_block(self, split: int, max_rows: int | None) -> int | None:
        """Position in the buffer of the oldest block on ``split``'s node (of at most
        ``max_rows`` rows), or None."""
        if self._backend is None:
            return None
        node = self._hints[split]
        found = self._backend.block_nodes([ref for ref, _ in self._buffer]) or ()
        for position, (nodes, (_, meta)) in enumerate(zip(found, self._buffer)):
            if node in nodes and (max_rows is None or meta.num_rows <= max_rows):
                return position
        return None

    def _take(self, split: int) -> Any:
        """Equal dispatch: give ``split`` a block only when the others can still be evened out.

        With ``given`` rows per active split, ``top`` the largest, ``owed`` the rows the
        others need to reach ``top`` and ``buffered`` the rows held here, a split may take up
        to ``top - given[split] + (buffered - owed) // active`` rows and every active split
        can still end with the same count. Once the execution is exhausted that bound becomes
        every split's final count, fixed so that splits ending at different times stay equal.
        """
        if self._exhausted:
            if self._final_rows is None:
                self._final_rows = self._allowance(split) + self._given[split]
            allowance = self._final_rows - self._given[split]
            if allowance <= 0 or not self._buffer:
                return _END
            if self._buffer[0][1].num_rows <= allowance:
                return self._pop(split)
            return self._cut(split, allowance)
        allowance = self._allowance(split)
        local = self._local_block(split, allowance) if self._hints is not None else None
        if local is not None:
            return self._pop(split, local)
        if self._buffer and self._buffer[0][1].num_rows <= allowance:
            return self._pop(split)
        if len(self._buffer) < self._max_buffered:
            return _NEED_BLOCK
        if allowance > 0:
            return self._cut(split, allowance)
        return _WAIT_FOR_PEERS

    def _allowance(self, split: int) -> int:
        active = [k for k in range(self._n) if k not in self._finished]
        top = max(self._given[k] for k in active)
        owed = sum(top - self._given[k] for k in active)
        return top - self._given[split] + (self._buffered_rows - owed) // len(active)

    def _pop(self, split: int, position: int = 0) -> tuple[Any, Any]:
        """Hand ``split`` the buffered block at ``position`` (the oldest by default)."""
        if self._hints is not None:
            if position or self._is_local(split, 0):
                self._coordinator.locality_hits += 1
            else:
                self._coordinator.locality_misses += 1
        item = self._buffer[position]
        del self._buffer[position]
        rows = item[1].num_rows or 0
        self._buffered_rows -= rows
        self._given[split] += rows
        return item

    def _is_local(self, split: int, position: int) -> bool:
        if self._backend is None:
            return False
        nodes = self._backend.block_nodes([self._buffer[position][0]]) or (frozenset(),)
        return self._hints[split] in nodes[0]

    def _cut(self, split: int, rows: int) -> tuple[Any, Any]:
        ref, meta = self._buffer[0]
        total = meta.num_rows
        self._buffer[0] = (
            slice_ref(ref, rows, total - rows),
            slice_metadata(meta, rows, total - rows),
        )
        self._buffered_rows -= rows
        self._given[split] += rows
        return slice_ref(ref, 0, rows), slice_metadata(meta, 0, rows)

    def _check_peer_wait(self, split: int, since: float) -> None:
        waited = time.monotonic() - since
        if self._timeout_s is not None and waited >= self._timeout_s:
            lagging = [k for k in range(self._n) if k not in self._finished and k != split]
            raise TimeoutError(
                f"streaming_split(equal=True): split {split} waited {waited:.0f}s for split(s) "
                f"{lagging} to read their share; equal splits must be consumed at similar "
                "rates (or stopped). Raise DataContext.streaming_split_timeout_s for slower "
                "consumers."
            )

    # -- the pump ----------------------------------------------------------------------

    def _pump(self) -> None:
        stream = None
        try:
            if self._hints is not None:
                from shardflow.engine.execution.runtime import current_backend

                self._backend = current_backend()
            stream = self._dataset._execute()
            while True:
                with self._cond:
                    while not self._stopping and not (
                        self._hungry and len(self._buffer) < self._max_buffered
                    ):
                        self._cond.wait()
                    if self._stopping:
                        return
                try:
                    ref, meta = next(stream)
                except StopIteration:
                    with self._cond:
                        self._exhausted = True
                        self._cond.notify_all()
                    return
                ref, meta = _detached(ref, meta)
                if not meta.num_rows:
                    continue
                with self._cond:
                    self._buffer.append((ref, meta))
                    self._buffered_rows += meta.num_rows
                    self._hungry = False
                    self._cond.notify_all()
        except BaseException as exc:
            with self._cond:
                self._error = pickle.dumps(portable_error(exc))
                self._exhausted = True
                self._cond.notify_all()
        finally:
            if stream is not None:
                stream.close()


def portable_error(exc: BaseException) -> Any:
    """A picklable record of ``exc`` that :func:`restore_error` turns back into an exception
    of the same type (a user function's error stays catchable as its original type)."""
    if isinstance(exc, UserCodeError):
        return TaskFailure(exc.operator, exc)
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def restore_error(record: Any) -> BaseException:
    """The exception recorded by :func:`portable_error`."""
    if isinstance(record, TaskFailure):
        return record.to_exception()
    return record


def _detached(ref: Any, meta: Any) -> tuple[Any, Any]:
    """A reference that stays valid after the execution ends, with a known row count.

    Spill files of an execution are removed when it ends; a spilled block handed out here is
    memory-mapped now (mapped pages outlive the file's removal).
    """
    base = ref.parent if isinstance(ref, SliceRef) else ref
    if isinstance(base, SpilledRef) or meta.num_rows is None:
        block = resolve(ref)
        ref = MemoryRef(block)
        if meta.num_rows is None:
            from shardflow.sdk.block import BlockMetadata

            meta = BlockMetadata(block.num_rows, block.nbytes, input_files=meta.input_files)
    return ref, meta


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


_END = _Marker("END")
_NEED_BLOCK = _Marker("NEED_BLOCK")
_WAIT_FOR_PEERS = _Marker("WAIT_FOR_PEERS")
