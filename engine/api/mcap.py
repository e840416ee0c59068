"""MCAP files: :func:`read_mcap`.

The connector lives in :mod:`shardflow.connectors.mcap` and needs the ``mcap`` reader
(``pip install 'shardflow[mcap]'``), imported only when MCAP files are read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardflow.engine.api.file_reads import PathsArg, ShuffleArg, _common, _read
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter

if TYPE_CHECKING:
    from shardflow.connectors.mcap import TimeRange
    from shardflow.engine.api.dataset import Dataset


def read_mcap(
    paths: PathsArg,
    *,
    topics: list[str] | set[str] | None = None,
    time_range: tuple[int, int] | TimeRange | None = None,
    message_types: list[str] | set[str] | None = None,
    include_metadata: bool = True,
    filesystem: Any = None,
    parallelism: int = -1,
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
    """Read MCAP (Message Capture) files, the log format of ROS 2 and other robotics
    stacks, into a Dataset of one row per message, in log-time order within each file.

    ``topics`` and ``time_range`` are handed to the MCAP reader, which skips the chunks of
    an indexed file that hold none of the messages asked for; ``message_types`` keeps the
    messages whose schema has one of those names (messages without a schema are kept).
    Payloads of ``json``-encoded channels are decoded (a struct column when the messages
    agree); other payloads are bytes, to decode with ``map`` (ROS 2 CDR, Protobuf, ...).

    Columns: ``data``, ``topic``, ``log_time`` and ``publish_time`` (nanoseconds),
    ``sequence``; with ``include_metadata`` (the default) also ``channel_id``,
    ``message_encoding``, ``schema_name``, ``schema_encoding`` and ``schema_data``.

    Examples:
        >>> import os, tempfile
        >>> from mcap.writer import Writer
        >>> import shardflow as sf
        >>> path = os.path.join(tempfile.mkdtemp(), "run.mcap")
        >>> with open(path, "wb") as f:
        ...     writer = Writer(f)
        ...     writer.start()
        ...     schema = writer.register_schema(name="Pose", encoding="jsonschema", data=b"{}")
        ...     channel = writer.register_channel("/pose", "json", schema_id=schema)
        ...     for t in range(3):
        ...         writer.add_message(channel, log_time=t, data=b'{"x": %d}' % t,
        ...                            publish_time=t)
        ...     writer.finish()
        >>> ds = sf.read_mcap(path, time_range=(1, 3), include_metadata=False)
        >>> [(row["log_time"], row["data"]) for row in ds.take_all()]
        [(1, {'x': 1}), (2, {'x': 2})]

    Args:
        paths: Files, folders or globs; local, ``s3://``, ``gs://`` or ``memory://``.
        topics: Read only messages of these topics.
        time_range: ``(start_time, end_time)`` in nanoseconds, or a
            :class:`~shardflow.datasource.TimeRange`: log times from start (inclusive) to
            end (exclusive).
        message_types: Read only messages whose schema has one of these names.
        include_metadata: Add the channel and schema columns (default True).
        file_extensions: Read only files with these extensions (``["mcap"]`` when None).
        include_paths: Add a ``path`` column naming each row's file.
        Other arguments: as for :func:`shardflow.read_parquet`.

    Returns:
        A lazy Dataset.

    Raises:
        ValueError: ``time_range`` not a pair of non-negative nanoseconds with start before
            end; when reading, a file that is not a valid MCAP file (the message names it).
    """
    from shardflow.connectors.mcap import MCAPDatasource, TimeRange

    if file_extensions is None:
        file_extensions = ["mcap"]
    if isinstance(time_range, tuple):
        if len(time_range) != 2:
            raise ValueError(
                f"Time range must be a tuple of (start_time, end_time): got {time_range}"
            )
        time_range = TimeRange(start_time=time_range[0], end_time=time_range[1])
    datasource = MCAPDatasource(
        paths,
        topics=topics,
        time_range=time_range,
        message_types=message_types,
        include_metadata=include_metadata,
        **_common({**locals(), "arrow_open_stream_args": None}),
    )
    return _read(datasource, parallelism, override_num_blocks)
