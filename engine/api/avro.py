"""Avro files: :func:`read_avro`.

The connector lives in :mod:`shardflow.connectors.avro` and needs fastavro (``pip install
'shardflow[avro]'``), imported only when Avro files are read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardflow.engine.api.file_reads import PathsArg, ShuffleArg, _common, _read
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter

if TYPE_CHECKING:
    from shardflow.engine.api.dataset import Dataset


def read_avro(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    partitioning: Partitioning | None = None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = None,
    override_num_blocks: int | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Dataset:
    """Read Avro object container files into a Dataset, one row per record.

    Files are decoded with fastavro, as streams; the Arrow type of each column comes from
    the file's Avro schema: ``int``/``long`` as ``int64``, ``float``/``double`` as
    ``float64``, ``string``/``enum`` as ``string``, ``bytes``/``fixed`` as ``binary``,
    arrays as lists, records as structs, unions with null as nullable columns, and the
    logical types ``date``, ``time-*``, ``timestamp-*``, ``uuid`` and ``decimal`` as Arrow's
    (see :mod:`shardflow.connectors.avro.arrow_types`). A union of several types is a column
    of Python objects.

    Differences from Ray Data 2.60, which infers types from the values: a map is an Arrow
    ``map<string, ...>`` (Ray Data: a struct of the keys seen), a decimal has the schema's
    precision and a timestamp the schema's unit (Ray Data: the values' finest), a union of
    types of one Arrow type has that type, a field that is null in every record keeps its
    type, and an empty file reads as zero rows of its schema.

    Examples:
        >>> import os, tempfile
        >>> import fastavro
        >>> import shardflow as sf
        >>> path = os.path.join(tempfile.mkdtemp(), "users.avro")
        >>> schema = {"type": "record", "name": "User", "fields": [
        ...     {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}]}
        >>> with open(path, "wb") as f:
        ...     fastavro.writer(f, schema, [{"name": "ada", "age": 36}, {"name": "bo", "age": None}])
        >>> sf.read_avro(path).take_all()
        [{'name': 'ada', 'age': 36}, {'name': 'bo', 'age': None}]

    Args:
        paths: Files, folders or globs; local, ``s3://``, ``gs://`` or ``memory://``.
        file_extensions: Read only files with these extensions (all files by default).
        include_paths: Add a ``path`` column naming each row's file.
        Other arguments: as for :func:`shardflow.read_parquet`.

    Returns:
        A lazy Dataset.

    Raises:
        ValueError: when reading, if a file is not an Avro container file or is corrupt;
            the message names the file.
    """
    from shardflow.connectors.avro import AvroDatasource

    datasource = AvroDatasource(paths, **_common(locals()))
    return _read(datasource, parallelism, override_num_blocks)
