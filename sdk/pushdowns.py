"""Pushdowns: what the engine asks a datasource to read, as one immutable value.

The optimizer pushes three things into a read: the columns to keep (and their output names),
a filter (an engine expression), and a limit on the rows of each read task. The base
:class:`~shardflow.sdk.datasource.Datasource` accumulates them into a :class:`Pushdowns` held
by a copy of the source, so a connector reads ``self.pushdowns`` instead of tracking three
attributes of its own.

Examples:
    >>> from shardflow.sdk.expressions import col
    >>> from shardflow.sdk.pushdowns import Pushdowns
    >>> p = Pushdowns().with_projection({"id": "id", "score": "s"}).with_filter(col("id") > 3)
    >>> p.columns, p.output_names, p.filter, p.limit
    (('id', 'score'), ('id', 's'), (col('id') > 3), None)
    >>> p.with_limit(10).with_limit(5).limit
    5
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from shardflow.sdk.expressions import Expr


def _check_projection(projection_map: Any) -> tuple[tuple[str, str], ...] | None:
    if projection_map is None:
        return None
    if not isinstance(projection_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in projection_map.items()
    ):
        raise TypeError(
            "A projection is a dict of {source column: output name} (both strings) or None; "
            f"got {projection_map!r}."
        )
    if len(set(projection_map.values())) != len(projection_map):
        raise ValueError(f"A projection gives two columns the same name: {projection_map!r}.")
    return tuple(projection_map.items())


def _check_limit(limit: Any) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"A row limit must be an int >= 0 or None, got {limit!r}.")
    return limit


@dataclass(frozen=True, eq=False)
class Pushdowns:
    """Columns, filter and row limit pushed into a read. Immutable; ``with_*`` return copies.

    Args:
        projection: ``(source column, output name)`` pairs in output order; None reads every
            column under its own name.
        filter: An engine expression every row read must satisfy (when the source declares
            exact pushdown) or may be pruned by (otherwise); None for no filter.
        limit: The most rows each read task needs to produce; None for no limit.
    """

    projection: tuple[tuple[str, str], ...] | None = None
    filter: Expr | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.projection is not None:
            object.__setattr__(self, "projection", _check_projection(dict(self.projection)))
        if self.filter is not None and not isinstance(self.filter, Expr):
            raise TypeError(
                f"A pushed filter must be an engine expression, got {type(self.filter).__name__}."
            )
        object.__setattr__(self, "limit", _check_limit(self.limit))

    # -- reading the value ------------------------------------------------------------------

    @property
    def columns(self) -> tuple[str, ...] | None:
        """Source columns to read, in output order; None for all."""
        return None if self.projection is None else tuple(src for src, _ in self.projection)

    @property
    def output_names(self) -> tuple[str, ...] | None:
        """Names of the columns in the output, parallel to :attr:`columns`."""
        return None if self.projection is None else tuple(out for _, out in self.projection)

    def projection_map(self) -> dict[str, str] | None:
        """The projection as ``{source column: output name}``, or None for all columns."""
        return None if self.projection is None else dict(self.projection)

    def filter_columns(self) -> set[str]:
        """Source columns the filter reads."""
        return set() if self.filter is None else self.filter.referenced_columns()

    def is_empty(self) -> bool:
        """True when nothing was pushed."""
        return self.projection is None and self.filter is None and self.limit is None

    # -- new values -------------------------------------------------------------------------

    def with_projection(self, projection_map: dict[str, str] | None) -> Pushdowns:
        """Replace the projection (the optimizer passes one already composed with the current)."""
        return replace(self, projection=_check_projection(projection_map))

    def with_filter(self, expr: Expr) -> Pushdowns:
        """AND ``expr`` with the current filter."""
        if not isinstance(expr, Expr):
            raise TypeError(
                f"A pushed filter must be an engine expression, got {type(expr).__name__}."
            )
        return replace(self, filter=expr if self.filter is None else (self.filter & expr))

    def with_limit(self, limit: int | None) -> Pushdowns:
        """Cap the rows per read task; the smaller of two limits wins."""
        limit = _check_limit(limit)
        if limit is None:
            return self
        return replace(self, limit=limit if self.limit is None else min(self.limit, limit))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pushdowns):
            return NotImplemented
        return (self.projection, repr(self.filter), self.limit) == (
            other.projection,
            repr(other.filter),
            other.limit,
        )

    def __hash__(self) -> int:
        return hash((self.projection, repr(self.filter), self.limit))


NO_PUSHDOWNS = Pushdowns()
