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
