"""Reading a line-oriented file (CSV, JSON Lines) in chunks that end at line ends.

The CSV and JSON connectors parse each chunk with Arrow's whole-buffer readers
(``pyarrow.csv.read_csv`` / ``pyarrow.json.read_json`` over a ``pyarrow.Buffer``) instead of
Arrow's streaming readers, because:

* memory: Arrow's streaming CSV reader reads a file ahead of a consumer that waits (on the
  memory budget, on a slow transform) without bound: the whole file ends up in memory. Here a
  task holds one read buffer, the chunk being parsed and the table parsed from it, whatever
  the file's size;
* speed: a chunk's blocks are parsed on Arrow's thread pool, also for files opened through
  fsspec, at the streaming readers' speed otherwise;
* safety: Arrow's threads only ever see a buffer Arrow owns. The file is read by the task's
  own thread (a Python file object or an Arrow file alike), so no Arrow thread calls into
  Python, and none outlives the call that parses.

Chunks are about :data:`CHUNK_BYTES` (2 MiB): the read buffer, the parser's working memory
and the table it returns grow with the chunk, and on the file benchmarks 2 MiB chunks peaked
50-60 MiB lower than 8 MiB ones at the same speed. Files elsewhere than the local disk are
read :data:`READ_BYTES` at a time (fewer, larger requests to object stores), each read cut
into chunks (zero-copy slices) parsed one after another.

A chunk ends after its last ``\\n`` (or ``\\r`` when a chunk holds no ``\\n``); the bytes after
it start the next chunk. This is where Arrow itself cuts blocks when values hold no line
breaks (``newlines_in_values=False``, the default); files whose values may hold line breaks
are read with the streaming readers instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

READ_BYTES = 8 * 1024 * 1024  # per request to a remote file (see read_bytes_for)
CHUNK_BYTES = 2 * 1024 * 1024
_SEARCH_BYTES = 64 * 1024


def line_chunks(
    f: Any, chunk_bytes: int | None = None, read_bytes: int | None = None
) -> Iterator[pa.Buffer]:
    """Yield ``f``'s bytes in buffers of about ``chunk_bytes`` (default :data:`CHUNK_BYTES`),
    each ending at a line end (the last one at the end of the file, whatever it holds).

    ``f`` is read ``read_bytes`` at a time (default: a chunk; at least a chunk); the chunks
    are slices of those reads. A line longer than a read makes a
    chunk as long as the line. The buffers come from Arrow's memory pool, like the tables
    parsed from them, so the memory of one read is reused for the next rather than left to
    the C allocator's heap.

    Examples:
        >>> import io
        >>> from shardflow.connectors._text_parsing.line_chunks import line_chunks
        >>> [c.to_pybytes() for c in line_chunks(io.BytesIO(b"ab\\ncd\\nef"), chunk_bytes=4)]
        [b'ab\\n', b'cd\\n', b'ef']
    """
    size = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    if size < 1:
        raise ValueError(f"chunk_bytes must be positive, got {size}.")
    read_size = max(size, read_bytes or 0)
    for lines in _line_reads(f, read_size):
        yield from _cut(lines, size)


def read_bytes_for(local: bool) -> int | None:
    """The ``read_bytes`` of :func:`line_chunks` for a file on the local disk or elsewhere."""
    return None if local else READ_BYTES


def _line_reads(f: Any, size: int) -> Iterator[pa.Buffer]:
    """``f``'s bytes in reads of about ``size``, each cut after its last line end."""
    carry: pa.Buffer | None = None  # the bytes after the previous read's last line end
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
        lines = buffer.slice(0, cut + 1)
        del buffer
        yield lines
        del lines


def _cut(lines: pa.Buffer, size: int) -> Iterator[pa.Buffer]:
    """Zero-copy slices of ``lines`` of about ``size`` bytes, each ending at a line end (the
    last one where ``lines`` ends)."""
    if lines.size <= size:
        yield lines
        return
    view = memoryview(lines).cast("B")
    try:
        start = 0
        while lines.size - start > size:
            # one byte more than the chunk: a "\r" at its end then counts unless "\n" follows
            end = _last_line_end(view[start : start + size + 1], size + 1)
            if end < 0:  # a line longer than a chunk: the chunk ends where the line does
                end = _first_line_end(view, start + size)
                if end < 0:
                    break
                end -= start
            yield lines.slice(start, end + 1)
            start += end + 1
        if start < lines.size:
            yield lines.slice(start)
    finally:
        view.release()


def _first_line_end(view: memoryview, start: int) -> int:
    """Index of the first ``\\n`` or ``\\r`` at or after ``start`` (a ``\\r`` followed by
    ``\\n`` counts at the ``\\n``), else -1."""
    pos = start
    while pos < len(view):
        block = bytes(view[pos : pos + _SEARCH_BYTES])
        hits = [i for i in (block.find(b"\n"), block.find(b"\r")) if i >= 0]
        if hits:
            i = pos + min(hits)
            if view[i] == 0x0D and i + 1 < len(view) and view[i + 1] == 0x0A:
                return i + 1
            return i
        pos += len(block)
    return -1


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
