"""Seeded, bounded differential fuzzing for tests/connectors/test_fuzz_*.py.

Each suite draws its cases from ``random.Random`` seeded with the suite's name and the case's
seed, so a case is the same on every machine and every run. The number of cases comes from
the environment (``SHARDFLOW_FUZZ_CASES``, per suite; the suite's own default otherwise, a few
thousand that run in seconds) and the first seed from ``SHARDFLOW_FUZZ_SEED`` (default 0). A
failing case names its seed and input; ``SHARDFLOW_FUZZ_SEED=<seed> SHARDFLOW_FUZZ_CASES=1``
runs it alone. A long run: ``SHARDFLOW_FUZZ_CASES=200000 pytest tests/connectors -k fuzz``.

The larger suites run in two parts (:data:`PARTS`): the first quarter of the seeds in the
default suite (``make test``), the other three quarters marked slow (``make test-slow``,
which CI runs too); together they are the whole suite, each seed once.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

CASES_ENV = "SHARDFLOW_FUZZ_CASES"
SEED_ENV = "SHARDFLOW_FUZZ_SEED"

#: The share of a suite's seeds (1 / QUICK_SHARE, the first ones) in its quick part.
QUICK_SHARE = 4

#: ``@pytest.mark.parametrize("part", PARTS)``: a suite's quick part, and the rest as a slow
#: test. ``"all"``, the default of :func:`run_cases`, is both.
PARTS = [
    pytest.param("quick", id="quick"),
    pytest.param("rest", id="rest", marks=pytest.mark.slow),
]


def case_count(default: int) -> int:
    """Cases a suite runs: ``SHARDFLOW_FUZZ_CASES`` or ``default``."""
    value = os.environ.get(CASES_ENV)
    if value is None:
        return default
    count = int(value)
    if count < 1:
        raise ValueError(f"{CASES_ENV} must be a positive number of cases, got {value!r}.")
    return count


def time_limit(default_cases: int, seconds_per_case: float) -> int:
    """A hard timeout (pytest-timeout) for a suite of ``case_count(default_cases)`` cases:
    it stops a hang, never a long run."""
    return max(300, int(case_count(default_cases) * seconds_per_case))


def run_cases(
    suite: str,
    default_cases: int,
    generate: Callable[[random.Random], Any],
    check: Callable[[Any, random.Random], None],
    describe: Callable[[Any], str] = repr,
    part: str = "all",
) -> int:
    """Generate and check ``case_count(default_cases)`` cases, or ``part`` of them (see
    :data:`PARTS`); the first failure raises an AssertionError naming the suite, the seed and
    the input. Returns the number of cases checked."""
    total = case_count(default_cases)
    quick = -(-total // QUICK_SHARE)  # at least one: a single seed runs in the quick part
    start, stop = {"all": (0, total), "quick": (0, quick), "rest": (quick, total)}[part]
    first = int(os.environ.get(SEED_ENV, "0")) + start
    count = stop - start
    started, cpu = time.perf_counter(), time.process_time()
    for seed in range(first, first + count):
        rng = random.Random(f"{suite}:{seed}")
        case = generate(rng)
        try:
            check(case, rng)
        except Exception as exc:
            raise AssertionError(
                f"{suite}: the case of seed {seed} failed ({type(exc).__name__}: {exc}).\n"
                f"Run it alone: {SEED_ENV}={seed} {CASES_ENV}=1\n"
                f"Input: {describe(case)[:4000]}"
            ) from exc
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    sys.stdout.write(f"\n{suite}: {count} cases (seeds {first}..{first + count - 1}) ")
    sys.stdout.write(f"in {elapsed:.1f} s ({cpu:.1f} s of CPU)\n")
    return count
