"""The conformance suite of the Zarr connector, over a small store written with zarr.

``shardflow check-connector zarr`` runs it; so do the tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.optional import require
from shardflow.sdk.registry import get_registry
from shardflow.sdk.testing import DatasourceConformance

_ROWS, _CHUNK = 24, 4


def _values() -> np.ndarray:
    return np.arange(_ROWS * 3, dtype=np.int32).reshape(_ROWS, 3)


def write_store(path: Path, values: np.ndarray, chunks: tuple[int, ...]) -> None:
    """A consolidated Zarr v2 store at ``path`` holding ``values`` as the array ``x``."""
    zarr = require("zarr", "zarr", "The Zarr conformance suite")
    root = zarr.open_group(str(path), mode="w")
    root.create_dataset("x", data=values, chunks=chunks)
    zarr.consolidate_metadata(str(path))


class ZarrSuite(DatasourceConformance):
    """One array of 24 x 3 int32 values in chunks of 4 rows: one row per chunk."""

    name = "zarr"

    def expected_table(self) -> pa.Table:
        chunks = _values().reshape(_ROWS // _CHUNK, _CHUNK, 3)
        n = len(chunks)
        return pa.table(
            {
                "array": pa.array(["x"] * n, pa.string()),
                "chunk_index": pa.array([[i, 0] for i in range(n)], pa.list_(pa.int64())),
                "chunk_slices": pa.array(
                    [[[i * _CHUNK, (i + 1) * _CHUNK], [0, 3]] for i in range(n)],
                    pa.list_(pa.list_(pa.int64())),
                ),
                "chunk": pa.FixedShapeTensorArray.from_numpy_ndarray(chunks),
            }
        )

    def _source(self, store: Path) -> Any:
        made = get_registry().get(self.name).datasource
        if made is None:
            raise LookupError(f"connector {self.name!r} has no datasource")
        return made(str(store))

    def make_datasource(self, tmp_path: Path) -> Any:
        write_store(tmp_path / "data.zarr", _values(), (_CHUNK, 3))
        return self._source(tmp_path / "data.zarr")

    def make_empty_datasource(self, tmp_path: Path) -> Any:
        write_store(tmp_path / "empty.zarr", np.zeros((0, 3), np.int32), (_CHUNK, 3))
        return self._source(tmp_path / "empty.zarr")

    def make_bad_datasource(self, tmp_path: Path) -> Any:
        write_store(tmp_path / "broken.zarr", _values(), (_CHUNK, 3))
        (tmp_path / "broken.zarr" / "x" / "2.0").write_bytes(b"not a compressed chunk")
        return self._source(tmp_path / "broken.zarr")

    def bad_source_mentions(self, tmp_path: Path) -> list[str]:
        return ["broken.zarr"]
