"""The commit of a file write: staged files become visible, and a killed commit is finished.

Three ways, chosen when the commit starts (:func:`commit_staged`):

* **A new local folder** (staging beside the destination): the record ``_commit.json`` is
  written into the staging folder, then its ``data/`` folder is renamed to the destination:
  the destination appears in one atomic step, whole.
* **An existing local folder, or ``memory://``**: the marker ``_shardflow_commit-<write>.json`` (see
  :mod:`shardflow.sdk.staging`), listing every move, is written into the destination; then
  the files an overwrite replaces are moved into a trash folder, the staged files are moved
  into place, and the trash, the staging folder and last the marker are removed.
* **Object stores** (no rename): the same marker; ``_SUCCESS`` is deleted; an overwrite backs
  up the objects it replaces; each staged object is copied into place server-side; the
  replaced objects are deleted; ``_SUCCESS`` is written, then the backups, the staging prefix
  and last the marker are removed.

A commit step that fails undoes the commit (the destination is as it was) and raises
:class:`WriteCommitError` naming the step. A commit killed at any instant leaves its record or
marker: :func:`finish_interrupted_commits`, called by the next write to the destination and by
``shardflow staging clean``, rolls it forward (every step is written so that repeating it is
harmless), and returns the identities of the writes it finished, so that a rerun of the same
write knows that its work is done.

``SHARDFLOW_TEST_KILL_AT_COMMIT_STEP=k`` makes the process kill itself with SIGKILL at the
k-th step of its next commit: the fault tests use it to interrupt a commit at every step.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from shardflow.sdk.filesystems import basename, display_path, is_local, join, parent
from shardflow.sdk.retry import RetryConfig, call_with_retry
from shardflow.sdk.staging import (
    COMMIT_RECORD,
    DATA_FOLDER,
    OWNER_FILE,
    TRASH_PREFIX,
    InterruptedCommitError,
    claim,
    describe_owner,
    find_markers,
    find_stagings,
    marker_path,
    owner_alive,
    owner_record,
    read_json,
    release,
    write_json,
)

logger = logging.getLogger(__name__)

SUCCESS_FILE = "_SUCCESS"
_KILL_AT = "SHARDFLOW_TEST_KILL_AT_COMMIT_STEP"


class WriteCommitError(OSError):
    """Making a write visible failed; the message names the step, and whether the destination
    is back to its previous content (it is, unless restoring failed as well)."""


class _Steps:
    """Counts the steps of one commit (for ``SHARDFLOW_TEST_KILL_AT_COMMIT_STEP``)."""

    def __init__(self) -> None:
        at = os.environ.get(_KILL_AT, "")
        self._kill_at = int(at) if at.isdigit() else 0
        self._count = 0

    def __call__(self, fn: Callable[[], Any]) -> Any:
        self._count += 1
        if self._count == self._kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(10)  # the signal arrives before this ends
        return fn()


class Commit:
    """The commit of one write.

    Args:
        fs: The filesystem.
        dest: The destination folder, as ``fs`` names it.
        staging: The write's staging folder (its files are under ``data/``).
        write_id: The write's id (names the trash or backup folder).
        overwrite: Whether the destination's visible contents are replaced.
        command: What identifies the write (recorded, returned by a roll forward).
        retry: Retry policy for object-store calls.
    """

    def __init__(
        self,
        fs: Any,
        dest: str,
        staging: str,
        write_id: str,
        overwrite: bool,
        command: dict[str, Any] | None,
        retry: RetryConfig,
    ):
        self.fs, self.dest, self.staging, self.write_id = fs, dest, staging, write_id
        self.overwrite, self.command, self.retry = overwrite, command, retry
        self.shown = display_path(fs, dest)
        self.step = _Steps()

    # -- helpers --------------------------------------------------------------------------

    def _retried(self, fn: Callable[[], Any], description: str) -> Any:
        return call_with_retry(fn, description=description, config=self.retry)

    def _data(self, relative: str = "") -> str:
        return (
            join(self.fs, self.staging, DATA_FOLDER, relative)
            if relative
            else join(self.fs, self.staging, DATA_FOLDER)
        )

    def _record(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "write_id": self.write_id,
            "destination": self.shown,
            "staging": self.staging,
            "command": self.command,
            "owner": owner_record(self.fs, self.dest, False),
            **fields,
        }

    # -- a new local folder: one rename -----------------------------------------------------

    def rename_folder(self) -> None:
        fs, record_path = self.fs, join(self.fs, self.staging, COMMIT_RECORD)
        self.step(lambda: write_json(fs, record_path, self._record("folder")))
        try:
            self.step(lambda: _rename_folder(fs, self._data(), self.dest))
        except BaseException as exc:
            _quiet(lambda: fs.rm(record_path))
            if not isinstance(exc, Exception):
                raise
            raise WriteCommitError(
                f"Committing the write to {self.shown} failed while trying to rename the staged "
                f"folder into place: {type(exc).__name__}: {exc}. Nothing was written."
            ) from exc
        self.step(lambda: _quiet(lambda: fs.rm(self.staging, recursive=True)))

    # -- an existing local folder: moves under a marker ------------------------------------

    def move_files(self, staged: list[str], old: list[str]) -> None:
        fs, trash = self.fs, join(self.fs, self.dest, TRASH_PREFIX + self.write_id)
        marker = marker_path(fs, self.dest, self.write_id)
        record = self._record("move", moves=staged, old=old, trash=trash)
        claim(marker)
        try:
            trashed: list[str] = []
            moved: list[str] = []
            step = "write the commit marker"
            try:
                self.step(lambda: write_json(fs, marker, record))
                step = "move the files it replaces aside"
                if old:
                    fs.makedirs(trash, exist_ok=True)
                for entry in old:
                    self.step(
                        partial(
                            fs.mv,
                            join(fs, self.dest, entry),
                            join(fs, trash, entry),
                            recursive=True,
                        )
                    )
                    trashed.append(entry)
                step = "move the new files into place"
                for rel in staged:
                    target = join(fs, self.dest, rel)
                    fs.makedirs(parent(target), exist_ok=True)
                    self.step(partial(fs.mv, self._data(rel), target))
                    moved.append(rel)
            except BaseException as exc:
                restored = self._undo_moves(moved, trashed, trash)
                if restored:
                    _quiet(lambda: fs.rm(marker))
                if not isinstance(exc, Exception):
                    raise
                raise WriteCommitError(
                    f"Committing the write to {self.shown} failed while trying to {step}: "
                    f"{type(exc).__name__}: {exc}. "
                    + (
                        "The destination was restored to its previous content."
                        if restored
                        else "Restoring it failed too; run the write again to finish it."
                    )
                ) from exc
            self._finish(marker, [trash])
        finally:
            release(marker)

    def _undo_moves(self, moved: list[str], trashed: list[str], trash: str) -> bool:
        fs = self.fs
        try:
            for rel in reversed(moved):  # back into the staging folder, not deleted
                fs.mv(join(fs, self.dest, rel), self._data(rel))
            for entry in reversed(trashed):
                fs.mv(join(fs, trash, entry), join(fs, self.dest, entry), recursive=True)
            _quiet(lambda: fs.rm(trash, recursive=True))
        except Exception as exc:
            logger.error("Could not roll back the failed commit to %s: %s", self.shown, exc)
            return False
        return True

    # -- object stores: copies under a marker ----------------------------------------------

    def copy_objects(self, staged: list[str], old: list[str]) -> None:
        fs = self.fs
        _quiet(lambda: fs.invalidate_cache())  # tasks uploaded what listing caches miss
        backup_root = join(fs, self.dest, TRASH_PREFIX + self.write_id)
        marker = marker_path(fs, self.dest, self.write_id)
        success = join(fs, self.dest, SUCCESS_FILE)
        had_success = bool(_quiet(lambda: fs.exists(success), default=False))
        record = self._record(
            "copy", moves=staged, old=old, trash=backup_root, had_success=had_success
        )
        claim(marker)
        try:
            backups: list[tuple[str, str]] = []
            copied: list[str] = []
            step = "write the commit marker"
            try:
                self.step(
                    lambda: self._retried(lambda: write_json(fs, marker, record), "write marker")
                )
                step = "remove _SUCCESS"
                if had_success:
                    self.step(lambda: self._retried(lambda: fs.rm(success), f"delete {success}"))
                step = "back up the files it replaces"
                for rel in old:
                    path, backup = join(fs, self.dest, rel), join(fs, backup_root, rel)
                    self.step(
                        partial(
                            self._retried,
                            partial(fs.copy, path, backup),
                            f"back up {display_path(fs, path)}",
                        )
                    )
                    backups.append((path, backup))
                step = "copy the new files into place"
                for rel in staged:
                    dst = join(fs, self.dest, rel)
                    self.step(
                        partial(
                            self._retried,
                            partial(fs.copy, self._data(rel), dst),
                            f"copy to {display_path(fs, dst)}",
                        )
                    )
                    copied.append(dst)
                step = "delete the files it replaces"
                stale = [join(fs, self.dest, rel) for rel in old if rel not in set(staged)]
                if stale:
                    self.step(
                        lambda: self._retried(
                            lambda: fs.rm(stale), f"delete old files in {self.shown}"
                        )
                    )
                step = "write _SUCCESS"
                self.step(lambda: self._retried(lambda: _touch(fs, success), f"write {success}"))
            except BaseException as exc:
                restored = self._undo_copies(copied, backups, backup_root, had_success)
                if restored:
                    _quiet(lambda: fs.rm(marker))
                outcome = (
                    "The destination was restored to its previous content."
                    if restored
                    else "Restoring it failed too: its previous content is kept under "
                    f"{display_path(fs, backup_root)}; run the write again to finish it."
                )
                if not isinstance(exc, Exception):
                    raise
                raise WriteCommitError(
                    f"Committing the write to {self.shown} failed while trying to {step}: "
                    f"{type(exc).__name__}: {exc}. {outcome}"
                ) from exc
            self._finish(marker, [backup_root])
        finally:
            release(marker)

    def _undo_copies(
        self, copied: list[str], backups: list[tuple[str, str]], backup_root: str, had_success: bool
    ) -> bool:
        fs = self.fs
        originals = {path for path, _ in backups}
        try:
            added = [p for p in copied if p not in originals]
            if added:
                self._retried(lambda: fs.rm(added), f"remove new files from {self.shown}")
            for path, backup in backups:
                self._retried(partial(fs.copy, backup, path), f"restore {path}")
            if had_success:
                self._retried(
                    lambda: _touch(fs, join(fs, self.dest, SUCCESS_FILE)), "restore _SUCCESS"
                )
        except Exception as exc:
            logger.error("Could not roll back the failed commit to %s: %s", self.shown, exc)
            return False
        if backups:
            _quiet(lambda: fs.rm(backup_root, recursive=True))
        _quiet(lambda: fs.invalidate_cache(self.dest))
        return True

    # -- the end of every in-place commit --------------------------------------------------

    def _finish(self, marker: str, folders: list[str]) -> None:
        """Remove the trash or backups and the staging folder, then the marker: until the
        marker is gone, a rerun finishes this commit."""
        fs = self.fs
        for folder in folders:
            self.step(partial(_quiet, partial(fs.rm, folder, recursive=True)))
        self.step(lambda: _remove_folder(fs, self.staging, self.retry))
        try:
            self.step(lambda: self._retried(lambda: fs.rm(marker), f"delete {marker}"))
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise WriteCommitError(
                f"The write to {self.shown} is in place, but its commit marker "
                f"{display_path(fs, marker)} could not be removed ({type(exc).__name__}: {exc}); "
                "shardflow's readers refuse the folder until it is. Run the write again or "
                f"`shardflow staging clean {self.shown}`."
            ) from exc
        _quiet(lambda: fs.invalidate_cache(self.dest))


# -- finishing interrupted commits ----------------------------------------------------------


def finish_interrupted_commits(
    fs: Any, dest: str, retry: RetryConfig, beside: bool = True, wait_s: float = 600.0
) -> list[dict[str, Any] | None]:
    """Roll forward every interrupted commit of ``dest`` (with ``beside``, also those of new
    folders staged beside it); returns their recorded commands (None where none was
    recorded). A commit whose process still runs is waited for, up to ``wait_s`` seconds.

    Raises:
        InterruptedCommitError: when a live process is still committing after ``wait_s``.
    """
    finished: list[dict[str, Any] | None] = []
    for marker in find_markers(fs, dest):
        record = _wait_for_owner(fs, dest, marker, wait_s)
        if record is None:
            continue  # its own process finished it
        logger.warning(
            "Finishing the interrupted commit of write %s to %s.",
            record.get("write_id"),
            display_path(fs, dest),
        )
        _roll_forward(fs, dest, marker, record, retry)
        finished.append(record.get("command"))
    for folder in find_stagings(fs, dest, beside):
        if folder.kind == "trash":
            continue
        path = join(fs, folder.path, COMMIT_RECORD)
        present = _quiet(partial(fs.exists, path), default=False)
        record = read_json(fs, path) if present else None
        if record is None or owner_alive(record.get("owner"), folder.path):
            continue
        data = join(fs, folder.path, DATA_FOLDER)
        if fs.exists(data):
            if fs.exists(dest):
                raise InterruptedCommitError(
                    f"The commit of write {record.get('write_id')} to {display_path(fs, dest)} "
                    f"was interrupted before its folder was renamed into place, and "
                    f"{display_path(fs, dest)} has been created since. Its files are in "
                    f"{display_path(fs, data)}; move them yourself, or remove that staging "
                    f"folder with `shardflow staging clean --force {display_path(fs, dest)}`."
                )
            _rename_folder(fs, data, dest)
        _quiet(partial(fs.rm, folder.path, recursive=True))
        finished.append(record.get("command"))
    return finished


def _wait_for_owner(fs: Any, dest: str, marker: str, wait_s: float) -> dict[str, Any] | None:
    """The record of ``marker`` once no live process works on it; None when its process
    finished the commit meanwhile."""
    deadline = time.monotonic() + wait_s
    record = read_json(fs, marker)
    while record is not None and owner_alive(record.get("owner"), marker):
        if time.monotonic() > deadline:
            waited = f", still after {wait_s:.0f} s" if wait_s else ""
            raise InterruptedCommitError(
                f"{display_path(fs, dest)} is being committed by "
                f"{describe_owner(record.get('owner'))}{waited}; write to it or clean it once "
                "that write has finished."
            )
        time.sleep(0.2)
        _quiet(partial(fs.invalidate_cache, dest))
        record = read_json(fs, marker) if _quiet(partial(fs.exists, marker)) else None
    return record


def _roll_forward(
    fs: Any, dest: str, marker: str, record: dict[str, Any], retry: RetryConfig
) -> None:
    staging = record["staging"]
    trash = record["trash"]
    _quiet(lambda: fs.invalidate_cache())
    moves = list(record.get("moves") or [])
    old = list(record.get("old") or [])

    def data(rel: str) -> str:
        return join(fs, staging, DATA_FOLDER, rel)

    def lost(rel: str) -> OSError:
        return InterruptedCommitError(
            f"Cannot finish the interrupted commit to {display_path(fs, dest)}: the staged file "
            f"{rel} is neither in the staging folder nor in place. Remove the marker "
            f"{display_path(fs, marker)} and rewrite the data."
        )

    if record.get("kind") == "move":
        for entry in old:
            here, away = join(fs, dest, entry), join(fs, trash, entry)
            if fs.exists(here) and not fs.exists(away):
                fs.makedirs(parent(away), exist_ok=True)
                fs.mv(here, away, recursive=True)
        for rel in moves:
            target = join(fs, dest, rel)
            if fs.exists(data(rel)):
                fs.makedirs(parent(target), exist_ok=True)
                fs.mv(data(rel), target)
            elif not fs.exists(target):
                raise lost(rel)
    else:
        for rel in moves:
            target = join(fs, dest, rel)
            if fs.exists(data(rel)):
                call_with_retry(
                    partial(fs.copy, data(rel), target),
                    description=f"copy to {display_path(fs, target)}",
                    config=retry,
                )
            elif not fs.exists(target):
                raise lost(rel)
        stale = [join(fs, dest, rel) for rel in old if rel not in set(moves)]
        stale = [p for p in stale if fs.exists(p)]
        if stale:
            call_with_retry(lambda: fs.rm(stale), description="delete old files", config=retry)
        _touch(fs, join(fs, dest, SUCCESS_FILE))
    _quiet(lambda: fs.rm(trash, recursive=True))
    _remove_folder(fs, staging, retry)
    call_with_retry(
        lambda: _rm_missing_ok(fs, marker),
        description="delete commit marker",
        config=retry,
    )
    _quiet(lambda: fs.invalidate_cache(dest))


# -- small steps ----------------------------------------------------------------------------


def _rename_folder(fs: Any, src: str, dst: str) -> None:
    """Rename a folder in one step where the filesystem can (local disk); refuses to replace
    a folder that holds anything."""
    if is_local(fs):
        os.rename(src, dst)  # atomic; fails when dst holds anything
    else:
        if fs.exists(dst) and fs.ls(dst):
            raise FileExistsError(f"{display_path(fs, dst)} already holds files")
        fs.mv(src, dst, recursive=True)


def _touch(fs: Any, path: str) -> None:
    with fs.open(path, "wb"):
        pass


def _rm_missing_ok(fs: Any, path: str) -> None:
    try:
        fs.rm(path)
    except FileNotFoundError:
        pass


def _remove_folder(fs: Any, folder: str, retry: RetryConfig) -> None:
    try:
        call_with_retry(
            lambda: fs.rm(folder, recursive=True),
            description=f"delete {display_path(fs, folder)}",
            config=retry,
        )
    except FileNotFoundError:
        pass
    except Exception as exc:  # the data is safe either way; say what is left behind
        logger.warning("Could not delete staging folder %s: %s", display_path(fs, folder), exc)


def remove_abandoned(
    fs: Any, dest: str, keep: str | None = None, beside: bool = True, force: bool = False
) -> list[str]:
    """Remove the staging and trash folders of ``dest`` whose writer is gone (all but
    ``keep``; with ``force`` also those of writers that seem alive); returns what was
    removed. Call :func:`finish_interrupted_commits` first."""
    removed = []
    for folder in find_stagings(fs, dest, beside):
        if keep is not None and basename(folder.path) == basename(keep):
            continue
        if force:
            pass
        elif folder.kind != "trash":
            owner = read_json(fs, join(fs, folder.path, OWNER_FILE))
            if owner_alive(owner, folder.path) or (owner is None and _just_made(fs, folder.path)):
                continue
        elif fs.exists(marker_path(fs, dest, folder.name[len(TRASH_PREFIX) :])):
            continue  # the trash of a commit in progress
        _quiet(partial(fs.rm, folder.path, recursive=True))
        removed.append(folder.path)
    return removed


_YOUNG_S = 60.0


def _just_made(fs: Any, folder: str) -> bool:
    """Whether a local staging folder without an owner record was made in the last minute
    (its writer makes the folder, then writes the record: it may be between the two)."""
    if not is_local(fs):
        return False  # on object stores the owner record is a staging prefix's first object
    try:
        return time.time() - os.path.getmtime(folder) < _YOUNG_S
    except OSError:
        return False


def _quiet(fn: Callable[[], Any], default: Any = None) -> Any:
    try:
        return fn()
    except Exception as exc:
        logger.debug("ignored during cleanup: %s", exc)
        return default


def clean_destination(
    fs: Any, dest: str, retry: RetryConfig, beside: bool = True, force: bool = False
) -> tuple[int, list[str]]:
    """Finish the interrupted commits of ``dest`` and remove its abandoned staging and trash
    folders (with ``force``, those of writers that seem alive too). Returns the number of
    commits finished and the folders removed (``shardflow staging clean``)."""
    forced = 0
    if force:  # markers whose owner seems alive are finished too
        for marker in find_markers(fs, dest):
            record = read_json(fs, marker)
            if record is not None:
                _roll_forward(fs, dest, marker, record, retry)
                forced += 1
    finished = finish_interrupted_commits(fs, dest, retry, beside, wait_s=0.0)
    return forced + len(finished), remove_abandoned(fs, dest, None, beside, force)
