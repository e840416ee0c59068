"""Filesystems for file connectors, through fsspec.

A path's scheme picks the filesystem: none or ``file://`` (local disk), ``s3://`` (s3fs),
``gs://`` or ``gcs://`` (gcsfs), ``memory://`` (fsspec's in-process store). Users may instead
pass ``filesystem=``, an fsspec filesystem or a ``pyarrow.fs.FileSystem`` (wrapped for fsspec
use), and credentials through ``storage_options`` (a dict handed to fsspec). fsspec and the
cloud clients are imported when a filesystem is first needed, never at ``import shardflow``;
local disk without options is a :class:`~shardflow.sdk.local_disk.LocalDisk`, which imports
fsspec only for calls beyond path lookups (writes), so local reads never do.

``memory://`` lives in the memory of one process: it suits tests and the local backend's
threads, but tasks that run in worker processes (Ray, or pure-Python functions fused into a
read on the local backend) see an empty store of their own.

Credentials given in ``storage_options`` never appear in messages: errors name paths only,
and paths are shown with any ``user:password@`` part removed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shardflow.sdk.optional import missing_message

_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*)://")
_USERINFO_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://)[^/@]*@")
_LOCAL_PROTOCOLS = {"file", "local"}
_PROTOCOL_ALIASES = {"local": "file", "gcs": "gs", "s3a": "s3"}
_EXTRAS = {"s3": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs")}


def redact(path: str) -> str:
    """``path`` without a ``user:password@`` part, safe to show in messages and logs.

    Examples:
        >>> from shardflow.sdk.filesystems import redact
        >>> redact("s3://KEY:SECRET@bucket/data.csv")
        's3://bucket/data.csv'
    """
    return _USERINFO_RE.sub(r"\1", str(path))


_USERINFO_IN_TEXT_RE = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*://)[^/@\s'\"]*:[^/@\s'\"]*@")
# key=value secrets of database connection strings (libpq, ODBC) and keyword arguments.
_SECRET_PAIR_RE = re.compile(
    r"(?i)\b(password|passwd|pwd|sslpassword)(\s*[=:]\s*)('[^']*'|\"[^\"]*\"|[^\s;,)&'\"]+)"
)


def redact_text(text: str) -> str:
    """``text`` with the ``user:password@`` part of every URL in it removed, and the value
    of every ``password=...`` pair of a connection string hidden.

    Examples:
        >>> from shardflow.sdk.filesystems import redact_text
        >>> redact_text("cannot read s3://KEY:SECRET@bucket/a and gs://u:p@b/c")
        'cannot read s3://bucket/a and gs://b/c'
        >>> redact_text("connect('host=db user=app password=hunter2 port=5432')")
        "connect('host=db user=app password=*** port=5432')"
    """
    return _SECRET_PAIR_RE.sub(r"\1\2***", _USERINFO_IN_TEXT_RE.sub(r"\1", text))


def protocol_of(path: str) -> str | None:
    """The scheme of ``path`` (``"s3"``, ``"gs"``, ...), or None for a plain local path."""
    match = _SCHEME_RE.match(str(path))
    if not match:
        return None
    return _PROTOCOL_ALIASES.get(match.group(1).lower(), match.group(1).lower())


def table_location(path: Any, *, argument: str, table_kind: str) -> str:
    """A table's URI (Delta, Hudi, ...): URLs as given without a trailing slash, local paths
    made absolute (``file://`` removed). ``argument`` and ``table_kind`` word the error."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise ValueError(
            f"{argument} must be the location of one {table_kind} table (a folder, or a URI "
            f"such as 's3://bucket/table'), got {path!r}."
        )
    if path.startswith("file://"):
        path = path[len("file://") :]
    if _SCHEME_RE.match(path):
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = getattr(fs, "protocol", ())
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def is_local(fs: Any) -> bool:
    """Whether ``fs`` is this machine's disk (where a rename is atomic)."""
    from shardflow.sdk.local_disk import LocalDisk

    if isinstance(fs, LocalDisk):
        return True
    from fsspec.implementations.arrow import ArrowFSWrapper

    if isinstance(fs, ArrowFSWrapper):
        return getattr(fs.fs, "type_name", "") == "local"
    return bool(_LOCAL_PROTOCOLS & set(_protocols(fs)))


def is_memory(fs: Any) -> bool:
    """Whether ``fs`` is fsspec's in-process memory filesystem."""
    return "memory" in _protocols(fs)


def supports_rename(fs: Any) -> bool:
    """Whether moving a file is a cheap metadata operation (local disk and memory)."""
    return is_local(fs) or is_memory(fs)


