"""Split a query into shards by a hash of its shard keys, one WHERE clause per read task.

Every row falls in exactly one shard, rows whose keys are NULL included (Ray Data's
``MOD(ABS(hash(keys)), n)`` drops them: the hash of NULL is NULL).
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from shardflow.connectors.sql.dbapi import POSTGRES, SQLITE

DEFAULT_HASH_FN = "MD5"
# The SQL function registered on SQLite connections (SQLite has no hash function).
SQLITE_HASH_FUNCTION = "shardflow_shard_hash"
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.]*$|^\"[^\"]+\"(\.\"[^\"]+\")*$")


def check_shard_keys(shard_keys: Any) -> list[str] | None:
    if shard_keys is None:
        return None
    if isinstance(shard_keys, str) or not isinstance(shard_keys, (list, tuple)) or not shard_keys:
        raise TypeError(f"shard_keys must be a non-empty list of column names, got {shard_keys!r}.")
    for key in shard_keys:
        if not isinstance(key, str) or not _IDENTIFIER_RE.match(key):
            raise ValueError(
                f"shard key {key!r} is not a column name; give the names of columns of the "
                "query's result (plain or double-quoted identifiers)."
            )
    return list(shard_keys)


def check_hash_fn(shard_hash_fn: Any) -> str:
    if not isinstance(shard_hash_fn, str) or not re.match(
        r"^[A-Za-z_][A-Za-z0-9_.]*$", shard_hash_fn
    ):
        raise ValueError(
            f"shard_hash_fn must be the name of a SQL function such as 'MD5' or 'hashtext', "
            f"got {shard_hash_fn!r}."
        )
    return shard_hash_fn


def _sqlite_hash(*values: Any) -> int:
    return zlib.crc32(repr(values).encode("utf-8", "surrogatepass"))


def prepare_connection(connection: Any, dialect: str) -> None:
    """Register what the shard predicate needs on this connection (SQLite's hash)."""
    if dialect == SQLITE:
        connection.create_function(SQLITE_HASH_FUNCTION, -1, _sqlite_hash, deterministic=True)


def shard_predicate(
    keys: list[str], hash_fn: str, dialect: str, shard: int, num_shards: int
) -> str:
    """The WHERE condition that keeps shard ``shard`` of ``num_shards``."""
    joined = ", ".join(keys)
    if hash_fn == DEFAULT_HASH_FN and dialect == POSTGRES:
        # md5() gives text in PostgreSQL: hash the row of keys to a bigint instead. mod()
        # rather than %, which psycopg reads as a placeholder when parameters are given.
        return f"abs(mod(hashtextextended(ROW({joined})::text, 0), {num_shards})) = {shard}"
    if hash_fn == DEFAULT_HASH_FN and dialect == SQLITE:
        return f"{SQLITE_HASH_FUNCTION}({joined}) % {num_shards} = {shard}"
    keys_sql = keys[0] if len(keys) == 1 else f"CONCAT({joined})"
    return f"COALESCE(MOD(ABS({hash_fn}({keys_sql})), {num_shards}), 0) = {shard}"


def sharded_query(sql: str, predicate: str) -> str:
    return f"SELECT * FROM ({strip_semicolon(sql)}) AS shardflow_shard WHERE {predicate}"


def count_query(sql: str) -> str:
    return f"SELECT COUNT(*) FROM ({strip_semicolon(sql)}) AS shardflow_count"


def strip_semicolon(sql: str) -> str:
    return sql.strip().rstrip(";").rstrip()
