"""Planning and reading Hudi tables through the hudi library (hudi-rs), in either of its APIs.

hudi is an optional dependency (``pip install 'shardflow[hudi]'``), imported only when a
table is read. hudi 0.4 plans with ``get_file_slices(filters)`` and
``get_file_slices_between(start, end)`` and reads a base file by its path, with incremental
bounds under ``hoodie.read.file_group.*`` keys (what Ray Data 2.60 calls); hudi 0.5 plans
and reads with a ``HudiReadOptions`` and names the bounds ``hoodie.read.start.timestamp`` and
``hoodie.read.end.timestamp``. This module is the only one that knows the difference: it
takes either spelling of the bounds and gives the datasource plain :class:`SlicePlan` values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from shardflow.sdk.filesystems import redact, table_location
from shardflow.sdk.optional import require

# Incremental bounds: (hudi 0.4 key, hudi 0.5 key).
START_KEYS = ("hoodie.read.file_group.start_timestamp", "hoodie.read.start.timestamp")
END_KEYS = ("hoodie.read.file_group.end_timestamp", "hoodie.read.end.timestamp")
_READ_OPTIMIZED = "hoodie.read.use.read_optimized.mode"
# Decoded Arrow bytes per byte of Parquet, where hudi does not estimate the size in memory.
_ENCODING_RATIO = 5.0


@dataclass(frozen=True)
class SlicePlan:
    """One file slice to read: its base file, relative to the table's root."""

    relative_path: str
    size_bytes: int  # the base file's size on storage
    memory_bytes: int  # an estimate of its records' size in memory
    num_rows: int | None  # exact, or None when the library does not know


def require_hudi(feature: str = "read_hudi") -> Any:
    """The hudi module, or an ImportError naming the extra to install."""
    return require("hudi", "hudi", feature)


def table_uri(path: Any) -> str:
    """The table's URI: URLs as given, local paths made absolute (``file://`` removed)."""
    return table_location(path, argument="table_uri", table_kind="Hudi")


def shown(uri: str) -> str:
    """The table's location for messages (no credentials)."""
    return redact(uri)


def check_options(name: str, options: Any) -> dict[str, str]:
    if options is None:
        return {}
    if not isinstance(options, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in options.items()
    ):
        raise TypeError(f"{name} must be a dict of strings to strings, got {options!r}.")
    return dict(options)


def incremental_bounds(hudi_options: dict[str, str]) -> tuple[str | None, str | None]:
    """The (start, end] instants of an incremental query, from either spelling of the keys."""

    def pick(keys: tuple[str, str]) -> str | None:
        values = {hudi_options[k] for k in keys if k in hudi_options}
        if len(values) > 1:
            raise ValueError(f"hudi_options give {keys[0]} and {keys[1]} different values.")
        return values.pop() if values else None

    return pick(START_KEYS), pick(END_KEYS)


def _is_new_api(hudi: Any) -> bool:
    return hasattr(hudi, "HudiReadOptions")


def library_options(hudi: Any, hudi_options: dict[str, str]) -> dict[str, str]:
    """``hudi_options`` with the incremental bounds under the installed library's keys, and
    read-optimized mode on (base files only, as Ray Data 2.60 reads them)."""
    start, end = incremental_bounds(hudi_options)
    new = 1 if _is_new_api(hudi) else 0
    options = {k: v for k, v in hudi_options.items() if k not in START_KEYS + END_KEYS}
    if start is not None:
        options[START_KEYS[new]] = start
    if end is not None:
        options[END_KEYS[new]] = end
    options[_READ_OPTIMIZED] = "true"
    return options


class HudiTableError(ValueError):
    """A Hudi table cannot be planned or read; the message names the table and the reason."""


