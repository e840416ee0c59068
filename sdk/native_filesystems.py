"""Arrow's own filesystems (``pyarrow.fs``) for the bytes of file reads and writes.

Listing, existence checks and commits go through fsspec (see :mod:`filesystems`); the data
itself is read and written through a ``pyarrow.fs`` filesystem whenever one can stand in for
the fsspec filesystem the path resolved to:

* local disk: ``pyarrow.fs.LocalFileSystem``;
* ``s3://`` when the storage options are ones Arrow's ``S3FileSystem`` understands (keys,
  session token, anonymous access, endpoint, region, path-style addressing);
* ``gs://`` when they are ones Arrow's ``GcsFileSystem`` understands (anonymous access, an
  endpoint, a project), for sequential streams only (see :func:`NativeFileSystem.random_access`);
* a ``pyarrow.fs.FileSystem`` the user passed as ``filesystem=``.

A filesystem object from fsspec passed by the user, ``memory://``, and options Arrow has no
equivalent for keep going through fsspec.

Why: Arrow then reads and writes in C++ without taking the GIL for every call, and its
reader threads never call back into Python, so threaded readers are safe. (Arrow threads
that read a Python file object can outlive the interpreter and abort the process at exit;
with Arrow's own files they cannot.)

The filesystem is built lazily, once per process, from a picklable :class:`NativeFileSystem`
description. Credentials live only inside it and never appear in its ``repr``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

# Compression that fsspec infers from a file name and Arrow can decompress as a stream.
_ARROW_CODECS = {"gzip": "gzip", "bz2": "bz2", "zstd": "zstd"}
_SUFFIX_CODECS = {"gz": "gzip", "bz2": "bz2", "zst": "zstd"}
_UNCOMPRESSED = (None, "", "none")
# Suffixes of uncompressed files, which fsspec never infers a compression for.
_PLAIN_SUFFIXES = {"", "csv", "tsv", "txt", "json", "jsonl", "ndjson", "parquet", "arrow"}

_S3_TOP_KEYS = {"key", "secret", "token", "anon", "endpoint_url", "client_kwargs", "config_kwargs"}
_S3_CLIENT_KEYS = {"endpoint_url", "region_name"}
_GCS_KEYS = {"token", "project", "endpoint_url"}

_CACHE: dict[NativeFileSystem, Any] = {}
_CACHE_LOCK = threading.Lock()


class NativeFileSystem:
    """A picklable recipe for a ``pyarrow.fs`` filesystem (built once per process).

    Args:
        kind: ``"local"``, ``"s3"``, ``"gcs"`` or ``"given"`` (a filesystem the user passed).
        options: Keyword arguments of the pyarrow constructor, as sorted pairs.
        given: The user's ``pyarrow.fs.FileSystem`` when ``kind == "given"``.
    """

    __slots__ = ("kind", "options", "given")

    def __init__(self, kind: str, options: tuple[tuple[str, Any], ...] = (), given: Any = None):
        self.kind, self.options, self.given = kind, options, given

    def __repr__(self) -> str:  # never the options: they may hold credentials
        return f"NativeFileSystem({self.kind})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, NativeFileSystem)
            and (self.kind, self.options) == (other.kind, other.options)
            and self.given is other.given
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.options, id(self.given)))

    def __getstate__(self) -> tuple[str, Any, Any]:
        return (self.kind, self.options, self.given)

    def __setstate__(self, state: tuple[str, Any, Any]) -> None:
        self.kind, self.options, self.given = state

    @property
    def random_access(self) -> bool:
        """Whether files may be opened for random access (Parquet footers, seeks).

        False for GCS: Arrow's GCS client reads through ranged requests, which the emulators
        used to test against do not answer; sequential streams and writes are native.
        """
        return self.kind != "gcs"

    def filesystem(self) -> Any:
        """The ``pyarrow.fs.FileSystem`` (built on first use in this process)."""
        if self.given is not None:
            return self.given
        fs = _CACHE.get(self)
        if fs is None:
            with _CACHE_LOCK:
                fs = _CACHE.get(self)
                if fs is None:
                    fs = _CACHE[self] = self._build()
        return fs

    def _build(self) -> Any:
        import pyarrow.fs as pafs

        options = dict(self.options)
        if self.kind == "local":
            return pafs.LocalFileSystem()
        if self.kind == "s3":
            return pafs.S3FileSystem(**options)
        if self.kind == "gcs":
            import datetime

            # Arrow retries a failing GCS call for 15 minutes by default; shardflow's own
            # retries (DataContext.retry) take over after one minute.
            retry = datetime.timedelta(seconds=float(options.pop("retry_time_limit_s", 60.0)))
            return pafs.GcsFileSystem(retry_time_limit=retry, **options)
        raise ValueError(f"unknown native filesystem kind {self.kind!r}")

    # -- opening files ----------------------------------------------------------------

    def open_input(self, path: str, compression: str | None = None) -> Any:
        """Open ``path`` for reading: a seekable file, or a stream when ``compression`` is set
        (or random access is not available)."""
        if self.kind == "local":
            # pyarrow.lib's own local files: the same reads as LocalFileSystem's, without
            # importing pyarrow.fs (~10 ms: it loads the SSL and cloud filesystem modules).
            import pyarrow as pa

            if compression in _UNCOMPRESSED:
                return pa.OSFile(path)
            return pa.input_stream(path, compression=_ARROW_CODECS[compression])
        fs = self.filesystem()
        if compression in _UNCOMPRESSED and self.random_access:
            return fs.open_input_file(path)
        codec = None if compression in _UNCOMPRESSED else _ARROW_CODECS[compression]
        return fs.open_input_stream(path, compression=codec)

    def open_output(self, path: str) -> Any:
        """Open ``path`` for writing (replacing it), as an Arrow output stream."""
        return self.filesystem().open_output_stream(path)


def stream_compression(
    path: str, open_args: dict[str, Any], infer: bool
) -> tuple[bool, str | None]:
    """Whether a file opened with ``open_args`` can be read natively, and with which codec.

    ``open_args`` are the fsspec ``open`` arguments of the read; only ``compression`` (a codec
    Arrow streams, ``"infer"``, or None) is understood. ``infer`` says whether the format
    infers compression from the file name when no argument says otherwise.
    """
    extra = set(open_args) - {"compression"}
    if extra:
        return False, None
    compression = open_args.get("compression", "infer" if infer else None)
    if compression == "infer":
        suffix = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
        if suffix in _SUFFIX_CODECS:
            return True, _SUFFIX_CODECS[suffix]
        if suffix in _PLAIN_SUFFIXES:  # known uncompressed formats: no need to ask fsspec
            return True, None
        from fsspec.utils import compressions

        if suffix in compressions:  # fsspec knows it (xz, lzma, zip); Arrow does not stream it
            return False, None
        return True, None
    if compression in _UNCOMPRESSED:
        return True, None
    if compression in _ARROW_CODECS:
        return True, compression
    return False, None


def native_for(
    protocol: str, storage_options: dict[str, Any], filesystem: Any = None
) -> NativeFileSystem | None:
    """The native filesystem that can stand in for the fsspec one, or None.

    Args:
        protocol: The scheme the paths resolved to (``"file"``, ``"s3"``, ``"gs"``, ...).
        storage_options: The fsspec options (credentials moved in from the URL included).
        filesystem: The ``filesystem=`` argument of the read or write, if any.
    """
    if os.environ.get("SHARDFLOW_NATIVE_FILESYSTEMS", "1") == "0":
        return None
    if filesystem is not None:
        return _from_given(filesystem)
    if protocol == "file":
        return NativeFileSystem("local") if not storage_options else None
    if protocol == "s3":
        return _s3(storage_options)
    if protocol == "gs":
        return _gcs(storage_options)
    return None


def _from_given(filesystem: Any) -> NativeFileSystem | None:
    try:
        import pyarrow.fs as pafs
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    if isinstance(filesystem, pafs.FileSystem):
        kind = "given"
        if filesystem.type_name == "gcs":
            kind = "gcs"  # sequential only, as above
        return NativeFileSystem(kind, given=filesystem)
    return None  # an fsspec filesystem object stays with fsspec


def _endpoint(url: str) -> tuple[str, str]:
    """``(host[:port][/path], scheme)`` of an endpoint URL for Arrow's ``endpoint_override``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url, "https"
    return rest.rstrip("/"), scheme.lower()


