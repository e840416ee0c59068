"""Which data files a Lance write has made, so a failed write can delete them.

Lance names data files itself (random names under ``<dataset>/data/``), and a write task that
finished before another one failed returns its fragments to nobody. So each write task
records every data file Lance made: an empty marker file named after it in
``<dataset>/_shardflow_writes/<write id>/``, when Lance moves on to the next file and when
the task's last file is written. On failure the driver deletes the data files
named there; after the commit, or after the cleanup, the marker folder goes too. A data file
of a task that dies before it is recorded is left behind unreferenced by any version
(invisible to readers); ``LanceDataset.cleanup_old_versions`` removes such files.
"""

from __future__ import annotations

import logging
from typing import Any

from shardflow.sdk.filesystems import resolve_filesystem

logger = logging.getLogger(__name__)

STAGING_FOLDER = "_shardflow_writes"


class WriteJournal:
    """The markers of one write to the dataset at ``uri``."""

    def __init__(self, uri: str, write_id: str):
        self.uri = uri
        self.write_id = write_id
        self._fs: Any = None
        self._root = ""

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri, "write_id": self.write_id, "_fs": None, "_root": ""}

    def _resolve(self) -> tuple[Any, str]:
        if self._fs is None:
            fs, paths = resolve_filesystem([self.uri])
            self._fs, self._root = fs, paths[0].rstrip("/")
        return self._fs, self._root

    def _folder(self) -> str:
        fs, root = self._resolve()
        return f"{root}/{STAGING_FOLDER}/{self.write_id}"

    def record(self, data_file: str) -> None:
        """Note that this write made ``data/<data_file>`` (called in write tasks)."""
        fs, _ = self._resolve()
        folder = self._folder()
        try:
            fs.makedirs(folder, exist_ok=True)
            with fs.open(f"{folder}/{data_file.replace('/', '%2F')}", "wb"):
                pass
        except Exception as exc:  # the write goes on; only a later cleanup needs the marker
            logger.warning(
                "Could not record Lance data file %s of %s: %s", data_file, self.uri, exc
            )

    def recorded(self) -> list[str]:
        """The data files recorded so far (relative to ``<dataset>/data``)."""
        fs, _ = self._resolve()
        try:
            names = fs.ls(self._folder(), detail=False)
        except FileNotFoundError:
            return []
        return sorted(n.rstrip("/").rsplit("/", 1)[-1].replace("%2F", "/") for n in names)

    def delete_recorded_files(self) -> None:
        """Delete every recorded data file (the write failed)."""
        fs, root = self._resolve()
        for name in self.recorded():
            try:
                fs.rm(f"{root}/data/{name}")
            except FileNotFoundError:
                pass

    def remove(self, created_dataset: bool = False) -> None:
        """Remove the markers; with ``created_dataset`` also the folders the write created,
        when nothing else is left in them."""
        fs, root = self._resolve()
        folders = [self._folder(), f"{root}/{STAGING_FOLDER}"]
        if created_dataset:
            folders += [f"{root}/data", root]
        try:
            fs.rm(folders[0], recursive=True)
        except FileNotFoundError:
            pass
        for folder in folders[1:]:
            try:
                if not fs.ls(folder, detail=False):
                    fs.rmdir(folder)
            except (FileNotFoundError, OSError, NotImplementedError):
                pass
