"""Write a folder of JSON Lines files: staged per write task, made visible at commit."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import posixpath
import uuid
from collections.abc import Iterable
from typing import Any

import fsspec
import pyarrow as pa
from shardflow.sdk import Datasink, TaskContext, WriteResult


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"cannot write a value of type {type(value).__name__} as JSON")


def write_file(f: Any, table: pa.Table) -> None:
    """Append ``table``'s rows to an open binary file, one JSON object per line.

    Replace this function (and ``read_file`` in datasource.py) to support another format.
    """
    lines = [json.dumps(row, default=_json_default) for row in table.to_pylist()]
    f.write(("\n".join(lines) + "\n").encode("utf-8"))


class {{ cookiecutter.__class_prefix }}Datasink(Datasink):
    """Writes one JSON Lines file per write task into a folder, all-or-nothing.

    Each task writes a hidden staging file (readers skip names starting with "."); the commit
    renames them to ``part-<write id>-<task>.jsonl``, and a failed write deletes them.

    Args:
        path: The folder to write into (created when missing), or a URL.
        storage_options: Passed to fsspec.

    Examples:
        >>> import shardflow as sf
        >>> from {{ cookiecutter.__module_name }} import {{ cookiecutter.__class_prefix }}Datasink
        >>> sf.range(10).write_datasink({{ cookiecutter.__class_prefix }}Datasink("out/"))  # doctest: +SKIP
    """

    def __init__(self, path: str, *, storage_options: dict[str, Any] | None = None):
        if not isinstance(path, str) or not path:
            raise TypeError(f"path must be a non-empty string, got {path!r}.")
        self.path = path
        self.storage_options = dict(storage_options or {})
        self._fs, self._root = fsspec.core.url_to_fs(path, **self.storage_options)
        self._root = self._root.rstrip("/")
        self._write_id: str | None = None

    def get_name(self) -> str:
        return "{{ cookiecutter.__class_prefix }}"

    def _staging_prefix(self) -> str:
        return posixpath.join(self._root, f".{self._write_id}-")

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        if self._fs.exists(self._root) and not self._fs.isdir(self._root):
            raise FileExistsError(f"{self.path}: exists and is not a folder.")
        self._fs.makedirs(self._root, exist_ok=True)
        self._write_id = uuid.uuid4().hex[:12]

    def write(self, blocks: Iterable[pa.Table], ctx: TaskContext) -> str | None:
        if self._write_id is None:
            raise RuntimeError(f"{self.path}: write() was called before on_write_start().")
        staged = f"{self._staging_prefix()}{ctx.task_idx:05d}.jsonl"
        f = None
        try:
            for block in blocks:
                if block.num_rows == 0:
                    continue
                if f is None:
                    f = self._fs.open(staged, "wb")
                write_file(f, block)
        finally:
            if f is not None:
                f.close()
        return staged if f is not None else None

    def on_write_complete(self, write_result: WriteResult) -> None:
        for staged in write_result.write_returns:
            if staged is None:
                continue
            task = posixpath.basename(staged)[len(f".{self._write_id}-") :]
            self._fs.mv(staged, posixpath.join(self._root, f"part-{self._write_id}-{task}"))

    def on_write_failed(self, error: Exception) -> None:
        if self._write_id is None:
            return
        for staged in self._fs.glob(self._staging_prefix() + "*"):
            self._fs.rm(staged)