def _check_storage_options(storage_options: dict[str, Any] | None) -> dict[str, Any]:
    if storage_options is None:
        return {}
    if not isinstance(storage_options, dict):
        raise TypeError(f"storage_options must be a dict, got {type(storage_options).__name__}.")
    return dict(storage_options)


#: botocore's own retries for S3 filesystems shardflow makes (unless storage_options set
#: them): few, so that shardflow's retry policy (DataContext.retry, logged) bounds the time an
#: unreachable endpoint takes; botocore's default retries 5 times per attempt of shardflow's,
#: silently (about 50 s before an error for a wrong endpoint).
_S3_CLIENT_CONFIG = {"retries": {"max_attempts": 2, "mode": "standard"}, "connect_timeout": 10}


def with_client_defaults(fs: Any) -> Any:
    """``fs``, an fsspec filesystem, with shardflow's client defaults added where its options
    do not set them (S3: botocore's retries and connect timeout); returns ``fs``.

    The defaults go into the filesystem object, not into the options it is made from: fsspec
    keeps one instance per set of options, and the instance a caller made with the same
    options must stay the one shardflow uses. They take effect when the filesystem makes its
    client, so a filesystem already used keeps its client's settings."""
    if getattr(fs, "protocol", None) not in (("s3", "s3a"), "s3", "s3a"):
        return fs
    config = getattr(fs, "config_kwargs", None)
    if isinstance(config, dict):
        # A new dict: s3fs holds the caller's own, which fsspec's cache key was made from.
        fs.config_kwargs = {**_S3_CLIENT_CONFIG, **config}
    return fs


def _make_fsspec(protocol: str, storage_options: dict[str, Any]) -> Any:
    import fsspec

    try:
        return with_client_defaults(fsspec.filesystem(protocol, **storage_options))
    except ImportError as exc:
        if protocol in _EXTRAS:
            module, extra = _EXTRAS[protocol]
            message = missing_message(module, extra, f"The {protocol}:// filesystem")
            raise ImportError(message) from exc
        raise ImportError(f"Paths with scheme {protocol}:// need an extra package: {exc}") from exc
    except ValueError as exc:
        if "Protocol not known" in str(exc):
            raise ValueError(
                f"No filesystem is known for scheme {protocol}://. Use a local path, file://, "
                "s3://, gs://, memory://, or pass filesystem= explicitly."
            ) from None
        raise


def wrap_filesystem(filesystem: Any) -> Any:
    """An fsspec filesystem for ``filesystem`` (an fsspec one, or a ``pyarrow.fs.FileSystem``)."""
    from shardflow.sdk.local_disk import LocalDisk

    if isinstance(filesystem, LocalDisk):
        return filesystem
    from fsspec.spec import AbstractFileSystem

    if isinstance(filesystem, AbstractFileSystem):
        return filesystem
    try:
        import pyarrow.fs as pafs
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pafs = None
    if pafs is not None and isinstance(filesystem, pafs.FileSystem):
        from fsspec.implementations.arrow import ArrowFSWrapper

        return ArrowFSWrapper(filesystem)
    raise TypeError(
        "filesystem must be an fsspec filesystem (e.g. s3fs.S3FileSystem) or a "
        f"pyarrow.fs.FileSystem; got {type(filesystem).__name__}."
    )


def strip_path(fs: Any, path: str) -> str:
    """The path as ``fs`` names it: no scheme, no trailing slash (``bucket/key`` for S3)."""
    path = str(path)
    match = _SCHEME_RE.match(path)
    if match and match.group(1).lower() in _LOCAL_PROTOCOLS and not is_local(fs):
        raise ValueError(f"Path {redact(path)!r} is local but the filesystem is not.")
    if match and match.group(1).lower() == "local":
        # local:// names an absolute path on the driver's machine, as in Ray Data.
        path = "file://" + path[len(match.group(0)) :]
        match = _SCHEME_RE.match(path)
    if is_local(fs):
        if match:
            path = path[len(match.group(0)) :]
        path = os.path.abspath(os.path.expanduser(path))
        return path
    from fsspec.implementations.arrow import ArrowFSWrapper

    if isinstance(fs, ArrowFSWrapper) and match:
        path = path[len(match.group(0)) :]
    stripped = fs._strip_protocol(path)
    stripped = stripped.rstrip("/") if stripped not in ("/", "") else stripped
    return stripped