def _describe(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__


def _library_errors(hudi: Any) -> tuple[type[BaseException], ...]:
    # hudi-rs reports some bad input (a config the table lacks, ...) by panicking, which
    # pyo3 raises as PanicException, a BaseException: catch it to name the table.
    kinds: list[type[BaseException]] = [Exception]
    try:
        from pyo3_runtime import PanicException

        kinds.append(PanicException)
    except ImportError:
        pass
    return tuple(kinds)


def open_table(
    uri: str, hudi_options: dict[str, str], storage_options: dict[str, str]
) -> tuple[Any, dict[str, str]]:
    """The HudiTable at ``uri`` and the options its readers take (storage and hudi options).

    Raises FileNotFoundError when no table is there, HudiTableError when it cannot be opened.
    """
    hudi = require_hudi()
    options = library_options(hudi, hudi_options)
    try:
        table = (
            hudi.HudiTableBuilder.from_base_uri(uri)
            .with_hudi_options(options)
            .with_storage_options(storage_options)
            .build()
        )
        # hudi 0.5 keeps only the table's configurations: the read's own (the incremental
        # bounds) are added back for the readers.
        reader_options = {**table.storage_options(), **table.hudi_options(), **options}
    except _library_errors(hudi) as exc:
        message = _describe(exc)
        if "hoodie.properties" in message and "not found" in message.lower():
            raise FileNotFoundError(
                f"No Hudi table at {shown(uri)}: {message}. Check the path (a table's folder "
                "holds .hoodie/hoodie.properties)."
            ) from exc
        raise HudiTableError(f"Hudi table {shown(uri)} cannot be opened: {message}") from exc
    return table, reader_options


def plan_slices(
    table: Any,
    uri: str,
    query_type: str,
    filters: list[tuple[str, str, str]],
    hudi_options: dict[str, str],
) -> list[SlicePlan]:
    """The file slices a query reads (partitions pruned by ``filters``)."""
    hudi = require_hudi()
    start, end = incremental_bounds(hudi_options)
    try:
        if _is_new_api(hudi):
            options = hudi.HudiReadOptions(
                filters=filters or None, hudi_options=library_options(hudi, hudi_options)
            )
            if query_type == "incremental":
                options = options.with_query_type(hudi.HudiQueryType.Incremental)
            slices = table.get_file_slices(options)
            exact = False  # hudi 0.5 counts records only when it reads footers to prune
        elif query_type == "incremental":
            slices = table.get_file_slices_between(start, end)
            exact = False  # hudi 0.4 does not count the records of these slices
        else:
            slices = table.get_file_slices(filters or None)
            exact = True
    except _library_errors(hudi) as exc:
        raise HudiTableError(
            f"Hudi table {shown(uri)}: cannot plan the {query_type} query: {_describe(exc)}"
        ) from exc
    plans = []
    for s in slices:
        size = int(s.base_file_size or 0)
        memory = int(getattr(s, "base_file_byte_size", 0) or 0) or int(size * _ENCODING_RATIO)
        plans.append(
            SlicePlan(
                relative_path=s.base_file_relative_path(),
                size_bytes=size,
                memory_bytes=memory,
                num_rows=int(s.num_records) if exact else None,
            )
        )
    return plans


def table_schema(table: Any, uri: str) -> pa.Schema:
    """The table's schema with Hudi's meta columns (as its base files hold them)."""
    hudi = require_hudi()
    try:
        if hasattr(table, "get_schema_with_meta_fields"):
            return table.get_schema_with_meta_fields()
        return table.get_schema()
    except _library_errors(hudi) as exc:
        raise HudiTableError(
            f"Hudi table {shown(uri)}: cannot read its schema: {_describe(exc)}"
        ) from exc


def open_reader(uri: str, reader_options: dict[str, str]) -> Any:
    """hudi's file group reader for the table at ``uri`` (one per read task)."""
    hudi = require_hudi()
    try:
        return hudi.HudiFileGroupReader(uri, reader_options)
    except _library_errors(hudi) as exc:
        raise HudiTableError(
            f"Hudi table {shown(uri)}: cannot open a reader: {_describe(exc)}"
        ) from exc


def read_base_file(
    reader: Any, uri: str, relative_path: str, reader_options: dict[str, str], query_type: str
) -> Iterator[pa.RecordBatch]:
    """The records of one file slice (its base file), as the library's reader gives them:
    incremental bounds in ``reader_options`` keep the records committed between them."""
    hudi = require_hudi()
    where = f"{relative_path} (a base file of Hudi table {shown(uri)})"
    try:
        if _is_new_api(hudi):
            options = hudi.HudiReadOptions(hudi_options=reader_options)
            if query_type == "incremental":  # keeps the records committed between the bounds
                options = options.with_query_type(hudi.HudiQueryType.Incremental)
            yield from reader.read_file_slice_from_paths_stream(relative_path, [], options)
        else:
            yield reader.read_file_slice_by_base_file_path(relative_path)
    except _library_errors(hudi) as exc:
        raise HudiTableError(f"{where} cannot be read: {_describe(exc)}") from exc
