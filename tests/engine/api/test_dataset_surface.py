"""Dataset.mix, Dataset.summary and the ObjectRef conversions on both backends.

Mix is checked against a model of its rule written here from its documented behaviour
(the next block comes from the input furthest behind its share of the rows; ties to the
larger weight, then the earlier input), on generated block layouts; summary against pandas
and NumPy; the ObjectRef conversions against the rows they were made from.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shardflow as sf


def _blocks(start: int, sizes: list[int]) -> tuple[sf.Dataset, list[list[int]]]:
    """A dataset whose blocks hold ``sizes`` rows, numbered from ``start``; and the blocks."""
    blocks, value = [], start
    for size in sizes:
        blocks.append(list(range(value, value + size)))
        value += size
    tables = [pa.table({"x": pa.array(b, pa.int64())}) for b in blocks]
    return sf.from_arrow(tables), blocks


def _model(inputs: list[list[list[int]]], weights: list[float], shortest: bool) -> list[int]:
    """The rows mix gives, from the rule in its docstring."""
    total_weight = sum(weights)
    shares = [w / total_weight for w in weights]
    queues = [list(blocks) for blocks in inputs]
    passed = [0] * len(inputs)
    out: list[int] = []
    while True:
        total = sum(passed)
        live = [i for i in range(len(inputs)) if shortest or queues[i]]
        if not live:
            return out
        best = max(live, key=lambda i: (shares[i] * total - passed[i], shares[i], -i))
        if not queues[best]:
            return out  # stop on the shortest: the input whose turn it is ran out
        block = queues[best].pop(0)
        passed[best] += len(block)
        out.extend(block)


_sizes = st.lists(st.integers(min_value=1, max_value=4), min_size=0, max_size=5)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    layouts=st.lists(_sizes, min_size=1, max_size=3),
    raw_weights=st.lists(st.integers(min_value=1, max_value=5), min_size=3, max_size=3),
    shortest=st.booleans(),
)
def test_mix_follows_its_rule(fresh_context, layouts, raw_weights, shortest):
    sf.init(backend="local")
    datasets, inputs = [], []
    for n, sizes in enumerate(layouts):
        ds, blocks = _blocks(1000 * n, sizes)
        datasets.append(ds)
        inputs.append(blocks)
    weights = [float(w) for w in raw_weights[: len(layouts)]]
    condition = (
        sf.MixStoppingCondition.STOP_ON_SHORTEST
        if shortest
        else sf.MixStoppingCondition.STOP_ON_LONGEST_DROP
    )
    mixed = datasets[0].mix(*datasets[1:], weights=weights, stopping_condition=condition)
    assert [r["x"] for r in mixed.take_all()] == _model(inputs, weights, shortest)


@pytest.mark.timeout(120)
def test_mix_on_both_backends(backend):
    a, a_blocks = _blocks(0, [2, 1, 3, 1])
    b, b_blocks = _blocks(100, [1, 1, 4])
    weights = [0.7, 0.3]
    for shortest in (False, True):
        condition = sf.MixStoppingCondition(
            "stop_on_shortest" if shortest else "stop_on_longest_drop"
        )
        mixed = a.map_batches(lambda batch: batch).mix(
            b, weights=weights, stopping_condition=condition
        )
        got = [r["x"] for r in mixed.take_all()]
        assert got == _model([a_blocks, b_blocks], weights, shortest)
    # A limit after a mix stops its inputs early and keeps the order.
    assert [r["x"] for r in a.mix(b).limit(3).take_all()] == _model(
        [a_blocks, b_blocks], [1, 1], False
    )[:3]


def test_mix_argument_errors():
    a, _ = _blocks(0, [1])
    with pytest.raises(ValueError, match="must match number of weights"):
        a.mix(a, weights=[1.0])
    with pytest.raises(ValueError, match="Weights must be positive"):
        a.mix(a, weights=[1.0, 0.0])
    with pytest.raises(ValueError, match="Unknown stopping condition"):
        a.mix(a, stopping_condition="stop_on_shortest")
    with pytest.raises(TypeError, match="mix takes Datasets"):
        a.mix([a])


def test_summary_against_pandas(fresh_context):
    rng = np.random.default_rng(7)
    values = rng.integers(-5, 5, size=200).astype(float)
    missing = rng.random(200) < 0.1
    values[missing] = np.nan  # stored as nulls below (NaN makes Ray Data's mean NaN too)
    words = rng.choice(["a", "b", "c", None], size=200).tolist()
    ds = sf.from_arrow(
        [
            pa.table(
                {
                    "v": pa.array(values[i : i + 50], mask=missing[i : i + 50]),
                    "w": words[i : i + 50],
                }
            )
            for i in range(0, 200, 50)
        ]
    )
    stats = ds.summary().to_pandas().set_index("statistic")
    frame = pd.DataFrame({"v": values, "w": words})
    assert stats.loc["count", "v"] == 200
    assert stats.loc["mean", "v"] == pytest.approx(frame["v"].mean())
    assert stats.loc["std", "v"] == pytest.approx(frame["v"].std(ddof=0))
    assert stats.loc["min", "v"] == frame["v"].min()
    assert stats.loc["max", "v"] == frame["v"].max()
    assert stats.loc["missing_pct", "v"] == pytest.approx(frame["v"].isna().mean() * 100)
    present = frame["v"].dropna()
    assert stats.loc["zero_pct", "v"] == pytest.approx((present == 0).mean() * 100)
    assert stats.loc["missing_pct", "w"] == pytest.approx(frame["w"].isna().mean() * 100)
    top = stats.loc["approx_topk[0]", "w"]
    counts = frame["w"].value_counts()
    assert top == {"w": counts.index[0], "count": int(counts.iloc[0])}


def test_summary_argument_errors(fresh_context):
    ds = sf.from_items([{"a": 1}])
    with pytest.raises(ValueError, match="not found in dataset schema"):
        ds.summary(columns=["b"])
    with pytest.raises(TypeError, match="list of column names"):
        ds.summary(columns="a")
    with pytest.raises(TypeError, match="override_dtype_agg_mapping"):
        ds.summary(override_dtype_agg_mapping=[1])


@pytest.mark.timeout(120)
def test_object_refs_on_both_backends(backend):
    frame = pd.DataFrame({"a": np.arange(6), "s": [f"r{i}" for i in range(6)]})
    ds = sf.from_pandas(frame, override_num_blocks=3)
    pandas_refs = ds.to_pandas_refs()
    numpy_refs = ds.to_numpy_refs(column="a")
    arrow_refs = ds.to_arrow_refs()
    if backend == "ray":
        import ray

        assert all(isinstance(r, ray.ObjectRef) for r in pandas_refs + numpy_refs)
        frames, arrays = ray.get(pandas_refs), ray.get(numpy_refs)
    else:
        frames, arrays = pandas_refs, numpy_refs
    assert len(frames) == 3
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True), frame)
    np.testing.assert_array_equal(np.concatenate(arrays), frame["a"].to_numpy())
    # Round trips through the refs each backend gives.
    assert sf.from_pandas_refs(pandas_refs).to_pandas().equals(frame)
    assert sf.from_arrow_refs(arrow_refs).take_all() == frame.to_dict("records")
    back = sf.from_numpy_refs(numpy_refs)
    assert [r["data"] for r in back.take_all()] == frame["a"].tolist()
    assert back.num_blocks() == 3


def test_object_refs_argument_errors(fresh_context):
    with pytest.raises(ValueError, match="list of Ray object refs"):
        sf.from_pandas_refs([1])
    with pytest.raises(ValueError, match="Ray object ref or a list"):
        sf.from_arrow_refs("table")
    with pytest.raises(KeyError, match="nope"):
        sf.range(3).to_numpy_refs(column="nope")


def test_dataset_ids_and_copies(fresh_context):
    ds = sf.range(3)
    uid = ds.get_dataset_id().split("_")[1]
    assert ds.get_dataset_id() == f"dataset_{uid}_-1"
    ds.take_all()
    ds.take_all()
    assert ds.get_dataset_id() == f"dataset_{uid}_1"
    copied = sf.Dataset.copy(ds)
    assert copied.take_all() == ds.take_all()
    assert copied.get_dataset_id().split("_")[1] != uid
    assert sf.Dataset.copy(ds, _deep_copy=True).context is not ds.context
    assert ds.map(lambda r: r).context is ds.context is sf.DataContext.get_current()


@pytest.mark.timeout(120)
def test_stats_summaries_on_both_backends(backend):
    context = sf.DataContext.get_current()
    ds = sf.range(20, override_num_blocks=2).map_batches(lambda b: b)
    assert ds.get_stats_summary().operators_stats == []
    context.enable_stats_summary_collection = True
    before = len(sf.list_stats_summaries())
    ds.take_all()
    summaries = sf.list_stats_summaries()
    assert len(summaries) == before + 1
    summary = summaries[-1]
    assert summary.dataset_uuid == ds.get_dataset_id().split("_")[1]
    assert summary.operators_stats[-1].output_num_rows.sum == 20
    assert summary.to_string() == ds.get_stats_summary().to_string() == str(ds.stats())
    context.enable_stats_summary_collection = False
    ds.take_all()
    assert len(sf.list_stats_summaries()) == before + 1


def test_explain_runs_nothing(backend, capsys):
    ds = sf.range(10).map(lambda r: r).filter(lambda r: r["id"] > 2).limit(3)
    ds.explain()
    out = capsys.readouterr().out
    titles = [line for line in out.splitlines() if line.startswith("--------")]
    assert titles == [
        "-------- Logical Plan --------",
        "-------- Logical Plan (Optimized) --------",
        "-------- Physical Plan --------",
        "-------- Physical Plan (Optimized) --------",
    ]
    assert "LimitOperator[Limit[3]]" in out
    assert ds._last_stats is None and ds.get_dataset_id().endswith("_-1")
