"""sort_block: NumPy's quicksort path for one numeric key gives Arrow's stable order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from shardflow.engine.execution.exchange.ranges import sort_block
from shardflow.engine.plan.logical import SortKey

NUMBERS = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=60).map(lambda v: pa.array(v, pa.int64())),
    st.lists(st.integers(0, 2**64 - 1), max_size=60).map(lambda v: pa.array(v, pa.uint64())),
    st.lists(st.integers(-3, 3), max_size=60).map(lambda v: pa.array(v, pa.int8())),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=60).map(
        lambda v: pa.array(v, pa.float64())
    ),
    st.lists(st.one_of(st.none(), st.floats(-5, 5)), max_size=60).map(
        lambda v: pa.array(v, pa.float64())
    ),
)


@settings(max_examples=200, deadline=None)
@given(NUMBERS, st.booleans())
def test_same_order_as_arrow_stable_sort(values, descending):
    block = pa.table({"k": values, "row": np.arange(len(values))})
    key = SortKey(("k",), (descending,))
    expected = block.take(pc.sort_indices(block, sort_keys=key.arrow_sort_keys()))
    # Compared by the row order (NaN keys never compare equal in Table.equals).
    assert sort_block(block, key).column("row").equals(expected.column("row"))


def test_unique_floats_take_the_fast_path_and_match():
    rng = np.random.default_rng(7)
    block = pa.table({"k": rng.random(50_000), "row": np.arange(50_000)})
    for descending in (False, True):
        key = SortKey(("k",), (descending,))
        expected = block.take(pc.sort_indices(block, sort_keys=key.arrow_sort_keys()))
        assert sort_block(block, key).equals(expected)
