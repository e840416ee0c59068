"""``Preprocessor``: the base class of fitted data transformations, as Ray Data's
``ray.data.Preprocessor``.

A preprocessor is fitted on a Dataset (``fit``: it computes what it needs, a mean or a
vocabulary, into attributes whose names end with ``_``) and then transforms Datasets
(``transform``: a ``map_batches`` of its ``_transform_pandas``, ``_transform_numpy`` or
``_transform_arrow``) or single batches (``transform_batch``). Subclasses override ``_fit``
(or set ``_is_fittable = False``) and at least one ``_transform_*`` method, as with Ray
Data, so a preprocessor written for Ray Data runs on shardflow Datasets unchanged.

Examples:
    >>> import shardflow as sf
    >>> class Centerer(sf.Preprocessor):
    ...     def __init__(self, column):
    ...         super().__init__()
    ...         self.column = column
    ...     def _fit(self, ds):
    ...         self.mean_ = ds.mean(self.column)
    ...         return self
    ...     def _transform_pandas(self, df):
    ...         df[self.column] = df[self.column] - self.mean_
    ...         return df
    >>> ds = sf.from_items([{"x": 1.0}, {"x": 3.0}])
    >>> Centerer("x").fit_transform(ds).take_all()
    [{'x': -1.0}, {'x': 1.0}]
"""

from __future__ import annotations

import abc
import base64
import collections.abc
import pickle
import warnings
from collections.abc import Callable
from enum import Enum
from typing import Any

__all__ = ["BatchFormat", "Preprocessor", "PreprocessorNotFittedException", "StatComputationPlan"]


class BatchFormat(str, Enum):
    """The batch formats a preprocessor transforms (Ray Data's ``BatchFormat``)."""

    PANDAS = "pandas"
    ARROW = "arrow"
    NUMPY = "numpy"


class PreprocessorNotFittedException(RuntimeError):
    """Raised when a preprocessor that needs fitting transforms before ``fit``."""


class StatComputationPlan:
    """Aggregations a preprocessor's ``_fit`` registers; ``fit`` computes them in one pass
    over the dataset and stores the results in ``stats_``, as Ray Data's.

    ``add_aggregator(aggregator_fn=..., columns=[...])`` adds ``aggregator_fn(column)`` (an
    aggregation of ``shardflow.aggregate`` named by its ``alias_name``) for each column,
    ``add_callable_stat(...)`` a function computing statistics its own way.
    """

    def __init__(self) -> None:
        self._specs: collections.deque[Any] = collections.deque()

    def reset(self) -> None:
        """Forget every registered statistic."""
        self._specs.clear()

    def add_aggregator(
        self,
        *,
        aggregator_fn: Callable[[str], Any],
        post_process_fn: Callable[[Any], Any] = lambda x: x,
        columns: list[str],
        batch_format: BatchFormat | None = None,
    ) -> None:
        """Register ``aggregator_fn(column)`` for each of ``columns``; its result, passed
        through ``post_process_fn`` (as an Arrow scalar with ``batch_format=ARROW``, else as
        a Python value), is stored under the aggregation's name."""
        for column in columns:
            self._specs.append(("aggregate", aggregator_fn(column), post_process_fn, batch_format))

    def add_callable_stat(
        self,
        *,
        stat_fn: Callable[[Callable[[str], str]], dict[str, Any]],
        stat_key_fn: Callable[[str], str],
        post_key_fn: Callable[[str], str] | None = None,
        post_process_fn: Callable[[Any], Any] = lambda x: x,
        columns: list[str],
    ) -> None:
        """Register ``stat_fn(stat_key_fn)``, which returns a dict of statistics keyed by
        ``stat_key_fn(column)``; each is stored under ``post_key_fn(column)``."""
        self._specs.append(
            (
                "callable",
                stat_fn,
                post_process_fn,
                (columns, stat_key_fn, post_key_fn or stat_key_fn),
            )
        )

    def has_custom_stat_fn(self) -> bool:
        return any(spec[0] == "callable" for spec in self._specs)

    def compute(self, dataset: Any) -> dict[str, Any]:
        """Run the registered statistics on ``dataset`` and return them by name."""
        stats: dict[str, Any] = {}
        aggregates = [spec for spec in self._specs if spec[0] == "aggregate"]
        if aggregates:
            table = (
                dataset.groupby(None)
                .aggregate(*[s[1] for s in aggregates])
                .take_batch(1, batch_format="pyarrow")
            )
            for _, agg, post_process, batch_format in aggregates:
                value = table.column(agg.name)[0]
                stats[agg.name] = post_process(
                    value if batch_format == BatchFormat.ARROW else value.as_py()
                )
        for kind, stat_fn, post_process, extra in self._specs:
            if kind != "callable":
                continue
            columns, stat_key_fn, post_key_fn = extra
            result = stat_fn(stat_key_fn)
            for column in columns:
                stats[post_key_fn(column)] = post_process(result[stat_key_fn(column)])
        return stats

    def __iter__(self) -> Any:
        return iter([spec[1] for spec in self._specs if spec[0] == "aggregate"])


