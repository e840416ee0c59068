"""Reading ``.snappy`` files: Snappy's framing format, decoded a chunk at a time.

Arrow streams gzip, bz2, zstd, lz4 and brotli but not Snappy, whose plain format has no
stream form; files named ``*.snappy`` (what Ray Data reads through python-snappy's
``stream_decompress``) hold the framing format: a stream identifier, then chunks of at most
64 KiB of data, each compressed with plain Snappy (which Arrow's codec decodes) or stored.
Chunk checksums (masked CRC-32C) are not verified: a damaged chunk fails to decompress.

Examples:
    >>> import io
    >>> from shardflow.sdk.snappy_frames import SnappyFrameReader, frame
    >>> SnappyFrameReader(io.BytesIO(frame(b"hello\\n"))).read()
    b'hello\\n'
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa

_STREAM_ID = b"\xff\x06\x00\x00sNaPpY"
_COMPRESSED, _UNCOMPRESSED, _PADDING = 0x00, 0x01, 0xFE
_MAX_CHUNK = 65536


class SnappyFrameReader(io.RawIOBase):
    """A readable binary file of the decompressed content of a Snappy-framed stream.

    Args:
        raw: The compressed file, opened for binary reading.
        path: Named in errors.
    """

    def __init__(self, raw: Any, path: str = "<stream>"):
        self._raw, self._path = raw, path
        self._codec = pa.Codec("snappy")
        self._pending = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending and not self._done:
            self._pending = self._next_chunk()
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            piece = self._raw.read(n - len(data))
            if not piece:
                raise ValueError(f"{self._path}: the Snappy stream ends inside a chunk.")
            data += piece
        return data

    def _next_chunk(self) -> bytes:
        header = self._raw.read(4)
        if not header:
            self._done = True
            return b""
        if len(header) < 4:
            header += self._exact(4 - len(header))
        kind, length = header[0], int.from_bytes(header[1:4], "little")
        body = self._exact(length)
        if kind == _COMPRESSED:
            data = body[4:]  # after the checksum
            size = _varint(data, self._path)
            if size > _MAX_CHUNK:
                raise ValueError(f"{self._path}: a Snappy chunk claims {size} bytes (> 64 KiB).")
            out = self._codec.decompress(data, decompressed_size=size, asbytes=True)
            return bytes(out)
        if kind == _UNCOMPRESSED:
            return body[4:]
        if kind == 0xFF:  # the stream identifier (at the start, and again after a concatenation)
            if header + body != _STREAM_ID:
                raise ValueError(f"{self._path}: not a Snappy-framed stream.")
            return b""
        if 0x02 <= kind <= 0x7F:
            raise ValueError(f"{self._path}: unknown Snappy chunk type {kind:#x}.")
        return b""  # padding and reserved skippable chunks

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def _varint(data: bytes, path: str) -> int:
    value, shift = 0, 0
    for byte in data[:5]:
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ValueError(f"{path}: a Snappy chunk has no valid length.")


def open_snappy_frames(raw: Any, path: str) -> io.BufferedReader:
    """``raw`` (a binary file of Snappy-framed data) as a buffered file of its content."""
    return io.BufferedReader(SnappyFrameReader(raw, path))


def frame(data: bytes) -> bytes:
    """``data`` in the Snappy framing format, each 64 KiB chunk compressed (checksums are
    written as zero: readers that verify them, python-snappy's among them, refuse them; for
    tests of this module's reader)."""
    codec = pa.Codec("snappy")
    out = bytearray(_STREAM_ID)
    for start in range(0, len(data), _MAX_CHUNK):
        body = b"\x00\x00\x00\x00" + codec.compress(data[start : start + _MAX_CHUNK], asbytes=True)
        out += bytes([_COMPRESSED]) + len(body).to_bytes(3, "little") + body
    return bytes(out)


__all__ = ["SnappyFrameReader", "frame", "open_snappy_frames"]
