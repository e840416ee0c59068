"""The differential harness: run one small case on ``ray.data`` and on ``shardflow``, compare.

A case is a function ``case(m, tmp)`` taking the module under test (``ray.data`` or
``shardflow``) and a fresh folder of its own, and returning a value built from plain data:
rows, dtypes, schemas, file listings, or what it raised. The harness runs it on both
modules, turns each result into comparable data (:func:`normalize`), and asserts that they
are equal. Register cases with :func:`case`, naming the public API they cover; the
compatibility table in docs/compatibility.md is generated from these registrations and from
:data:`DIFFERENCES` (see ``tests/compat/gen_compat_table.py``).

Exceptions compare by kind: the first class in the raised exception's MRO defined outside
Ray and shardflow (Ray wraps worker errors in ``RayTaskError(X)`` and shardflow in
``UserCodeError[X]``; both are instances of ``X``).
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa


@dataclass
class Case:
    """One differential case.

    Args:
        fn: ``fn(m, tmp)``; its result is normalized and compared.
        covers: Public names the case exercises, e.g. ``"read_parquet"`` or
            ``"Dataset.write_parquet"``.
        note: What the case checks, for the generated table.
    """

    fn: Callable[[Any, Path], Any]
    covers: tuple[str, ...]
    note: str = ""
    requires: tuple[str, ...] = ()
    slow: bool = False

    @property
    def name(self) -> str:
        return self.fn.__name__


CASES: list[Case] = []


def use_sort_shuffles(context: Any) -> None:
    """Make Ray Data's groupbys, sorts and joins use its sort-based shuffle.

    Ray Data's default hash shuffle starts aggregator actors for 200 partitions per
    operation, ~4 s each even on a dozen rows; the sort-based shuffle returns the same rows,
    types and errors in a tenth of the time. What the cases compare does not depend on how
    Ray Data moves rows between its tasks.
    """
    import ray.data.context

    strategy = getattr(ray.data.context, "ShuffleStrategy", None)
    if strategy is not None and hasattr(strategy, "SORT_SHUFFLE_PULL_BASED"):
        context.shuffle_strategy = strategy.SORT_SHUFFLE_PULL_BASED


def case(
    *covers: str, note: str = "", requires: tuple[str, ...] = (), slow: bool = False
) -> Callable:
    """Register ``fn`` as a differential case covering the public names ``covers``.

    ``requires`` names optional libraries the case needs; it is skipped without them.
    ``slow`` marks a case that takes Ray Data several seconds (``pytest -m "not slow"``
    leaves it out).
    """

    def register(fn: Callable) -> Callable:
        doc = note or (fn.__doc__ or "").strip().split("\n")[0]
        CASES.append(Case(fn, tuple(covers), doc, tuple(requires), slow))
        return fn

    return register


# Tests outside the @case registry that compare with Ray Data (test_a2a_vs_ray.py):
# public name -> test names, for the generated table.
COVERED_BY_TESTS: dict[str, list[str]] = {}


def covers(*names: str) -> Callable[[Callable], Callable]:
    """Mark a pytest test as comparing ``names`` with Ray Data (for the generated table)."""

    def register(fn: Callable) -> Callable:
        for name in names:
            COVERED_BY_TESTS.setdefault(name, []).append(fn.__name__)
        return fn

    return register


# Deliberate differences: public name -> why shardflow differs. Each has a test in
# tests/compat/test_documented_differences.py that shows both behaviours.
DIFFERENCES: dict[str, str] = {}


def differs(*names: str, reason: str) -> Callable[[Callable], Callable]:
    """Mark a test as showing a deliberate difference of ``names`` (for the generated table)."""

    def register(fn: Callable) -> Callable:
        for name in names:  # a name may differ in several ways: each reason is kept
            earlier = DIFFERENCES.get(name)
            DIFFERENCES[name] = reason if earlier in (None, reason) else f"{earlier} {reason}"
        return fn

    return register


@dataclass(frozen=True)
class Raised:
    """A case raised an exception of ``kind`` (see the module docstring)."""

    kind: str


@dataclass
class Outcome:
    value: Any = None
    raised: Any = None
    detail: str = field(default="", compare=False)


def submodule(m: Any, name: str) -> Any:
    """``ray.data.<name>`` or ``shardflow.<name>`` (``expressions``, ``datatype``,
    ``exceptions``, ``aggregate``): the module of that name beside ``m``."""
    import importlib

    return importlib.import_module(f"{m.__name__}.{name}")


def raised_at_run(m: Any, fn: Callable[[], Any]) -> Any:
    """What ``fn`` (which runs a dataset) raised: ``"UserCodeException"`` when the error
    came from the data or user code (Ray Data wraps it in its UserCodeException, which
    shardflow's errors also are), else its kind; ``"no error"`` when nothing was raised."""
    try:
        fn()
    except Exception as exc:
        if isinstance(exc, submodule(m, "exceptions").UserCodeException):
            return "UserCodeException"
        return Raised(exception_kind(exc))
    return "no error"


def exception_kind(exc: BaseException) -> str:
    """The user-visible type of ``exc``: the first MRO class defined outside Ray/shardflow."""
    for cls in type(exc).__mro__:
        module = cls.__module__ or ""
        if not module.startswith(("ray", "shardflow")):
            return f"{module}.{cls.__qualname__}" if module != "builtins" else cls.__qualname__
    return type(exc).__qualname__


def run(fn: Callable[[Any, Path], Any], module: Any, tmp: Path) -> Outcome:
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        value = fn(module, tmp)
    except Exception as exc:
        return Outcome(raised=Raised(exception_kind(exc)), detail=f"{type(exc).__name__}: {exc}")
    return Outcome(value=normalize(value, str(tmp)))


def normalize(value: Any, tmp: str = "") -> Any:
    """``value`` as plain, comparable data; paths under ``tmp`` become ``<tmp>/...``."""
    if isinstance(value, Raised):
        return value
    if isinstance(value, str):
        return value.replace(tmp, "<tmp>") if tmp else value
    if value is None or isinstance(value, (bool, int, float, bytes, decimal.Decimal)):
        return value
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.shape, normalize(value.tolist(), tmp))
    if isinstance(value, pa.Schema) or _is_ray_schema(value):
        return ("schema", [(n, str(t)) for n, t in zip(value.names, value.types)])
    if isinstance(value, pa.DataType):
        return str(value)
    if isinstance(value, pa.Table):
        return ("table", normalize(value.to_pylist(), tmp), [str(t) for t in value.schema.types])
    if _is_dataframe(value):
        return (
            "frame",
            [str(c) for c in value.columns],
            [str(t) for t in value.dtypes],
            normalize(value.to_dict("records"), tmp),
        )
    if isinstance(value, dict):
        return {normalize(k, tmp): normalize(v, tmp) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize(v, tmp) for v in value]
    if isinstance(value, type):
        return value.__module__ + "." + value.__qualname__
    if isinstance(value, np.dtype) or type(value).__module__.startswith("pandas"):
        return str(value)
    return repr(value)


def _is_ray_schema(value: Any) -> bool:
    return type(value).__name__ == "Schema" and hasattr(value, "base_schema")


def _is_dataframe(value: Any) -> bool:
    return type(value).__name__ == "DataFrame" and hasattr(value, "dtypes")


def compare(case_: Case, ray_module: Any, sf_module: Any, tmp: Path) -> None:
    """Run ``case_`` on both modules and assert the normalized results are equal."""
    expected = run(case_.fn, ray_module, tmp / "ray")
    got = run(case_.fn, sf_module, tmp / "sf")
    assert (got.value, got.raised) == (expected.value, expected.raised), (
        f"{case_.name}: shardflow differs from ray.data\n"
        f"  ray.data:  {expected.raised or expected.value!r} {expected.detail}\n"
        f"  shardflow: {got.raised or got.value!r} {got.detail}"
    )