class Preprocessor(abc.ABC):  # noqa: B024 (as Ray Data's: subclasses pick what to override)
    """A fitted data transformation, as Ray Data's ``Preprocessor``: subclass it.

    Override ``_fit(ds)`` (returning ``self``) to compute state into attributes ending with
    ``_``, or set ``_is_fittable = False`` for a stateless one; and override at least one
    of ``_transform_pandas(df)``, ``_transform_numpy(batch)``, ``_transform_arrow(table)``
    (with several, ``preferred_batch_format()`` picks, pandas by default).
    ``_get_transform_config()`` may return more arguments of ``map_batches``.

    Examples:
        >>> import shardflow as sf
        >>> class AddOne(sf.Preprocessor):
        ...     _is_fittable = False
        ...     def _transform_numpy(self, batch):
        ...         return {"id": batch["id"] + 1}
        >>> AddOne().transform(sf.range(2)).take_all()
        [{'id': 1}, {'id': 2}]
    """

    class FitStatus(str, Enum):
        """Whether a preprocessor is fitted."""

        NOT_FITTABLE = "NOT_FITTABLE"
        NOT_FITTED = "NOT_FITTED"
        PARTIALLY_FITTED = "PARTIALLY_FITTED"  # for chains of preprocessors
        FITTED = "FITTED"

    _is_fittable = True

    def __init__(self) -> None:
        self._stat_computation_plan = StatComputationPlan()
        self.stats_: dict[str, Any] = {}

    @property
    def stat_computation_plan(self) -> StatComputationPlan:
        """The statistics ``_fit`` registers, computed by ``fit`` into ``stats_``."""
        if "_stat_computation_plan" not in self.__dict__:  # a subclass skipped __init__
            self._stat_computation_plan = StatComputationPlan()
        return self._stat_computation_plan

    def _check_has_fitted_state(self) -> bool:
        """Whether an attribute ending with ``_`` holds a (truthy) fitted value."""
        return any(name.endswith("_") and getattr(self, name) for name in vars(self))

    def fit_status(self) -> Preprocessor.FitStatus:
        """``NOT_FITTABLE``, ``FITTED`` (after ``fit``, or with fitted attributes) or
        ``NOT_FITTED``."""
        if not self._is_fittable:
            return Preprocessor.FitStatus.NOT_FITTABLE
        if getattr(self, "_fitted", False) or self._check_has_fitted_state():
            return Preprocessor.FitStatus.FITTED
        return Preprocessor.FitStatus.NOT_FITTED

    def fit(self, ds: Any) -> Preprocessor:
        """Fit this preprocessor to ``ds``; fitting again replaces the fitted state.

        Args:
            ds: The Dataset to fit on.

        Returns:
            This preprocessor, fitted.
        """
        _check_dataset(ds, "fit")
        status = self.fit_status()
        if status == Preprocessor.FitStatus.NOT_FITTABLE:
            return self
        if status in (Preprocessor.FitStatus.FITTED, Preprocessor.FitStatus.PARTIALLY_FITTED):
            warnings.warn(
                "`fit` has already been called on the preprocessor (or at least one "
                "contained preprocessors if this is a chain). All previously fitted state "
                "will be overwritten!",
                stacklevel=2,
            )
        self.stat_computation_plan.reset()
        self.stats_ = {}
        fitted = self._fit(ds)._fit_execute(ds)
        self._fitted = True
        return fitted

    def _fit_execute(self, dataset: Any) -> Preprocessor:
        self.stats_ |= self.stat_computation_plan.compute(dataset)
        return self

    def has_stats(self) -> bool:
        """Whether ``fit`` computed statistics into ``stats_``."""
        return bool(getattr(self, "stats_", None))

    def fit_transform(
        self,
        ds: Any,
        *,
        transform_num_cpus: float | None = None,
        transform_memory: float | None = None,
        transform_batch_size: int | None = None,
        transform_concurrency: int | None = None,
    ) -> Any:
        """Fit to ``ds``, then transform it.

        Args:
            ds: The Dataset.
            transform_num_cpus: CPUs per transform worker.
            transform_memory: Heap memory in bytes per transform worker.
            transform_batch_size: Rows per transformed batch.
            transform_concurrency: Most transform workers at once.

        Returns:
            The transformed Dataset.
        """
        self.fit(ds)
        return self.transform(
            ds,
            num_cpus=transform_num_cpus,
            memory=transform_memory,
            batch_size=transform_batch_size,
            concurrency=transform_concurrency,
        )

    def transform(
        self,
        ds: Any,
        *,
        batch_size: int | None = None,
        num_cpus: float | None = None,
        memory: float | None = None,
        concurrency: int | None = None,
    ) -> Any:
        """Transform ``ds`` (lazily, a ``map_batches`` of the ``_transform_*`` method).

        Args:
            ds: The Dataset.
            batch_size: Rows per batch.
            num_cpus: CPUs per worker.
            memory: Heap memory in bytes per worker.
            concurrency: Most workers at once.

        Returns:
            The transformed Dataset.

        Raises:
            PreprocessorNotFittedException: if the preprocessor needs ``fit`` first.
        """
        _check_dataset(ds, "transform")
        if self.fit_status() in (
            Preprocessor.FitStatus.PARTIALLY_FITTED,
            Preprocessor.FitStatus.NOT_FITTED,
        ):
            raise PreprocessorNotFittedException(
                "`fit` must be called before `transform`, "
                "or simply use fit_transform() to run both steps"
            )
        return self._transform(
            ds, batch_size=batch_size, num_cpus=num_cpus, memory=memory, concurrency=concurrency
        )

    def transform_batch(self, data: Any) -> Any:
        """Transform one batch: a pandas DataFrame, a ``pyarrow.Table``, a dict of NumPy
        arrays or one array, converted to the format of the ``_transform_*`` method used.

        Raises:
            PreprocessorNotFittedException: if the preprocessor needs ``fit`` first.
        """
        if self.fit_status() in (
            Preprocessor.FitStatus.PARTIALLY_FITTED,
            Preprocessor.FitStatus.NOT_FITTED,
        ):
            raise PreprocessorNotFittedException("`fit` must be called before `transform_batch`.")
        return self._transform_batch(data)

    def _fit(self, ds: Any) -> Preprocessor:
        """Subclasses override this instead of ``fit``."""
        raise NotImplementedError()

    def _determine_transform_to_use(self) -> BatchFormat:
        cls = type(self)
        has = {
            BatchFormat.PANDAS: cls._transform_pandas is not Preprocessor._transform_pandas,
            BatchFormat.NUMPY: cls._transform_numpy is not Preprocessor._transform_numpy,
            BatchFormat.ARROW: cls._transform_arrow is not Preprocessor._transform_arrow,
        }
        implemented = [fmt for fmt, present in has.items() if present]
        if len(implemented) > 1:
            return self.preferred_batch_format()
        if implemented:
            return implemented[0]
        raise NotImplementedError(
            "None of `_transform_numpy`, `_transform_pandas` or `_transform_arrow` are "
            "implemented. At least one of these transform functions must be implemented for "
            "Preprocessor transforms."
        )

    def _transform(
        self,
        ds: Any,
        batch_size: int | None,
        num_cpus: float | None = None,
        memory: float | None = None,
        concurrency: int | None = None,
    ) -> Any:
        transform_type = self._determine_transform_to_use()
        kwargs = self._get_transform_config()
        for name, value in (
            ("num_cpus", num_cpus),
            ("memory", memory),
            ("batch_size", batch_size),
            ("concurrency", concurrency),
        ):
            if value is not None:
                kwargs[name] = value
        functions: dict[BatchFormat, tuple[Callable[[Any], Any], str]] = {
            BatchFormat.PANDAS: (self._transform_pandas, "pandas"),
            BatchFormat.NUMPY: (self._transform_numpy, "numpy"),
            BatchFormat.ARROW: (self._transform_arrow, "pyarrow"),
        }
        fn, batch_format = functions[transform_type]
        return ds.map_batches(fn, batch_format=batch_format, zero_copy_batch=True, **kwargs)

    def _get_transform_config(self) -> dict[str, Any]:
        """More arguments of ``map_batches`` for ``transform`` (subclasses may override)."""
        return {}

    def _transform_batch(self, data: Any) -> Any:
        import numpy as np
        import pandas as pd
        import pyarrow as pa

        if not isinstance(data, (pd.DataFrame, pa.Table, collections.abc.Mapping, np.ndarray)):
            raise ValueError(
                "`transform_batch` is currently only implemented for Pandas DataFrames, "
                f"pyarrow Tables, NumPy ndarray and dictionary of ndarray. Got {type(data)}."
            )
        transform_type = self._determine_transform_to_use()
        if transform_type == BatchFormat.PANDAS:
            return self._transform_pandas(_batch_to_pandas(data))
        if transform_type == BatchFormat.NUMPY:
            return self._transform_numpy(_batch_to_numpy(data))
        if not isinstance(data, pa.Table):
            data = pa.Table.from_pandas(_batch_to_pandas(data), preserve_index=False)
        return self._transform_arrow(data.replace_schema_metadata(None))

    def _transform_arrow(self, table: Any) -> Any:
        """Transform a batch as a ``pyarrow.Table`` (subclasses may override)."""
        raise NotImplementedError()

    def _transform_pandas(self, df: Any) -> Any:
        """Transform a batch as a pandas DataFrame (subclasses may override)."""
        raise NotImplementedError()

    def _transform_numpy(self, np_data: Any) -> Any:
        """Transform a batch as a dict of NumPy arrays (subclasses may override)."""
        raise NotImplementedError()

    @classmethod
    def preferred_batch_format(cls) -> BatchFormat:
        """The format ``transform`` uses when several ``_transform_*`` methods exist."""
        return BatchFormat.PANDAS

    def get_input_columns(self) -> list[str]:
        """The columns read: the ``columns`` (or ``_columns``) attribute, else none."""
        return getattr(self, "_columns", getattr(self, "columns", []))

    def get_output_columns(self) -> list[str]:
        """The columns written: the ``output_columns`` (or ``_output_columns``) attribute."""
        return getattr(self, "_output_columns", getattr(self, "output_columns", []))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_stat_computation_plan", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._stat_computation_plan = StatComputationPlan()

    def serialize(self) -> str:
        """This preprocessor as a string (base64 of a pickle, as Ray Data writes it; not a
        stable format across versions)."""
        return base64.b64encode(pickle.dumps(self)).decode("ascii")

    @staticmethod
    def deserialize(serialized: str) -> Preprocessor:
        """The preprocessor ``serialize()`` wrote."""
        if not isinstance(serialized, (str, bytes)):
            raise TypeError(
                f"deserialize takes the string serialize() returned, got {type(serialized).__name__}."
            )
        return pickle.loads(base64.b64decode(serialized))


