"""Reading a line-oriented file (CSV, JSON Lines) in large chunks that end at line ends.

The CSV and JSON connectors parse each chunk with Arrow's whole-buffer readers
(``pyarrow.csv.read_csv`` / ``pyarrow.json.read_json`` over a ``pyarrow.Buffer``) instead of
Arrow's streaming readers, because:

* memory: Arrow's streaming CSV reader reads a file ahead of a consumer that waits (on the
  memory budget, on a slow transform) without bound: the whole file ends up in memory. Here a
  task holds one chunk and the table parsed from it, whatever the file's size;
* speed: a chunk's blocks are parsed on Arrow's thread pool, also for files opened through
  fsspec, at the streaming readers' speed otherwise;
* safety: Arrow's threads only ever see a buffer Arrow owns. The file is read by the task's
  own thread (a Python file object or an Arrow file alike), so no Arrow thread calls into
  Python, and none outlives the call that parses.

A chunk ends after its last ``\\n`` (or ``\\r`` when a chunk holds no ``\\n``); the bytes after
it start the next chunk. This is where Arrow itself cuts blocks when values hold no line
breaks (``newlines_in_values=False``, the default); files whose values may hold line breaks
are read with the streaming readers instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

CHUNK_BYTES = 8 * 1024 * 1024
_SEARCH_BYTES = 64 * 1024


def line_chunks(f: Any, chunk_bytes: int | None = None) -> Iterator[pa.Buffer]:
    """Yield ``f``'s bytes in buffers of about ``chunk_bytes`` (default :data:`CHUNK_BYTES`),
    each ending at a line end (the last one at the end of the file, whatever it holds).

    A line longer than ``chunk_bytes`` makes a chunk as long as the line. The buffers come
    from Arrow's memory pool, like the tables parsed from them, so the memory of one chunk
    is reused for the next rather than left to the C allocator's heap.

    Examples:
        >>> import io
        >>> from shardflow.connectors.line_chunks import line_chunks
        >>> [c.to_pybytes() for c in line_chunks(io.BytesIO(b"ab\\ncd\\nef"), chunk_bytes=4)]
        [b'ab\\n', b'cd\\n', b'ef']
    """
    size = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    if size < 1:
        raise ValueError(f"chunk_bytes must be positive, got {size}.")
    carry: pa.Buffer | None = None  # the bytes after the previous chunk's last line end
    while True:
        kept = 0 if carry is None else carry.size
        buffer = pa.allocate_buffer(kept + size)
        view = memoryview(buffer).cast("B")
        if carry is not None:
            view[:kept] = memoryview(carry).cast("B")
            carry = None
        filled = kept + _fill(f, view[kept:])
        if filled < len(view):  # the end of the file
            view.release()
            if filled:
                yield buffer.slice(0, filled)
            return
        cut = _last_line_end(view, filled)
        view.release()
        if cut < 0:  # no line end yet: the line goes on into the next read
            carry = buffer
            continue
        carry = buffer.slice(cut + 1, filled - cut - 1)
        chunk = buffer.slice(0, cut + 1)
        del buffer
        yield chunk
        del chunk


def _last_line_end(view: memoryview, end: int) -> int:
    """Index of the last ``\\n`` in ``view[:end]``, else of the last ``\\r`` before the last
    byte (a ``\\r`` there may start a ``\\r\\n`` that the next read completes), else -1."""
    for mark, stop in ((b"\n", end), (b"\r", end - 1)):
        while stop > 0:
            start = max(0, stop - _SEARCH_BYTES)
            found = bytes(view[start:stop]).rfind(mark)
            if found >= 0:
                return start + found
            stop = start
    return -1


def _fill(f: Any, view: memoryview) -> int:
    """Read into ``view`` until it is full or the file ends; the number of bytes read."""
    total = 0
    readinto = getattr(f, "readinto", None)
    while total < len(view):
        if readinto is not None:
            n = readinto(view[total:])
        else:
            data = f.read(len(view) - total)
            n = len(data)
            view[total : total + n] = data
        if not n:
            break
        total += n
    return total
