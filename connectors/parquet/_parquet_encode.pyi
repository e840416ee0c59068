"""Type stub of the optional compiled module (connectors/parquet/_parquet_encode.c)."""

from typing import Any

def dictionary_fixed(
    parts: list[tuple[Any, int, int, Any]], width: int, max_entries: int, integers: bool
) -> tuple[bytes, bytes] | None: ...
def dictionary_bytes(
    parts: list[tuple[Any, Any, int, int, int, Any]], max_bytes: int
) -> tuple[bytes, bytes, int, bytes | None, bytes | None] | None: ...
def plain_bytes(
    offsets: Any, data: Any, offset_width: int, offset: int, length: int, validity: Any
) -> bytes: ...
def bytes_min_max(
    offsets: Any, data: Any, offset_width: int, offset: int, length: int, validity: Any
) -> tuple[bytes, bytes] | None: ...
def rle_hybrid(values: Any, start: int, count: int, bit_width: int) -> bytes: ...
