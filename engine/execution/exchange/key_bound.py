"""The k-th key a top-k has seen so far, shared with its read so that row groups whose
statistics put every row past it are not read.

``read_parquet(...).sort("x").take(10)``: once the runs of the top-k together hold 10 rows
whose largest ``x`` is 3.5, no row with ``x > 3.5`` can be among the first 10 (every row a
run keeps reaches the final merge, and a stable sort puts those 10 first), so a row group
whose minimum of ``x`` is above 3.5 need not be decoded. The optimizer's late
materialization (see ``engine/plan/late_columns.py``) creates one :class:`KeyBound` per plan,
hands it to the top-k's runs (which :meth:`offer` the first keys of the rows they keep) and
to the read (which asks :meth:`excludes` before each row group). Runs and reads in one
process (the local backend's threads) share it; a copy pickled into another process starts
from the keys it held and only bounds that process's own reads.

Only the first sort column bounds, strictly (a row equal to the bound may still be among the
first k through the other columns or input order); keys that are null or NaN never bound.
"""

from __future__ import annotations

import math
import threading
from typing import Any


class KeyBound:
    """The k-th least (ascending) or greatest (descending) first-column key among the rows
    the top-k's runs kept so far."""

    def __init__(self, descending: bool, k: int):
        self.descending, self.k = descending, k
        self._best: list = []  # the k best keys offered, best first
        self._lock = threading.Lock()

    @property
    def value(self) -> Any:
        """The bound, or None before k keys were offered."""
        best = self._best
        return best[-1] if self.k and len(best) >= self.k else None

    def offer(self, keys: list) -> None:
        """Tighten the bound with the first keys of rows a run keeps (all of them reach the
        top-k's merge)."""
        keys = [v for v in keys if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if not keys or not self.k:
            return
        with self._lock:
            merged = sorted([*self._best, *keys], reverse=self.descending)
            self._best = merged[: self.k]

    def excludes(self, low: Any, high: Any) -> bool:
        """Whether rows whose first key lies in ``[low, high]`` (none null or NaN) all come
        after the k first rows."""
        held = self.value
        if held is None:
            return False
        return high < held if self.descending else low > held

    def __getstate__(self) -> dict:
        return {"descending": self.descending, "k": self.k, "best": list(self._best)}

    def __setstate__(self, state: dict) -> None:
        self.descending, self.k, self._best = state["descending"], state["k"], state["best"]
        self._lock = threading.Lock()
