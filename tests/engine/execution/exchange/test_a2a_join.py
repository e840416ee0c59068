"""join, every join type, against nested loops in plain Python: null keys never match,
duplicate keys give products, one or several key columns, suffixes, right_on; both backends.

(pandas.merge is no oracle here: it matches null keys with each other.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from a2a_support import PROPERTY_SETTINGS, block_cuts, dataset_of, same_rows
from hypothesis import given
from hypothesis import strategies as st

import shardflow as sf

JOIN_TYPES = [
    "inner",
    "left_outer",
    "right_outer",
    "full_outer",
    "left_semi",
    "right_semi",
    "left_anti",
    "right_anti",
]
LEFT_SCHEMA = pa.schema(
    [("id", pa.int64()), ("g", pa.string()), ("a", pa.int64()), ("c", pa.float64())]
)
RIGHT_SCHEMA = pa.schema(
    [("id", pa.int64()), ("g", pa.string()), ("b", pa.string()), ("c", pa.float64())]
)


def matches(
    left: dict[str, Any], right: dict[str, Any], on: Sequence[str], right_on: Sequence[str]
) -> bool:
    """SQL equality: a null key matches nothing, not even another null."""
    return all(
        left[l] is not None and right[r] is not None and left[l] == right[r]
        for l, r in zip(on, right_on)
    )


def oracle_join(
    left: list[dict],
    right: list[dict],
    how: str,
    on: Sequence[str],
    right_on: Sequence[str],
    left_columns: Sequence[str],
    right_columns: Sequence[str],
    left_suffix: str | None = None,
    right_suffix: str | None = None,
) -> list[dict]:
    def left_row(l: dict) -> dict:
        return {c: l[c] for c in left_columns}

    def right_row(r: dict) -> dict:
        return {c: r[c] for c in right_columns}

    if how == "left_semi":
        return [left_row(l) for l in left if any(matches(l, r, on, right_on) for r in right)]
    if how == "left_anti":
        return [left_row(l) for l in left if not any(matches(l, r, on, right_on) for r in right)]
    if how == "right_semi":
        return [right_row(r) for r in right if any(matches(l, r, on, right_on) for l in left)]
    if how == "right_anti":
        return [right_row(r) for r in right if not any(matches(l, r, on, right_on) for l in left)]
    left_rest = [c for c in left_columns if c not in on]
    right_rest = [c for c in right_columns if c not in right_on]
    overlap = set(left_rest) & set(right_rest)

    def combine(l: dict | None, r: dict | None) -> dict:
        out = {}
        for lk, rk in zip(on, right_on):  # key columns take the left names, values coalesced
            out[lk] = l[lk] if l is not None else r[rk]
        for c in left_rest:
            out[c + (left_suffix or "") if c in overlap else c] = None if l is None else l[c]
        for c in right_rest:
            out[c + (right_suffix or "") if c in overlap else c] = None if r is None else r[c]
        return out

    rows = [combine(l, r) for l in left for r in right if matches(l, r, on, right_on)]
    if how in ("left_outer", "full_outer"):
        rows += [
            combine(l, None) for l in left if not any(matches(l, r, on, right_on) for r in right)
        ]
    if how in ("right_outer", "full_outer"):
        rows += [
            combine(None, r) for r in right if not any(matches(l, r, on, right_on) for l in left)
        ]
    return rows


# Few distinct keys and many nulls: duplicates (products) and null keys are common.
key_ints = st.one_of(st.none(), st.integers(min_value=0, max_value=4))
key_strs = st.one_of(st.none(), st.sampled_from(["x", "y"]))
left_rows = st.lists(
    st.fixed_dictionaries(
        {
            "id": key_ints,
            "g": key_strs,
            "a": st.integers(min_value=0, max_value=99),
            "c": st.one_of(st.none(), st.floats(min_value=-5, max_value=5, allow_nan=False)),
        }
    ),
    max_size=25,
)
right_rows = st.lists(
    st.fixed_dictionaries(
        {
            "id": key_ints,
            "g": key_strs,
            "b": st.sampled_from(["p", "q", "r"]),
            "c": st.one_of(st.none(), st.floats(min_value=-5, max_value=5, allow_nan=False)),
        }
    ),
    max_size=25,
)


@PROPERTY_SETTINGS
@given(
    left=left_rows,
    right=right_rows,
    lcuts=block_cuts(25),
    rcuts=block_cuts(25),
    how=st.sampled_from(JOIN_TYPES),
    on=st.sampled_from([("id",), ("id", "g"), ("g",)]),
    num_partitions=st.integers(min_value=1, max_value=4),
)
def test_join_matches_nested_loop_oracle(
    backend, left, right, lcuts, rcuts, how, on, num_partitions
):
    lds = dataset_of(pa.Table.from_pylist(left, schema=LEFT_SCHEMA), lcuts)
    rds = dataset_of(pa.Table.from_pylist(right, schema=RIGHT_SCHEMA), rcuts)
    joined = lds.join(rds, how, num_partitions, on=on, left_suffix="_l", right_suffix="_r")
    got = joined.take_all()
    expected = oracle_join(
        left, right, how, on, on, LEFT_SCHEMA.names, RIGHT_SCHEMA.names, "_l", "_r"
    )
    assert len(got) == len(expected)
    assert same_rows(got, expected)
    if got:
        assert list(got[0]) == list(expected[0])


@pytest.mark.parametrize("how", JOIN_TYPES)
def test_duplicate_keys_give_products_and_null_keys_never_match(backend, how):
    left = [{"id": k, "a": i} for i, k in enumerate([1, 1, 1, 2, None, None, 7])]
    right = [{"id": k, "b": str(i)} for i, k in enumerate([1, 1, 2, 2, 2, None, 9])]
    lds = sf.from_arrow(pa.Table.from_pylist(left[:4])).union(
        sf.from_arrow(pa.Table.from_pylist(left[4:]))
    )
    rds = sf.from_arrow(
        pa.Table.from_pylist(right, schema=pa.schema([("id", pa.int64()), ("b", pa.string())]))
    )
    got = lds.join(rds, how, 3).take_all()
    expected = oracle_join(left, right, how, ["id"], ["id"], ["id", "a"], ["id", "b"])
    assert same_rows(got, expected)
    sizes = {
        "inner": 3 * 2 + 1 * 3,
        "left_outer": 9 + 3,
        "right_outer": 9 + 2,
        "full_outer": 9 + 3 + 2,
        "left_semi": 4,
        "right_semi": 5,
        "left_anti": 3,
        "right_anti": 2,
    }
    assert len(got) == sizes[how]


def test_join_with_right_on_keeps_left_key_names(backend):
    left = sf.from_items([{"id": i, "a": i * 10} for i in range(6)])
    right = sf.from_items([{"rid": i, "b": -i} for i in range(3, 9)])
    got = left.join(right, "full_outer", 2, on=("id",), right_on=("rid",)).take_all()
    expected = oracle_join(
        [{"id": i, "a": i * 10} for i in range(6)],
        [{"rid": i, "b": -i} for i in range(3, 9)],
        "full_outer",
        ["id"],
        ["rid"],
        ["id", "a"],
        ["rid", "b"],
    )
    assert same_rows(got, expected)
    assert set(got[0]) == {"id", "a", "b"}


def test_join_suffixes_on_overlapping_columns(backend):
    left = sf.from_items([{"id": 1, "v": "l1"}, {"id": 2, "v": "l2"}])
    right = sf.from_items([{"id": 2, "v": "r2"}, {"id": 3, "v": "r3"}])
    got = left.join(right, "inner", 2, left_suffix="_left", right_suffix="_right").take_all()
    assert got == [{"id": 2, "v_left": "l2", "v_right": "r2"}]
    only_right = left.join(right, "left_outer", 1, right_suffix="_2").take_all()
    assert same_rows(
        only_right, [{"id": 1, "v": "l1", "v_2": None}, {"id": 2, "v": "l2", "v_2": "r2"}]
    )


def test_join_overlapping_columns_without_suffix_is_a_value_error(backend):
    left = sf.from_items([{"id": 1, "v": 1}])
    right = sf.from_items([{"id": 1, "v": 2}])
    with pytest.raises(ValueError, match="suffix"):
        left.join(right, "inner", 1).take_all()


def test_join_of_larger_inputs_matches_numpy(backend):
    rng = np.random.default_rng(11)
    left_ids = rng.integers(0, 2000, size=3000)
    right_ids = rng.permutation(1500)
    left = sf.from_arrow([pa.table({"id": c, "x": c * 2}) for c in np.array_split(left_ids, 5)])
    right = sf.from_arrow([pa.table({"id": c, "y": c * 3}) for c in np.array_split(right_ids, 3)])
    got = left.join(right, "inner", 4).to_arrow()
    expected = np.sort(left_ids[left_ids < 1500])
    np.testing.assert_array_equal(np.sort(got.column("id").to_numpy()), expected)
    np.testing.assert_array_equal(got.column("x").to_numpy(), got.column("id").to_numpy() * 2)
    np.testing.assert_array_equal(got.column("y").to_numpy(), got.column("id").to_numpy() * 3)


def test_join_keeps_tensor_and_list_columns(backend):
    left = sf.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3)).add_column(
        "id", lambda df: np.arange(len(df))
    )
    right = sf.from_items([{"id": i, "tags": ["t"] * i} for i in range(4)])
    got = left.join(right, "inner", 2).take_all()
    by_id = {r["id"]: r for r in got}
    assert sorted(by_id) == [0, 1, 2, 3]
    for i in range(4):
        np.testing.assert_array_equal(
            by_id[i]["data"], np.arange(3 * i, 3 * i + 3, dtype=np.float32)
        )
        assert list(by_id[i]["tags"]) == ["t"] * i


@pytest.mark.parametrize("how", ["left_outer", "full_outer"])
def test_outer_join_with_an_empty_side_still_has_its_columns(backend, how):
    left = sf.from_items([{"id": 1, "a": 1}, {"id": 2, "a": 2}])
    right = sf.from_items([{"id": 5, "b": 1}]).limit(0)
    got = left.join(right, how, 2).take_all()
    assert same_rows(got, [{"id": 1, "a": 1, "b": None}, {"id": 2, "a": 2, "b": None}])


def test_nan_keys_match_each_other_as_in_ray_data(backend):
    # Unlike nulls, NaN keys are equal to each other (Ray Data's join does the same).
    ds = sf.from_arrow(
        [
            pa.table({"k": [float("nan"), 1.0, None], "v": [1, 2, 3]}),
            pa.table({"k": [float("nan"), 1.0], "v": [4, 5]}),
        ]
    )
    got = ds.join(ds.rename_columns({"v": "w"}), "inner", 2, on=("k",)).take_all()
    assert sorted((r["v"], r["w"]) for r in got) == [
        (1, 1),
        (1, 4),
        (2, 2),
        (2, 5),
        (4, 1),
        (4, 4),
        (5, 2),
        (5, 5),
    ]
