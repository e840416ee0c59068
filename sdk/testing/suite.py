"""Base classes a connector's test module subclasses to run the conformance checks.

Like fsspec's abstract test classes: the base class holds the tests, the subclass says how
to build the connector over a known dataset. pytest collects the subclass (name it
``Test...``) and runs one test per check; a check that does not apply is skipped with the
reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.sdk.datasink import Datasink
from shardflow.sdk.datasource import Datasource
from shardflow.sdk.expressions import Expr
from shardflow.sdk.testing import read_checks, write_checks  # noqa: F401  (registers the checks)
from shardflow.sdk.testing.checks import CHECKS, READ, WRITE, Check, SkipCheck


def _pytest_method(chk: Check) -> Callable[[Any, Path], None]:
    def test(self: Any, tmp_path: Path) -> None:
        try:
            chk.fn(self, tmp_path)
        except SkipCheck as exc:
            import pytest

            pytest.skip(str(exc))

    test.__name__ = f"test_{chk.name}"
    test.__qualname__ = test.__name__
    test.__doc__ = chk.doc
    return test


def _with_checks(kind: str) -> Callable[[type], type]:
    def decorate(cls: Any) -> Any:
        for chk in CHECKS:
            if chk.kind == kind:
                setattr(cls, f"test_{chk.name}", _pytest_method(chk))
        cls.conformance_kinds = tuple(getattr(cls, "conformance_kinds", ())) + (kind,)
        return cls

    return decorate


@_with_checks(READ)
class DatasourceConformance:
    """Conformance tests for a Datasource. Subclass it in a test module and fill in the hooks.

    Every hook takes ``tmp_path``, an empty folder for this test, where the hook may write
    sample files. Required: :meth:`make_datasource` and :meth:`expected_table`. Optional
    hooks return None by default, which skips the checks that need them.

    Class attributes tune the checks: ``parallelisms`` (the task counts asked for),
    ``check_types`` (compare column types, not only values), ``size_bytes_factor`` and
    ``size_bytes_slack`` (how far ``size_bytes`` may be from the in-memory size), and
    ``check_in_subprocess`` (run pickled tasks in a fresh Python process).

    Examples:
        >>> import pyarrow as pa
        >>> from shardflow.connectors.range import RangeDatasource
        >>> from shardflow.sdk.testing import DatasourceConformance, run_conformance
        >>> class TestRange(DatasourceConformance):
        ...     check_in_subprocess = False
        ...     def make_datasource(self, tmp_path):
        ...         return RangeDatasource(20)
        ...     def expected_table(self):
        ...         return pa.table({"id": pa.array(range(20), pa.int64())})
        >>> run_conformance(TestRange, checks=["read_matches_expected"]).ok
        True
    """

    parallelisms: Sequence[int] = (1, 2, 3, 7, 64)
    check_types: bool = True
    size_bytes_factor: float = 20.0
    size_bytes_slack: int = 64 * 1024
    check_in_subprocess: bool = True

    def make_datasource(self, tmp_path: Path) -> Datasource:
        """A source over the dataset :meth:`expected_table` describes (write sample files here)."""
        raise NotImplementedError(
            f"{type(self).__name__} must define make_datasource(self, tmp_path)."
        )

    def expected_table(self) -> pa.Table:
        """The rows and columns the source must produce, in any row order."""
        raise NotImplementedError(f"{type(self).__name__} must define expected_table(self).")

    def make_empty_datasource(self, tmp_path: Path) -> Datasource | None:
        """A source over empty input (an empty folder, an empty table), or None to skip."""
        return None

    def make_bad_datasource(self, tmp_path: Path) -> Datasource | None:
        """A source whose construction, planning or reading must fail (a corrupt file, a
        missing path), or None to skip. The error must name the source: see
        :meth:`bad_source_mentions`."""
        return None

    def bad_source_mentions(self, tmp_path: Path) -> list[str]:
        """Strings of which the error for bad input must contain one.

        By default the names of the files :meth:`make_bad_datasource` wrote under ``tmp_path``;
        an empty list accepts any error.
        """
        return [p.name for p in tmp_path.rglob("*") if p.is_file()]

    def predicates(self) -> list[Expr]:
        """Expressions to push into a source that supports predicate pushdown (and to run
        through shardflow's filter). By default one over the first numeric column
        (``>= median``) and one over the first string column (``== first value``)."""
        return read_checks.default_predicates(self.expected_table())


@_with_checks(WRITE)
class DatasinkConformance:
    """Conformance tests for a Datasink. Subclass it and define the three hooks.

    ``make_datasink(tmp_path)`` returns a sink writing under ``tmp_path``; ``read_back(tmp_path)``
    returns what is visible there now (it may raise when nothing was written); and
    ``expected_table()`` is the data the checks write.
    """

    check_types: bool = True

    def make_datasink(self, tmp_path: Path) -> Datasink[Any] | None:
        """A sink that writes under ``tmp_path``; called again for each write of a check."""
        raise NotImplementedError(
            f"{type(self).__name__} must define make_datasink(self, tmp_path)."
        )

    def read_back(self, tmp_path: Path) -> pa.Table:
        """Everything committed under ``tmp_path``, read independently of the sink's state."""
        raise NotImplementedError(f"{type(self).__name__} must define read_back(self, tmp_path).")

    def expected_table(self) -> pa.Table:
        """The data the write checks write and expect to read back."""
        raise NotImplementedError(f"{type(self).__name__} must define expected_table(self).")


class ConnectorConformance(DatasourceConformance, DatasinkConformance):
    """Both sets of checks, for a connector that reads and writes."""

    conformance_kinds = (READ, WRITE)


def checks_for(suite: Any) -> list[Check]:
    """The checks that apply to a suite class or instance, in order."""
    kinds = getattr(suite, "conformance_kinds", ())
    return [chk for chk in CHECKS if chk.kind in kinds]


def describe_checks() -> dict[str, list[str]]:
    """Each kind's check names with their one-line descriptions."""
    out: dict[str, list[str]] = {READ: [], WRITE: []}
    for chk in CHECKS:
        out[chk.kind].append(f"{chk.name}: {chk.doc}")
    return out
