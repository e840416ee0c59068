"""Datasources and Datasinks written the way Ray Data's documentation shows, on both backends."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import shardflow as sf
from shardflow.sdk import BlockMetadata, Datasink, Datasource, ReadTask, WriteResult


class SquaresDatasource(Datasource):
    """The older style: ``get_read_tasks(self, parallelism)`` and nothing else."""

    def __init__(self, n: int):
        self._n = n

    def get_read_tasks(self, parallelism: int) -> list[ReadTask]:
        n = self._n
        bounds = np.linspace(0, n, max(1, min(parallelism, n)) + 1, dtype=int)
        tasks = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            lo, hi = int(lo), int(hi)

            def read_fn(lo=lo, hi=hi):
                ids = np.arange(lo, hi)
                yield pa.table({"i": ids, "square": ids * ids})

            metadata = BlockMetadata(
                num_rows=hi - lo, size_bytes=16 * (hi - lo), input_files=None, exec_stats=None
            )
            tasks.append(ReadTask(read_fn, metadata))
        return tasks


class PandasShardsDatasource(Datasource):
    """The current style: limit and context arguments, a size estimate, pandas blocks."""

    def __init__(self, num_shards: int, rows_per_shard: int):
        self._num_shards = num_shards
        self._rows = rows_per_shard

    def estimate_inmemory_data_size(self) -> int | None:
        return self._num_shards * self._rows * 16

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context=None
    ) -> list[ReadTask]:
        tasks = []
        rows = self._rows
        for shard in range(self._num_shards):

            def read_fn(shard=shard):
                # two blocks per shard, as a reader of a larger file would yield
                half = rows // 2
                for lo, hi in ((0, half), (half, rows)):
                    yield pd.DataFrame({"shard": np.full(hi - lo, shard), "row": np.arange(lo, hi)})

            metadata = BlockMetadata(
                num_rows=rows, size_bytes=rows * 16, input_files=None, exec_stats=None
            )
            tasks.append(ReadTask(read_fn, metadata, per_task_row_limit=per_task_row_limit))
        return tasks


def test_datasource_with_parallelism_only(backend):
    ds = sf.read_datasource(SquaresDatasource(50), override_num_blocks=4)
    expected = [{"i": i, "square": i * i} for i in range(50)]
    assert ds.take_all() == expected
    assert ds.count() == 50
    assert ds.sum("square") == sum(i * i for i in range(50))


def test_datasource_with_limit_and_context(backend):
    ds = sf.read_datasource(PandasShardsDatasource(num_shards=5, rows_per_shard=8))
    expected = pd.DataFrame({"shard": np.repeat(np.arange(5), 8), "row": np.tile(np.arange(8), 5)})
    pd.testing.assert_frame_equal(ds.to_arrow().to_pandas(), expected, check_dtype=False)
    assert ds.limit(11).to_pandas()["row"].tolist() == list(range(8)) + [0, 1, 2]
    assert (
        ds.map_batches(lambda df: df[df["row"].to_numpy() % 2 == 0], batch_format="pandas").count()
        == 20
    )


# -- datasinks ---------------------------------------------------------------------------

COMPLETED: dict[str, WriteResult] = {}


class RecordingSink(Datasink):
    """Each ``write`` returns the ids it wrote; the driver-side callbacks record events."""

    def __init__(self, token: str = "", fail_task: int | None = None):
        self.token = token
        self.fail_task = fail_task
        self.events: list[tuple] = []

    def on_write_start(self, schema=None) -> None:
        self.events.append(("start",))

    def write(self, blocks, ctx) -> dict:
        ids = []
        for block in blocks:
            ids.extend(block.column("id").to_pylist())
        if ctx.task_idx == self.fail_task:
            raise RuntimeError(f"disk full in task {ctx.task_idx}")
        return {"task": ctx.task_idx, "ids": ids, "write_uuid": ctx.write_uuid}

    def on_write_complete(self, write_result: WriteResult) -> None:
        self.events.append(("complete", write_result))
        if self.token:
            COMPLETED[self.token] = write_result

    def on_write_failed(self, error: Exception) -> None:
        self.events.append(("failed", error))


def test_datasink_success(backend):
    sink = RecordingSink()
    assert sf.range(100, override_num_blocks=4).write_datasink(sink) is None
    assert [e[0] for e in sink.events] == ["start", "complete"]
    result = sink.events[1][1]
    assert isinstance(result, WriteResult)
    assert result.num_rows == 100
    assert result.size_bytes == pa.table({"id": np.arange(100, dtype=np.int64)}).nbytes
    assert [r["task"] for r in result.write_returns] == [0, 1, 2, 3]
    assert [i for r in result.write_returns for i in r["ids"]] == list(range(100))
    assert len({r["write_uuid"] for r in result.write_returns}) == 1


def test_datasink_after_transforms(backend):
    sink = RecordingSink()
    (
        sf.range(40, override_num_blocks=4)
        .map_batches(lambda b: {"id": b["id"] * 10})
        .filter(sf.col("id") >= 100)
        .write_datasink(sink)
    )
    result = sink.events[-1][1]
    assert [i for r in result.write_returns for i in r["ids"]] == list(range(100, 400, 10))
    assert result.num_rows == 30


@pytest.mark.timeout(60)
def test_datasink_failure_calls_on_write_failed_only(backend):
    sink = RecordingSink(fail_task=2)
    with pytest.raises(RuntimeError, match="disk full in task 2") as info:
        sf.range(100, override_num_blocks=4).write_datasink(sink)
    assert [e[0] for e in sink.events] == ["start", "failed"]
    assert sink.events[1][1] is info.value
    assert "Write" in str(info.value)


def test_datasink_registered_by_name(backend):
    sf.register_connector("sf-test-recording-sink", datasink=RecordingSink, replace=True)
    token = f"by-name-{backend}"
    COMPLETED.pop(token, None)
    sf.range(10, override_num_blocks=2).write_datasink("sf-test-recording-sink", token=token)
    result = COMPLETED[token]
    assert result.num_rows == 10
    assert [i for r in result.write_returns for i in r["ids"]] == list(range(10))


def test_write_datasink_validates_arguments():
    with pytest.raises(TypeError, match="Datasink"):
        sf.range(3).write_datasink(object())
    with pytest.raises(TypeError, match="by name"):
        sf.range(3).write_datasink(RecordingSink(), token="x")


def test_empty_dataset_write_completes(backend):
    sink = RecordingSink()
    sf.range(10).filter(sf.col("id") > 100).write_datasink(sink)
    assert sink.events[-1][0] == "complete"
    assert sink.events[-1][1].num_rows == 0
