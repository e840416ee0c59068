"""Fixtures of the SQL connector tests: SQLite databases, and a real PostgreSQL server
started once per session (skipped, with the reason, where PostgreSQL or psycopg is absent)."""

from __future__ import annotations

import functools
import sqlite3
import uuid

import postgres_server
import pytest


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server on 127.0.0.1 for the session; yields it (``.conninfo``)."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'shardflow[sql]')")
    bindir = postgres_server.find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found (.ci/run installs Debian's postgresql)")
    server = postgres_server.start(bindir)
    yield server
    server.stop()


@pytest.fixture
def pg_connect(postgres):
    """A picklable connection factory for the session's server."""
    import psycopg

    return functools.partial(psycopg.connect, postgres.conninfo)


@pytest.fixture
def pg_table(pg_connect):
    """A fresh table name; the table is dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with pg_connect() as connection:
        connection.execute("SET lock_timeout = '20s'")  # a test that left a reader open fails
        connection.execute(f"DROP TABLE IF EXISTS {name}")


@pytest.fixture
def sqlite_file(tmp_path):
    """A SQLite database file and a picklable factory for it."""
    path = str(tmp_path / "db.sqlite")
    return path, functools.partial(sqlite3.connect, path)
