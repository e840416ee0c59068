"""Where a file write keeps its work until the commit, and how an interrupted one is found.

A write stages its files in a hidden folder named ``.shardflow-staging-<dest>-<write>``:
inside the destination when the destination exists or is on an object store, beside it (in
its parent folder) when a new local destination is created, so that the commit is one rename
of a folder. ``<dest>`` is a hash of the destination, so the folders of one destination are
found by name; ``<write>`` is the write's id, or ``resume`` for a resumable write (one per
destination). A staging folder holds:

* ``_owner.json``: the destination, host, pid and start time of the process writing;
* ``data/``: the staged files, laid out as they will be in the destination;
* for resumable writes, ``_write.json`` and ``_task-*.json`` (see
  :mod:`shardflow.sdk.write_journal`);
* ``_commit.json`` once the commit of a new local destination begins (see
  :mod:`shardflow.sdk.file_commit`).

A commit that changes an existing folder or an object store one file at a time first writes
the marker ``_shardflow_commit-<write>.json`` into the destination and removes it last: while
it is there, shardflow's readers refuse the folder (:class:`InterruptedCommitError`), and the
next write to the destination, or ``shardflow staging clean``, finishes the commit (each write
has its own marker, so writes that append to one folder at once do not disturb each other).

A staging folder is *abandoned* when its owner process is gone (same host, pid dead or
reused), when it has no owner record, or when it was last claimed by another host more than
:data:`FOREIGN_STAGING_TTL_S` ago.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from shardflow.sdk.filesystems import basename, display_path, join, parent, supports_rename

STAGING_PREFIX = ".shardflow-staging-"
TRASH_PREFIX = ".shardflow-trash-"
COMMIT_MARKER_PREFIX = "_shardflow_commit-"
OWNER_FILE = "_owner.json"
COMMIT_RECORD = "_commit.json"
DATA_FOLDER = "data"
RESUMABLE_ID = "resume"
#: A staging folder claimed by a process on another machine counts as abandoned after this.
FOREIGN_STAGING_TTL_S = 24 * 3600.0


class InterruptedCommitError(OSError):
    """A folder holds a write whose commit was interrupted: some of its files are in place
    and others are not. The message names the write and the command that finishes it."""


def destination_key(dest: str) -> str:
    """The part of staging folder names that ties them to the destination ``dest``."""
    return hashlib.sha1(dest.rstrip("/").encode()).hexdigest()[:12]


def staging_name(dest: str, write_id: str) -> str:
    return f"{STAGING_PREFIX}{destination_key(dest)}-{write_id}"


def clean_command(fs: Any, dest: str) -> str:
    return f"shardflow staging clean {display_path(fs, dest)}"


# -- small JSON records -------------------------------------------------------------------


def read_json(fs: Any, path: str) -> dict[str, Any] | None:
    """The JSON object at ``path``, or None when it is missing or unreadable."""
    try:
        with fs.open(path, "rb") as f:
            value = json.loads(f.read().decode())
    except (FileNotFoundError, ValueError, OSError):
        return None
    return value if isinstance(value, dict) else None


def write_json(fs: Any, path: str, value: dict[str, Any]) -> None:
    """Write ``value`` at ``path`` whole: through a temporary name and a rename where the
    filesystem renames (a process killed mid-write leaves no half record), else by one
    upload, which object stores make visible whole."""
    payload = json.dumps(value, sort_keys=True).encode()
    if supports_rename(fs):
        temporary = join(fs, parent(path), f".{basename(path)}.{os.getpid()}.tmp")
        with fs.open(temporary, "wb") as f:
            f.write(payload)
        fs.mv(temporary, path)
    else:
        with fs.open(path, "wb") as f:
            f.write(payload)


# -- owners -------------------------------------------------------------------------------


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (Linux: clock ticks since boot), to tell a reused pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return None


def owner_record(fs: Any, dest: str, resumable: bool) -> dict[str, Any]:
    """Who writes a staging folder: this process."""
    return {
        "destination": display_path(fs, dest),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_start": _process_start(os.getpid()),
        "claimed": time.time(),
        "resumable": resumable,
    }


_ACTIVE: set[str] = set()  # staging folders and markers this process is working in now


def claim(path: str) -> None:
    """Note that this process works in ``path`` (a staging folder or a commit marker) now."""
    _ACTIVE.add(path)


def release(path: str) -> None:
    _ACTIVE.discard(path)


def owner_alive(owner: dict[str, Any] | None, path: str) -> bool:
    """Whether the process named by the owner record of ``path`` may still be working in it."""
    if not owner:
        return False
    if owner.get("host") != socket.gethostname():
        claimed = owner.get("claimed")
        return isinstance(claimed, (int, float)) and time.time() - claimed < FOREIGN_STAGING_TTL_S
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    if pid == os.getpid():
        return path in _ACTIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    started = owner.get("pid_start")
    return started is None or _process_start(pid) in (None, started)


def describe_owner(owner: dict[str, Any] | None) -> str:
    if not owner:
        return "an unknown process"
    when = owner.get("claimed")
    since = (
        time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(when))
        if isinstance(when, (int, float))
        else ""
    )
    return f"pid {owner.get('pid')} on {owner.get('host')}{since}"


# -- finding the staging folders of a destination -----------------------------------------


@dataclass(frozen=True)
class StagingFolder:
    """A staging or trash folder of a destination.

    Attributes:
        path: The folder, as the filesystem names it.
        kind: ``"resumable"``, ``"write"`` or ``"trash"``.
        beside: True when it lies beside the destination rather than inside.
    """

    path: str
    kind: str
    beside: bool

    @property
    def name(self) -> str:
        return basename(self.path)


def _kind(name: str) -> str:
    if name.startswith(TRASH_PREFIX):
        return "trash"
    return "resumable" if name.endswith(RESUMABLE_ID) or "-resume-" in name else "write"


def _names(fs: Any, folder: str) -> list[str]:
    try:
        listing = fs.ls(folder, detail=False, refresh=True)
    except TypeError:  # filesystems whose ls takes no refresh
        listing = fs.ls(folder, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [p.rstrip("/") for p in listing]


def find_stagings(fs: Any, dest: str, beside: bool = True) -> list[StagingFolder]:
    """The staging and trash folders of the destination ``dest``: inside it, and with
    ``beside`` also in its parent folder (where new local destinations are staged)."""
    found = []
    for path in _names(fs, dest):
        name = basename(path)
        if name.startswith((STAGING_PREFIX, TRASH_PREFIX)):
            found.append(StagingFolder(path, _kind(name), False))
    up = parent(dest)
    if beside and up and up != dest:
        prefix = STAGING_PREFIX + destination_key(dest) + "-"
        for path in _names(fs, up):
            if basename(path).startswith(prefix):
                found.append(StagingFolder(path, _kind(basename(path)), True))
    return sorted(found, key=lambda s: s.path)


# -- the commit marker --------------------------------------------------------------------


def marker_path(fs: Any, dest: str, write_id: str) -> str:
    return join(fs, dest, f"{COMMIT_MARKER_PREFIX}{write_id}.json")


def is_marker(name: str) -> bool:
    """Whether a file name is a commit marker's."""
    return name.startswith(COMMIT_MARKER_PREFIX) and name.endswith(".json")