def _check_dataset(ds: Any, method: str) -> None:
    if not hasattr(ds, "map_batches"):
        raise TypeError(
            f"Preprocessor.{method} takes a Dataset (shardflow.from_items(...), "
            f"shardflow.read_parquet(...)), got {type(ds).__name__}."
        )


def _batch_to_pandas(data: Any) -> Any:
    """A batch as a DataFrame, as Ray Data converts it: an array or a dict of arrays gives
    columns of NumPy dtypes (a column per array; multi-dimensional ones as TensorArray)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    def column(values: Any) -> Any:
        if isinstance(values, np.ndarray) and values.ndim > 1:
            from shardflow.sdk.tensor_pandas import TensorArray

            return TensorArray(values)
        return values

    if isinstance(data, np.ndarray):
        return pd.DataFrame({"__value__": column(data)})
    if isinstance(data, collections.abc.Mapping):
        for name, values in data.items():
            if not isinstance(values, np.ndarray):
                raise ValueError(
                    "All values in the provided dict must be of type np.ndarray. Found type "
                    f"{type(values)} for key {name} instead."
                )
        return pd.DataFrame({name: column(values) for name, values in data.items()})
    if isinstance(data, pa.Table):
        return data.to_pandas()
    return data


def _batch_to_numpy(data: Any) -> Any:
    """A batch as NumPy, as Ray Data converts it: an array stays one, a dict of arrays stays
    one, a table becomes a dict of arrays (one per column), a DataFrame too, except that a
    DataFrame of one column becomes that column's array."""
    import numpy as np
    import pandas as pd

    from shardflow.sdk.block import block_to_batch, to_block

    if isinstance(data, pd.DataFrame):
        if len(data.columns) == 1:
            return data.iloc[:, 0].to_numpy()
        return {name: data[name].to_numpy() for name in data}
    if isinstance(data, np.ndarray):
        return data
    if isinstance(data, collections.abc.Mapping):
        for name, values in data.items():
            if not isinstance(values, np.ndarray):
                raise ValueError(
                    "All values in the provided dict must be of type np.ndarray. Found type "
                    f"{type(values)} for key {name} instead."
                )
        return data
    return block_to_batch(to_block(data), "numpy")
