"""Sampling a child's whole process tree while it runs: resident memory and CPU time.

The parent starts one :class:`TreeMonitor` per child. Every ``interval_s`` it lists the child
and all its descendants (worker processes, Ray's daemons and workers), adds up their resident
set sizes, and records ``(time, bytes)``. It also keeps each process's last-seen CPU time, so
that at the end it can tell how much of the machine's busy CPU time went to other work: on a
shared machine that is the number to read before trusting a figure.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass
class TreeUsage:
    """What a monitor saw over one child's life."""

    samples: list[tuple[float, int]]  # (wall time, RSS of the whole tree in bytes)
    tree_cpu_s: float  # CPU seconds used by the child's tree
    busy_cpu_s: float  # CPU seconds the whole machine was busy over the same span
    wall_s: float

    def peak_rss(self, start: float, end: float, slack_s: float = 0.0) -> int | None:
        """Largest sampled tree RSS within ``[start, end]`` (wall times); for a span shorter
        than the sampling interval, within ``slack_s`` of it; None when nothing was sampled."""
        for widen in (0.0, slack_s):
            inside = [rss for t, rss in self.samples if start - widen <= t <= end + widen]
            if inside:
                return max(inside)
        return None

    @property
    def other_cores(self) -> float:
        """Average number of cores busy with work outside the child's tree."""
        if self.wall_s <= 0:
            return 0.0
        return max(0.0, (self.busy_cpu_s - self.tree_cpu_s) / self.wall_s)


def _busy_cpu_s() -> float:
    import psutil

    t = psutil.cpu_times()
    return (
        sum(t)
        - t.idle
        - getattr(t, "iowait", 0.0)
        - getattr(t, "guest", 0.0)
        - getattr(t, "guest_nice", 0.0)
    )


def _own_cpu_s() -> tuple[float, float]:
    """(CPU seconds of this process, CPU seconds of its reaped descendants)."""
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system, t.children_user + t.children_system


class TreeMonitor:
    """Samples the process tree rooted at ``pid`` on a background thread until :meth:`stop`."""

    def __init__(self, pid: int, interval_s: float = 0.05) -> None:
        import psutil

        self._root = psutil.Process(pid)
        self._interval_s = interval_s
        self._samples: list[tuple[float, int]] = []
        self._cpu_by_pid: dict[tuple[int, float], float] = {}
        self._stopping = threading.Event()
        self._started = time.time()
        self._busy_at_start = _busy_cpu_s()
        self._own_at_start = _own_cpu_s()
        self._thread = threading.Thread(target=self._loop, name="tree-monitor", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for proc in procs:
            try:
                with proc.oneshot():
                    total += proc.memory_info().rss
                    cpu = proc.cpu_times()
                    # Keyed by (pid, create time): a reused pid is another process.
                    self._cpu_by_pid[(proc.pid, proc.create_time())] = cpu.user + cpu.system
            except psutil.Error:
                continue  # it ended between the listing and the read
        if total:
            self._samples.append((time.time(), total))

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._sample()
            self._stopping.wait(self._interval_s)

    def stop(self) -> TreeUsage:
        """Stop sampling (call once the child has been waited for) and return what was seen."""
        self._stopping.set()
        self._thread.join()
        own, reaped = _own_cpu_s()
        # A process's last moments fall between two samples; once the child has been waited
        # for, its total (and its waited-for descendants') shows in our children times.
        tree = max(sum(self._cpu_by_pid.values()), reaped - self._own_at_start[1])
        return TreeUsage(
            samples=list(self._samples),
            # Our own CPU (the sampling itself) is not "other work" either.
            tree_cpu_s=tree + own - self._own_at_start[0],
            busy_cpu_s=_busy_cpu_s() - self._busy_at_start,
            wall_s=time.time() - self._started,
        )
