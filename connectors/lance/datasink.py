"""LanceDatasink: write tasks write Lance fragments in parallel; the driver commits once.

Each write task hands its blocks to ``lance.fragment.write_fragments``, which writes data files
under ``<dataset>/data/`` that no version references yet, and returns the fragments' metadata.
``on_write_complete`` makes one commit holding every fragment (an ``Overwrite`` for modes
create and overwrite, an ``Append`` for append, checked against the version read at the
start), which is the moment readers see the rows. A failed write deletes the data files it
made (see :mod:`shardflow.connectors.lance.staging`) and commits nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from shardflow.connectors.lance.reading import open_dataset, pylance
from shardflow.connectors.lance.staging import WriteJournal
from shardflow.sdk.block import Block, to_block
from shardflow.sdk.datasink import Datasink, TaskContext, WriteResult
from shardflow.sdk.save_mode import SaveMode, to_save_mode

_MODES = (SaveMode.CREATE, SaveMode.APPEND, SaveMode.OVERWRITE)


def _check_rows(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
    return value


class LanceDatasink(Datasink[tuple[Any, list[Any]]]):
    """Writes a Lance dataset. See :meth:`shardflow.Dataset.write_lance` for the arguments."""

    def __init__(
        self,
        path: str,
        *,
        schema: pa.Schema | None = None,
        mode: Any = SaveMode.CREATE,
        min_rows_per_file: int = 1024 * 1024,
        max_rows_per_file: int = 64 * 1024 * 1024,
        data_storage_version: str | None = None,
        storage_options: dict[str, Any] | None = None,
    ):
        pylance()
        if not isinstance(path, str) or not path:
            raise TypeError(f"path must be the URI of a Lance dataset, got {path!r}.")
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}.")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError("storage_options must be a dict of Lance object store options.")
        if data_storage_version is not None and not isinstance(data_storage_version, str):
            raise TypeError(
                f"data_storage_version must be a string such as 'stable', got "
                f"{data_storage_version!r}."
            )
        self.uri = path.rstrip("/") if len(path) > 1 else path
        self.schema = schema
        self.mode = to_save_mode(mode, _MODES)
        self.min_rows_per_file = _check_rows("min_rows_per_file", min_rows_per_file)
        self.max_rows_per_file = _check_rows("max_rows_per_file", max_rows_per_file)
        self.data_storage_version = data_storage_version
        self.storage_options = dict(storage_options) if storage_options else None
        self.read_version: int | None = None
        self._created = False
        self._journal: WriteJournal | None = None

    def get_name(self) -> str:
        return "Lance"

    @property
    def min_rows_per_write(self) -> int | None:
        return self.min_rows_per_file

    # -- driver ---------------------------------------------------------------------------

    def _existing(self) -> Any:
        try:
            return open_dataset(self.uri, None, self.storage_options)
        except FileNotFoundError:
            return None

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        existing = self._existing()
        if self.mode == SaveMode.CREATE and existing is not None:
            raise ValueError(
                f"Dataset at {self.uri} already exists. Use mode=SaveMode.OVERWRITE to "
                "replace it, or mode=SaveMode.APPEND to add to it."
            )
        if self.mode == SaveMode.APPEND:
            if existing is None:
                raise FileNotFoundError(
                    f"No Lance dataset at {self.uri!r} to append to; use mode='create'."
                )
            if self.schema is None:
                self.schema = existing.schema
        self.read_version = existing.version if existing is not None else None
        self._created = existing is None
        self._write_schema = self.schema or schema
        self._journal = WriteJournal(self.uri, uuid.uuid4().hex)

    def on_write_complete(self, write_result: WriteResult[tuple[Any, list[Any]]]) -> None:
        lance = pylance()
        returns = [r for r in write_result.write_returns if r is not None]
        fragments = [fragment for _, task_fragments in returns for fragment in task_fragments]
        schemas = [schema for schema, _ in returns if schema is not None]
        schema = schemas[0] if schemas else getattr(self, "_write_schema", None)
        try:
            if self.mode == SaveMode.APPEND:
                if fragments:
                    lance.LanceDataset.commit(
                        self.uri,
                        lance.LanceOperation.Append(fragments),
                        read_version=self.read_version,
                        storage_options=self.storage_options,
                    )
            elif schema is not None:
                lance.LanceDataset.commit(
                    self.uri,
                    lance.LanceOperation.Overwrite(schema, fragments),
                    read_version=self.read_version,
                    storage_options=self.storage_options,
                )
        except BaseException:
            if self._journal is not None:
                self._journal.delete_recorded_files()
                self._journal.remove(self._created)
            raise
        if self._journal is not None:
            self._journal.remove()

    def on_write_failed(self, error: Exception) -> None:
        if self._journal is None:
            return
        self._journal.delete_recorded_files()
        self._journal.remove(created_dataset=self._created)

    # -- write tasks ----------------------------------------------------------------------

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> tuple[Any, list[Any]]:
        from lance.fragment import FragmentWriteProgress, write_fragments

        journal = self._journal or WriteJournal(self.uri, ctx.write_uuid or uuid.uuid4().hex)

        class _Record(FragmentWriteProgress):  # files made before a failure midway
            def begin(self, fragment: Any, **kwargs: Any) -> None:
                pass

            def complete(self, fragment: Any, **kwargs: Any) -> None:
                for data_file in fragment.files:
                    journal.record(data_file.path)

        source = _BlockSource(blocks, self.schema, fill_missing=self.mode == SaveMode.APPEND)
        schema = source.start()
        if schema is None:
            return (None, [])
        reader = pa.RecordBatchReader.from_batches(schema, source.batches())
        try:
            fragments = write_fragments(
                reader,
                self.uri,
                schema=schema,
                max_rows_per_file=self.max_rows_per_file,
                data_storage_version=self.data_storage_version,
                storage_options=self.storage_options,
                progress=_Record(),
            )
        except Exception as exc:
            if source.error is not None:  # the input failed, not Lance: raise the input's error
                raise source.error from exc
            raise
        # Lance reports a file complete when it starts the next one, not the last one: record
        # them all now, before the driver can hear of a failure elsewhere.
        for fragment in fragments:
            for data_file in fragment.files:
                journal.record(data_file.path)
        return (schema, list(fragments))


class _BlockSource:
    """The blocks of a write task as record batches of one schema, remembering an error raised
    by the blocks (Lance reports it as its own OSError)."""

    def __init__(self, blocks: Iterable[Block], schema: pa.Schema | None, fill_missing: bool):
        self._blocks = iter(blocks)
        self._schema = schema
        self._fill_missing = fill_missing
        self._first: Block | None = None
        self.error: BaseException | None = None

    def start(self) -> pa.Schema | None:
        """The schema of the batches; None when the task has no rows."""
        for block in self._blocks:
            block = to_block(block)
            if block.num_rows:
                self._first = block
                break
        if self._first is None:
            return None
        if self._schema is None:
            self._schema = self._first.schema.remove_metadata()
        return self._schema

    def batches(self) -> Iterator[pa.RecordBatch]:
        assert self._first is not None and self._schema is not None
        yield from self._aligned(self._first).to_batches()
        try:
            for block in self._blocks:
                block = to_block(block)
                if block.num_rows:
                    yield from self._aligned(block).to_batches()
        except Exception as exc:
            self.error = exc
            raise

    def _aligned(self, block: Block) -> pa.Table:
        schema = self._schema
        assert schema is not None
        if block.schema.equals(schema):
            return block
        extra = [n for n in block.column_names if n not in schema.names]
        if extra:
            raise ValueError(
                f"The data has columns {extra} that the Lance dataset's schema lacks "
                f"({schema.names}); select the dataset's columns before writing."
            )
        missing = [f.name for f in schema if f.name not in block.column_names]
        if missing and not self._fill_missing:
            raise ValueError(f"The data lacks the columns {missing} of the schema {schema.names}.")
        arrays = []
        for field in schema:
            if field.name in block.column_names:
                column = block.column(field.name)
                arrays.append(column if column.type == field.type else column.cast(field.type))
            else:
                arrays.append(pa.nulls(block.num_rows, field.type))
        return pa.Table.from_arrays(arrays, schema=schema)
