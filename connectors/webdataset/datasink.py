"""WebDatasetDatasink: rows written as the samples of WebDataset tar shards."""

from __future__ import annotations

import io
import tarfile
import time
import uuid
from typing import Any

from shardflow.connectors.webdataset.codecs import apply_codecs, as_codecs, default_encoder
from shardflow.connectors.webdataset.samples import KEY
from shardflow.sdk.block import Block, block_to_rows
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_writing import BlockFileWriter


class WebDatasetDatasink(BlockBasedFileDatasink):
    """Writes one tar shard per write task, one sample per row.

    A row's ``__key__`` names its sample (a random one when the column is missing or null);
    every other column whose name does not start with ``__`` becomes the member
    ``<key>.<column>``, encoded by the column name's extension (see
    :func:`shardflow.connectors.webdataset.codecs.default_encoder`). Null values are left
    out of their sample. See :meth:`shardflow.Dataset.write_webdataset` for the arguments.
    """

    def __init__(self, path: Any, *, encoder: Any = True, **kwargs: Any):
        self._encoders = as_codecs(encoder, default_encoder, "encoder")
        kwargs["file_format"] = "tar"
        super().__init__(path, **kwargs)

    def get_name(self) -> str:
        return "WebDataset"

    def open_block_writer(self, f: Any, block: Block) -> BlockFileWriter:
        return _ShardWriter(f, self._encoders)

    def write_block_to_file(self, block: Block, f: Any) -> None:
        writer = _ShardWriter(f, self._encoders)
        writer.write(block)
        writer.close()


class _ShardWriter(BlockFileWriter):
    """Appends the samples of each block to one tar stream."""

    def __init__(self, f: Any, encoders: list[Any]):
        self._tar = tarfile.open(fileobj=f, mode="w|")
        self._encoders = encoders
        self._mtime = int(time.time())

    def write(self, block: Block) -> bool:
        for row in block_to_rows(block):
            self._write_sample(apply_codecs(self._encoders, row, "encoder"))
        return True

    def _write_sample(self, sample: dict[str, Any]) -> None:
        key = sample.get(KEY)
        if key is None:
            key = uuid.uuid4().hex
        elif isinstance(key, int) and not isinstance(key, bool):
            key = str(key)
        if not isinstance(key, str) or not key or "." in key.rpartition("/")[2]:
            raise ValueError(
                f"__key__ must be a non-empty string without '.' in its file name (the '.' "
                f"starts a member's suffix); got {key!r}."
            )
        for column, value in sample.items():
            if value is None or column.startswith("__"):
                continue
            if isinstance(value, str):
                value = value.encode("utf-8")
            elif isinstance(value, (bytearray, memoryview)):
                value = bytes(value)
            if not isinstance(value, bytes):
                raise ValueError(
                    f"Column {column!r} of sample {key!r} holds a {type(value).__name__}, which "
                    "a tar member cannot hold: name the column with an extension the encoder "
                    "knows (such as .cls, .json, .npy, .png, .txt), or encode it to bytes first."
                )
            info = tarfile.TarInfo(f"{key}.{column}")
            info.size, info.mtime, info.mode = len(value), self._mtime, 0o644
            info.uname = info.gname = "data"
            self._tar.addfile(info, io.BytesIO(value))

    def close(self) -> None:
        self._tar.close()  # writes the end-of-archive blocks; the sink closes the file
