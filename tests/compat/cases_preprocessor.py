"""Differential cases: ``Preprocessor``, the base class of fitted transformations, with small
subclasses as a user writes them."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
from harness import Raised, case, exception_kind


def _raises(fn):
    try:
        fn()
    except Exception as exc:
        return Raised(exception_kind(exc))
    return "no error"


def _subclasses(base, aggregate):
    """The users' preprocessors, subclassing ``base`` (``m.Preprocessor``)."""

    class Centerer(base):
        """Fitted: subtracts the mean of a column (pandas batches)."""

        def __init__(self, column):
            super().__init__()
            self.column = column

        def _fit(self, ds):
            self.mean_ = ds.mean(self.column)
            return self

        def _transform_pandas(self, df):
            df[self.column] = df[self.column] - self.mean_
            return df

    class Doubler(base):
        """Stateless: doubles a column (NumPy batches)."""

        _is_fittable = False

        def _transform_numpy(self, batch):
            batch["x"] = batch["x"] * 2
            return batch

    class Both(base):
        """Both formats; preferred_batch_format decides (NumPy here)."""

        _is_fittable = False

        def _transform_pandas(self, df):
            return df.assign(fmt="pandas")

        def _transform_numpy(self, batch):
            batch["fmt"] = np.array(["numpy"] * len(batch["x"]))
            return batch

        @classmethod
        def preferred_batch_format(cls):
            return type(base.preferred_batch_format())("numpy")

    class WithStats(base):
        """Registers aggregations in _fit; fit computes them into stats_."""

        def __init__(self, columns):
            super().__init__()
            self.columns = columns

        def _fit(self, ds):
            self.stat_computation_plan.add_aggregator(
                aggregator_fn=lambda c: aggregate.Max(on=c, alias_name=f"max({c})"),
                columns=self.columns,
            )
            return self

        def _transform_pandas(self, df):
            for c in self.columns:
                df[c] = df[c] / self.stats_[f"max({c})"]
            return df

    class Nothing(base):
        """Neither _fit nor a transform."""

    classes = (Centerer, Doubler, Both, WithStats, Nothing)
    for cls in classes:  # importable by name, so that workers and pickle (serialize) find them
        cls.__qualname__ = cls.__name__ = f"{cls.__name__}_{base.__module__.split('.')[0]}"
        cls.__module__ = __name__
        globals()[cls.__name__] = cls
    return classes


def _load_subclasses():
    import shardflow
    import shardflow.aggregate

    found = {"shardflow": _subclasses(shardflow.Preprocessor, shardflow.aggregate)}
    try:
        import ray.data
        import ray.data.aggregate
    except ImportError:  # pragma: no cover - the suite skips without Ray Data
        return found
    found["ray.data"] = _subclasses(ray.data.Preprocessor, ray.data.aggregate)
    return found


SUBCLASSES = _load_subclasses()


def _rows(ds):
    return ds.take_all()


@case("Preprocessor", note="fit, transform, fit_transform and fit status of user subclasses")
def preprocessor_fit_and_transform(m, tmp):
    """fit computes state (attributes ending with _), transform maps batches in the format of
    the _transform_* implemented; not fitted: PreprocessorNotFittedException (a
    RuntimeError); a stateless one is NOT_FITTABLE and fit returns it"""
    Centerer, Doubler, Both, WithStats, Nothing = SUBCLASSES[m.__name__]
    ds = m.from_items([{"x": 1.0, "y": 4.0}, {"x": 3.0, "y": 8.0}], override_num_blocks=1)
    centerer = Centerer("x")
    before = [centerer.fit_status().value, centerer.has_stats()]
    not_fitted = [
        _raises(lambda: centerer.transform(ds)),
        _raises(lambda: centerer.transform_batch(pd.DataFrame({"x": [1.0]}))),
    ]
    fitted = centerer.fit(ds)
    doubler = Doubler()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Centerer("x").fit(ds).fit(ds)  # refitting warns that the state is replaced
    stats = WithStats(["x", "y"]).fit(ds)
    return [
        before,
        not_fitted,
        [fitted is centerer, centerer.fit_status().value, centerer.mean_],
        _rows(centerer.transform(ds)),
        _rows(Centerer("y").fit_transform(ds)),
        [doubler.fit_status().value, doubler.fit(ds) is doubler],
        _rows(doubler.transform(ds)),
        _rows(Both().transform(ds)),
        [stats.stats_, stats.has_stats(), stats.fit_status().value],
        _rows(stats.transform(ds, batch_size=1)),
        len([w for w in caught if "already been called" in str(w.message)]),
        _raises(lambda: Nothing().fit(ds)),
        _raises(lambda: Nothing()._determine_transform_to_use()),
        [Centerer("x").get_input_columns(), WithStats(["x"]).get_input_columns()],
        [Centerer("x").get_output_columns()],
    ]


@case("Preprocessor", note="transform_batch on each batch type, and serialization")
def preprocessor_batches_and_serialization(m, tmp):
    """transform_batch converts a DataFrame, a pyarrow Table or a dict of arrays to the
    format of the _transform_* used; serialize/deserialize round-trips the fitted state"""
    Centerer, Doubler, Both, WithStats, Nothing = SUBCLASSES[m.__name__]
    ds = m.from_items([{"x": 1.0}, {"x": 3.0}], override_num_blocks=1)
    centerer = Centerer("x").fit(ds)
    doubler = Doubler()
    restored = m.Preprocessor.deserialize(centerer.serialize())
    frame = pd.DataFrame({"x": [10.0, 20.0]})
    return [
        centerer.transform_batch(frame),
        centerer.transform_batch(pa.table({"x": [10.0]})),
        centerer.transform_batch({"x": np.array([10.0, 30.0])}),
        doubler.transform_batch({"x": np.array([1, 2])}),
        doubler.transform_batch(pa.table({"x": [1, 2]})),
        doubler.transform_batch(pd.DataFrame({"x": [1, 2], "y": [0, 0]})),
        # one column: _transform_numpy gets that column's array, not a dict
        _raises(lambda: doubler.transform_batch(pd.DataFrame({"x": [1, 2]}))),
        _raises(lambda: doubler.transform_batch([1, 2])),
        _raises(lambda: centerer.transform_batch({"x": [1.0]})),
        isinstance(centerer.serialize(), str),
        [type(restored).__name__ == type(centerer).__name__, restored.mean_],
        restored.fit_status().value,
        restored.transform_batch(pd.DataFrame({"x": [2.0]})),
        _rows(restored.transform(ds)),
        [m.Preprocessor.FitStatus.FITTED.value, [s.name for s in m.Preprocessor.FitStatus]],
        m.Preprocessor.preferred_batch_format().value,
    ]
