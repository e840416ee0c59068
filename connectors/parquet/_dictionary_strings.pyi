"""Type stub of the optional compiled module (connectors/parquet/_dictionary_strings.c)."""

from typing import Any

STEP: int

def offsets(
    indices: Any,
    indices_offset: int,
    length: int,
    validity: Any,
    validity_offset: int,
    dict_offsets: Any,
    dict_offset: int,
    dict_length: int,
    dict_data: Any,
    out_offsets: Any,
) -> int: ...
def gather(
    indices: Any,
    indices_offset: int,
    length: int,
    dict_offsets: Any,
    dict_offset: int,
    dict_length: int,
    dict_data: Any,
    out_offsets: Any,
    out_data: Any,
) -> None: ...
