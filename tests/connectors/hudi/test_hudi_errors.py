"""read_hudi's errors: bad arguments raise when read_hudi is called, saying what to give; a
missing or corrupt table raises when the dataset is consumed, naming the table (or the file)
and the reason."""

from __future__ import annotations

import pytest

import shardflow as sf
from shardflow.connectors.hudi.table_access import HudiTableError

pytestmark = pytest.mark.timeout(120)


def test_missing_table_names_the_path(tmp_path):
    where = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="No Hudi table at .*nowhere.*hoodie.properties"):
        sf.read_hudi(str(where)).take_all()


def test_folder_without_a_table(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.parquet").write_bytes(b"not a table")
    with pytest.raises(FileNotFoundError, match="plain"):
        sf.read_hudi(str(tmp_path / "plain")).count()


def test_corrupt_base_file_names_the_table_or_file(trips_table, tmp_path):
    victim = sorted((tmp_path / "trips" / "la").glob("*.parquet"))[-1]
    victim.write_bytes(b"PAR1 not parquet at all PAR1")
    with pytest.raises(HudiTableError) as info:
        sf.read_hudi(trips_table.path).take_all()
    message = str(info.value)
    assert victim.name in message or trips_table.path in message
    assert "footer" in message.lower()  # the reason, as hudi gives it


def test_corrupt_commit_metadata_names_the_table(trips_table, tmp_path):
    last = tmp_path / "trips" / ".hoodie" / f"{trips_table.instants[-1]}.commit"
    last.write_text("{ this is not json")
    with pytest.raises(HudiTableError, match=f"Hudi table {trips_table.path}"):
        sf.read_hudi(trips_table.path).take_all()


def test_properties_without_table_type(trips_table, tmp_path):
    props = tmp_path / "trips" / ".hoodie" / "hoodie.properties"
    lines = [ln for ln in props.read_text().splitlines() if "table.type" not in ln]
    props.write_text("\n".join(lines) + "\n")
    with pytest.raises((HudiTableError, FileNotFoundError), match="trips"):
        sf.read_hudi(trips_table.path).take_all()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"query_type": "time_travel"}, ValueError, "not a valid Hudi query type"),
        ({"query_type": 3}, ValueError, "query type"),
        ({"filters": ("city", "=", "la")}, TypeError, "list of"),
        ({"filters": [("city", "~", "la")]}, ValueError, "op must be one of"),
        ({"filters": [("city", "=")]}, TypeError, "tuple"),
        ({"filters": [("fare", ">", 3)]}, TypeError, "must be a string"),
        ({"hudi_options": {"k": 1}}, TypeError, "hudi_options"),
        ({"storage_options": ["a"]}, TypeError, "storage_options"),
        (
            {
                "hudi_options": {
                    "hoodie.read.file_group.start_timestamp": "1",
                    "hoodie.read.start.timestamp": "2",
                }
            },
            ValueError,
            "different values",
        ),
    ],
)
def test_bad_arguments_raise_when_called(trips_table, kwargs, error, match):
    with pytest.raises(error, match=match):
        sf.read_hudi(trips_table.path, **kwargs)


@pytest.mark.parametrize("uri", ["", "   ", None, ["a", "b"]])
def test_bad_table_uri(uri):
    with pytest.raises(ValueError, match="one Hudi table"):
        sf.read_hudi(uri)


def test_filter_on_a_missing_column_names_the_columns(trips_table):
    with pytest.raises(ValueError, match="no column 'price'.*columns: .*fare"):
        sf.read_hudi(trips_table.path, filters=[("price", ">", "1")]).take_all()


def test_filter_value_the_column_cannot_hold(trips_table):
    with pytest.raises(ValueError, match="'abc' is not a value of column 'fare'"):
        sf.read_hudi(trips_table.path, filters=[("fare", ">", "abc")]).take_all()


def test_projection_of_a_missing_column(trips_table):
    with pytest.raises(ValueError, match="not in Hudi table"):
        sf.read_hudi(trips_table.path).select_columns(["nope"]).take_all()


def test_projection_of_a_missing_column_when_no_slice_is_read(trips_table):
    after_last = {"hoodie.read.file_group.start_timestamp": trips_table.instants[-1]}
    ds = sf.read_hudi(trips_table.path, query_type="incremental", hudi_options=after_last)
    assert ds.select_columns(["id"]).take_all() == []
    with pytest.raises(ValueError, match="not in Hudi table"):
        ds.select_columns(["nope"]).take_all()