def find_markers(fs: Any, dest: str) -> list[str]:
    """The commit markers in the destination ``dest``."""
    return sorted(p for p in _names(fs, dest) if is_marker(basename(p)))


def interrupted_commit_message(
    fs: Any, folder: str, path: str, marker: dict[str, Any] | None
) -> str:
    marker = marker or {}
    alive = owner_alive(marker.get("owner"), path)
    who = describe_owner(marker.get("owner"))
    state = (
        f"is being committed right now by {who}"
        if alive
        else f"was interrupted during its commit (started by {who})"
    )
    return (
        f"{display_path(fs, folder)} holds a write (id {marker.get('write_id', '?')}) that "
        f"{state}: some of its files are in place and others are not, so reading the folder "
        f"now would give part of that write. "
        + (
            "Read it again once that write has finished."
            if alive
            else "Rerun the write, or run `"
            + clean_command(fs, folder)
            + "` to finish its commit, then read again."
        )
    )


def refuse_interrupted_commit(fs: Any, path: str) -> None:
    """Raise :class:`InterruptedCommitError` naming the write whose commit marker is ``path``
    (the caller found it in a listing)."""
    marker = read_json(fs, path)
    raise InterruptedCommitError(interrupted_commit_message(fs, parent(path), path, marker))


def _folder_size(fs: Any, folder: str) -> tuple[int, int]:
    """(files, bytes) under ``folder``."""
    try:
        found = fs.find(folder, detail=True)
    except (FileNotFoundError, OSError):
        return 0, 0
    sizes = [
        int(info.get("size") or 0) for info in found.values() if info.get("type") != "directory"
    ]
    return len(sizes), sum(sizes)


def staging_report(fs: Any, dest: str, beside: bool = True) -> list[dict[str, Any]]:
    """What is left of earlier writes at ``dest``: an interrupted commit's marker, and each
    staging or trash folder with its owner, whether that owner is gone, files and bytes."""
    report = []
    commit_states: dict[str, str] = {}  # staging and trash folder names -> state
    for marker in find_markers(fs, dest):
        commit = read_json(fs, marker) or {}
        state = "committing" if owner_alive(commit.get("owner"), marker) else "interrupted"
        for key in ("staging", "trash"):
            commit_states[basename(str(commit.get(key, "")))] = state
        report.append(
            {
                "kind": "commit",
                "path": display_path(fs, marker),
                "state": state,
                "owner": describe_owner(commit.get("owner")),
                "write_id": commit.get("write_id"),
                "files": len(commit.get("moves") or []),
                "bytes": None,
            }
        )
    for folder in find_stagings(fs, dest, beside):
        owner = read_json(fs, join(fs, folder.path, OWNER_FILE))
        record = read_json(fs, join(fs, folder.path, COMMIT_RECORD))
        if folder.name in commit_states:
            state = commit_states[folder.name]  # the files of a commit with a marker
        elif record is not None:
            state = "committing" if owner_alive(record.get("owner"), folder.path) else "interrupted"
        elif folder.kind == "trash":
            state = "abandoned"
        else:
            state = "in use" if owner_alive(owner, folder.path) else "abandoned"
        files, size = _folder_size(fs, folder.path)
        report.append(
            {
                "kind": folder.kind,
                "path": display_path(fs, folder.path),
                "state": state,
                "owner": describe_owner(owner) if folder.kind != "trash" else "-",
                "write_id": None,
                "files": files,
                "bytes": size,
            }
        )
    return report
