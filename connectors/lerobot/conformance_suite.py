"""The conformance suite of the LeRobot connector, over a sample dataset with image cameras.

Images are stored losslessly (PNG), so the expected table, built from what
:func:`~shardflow.connectors.lerobot.sample.write_sample_dataset` says it wrote, holds the
exact frames; the video path is checked against the writer's truth in the connector's tests.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa

from shardflow.connectors.lerobot.sample import SampleDataset, write_sample_dataset
from shardflow.sdk.registry import get_registry
from shardflow.sdk.tensor_types import ArrowVariableShapedTensorArray
from shardflow.sdk.testing import DatasourceConformance

HEIGHT, WIDTH = 6, 8
LENGTHS = (4, 6, 3, 5)


def _write(root: Path, lengths: tuple[int, ...] = LENGTHS) -> SampleDataset:
    return write_sample_dataset(
        str(root),
        episode_lengths=lengths,
        video_keys=(),
        image_keys=("observation.images.top",),
        episodes_per_data_file=2,
        height=HEIGHT,
        width=WIDTH,
    )


def expected_rows(sample: SampleDataset, height: int, width: int) -> pa.Table:
    """The table a read of a sample dataset with image cameras gives, from its truth."""
    rows = sample.rows
    columns: dict[str, pa.Array] = {
        "observation.state": pa.array(
            [r["observation.state"] for r in rows],
            pa.list_(pa.float32(), len(rows[0]["observation.state"])),
        ),
        "action": pa.array([r["action"] for r in rows], pa.list_(pa.float32())),
    }
    for key in sample.image_keys:
        columns[key] = ArrowVariableShapedTensorArray.from_numpy(
            [sample.expected_frame(r["index"], key, height, width) for r in rows]
        )
    columns["timestamp"] = pa.array([r["timestamp"] for r in rows], pa.float32())
    for name in ("frame_index", "episode_index", "index", "task_index"):
        columns[name] = pa.array([r[name] for r in rows], pa.int64())
    columns["task"] = pa.array([r["task"] for r in rows]).dictionary_encode()
    columns["dataset_index"] = pa.array([0] * len(rows), pa.int32())
    columns["stats"] = pa.array([json.dumps(sample.stats)] * len(rows)).dictionary_encode()
    return pa.table(columns)


class LeRobotSuite(DatasourceConformance):
    name = "lerobot"

    def _source(self, root: str, **options: Any) -> Any:
        datasource = get_registry().get(self.name).datasource  # as a third-party suite would
        assert datasource is not None
        return datasource(root, **options)

    def expected_table(self):
        with tempfile.TemporaryDirectory() as scratch:
            sample = _write(Path(scratch) / "robot")
        return expected_rows(sample, HEIGHT, WIDTH)

    def make_datasource(self, tmp_path):
        root = tmp_path / "robot"
        if not root.exists():
            _write(root)
        return self._source(str(root), read_granularity="episode")

    def make_empty_datasource(self, tmp_path):
        # One episode of no frames (a dataset without episodes is refused, as in Ray Data).
        _write(tmp_path / "empty", lengths=(0,))
        return self._source(str(tmp_path / "empty"))

    def make_bad_datasource(self, tmp_path):
        root = tmp_path / "bad"
        _write(root)
        broken = root / "data" / "chunk-000" / "file-001.parquet"
        broken.write_bytes(broken.read_bytes()[:40])
        return self._source(str(root))

    def bad_source_mentions(self, tmp_path):
        return ["file-001.parquet"]

    def predicates(self):
        from shardflow.sdk.expressions import col

        return [col("index") >= 9, col("task").is_in(["open the drawer"])]


__all__ = ["LeRobotSuite", "expected_rows"]
