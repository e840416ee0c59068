"""Partitioned folder layouts: values encoded in paths, like ``year=2024/month=5/part.parquet``.

Follows Ray Data: :class:`Partitioning` describes the layout (``"hive"``: ``key=value``
folders; ``"dir"``: bare values named by ``field_names``), and :class:`PathPartitionFilter`
(or any function of the partition dict) prunes files before they are read.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_STYLES = ("hive", "dir")

_TYPE_NAMES = {
    "int": pa.int64(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "float": pa.float64(),
    "float64": pa.float64(),
    "double": pa.float64(),
    "str": pa.string(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "boolean": pa.bool_(),
}


def to_arrow_type(value: Any) -> pa.DataType:
    """A partition field type given as a Python type, a type name or a pyarrow type."""
    if isinstance(value, pa.DataType):
        return value
    if value in (int, float, str, bool):
        return _TYPE_NAMES[value.__name__]
    if isinstance(value, str) and value.lower() in _TYPE_NAMES:
        return _TYPE_NAMES[value.lower()]
    raise TypeError(
        f"A partition field type must be int, float, str, bool, a type name or a pyarrow "
        f"DataType; got {value!r}."
    )


@dataclass
class Partitioning:
    """How partition values are encoded in paths.

    Args:
        style: ``"hive"`` (``key=value`` folders) or ``"dir"`` (bare values, named by
            ``field_names`` in order).
        base_dir: Folder below which paths are partitioned; defaults to the folder that was
            given to the read.
        field_names: Names of the fields (required for ``"dir"``; optional for ``"hive"``,
            where they restrict which keys become columns).
        field_types: Types of fields, e.g. ``{"year": int}``; other fields are strings, as
            in Ray Data.
        filesystem: Unused; accepted for compatibility with Ray Data.

    Examples:
        >>> from shardflow.sdk.partitioning import Partitioning
        >>> Partitioning("hive").parse("year=2024/month=05/part.csv")
        {'year': '2024', 'month': '05'}
    """

    style: str = "hive"
    base_dir: str | None = None
    field_names: list[str] | None = None
    field_types: dict[str, Any] = field(default_factory=dict)
    filesystem: Any = None

    def __post_init__(self) -> None:
        if self.style not in _STYLES:
            raise ValueError(f"Partitioning style must be one of {_STYLES}, got {self.style!r}.")
        if self.style == "dir" and not self.field_names:
            raise ValueError('Partitioning("dir") needs field_names, one per folder level.')
        self.field_types = dict(self.field_types or {})
        for value in self.field_types.values():
            to_arrow_type(value)  # validate early

    def parse(self, relative_path: str) -> dict[str, str | None]:
        """Raw (string) partition values in ``relative_path`` (relative to the base folder)."""
        folders = [p for p in str(relative_path).split("/")[:-1] if p]
        values: dict[str, str | None] = {}
        if self.style == "hive":
            for folder in folders:
                if "=" not in folder:
                    continue
                key, _, value = folder.partition("=")
                key = urllib.parse.unquote(key)
                if self.field_names and key not in self.field_names:
                    continue
                value = urllib.parse.unquote(value)
                values[key] = None if value == HIVE_NULL else value
            return values
        for name, folder in zip(self.field_names or [], folders):
            values[name] = urllib.parse.unquote(folder)
        return values


def partition_schema(partitioning: Partitioning, raw: list[dict[str, str | None]]) -> pa.Schema:
    """The schema of partition fields seen in ``raw``: strings, unless ``field_types`` says
    otherwise (as Ray Data types them)."""
    names: dict[str, None] = {}
    for values in raw:
        for key in values:
            names.setdefault(key, None)
    fields = []
    for name in names:
        if name in partitioning.field_types:
            fields.append(pa.field(name, to_arrow_type(partitioning.field_types[name])))
        else:
            fields.append(pa.field(name, pa.string()))
    return pa.schema(fields)


def convert_value(value: str | None, arrow_type: pa.DataType, where: str) -> Any:
    """A raw partition value as a Python value of ``arrow_type``; ``where`` names the path."""
    if value is None:
        return None
    try:
        if pa.types.is_boolean(arrow_type):
            lowered = value.lower()
            if lowered not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return lowered in ("true", "1")
        if pa.types.is_integer(arrow_type):
            return int(value)
        if pa.types.is_floating(arrow_type):
            return float(value)
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            return value
        return pa.scalar(value).cast(arrow_type).as_py()
    except (ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(
            f"Partition value {value!r} in {where} cannot be read as {arrow_type}: {exc}"
        ) from None


def format_value(value: Any) -> str:
    """A partition value as written in a folder name (``key=<this>``)."""
    if value is None:
        return HIVE_NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    return urllib.parse.quote(str(value), safe=" -_.,:+@~")


class PathPartitionFilter:
    """Keeps the files whose partition values satisfy ``filter_fn``.

    Build it with :meth:`of`. ``filter_fn`` receives a dict of field name to value (strings,
    or typed values for fields listed in ``field_types``) and returns True to keep the file.

    Examples:
        >>> from shardflow.sdk.partitioning import PathPartitionFilter
        >>> keep_2024 = PathPartitionFilter.of(lambda p: p["year"] == "2024")
        >>> keep_2024(["root/year=2023/a.csv", "root/year=2024/b.csv"])
        ['root/year=2024/b.csv']
    """

    def __init__(self, partitioning: Partitioning, filter_fn: Callable[[dict[str, Any]], bool]):
        if not callable(filter_fn):
            raise TypeError(f"filter_fn must be callable, got {type(filter_fn).__name__}.")
        self.partitioning = partitioning
        self.filter_fn = filter_fn

    @classmethod
    def of(
        cls,
        filter_fn: Callable[[dict[str, Any]], bool],
        style: str = "hive",
        base_dir: str | None = None,
        field_names: list[str] | None = None,
        field_types: dict[str, Any] | None = None,
        filesystem: Any = None,
    ) -> PathPartitionFilter:
        """A filter over paths partitioned as described (see :class:`Partitioning`)."""
        return cls(
            Partitioning(style, base_dir, field_names, field_types or {}, filesystem), filter_fn
        )

    def keep(self, values: dict[str, str | None], where: str) -> bool:
        """Whether to keep a file with raw partition ``values``; ``where`` names it."""
        typed = {}
        for key, value in values.items():
            if key in self.partitioning.field_types:
                arrow_type = to_arrow_type(self.partitioning.field_types[key])
                typed[key] = convert_value(value, arrow_type, where)
            else:
                typed[key] = value
        return bool(self.filter_fn(typed))

    def __call__(self, paths: list[str]) -> list[str]:
        kept = []
        for path in paths:
            relative = path
            base = self.partitioning.base_dir
            if base and path.startswith(base.rstrip("/") + "/"):
                relative = path[len(base.rstrip("/")) + 1 :]
            if self.keep(self.partitioning.parse(relative), path):
                kept.append(path)
        return kept


def as_filter_fn(
    partition_filter: Any,
) -> Callable[[dict[str, str | None], str], bool] | None:
    """Normalize ``partition_filter`` (a PathPartitionFilter or a function of the dict)."""
    if partition_filter is None:
        return None
    if isinstance(partition_filter, PathPartitionFilter):
        return partition_filter.keep
    if callable(partition_filter):
        return lambda values, where: bool(partition_filter(values))
    raise TypeError(
        "partition_filter must be a PathPartitionFilter or a function taking the dict of "
        f"partition values; got {type(partition_filter).__name__}."
    )
