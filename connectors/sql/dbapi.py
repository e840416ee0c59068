"""DB-API 2 plumbing: connections from a factory, the database's dialect, and errors that
name the table and the step without showing connection strings or passwords."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from shardflow.sdk.filesystems import redact_text
from shardflow.sdk.optional import missing_message

# Drivers installed by an extra of shardflow, for the message when one is missing.
_DRIVER_EXTRAS = {"psycopg": "sql", "psycopg_binary": "sql"}

SQLITE, POSTGRES, GENERIC = "sqlite", "postgresql", "generic"


def redact_secrets(text: str) -> str:
    """``text`` without passwords: ``user:password@`` in URLs and ``password=...`` pairs.

    Examples:
        >>> redact_secrets("postgresql://app:hunter2@db/x password=hunter2 port=5432")
        'postgresql://db/x password=*** port=5432'
    """
    return redact_text(str(text))


class SQLStepError(RuntimeError):
    """A step of a SQL read or write failed, and the driver's error could not be re-raised
    as its own type (its constructor takes other arguments)."""


def step_error(exc: BaseException, what: str, step: str) -> BaseException:
    """``exc`` re-made with a message naming ``what`` (a table or a query) and ``step``.

    The driver's exception type is kept where its constructor takes a message (sqlite3's and
    psycopg's do), so ``except sqlite3.IntegrityError`` still catches it; passwords are
    removed from the message. Raise the result ``from exc``.
    """
    message = redact_secrets(f"{what}: {step} failed: {type(exc).__name__}: {exc}")
    try:
        error = type(exc)(message)
        if str(error) == message:
            return error
    except Exception:
        pass
    return SQLStepError(message)


def describe_query(sql: str, limit: int = 120) -> str:
    """A query shortened for messages: one line, at most ``limit`` characters."""
    text = " ".join(str(sql).split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def dialect_of(connection: Any) -> str:
    """``"sqlite"``, ``"postgresql"`` (psycopg 3 or psycopg2) or ``"generic"``."""
    module = type(connection).__module__ or ""
    if module.startswith("sqlite3"):
        return SQLITE
    if module.startswith(("psycopg", "psycopg2")):
        return POSTGRES
    return GENERIC


def check_connection(connection: Any) -> None:
    for attr in ("close", "commit", "cursor"):
        if not hasattr(connection, attr):
            raise ValueError(
                f"connection_factory returned a {type(connection).__name__} without a {attr!r} "
                "method; it must return a DB-API 2 connection (PEP 249), such as "
                "sqlite3.connect(...) or psycopg.connect(...)."
            )


def open_connection(connection_factory: Callable[[], Any], what: str) -> Any:
    try:
        connection = connection_factory()
    except ModuleNotFoundError as exc:
        extra = _DRIVER_EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise step_error(exc, what, "connecting") from exc
        raise ImportError(missing_message(exc.name or "", extra, f"Connecting for {what}")) from exc
    except Exception as exc:
        raise step_error(exc, what, "connecting") from exc
    check_connection(connection)
    return connection


def rollback_quietly(connection: Any) -> None:
    """Roll back, ignoring drivers without transactions and connections already lost."""
    try:
        connection.rollback()
    except Exception:
        pass


def close_quietly(connection: Any) -> None:
    try:
        connection.close()
    except Exception:
        pass


@contextmanager
def transaction(connection_factory: Callable[[], Any], what: str) -> Iterator[Any]:
    """A connection whose work is committed at the end, or rolled back on any error, and
    closed either way."""
    connection = open_connection(connection_factory, what)
    try:
        yield connection
        try:
            connection.commit()
        except Exception as exc:
            raise step_error(exc, what, "commit") from exc
    except BaseException:
        rollback_quietly(connection)
        raise
    finally:
        close_quietly(connection)


def execute(cursor: Any, sql: str, params: Any = None) -> None:
    if params is None:
        cursor.execute(sql)
    else:
        cursor.execute(sql, params)
