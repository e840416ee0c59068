"""Dictionary-encoded strings expanded by shardflow.connectors.parquet.dictionary_strings, and Parquet reads
that use it. The oracle is Arrow: ``DictionaryArray.cast`` for the expansion, and
``pyarrow.parquet.read_table`` (which decodes strings itself) for whole reads."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardflow.connectors.parquet import dictionary_strings
from shardflow.connectors.parquet.reading import (
    _dictionary_string_columns,
    open_parquet_fragment,
    read_parquet_fragment,
)

needs_module = pytest.mark.skipif(
    not dictionary_strings.available(),
    reason="the compiled module (connectors/parquet/_dictionary_strings.c) is not built",
)

# Short and long values (the copy goes in 16-byte steps), empty ones, multi-byte characters.
WORDS = st.sampled_from(
    ["", "a", "bc", "é", "snowman ☃", "x" * 15, "y" * 16, "z" * 17, "w" * 33, "ab" * 40]
)


@needs_module
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.none() | WORDS, max_size=200),
    start=st.integers(0, 40),
    binary=st.booleans(),
)
def test_expand_equals_arrows_cast(values, start, binary):
    value_type = pa.binary() if binary else pa.string()
    encoded = pa.array(values, pa.string()).cast(value_type).dictionary_encode()
    array = encoded.slice(min(start, len(values)))
    got = dictionary_strings.expand(array)
    if got is None:  # only a sliced bitmap that does not start on a byte is declined
        assert array.null_count and array.offset % 8
    else:
        got.validate(full=True)
        assert got.type == value_type
        assert got.equals(array.cast(value_type))
    assert dictionary_strings.dense(pa.chunked_array([array])).equals(
        pa.chunked_array([array.cast(value_type)])
    )


@needs_module
def test_values_ending_at_the_dictionarys_last_byte_are_copied_exactly():
    dictionary = pa.array(["0123456789abcdef0", "q"])  # 17 + 1 bytes: steps would overrun
    array = pa.DictionaryArray.from_arrays(pa.array([1, 0, 1, 1], pa.int32()), dictionary)
    assert dictionary_strings.expand(array).to_pylist() == ["q", "0123456789abcdef0", "q", "q"]


@needs_module
def test_declines_what_it_cannot_expand_exactly():
    words = pa.array(["a", "b"])
    out_of_range = pa.DictionaryArray.from_arrays(pa.array([0, 5], pa.int32()), words, safe=False)
    assert dictionary_strings.expand(out_of_range) is None
    negative = pa.DictionaryArray.from_arrays(pa.array([-1], pa.int32()), words, safe=False)
    assert dictionary_strings.expand(negative) is None
    with_null_value = pa.DictionaryArray.from_arrays(
        pa.array([0, 1], pa.int32()), pa.array(["a", None])
    )
    assert dictionary_strings.expand(with_null_value) is None
    assert dictionary_strings.dense(pa.chunked_array([with_null_value])).to_pylist() == ["a", None]
    small_indices = pa.DictionaryArray.from_arrays(pa.array([1, 0], pa.int8()), words)
    assert dictionary_strings.expand(small_indices) is None
    large = pa.array(["a", "b"], pa.large_string()).dictionary_encode()
    assert dictionary_strings.expand(large) is None
    assert dictionary_strings.dense(pa.chunked_array([large])).type == pa.large_string()


@needs_module
def test_the_module_checks_buffer_sizes():
    from shardflow.connectors.parquet import _dictionary_strings as module

    words = pa.array(["abc"])
    _, offsets, data = words.buffers()
    indices = pa.array([0, 0], pa.int32()).buffers()[1]
    with pytest.raises(ValueError, match="output offsets"):
        module.offsets(indices, 0, 2, None, 0, offsets, 0, 1, data, pa.allocate_buffer(4))
    with pytest.raises(ValueError, match="indices"):
        module.offsets(indices, 1, 2, None, 0, offsets, 0, 1, data, pa.allocate_buffer(12))
    out = pa.allocate_buffer(12)
    assert module.offsets(indices, 0, 2, None, 0, offsets, 0, 1, data, out) == 6
    with pytest.raises(ValueError, match="output data"):
        module.gather(indices, 0, 2, offsets, 0, 1, data, out, pa.allocate_buffer(6))


def test_without_the_module_arrow_expands(monkeypatch):
    monkeypatch.setattr(dictionary_strings, "_dictionary_strings", None)
    encoded = pa.array(["a", None, "b"]).dictionary_encode()
    assert dictionary_strings.expand(encoded) is None
    assert dictionary_strings.dense(pa.chunked_array([encoded])).to_pylist() == ["a", None, "b"]


# -- Parquet reads ------------------------------------------------------------------------


def _read(path, columns=None):
    tables = list(read_parquet_fragment(open_parquet_fragment(path), columns=columns))
    return pa.concat_tables(tables)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    low=st.lists(st.none() | WORDS, min_size=1, max_size=300),
    row_group_size=st.integers(7, 400),
    dictionary_page_limit=st.sampled_from([64, 1 << 20]),
)
def test_parquet_reads_equal_pyarrows(tmp_path_factory, low, row_group_size, dictionary_page_limit):
    n = len(low)
    table = pa.table(
        {
            "low": pa.array(low, pa.string()),
            "distinct": [f"value number {i}" for i in range(n)],
            "raw": pa.array([(w or "").encode() for w in low], pa.binary()),
            "n": list(range(n)),
        }
    )
    path = str(tmp_path_factory.mktemp("dict") / "f.parquet")
    # A small dictionary page limit makes the writer fall back to plain pages mid-chunk.
    pq.write_table(
        table, path, row_group_size=row_group_size, dictionary_pagesize_limit=dictionary_page_limit
    )
    expected = pq.read_table(path)
    got = _read(path)
    assert got.schema.equals(expected.schema, check_metadata=True)
    assert got.equals(expected)
    assert _read(path, columns=["n", "low"]).equals(expected.select(["n", "low"]))


@needs_module
def test_only_dictionary_encoded_string_columns_are_read_as_dictionaries(tmp_path):
    n = 5000
    table = pa.table(
        {
            "label": [f"word{i % 10}" for i in range(n)],
            "unique": [f"a fairly long unique value {i}" for i in range(n)],
            "plain": [f"word{i % 10}" for i in range(n)],
            "count": list(range(n)),
        }
    )
    path = str(tmp_path / "f.parquet")
    pq.write_table(table, path, use_dictionary=["label", "unique"], dictionary_pagesize_limit=1024)
    parquet_file = pq.ParquetFile(path)
    assert _dictionary_string_columns(parquet_file, [0], None) == ["label"]
    assert _dictionary_string_columns(parquet_file, [0], ["count"]) == []
    assert _read(path).equals(pq.read_table(path))


def test_a_stored_dictionary_type_stays_a_dictionary(tmp_path):
    table = pa.table({"c": pa.array(["x", "y", "x"]).dictionary_encode(), "s": ["p", "q", "p"]})
    path = str(tmp_path / "f.parquet")
    pq.write_table(table, path)
    got = _read(path)
    assert got.schema.field("c").type == pa.dictionary(pa.int32(), pa.string())
    assert got.schema.field("s").type == pa.string()
    assert got.equals(pq.read_table(path))


def test_a_dotted_name_is_not_taken_for_a_nested_column(tmp_path):
    table = pa.table({"s.a": ["x", "y"] * 50, "s": pa.array([{"a": "p"}] * 100)})
    path = str(tmp_path / "f.parquet")
    pq.write_table(table, path)
    got = _read(path)
    assert got.schema.equals(table.schema)
    assert got.equals(pq.read_table(path))
