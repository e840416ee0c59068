"""Differential cases: file sinks, save modes, write_parquet options."""

from __future__ import annotations

import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
from harness import Raised, case, exception_kind


def _files(folder) -> list:
    out = []
    for root, _, names in os.walk(folder):
        out += [os.path.relpath(os.path.join(root, n), folder) for n in names]
    return sorted(out)


def _rows(folder) -> list:
    return sorted(pq.read_metadata(os.path.join(folder, f)).num_rows for f in _files(folder))


def _shape(name: str) -> str:
    """A file name with its hex ids replaced, to compare naming schemes."""
    return re.sub(r"[0-9a-f]{32}|[0-9A-Za-z]{22}_[0-9a-f]{32}", "<uuid>", name)


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


@case("Dataset.write_parquet", "SaveMode")
def save_modes(m, tmp):
    """append adds, overwrite replaces, ignore keeps, error raises ValueError"""
    out = {}
    for mode in ("append", "overwrite", "ignore", "error"):
        folder = tmp / mode
        m.range(3).write_parquet(folder, mode="append")
        outcome = _raises(lambda f=folder, md=mode: m.range(5).write_parquet(f, mode=md))
        out[mode] = (outcome, m.read_parquet(folder).count())
    out["enum"] = _raises(lambda: m.range(2).write_parquet(tmp / "enum", mode=m.SaveMode.APPEND))
    return out


@case("Dataset.write_parquet", "Dataset.write_csv", "Dataset.write_json", "Dataset.write_numpy")
def empty_dataset_creates_nothing(m, tmp):
    """an empty dataset writes no file and creates no folder"""
    empty = m.range(10).filter(expr="id < 0")
    empty.write_parquet(tmp / "p", mode="append")
    empty.write_csv(tmp / "c", mode="append")
    empty.write_json(tmp / "j", mode="append")
    empty.write_numpy(tmp / "n", column="id", mode="append")
    return sorted(os.listdir(tmp))


@case("Dataset.write_parquet")
def default_file_names(m, tmp):
    """one file per write task, named {uuid}_{task:06}-{i}.parquet; csv {uuid}_{task:06}.csv"""
    m.range(6, override_num_blocks=2).write_parquet(tmp / "p", mode="append")
    m.range(6, override_num_blocks=2).write_csv(tmp / "c", mode="append")
    return [_shape(n) for n in _files(tmp / "p")], [_shape(n) for n in _files(tmp / "c")]


@case("FilenameProvider", "Dataset.write_csv", "Dataset.write_parquet", "Dataset.write_images")
def custom_filename_provider(m, tmp):
    """a FilenameProvider subclass names the files; row-based files derive from it"""
    import numpy as np
    import ray.data.datasource as rds

    base = rds.FilenameProvider if m.__name__ == "ray.data" else m.FilenameProvider

    class Named(base):
        def get_filename_for_task(self, write_uuid, task_index):
            return f"part-{task_index}.{self.file_format}"

    ds = m.range(4, override_num_blocks=2)
    ds.write_csv(tmp / "c", filename_provider=Named(file_format="csv"), mode="append")
    ds.write_parquet(tmp / "p", filename_provider=Named(file_format="parquet"), mode="overwrite")
    images = m.from_items([{"image": np.zeros((2, 2, 3), np.uint8)} for _ in range(2)])
    images.write_images(
        tmp / "i", column="image", filename_provider=Named(file_format="png"), mode="append"
    )
    return _files(tmp / "c"), _files(tmp / "p"), _files(tmp / "i")


@case("Dataset.write_parquet")
def max_and_min_rows_per_file(m, tmp):
    """max_rows_per_file splits a task's rows; min_rows_per_file joins blocks"""
    m.range(10, override_num_blocks=1).write_parquet(
        tmp / "max", max_rows_per_file=3, mode="append"
    )
    m.range(20, override_num_blocks=10).write_parquet(
        tmp / "min", min_rows_per_file=5, mode="append"
    )
    return _rows(tmp / "max"), sum(_rows(tmp / "min")), min(_rows(tmp / "min")[1:]) >= 5


@case("Dataset.write_parquet", slow=True)
def partition_cols_and_flavors(m, tmp):
    """partition_cols with the hive flavor (default) and bare-value folders (None)"""
    ds = m.from_items([{"k": i % 2, "v": i} for i in range(4)])
    ds.write_parquet(tmp / "hive", partition_cols=["k"], mode="append")
    ds.write_parquet(tmp / "dir", partition_cols=["k"], partitioning_flavor=None, mode="append")
    folders = lambda f: sorted({p.split("/")[0] for p in _files(f)})  # noqa: E731
    back = m.read_parquet(tmp / "hive").take_all()
    return folders(tmp / "hive"), folders(tmp / "dir"), sorted((r["k"], r["v"]) for r in back)


@case("Dataset.write_parquet")
def parquet_schema_compression_and_args_fn(m, tmp):
    """schema= casts, compression= picks the codec, arrow_parquet_args_fn sets row groups"""
    m.range(3).write_parquet(tmp / "s", schema=pa.schema([("id", pa.int32())]), mode="append")
    m.range(3, override_num_blocks=1).write_parquet(tmp / "z", compression="gzip", mode="append")
    m.range(30, override_num_blocks=1).write_parquet(
        tmp / "g", arrow_parquet_args_fn=lambda: {"row_group_size": 10}, mode="append"
    )
    codec = pq.read_metadata(tmp / "z" / _files(tmp / "z")[0]).row_group(0).column(0).compression
    groups = pq.read_metadata(tmp / "g" / _files(tmp / "g")[0]).num_row_groups
    return m.read_parquet(tmp / "s").schema(), codec, groups


@case("Dataset.write_parquet")
def bad_write_arguments(m, tmp):
    """invalid combinations raise ValueError"""
    ds = m.range(3)
    return [
        _raises(lambda: ds.write_parquet(tmp / "a", partitioning_flavor="hive")),
        _raises(lambda: ds.write_parquet(tmp / "b", min_rows_per_file=5, max_rows_per_file=2)),
    ]


@case("FileDatasink", "BlockBasedFileDatasink", "RowBasedFileDatasink", "Dataset.write_datasink")
def file_datasink_subclasses(m, tmp):
    """Ray-style subclasses: super().__init__(path, file_format=...), one file per task/row"""
    import ray.data.datasource as rds

    import shardflow.sdk as sdk

    base = rds if m.__name__ == "ray.data" else sdk

    class Lines(base.BlockBasedFileDatasink):
        def __init__(self, path):
            super().__init__(path, file_format="txt")

        def write_block_to_file(self, block, f):
            table = block.to_arrow() if hasattr(block, "to_arrow") else block
            f.write("\n".join(map(str, table.column("id").to_pylist())).encode())

    class Rows(base.RowBasedFileDatasink):
        def __init__(self, path):
            super().__init__(path, file_format="txt", mode="append")

        def write_row_to_file(self, row, f):
            f.write(str(row["id"]).encode())

    m.range(4, override_num_blocks=2).write_datasink(Lines(str(tmp / "blocks")))
    m.range(3, override_num_blocks=1).write_datasink(Rows(str(tmp / "rows")))
    blocks = sorted((tmp / "blocks" / n).read_text() for n in _files(tmp / "blocks"))
    rows = sorted((tmp / "rows" / n).read_text() for n in _files(tmp / "rows"))
    return blocks, rows, [_shape(n) for n in _files(tmp / "rows")]
