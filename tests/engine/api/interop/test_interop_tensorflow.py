"""to_tf / iter_tf_batches / from_tf with TensorFlow: values against NumPy, signatures as
Ray Data infers them."""

from __future__ import annotations

import numpy as np
import pytest

import shardflow as sf

tf = pytest.importorskip("tensorflow")


def _rows(n: int = 7) -> list[dict]:
    return [
        {"x": float(i), "v": np.full((3,), i, np.float32), "y": i % 2, "s": f"r{i}"}
        for i in range(n)
    ]


def test_to_tf_values_and_signature(backend):
    rows = _rows()
    data = sf.from_items(rows).to_tf(["x", "v"], "y", additional_columns="s", batch_size=3)
    features, label, extra = data.element_spec
    assert features["x"].shape.as_list() == [None] and features["x"].dtype == tf.float64
    assert features["v"].shape.as_list() == [None, 3] and features["v"].dtype == tf.float32
    assert label.dtype == tf.int64 and extra.dtype == tf.string
    for _epoch in range(2):  # each iteration runs the dataset again
        batches = list(data)
        assert [len(b[1]) for b in batches] == [3, 3, 1]
        x = np.concatenate([b[0]["x"].numpy() for b in batches])
        v = np.concatenate([b[0]["v"].numpy() for b in batches])
        np.testing.assert_array_equal(x, [r["x"] for r in rows])
        np.testing.assert_array_equal(v, np.stack([r["v"] for r in rows]))
        labels = np.concatenate([b[1].numpy() for b in batches])
        np.testing.assert_array_equal(labels, [r["y"] for r in rows])
        strings = [s.decode() for b in batches for s in b[2].numpy()]
        assert strings == [r["s"] for r in rows]


def test_to_tf_feeds_keras_fit():
    sf.init(backend="local")
    ds = sf.from_items([{"x": float(i), "y": 2.0 * i} for i in range(32)])
    model = tf.keras.Sequential([tf.keras.Input(shape=(1,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    data = ds.to_tf("x", "y", batch_size=8).map(lambda x, y: (tf.expand_dims(x, 1), y))
    history = model.fit(data, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2


def test_to_tf_ragged_lists():
    sf.init(backend="local")
    ds = sf.from_items([{"l": list(range(i)), "y": i} for i in range(1, 5)])
    data = ds.to_tf("l", "y", batch_size=4)
    assert isinstance(data.element_spec[0], tf.RaggedTensorSpec)
    ((features, _),) = list(data)
    assert features.to_list() == [list(range(i)) for i in range(1, 5)]


def test_iter_tf_batches_dtypes():
    sf.init(backend="local")
    ds = sf.from_items([{"a": i, "b": i * 0.5} for i in range(5)])
    batches = list(ds.iter_tf_batches(batch_size=2, dtypes={"a": tf.float32}))
    assert [b["a"].dtype for b in batches] == [tf.float32] * 3
    assert [b["b"].dtype for b in batches] == [tf.float64] * 3
    assert np.concatenate([b["a"].numpy() for b in batches]).tolist() == [0, 1, 2, 3, 4]


def test_from_tf_round_trip(backend):
    x = np.arange(10, dtype=np.int32)
    v = np.arange(20, dtype=np.float32).reshape(10, 2)
    source = tf.data.Dataset.from_tensor_slices({"x": x, "v": v, "s": [b"a", b"b"] * 5})
    ds = sf.from_tf(source)
    rows = ds.take_all()
    assert [r["x"] for r in rows] == x.tolist()
    np.testing.assert_array_equal(np.stack([r["v"] for r in rows]), v)
    assert [r["s"] for r in rows] == [b"a", b"b"] * 5
    back = ds.to_tf("v", "x", batch_size=10)
    ((features, labels),) = list(back)
    np.testing.assert_array_equal(features.numpy(), v)
    np.testing.assert_array_equal(labels.numpy(), x)


def test_to_tf_names_a_missing_column():
    with pytest.raises(ValueError, match="no column named 'nope'"):
        sf.range(3).to_tf("nope", "id")
    with pytest.raises(TypeError, match="tf.data.Dataset"):
        sf.from_tf([1, 2])
