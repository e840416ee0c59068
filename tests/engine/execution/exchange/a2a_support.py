"""Helpers shared by the all-to-all tests (tests/engine/test_a2a_*.py): building multi-block
datasets, independent oracles written in plain Python, and row comparison that tells NaN
from null.

The oracles here do not use shardflow or pyarrow.compute, so a bug in the engine's Arrow
calls cannot hide in the expected value.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import shardflow as sf

# The backend fixture is set up once per test, not per example, which is what we want.
# SHARDFLOW_A2A_EXAMPLES raises the number of examples for a longer bug hunt.
PROPERTY_SETTINGS = settings(
    max_examples=int(os.environ.get("SHARDFLOW_A2A_EXAMPLES", "20")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def dataset_of(table: pa.Table, cuts: Sequence[int]) -> Any:
    """``table`` as a dataset of several blocks, cut at the given row positions."""
    n = table.num_rows
    bounds = sorted({0, n, *(min(max(c, 0), n) for c in cuts)})
    blocks = [table.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)]
    return sf.from_arrow(blocks or [table])


def block_cuts(max_rows: int = 60) -> Any:
    """A strategy for block cut positions (see ``dataset_of``)."""
    return st.lists(st.integers(min_value=0, max_value=max_rows), max_size=5)


def blocks_of(ds: Any) -> list[pa.Table]:
    """The output blocks of ``ds`` in order, as tables, on either backend."""
    out = []
    for ref in ds.to_arrow_refs():
        if not isinstance(ref, pa.Table):
            import ray

            ref = ray.get(ref)
        out.append(ref)
    return out


# -- values: NaN is not null -----------------------------------------------------------


def is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def rank(value: Any) -> int:
    """0 for an ordinary value, 1 for NaN, 2 for null: the order a sort gives them."""
    if value is None:
        return 2
    return 1 if is_nan(value) else 0


def canonical(value: Any) -> Any:
    """A hashable, comparable stand-in for a value (NaN and None kept apart)."""
    if value is None:
        return ("~null",)
    if is_nan(value):
        return ("~nan",)
    if isinstance(value, float) and abs(value) < 2**53 and value == int(value):
        return int(value)  # 3.0 and 3 are the same value to the oracles
    return value


def row_key(row: dict[str, Any]) -> tuple:
    return tuple(sorted((k, repr(canonical(v))) for k, v in row.items()))


def same_rows(got: Iterable[dict[str, Any]], expected: Iterable[dict[str, Any]]) -> bool:
    """Whether two lists of rows are equal as multisets (order ignored)."""
    return sorted(map(row_key, got)) == sorted(map(row_key, expected))


def values_close(a: Any, b: Any, rel: float = 1e-9, abs_tol: float = 1e-9) -> bool:
    """Equality of results: None only equals None, NaN only NaN, floats within tolerance."""
    if a is None or b is None:
        return a is None and b is None
    if is_nan(a) or is_nan(b):
        return is_nan(a) and is_nan(b)
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)
    return a == b


def rows_close(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """Row lists equal in order, column names and (within tolerance) values."""
    if len(got) != len(expected):
        return False
    for g, e in zip(got, expected):
        if list(g) != list(e) or not all(values_close(g[k], e[k]) for k in e):
            return False
    return True


# -- the sort oracle --------------------------------------------------------------------


def oracle_sort(
    rows: list[dict[str, Any]], keys: Sequence[str], descending: Sequence[bool]
) -> list[dict[str, Any]]:
    """Rows ordered by ``keys`` (each ascending or descending), NaN after every number and
    nulls after everything whatever the direction: stable sorts from the last key to the
    first."""
    out = list(rows)
    for key, desc in reversed(list(zip(keys, descending))):
        plain = [r for r in out if rank(r[key]) == 0]
        nans = [r for r in out if rank(r[key]) == 1]
        nulls = [r for r in out if rank(r[key]) == 2]
        plain.sort(key=lambda r: r[key], reverse=desc)  # Python's sort stays stable reversed
        out = plain + nans + nulls
    return out


def group_rows(
    rows: list[dict[str, Any]], keys: Sequence[str]
) -> dict[tuple, list[dict[str, Any]]]:
    """Rows by key tuple (canonical values, so NaN groups with NaN and null with null)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(canonical(row[k]) for k in keys), []).append(row)
    return groups
