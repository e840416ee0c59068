"""Expanding the paths given to a read into the files to read, with listing calls only.

A path may be a file, a folder (read recursively) or a glob; a read may take a list of
them. A path that exists is read as written, whatever characters its name holds (a folder
named ``br[1]``); only a path that does not exist and holds ``*``, ``?`` or ``[`` is a glob.
Expansion runs on the driver and never opens a file: sizes come from the listing, so planning
10,000 files under one prefix takes one recursive listing, not 10,000 requests. Files and
folders whose name starts with ``.`` or ``_`` (``_SUCCESS``, ``.staging``) inside a listed
folder are hidden and skipped. A folder holding the marker of an interrupted commit (see
:mod:`shardflow.sdk.staging`) is refused with ``InterruptedCommitError``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shardflow.sdk.filesystems import basename, display_path, is_local, join, parent
from shardflow.sdk.retry import RetryConfig, call_with_retry
from shardflow.sdk.staging import COMMIT_MARKER_PREFIX, is_marker, refuse_interrupted_commit

logger = logging.getLogger(__name__)

_GLOB_CHARS = "*?["
# Above this many explicit paths, list their folders instead of asking about each path.
_BATCH_INFO_THRESHOLD = 16
# Folders of a glob on an object store checked for a commit marker (one request each).
_MARKER_CHECKS = 16


@dataclass(frozen=True)
class FileInfo:
    """A file found by expansion.

    Args:
        path: The path as the filesystem names it (no scheme).
        size: Size in bytes from the listing, or None when unknown.
        root: The folder the file was found under (for partition parsing); the file's own
            folder when it was named explicitly.
        version: What changes when the file is rewritten: its modification time in
            nanoseconds (local disk), ETag or generation (object stores); None when unknown.
    """

    path: str
    size: int | None
    root: str
    version: str | None = None

    @property
    def relative_path(self) -> str:
        """The path below ``root``."""
        root = self.root.rstrip("/")
        if root and self.path.startswith(root + "/"):
            return self.path[len(root) + 1 :]
        return basename(self.path)


def is_hidden(relative_path: str) -> bool:
    """Whether any component of ``relative_path`` starts with ``.`` or ``_``."""
    return any(part.startswith((".", "_")) for part in relative_path.split("/") if part)


def has_glob(path: str) -> bool:
    return any(ch in path for ch in _GLOB_CHARS)


def _glob_root(pattern: str) -> str:
    head = []
    for part in pattern.split("/"):
        if has_glob(part):
            break
        head.append(part)
    return "/".join(head) or "/"


def _is_dir(info: dict[str, Any]) -> bool:
    return info.get("type") == "directory"


def _size(info: dict[str, Any]) -> int | None:
    size = info.get("size")
    return int(size) if isinstance(size, (int, float)) else None


_VERSION_KEYS = ("mtime_ns", "ETag", "etag", "generation", "mtime", "LastModified", "updated")


def file_version(info: dict[str, Any]) -> str | None:
    """What changes when a file is rewritten, from its listing entry (see FileInfo.version)."""
    for key in _VERSION_KEYS:
        value = info.get(key)
        if value is not None and value != "":
            if key == "mtime" and isinstance(value, float):
                return str(round(value * 1e9))
            return str(value)
    created = info.get("created")
    return None if created is None else str(created)


def _normalize_name(fs: Any, name: str) -> str:
    if "://" in name and hasattr(fs, "_strip_protocol"):
        return fs._strip_protocol(name)
    return name


def _walk_local(fs: Any, folder: str) -> list[FileInfo]:
    """A local folder's visible files, pruning hidden folders without descending into them."""
    files = []
    pending = [folder]
    while pending:
        current = pending.pop()
        with os.scandir(current) as entries:
            for entry in entries:
                if entry.name.startswith((".", "_")):
                    if is_marker(entry.name):
                        refuse_interrupted_commit(fs, entry.path)
                    continue
                if entry.is_dir():
                    pending.append(entry.path)
                elif entry.is_file():
                    st = entry.stat()
                    files.append(FileInfo(entry.path, st.st_size, folder, str(st.st_mtime_ns)))
    files.sort(key=lambda f: f.path)
    return files


def _list_folder(fs: Any, folder: str, retry: RetryConfig) -> list[FileInfo]:
    if is_local(fs) and os.path.isdir(folder):
        return _walk_local(fs, folder)
    found = call_with_retry(
        lambda: fs.find(folder, detail=True, withdirs=False),
        description=f"list {display_path(fs, folder)}",
        config=retry,
    )
    files = []
    for name, info in sorted(found.items()):
        if _is_dir(info):
            continue
        path = _normalize_name(fs, info.get("name", name)).rstrip("/")
        info_file = FileInfo(path, _size(info), folder, file_version(info))
        if is_hidden(info_file.relative_path):
            folder_part = info_file.relative_path.rpartition("/")[0]
            if is_marker(basename(path)) and not is_hidden(folder_part):
                refuse_interrupted_commit(fs, path)
            continue
        files.append(info_file)
    return files


def _expand_glob(fs: Any, pattern: str, retry: RetryConfig) -> list[FileInfo]:
    matches = call_with_retry(
        lambda: fs.glob(pattern, detail=True),
        description=f"glob {display_path(fs, pattern)}",
        config=retry,
    )
    root = _glob_root(pattern)
    _refuse_interrupted_commits(fs, [root] + [parent(n) for n in matches])
    files: list[FileInfo] = []
    for name, info in sorted(matches.items()):
        path = _normalize_name(fs, info.get("name", name)).rstrip("/")
        if basename(path).startswith((".", "_")):
            continue
        if _is_dir(info):
            files.extend(
                FileInfo(f.path, f.size, root, f.version) for f in _list_folder(fs, path, retry)
            )
        else:
            files.append(FileInfo(path, _size(info), root, file_version(info)))
    return files


