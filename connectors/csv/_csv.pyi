from typing import Any

INFER: int
NULL: int
INT64: int
DOUBLE: int
STRING: int

def parse(
    buffer: Any,
    names: tuple[str, ...],
    kinds: tuple[int, ...],
    null_values: tuple[bytes, ...],
    true_values: tuple[bytes, ...],
    false_values: tuple[bytes, ...],
) -> tuple[int, list[tuple[str, int, int, Any, Any, Any]]] | str: ...
def set_powers(table: bytes) -> None: ...
def row_end(
    buffer: Any,
    stop: int,
    first_from: int,
    delimiter: int,
    quote: int,
    double_quote: bool,
    escape: int,
) -> int: ...
