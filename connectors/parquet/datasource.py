"""Parquet reads: ``read_parquet``.

Reads go through ``pyarrow.dataset`` one row group at a time, so columns, filters and limits
cut what is read: only the requested column chunks are fetched, row groups whose statistics
rule out the filter are skipped, and a limit stops after the row groups it needs. A large
file is split into byte ranges at planning time (no file is opened on the driver); each read
task reads the row groups that start in its range.

Files whose schemas differ are read together: each file is unified with the first file of
the dataset (missing columns become nulls, compatible types are promoted, e.g. int32 and
int64 to int64) unless ``schema=`` is given; a file with an incompatible column raises an
error naming it, the column, and both types. On the driver only the first file's footer is
read, for the schema ``schema()`` and ``repr`` show without running the read; blocks of
other files can still differ (a column only later files have, a wider type); whole
results (``to_arrow``, ``to_pandas``, batches spanning blocks) are unified when joined. Pass
``schema=`` for one exact schema in every block.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.connectors.parquet.reading import (
    open_parquet_fragment,
    read_parquet_fragment,
    row_groups_in_split,
)
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import PATH_COLUMN, FileBasedDatasource
from shardflow.sdk.file_reading import FileUnit
from shardflow.sdk.pushdowns import Pushdowns
from shardflow.sdk.retry import is_transient_error

ROW_HASH_COLUMN = "row_hash"


class SchemaMismatchError(ValueError):
    """A Parquet file has a column whose type cannot be unified with other files."""


class ParquetDatasource(FileBasedDatasource):
    """Reads Parquet files. See :func:`shardflow.read_parquet` for the arguments.

    Supports projection pushdown (only needed columns are read) and exact predicate pushdown
    (engine expressions become ``pyarrow.dataset`` filters, which prune row groups by their
    statistics and drop non-matching rows).
    """

    _FILE_EXTENSIONS = ["parquet"]
    _ENCODING_RATIO = 5.0
    _RANDOM_ACCESS = True
    _MIN_SPLIT_BYTES = 32 * 1024 * 1024
    # Set on the copy that reads only these columns first (late materialization), with
    # the top-k's KeyBound that lets it skip row groups.
    _late_keys: tuple[str, ...] | None = None
    _late_bound: Any = None

    def __init__(
        self,
        paths: Any,
        *,
        columns: list[str] | None = None,
        filter: Any = None,
        batch_size: int | None = None,
        include_row_hash: bool = False,
        dataset_kwargs: dict[str, Any] | None = None,
        tensor_column_schema: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        super().__init__(paths, **kwargs)
        if tensor_column_schema is not None and not isinstance(tensor_column_schema, dict):
            raise TypeError(
                "tensor_column_schema must be a dict of column name to (dtype, shape), got "
                f"{type(tensor_column_schema).__name__}."
            )
        self._tensor_column_schema = tensor_column_schema
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_parquet: {sorted(self._file_args)}.")
        self._include_row_hash = bool(include_row_hash)
        self._format_kwargs = _format_kwargs(dataset_kwargs)
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
                raise TypeError("columns must be a list of column names.")
            # As in Ray Data, the path and row-hash columns asked for stay with columns=.
            extra = [PATH_COLUMN] if self._include_paths else []
            extra += [ROW_HASH_COLUMN] if self._include_row_hash else []
            wanted = list(columns) + [c for c in extra if c not in columns]
            self._pushdowns = Pushdowns(projection=tuple((c, c) for c in wanted))
        if filter is not None:
            import pyarrow.compute as pc

            if not isinstance(filter, pc.Expression):
                raise TypeError(
                    "filter must be a pyarrow.dataset expression such as "
                    f"pyarrow.dataset.field('x') > 3; got {type(filter).__name__}."
                )
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        self._filter = filter
        self._batch_size = batch_size
        self._reference_path: str | None = None
        self._reference_schema: pa.Schema | None = None
        self._encoded_columns: tuple[str, ...] = ()

    def get_name(self) -> str:
        return "Parquet"

    def with_encoded_columns(self, names: tuple[str, ...]) -> ParquetDatasource:
        """A copy whose reads may leave the string columns ``names`` as Arrow dictionaries
        where the files dictionary-encode them (most writers do), which is several times
        cheaper than decoding them into plain strings.

        Only for an engine consumer that takes such columns either way (a group-by's partial
        aggregation, whose output keys are plain again): blocks of this copy are not the
        dataset's rows as the user sees them.
        """
        clone = copy.copy(self)
        clone._encoded_columns = tuple(names)
        return clone

    # -- planning ---------------------------------------------------------------------------

    def _units_to_read(self, units: list[FileUnit]) -> list[FileUnit]:
        if units and self._reference_path is None:
            self._reference_path = units[0].path
        predicate = self.pushdowns.filter
        if predicate is None or self._partition_schema is None:
            return units
        referenced = predicate.referenced_columns()
        if not referenced or not referenced <= set(self._partition_schema.names):
            return units
        kept, verdicts = [], {}
        for unit in units:
            if unit.partition not in verdicts:
                table = pa.table(
                    {
                        name: pa.array([value], self._partition_schema.field(name).type)
                        for name, value in unit.partition
                    }
                )
                verdicts[unit.partition] = bool(predicate.evaluate(table).to_pylist()[0])
            if verdicts[unit.partition]:
                kept.append(unit)
        return kept

    def _split_file(self, unit: FileUnit, target_bytes: int) -> list[FileUnit]:
        chunk = max(target_bytes, self._MIN_SPLIT_BYTES)
        if unit.size is None or unit.size < 1.5 * chunk:
            return [unit]
        pieces = math.ceil(unit.size / chunk)
        bounds = [round(i * unit.size / pieces) for i in range(pieces + 1)]
        bounds[-1] = unit.size + 1
        return [
            FileUnit(unit.path, hi - lo, unit.partition, (lo, hi), unit.version, unit.size)
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]

    def _schema_of_file(self, path: str) -> pa.Schema | None:
        """The first file's schema from its footer, as its row groups are read (with the
        read options of ``dataset_kwargs``), plus the row-hash column when asked for."""
        with self._open_file(path) as f:
            schema = open_parquet_fragment(f, format_kwargs=self._format_kwargs).physical_schema
        if self._include_row_hash:
            if ROW_HASH_COLUMN in schema.names:
                schema = schema.remove(schema.get_field_index(ROW_HASH_COLUMN))
            schema = schema.append(pa.field(ROW_HASH_COLUMN, pa.uint64()))
        if self._tensor_column_schema:  # the tensor columns' types, as the reads give them
            from shardflow.sdk.tensor_types import decode_tensor_columns

            schema = decode_tensor_columns(schema.empty_table(), self._tensor_column_schema).schema
        return schema

    # -- reading ----------------------------------------------------------------------------

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        return self._read_file(f, FileUnit(path, None))

    def _reference(self, physical: pa.Schema, unit: FileUnit) -> pa.Schema | None:
        if self._reference_path is None or self._reference_path == unit.path:
            return None
        if self._reference_schema is None:
            import pyarrow.parquet as pq

            try:
                with self._open_file(self._reference_path) as f:
                    self._reference_schema = pq.read_schema(f)
            except Exception as exc:
                if is_transient_error(exc):
                    raise  # retried with the file being read
                # An unreadable first file is reported by the task that reads it; the
                # others are then read with their own schemas.
                self._reference_path = None
                return None
        return self._reference_schema

    def _scan_schema(self, physical: pa.Schema, unit: FileUnit) -> pa.Schema:
        if self._schema is not None:
            schema = self._schema
        else:
            reference = self._reference(physical, unit)
            schema = physical if reference is None else _unify(reference, physical, self, unit)
        if self._partition_schema is not None:
            extra = [f for f in self._partition_schema if f.name not in schema.names]
            schema = pa.schema(list(schema) + extra)
        return schema

    def _combined_filter(self) -> Any:
        filters = [
            f
            for f in (
                self._filter,
                self.pushdowns.filter.to_pyarrow() if self.pushdowns.filter is not None else None,
            )
            if f is not None
        ]
        if not filters:
            return None
        combined = filters[0]
        for extra in filters[1:]:
            combined = combined & extra
        return combined

    def _read_file(self, f: Any, unit: FileUnit) -> Iterator[Block]:
        if self._late_keys is not None:
            from shardflow.connectors.parquet.late_columns import read_keys

            yield from read_keys(self, f, unit)
            return
        blocks = self._read_columns(f, unit)
        if not self._tensor_column_schema:
            yield from blocks
            return
        from shardflow.sdk.tensor_types import decode_tensor_columns

        for block in blocks:
            yield decode_tensor_columns(block, self._tensor_column_schema)

    def _read_columns(self, f: Any, unit: FileUnit) -> Iterator[Block]:
        import pyarrow.compute as pc

        partition_expression = None
        for name, value in unit.partition:
            arrow_type = self._partition_schema.field(name).type
            term = (
                pc.field(name).is_null()
                if value is None
                else pc.field(name) == pa.scalar(value, arrow_type)
            )
            partition_expression = (
                term if partition_expression is None else partition_expression & term
            )
        fragment = open_parquet_fragment(
            f, partition_expression=partition_expression, format_kwargs=self._format_kwargs
        )
        # Arrow decodes the columns of a row group in parallel when it owns the file (never
        # with threads that would call into a Python file object).
        threads = self.decode_threads(f)
        schema = self._scan_schema(fragment.physical_schema, unit)
        columns = None
        if self.pushdowns.columns is not None:
            columns = [c for c in self.pushdowns.columns if c != PATH_COLUMN or c in schema.names]
            columns = [c for c in columns if c in schema.names]
        if not self._include_row_hash:
            yield from read_parquet_fragment(
                fragment,
                columns=columns,
                filter=self._combined_filter(),
                schema=schema,
                split=unit.split,
                batch_size=self._batch_size,
                use_threads=threads,
                encoded_columns=self._encoded_columns,
            )
            return
        # Row hashes number the rows of the file: read each row group whole, hash its rows,
        # then filter.
        filter_expr = self._combined_filter()
        starts = _row_group_offsets(fragment.metadata)
        indices = row_groups_in_split(fragment.metadata, unit.split) or [None]
        for index in indices:
            for table in read_parquet_fragment(
                fragment,
                columns=columns,
                schema=schema,
                batch_size=self._batch_size,
                row_groups=[] if index is None else [index],
                use_threads=threads,
            ):
                table = self._with_row_hash(table, unit, 0 if index is None else starts[index])
                yield table if filter_expr is None else table.filter(filter_expr)

    def _with_row_hash(self, table: pa.Table, unit: FileUnit, first_row: int) -> pa.Table:
        if ROW_HASH_COLUMN in table.column_names:  # the file's own column is replaced
            table = table.drop_columns([ROW_HASH_COLUMN])
        hashes = row_hashes(self._display(unit.path), first_row, table.num_rows)
        return table.append_column(ROW_HASH_COLUMN, pa.array(hashes, pa.uint64()))

    def _finalize_block(self, block: Block, unit: FileUnit) -> Block:
        if self._late_keys is None:
            return super()._finalize_block(block, unit)
        from shardflow.connectors.parquet.late_columns import finalize_keys

        return finalize_keys(self, block, unit)

    # -- late materialization ---------------------------------------------------------------

    def late_materialization(
        self, keys: tuple[str, ...], data_context: Any = None, bound: Any = None
    ) -> Any:
        """Plan a top-k on ``keys`` in two phases: read only the key columns, then only the
        rows that win (see :mod:`shardflow.connectors.parquet.late_columns`).

        Called by the engine's optimizer on the driver. ``bound`` (a ``KeyBound`` the
        top-k's runs tighten) lets the first phase skip row groups whose statistics put
        every row past the k-th key seen so far.

        Returns:
            ``(datasource, fetch)``: a copy of this source whose blocks hold the key columns
            (the others null) and two position columns, and a picklable callable that turns
            a block of such rows into the rows of the plain read, in the same order; or None
            when this read must be read plainly (a filter, partition or path columns, row
            hashes, tensor columns, a shuffled file order, ...).
        """
        from shardflow.connectors.parquet.late_columns import plan_late_read

        return plan_late_read(self, tuple(keys), data_context, bound)

    # -- predicate pushdown ---------------------------------------------------------------

    def supports_predicate_pushdown(self) -> bool:
        return True

    def is_predicate_pushdown_exact(self) -> bool:
        # pyarrow.dataset filters rows, not only row groups: every row read satisfies it.
        return True


def _row_group_offsets(metadata: Any) -> list[int]:
    offsets, total = [], 0
    for i in range(metadata.num_row_groups):
        offsets.append(total)
        total += metadata.row_group(i).num_rows
    return offsets


def row_hashes(path: str, first_row: int, count: int) -> np.ndarray:
    """Deterministic uint64 hashes of rows ``first_row ..`` of the file ``path``.

    Mixes a digest of the path with each row's position in the file (splitmix64), so the
    same file read the same way gives the same hashes, and rows of a dataset rarely collide.
    """
    import hashlib

    import numpy as np

    digest = hashlib.blake2b(path.encode(), digest_size=8).digest()
    seed = np.uint64(int.from_bytes(digest, "little"))
    with np.errstate(over="ignore"):
        x = np.arange(first_row, first_row + count, dtype=np.uint64)
        x = x * np.uint64(0x9E3779B97F4A7C15) + seed
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _format_kwargs(dataset_kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``dataset_kwargs`` (Ray Data's deprecated read option) as ParquetFileFormat options."""
    if not dataset_kwargs:
        return {}
    if not isinstance(dataset_kwargs, dict):
        raise TypeError(f"dataset_kwargs must be a dict, got {type(dataset_kwargs).__name__}.")
    warnings.warn(
        "dataset_kwargs on read_parquet is deprecated; pass Parquet options as keyword "
        "arguments of read_parquet.",
        DeprecationWarning,
        stacklevel=4,
    )
    kwargs = dict(dataset_kwargs)
    if "partitioning" in kwargs:
        raise ValueError(
            "The 'partitioning' parameter isn't supported in 'dataset_kwargs'; use the "
            "partitioning argument of read_parquet."
        )
    if "filters" in kwargs or "filter" in kwargs:
        raise ValueError(
            "Row filtering through 'filters' or 'filter' isn't supported in 'dataset_kwargs'; "
            "use Dataset.filter(expr=...) on the result."
        )
    if "read_dictionary" in kwargs:
        kwargs["dictionary_columns"] = kwargs.pop("read_dictionary")
    import pyarrow.dataset as pads

    try:
        pads.ParquetFileFormat(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"dataset_kwargs holds options Parquet reads do not take: {exc}") from None
    return kwargs


