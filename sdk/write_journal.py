"""The journal of a resumable file write: which write tasks already staged their files.

With ``write_*(..., resume=True)`` the staging folder of a write has a name that depends only on
the destination, and every write task that has staged all its files records them in a small
JSON file there. If the driver dies (or the write fails), the staging folder stays; the next
run with ``resume=True`` finds it, reuses the write's id (so file names are the same), skips
the tasks already recorded, and commits everything at the end.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from shardflow.sdk.filesystems import join

RESUME_STAGING = "resume-"
_WRITE_FILE = "_write.json"
_TASK_PREFIX = "_task-"


def resumable_staging_name(path: str) -> str:
    """The staging folder name of resumable writes to ``path`` (stable across runs)."""
    return RESUME_STAGING + hashlib.sha1(path.encode()).hexdigest()[:20]


class WriteJournal:
    """The journal in a staging folder ``staging`` on filesystem ``fs``."""

    def __init__(self, fs: Any, staging: str):
        self.fs = fs
        self.staging = staging

    def start(self) -> str:
        """The write id: the recorded one when resuming, else a new one (recorded)."""
        recorded = self._read(join(self.fs, self.staging, _WRITE_FILE))
        if recorded and recorded.get("write_uuid"):
            return recorded["write_uuid"]
        write_uuid = uuid.uuid4().hex
        self._write(join(self.fs, self.staging, _WRITE_FILE), {"write_uuid": write_uuid})
        return write_uuid

    def done_tasks(self) -> dict[int, dict[str, Any]]:
        """{task index: {"files": [...], "rows": n, "bytes": b}} of the tasks recorded."""
        done: dict[int, dict[str, Any]] = {}
        try:
            names = self.fs.ls(self.staging, detail=False)
        except FileNotFoundError:
            return done
        for name in names:
            base = name.rstrip("/").rsplit("/", 1)[-1]
            if base.startswith(_TASK_PREFIX) and base.endswith(".json"):
                entry = self._read(name)
                if entry is not None:
                    done[int(entry["task"])] = entry
        return done

    def record(self, task_index: int, files: list[str], rows: int, size: int) -> None:
        """A task staged all its files."""
        entry = {"task": task_index, "files": files, "rows": rows, "bytes": size}
        self._write(join(self.fs, self.staging, f"{_TASK_PREFIX}{task_index:08d}.json"), entry)

    def _read(self, path: str) -> dict[str, Any] | None:
        try:
            with self.fs.open(path, "rb") as f:
                return json.loads(f.read().decode())
        except (FileNotFoundError, ValueError, OSError):
            return None

    def _write(self, path: str, entry: dict[str, Any]) -> None:
        # Written whole to a temporary name and moved where the store can (local disk), so a
        # task killed mid-write never leaves a half-written entry.
        payload = json.dumps(entry).encode()
        from shardflow.sdk.filesystems import supports_rename

        if supports_rename(self.fs):
            temporary = path + ".tmp"
            with self.fs.open(temporary, "wb") as f:
                f.write(payload)
            self.fs.mv(temporary, path)
        else:
            with self.fs.open(path, "wb") as f:
                f.write(payload)
