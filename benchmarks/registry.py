"""The benchmark registry: what each benchmark runs, how it is checked, and its targets.

Each benchmark family lives in its own module of this folder (``b1_first_row.py``, ...). A
family module defines ``BENCHMARKS`` (a list of :class:`Benchmark`) and a function
``run(benchmark, system, scale)`` that the child process calls. Family modules import only
the standard library at top level, so listing benchmarks costs nothing and a child measuring
start-up pays only for the system it measures.

To add a benchmark: write a module like the existing ones and add its name to
:data:`FAMILIES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# One family per line, in display order.
FAMILIES: tuple[str, ...] = (
    "b1_first_row",
    "b2_vectorized",
    "b3_row_udf",
    "b4_parquet_etl",
    "b5_images",
    "b6_exchanges",
    "b16_aggregations",
    "b9_batch_inference",
    "b10_iceberg",
    "b11_text_scans",
    "b12_iter_batches",
    "b15_ml_formats",
    "b17_media",
    "b18_gpu_inference",
    "b13_sql",
    "b14_delta",
    "b20_hudi",
)

# Every system a benchmark may run; a benchmark lists the ones it supports.
SHARDFLOW_LOCAL = "shardflow-local"
SHARDFLOW_LOCAL_1CPU = "shardflow-local-1cpu"
SHARDFLOW_RAY = "shardflow-ray"
RAY_DATA = "ray-data"
NUMPY_2THREADS = "numpy-2threads"
PYARROW_2THREADS = "pyarrow-2threads"
PILLOW_2THREADS = "pillow-2threads"
PANDAS = "pandas"
PYARROW = "pyarrow"  # a bare pyarrow process (B1's reference)
PYARROW_LOOP = "pyarrow-loop"  # a bare single-threaded pyarrow loop (iter_batches' reference)
POLARS = "polars"
DUCKDB = "duckdb"
DAFT = "daft"

# The single-machine engines shardflow is compared with on file and exchange workloads.
ENGINES: tuple[str, ...] = (POLARS, DUCKDB, DAFT)


class Unavailable(Exception):
    """Raised in a child when a system cannot run a benchmark: it lacks the operation, or its
    library is not installed. The run reports "not available" for that system and goes on."""


@dataclass(frozen=True)
class Target:
    """A goal comparing a system's median time (or peak memory) with a reference's.

    ``kind="faster"``: ``value[reference] / value[system] >= threshold`` (speedup).
    ``kind="within"``: ``value[system] / value[reference] <= threshold`` (slowdown bound).

    ``reference`` may be a tuple of systems: the best (smallest value) of those measured is the
    reference. ``metric`` is ``"time"`` (median seconds) or ``"rss"`` (median peak RSS).
    """

    label: str
    system: str
    reference: str | tuple[str, ...]
    threshold: float
    kind: str = "faster"
    metric: str = "time"

    def references(self) -> tuple[str, ...]:
        return (self.reference,) if isinstance(self.reference, str) else tuple(self.reference)

    def pick_reference(self, values: dict[str, float]) -> str | None:
        """The reference system to compare with: the best measured one, or None."""
        measured = [r for r in self.references() if r in values]
        return min(measured, key=lambda r: values[r]) if measured else None

    def ratio(self, values: dict[str, float]) -> float | None:
        reference = self.pick_reference(values)
        if self.system not in values or reference is None:
            return None
        mine, theirs = values[self.system], values[reference]
        if self.kind == "faster":
            return theirs / mine if mine > 0 else float("inf")
        return mine / theirs if theirs > 0 else float("inf")

    def passed(self, ratio: float) -> bool:
        return ratio >= self.threshold if self.kind == "faster" else ratio <= self.threshold

    def describe(self, ratio: float, values: dict[str, float] | None = None) -> str:
        reference = self.pick_reference(values or {}) or " / ".join(self.references())
        what = "the time" if self.metric == "time" else "the peak RSS"
        if self.kind == "faster":
            return (
                f"{self.system} is {ratio:.2f}x faster than {reference} "
                f"(need >= {self.threshold:g}x)"
            )
        return (
            f"{self.system} takes {ratio:.2f}x {what} of {reference} (need <= {self.threshold:g}x)"
        )


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: a pipeline run the same way on several systems.

    Attributes:
        name: Short id used on the command line (``B1``).
        title: One line saying what is measured.
        family: Module in this folder holding ``run``.
        systems: Systems it runs on, in display order.
        rows: Rows processed at a given scale (for throughput); None when not meaningful.
        from_spawn: Measure from the parent's spawn of the child to the child's result
            (start-up benchmarks) instead of the child's own timing of the pipeline.
        check: Given ``{system: result}`` and the scale, returns an error message when the
            results are wrong or disagree, else None.
        targets: Goals printed as PASS/MISS.
        prepare: Given the scale, creates the benchmark's input data when missing (in the
            parent, once, before any child is spawned, so no measurement pays for it).
        peers: Systems whose fastest median time is the table's "time / best peer" reference.
    """

    name: str
    title: str
    family: str
    systems: tuple[str, ...]
    rows: Callable[[float], int] | None = None
    from_spawn: bool = False
    check: Callable[[dict[str, Any], float], str | None] | None = None
    targets: tuple[Target, ...] = field(default_factory=tuple)
    prepare: Callable[[float], Any] | None = None
    peers: tuple[str, ...] = ()


def load_family(family: str) -> Any:
    """Import one family module by name (it must sit in this folder)."""
    return importlib.import_module(family)


def all_benchmarks() -> dict[str, Benchmark]:
    """Every registered benchmark by name, in family order."""
    found: dict[str, Benchmark] = {}
    for family in FAMILIES:
        for bench in load_family(family).BENCHMARKS:
            if bench.name in found:
                raise ValueError(f"benchmark {bench.name!r} is defined twice (in {family}).")
            found[bench.name] = bench
    return found


def select(names: Sequence[str] | None) -> list[Benchmark]:
    """The benchmarks named (all when ``names`` is empty), in registry order.

    A name also selects its sub-benchmarks: ``B11`` selects ``B11-CSV`` and ``B11-JSONL``
    """
    registry = all_benchmarks()
    wanted = [n.strip().upper() for n in names or () if n.strip()]
    if not wanted:
        return list(registry.values())

    def matches(name: str, asked: str) -> bool:
        return name == asked or name.startswith(asked + "-")

    unknown = [n for n in wanted if not any(matches(name, n) for name in registry)]
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; choose from {sorted(registry)}.")
    return [bench for name, bench in registry.items() if any(matches(name, n) for n in wanted)]