def _tensor_ndim(arrow_type: pa.DataType) -> int | None:
    if isinstance(arrow_type, pa.FixedShapeTensorType):
        return len(arrow_type.shape)
    if getattr(arrow_type, "extension_name", None) == "arrow.variable_shape_tensor":
        return arrow_type.storage_type.field("shape").type.list_size
    return None


def _unify(
    reference: pa.Schema, physical: pa.Schema, ds: ParquetDatasource, unit: FileUnit
) -> pa.Schema:
    own_tensors = []
    for field in physical:
        index = reference.get_field_index(field.name)
        if index < 0:
            continue
        ref_type = reference.field(index).type
        if ref_type == field.type:
            continue
        ndim = _tensor_ndim(field.type)
        if ndim is not None and ndim == _tensor_ndim(ref_type):
            # Tensors of another shape in this file (a ragged column written by several
            # tasks): read as they are; blocks of different shapes join as variable-shape.
            own_tensors.append(field.name)
            continue
        try:
            pa.unify_schemas(
                [pa.schema([reference.field(index)]), pa.schema([field])],
                promote_options="permissive",
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            raise SchemaMismatchError(
                f"Parquet file {ds._display(unit.path)} has column {field.name!r} of type "
                f"{field.type}, which cannot be unified with type {ref_type} in "
                f"{ds._display(ds._reference_path)}. "
                "Pass schema= to read every file with one schema."
            ) from None
    if own_tensors:
        reference = pa.schema(
            [physical.field(f.name) if f.name in own_tensors else f for f in reference]
        )
    return pa.unify_schemas([reference, physical], promote_options="permissive")
