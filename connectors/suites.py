"""Conformance suites of the built-in connectors, over small sample datasets.

``shardflow check-connector <name>`` finds them through ``shardflow.connectors.conformance``;
the test suite runs them too. Each builds its connector through the registry, exactly as a
third-party package's suite would.
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from shardflow.connectors.range import RangeDatasource
from shardflow.sdk.expressions import col
from shardflow.sdk.optional import require
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import ConnectorConformance, DatasourceConformance


class RangeSuite(DatasourceConformance):
    name = "range"

    def make_datasource(self, tmp_path):
        return RangeDatasource(1000)

    def expected_table(self):
        return pa.table({"id": pa.array(np.arange(1000), pa.int64())})

    def make_empty_datasource(self, tmp_path):
        return RangeDatasource(0)

    def make_bad_datasource(self, tmp_path):
        return RangeDatasource(-1)

    def bad_source_mentions(self, tmp_path):
        return ["range"]

    def predicates(self):
        return [col("id") >= 500, col("id").is_in([1, 3, 999])]


# -- file connectors -------------------------------------------------------------------------


def _spec(name):
    return get_registry().get(name)


FILE_TABLE = pa.table(
    {
        "id": pa.array(np.arange(60), pa.int64()),
        "name": pa.array([f"n{i % 6}" for i in range(60)], pa.string()),
        "score": pa.array(np.arange(60) / 8, pa.float64()),
    }
)


def _visible_files(folder):
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts)
    )


class FileConformance(ConnectorConformance):
    """Shared hooks: the dataset as FILES files of format ``fmt`` in a folder."""

    fmt = ""
    files = 3

    def write_file(self, table, path):
        raise NotImplementedError

    def read_file(self, path):
        raise NotImplementedError

    def expected_table(self):
        return FILE_TABLE

    def make_datasource(self, tmp_path):
        folder = tmp_path / "data"
        folder.mkdir()
        table, step = self.expected_table(), -(-self.expected_table().num_rows // self.files)
        for i in range(self.files):
            self.write_file(table.slice(i * step, step), folder / f"part-{i}.{self.fmt}")
        (folder / "_SUCCESS").write_text("")
        return _spec(self.name).datasource(str(folder))

    def make_empty_datasource(self, tmp_path):
        (tmp_path / "empty").mkdir()
        return _spec(self.name).datasource(str(tmp_path / "empty"))

    def make_bad_datasource(self, tmp_path):
        folder = tmp_path / "bad"
        folder.mkdir()
        self.write_file(self.expected_table().slice(0, 5), folder / f"good.{self.fmt}")
        (folder / f"broken.{self.fmt}").write_bytes(self.bad_bytes)
        return _spec(self.name).datasource(str(folder))

    def bad_source_mentions(self, tmp_path):
        return [f"broken.{self.fmt}"]

    def make_datasink(self, tmp_path):
        spec = _spec(self.name)
        if spec.datasink is None:
            return None
        return spec.datasink(str(tmp_path / "out"))

    def read_back(self, tmp_path):
        files = _visible_files(tmp_path / "out")
        if not files:
            raise FileNotFoundError(f"{tmp_path / 'out'}: nothing committed")
        return pa.concat_tables([self.read_file(f) for f in files])


class ParquetSuite(FileConformance):
    name, fmt, bad_bytes = "parquet", "parquet", b"PAR1 this is not parquet"

    def write_file(self, table, path):
        pq.write_table(table, path)

    def read_file(self, path):
        return pq.read_table(path)


class CSVSuite(FileConformance):
    name, fmt, bad_bytes = "csv", "csv", b'id,name,score\n1,"unterminated\n2,x'

    def write_file(self, table, path):
        pacsv.write_csv(table, path)

    def read_file(self, path):
        return pacsv.read_csv(path)


class JSONSuite(FileConformance):
    name, fmt, bad_bytes = "json", "jsonl", b'{"id": 1, "name": \n'

    def write_file(self, table, path):
        path.write_text("".join(json.dumps(row) + "\n" for row in table.to_pylist()))

    def read_file(self, path):
        return pajson.read_json(path)


class TextSuite(FileConformance):
    name, fmt, bad_bytes = "text", "txt", b"ok line\n\xff\xfe not utf-8 \xc3\x28\n"

    def expected_table(self):
        return pa.table({"text": [f"line {i} of the text" for i in range(30)]})

    def write_file(self, table, path):
        path.write_text("".join(line + "\n" for line in table.column("text").to_pylist()))


class BinarySuite(FileConformance):
    name, fmt = "binary", "bin"

    def expected_table(self):
        return pa.table({"bytes": pa.array([bytes([i]) * (i + 1) for i in range(5)], pa.binary())})

    def make_datasource(self, tmp_path):
        folder = tmp_path / "data"
        folder.mkdir()
        for i, data in enumerate(self.expected_table().column("bytes").to_pylist()):
            (folder / f"f{i}.bin").write_bytes(data)
        return _spec(self.name).datasource(str(folder))

    def make_bad_datasource(self, tmp_path):
        return _spec(self.name).datasource(str(tmp_path / "missing.bin"))

    def bad_source_mentions(self, tmp_path):
        return ["missing.bin"]


def _tensor_table(column, arrays):
    return pa.table({column: pa.FixedShapeTensorArray.from_numpy_ndarray(np.stack(arrays))})


class NumpySuite(FileConformance):
    name, fmt, bad_bytes = "numpy", "npy", b"\x93NUMPY but not really"

    def expected_table(self):
        return _tensor_table("data", list(np.arange(40, dtype=np.int64).reshape(20, 2)))

    def write_file(self, table, path):
        np.save(path, table.column("data").combine_chunks().to_numpy_ndarray())

    def read_file(self, path):
        return _tensor_table("data", list(np.load(path)))

    def make_datasink(self, tmp_path):
        return _spec(self.name).datasink(str(tmp_path / "out"), column="data")


class ORCSuite(FileConformance):
    name, fmt, bad_bytes = "orc", "orc", b"ORC this is not an ORC file"

    def write_file(self, table, path):
        import pyarrow.orc

        pyarrow.orc.write_table(table, str(path))

    def read_file(self, path):
        import pyarrow.orc

        return pyarrow.orc.read_table(str(path))


class ImagesSuite(FileConformance):
    name, fmt, bad_bytes = "images", "png", b"\x89PNG\r\n\x1a\n truncated"

    def expected_table(self):
        rng = np.random.default_rng(0)
        images = [rng.integers(0, 255, (4, 5, 3), dtype=np.uint8) for _ in range(6)]
        return _tensor_table("image", images)

    def make_datasource(self, tmp_path):
        folder = tmp_path / "data"
        folder.mkdir()
        images = self.expected_table().column("image").combine_chunks().to_numpy_ndarray()
        for i, image in enumerate(images):
            self.write_file(image, folder / f"img-{i}.png")
        return _spec(self.name).datasource(str(folder))

    def write_file(self, image, path):
        Image = require("PIL.Image", "images", "The images conformance suite")

        if isinstance(image, pa.Table):
            image = image.column("image").combine_chunks().to_numpy_ndarray()[0]
        Image.fromarray(image).save(path)

    def read_file(self, path):
        Image = require("PIL.Image", "images", "The images conformance suite")

        with Image.open(path) as image:
            return _tensor_table("image", [np.asarray(image)])

    def make_datasink(self, tmp_path):
        return _spec(self.name).datasink(str(tmp_path / "out"), column="image", file_format="png")


# -- Iceberg ---------------------------------------------------------------------------------


class IcebergSuite(ConnectorConformance):
    """Tables of a pyiceberg SqlCatalog (sqlite) with a warehouse under ``tmp_path``."""

    name = "iceberg"
    appends = 3

    def _catalog_kwargs(self, tmp_path):
        (tmp_path / "warehouse").mkdir(exist_ok=True)
        return {
            "name": "default",
            "type": "sql",
            "uri": f"sqlite:///{tmp_path}/catalog.db",
            "warehouse": f"file://{tmp_path}/warehouse",
        }

    def _table(self, tmp_path, name, appends=0):
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError

        kwargs = self._catalog_kwargs(tmp_path)
        catalog = load_catalog(kwargs.pop("name"), **kwargs)
        catalog.create_namespace_if_not_exists("db")
        try:
            return catalog.load_table(f"db.{name}")
        except NoSuchTableError:
            pass
        data = self.expected_table()
        table = catalog.create_table(f"db.{name}", schema=data.schema)
        step = -(-data.num_rows // max(appends, 1))
        for i in range(appends):
            table.append(data.slice(i * step, step))
        return table

    def expected_table(self):
        return FILE_TABLE

    def make_datasource(self, tmp_path):
        self._table(tmp_path, "data", self.appends)
        return _spec(self.name).datasource("db.data", catalog_kwargs=self._catalog_kwargs(tmp_path))

    def make_empty_datasource(self, tmp_path):
        self._table(tmp_path, "empty")
        kwargs = self._catalog_kwargs(tmp_path)
        return _spec(self.name).datasource("db.empty", catalog_kwargs=kwargs)

    def make_bad_datasource(self, tmp_path):
        table = self._table(tmp_path, "bad", self.appends)
        path = next(iter(table.scan().plan_files())).file.file_path
        with open(path[len("file://") :], "wb") as f:
            f.write(b"PAR1 this is not parquet")
        self._bad_file = path.rsplit("/", 1)[-1]
        return _spec(self.name).datasource("db.bad", catalog_kwargs=self._catalog_kwargs(tmp_path))

    def bad_source_mentions(self, tmp_path):
        return [self._bad_file]

    def make_datasink(self, tmp_path):
        self._table(tmp_path, "out")
        return _spec(self.name).datasink("db.out", catalog_kwargs=self._catalog_kwargs(tmp_path))

    def read_back(self, tmp_path):
        return self._table(tmp_path, "out").refresh().scan().to_arrow()


SUITES = {
    s.name: s
    for s in (
        RangeSuite,
        ParquetSuite,
        CSVSuite,
        JSONSuite,
        TextSuite,
        BinarySuite,
        NumpySuite,
        ORCSuite,
        ImagesSuite,
    )
}
if importlib.util.find_spec("pyiceberg") is not None:  # an optional dependency
    SUITES[IcebergSuite.name] = IcebergSuite
# -- connectors whose suites live in their own packages (conformance_suite.py) -----------------


def _installed(*modules: str) -> bool:
    """Whether the optional libraries a suite needs are installed."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except ImportError:  # a parent package is missing
        return False


_PACKAGED_SUITES = {  # connector package: (suite class, the libraries it needs)
    "audio": ("AudioSuite", ("soundfile",)),
    "video": ("VideoSuite", ("av",)),
    "lance": ("LanceSuite", ("lance",)),
    "sql": ("SQLSuite", ()),
    "delta": ("DeltaSuite", ("deltalake",)),
    "hudi": ("HudiSuite", ("hudi",)),
    "webdataset": ("WebDatasetSuite", ()),
    "tfrecords": ("TFRecordsSuite", ("google.protobuf", "google_crc32c")),
    "avro": ("AvroSuite", ("fastavro",)),
    "mcap": ("MCAPSuite", ("mcap",)),
    "lerobot": ("LeRobotSuite", ("av", "PIL")),
    "zarr": ("ZarrSuite", ("zarr",)),
}


def _add_packaged_suites() -> None:
    for package, (class_name, needs) in _PACKAGED_SUITES.items():
        if _installed(*needs):
            module = importlib.import_module(f"shardflow.connectors.{package}.conformance_suite")
            suite = getattr(module, class_name)
            SUITES[suite.name] = suite


_add_packaged_suites()
