"""This machine's disk as a filesystem, without importing fsspec until it is needed.

Reads of local files list folders with ``os.scandir`` and read bytes through
``pyarrow.fs`` (see :mod:`shardflow.sdk.native_filesystems`), so what they ask of the
filesystem object is a path lookup. :class:`LocalDisk` answers that with ``os.stat`` and
hands every other call (opening, writing, moving, removing files) to fsspec's
``LocalFileSystem``, created on first use. A read of local files then never imports fsspec,
whose import scans every installed package's entry points (tens of milliseconds).
"""

from __future__ import annotations

import os
import stat
from typing import Any


class LocalDisk:
    """fsspec's local filesystem, with path lookups answered without importing fsspec.

    Examples:
        >>> import tempfile
        >>> from shardflow.sdk.local_disk import LocalDisk
        >>> LocalDisk().info(tempfile.gettempdir())["type"]
        'directory'
    """

    protocol = ("file", "local")
    root_marker = "/"

    def __init__(self) -> None:
        self._fsspec: Any = None

    def fsspec(self) -> Any:
        """The fsspec ``LocalFileSystem`` that serves every other call."""
        if self._fsspec is None:
            import fsspec

            self._fsspec = fsspec.filesystem("file")
        return self._fsspec

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_fsspec":
            raise AttributeError(name)
        return getattr(self.fsspec(), name)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._fsspec = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalDisk)

    def __hash__(self) -> int:
        return hash(LocalDisk)

    def __repr__(self) -> str:
        return "LocalDisk()"

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        """``{"name", "size", "type", "mtime"}`` of ``path`` as fsspec gives them (links
        followed), and ``mtime_ns``.

        Raises:
            FileNotFoundError: when nothing is at ``path``.
        """
        path = self._strip_protocol(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise FileNotFoundError(path) from None
        if stat.S_ISDIR(st.st_mode):
            kind = "directory"
        elif stat.S_ISREG(st.st_mode):
            kind = "file"
        else:
            kind = "other"
        return {
            "name": path,
            "size": st.st_size,
            "type": kind,
            "mtime": st.st_mtime,
            "mtime_ns": st.st_mtime_ns,
        }

    def exists(self, path: str, **kwargs: Any) -> bool:
        return os.path.exists(self._strip_protocol(path))

    def isdir(self, path: str) -> bool:
        return os.path.isdir(self._strip_protocol(path))

    def isfile(self, path: str) -> bool:
        return os.path.isfile(self._strip_protocol(path))

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        path = os.fspath(path)
        for prefix in ("file://", "local://"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
        path = os.path.abspath(os.path.expanduser(path)) if path else path
        return path.rstrip("/") or "/"
