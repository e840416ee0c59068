"""A device that fills up while a write runs: the error names the file and the bytes it needed,
and the destination is left as it was.

The full device is an fsspec filesystem (a subclass of fsspec's memory filesystem registered
under the protocol ``tinymem``) whose files raise ENOSPC, as an operating system does, once
all its files together would pass a quota."""

from __future__ import annotations

import errno
import re
import threading

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFile, MemoryFileSystem

import shardflow as sf

pytestmark = pytest.mark.timeout(120)


# Write tasks run side by side: the quota is checked and the bytes written under one lock, or
# one task's measure of another's file would race with that file's growth.
_DEVICE_LOCK = threading.Lock()


class _QuotaFile(MemoryFile):
    def write(self, data):
        with _DEVICE_LOCK:
            others = [f for f in list(self.fs.store.values()) if f is not self]
            used = sum(f.getbuffer().nbytes for f in others) + self.tell()
            if used + len(data) > self.fs.quota:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(data)


class TinyDisk(MemoryFileSystem):
    """A memory filesystem of ``quota`` bytes."""

    protocol = ("tinymem",)
    store: dict = {}
    pseudo_dirs = [""]
    quota = 0

    @classmethod
    def _strip_protocol(cls, path):
        if path.startswith("tinymem://"):
            path = path[len("tinymem://") :]
        return MemoryFileSystem._strip_protocol(path)

    def _open(self, path, mode="rb", **kwargs):
        if "w" in mode:
            super()._open(path, mode, **kwargs)  # makes the parent folders
            f = _QuotaFile(self, self._strip_protocol(path))
            f.commit()  # as fsspec's memory files: visible from the start
            return f
        return super()._open(path, mode, **kwargs)


@pytest.fixture
def tiny_disk():
    fsspec.register_implementation("tinymem", TinyDisk, clobber=True)
    TinyDisk.store.clear()
    TinyDisk.pseudo_dirs[:] = [""]
    yield TinyDisk
    TinyDisk.store.clear()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_full_device_names_the_file_and_the_bytes_it_needs(tiny_disk, fmt):
    tiny_disk.quota = 20_000
    ds = sf.range(200_000, override_num_blocks=2)
    with pytest.raises(OSError) as info:
        getattr(ds, f"write_{fmt}")("tinymem://out")
    error = info.value
    assert error.errno == errno.ENOSPC
    message = str(error)
    assert re.search(rf"while writing tinymem:///out/\.shardflow-staging-[^ ]+\.{fmt}", message)
    needed = int(re.search(r"take ([\d,]+) bytes in memory", message).group(1).replace(",", ""))
    assert needed >= 800_000  # 100,000 int64 ids of one task, at least
    assert "bytes of the file were written" in message
    assert not [p for p in tiny_disk.store if not p.startswith("/out/.")]  # nothing visible
    tiny_disk.quota = 10**8
    getattr(ds, f"write_{fmt}")("tinymem://out", mode="overwrite")
    assert getattr(sf, f"read_{fmt}")("tinymem://out").count() == 200_000