def display_path(fs: Any, path: str) -> str:
    """A path for users to read: plain for local disk, with its scheme otherwise."""
    if is_local(fs):
        return path
    protocols = _protocols(fs)
    if "memory" in protocols:
        return "memory://" + path.lstrip("/")
    if protocols and protocols[0] not in ("arrow",):
        return redact(f"{protocols[0]}://{path}")
    return redact(path)


def resolve_filesystem(
    paths: Sequence[str],
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> tuple[Any, list[str]]:
    """The fsspec filesystem for ``paths`` and the paths as it names them.

    Args:
        paths: Paths or URIs, all with one scheme.
        filesystem: An fsspec filesystem or a ``pyarrow.fs.FileSystem``; inferred from the
            paths' scheme when None.
        storage_options: Options for the inferred fsspec filesystem (credentials, endpoint).

    Returns:
        ``(filesystem, stripped_paths)``.

    Examples:
        >>> from shardflow.sdk.filesystems import resolve_filesystem
        >>> fs, paths = resolve_filesystem(["memory://data/a.csv"])
        >>> paths
        ['/data/a.csv']
    """
    resolved = resolve_paths(paths, filesystem, storage_options)
    return resolved.fs, resolved.paths


@dataclass
class ResolvedPaths:
    """Where a read's or write's paths live.

    Args:
        fs: The fsspec filesystem (listings, checks, commits).
        paths: The paths as ``fs`` names them.
        native: The ``pyarrow.fs`` stand-in for reading and writing the files' bytes, or None
            when they go through ``fs`` (see :mod:`shardflow.sdk.native_filesystems`).
    """

    fs: Any
    paths: list[str]
    native: Any = None


def resolve_paths(
    paths: Sequence[str],
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> ResolvedPaths:
    """:func:`resolve_filesystem`, plus the native filesystem for the files' bytes.

    Examples:
        >>> from shardflow.sdk.filesystems import resolve_paths
        >>> resolve_paths(["memory://data/a.csv"]).native is None
        True
    """
    from shardflow.sdk.local_disk import LocalDisk
    from shardflow.sdk.native_filesystems import native_for

    options = _check_storage_options(storage_options)
    paths = [str(p) for p in paths]
    if filesystem is not None:
        if options:
            raise ValueError("Pass either filesystem= or storage_options=, not both.")
        fs = wrap_filesystem(filesystem)
        if isinstance(fs, LocalDisk):  # passed on from an earlier resolution
            native = native_for("file", {})
        else:
            native = native_for("", {}, filesystem)
        return ResolvedPaths(fs, [strip_path(fs, p) for p in paths], native)
    protocols = {protocol_of(p) or "file" for p in paths}
    if len(protocols) > 1:
        shown = ", ".join(sorted(f"{p}://" for p in protocols))
        raise ValueError(f"All paths must use one filesystem; got schemes {shown}.")
    protocol = protocols.pop() if protocols else "file"
    paths, options = _move_credentials(paths, protocol, options)
    # Local disk without options: path lookups need no fsspec (see sdk/local_disk.py).
    fs = LocalDisk() if protocol == "file" and not options else _make_fsspec(protocol, options)
    return ResolvedPaths(fs, [strip_path(fs, p) for p in paths], native_for(protocol, options))


def _move_credentials(
    paths: list[str], protocol: str, options: dict[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    """Take ``user:password@`` out of the paths and into the storage options, so that the
    credentials reach the filesystem but never a path that could be shown or logged."""
    found = None
    clean = []
    for path in paths:
        match = _USERINFO_RE.match(path)
        if match:
            userinfo = path[len(match.group(1)) : match.end() - 1]
            if found is not None and found != userinfo:
                raise ValueError("All paths of one read or write must carry the same credentials.")
            found = userinfo
            path = redact(path)
        clean.append(path)
    if found is None:
        return paths, options
    user, _, password = found.partition(":")
    from urllib.parse import unquote

    user, password = unquote(user), unquote(password)
    if protocol == "s3":
        options.setdefault("key", user)
        options.setdefault("secret", password)
    else:
        options.setdefault("username", user)
        options.setdefault("password", password)
    return clean, options


def join(fs: Any, *parts: str) -> str:
    """Join path parts with ``/`` (fsspec paths use ``/`` on every platform)."""
    head, rest = parts[0], [p.strip("/") for p in parts[1:] if p]
    if not rest:
        return head
    return head.rstrip("/") + "/" + "/".join(rest)


def parent(path: str) -> str:
    """The folder holding ``path``."""
    head = path.rstrip("/").rsplit("/", 1)[0]
    return head if head else "/"


def basename(path: str) -> str:
    """The last component of ``path``."""
    return path.rstrip("/").rsplit("/", 1)[-1]
