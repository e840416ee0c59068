"""Folders private to one shardflow process: spill files, shared-memory blocks, shared values.

Blocks written to local disk or ``/dev/shm`` hold the user's data, so other local users must
not read them. Every such file lives in a folder made for one run of one process:

- the folder is created with mode 0700 (``tempfile.mkdtemp``) and named
  ``<prefix><owner pid>-<random>``; each file in it is created with ``O_EXCL`` and mode 0600;
- the folder is removed when the run ends (its owner removes it, and every folder still
  registered here is removed at interpreter exit);
- a folder whose owner was killed (SIGKILL, out of memory) is removed the next time a
  shardflow process makes a folder with the same prefix in the same place.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
import threading

_live: set[str] = set()
_swept: set[tuple[str, str]] = set()
_lock = threading.Lock()


def make_private_dir(prefix: str, parent: str | None = None) -> str:
    """A new, empty folder (mode 0700) owned by this process, removed at exit.

    The first call for a ``(prefix, parent)`` removes the folders of that prefix left by
    processes that no longer exist.

    Args:
        prefix: The start of the folder's name; the owner's pid follows it.
        parent: Where to make it (default: the system's temporary folder).

    Returns:
        The folder's path.
    """
    parent = parent or tempfile.gettempdir()
    with _lock:
        if (prefix, parent) not in _swept:
            _swept.add((prefix, parent))
            sweep_dead_owners(prefix, parent)
        path = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent)
        _live.add(path)
    return path


def remove_private_dir(path: str) -> None:
    """Remove a folder made by ``make_private_dir`` and everything in it, now."""
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        _live.discard(path)


def forget_private_dir(path: str) -> None:
    """Stop tracking a folder that was removed by other means."""
    with _lock:
        _live.discard(path)


def create_private_file(path: str) -> None:
    """Create the empty file ``path`` with mode 0600; fails if anything exists there (so a
    planted file or link is never written through)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    os.close(fd)


def sweep_dead_owners(prefix: str, parent: str) -> None:
    """Remove entries ``<prefix><pid>-...`` in ``parent`` whose owner process has ended and
    that belong to this user (folders, and single files of older versions)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix):
            continue
        pid_text = name[len(prefix) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or pid_alive(int(pid_text)):
            continue
        path = os.path.join(parent, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if info.st_uid != os.getuid():
            continue
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@atexit.register
def _remove_live_dirs() -> None:
    with _lock:
        paths = list(_live)
        _live.clear()
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
