"""from_modin / to_modin with Modin (skipped where Modin is not installed: Modin 0.37 caps
pandas below 2.4, so it cannot join the test extra; `make test-modin` runs them in a venv with
pandas 2.3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import shardflow as sf

mpd = pytest.importorskip("modin.pandas")


def test_modin_round_trip(backend):
    import modin.config

    if backend == "local":
        modin.config.Engine.put("Python")
    frame = pd.DataFrame({"a": np.arange(10), "f": np.linspace(0, 1, 10), "s": list("abcdefghij")})
    ds = sf.from_modin(mpd.DataFrame(frame))
    assert ds.to_pandas()["a"].tolist() == frame["a"].tolist()
    back = ds.to_modin()._to_pandas()
    pd.testing.assert_frame_equal(
        back.reset_index(drop=True), ds.to_pandas().reset_index(drop=True), check_dtype=False
    )
    assert back["f"].tolist() == frame["f"].tolist()


def test_from_modin_checks_its_argument():
    with pytest.raises(TypeError, match="modin.pandas.DataFrame"):
        sf.from_modin(pd.DataFrame({"a": [1]}))


def test_from_modin_streams_within_the_memory_budget(backend, fresh_context):
    """Eight partitions of ~1.5 MiB pass a 4 MiB budget: never all held at once, and on
    Modin on Ray each partition is fetched by a task, not collected on the driver."""
    import modin.config

    if backend == "local":
        modin.config.Engine.put("Python")
    else:
        modin.config.Engine.put("Ray")
    fresh_context.memory_budget_bytes = 4 * 1024 * 1024
    frame = pd.DataFrame({"id": np.arange(80_000), "s": ["x" * 150] * 80_000})
    with modin.config.context(NPartitions=8):
        df = mpd.DataFrame(frame)
        ds = sf.from_modin(df)
    seen = []
    for batch in ds.iter_batches(batch_size=4096, batch_format="pyarrow"):
        seen.append(batch["id"].to_numpy())
    assert np.array_equal(np.concatenate(seen), frame["id"].to_numpy())
    stats = ds._last_stats
    assert stats.operators[0].tasks == 8  # a task per partition
    total = stats.operators[0].bytes_out
    assert total >= 80_000 * 150
    assert 0 < stats.peak_bytes_in_flight <= fresh_context.memory_budget_bytes, stats.to_string()
