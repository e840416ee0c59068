"""Opening Delta tables and their storage through the deltalake library (delta-rs).

deltalake is an optional dependency (``pip install 'shardflow[delta]'``), imported only when
a table is read or written. Local tables are read and written through Arrow's own local
filesystem (native, no Python in the byte path); other URIs (``s3://``, ``gs://``,
``az://``, ...) through deltalake's object store, configured by ``storage_options``.
"""

from __future__ import annotations

import re
from typing import Any

from shardflow.sdk.filesystems import redact, table_location
from shardflow.sdk.optional import require

_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*)://")


def require_deltalake(feature: str) -> Any:
    """The deltalake module, or an ImportError naming the extra to install."""
    return require("deltalake", "delta", feature)


def check_storage_options(storage_options: Any) -> dict[str, str]:
    if storage_options is None:
        return {}
    if not isinstance(storage_options, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in storage_options.items()
    ):
        raise TypeError(
            "storage_options must be a dict of strings to strings (deltalake's object store "
            "options, e.g. {'AWS_ENDPOINT_URL': ..., 'AWS_REGION': ...})."
        )
    return dict(storage_options)


def table_uri(path: Any) -> str:
    """The table's URI: URLs as given, local paths made absolute (``file://`` removed)."""
    return table_location(path, argument="path", table_kind="Delta")


def is_local(uri: str) -> bool:
    return _SCHEME_RE.match(uri) is None


def shown(uri: str) -> str:
    """The table's location for messages (no credentials)."""
    return redact(uri)


def filesystem(uri: str, storage_options: dict[str, str]) -> Any:
    """A pyarrow filesystem rooted at the table's folder (paths inside are relative)."""
    import pyarrow.fs as pafs

    if is_local(uri):
        return pafs.SubTreeFileSystem(uri, pafs.LocalFileSystem())
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(uri, storage_options or None))


def open_table(uri: str, storage_options: dict[str, str], version: int | None = None) -> Any:
    """The DeltaTable at ``uri`` (at ``version``), with errors that name the table."""
    deltalake = require_deltalake("read_delta")
    from deltalake.exceptions import TableNotFoundError

    try:
        return deltalake.DeltaTable(uri, version=version, storage_options=storage_options or None)
    except TableNotFoundError as exc:
        raise FileNotFoundError(
            f"No Delta table at {shown(uri)}: {exc}. Check the path (a table's folder holds "
            "a _delta_log folder)."
        ) from exc
    except Exception as exc:
        if version is not None and "version" in str(exc).lower():
            raise ValueError(f"Delta table {shown(uri)} has no version {version}: {exc}") from exc
        raise


def table_exists(uri: str, storage_options: dict[str, str]) -> bool:
    deltalake = require_deltalake("write_delta")
    return bool(deltalake.DeltaTable.is_deltatable(uri, storage_options or None))
