"""Type stub of the optional compiled module (engine/execution/exchange/_grouped_sums.c)."""

from collections.abc import Sequence
from typing import Any

def count_and_sum(
    codes: Any,
    code_width: int,
    span: int,
    counts: Any,
    weights: Sequence[Any],
    totals: Sequence[Any],
) -> bool: ...
