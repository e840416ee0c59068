"""Type stub of the optional compiled module (connectors/parquet/_parquet_decode.c)."""

from typing import Any

def page_header(
    data: Any, offset: int
) -> tuple[int, int, int, int, int, int, int, int, int, int, int] | None: ...
def decode_page(
    page: Any,
    levels_start: int,
    levels_length: int,
    values_start: int,
    num_values: int,
    encoding: int,
    width: int,
    dictionary: Any,
    dictionary_count: int,
    out: Any,
    validity: Any,
    row: int,
) -> int: ...