def _s3(options: dict[str, Any]) -> NativeFileSystem | None:
    if set(options) - _S3_TOP_KEYS:
        return None
    client = options.get("client_kwargs") or {}
    config = options.get("config_kwargs") or {}
    if not isinstance(client, dict) or set(client) - _S3_CLIENT_KEYS:
        return None
    if not isinstance(config, dict) or set(config) - {"s3"}:
        return None
    s3_config = config.get("s3") or {}
    if not isinstance(s3_config, dict) or set(s3_config) - {"addressing_style"}:
        return None
    args: dict[str, Any] = {}
    key, secret, token = options.get("key"), options.get("secret"), options.get("token")
    if options.get("anon"):
        if key or secret:
            return None
        args["anonymous"] = True
    elif key or secret:
        if not (key and secret):
            return None
        args["access_key"], args["secret_key"] = str(key), str(secret)
        if token:
            args["session_token"] = str(token)
    elif token:
        return None
    endpoint = (
        options.get("endpoint_url")
        or client.get("endpoint_url")
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    if endpoint:
        args["endpoint_override"], args["scheme"] = _endpoint(str(endpoint))
    region = client.get("region_name")
    if region:
        args["region"] = str(region)
    elif not endpoint:
        # Without a region Arrow assumes us-east-1 and cannot follow a bucket elsewhere;
        # s3fs finds the bucket's region by itself, so leave such reads to it.
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            return None
        args["region"] = region
    style = s3_config.get("addressing_style")
    if style == "virtual":
        args["force_virtual_addressing"] = True
    elif style not in (None, "auto", "path"):
        return None
    return NativeFileSystem("s3", tuple(sorted(args.items())))


def _gcs(options: dict[str, Any]) -> NativeFileSystem | None:
    if set(options) - _GCS_KEYS:
        return None
    args: dict[str, Any] = {}
    token = options.get("token")
    if token == "anon":
        args["anonymous"] = True
    elif token not in (None, "google_default"):
        return None  # service-account files and credential objects stay with gcsfs
    if options.get("project"):
        args["project_id"] = str(options["project"])
    endpoint = options.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")
    if endpoint:
        args["endpoint_override"], args["scheme"] = _endpoint(str(endpoint))
    return NativeFileSystem("gcs", tuple(sorted(args.items())))


def is_arrow_file(f: Any) -> bool:
    """Whether ``f`` is a file Arrow reads by itself (not a Python object Arrow calls into),
    so Arrow's threads may read it."""
    import pyarrow as pa

    return isinstance(f, pa.NativeFile) and not isinstance(f, pa.PythonFile)
