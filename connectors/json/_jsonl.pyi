from typing import Any

NULL: int
BOOL: int
INT64: int
DOUBLE: int
STRING: int

def parse(
    buffer: Any, names: tuple[str, ...], kinds: tuple[int, ...], max_line_bytes: int
) -> tuple[int, list[tuple[str, int, int, Any, Any, Any]]] | str: ...
def set_powers(table: bytes) -> None: ...
def parse_double(text: str) -> float | None: ...
