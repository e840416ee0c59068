"""MCAPDatasource: the messages of MCAP files, one row per message, read with ``mcap``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from shardflow.sdk.block import Block, rows_to_block
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.optional import require

# A block is cut after this many bytes of message payloads (a file of camera frames is
# not held whole); JSON payloads also cut blocks at this many messages.
_BLOCK_BYTES = 16 * 1024 * 1024
_BLOCK_MESSAGES = 65536


def _mcap_reader() -> Any:
    return require("mcap.reader", "mcap", "Reading MCAP files")


@dataclass
class TimeRange:
    """A range of message log times, for :func:`shardflow.read_mcap`.

    Attributes:
        start_time: Start, in nanoseconds (inclusive).
        end_time: End, in nanoseconds (exclusive).

    Examples:
        >>> from shardflow.datasource import TimeRange
        >>> TimeRange(start_time=1_000, end_time=2_000)
        TimeRange(start_time=1000, end_time=2000)
    """

    start_time: int
    end_time: int

    def __post_init__(self) -> None:
        if self.start_time >= self.end_time:
            raise ValueError(
                f"start_time ({self.start_time}) must be less than end_time ({self.end_time})"
            )
        if self.start_time < 0 or self.end_time < 0:
            raise ValueError(
                f"time values must be non-negative, got start_time={self.start_time}, "
                f"end_time={self.end_time}"
            )


def _name_set(value: Any, name: str) -> set[str] | None:
    """``topics`` or ``message_types`` as a set (None or empty: no filter)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a list or set of strings, got {value!r}.")
    names = set(value)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{name} must be a list or set of strings, got {value!r}.")
    return names or None


def _open_reader(f: Any) -> Any:
    """An MCAP reader of the seekable file ``f``: one that uses the file's summary (its
    chunk index skips chunks outside the topics and time range asked for) when the file
    ends with a valid footer, else one that reads the records in order (files recorded
    without a summary, or cut short by a crash: their messages up to the cut are read,
    then mcap's ``EndOfFile`` is raised)."""
    reader_module = _mcap_reader()
    from mcap.exceptions import McapError

    reader = reader_module.SeekingReader(f)  # checks the magic: InvalidMagic when wrong
    try:
        reader.get_summary()
    except (McapError, OSError, ValueError, StopIteration):  # no footer where it should be
        f.seek(0)
        return reader_module.NonSeekingReader(f)
    return reader


class MCAPDatasource(FileBasedDatasource):
    """Reads the messages of MCAP files, one row per message. See :func:`shardflow.read_mcap`.

    Each file is read in log-time order with ``mcap``'s reader, which uses the file's index
    (when it has one) to skip chunks outside ``topics`` and ``time_range``; messages whose
    schema is not one of ``message_types`` are dropped as they are read. Payloads of
    ``json``-encoded channels are decoded into values (structs); others stay bytes.

    Columns: ``data``, ``topic``, ``log_time``, ``publish_time``, ``sequence``, and with
    ``include_metadata``: ``channel_id``, ``message_encoding``, ``schema_name``,
    ``schema_encoding``, ``schema_data`` (``path`` with ``include_paths``).

    Args:
        paths: MCAP files, folders or globs.
        topics: Read only messages of these topics.
        time_range: A :class:`TimeRange` of log times, in nanoseconds.
        message_types: Read only messages whose schema has one of these names.
        include_metadata: Add the channel and schema columns.
        file_based_datasource_kwargs: As for :class:`~shardflow.sdk.FileBasedDatasource`.

    Examples:
        >>> import os, tempfile
        >>> from mcap.writer import Writer
        >>> import shardflow as sf
        >>> from shardflow.datasource import MCAPDatasource
        >>> path = os.path.join(tempfile.mkdtemp(), "log.mcap")
        >>> with open(path, "wb") as f:
        ...     writer = Writer(f)
        ...     writer.start()
        ...     channel = writer.register_channel("/count", "json", schema_id=0)
        ...     for t in range(3):
        ...         writer.add_message(channel, log_time=t, publish_time=t, data=b'{"n": %d}' % t)
        ...     writer.finish()
        >>> source = MCAPDatasource(path, topics=["/count"], include_metadata=False)
        >>> [row["data"]["n"] for row in sf.read_datasource(source).take_all()]
        [0, 1, 2]
    """

    _FILE_EXTENSIONS = ["mcap"]
    _RANDOM_ACCESS = True  # the reader seeks to the summary and the chunk index

    def __init__(
        self,
        paths: Any,
        topics: list[str] | set[str] | None = None,
        time_range: TimeRange | None = None,
        message_types: list[str] | set[str] | None = None,
        include_metadata: bool = True,
        **file_based_datasource_kwargs: Any,
    ):
        _mcap_reader()  # a missing mcap is reported when read_mcap is called, not when run
        super().__init__(paths, **file_based_datasource_kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_mcap: {sorted(self._file_args)}.")
        if time_range is not None and not isinstance(time_range, TimeRange):
            raise TypeError(
                "time_range must be a TimeRange or a (start_time, end_time) tuple, got "
                f"{time_range!r}."
            )
        self._topics = _name_set(topics, "topics")
        self._message_types = _name_set(message_types, "message_types")
        self._time_range = time_range
        self._include_metadata = bool(include_metadata)

    def get_name(self) -> str:
        return "MCAP"

    def reads_hold_the_gil(self) -> bool:
        return True  # records are parsed one by one in Python: worker processes, locally

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        reader = _open_reader(f)
        messages = reader.iter_messages(
            topics=sorted(self._topics) if self._topics else None,
            start_time=self._time_range.start_time if self._time_range else None,
            end_time=self._time_range.end_time if self._time_range else None,
            log_time_order=True,
        )
        rows: list[dict[str, Any]] = []
        payload_bytes = 0
        for schema, channel, message in messages:
            if self._message_types and schema is not None:
                if schema.name not in self._message_types:
                    continue
            rows.append(self._row(schema, channel, message, path))
            payload_bytes += len(message.data)
            if payload_bytes >= _BLOCK_BYTES or len(rows) >= _BLOCK_MESSAGES:
                yield rows_to_block(rows)
                rows, payload_bytes = [], 0
        if rows:
            yield rows_to_block(rows)

    def _row(self, schema: Any, channel: Any, message: Any, path: str) -> dict[str, Any]:
        data: Any = message.data
        if channel.message_encoding == "json":
            try:
                data = json.loads(data.decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                data = message.data  # kept as bytes, as Ray Data does
        row = {
            "data": data,
            "topic": channel.topic,
            "log_time": message.log_time,
            "publish_time": message.publish_time,
            "sequence": message.sequence,
        }
        if self._include_metadata:
            row["channel_id"] = message.channel_id
            row["message_encoding"] = channel.message_encoding
            row["schema_name"] = schema.name if schema else None
            row["schema_encoding"] = schema.encoding if schema else None
            row["schema_data"] = schema.data if schema else None
        return row
