"""File names of a write: :class:`FilenameProvider` (Ray Data's API) and the per-task namer.

A provider names the file of each write task (``get_filename_for_task``); files that hold one
row each derive their names from it by appending ``_{block_index:06}_{row_index:06}`` before
the extension, as Ray Data does. Providers written against the older API, which override
``get_filename_for_block`` or ``get_filename_for_row`` instead, are still honoured.
"""

from __future__ import annotations

from typing import Any

from shardflow.sdk.block import Block


def split_base_and_ext(filename: str) -> tuple[str, str]:
    """``("name", ".ext")`` for ``"name.ext"``; ``(filename, "")`` without a dot."""
    if "." in filename:
        base, ext = filename.rsplit(".", 1)
        return base, "." + ext
    return filename, ""


class FilenameProvider:
    """Names the files a write creates. Subclass it and override ``get_filename_for_task``.

    Names must be unique within a write and deterministic for a given ``write_uuid`` and
    ``task_index``: include both in the name.

    Args:
        dataset_uuid: When given, a prefix of every name: ``{dataset_uuid}_{write_uuid}_...``.
        file_format: The extension appended to names (no dot), e.g. ``"parquet"``.

    Examples:
        >>> from shardflow import FilenameProvider
        >>> class Prefixed(FilenameProvider):
        ...     def get_filename_for_task(self, write_uuid, task_index):
        ...         return f"part_{write_uuid}_{task_index:06}.{self.file_format}"
        >>> Prefixed(file_format="csv").get_filename_for_task("abc", 3)
        'part_abc_000003.csv'
    """

    def __init__(self, dataset_uuid: str | None = None, file_format: str | None = None):
        self.dataset_uuid = dataset_uuid
        self.file_format = file_format

    def get_filename_for_task(self, write_uuid: str, task_index: int) -> str:
        """The name of the file written by write task ``task_index`` (no folder).

        Returns ``[{dataset_uuid}_]{write_uuid}_{task_index:06}[.{file_format}]``.
        """
        dataset_uuid = getattr(self, "dataset_uuid", None)
        file_format = getattr(self, "file_format", None)
        name = f"{dataset_uuid}_" if dataset_uuid is not None else ""
        name += f"{write_uuid}_{task_index:06}"
        return f"{name}.{file_format}" if file_format is not None else name

    def get_filename_for_block(
        self, block: Block | None, write_uuid: str, task_index: int, block_index: int
    ) -> str:
        """Older API: the file name for a block. Override ``get_filename_for_task`` instead."""
        raise NotImplementedError

    def get_filename_for_row(
        self,
        row: dict[str, Any],
        write_uuid: str,
        task_index: int,
        block_index: int,
        row_index: int,
    ) -> str:
        """Older API: the file name for one row. Override ``get_filename_for_task`` instead."""
        raise NotImplementedError


def _overrides(provider: FilenameProvider, method: str) -> bool:
    return getattr(type(provider), method) is not getattr(FilenameProvider, method)


class TaskFileNamer:
    """Names the files of one write task; created inside the task, so never shared.

    Args:
        provider: The write's FilenameProvider.
        write_uuid: The write's id.
        task_index: The write task's index.
        indexed: Name every block file ``{stem}-{i}{ext}`` with ``i`` counting the task's
            files (Parquet's naming, which lets a task write several files).
    """

    def __init__(
        self, provider: FilenameProvider, write_uuid: str, task_index: int, indexed: bool = False
    ):
        self.provider = provider
        self.write_uuid = write_uuid
        self.task_index = task_index
        self.indexed = indexed
        self._counts: dict[str, int] = {}
        legacy_block = _overrides(provider, "get_filename_for_block")
        legacy_row = _overrides(provider, "get_filename_for_row")
        modern = _overrides(provider, "get_filename_for_task")
        self._legacy_block = legacy_block and not modern
        self._legacy_row = legacy_row and not modern

    def _task_name(self) -> str:
        name = self.provider.get_filename_for_task(self.write_uuid, self.task_index)
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"{type(self.provider).__name__}.get_filename_for_task must return a file name "
                f"(a non-empty string), got {name!r}."
            )
        return name

    def block_file(self, block: Block, block_index: int, folder: str = "") -> str:
        """The name of the next file of this task in ``folder`` (relative to the destination)."""
        count = self._counts.get(folder, 0)
        self._counts[folder] = count + 1
        if self._legacy_block:
            name = self.provider.get_filename_for_block(
                block, self.write_uuid, self.task_index, block_index
            )
        elif self.indexed:
            name = indexed_name(self._task_name(), count)
        else:
            name = self._task_name()
            if count:
                base, ext = split_base_and_ext(name)
                name = f"{base}_{count:06}{ext}"
        return f"{folder}/{name}" if folder else name

    def row_file(
        self, row: dict[str, Any], block_index: int, row_index: int, folder: str = ""
    ) -> str:
        """The name of the file holding one row."""
        if self._legacy_row:
            name = self.provider.get_filename_for_row(
                row, self.write_uuid, self.task_index, block_index, row_index
            )
        else:
            base, ext = split_base_and_ext(self._task_name())
            name = f"{base}_{block_index:06}_{row_index:06}{ext}"
        return f"{folder}/{name}" if folder else name


def indexed_name(filename: str, index: int) -> str:
    """``filename`` with a file counter, as Ray Data names Parquet files.

    A ``{i}`` placeholder is replaced; otherwise ``-{index}`` goes before the extension.
    """
    if "{i}" in filename:
        return filename.replace("{i}", str(index))
    base, ext = split_base_and_ext(filename)
    return f"{base}-{index}{ext}"
