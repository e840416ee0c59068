"""WebDataset shards: :func:`read_webdataset` and :meth:`Dataset.write_webdataset`.

The connector lives in :mod:`shardflow.connectors.webdataset`; tar archives are read and
written with the standard library, and images need Pillow (``pip install
'shardflow[webdataset]'``), imported only when an image is decoded or encoded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardflow.engine.api.file_reads import PathsArg, ShuffleArg, _common, _read
from shardflow.engine.api.file_writes import _sink_args
from shardflow.sdk.filename_provider import FilenameProvider
from shardflow.sdk.partitioning import Partitioning, PathPartitionFilter
from shardflow.sdk.save_mode import SaveMode

if TYPE_CHECKING:  # engine.dataset mixes in WebDatasetWriteMixin, so it is imported lazily
    from shardflow.engine.api.dataset import Dataset


def read_webdataset(
    paths: PathsArg,
    *,
    filesystem: Any = None,
    parallelism: int = -1,
    arrow_open_stream_args: dict[str, Any] | None = None,
    partition_filter: PathPartitionFilter | None = None,
    decoder: Any = True,
    fileselect: Any = None,
    filerename: Any = None,
    suffixes: Any = None,
    verbose_open: bool = False,
    shuffle: ShuffleArg = None,
    include_paths: bool = False,
    file_extensions: list[str] | None = None,
    override_num_blocks: int | None = None,
    expand_json: bool = False,
    partitioning: Partitioning | None = None,
    ignore_missing_paths: bool = False,
    storage_options: dict[str, Any] | None = None,
    on_bad_file: str = "raise",
) -> Dataset:
    """Read `WebDataset <https://github.com/webdataset/webdataset>`_ tar shards, one row per
    sample.

    A shard's members named ``<key>.<suffix>`` that sit next to each other form one sample:
    a row with the column ``__key__``, one column per suffix (``jpg``, ``cls``,
    ``seg.png``, ...), and ``__url__``, the shard's path. Shards are streamed (``.tar.gz``
    ones decompressed on the way), locally or from S3 and GCS.

    The default decoder (``decoder=True``) decodes members by their last extension, as Ray
    Data's does: ``txt``/``text`` to strings, ``cls``/``cls2`` to integers, ``json`` to
    JSON values, ``jpg``/``png``/``ppm``/``pgm``/``pbm``/``pnm`` to NumPy arrays of pixels
    (tensor columns; Pillow), ``npy`` to arrays and ``mp`` with MessagePack; others stay
    bytes. Pickled members (``pt``, ``pth``, ``pickle``, ``pkl``) raise an error: pass a
    decoder function to load them from a trusted source.

    Differences from Ray Data 2.60: blocks are Arrow tables built from the samples (Ray Data
    builds pandas ones: its schema shows ``object`` where shardflow has ``binary``,
    ``struct``, ...); a decoder's one-element list stays a list (Ray Data unwraps it);
    ``__url__`` is the path as given (with its ``s3://`` scheme); ``verbose_open`` logs at
    INFO instead of printing; when only some columns are used (``select_columns``) and the
    default decoder is used, the other members are not decoded.

    Examples:
        >>> import io, os, tarfile, tempfile
        >>> import shardflow as sf
        >>> shard = os.path.join(tempfile.mkdtemp(), "shard-000.tar")
        >>> with tarfile.open(shard, "w") as tar:
        ...     for name, data in [("a.cls", b"3"), ("a.txt", b"cat"), ("b.cls", b"5")]:
        ...         info = tarfile.TarInfo(name)
        ...         info.size = len(data)
        ...         tar.addfile(info, io.BytesIO(data))
        >>> [(r["__key__"], r["cls"], r["txt"]) for r in sf.read_webdataset(shard).take_all()]
        [('a', 3, 'cat'), ('b', 5, None)]

    Args:
        paths: Shards, folders of shards or globs; local, ``s3://``, ``gs://`` or
            ``memory://``.
        decoder: ``True`` (the default decoder), ``"PIL"`` (the default decoder keeping
            images as Pillow images, in a column of Python objects), a function taking a
            sample dict (``{"__key__": ..., "__url__": ..., suffix: bytes}``) and returning
            one, a list of these applied in order, or None (every member stays bytes).
        fileselect: Members to read, by name: a function of the name, or patterns (with
            ``*``/``?``, globs matched against ``"." + name``, e.g. ``"*.jpg"``; otherwise
            the whole name). Unselected members are skipped before grouping.
        filerename: A function (or list of functions) renaming each member before selection
            and grouping.
        suffixes: Suffixes to keep in samples: a function of the suffix, or patterns as for
            ``fileselect`` (``["jpg", "cls"]``). A sample left without members keeps its row.
        verbose_open: Log each shard as it is opened and finished.
        expand_json: Add the fields of each sample's ``json`` member as columns (columns
            already present keep their values).
        include_paths: Add a ``path`` column naming each row's shard.
        file_extensions: Read only files with these extensions (``["tar"]``); all by default.
        arrow_open_stream_args: Arguments for opening each shard (``{"compression":
            "gzip"}`` for compressed shards without a ``.gz`` name).
        Other arguments: as for :func:`shardflow.read_parquet`.

    Returns:
        A lazy Dataset.

    Raises:
        ValueError: when reading, if a shard is not a tar archive or is truncated, a
            sample's members are not next to each other, or a member cannot be decoded; the
            message names the shard and the sample.
    """
    from shardflow.connectors.webdataset import WebDatasetDatasource

    datasource = WebDatasetDatasource(
        paths,
        decoder=decoder,
        fileselect=fileselect,
        filerename=filerename,
        suffixes=suffixes,
        verbose_open=verbose_open,
        expand_json=expand_json,
        **_common(locals()),
    )
    return _read(datasource, parallelism, override_num_blocks)


class WebDatasetWriteMixin:
    """``Dataset.write_webdataset``."""

    if TYPE_CHECKING:  # Dataset provides it

        def write_datasink(self, datasink: Any, *, resume: bool = False) -> None: ...

    def write_webdataset(
        self,
        path: Any,
        *,
        filesystem: Any = None,
        try_create_dir: bool = True,
        arrow_open_stream_args: dict[str, Any] | None = None,
        filename_provider: FilenameProvider | None = None,
        min_rows_per_file: int | None = None,
        encoder: Any = True,
        num_rows_per_file: int | None = None,
        mode: SaveMode | str = SaveMode.ERROR,
        resume: bool = False,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        """Write the dataset as WebDataset tar shards under the folder ``path``, one sample
        per row.

        Each row's ``__key__`` names its sample (a random one when there is none); every
        other column not starting with ``__`` becomes the member ``<key>.<column>``,
        encoded by the column name's last extension: ``txt`` from strings, ``cls`` from
        integers, ``json`` from JSON values, ``jpg``/``jpeg``/``png``/``ppm``/... from image
        arrays (Pillow), ``npy`` from arrays, ``mp`` with MessagePack, ``pt``/``pickle``
        pickled; bytes are written as they are (an image already encoded, say), and other
        columns must hold bytes or strings. Nulls are left out of their sample. Each write
        task writes one shard (``{write_uuid}_{task:06}.tar``); shards appear only when
        every task succeeded.

        Differences from Ray Data 2.60: ``mode`` defaults to ``"error"`` (Ray Data's default
        is ``"append"``), writes are all-or-nothing, and a ``__key__`` with a ``.`` in its
        file name is refused (readers would split the sample there).

        Examples:
            >>> import tempfile
            >>> import numpy as np
            >>> import shardflow as sf
            >>> folder = tempfile.mkdtemp()
            >>> rows = [{"__key__": f"{i:04d}", "cls": i, "png": np.full((2, 2), i, np.uint8)}
            ...         for i in range(3)]
            >>> sf.from_items(rows).write_webdataset(folder, mode="overwrite")
            >>> sorted(r["cls"] for r in sf.read_webdataset(folder).take_all())
            [0, 1, 2]

        Args:
            path: Destination folder (local, ``s3://``, ``gs://``, ``memory://``).
            encoder: ``True`` (the default encoder), a function taking a row dict and
                returning the sample dict to write, a list of these applied in order, or
                None (values must already be bytes or strings).
            min_rows_per_file: Join a write task's blocks into shards of at least this many
                samples.
            num_rows_per_file: Older name of ``min_rows_per_file``.
            mode: ``"error"`` (default), ``"overwrite"``, ``"append"`` or ``"ignore"``.
            resume: Make the write resumable (see ``Dataset.write_datasink``).
            Other arguments: as for :meth:`write_parquet`.
        """
        from shardflow.connectors.webdataset import WebDatasetDatasink

        sink = WebDatasetDatasink(path, encoder=encoder, **_sink_args(locals()))
        self.write_datasink(sink, resume=resume)
