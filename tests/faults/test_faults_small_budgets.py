"""Nothing waits forever at a small memory budget: every exchange and every write finishes
at any budget from 1 byte up, with the rows pandas and pyarrow compute.

Each case runs in a thread joined under a hard timeout, so a regression fails (naming the
case) instead of hanging the suite. The data is read from Parquet files, so read tasks start
only while the budget has room, as in a real pipeline.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf

pytestmark = pytest.mark.timeout(240)

MiB = 1 << 20
#: Far beyond what any case here takes; a case still running then waits forever.
HANG_S = 60


def _table(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "k": rng.permutation(rows * 7)[:rows].astype(np.int64),  # unique sort keys
            "g": rng.integers(0, 500, rows),
            "x": rng.random(rows),
            "s": np.arange(rows, dtype=np.int64),
        }
    )


def _write_files(table: pa.Table, folder: str, files: int) -> str:
    os.makedirs(folder)
    bounds = np.linspace(0, table.num_rows, files + 1).astype(int)
    for i in range(files):
        part = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        pq.write_table(part, os.path.join(folder, f"part-{i}.parquet"))
    return folder


@pytest.fixture(scope="module")
def issue_data(tmp_path_factory) -> tuple[str, pa.Table]:
    """The issue's input: 5.5 MB of Arrow data in 8 Parquet files."""
    table = _table(230_000, seed=1)
    assert 5.4e6 < table.nbytes < 7.5e6
    return _write_files(table, str(tmp_path_factory.mktemp("issue") / "in"), 8), table


@pytest.fixture(scope="module")
def small_data(tmp_path_factory) -> tuple[str, pa.Table]:
    """A smaller input for the property test: about 1.9 MB in 6 files."""
    table = _table(60_000, seed=2)
    return _write_files(table, str(tmp_path_factory.mktemp("small") / "in"), 6), table


def _within(seconds: float, label: str, run: Callable[[], Any]) -> Any:
    """``run()``'s result; fails when it has not returned after ``seconds`` (a hang)."""
    result: list[Any] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(run())
        except BaseException as exc:  # reported below
            error.append(exc)

    thread = threading.Thread(target=target, daemon=True, name=f"case {label}")
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{label} waited for more than {seconds} s: it hangs"
    if error:
        raise error[0]
    return result[0]


def _by(table: pa.Table, *columns: str) -> pd.DataFrame:
    return table.to_pandas().sort_values(list(columns)).reset_index(drop=True)


def _read_back(folder: str) -> pa.Table:
    return pq.read_table(folder)


# -- the issue's cases ------------------------------------------------------------------


@pytest.mark.parametrize("budget", [1, 1 * MiB, 2 * MiB, 4 * MiB])
def test_sort_take_and_sort_write_finish_at_small_budgets(issue_data, tmp_path, budget):
    folder, table = issue_data
    sf.DataContext.get_current().memory_budget_bytes = budget
    expected = _by(table, "k")

    rows = _within(
        HANG_S, f"sort().take(10) at {budget} B", lambda: sf.read_parquet(folder).sort("k").take(10)
    )
    assert pd.DataFrame(rows).equals(expected.head(10))

    out = str(tmp_path / "sorted")
    _within(
        HANG_S,
        f"sort().write_parquet at {budget} B",
        lambda: sf.read_parquet(folder).sort("k").write_parquet(out),
    )
    written = _read_back(out).to_pandas()
    # A sort's files hold consecutive key ranges: read back in file order, rows are sorted.
    assert written.reset_index(drop=True).equals(expected)


# -- every exchange and writes, at budgets from 1 byte up -------------------------------


def _sort(ds: Any, table: pa.Table, tmp: str) -> None:
    got = pd.DataFrame(ds.sort("k").take_all())
    assert got.equals(_by(table, "k"))


def _sort_descending_take(ds: Any, table: pa.Table, tmp: str) -> None:
    got = pd.DataFrame(ds.sort("k", descending=True).take(10))
    expected = table.to_pandas().sort_values("k", ascending=False).head(10)
    assert got.equals(expected.reset_index(drop=True))


def _random_shuffle(ds: Any, table: pa.Table, tmp: str) -> None:
    got = ds.random_shuffle(seed=3).to_arrow()
    assert got.num_rows == table.num_rows
    assert not np.array_equal(got["s"].to_numpy(), table["s"].to_numpy())
    assert _by(got, "s").equals(_by(table, "s"))


def _groupby_aggregate(ds: Any, table: pa.Table, tmp: str) -> None:
    got = _by(ds.groupby("g").sum("x").to_arrow(), "g")
    expected = table.to_pandas().groupby("g", as_index=False)["x"].sum()
    assert got["g"].equals(expected["g"])
    assert np.allclose(got["sum(x)"], expected["x"])


def _map_groups(ds: Any, table: pa.Table, tmp: str) -> None:
    def largest(group: pd.DataFrame) -> pd.DataFrame:
        return group.nlargest(1, "x")[["g", "s"]]

    got = _by(ds.groupby("g").map_groups(largest, batch_format="pandas").to_arrow(), "g")
    frame = table.to_pandas()
    expected = frame.loc[frame.groupby("g")["x"].idxmax(), ["g", "s"]]
    assert got.equals(expected.sort_values("g").reset_index(drop=True))


