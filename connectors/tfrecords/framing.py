"""The TFRecord framing: a file is a sequence of checksummed records.

Each record is::

    uint64 length            little-endian
    uint32 masked_crc32c(length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

where the mask is TensorFlow's: ``((crc >> 15) | (crc << 17)) + 0xa282ead8`` modulo 2**32.
CRC-32C comes from ``google-crc32c`` (hardware-accelerated where the CPU has it).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from shardflow.sdk.optional import require

_HEADER = struct.Struct("<QI")  # length, masked CRC of the length
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_READ_BYTES = 1 << 20


class CorruptRecordError(ValueError):
    """A TFRecord file is not well formed: a checksum fails, or it ends inside a record.

    The message gives the record's index and byte offset in the file.
    """


def crc32c_function() -> Any:
    return require("google_crc32c", "tfrecords", "Reading and writing TFRecords").value


def masked_crc(data: bytes, crc32c: Any = None) -> int:
    """TensorFlow's masked CRC-32C of ``data``.

    Examples:
        >>> hex(masked_crc(b""))
        '0xa282ead8'
    """
    return _masked((crc32c or crc32c_function())(data))


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def read_records(f: Any, *, check_crc: bool = True) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, data)`` of each record of the binary stream ``f``, in order.

    ``f`` is read forward in pieces of 1 MiB (or the size of a larger record), so it may be
    a decompressing stream.

    Raises:
        CorruptRecordError: a checksum does not match, or the stream ends inside a record.
    """
    crc32c = crc32c_function() if check_crc else None
    buffer = b""
    start = 0  # where the next record starts in ``buffer``
    offset = 0  # the file offset of ``buffer[start]``
    index = 0
    ended = False

    def fill(needed: int) -> bool:
        """Make ``needed`` bytes available from ``start``; False when the stream ends first."""
        nonlocal buffer, start, ended
        available = len(buffer) - start
        if available >= needed:
            return True
        pieces = [buffer[start:]]
        while available < needed and not ended:
            piece = f.read(max(_READ_BYTES, needed - available))
            if not piece:
                ended = True
                break
            pieces.append(piece)
            available += len(piece)
        buffer, start = b"".join(pieces), 0
        return available >= needed

    while True:
        if not fill(_HEADER.size):
            if len(buffer) - start:
                raise CorruptRecordError(
                    f"record {index} at byte offset {offset}: the file ends inside the record's "
                    f"12-byte header ({len(buffer) - start} bytes left)."
                )
            return
        length, length_crc = _HEADER.unpack_from(buffer, start)
        if crc32c is not None and _masked(crc32c(buffer[start : start + 8])) != length_crc:
            raise CorruptRecordError(
                f"record {index} at byte offset {offset}: the checksum of its length field does "
                "not match (the file is corrupt, or not a TFRecord file; compressed files need "
                "a .gz name or arrow_open_stream_args={'compression': 'gzip'})."
            )
        size = _HEADER.size + length + _CRC.size
        if not fill(size):
            raise CorruptRecordError(
                f"record {index} at byte offset {offset}: the file ends inside the record: it "
                f"announces {length} bytes of data, {len(buffer) - start - _HEADER.size} remain."
            )
        data = buffer[start + _HEADER.size : start + _HEADER.size + length]
        if crc32c is not None:
            (data_crc,) = _CRC.unpack_from(buffer, start + _HEADER.size + length)
            if _masked(crc32c(data)) != data_crc:
                raise CorruptRecordError(
                    f"record {index} at byte offset {offset}: the checksum of its {length} "
                    "bytes of data does not match (the file is corrupt)."
                )
        yield offset, data
        start += size
        offset += size
        index += 1


def frame_record(data: bytes, crc32c: Any = None) -> bytes:
    """``data`` framed as one TFRecord record (header, data, checksum)."""
    crc32c = crc32c or crc32c_function()
    length = struct.pack("<Q", len(data))
    return b"".join(
        (
            length,
            _CRC.pack(masked_crc(length, crc32c)),
            data,
            _CRC.pack(masked_crc(data, crc32c)),
        )
    )
