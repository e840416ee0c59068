"""Dataset methods that hand a dataset to another framework, mixed into Dataset.

Each method's work lives in the module of its system (engine/api/interop/<system>.py), which
imports the framework only when the method is called.
"""

from __future__ import annotations

from typing import Any

from shardflow.engine.plan.logical import LogicalPlan


class InteropMixin:
    """``to_dask``, ``to_spark``, ``to_modin``, ``to_tf``, ``iter_tf_batches``, ``to_torch``
    and ``to_ray_data``."""

    _plan: LogicalPlan

    def to_dask(self, meta: Any = None, verify_meta: bool = True) -> Any:
        """Convert this dataset into a `Dask DataFrame` (needs ``shardflow[dask]``).

        Each Dask partition is one piece of the dataset, computed when Dask computes the
        partition: a read task and the maps after it (run by the Dask task), or, for a plan
        with a limit, shuffle, sort, groupby, union, zip or join, one block of the dataset
        materialized when ``to_dask`` is called (in Ray's object store on the Ray backend).
        So Dask never needs the whole dataset in one place. A partition's index runs from 0,
        as in Ray Data. Unlike Ray Data, ``to_dask`` does not switch Dask's global scheduler
        to Dask-on-Ray; set ``dask.config.set(scheduler=ray.util.dask.ray_dask_get)`` to
        compute partitions in Ray tasks.

        Args:
            meta: An empty pandas DataFrame (or what ``dask.dataframe.from_delayed`` takes
                as ``meta``) with the partitions' columns and dtypes; inferred from the
                dataset's schema by default.
            verify_meta: Whether Dask checks each computed partition against ``meta``.

        Returns:
            A ``dask.dataframe.DataFrame``.

        Examples:
            >>> import shardflow as sf  # doctest: +SKIP
            >>> ddf = sf.range(6, override_num_blocks=3).to_dask()  # doctest: +SKIP
            >>> ddf.npartitions, int(ddf["id"].sum().compute())  # doctest: +SKIP
            (3, 15)
        """
        from shardflow.engine.api.interop.dask import to_dask

        return to_dask(self, meta=meta, verify_meta=verify_meta)

    def to_spark(self, spark: Any, *, staging_path: str | None = None) -> Any:
        """Convert this dataset into a `Spark DataFrame` (needs ``shardflow[spark]``).

        The dataset is written as Parquet files into a staging folder by shardflow's
        streaming write (its memory budget applies; on the Ray backend Ray tasks write), and
        the DataFrame reads them with ``spark.read.parquet``: Spark's executors read the
        files, so neither driver holds the dataset. Nested types (lists, structs, maps),
        dates and timestamps keep their types: a timestamp with a time zone becomes
        ``TimestampType``, one without ``TimestampNTZType``; nanoseconds are truncated to
        microseconds, Spark's precision (as Spark's ``createDataFrame`` does); tensor
        columns become arrays. Spark does not promise row order: sort the DataFrame when
        order matters. Works with any SparkSession (Ray Data needs RayDP).

        Args:
            spark: The ``pyspark.sql.SparkSession``.
            staging_path: Folder (or ``s3://...`` URI) for the staged files, which the
                DataFrame reads whenever it runs: give one every Spark executor can read
                when Spark runs on several machines. By default a temporary folder of this
                process, removed when the interpreter exits.

        Returns:
            A ``pyspark.sql.DataFrame``.

        Raises:
            TypeError: for a column of Python objects, which Spark cannot store.

        Examples:
            >>> import shardflow as sf  # doctest: +SKIP
            >>> sf.range(3).to_spark(spark).orderBy("id").collect()  # doctest: +SKIP
            [Row(id=0), Row(id=1), Row(id=2)]
        """
        from shardflow.engine.api.interop.spark import to_spark

        return to_spark(self, spark, staging_path)

    def to_modin(self) -> Any:
        """Convert this dataset into a `Modin DataFrame` (needs ``shardflow[modin]``).

        One row partition per block, made with Modin's ``from_partitions``. With Modin on
        Ray and shardflow's Ray backend, Ray tasks turn each block into a pandas partition
        in the object store; otherwise each block becomes a pandas DataFrame here (and is
        put into Ray's object store for Modin on Ray).

        Returns:
            A ``modin.pandas.DataFrame``.

        Examples:
            >>> import shardflow as sf  # doctest: +SKIP
            >>> sf.range(3).to_modin()["id"].sum()  # doctest: +SKIP
            3
        """
        from shardflow.engine.api.interop.modin import to_modin

        return to_modin(self)

    def to_tf(
        self,
        feature_columns: str | list[str],
        label_columns: str | list[str],
        *,
        additional_columns: str | list[str] | None = None,
        prefetch_batches: int = 1,
        batch_size: int = 1,
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
        feature_type_spec: Any = None,
        label_type_spec: Any = None,
        additional_type_spec: Any = None,
    ) -> Any:
        """Return a `TensorFlow Dataset` over this dataset (needs ``shardflow[tensorflow]``).

        Each element is ``(features, labels)`` (and the additional columns when given):
        for a column name, a tensor of the batch's values; for a list of names, a dict of
        them. The output signature is inferred from the schema as Ray Data infers it: a
        ``TensorSpec`` of shape ``(None,)`` per column (``(None, *shape)`` for a tensor
        column), a ``RaggedTensorSpec`` for list columns, strings as ``tf.string``. Each
        iteration of the ``tf.data.Dataset`` runs the dataset once.

        Args:
            feature_columns: The model's inputs: a column name, or a list of them.
            label_columns: The model's targets: a column name, or a list of them.
            additional_columns: Other columns (sample weights, ...): a name or a list.
            prefetch_batches: Batches prepared ahead in a background thread.
            batch_size: Rows per batch (Ray Data's default, 1).
            drop_last: Drop a last batch smaller than ``batch_size``.
            local_shuffle_buffer_size: Rows in the local shuffle buffer (see
                :meth:`iter_batches`).
            local_shuffle_seed: Seed of the local shuffle.
            feature_type_spec: The ``tf.TypeSpec`` of the features (a dict for a list of
                columns) instead of the inferred one.
            label_type_spec: Likewise for the labels.
            additional_type_spec: Likewise for the additional columns.

        Returns:
            A ``tf.data.Dataset``.

        Raises:
            ValueError: when a column named is not in the dataset.

        Examples:
            >>> import shardflow as sf  # doctest: +SKIP
            >>> ds = sf.from_items([{"x": 1.0, "y": 0}, {"x": 2.0, "y": 1}])  # doctest: +SKIP
            >>> spec = ds.to_tf("x", "y", batch_size=2).element_spec  # doctest: +SKIP
            >>> [s.dtype.name for s in spec]  # doctest: +SKIP
            ['float64', 'int64']
        """
        return self.iterator().to_tf(  # type: ignore[attr-defined]
            feature_columns,
            label_columns,
            additional_columns=additional_columns,
            prefetch_batches=prefetch_batches,
            batch_size=batch_size,
            drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed,
            feature_type_spec=feature_type_spec,
            label_type_spec=label_type_spec,
            additional_type_spec=additional_type_spec,
        )

    def iter_tf_batches(
        self,
        *,
        prefetch_batches: int = 1,
        batch_size: int | None = 256,
        dtypes: Any = None,
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
    ) -> Any:
        """Return an iterable over batches of TensorFlow tensors (a dict of one per column).

        Each ``iter()`` runs the dataset once. Needs ``shardflow[tensorflow]``. Ray Data
        deprecates this method in favour of :meth:`to_tf`; shardflow keeps it.

        Args:
            prefetch_batches: Batches prepared ahead in a background thread.
            batch_size: Rows per batch, or None for whole blocks.
            dtypes: A TensorFlow dtype for every column, or a dict of column name to dtype;
                inferred from the data by default.
            drop_last: Drop a last batch smaller than ``batch_size``.
            local_shuffle_buffer_size: Rows in the local shuffle buffer.
            local_shuffle_seed: Seed of the local shuffle.

        Returns:
            An iterable over dicts of ``tf.Tensor``.

        Examples:
            >>> import shardflow as sf  # doctest: +SKIP
            >>> [b["id"].shape for b in sf.range(5).iter_tf_batches(batch_size=2)]  # doctest: +SKIP
            [TensorShape([2]), TensorShape([2]), TensorShape([1])]
        """
        return self.iterator().iter_tf_batches(  # type: ignore[attr-defined]
            prefetch_batches=prefetch_batches,
            batch_size=batch_size,
            dtypes=dtypes,
            drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed,
        )

    def to_torch(
        self,
        *,
        label_column: str | None = None,
        feature_columns: Any = None,
        label_column_dtype: Any = None,
        feature_column_dtypes: Any = None,
        batch_size: int = 1,
        prefetch_batches: int = 1,
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
        unsqueeze_label_tensor: bool = True,
        unsqueeze_feature_tensors: bool = True,
    ) -> Any:
        """Return a ``torch.utils.data.IterableDataset`` of ``(features, label)`` batches.

        Ray Data's ``to_torch``, which Ray Data 2.60 deprecates ("removed after October
        2026") in favour of :meth:`iter_torch_batches`; shardflow keeps it, with the same
        arguments and tensors. Features are the columns other than the label by default,
        side by side in one tensor of shape ``(N, n)``; ``feature_columns`` as a list of
        lists gives a list of such tensors, as a dict of name to list a dict of them. The
        label is ``(N, 1)`` (``(N,)`` with ``unsqueeze_label_tensor=False``), or None
        without ``label_column``.

        Unlike Ray Data's, the IterableDataset may be read by a ``torch.utils.data.
        DataLoader`` with several workers (``batch_size=None`` in the DataLoader: the
        batches are made here): each worker reads its share of the dataset's read tasks
        (or blocks), so every row comes once per epoch. A plan with a limit, shuffle, sort,
        groupby, union, zip or join cannot be shared that way: ``materialize()`` it first.
        Needs ``shardflow[torch]``.

        Args:
            label_column: The label column, or None.
            feature_columns: Feature columns: a list of names, a list of lists, or a dict of
                name to list; all other columns by default.
            label_column_dtype: The label tensor's dtype; inferred by default.
            feature_column_dtypes: One dtype for all feature tensors, or a sequence (a list
                of lists) or dict (a dict) of them.
            batch_size: Rows per batch (Ray Data's default, 1).
            prefetch_batches: Batches prepared ahead in a background thread.
            drop_last: Drop a last batch smaller than ``batch_size``.
            local_shuffle_buffer_size: Rows in the local shuffle buffer.
            local_shuffle_seed: Seed of the local shuffle.
            unsqueeze_label_tensor: Make the label ``(N, 1)`` rather than ``(N,)``.
            unsqueeze_feature_tensors: Make each feature column ``(N, 1)`` before they are
                put side by side.

        Returns:
            A ``torch.utils.data.IterableDataset``.

        Examples:
            >>> import shardflow as sf  # doctest: +SKIP
            >>> ds = sf.from_items([{"x": 1.0, "y": 0}, {"x": 2.0, "y": 1}])  # doctest: +SKIP
            >>> next(iter(ds.to_torch(label_column="y", batch_size=2)))  # doctest: +SKIP
            (tensor([[1.], [2.]], dtype=torch.float64), tensor([[0], [1]]))
        """
        from shardflow.sdk.optional import require

        require("torch", "torch", "Dataset.to_torch")
        from shardflow.engine.api.interop.torch_dataset import to_torch

        return to_torch(
            self,
            label_column=label_column,
            feature_columns=feature_columns,
            label_column_dtype=label_column_dtype,
            feature_column_dtypes=feature_column_dtypes,
            batch_size=batch_size,
            prefetch_batches=prefetch_batches,
            drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed,
            unsqueeze_label_tensor=unsqueeze_label_tensor,
            unsqueeze_feature_tensors=unsqueeze_feature_tensors,
        )

    def to_ray_data(self) -> Any:
        """Convert this dataset into a ``ray.data.Dataset``, for Ray Train and other Ray
        libraries (needs a running Ray: ``ray.init()`` or ``sf.init(backend="ray")``).

        Runs the dataset and hands its blocks to ``ray.data.from_arrow_refs``: on the Ray
        backend they are already in Ray's object store, so no row passes through the driver;
        on the local backend each block is put into the object store as it is produced.
        Pass the result to ``ray.train.torch.TorchTrainer(datasets={"train": ...})``; each
        training worker reads its shard with ``ray.train.get_dataset_shard("train")``.

        Returns:
            A materialized ``ray.data.Dataset`` with the same rows and Arrow types.

        Raises:
            RuntimeError: when Ray is not running.
            TypeError: for a column of Python objects.

        Examples:
            >>> import shardflow as sf  # doctest: +SKIP
            >>> sf.init(backend="ray")  # doctest: +SKIP
            >>> sf.range(3).to_ray_data().take_all()  # doctest: +SKIP
            [{'id': 0}, {'id': 1}, {'id': 2}]
        """
        from shardflow.engine.api.interop.ray_data import to_ray_data

        return to_ray_data(self)
