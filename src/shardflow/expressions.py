"""Expressions, as Ray Data's ``ray.data.expressions``: ``from shardflow.expressions import col``.

Examples:
    >>> import shardflow as sf
    >>> from shardflow.expressions import col, lit
    >>> sf.range(4).filter(expr=(col("id") % 2 == 0) & (col("id") > lit(0))).take_all()
    [{'id': 2}]
"""

from __future__ import annotations

from shardflow.sdk.expressions import (
    AliasExpr,
    BinaryExpr,
    CastExpr,
    ColumnExpr,
    DownloadExpr,
    Expr,
    ExprVisitor,
    IsInExpr,
    IsNullExpr,
    LiteralExpr,
    MonotonicallyIncreasingIdExpr,
    NotExpr,
    Operation,
    RandomExpr,
    StarExpr,
    UDFExpr,
    UnaryExpr,
    UnnestExpr,
    UUIDExpr,
    col,
    download,
    lit,
    monotonically_increasing_id,
    pyarrow_udf,
    random,
    star,
    udf,
    unnest,
    uuid,
)

__all__ = [
    "AliasExpr",
    "BinaryExpr",
    "CastExpr",
    "ColumnExpr",
    "DownloadExpr",
    "Expr",
    "ExprVisitor",
    "IsInExpr",
    "IsNullExpr",
    "LiteralExpr",
    "MonotonicallyIncreasingIdExpr",
    "NotExpr",
    "Operation",
    "RandomExpr",
    "StarExpr",
    "UDFExpr",
    "UUIDExpr",
    "UnaryExpr",
    "UnnestExpr",
    "col",
    "download",
    "lit",
    "monotonically_increasing_id",
    "pyarrow_udf",
    "random",
    "star",
    "udf",
    "unnest",
    "uuid",
]
