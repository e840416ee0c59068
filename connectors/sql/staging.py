"""A staging table for an all-or-nothing ``write_sql``.

Write tasks insert into a staging table (created empty, with the target's columns, when the
write starts) and commit there; the driver then moves every staged row into the target in
one transaction (``INSERT INTO target SELECT ... FROM staging``) and drops the staging table.
Readers of the target see all of the write or none of it; a failed write drops the staging
table and leaves the target as it was.

This needs a plain ``INSERT INTO table [(columns)] VALUES (...)`` statement, whose table
can be rewritten; other statements (``ON CONFLICT``, ``RETURNING``, ``INSERT ... SELECT``,
``UPDATE``) run in one transaction per write task instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = r'(?:"(?:[^"]|"")+"|`[^`]+`|\[[^\]]+\]|[A-Za-z_][A-Za-z0-9_$]*)'
_INSERT_RE = re.compile(
    rf"^\s*INSERT\s+INTO\s+(?P<table>{_IDENT}(?:\s*\.\s*{_IDENT}){{0,2}})\s*"
    rf"(?P<columns>\((?:\s*{_IDENT}\s*,)*\s*{_IDENT}\s*\))?\s*"
    r"(?P<values>VALUES\s*\(.*\))\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
# Clauses after VALUES (...) that need the target's constraints or return rows.
_TRAILING_CLAUSE_RE = re.compile(r"\)\s*(ON\s+CONFLICT|ON\s+DUPLICATE|RETURNING)\b", re.I)


@dataclass(frozen=True)
class InsertStatement:
    """A parsed ``INSERT INTO table [(columns)] VALUES (...)``."""

    table: str  # as written, schema-qualified and quoted as the user wrote it
    columns: str | None  # "(a, b)" as written, or None for all columns
    values: str  # "VALUES (?, ?)"

    def into(self, table: str) -> str:
        """The same statement inserting into ``table``."""
        columns = f" {self.columns}" if self.columns else ""
        return f"INSERT INTO {table}{columns} {self.values}"

    def staging_name(self, write_id: str) -> str:
        """A staging table next to the target (same schema), named after the write."""
        schema, _, _ = self.table.rpartition(".")
        name = f"shardflow_staging_{write_id}"
        return f"{schema.strip()}.{name}" if schema else name

    def select_list(self) -> str:
        return self.columns[1:-1].strip() if self.columns else "*"

    def create_staging(self, staging: str) -> str:
        return (
            f"CREATE TABLE {staging} AS SELECT {self.select_list()} FROM {self.table} WHERE 1 = 0"
        )

    def move_rows(self, staging: str) -> str:
        columns = f" {self.columns}" if self.columns else ""
        return f"INSERT INTO {self.table}{columns} SELECT {self.select_list()} FROM {staging}"


def parse_insert(sql: str) -> InsertStatement | None:
    """The parts of a plain INSERT ... VALUES statement, or None for any other statement."""
    match = _INSERT_RE.match(sql)
    if match is None or _TRAILING_CLAUSE_RE.search(match.group("values")):
        return None
    values = match.group("values").strip().rstrip(";").rstrip()
    if values.count("(") != values.count(")"):
        return None
    return InsertStatement(match.group("table").strip(), match.group("columns"), values)


def target_of(sql: str) -> str:
    """The table a write statement names, for messages (the statement itself otherwise)."""
    parsed = parse_insert(sql)
    if parsed is not None:
        return f"table {parsed.table}"
    match = re.match(
        rf"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+({_IDENT}(?:\.{_IDENT})*)", sql, re.I
    )
    return f"table {match.group(1)}" if match else "statement " + repr(" ".join(sql.split())[:80])
