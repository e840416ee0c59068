"""The list of conformance checks, and helpers the checks share.

A check is a plain function ``check(suite, tmp_path)`` that raises AssertionError when the
connector breaks a contract, or :class:`SkipCheck` when it does not apply (a capability the
connector does not declare, an optional method the suite does not define). The pytest base
classes and the ``shardflow check-connector`` runner both run the functions listed here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.sdk.datasource import Datasource, ReadTask

READ = "read"
WRITE = "write"


class SkipCheck(Exception):
    """Raised by a check that does not apply to the connector; the message says why."""


@dataclass(frozen=True)
class Check:
    """One conformance check.

    Args:
        name: Short name; the pytest method is ``test_<name>``.
        kind: ``"read"`` (needs a Datasource) or ``"write"`` (needs a Datasink).
        fn: ``fn(suite, tmp_path)``.
        doc: The rule the check enforces (the docstring's first paragraph, on one line);
            docs/connectors.md lists every check with this text.
    """

    name: str
    kind: str
    fn: Callable[[Any, Path], None]
    doc: str


CHECKS: list[Check] = []


def check(kind: str) -> Callable[[Callable[[Any, Path], None]], Callable[[Any, Path], None]]:
    """Register a check function under its own name (without a ``check_`` prefix)."""

    def register(fn: Callable[[Any, Path], None]) -> Callable[[Any, Path], None]:
        name = fn.__name__[len("check_") :] if fn.__name__.startswith("check_") else fn.__name__
        paragraph = (inspect.getdoc(fn) or name).split("\n\n")[0]
        doc = " ".join(line.strip() for line in paragraph.splitlines())
        CHECKS.append(Check(name, kind, fn, doc))
        return fn

    return register


def optional(value: Any, what: str) -> Any:
    """Skip the check when an optional suite method gave None."""
    if value is None:
        raise SkipCheck(f"the suite does not define {what}")
    return value


def call_optional(method: Callable[..., Any], what: str, *args: Any) -> Any:
    """Call an optional suite method; None or NotImplementedError skip the check."""
    try:
        value = method(*args)
    except NotImplementedError:
        raise SkipCheck(f"the suite does not define {what}") from None
    return optional(value, what)


def accepts_row_limit(datasource: Datasource) -> bool:
    """Whether ``get_read_tasks`` names ``per_task_row_limit`` in its signature."""
    return "per_task_row_limit" in inspect.signature(datasource.get_read_tasks).parameters


def plan(
    datasource: Datasource, parallelism: int, per_task_row_limit: int | None = None
) -> list[ReadTask]:
    """Call ``get_read_tasks`` the way the engine does, and check what it returns."""
    params = inspect.signature(datasource.get_read_tasks).parameters
    accepts_any = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {}
    if per_task_row_limit is not None and ("per_task_row_limit" in params or accepts_any):
        kwargs["per_task_row_limit"] = per_task_row_limit
    tasks = datasource.get_read_tasks(parallelism, **kwargs)
    name = type(datasource).__name__
    if tasks is None:
        raise AssertionError(
            f"{name}.get_read_tasks returned None; return a list (empty for no data)."
        )
    tasks = list(tasks)
    for task in tasks:
        if not isinstance(task, ReadTask):
            raise AssertionError(
                f"{name}.get_read_tasks returned a {type(task).__name__}; "
                "it must return ReadTask objects."
            )
    return tasks


def run_task(task: ReadTask) -> list[pa.Table]:
    """Run a read task and return its blocks (ReadTask already converts batches to tables)."""
    blocks = []
    for block in task():
        if not isinstance(block, pa.Table):
            raise AssertionError(
                f"a read task yielded a {type(block).__name__}, not a pyarrow.Table."
            )
        blocks.append(block)
    return blocks


def files_under(root: Path) -> list[str]:
    """Every file below ``root``, as sorted relative paths."""
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def import_shardflow() -> Any:
    """The user API, imported only when a check runs a pipeline (sdk/ never imports the engine)."""
    import shardflow

    return shardflow
