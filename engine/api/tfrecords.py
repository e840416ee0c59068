"""TFRecords: :func:`read_tfrecords` and :meth:`Dataset.write_tfrecords`.

The connector lives in :mod:`shardflow.connectors.tfrecords` and needs protobuf and
google-crc32c (``pip install 'shardflow[tfrecords]'``), not TensorFlow; they are imported only
when TFRecords are read or written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardflow.engine.api.file_reads import PathsArg, ShuffleArg, _common, _read
from shardflow.engine.api.file_writes import _sink_args
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk.save_mode import SaveMode

if TYPE_CHECKING:  # engine.dataset mixes in TFRecordsWriteMixin, so it is imported lazily
    from shardflow.engine.api.dataset import Dataset


def read_tfrecords(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    tf_schema: Any = None,
    shuffle: ShuffleArg = None,
    file_extensions: list[str] | None = None,
    override_num_blocks: int | None = None,
    partitioning: Partitioning | None = None,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Dataset:
    """Read TFRecord files of `tf.train.Example
    <https://www.tensorflow.org/api_docs/python/tf/train/Example>`_ records, one row per
    record, without TensorFlow.

    Each feature becomes a column: ``int64_list`` as ``int64``, ``float_list`` as
    ``float32``, ``bytes_list`` as ``binary``. Without ``tf_schema``, a feature holding
    exactly one value is read as that value and any other count as a list (``[]`` for an
    empty feature), as Ray Data reads them; with it, every feature is a list. Both checksums
    of every record are verified. ``.gz`` files are decompressed (TensorFlow's
    ``compression_type="GZIP"``); name the codec in ``arrow_open_stream_args`` for other
    names.

    Differences from Ray Data 2.60: TensorFlow is not needed; checksums are verified (a
    corrupt record raises an error naming the file, the record and its byte offset; Ray
    Data reads it); columns are sorted by feature name (Ray Data's order changes from
    process to process), and with ``tf_schema`` follow the schema, every declared feature
    present (null where a record lacks it); ``tf_schema`` may also be a dict of feature name
    to ``"bytes"``, ``"int"`` or ``"float"``; a feature that is empty in every record of a
    block is a list of its kind (``list<int64>``, ...), or ``list<null>`` when the records do
    not say its kind (Ray Data: always ``list<null>``).

    Examples:
        >>> import tempfile
        >>> import shardflow as sf
        >>> folder = tempfile.mkdtemp()
        >>> sf.from_items([{"label": i, "tokens": [i, i + 1]} for i in range(3)]).write_tfrecords(
        ...     folder, mode="overwrite")
        >>> sf.read_tfrecords(folder).sort("label").take(2)
        [{'label': 0, 'tokens': [0, 1]}, {'label': 1, 'tokens': [1, 2]}]

    Args:
        paths: Files, folders or globs; local, ``s3://``, ``gs://`` or ``memory://``.
        tf_schema: The features' types: a ``tensorflow_metadata`` ``schema_pb2.Schema`` or
            a dict of feature name to ``"bytes"``, ``"int"`` or ``"float"``. A record with a
            feature not in it, or of another type, raises an error.
        include_paths: Add a ``path`` column naming each row's file.
        file_extensions: Read only files with these extensions (all files by default).
        arrow_open_stream_args: Arguments for opening each file, e.g. ``{"compression":
            "gzip"}``.
        Other arguments: as for :func:`shardflow.read_parquet`.

    Returns:
        A lazy Dataset.

    Raises:
        ValueError: when reading, if a record's checksum fails, a file ends inside a record,
            a record is not an Example, or it does not match ``tf_schema``; the message
            names the file and the record's byte offset.
        ArrowConversionError: when reading without ``tf_schema``, if a feature holds one
            value in some records of a block and another count in others.
    """
    from shardflow.connectors.tfrecords import TFRecordDatasource

    datasource = TFRecordDatasource(paths, tf_schema=tf_schema, **_common(locals()))
    return _read(datasource, parallelism, override_num_blocks)


class TFRecordsWriteMixin:
    """``Dataset.write_tfrecords``."""

    if TYPE_CHECKING:  # Dataset provides it

        def write_datasink(self, datasink: Any, *, resume: bool = False) -> None: ...

    def write_tfrecords(
        self,
        path: Any,
        *,
        tf_schema: Any = None,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        min_rows_per_file: int | None = None,
        num_rows_per_file: int | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        """Write the dataset as TFRecord files of ``tf.train.Example`` records under the
        folder ``path``, one record per row, without TensorFlow.

        Integer columns become ``int64_list`` features, floating ones ``float_list``,
        binary and string ones ``bytes_list`` (strings UTF-8 encoded); list columns of those
        become lists; a null is an empty list. Tensor columns become one serialized
        ``TensorProto`` per row (``tf.io.parse_tensor`` reads it). Each write task writes
        one file (``{write_uuid}_{task:06}.tfrecords``); files appear only when every task
        succeeded. Records are written with their features sorted by name.

        Differences from Ray Data 2.60: files end in ``.tfrecords`` (Ray Data names them
        ``.tar``); ``mode`` defaults to ``"error"`` (Ray Data's default is ``"append"``);
        writes are all-or-nothing; TensorFlow and crc32c are not needed.

        Examples:
            >>> import tempfile
            >>> import shardflow as sf
            >>> folder = tempfile.mkdtemp()
            >>> sf.range(4).write_tfrecords(folder, mode="overwrite")
            >>> sf.read_tfrecords(folder).sum("id")
            6

        Args:
            path: Destination folder (local, ``s3://``, ``gs://``, ``memory://``).
            tf_schema: The features' types (see :func:`shardflow.read_tfrecords`): columns
                must be features of it, of the declared types.
            arrow_open_stream_args: Arguments for opening each output file, e.g.
                ``{"compression": "gzip"}`` (TensorFlow's ``"GZIP"``).
            min_rows_per_file: Join a write task's blocks into files of at least this many
                records.
            num_rows_per_file: Older name of ``min_rows_per_file``.
            mode: ``"error"`` (default), ``"overwrite"``, ``"append"`` or ``"ignore"``.
            resume: Make the write resumable (see ``Dataset.write_datasink``).
            Other arguments: as for :meth:`write_parquet`.

        Raises:
            ValueError: a column's type has no feature type (booleans, structs, strings
                of only nulls, ...), or the columns do not match ``tf_schema``.
        """
        from shardflow.connectors.tfrecords import TFRecordDatasink

        sink = TFRecordDatasink(path, tf_schema=tf_schema, **_sink_args(locals()))
        self.write_datasink(sink, resume=resume)
