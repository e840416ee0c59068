"""Read a folder of JSON Lines files: one read task per file, projection pushed down."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.json as pajson
from shardflow.sdk import BlockMetadata, Datasource, ReadTask

EXTENSIONS = (".jsonl", ".ndjson")


def is_hidden(path: str) -> bool:
    """Names starting with "." or "_" are staging files or markers, never data."""
    return posixpath.basename(path).startswith((".", "_"))


def list_files(fs: Any, path: str) -> list[str]:
    """The data files at ``path``: the file itself, or the visible JSON Lines files of a folder."""
    if not fs.exists(path):
        raise FileNotFoundError(f"{path}: no such file or folder.")
    if not fs.isdir(path):
        return [path]
    root = path.rstrip("/")
    found = []
    for file in fs.find(root):
        relative = posixpath.relpath(file, root)
        if file.endswith(EXTENSIONS) and not any(is_hidden(part) for part in relative.split("/")):
            found.append(file)
    return sorted(found)


def read_file(fs: Any, path: str, schema: pa.Schema | None) -> pa.Table:
    """Parse one JSON Lines file into a table with ``schema`` (inferred when None).

    Replace this function (and ``write_file`` in datasink.py) to support another format.
    """
    options = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    with fs.open(path, "rb") as f:
        data = f.read()
    if not data.strip():
        return schema.empty_table() if schema is not None else pa.table({})
    try:
        table = pajson.read_json(pa.BufferReader(data), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"{path}: not valid JSON Lines: {exc}") from exc
    return table if schema is None else table.select(schema.names)


def _read_task_fn(
    fs: Any, path: str, schema: pa.Schema, projection: dict[str, str] | None
) -> Callable[[], list[pa.Table]]:
    def read() -> list[pa.Table]:
        table = read_file(fs, path, schema)
        if projection is not None:
            table = table.rename_columns(list(projection.values()))
        return [table]

    return read


class {{ cookiecutter.__class_prefix }}Datasource(Datasource):
    """A folder (or a single file) of JSON Lines files.

    Args:
        path: A folder, a file, or a URL such as ``s3://bucket/prefix/``.
        schema: The schema to parse with; inferred from the first file when None.
        storage_options: Passed to fsspec (credentials, ``client_kwargs``...).

    Examples:
        >>> import shardflow as sf
        >>> from {{ cookiecutter.__module_name }} import {{ cookiecutter.__class_prefix }}Datasource
        >>> sf.read_datasource({{ cookiecutter.__class_prefix }}Datasource("data/")).take(2)  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str,
        *,
        schema: pa.Schema | None = None,
        storage_options: dict[str, Any] | None = None,
        _projection: dict[str, str] | None = None,
    ):
        if not isinstance(path, str) or not path:
            raise TypeError(f"path must be a non-empty string, got {path!r}.")
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}.")
        self.path = path
        self.schema = schema
        self.storage_options = dict(storage_options or {})
        self._projection = _projection
        self._fs, self._root = fsspec.core.url_to_fs(path, **self.storage_options)

    def get_name(self) -> str:
        return "{{ cookiecutter.__class_prefix }}"

    def _files(self) -> list[str]:
        return list_files(self._fs, self._root)

    def _schema(self, files: list[str]) -> pa.Schema:
        if self.schema is not None:
            return self.schema
        for file in files:  # infer from the first file with rows (reads that one file)
            table = read_file(self._fs, file, None)
            if table.num_columns:
                return table.schema
        return pa.schema([])

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(self._fs.size(f) for f in self._files())

    def get_read_tasks(self, parallelism: int, **kwargs: Any) -> list[ReadTask]:
        # One task per file: ``parallelism`` is a hint, and files are the natural unit here.
        files = self._files()
        if not files:
            return []
        schema = self._schema(files)
        if self._projection is not None:
            missing = [c for c in self._projection if c not in schema.names]
            if missing:
                raise ValueError(
                    f"{self.path}: unknown column(s) {missing}; the files have {schema.names}."
                )
            schema = pa.schema([schema.field(c) for c in self._projection])
        out_schema = schema
        if self._projection is not None:
            out_schema = pa.schema([f.with_name(self._projection[f.name]) for f in schema])
        tasks = []
        for file in files:
            # num_rows stays None: counting lines would mean reading the file here.
            size = self._fs.size(file)
            metadata = BlockMetadata(num_rows=None, size_bytes=size, input_files=[file])
            read_fn = _read_task_fn(self._fs, file, schema, self._projection)
            tasks.append(ReadTask(read_fn, metadata, out_schema))
        return tasks

    # -- projection pushdown: parse only the needed columns ---------------------------------

    def supports_projection_pushdown(self) -> bool:
        return True

    def get_projection_map(self) -> dict[str, str] | None:
        return None if self._projection is None else dict(self._projection)

    def apply_projection(self, projection_map: dict[str, str] | None) -> {{ cookiecutter.__class_prefix }}Datasource:
        return type(self)(
            self.path,
            schema=self.schema,
            storage_options=self.storage_options,
            _projection=None if projection_map is None else dict(projection_map),
        )