def _repartition_shuffle(ds: Any, table: pa.Table, tmp: str) -> None:
    out = ds.repartition(5, shuffle=True).materialize()
    got = out.to_arrow()
    assert out.num_blocks() == 5
    assert _by(got, "s").equals(_by(table, "s"))


def _repartition_split(ds: Any, table: pa.Table, tmp: str) -> None:
    got = ds.repartition(3).to_arrow()
    assert got.to_pandas().equals(table.to_pandas())  # order is kept


def _repartition_by_keys(ds: Any, table: pa.Table, tmp: str) -> None:
    blocks = ds.repartition(4, keys=["g"], sort=True).materialize()
    seen: set[int] = set()
    for block in blocks.iter_batches(batch_size=None, batch_format="pyarrow"):
        keys = set(block["g"].to_pylist())
        assert not keys & seen  # a key never spans two blocks
        seen |= keys
    assert _by(blocks.to_arrow(), "s").equals(_by(table, "s"))


def _randomize_block_order(ds: Any, table: pa.Table, tmp: str) -> None:
    got = ds.randomize_block_order(seed=5).to_arrow()
    assert _by(got, "s").equals(_by(table, "s"))


def _global_aggregate(ds: Any, table: pa.Table, tmp: str) -> None:
    frame = table.to_pandas()
    assert ds.count() == len(frame)
    assert np.isclose(ds.sum("x"), frame["x"].sum())
    assert ds.max("k") == frame["k"].max()


def _join(ds: Any, table: pa.Table, tmp: str) -> None:
    right = table.select(["s", "g"]).rename_columns(["s", "h"]).slice(0, table.num_rows // 2)
    got = ds.join(sf.from_arrow(right), "inner", 4, on=("s",)).to_arrow()
    expected = table.to_pandas().merge(right.to_pandas(), on="s")
    assert _by(got, "s")[list(expected.columns)].equals(_by(pa.Table.from_pandas(expected), "s"))


def _unique(ds: Any, table: pa.Table, tmp: str) -> None:
    assert sorted(ds.unique("g")) == sorted(set(table["g"].to_pylist()))


def _write(ds: Any, table: pa.Table, tmp: str) -> None:
    out = os.path.join(tmp, "plain")
    ds.write_parquet(out)
    assert _by(_read_back(out), "s").equals(_by(table, "s"))


def _sort_then_write(ds: Any, table: pa.Table, tmp: str) -> None:
    out = os.path.join(tmp, "sorted")
    ds.sort("k").write_parquet(out)
    assert _read_back(out).to_pandas().equals(_by(table, "k"))


def _shuffle_then_write_csv(ds: Any, table: pa.Table, tmp: str) -> None:
    out = os.path.join(tmp, "csv")
    ds.random_shuffle(seed=4).write_csv(out)
    back = sf.read_csv(out).to_arrow()
    assert _by(back, "s").drop(columns="x").equals(_by(table, "s").drop(columns="x"))


CASES: dict[str, Callable[[Any, pa.Table, str], None]] = {
    "sort": _sort,
    "sort descending, take": _sort_descending_take,
    "random_shuffle": _random_shuffle,
    "groupby aggregate": _groupby_aggregate,
    "groupby map_groups": _map_groups,
    "repartition shuffle": _repartition_shuffle,
    "repartition": _repartition_split,
    "repartition by keys": _repartition_by_keys,
    "randomize_block_order": _randomize_block_order,
    "global aggregate": _global_aggregate,
    "join": _join,
    "unique": _unique,
    "write_parquet": _write,
    "sort, write_parquet": _sort_then_write,
    "random_shuffle, write_csv": _shuffle_then_write_csv,
}

budgets = st.one_of(
    st.integers(min_value=1, max_value=64 * 1024),  # far below one block
    st.integers(min_value=64 * 1024, max_value=8 * MiB),  # about a block to the whole input
)


@settings(
    max_examples=int(os.environ.get("SHARDFLOW_BUDGET_EXAMPLES", "45")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    case=st.sampled_from(sorted(CASES)), budget=budgets, source=st.sampled_from(["files", "blocks"])
)
def test_no_exchange_or_write_waits_forever(small_data, tmp_path_factory, case, budget, source):
    folder, table = small_data
    sf.DataContext.get_current().memory_budget_bytes = budget
    tmp = str(tmp_path_factory.mktemp("case"))

    def run() -> None:
        if source == "files":
            ds = sf.read_parquet(folder)
        else:  # blocks already in memory, several per former file
            ds = sf.from_arrow([table.slice(i, 7_500) for i in range(0, table.num_rows, 7_500)])
        CASES[case](ds, table, tmp)

    _within(HANG_S, f"{case} over {source} at a budget of {budget} B", run)


@pytest.mark.parametrize("case", ["sort", "groupby aggregate", "join", "sort, write_parquet"])
def test_exchanges_finish_at_a_one_byte_budget(backend, small_data, tmp_path, case):
    folder, table = small_data
    sf.DataContext.get_current().memory_budget_bytes = 1
    _within(
        HANG_S,
        f"{case} on {backend}",
        lambda: CASES[case](sf.read_parquet(folder), table, str(tmp_path)),
    )
