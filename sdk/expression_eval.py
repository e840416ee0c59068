"""Evaluating expressions on data: one value per row of a ``pyarrow.Table``.

:class:`ArrowEvaluator` computes every kind of expression, those that run Python code
included: a ``udf`` is called with the argument columns of the table, a ``download`` reads
the file each URI names. The operators compute what Ray Data's do
(see :mod:`shardflow.sdk.expression_arrow`); ``+`` of strings joins them.

With ``dry_run=True`` nothing is called or read: a ``udf`` gives an empty array of its
declared type and a ``download`` an empty binary array, so evaluating on an empty table of a
schema tells the types of the results without running user code.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.expression_arrow import BINARY_KERNELS, pc
from shardflow.sdk.expressions import (
    AliasExpr,
    BinaryExpr,
    CastExpr,
    ColumnExpr,
    ColumnNotFoundError,
    DownloadExpr,
    Expr,
    ExprVisitor,
    LiteralExpr,
    MonotonicallyIncreasingIdExpr,
    Operation,
    RandomExpr,
    StructFieldExpr,
    UDFExpr,
    UnaryExpr,
    UUIDExpr,
)

DOWNLOAD_THREADS = 16


def _is_string_like(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, (pa.Array, pa.ChunkedArray, pa.Scalar)):
        t = value.type
        if pa.types.is_dictionary(t):
            t = t.value_type
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    return False


def _as_string_input(value: Any) -> Any:
    if isinstance(value, (pa.Array, pa.ChunkedArray)) and pa.types.is_dictionary(value.type):
        return pc().cast(value, pa.string())
    if not _is_string_like(value):
        shown = str(value.type) if hasattr(value, "type") else type(value).__name__
        raise TypeError(f"Expected strings on both sides of + to join them, got {shown}.")
    return value


def _add(a: Any, b: Any) -> Any:
    if _is_string_like(a) or _is_string_like(b):
        return pc().binary_join_element_wise(_as_string_input(a), _as_string_input(b), "")
    return pc().add(a, b)


class ArrowEvaluator(ExprVisitor[Any]):
    """Evaluates an expression on a table: arrays for columns, plain values for literals.

    Args:
        table: The data.
        dry_run: Call no user function and read no file (see the module docstring).
    """

    def __init__(self, table: pa.Table, dry_run: bool = False, position: RowPosition | None = None):
        self.table, self.dry_run = table, dry_run
        self.position = position or RowPosition()
        # Values of the struct operands of unnest(), which its fields share (by identity).
        self._struct_values: dict[int, Any] = {}

    def visit_column(self, expr: ColumnExpr) -> Any:
        if expr.name not in self.table.column_names:
            raise ColumnNotFoundError(
                f"The expression refers to unknown column {expr.name!r}; the data has columns "
                f"{self.table.column_names}."
            )
        return self.table.column(expr.name)

    def visit_literal(self, expr: LiteralExpr) -> Any:
        return expr.value

    def visit_binary(self, expr: BinaryExpr) -> Any:
        left, right = self.visit(expr.left), self.visit(expr.right)
        if expr.op is Operation.ADD:
            return _add(left, right)
        return BINARY_KERNELS[expr.op](left, right)

    def visit_not(self, expr: UnaryExpr) -> Any:
        return pc().invert(self.visit(expr.operand))

    def visit_is_null(self, expr: UnaryExpr) -> Any:
        return pc().is_null(self.visit(expr.operand))

    def visit_is_in(self, expr: BinaryExpr) -> Any:
        return pc().is_in(self.visit(expr.operand), value_set=pa.array(expr.values))

    def visit_struct_field(self, expr: StructFieldExpr) -> Any:
        key = id(expr.operand)
        if key not in self._struct_values:
            self._struct_values[key] = self.visit(expr.operand)
        return pc().struct_field(self._struct_values[key], [expr.index])

    def visit_random(self, expr: RandomExpr) -> Any:
        rows = 0 if self.dry_run else self.table.num_rows
        seed = None
        if expr.seed is not None:
            execution = self.position.executions.get(expr._instance_id, 0)
            if not expr.reseed_after_execution:
                execution = 0
            seed = [self.position.block_idx, self.position.task_idx, execution, expr.seed]
        return pa.array(np.random.default_rng(seed).random(rows), type=pa.float64())

    def visit_alias(self, expr: AliasExpr) -> Any:
        return self.visit(expr.operand)

    def visit_cast(self, expr: CastExpr) -> Any:
        value = self.visit(expr.operand)
        if not isinstance(value, (pa.Array, pa.ChunkedArray, pa.Scalar)):
            value = pa.scalar(value)
        return pc().cast(value, expr.arrow_type(), safe=expr.safe)

    def visit_udf(self, expr: UDFExpr) -> Any:
        if self.dry_run:
            return pa.array([], type=expr.return_dtype.to_arrow_dtype())
        args = [self.visit(a) for a in expr.args]
        kwargs = {k: self.visit(v) for k, v in expr.kwargs.items()}
        result = expr.fn(*args, **kwargs)
        return _as_arrow(result, getattr(expr.fn, "__name__", type(expr.fn).__name__))

    def visit_monotonically_increasing_id(self, expr: MonotonicallyIncreasingIdExpr) -> Any:
        rows = 0 if self.dry_run else self.table.num_rows
        first = (self.position.task_idx << ROW_BITS) + self.position.first_row
        return pa.array(np.arange(first, first + rows, dtype=np.int64))

    def visit_uuid(self, expr: UUIDExpr) -> Any:
        import uuid

        rows = 0 if self.dry_run else self.table.num_rows
        return pa.array([str(uuid.uuid4()) for _ in range(rows)], type=pa.string())

    def visit_download(self, expr: DownloadExpr) -> Any:
        if self.dry_run:
            return pa.array([], type=pa.binary())
        uris = self.visit(ColumnExpr(expr.uri_column_name)).to_pylist()
        return pa.array(download_files(uris, expr.filesystem), type=pa.binary())


def _as_arrow(result: Any, fn_name: str) -> Any:
    if isinstance(result, (pa.Array, pa.ChunkedArray)):
        return result
    if isinstance(result, np.ndarray):
        from shardflow.sdk.block import numpy_batch_to_block

        return numpy_batch_to_block({"v": result}).column(0)
    if type(result).__name__ == "Series" and hasattr(result, "to_numpy"):
        return pa.Array.from_pandas(result)
    raise TypeError(
        f"UDF '{fn_name}' returned invalid type {type(result).__name__}. Expected type "
        "(pandas.Series, numpy.ndarray, pyarrow.Array, pyarrow.ChunkedArray)"
    )


#: monotonically_increasing_id(): the bits of a row's number within its task, below the
#: task's index (Ray Data's layout).
ROW_BITS = 33


@dataclass(frozen=True)
class RowPosition:
    """Where a table's rows are: the index of the task evaluating it, the number, within
    that task, of its first row (for ``monotonically_increasing_id``) and of its block, and
    the number of the execution of each ``random()`` by its ``_instance_id`` (for
    ``random()``'s seeds)."""

    task_idx: int = 0
    first_row: int = 0
    block_idx: int = 0
    executions: Mapping[str, int] = field(default_factory=dict)


def random_executions(exprs: Any) -> dict[str, int]:
    """The number of the execution about to start for each ``random()`` among ``exprs``
    (by its ``_instance_id``), counting it: call once per execution, when it is planned."""
    found: dict[str, int] = {}
    for expr in exprs:
        for node in expr.walk():
            if isinstance(node, RandomExpr) and node._instance_id not in found:
                found[node._instance_id] = node.next_execution()
    return found


def evaluate(
    expr: Expr, table: pa.Table, dry_run: bool = False, position: RowPosition | None = None
) -> pa.ChunkedArray:
    """The values of ``expr`` for each row of ``table`` (a constant is repeated per row)."""
    value = ArrowEvaluator(table, dry_run, position).visit(expr)
    if isinstance(value, pa.ChunkedArray):
        result = value
    elif isinstance(value, pa.Array):
        result = pa.chunked_array([value], type=value.type)
    else:
        scalar = value if isinstance(value, pa.Scalar) else pa.scalar(value)
        result = pa.chunked_array([pa.repeat(scalar, table.num_rows)], type=scalar.type)
    if len(result) != table.num_rows:
        raise ValueError(
            f"{expr!r} gave {len(result)} values for {table.num_rows} rows; an expression must "
            "give one value per row."
        )
    return result


def download_files(uris: list[str | None], filesystem: Any = None) -> list[bytes | None]:
    """The bytes of each file (None for a null URI), read by a pool of threads.

    Raises:
        OSError: for a file that cannot be read, naming it and the reason.
    """
    from shardflow.sdk.filesystems import redact, redact_text, resolve_filesystem
    from shardflow.sdk.retry import RetryConfig, call_with_retry

    wanted = [u for u in uris if u is not None]
    if not wanted:
        return [None] * len(uris)
    fs, paths = resolve_filesystem([str(u) for u in wanted], filesystem)
    path_of = dict(zip(wanted, paths))
    retry = RetryConfig()

    def read(uri: str | None) -> bytes | None:
        if uri is None:
            return None
        try:
            return call_with_retry(
                lambda: fs.cat_file(path_of[uri]),
                description=f"download {redact(uri)}",
                config=retry,
            )
        except Exception as exc:
            raise OSError(
                redact_text(f"download: cannot read {uri}: {type(exc).__name__}: {exc}")
            ) from exc

    if len(uris) == 1:
        return [read(uris[0])]
    with ThreadPoolExecutor(max_workers=min(DOWNLOAD_THREADS, len(uris))) as pool:
        return list(pool.map(read, uris))
