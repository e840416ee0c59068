"""Differential cases: hand-offs to the frameworks around a pipeline (Dask, TensorFlow,
PyTorch's to_torch). Spark and Modin need RayDP and Modin on Ray in Ray Data; their
differences are in test_documented_differences.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
from harness import case


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "a": np.arange(9, dtype=np.int64),
            "f": np.linspace(0.0, 2.0, 9),
            "s": [f"s{i}" for i in range(9)],
            "b": [i % 2 == 0 for i in range(9)],
        },
        index=np.arange(100, 109),
    )


@case("from_dask", requires=("dask",))
def from_dask_rows_types_and_index(m, tmp):
    """from_dask: rows, numeric and boolean types; the partitions' index is not a column"""
    import dask.dataframe as dd

    ds = m.from_dask(dd.from_pandas(_frame(), npartitions=3))
    schema = ds.schema()
    numeric = [(n, str(t)) for n, t in zip(schema.names, schema.types) if n != "s"]
    return ds.take_all(), schema.names, numeric, ds.to_pandas()["a"].tolist(), ds.count()


@case("Dataset.to_dask", requires=("dask",), slow=True)
def to_dask_partitions_meta_and_index(m, tmp):
    """to_dask: one partition per block, dtypes of the meta and of the partitions, index"""
    import dask
    from ray.util.dask import ray_dask_get

    ds = m.from_items([{"a": i, "f": i / 2, "s": str(i)} for i in range(6)], override_num_blocks=3)
    with dask.config.set(scheduler=ray_dask_get):  # Ray Data's to_dask needs Dask-on-Ray
        ddf = ds.to_dask()
        whole = ddf.compute()
    return [str(t) for t in ddf.dtypes], list(ddf.columns), whole, ddf.npartitions


@case("Dataset.to_dask", requires=("dask",), slow=True)
def to_dask_meta_argument(m, tmp):
    """to_dask(meta=...) is the frame's meta; verify_meta=False skips the check"""
    import dask
    from ray.util.dask import ray_dask_get

    ds = m.range(4, override_num_blocks=2)
    meta = pd.DataFrame({"id": pd.Series(dtype="float64")})
    with dask.config.set(scheduler=ray_dask_get):
        ddf = ds.to_dask(meta=meta, verify_meta=False)
        whole = ddf.compute()
    return [str(t) for t in ddf.dtypes], sorted(whole["id"].tolist())


@case("from_tf", requires=("tensorflow",))
def from_tf_dicts_and_tuples(m, tmp):
    """from_tf: dict elements become rows, other elements the item column; bytes stay bytes"""
    import tensorflow as tf

    dicts = tf.data.Dataset.from_tensor_slices(
        {"x": np.arange(5, dtype=np.int32), "v": np.ones((5, 2), np.float32), "s": [b"a"] * 5}
    )
    scalars = tf.data.Dataset.range(4)
    a, b = m.from_tf(dicts), m.from_tf(scalars)
    # the tensor column's type is each library's own tensor extension type: compare the rest
    plain = [(n, str(t)) for n, t in zip(a.schema().names, a.schema().types) if n != "v"]
    return a.take_all(), a.schema().names, plain, b.take_all(), b.schema()


@case("Dataset.to_tf", "DataIterator.to_tf", requires=("tensorflow",))
def to_tf_signature_and_batches(m, tmp):
    """to_tf: the inferred output signature and the batches (one column, lists of columns)"""
    items = [
        {"x": float(i), "y": i % 2, "w": np.full((2,), i, np.float32), "s": str(i)}
        for i in range(5)
    ]
    ds = m.from_items(items)
    single = ds.to_tf("x", "y", batch_size=2)
    several = ds.iterator().to_tf(["x", "w"], "y", additional_columns="s", batch_size=3)

    def plain(element):
        if isinstance(element, dict):
            return {k: plain(v) for k, v in element.items()}
        if isinstance(element, tuple):
            return tuple(plain(v) for v in element)
        return element.numpy()

    return (
        str(single.element_spec),
        [plain(e) for e in single],
        str(several.element_spec),
        [plain(e) for e in several],
    )


@case("Dataset.to_tf", requires=("tensorflow",))
def to_tf_unknown_column_raises(m, tmp):
    """to_tf with a column that is not in the dataset raises ValueError"""
    try:
        m.range(3).to_tf("nope", "id")
    except Exception as exc:
        return type(exc).__name__
    return "no error"


@case("Dataset.iter_tf_batches", "DataIterator.iter_tf_batches", requires=("tensorflow",))
def tf_batches_dtypes(m, tmp):
    """iter_tf_batches: a dict of tensors per batch, dtypes inferred or given"""
    import tensorflow as tf

    ds = m.from_items([{"a": i, "b": i * 0.5} for i in range(5)])
    inferred = [
        {k: (v.dtype.name, v.numpy()) for k, v in b.items()}
        for b in ds.iter_tf_batches(batch_size=2)
    ]
    cast = [
        {k: (v.dtype.name, v.numpy()) for k, v in b.items()}
        for b in ds.iterator().iter_tf_batches(batch_size=3, dtypes=tf.float32)
    ]
    return inferred, cast


@case("DataIterator.to_torch", requires=("torch",))
def to_torch_features_and_labels(m, tmp):
    """to_torch: (features, label) tensors for the shapes feature_columns takes"""
    import torch

    ds = m.from_items([{"a": i, "b": float(i) * 2, "y": i % 2} for i in range(5)])
    it = ds.iterator()

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if value is None:
            return None
        return (str(value.dtype), value.numpy())

    variants = [
        it.to_torch(label_column="y", batch_size=2),
        it.to_torch(
            label_column="y",
            feature_columns=["a"],
            batch_size=3,
            unsqueeze_label_tensor=False,
            unsqueeze_feature_tensors=False,
        ),
        it.to_torch(
            label_column="y",
            feature_columns=[["a"], ["b"]],
            feature_column_dtypes=[torch.float32, torch.float64],
            batch_size=2,
        ),
        it.to_torch(
            feature_columns={"x": ["a", "b"]}, label_column_dtype=torch.float32, batch_size=4
        ),
    ]
    return [[plain(batch) for batch in variant] for variant in variants]


@case("DataIterator.to_torch", requires=("torch",))
def to_torch_mismatched_dtypes_raise(m, tmp):
    """to_torch: feature_column_dtypes that do not match feature_columns raise when called"""
    import torch

    it = m.range(3).iterator()
    kinds = []
    for kwargs in (
        {"feature_columns": {"x": ["id"]}, "feature_column_dtypes": [torch.float32]},
        {"feature_columns": [["id"]], "feature_column_dtypes": {"x": torch.float32}},
        {"feature_columns": [["id"], ["id"]], "feature_column_dtypes": [torch.float32]},
    ):
        try:
            it.to_torch(**kwargs)
            kinds.append("no error")
        except Exception as exc:
            kinds.append(type(exc).__name__)
    return kinds