def _refuse_interrupted_commits(fs: Any, folders: Sequence[str]) -> None:
    """A glob lists only what it matches: look for commit markers in the folders it read."""
    distinct = sorted({_normalize_name(fs, f).rstrip("/") for f in folders if f})
    if not is_local(fs):
        distinct = distinct[:_MARKER_CHECKS]
    for folder in distinct:
        found = fs.glob(join(fs, folder, COMMIT_MARKER_PREFIX + "*.json"))
        if found:
            refuse_interrupted_commit(fs, _normalize_name(fs, sorted(found)[0]))


def _info_or_none(fs: Any, path: str, retry: RetryConfig) -> dict[str, Any] | None:
    def info() -> dict[str, Any] | None:
        try:
            return fs.info(path)
        except FileNotFoundError:
            return None

    return call_with_retry(info, description=f"look up {display_path(fs, path)}", config=retry)


def _batch_infos(fs: Any, paths: Sequence[str], retry: RetryConfig) -> dict[str, dict[str, Any]]:
    """Infos of many explicit paths, one listing per distinct parent folder."""
    by_parent: dict[str, list[str]] = {}
    for path in paths:
        by_parent.setdefault(parent(path), []).append(path)
    infos: dict[str, dict[str, Any]] = {}
    for folder in by_parent:
        try:
            listing = call_with_retry(
                functools.partial(fs.ls, folder, detail=True),
                description=f"list {display_path(fs, folder)}",
                config=retry,
            )
        except (FileNotFoundError, NotADirectoryError):
            continue
        for info in listing:
            infos[_normalize_name(fs, info["name"]).rstrip("/")] = info
    return infos


def expand_paths(
    fs: Any,
    paths: Sequence[str],
    *,
    ignore_missing_paths: bool = False,
    retry: RetryConfig | None = None,
) -> list[FileInfo]:
    """The files named by ``paths`` (files, folders, globs), in a deterministic order.

    Explicit files keep the given order; the contents of a folder or glob are sorted. A file
    named several times (or reached through several paths) is listed, and so read, once per
    mention, as Ray Data does.

    Raises:
        FileNotFoundError: naming the first path that does not exist, unless
            ``ignore_missing_paths``.
    """
    retry = retry or RetryConfig()
    if not is_local(fs) and hasattr(fs, "invalidate_cache"):
        for path in paths:  # object-store clients cache listings; another process may have written
            fs.invalidate_cache(_glob_root(path) if has_glob(path) else path)
    plain = [p for p in paths if not has_glob(p)]
    batched: dict[str, dict[str, Any]] = {}
    if len(plain) > _BATCH_INFO_THRESHOLD:
        batched = _batch_infos(fs, plain, retry)
    files: list[FileInfo] = []
    for path in paths:
        # A path that exists as written is read as written (Ray Data never globs: a folder
        # named "br[1]" is a folder); only one that does not exist is taken as a pattern.
        if has_glob(path) and _info_or_none(fs, path, retry) is None:
            found = _expand_glob(fs, path, retry)
            if not found and not ignore_missing_paths:
                raise FileNotFoundError(f"No files match {display_path(fs, path)!r}.")
            files.extend(found)
            continue
        info = batched.get(path.rstrip("/")) or _info_or_none(fs, path, retry)
        if info is None:
            if ignore_missing_paths:
                logger.info("Skipping missing path %s", display_path(fs, path))
                continue
            raise FileNotFoundError(f"No such file or directory: {display_path(fs, path)!r}.")
        if _is_dir(info):
            files.extend(_list_folder(fs, path, retry))
        else:
            _refuse_special_file(fs, path)
            files.append(FileInfo(path, _size(info), parent(path), file_version(info)))
    return files


def _refuse_special_file(fs: Any, path: str) -> None:
    """A FIFO, socket or device named explicitly is refused: reading it could block forever
    or never end (folders list regular files only)."""
    if not is_local(fs):
        return
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise ValueError(
            f"Cannot read {path}: it is {kind}. Give regular files or folders of them."
        )


def filter_extensions(files: list[FileInfo], extensions: Sequence[str] | None) -> list[FileInfo]:
    """Keep files whose name ends with ``.<ext>`` for one of ``extensions`` (any case)."""
    if extensions is None:
        return files
    suffixes = tuple("." + ext.lower().lstrip(".") for ext in extensions)
    return [f for f in files if f.path.lower().endswith(suffixes)]


def normalize_paths_arg(paths: Any) -> list[str]:
    """``paths`` as a non-empty list of strings.

    Accepts a string, a ``pathlib.Path`` (any ``os.PathLike``), or a list or tuple of them.
    """
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    if isinstance(paths, (list, tuple)):
        if not paths:
            raise ValueError(
                "paths must not be empty: give a file, a folder, a glob, or a list of them."
            )
        out = []
        for p in paths:
            if not isinstance(p, (str, os.PathLike)):
                raise TypeError(
                    f"Each path must be a string or a pathlib.Path, got {type(p).__name__}."
                )
            out.append(os.fspath(p))
        return out
    raise TypeError(
        f"paths must be a string, a pathlib.Path, or a list of them; got {type(paths).__name__}."
    )
