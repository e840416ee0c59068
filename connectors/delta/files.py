"""Data files of a Delta write: Parquet files under the table's folder, their AddActions
(path, size, partition values, statistics), and their removal when a write fails."""

from __future__ import annotations

import datetime
import decimal
import json
import math
import posixpath
import time
import urllib.parse
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
# Strings longer than this get no min/max statistics (Delta truncates them; leaving them
# out keeps pruning correct).
_MAX_STAT_STRING = 32


def file_name(write_id: str, task_idx: int, counter: int) -> str:
    return f"part-{task_idx:05d}-{counter:04d}-{write_id}.snappy.parquet"


def is_file_of_write(path: str, write_id: str) -> bool:
    return posixpath.basename(path).endswith(f"-{write_id}.snappy.parquet")


def partition_value_text(value: Any) -> str | None:
    """A partition value as Delta's log stores it (a string, or None for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def partition_folder(names: list[str], values: list[str | None]) -> str:
    """The hive-style folder of a partition: ``a=1/b=x`` (escaped)."""
    parts = []
    for name, value in zip(names, values):
        text = HIVE_NULL if value is None else value
        parts.append(f"{urllib.parse.quote(name, safe='')}={urllib.parse.quote(text, safe='')}")
    return "/".join(parts)


def _stat_value(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds") + "Z"
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def statistics(table: pa.Table) -> str:
    """Delta's per-file statistics: row count, and nulls, min and max of flat columns."""
    import pyarrow.compute as pc

    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, column in zip(table.column_names, table.columns):
        kind = column.type
        if pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
            continue
        nulls[name] = column.null_count
        usable = (
            pa.types.is_integer(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_date(kind)
            or pa.types.is_timestamp(kind)
            or pa.types.is_string(kind)
            or pa.types.is_decimal(kind)
        )
        if not usable or column.null_count == len(column):
            continue
        found = pc.min_max(column).as_py()
        low, high = found["min"], found["max"]
        if isinstance(low, float) and (math.isnan(low) or math.isnan(high)):
            continue
        if pa.types.is_floating(kind) and pc.any(pc.is_nan(column)).as_py():
            continue
        if isinstance(low, str) and max(len(low), len(high)) > _MAX_STAT_STRING:
            continue
        mins[name], maxs[name] = _stat_value(low), _stat_value(high)
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    )


def add_action(path: str, size: int, partition_values: dict[str, str | None], stats: str) -> Any:
    from deltalake.transaction import AddAction

    return AddAction(
        path=path,
        size=size,
        partition_values=partition_values,
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=stats,
    )


def write_parquet(filesystem: Any, relative_path: str, table: pa.Table) -> int:
    """Write ``table`` as one Parquet file; returns its size in bytes."""
    import pyarrow.parquet as pq

    folder = posixpath.dirname(relative_path)
    if folder:
        filesystem.create_dir(folder, recursive=True)
    with filesystem.open_output_stream(relative_path) as stream:
        pq.write_table(table, stream, compression="snappy")
    return int(filesystem.get_file_info(relative_path).size)


def delete_paths(filesystem: Any, paths: Iterable[str]) -> None:
    for path in paths:
        try:
            filesystem.delete_file(path)
        except FileNotFoundError:
            pass


def files_of_write(filesystem: Any, write_id: str) -> list[str]:
    """Every data file under the table's folder written by write ``write_id``."""
    import pyarrow.fs as pafs

    try:
        infos = filesystem.get_file_info(pafs.FileSelector("", recursive=True))
    except FileNotFoundError:
        return []
    return [
        info.path
        for info in infos
        if info.type == pafs.FileType.File and is_file_of_write(info.path, write_id)
    ]


def remove_empty_folders(filesystem: Any) -> None:
    """Remove folders left empty under the table's folder (local disk)."""
    import pyarrow.fs as pafs

    try:
        infos = filesystem.get_file_info(pafs.FileSelector("", recursive=True))
    except FileNotFoundError:
        return
    folders = sorted(
        (i.path for i in infos if i.type == pafs.FileType.Directory),
        key=lambda p: -p.count("/"),
    )
    files = [i.path for i in infos if i.type == pafs.FileType.File]
    for folder in folders:
        prefix = folder.rstrip("/") + "/"
        if not any(f.startswith(prefix) for f in files):
            try:
                filesystem.delete_dir(folder)
            except OSError:
                pass
