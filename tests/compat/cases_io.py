"""Differential cases: reads and writes as Ray Data 2.60 does them: nested JSON Lines,
compressed text by extension (Snappy too), default file extensions, custom read tasks,
what a file sink's ``write_block_to_file`` receives, save modes."""

from __future__ import annotations

import gzip
import inspect
import io
import json

import pandas as pd
import pyarrow as pa
from harness import case, exception_kind


def _error(call):
    try:
        call()
    except Exception as exc:
        return exception_kind(exc)
    return "no error"


@case("read_json")
def json_lines_of_lists_and_objects(m, tmp):
    """JSON Lines whose values are lists, nested objects and lists of objects"""
    rows = [
        {"a": 1, "l": [1, 2], "o": {"x": 1, "y": "s"}, "lo": [{"k": 1}]},
        {"a": 2, "l": [], "o": {"x": 2, "y": None}, "lo": []},
        {"a": 3, "l": None, "o": None, "lo": None},
    ]
    (tmp / "n.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = m.read_json(str(tmp / "n.jsonl"))
    return [ds.take_all(), ds.schema()]


@case("read_text", "read_json", "read_csv", "read_binary_files", requires=("snappy",))
def compressed_files_by_their_extension(m, tmp):
    """.gz and .snappy (Snappy's framing format) files are read decompressed"""
    import snappy

    def snappy_bytes(data: bytes) -> bytes:
        out = io.BytesIO()
        snappy.stream_compress(io.BytesIO(data), out)
        return out.getvalue()

    (tmp / "t").mkdir()
    (tmp / "t" / "a.txt.snappy").write_bytes(snappy_bytes(b"x\ny\n" * 3))
    (tmp / "t" / "b.txt.gz").write_bytes(gzip.compress(b"z\n"))
    (tmp / "rows.csv.snappy").write_bytes(snappy_bytes(b"a,b\n1,2\n3,4\n"))
    (tmp / "rows.jsonl.snappy").write_bytes(snappy_bytes(b'{"a": 1}\n{"a": 2}\n'))
    return [
        sorted(r["text"] for r in m.read_text(str(tmp / "t")).take_all()),
        m.read_csv(str(tmp / "rows.csv.snappy")).take_all(),
        m.read_json(str(tmp / "rows.jsonl.snappy"), file_extensions=None).take_all(),
        m.read_binary_files(str(tmp / "t" / "a.txt.snappy")).take_all()[0]["bytes"],
    ]


@case(
    "read_csv",
    "read_json",
    "read_parquet",
    "read_text",
    "read_numpy",
    "read_images",
    "read_binary_files",
)
def default_file_extensions_of_each_reader(m, tmp):
    """each reader's default file_extensions, and file_extensions=None reading every file"""
    defaults = {
        name: inspect.signature(getattr(m, name)).parameters["file_extensions"].default
        for name in (
            "read_csv",
            "read_json",
            "read_parquet",
            "read_text",
            "read_numpy",
            "read_images",
            "read_binary_files",
        )
    }
    (tmp / "d").mkdir()
    (tmp / "d" / "a.csv").write_text("a\n1\n")
    (tmp / "d" / "b.data").write_text("a\n2\n")
    return [
        defaults,
        sorted(r["a"] for r in m.read_csv(str(tmp / "d")).take_all()),
        sorted(r["a"] for r in m.read_csv(str(tmp / "d"), file_extensions=None).take_all()),
        sorted(r["a"] for r in m.read_csv(str(tmp / "d"), file_extensions=["csv"]).take_all()),
    ]


def _source(m, payload):
    block = __import__(f"{m.__name__}.block" if m.__name__ == "ray.data" else "shardflow.sdk")

    class Source(m.Datasource):
        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, **kwargs):
            meta_cls = (
                block.data.block.BlockMetadata if m.__name__ == "ray.data" else m.BlockMetadata
            )
            meta = meta_cls(num_rows=None, size_bytes=None, input_files=None, exec_stats=None)
            return [m.ReadTask(payload, meta)]

    return Source()


@case("ReadTask", "read_datasource")
def read_tasks_of_frames_tables_and_rows(m, tmp):
    """custom read tasks yielding pandas frames, Arrow tables, generators; lists of rows fail"""
    out = []
    for payload in (
        lambda: [pd.DataFrame({"a": [1, 2], "s": ["x", None]})],
        lambda: [pa.table({"a": [1, 2]}), pa.table({"a": [3]})],
        lambda: (pd.DataFrame({"a": [i]}) for i in range(3)),
    ):
        ds = m.read_datasource(_source(m, payload))
        # the Arrow form (Ray Data's schema() of pandas blocks names pandas' str "string")
        out.append([ds.take_all(), ds.take_batch(batch_format="pyarrow").schema])
    ds = m.read_datasource(_source(m, lambda: [[{"a": 1}, {"a": 2}]]))
    out.append(_error(ds.take_all))
    return out


@case("BlockBasedFileDatasink", "Dataset.write_datasink", "FileDatasink")
def file_sinks_receive_block_accessors(m, tmp):
    """write_block_to_file gets Ray Data's BlockAccessor (to_arrow, to_pandas, num_rows ...)"""
    base = m.datasource.BlockBasedFileDatasink

    class Report(base):
        def __init__(self, path):
            super().__init__(path, file_format="json")

        def write_block_to_file(self, block, file):
            table = block.to_arrow()
            frame = block.to_pandas()
            report = {
                "rows": block.num_rows(),
                "size": block.size_bytes() > 0,
                "columns": table.column_names,
                "dtypes": [str(t) for t in frame.dtypes],
                "first": next(iter(block.iter_rows(public_row_format=True))),
                "numpy": block.to_numpy("id").tolist(),
                "schema": str(block.schema()),
            }
            file.write(json.dumps(report, default=str).encode())

    m.range(4, override_num_blocks=1).map_batches(
        lambda b: {"id": b["id"], "s": b["id"].astype(str)}
    ).write_datasink(Report(str(tmp / "out")))
    (written,) = sorted((tmp / "out").iterdir())
    return json.loads(written.read_text())


@case("SaveMode", "Dataset.write_parquet", slow=True)
def save_modes_on_existing_and_new_folders(m, tmp):
    """append, overwrite, ignore and error (names and enum members) on existing and new data"""
    out = {}
    for mode in ("append", "overwrite", "ignore", "error", m.SaveMode.OVERWRITE):
        name = str(mode).replace(".", "_")
        existing = tmp / f"existing-{name}"
        m.range(3).write_parquet(str(existing), mode="append")
        try:
            m.range(2).write_parquet(str(existing), mode=mode)
            out[f"existing-{name}"] = m.read_parquet(str(existing)).count()
        except Exception as exc:
            out[f"existing-{name}"] = exception_kind(exc)
        m.range(2).write_parquet(str(tmp / f"new-{name}"), mode=mode)
        out[f"new-{name}"] = m.read_parquet(str(tmp / f"new-{name}")).count()
    out["members"] = sorted((k, str(v.value)) for k, v in m.SaveMode.__members__.items())
    return out
