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

A chunk ends at its last row end; the bytes after it start the next chunk. For JSON Lines
that is the last line break (``\\n``, ``\\r`` or ``\\r\\n``); for CSV, the last line break
outside a quoted value (:mod:`shardflow.connectors.csv.rows`), so a chunk never splits a
value. Files whose values may hold line breaks by other rules (``newlines_in_values=True``)
are read with the streaming readers instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

READ_BYTES = 8 * 1024 * 1024  # per request to a remote file (see read_bytes_for)
CHUNK_BYTES = 2 * 1024 * 1024
_SEARCH_BYTES = 64 * 1024


class LineEnds:
    """Row ends of text whose line breaks all end rows (JSON Lines, or a CSV dialect with
    nothing that quotes or escapes a line break).

    A row's end is the index of its last byte: its ``\\n``, or its ``\\r`` when no ``\\n``
    follows. Both methods take a view whose first byte starts a row.
    """

    def last(self, view: memoryview, stop: int) -> int:
        """The end of the last row that ends before ``stop``; -1 when none does. A ``\\r`` at
        ``stop - 1`` is not counted: it may be the first half of a ``\\r\\n``."""
        data = view[:stop]
        newline = _rfind(data, b"\n", stop)
        ret = _rfind(data, b"\r", stop - 1)
        return max(newline, ret)

    def first(self, view: memoryview, start: int) -> int:
        """The end of the first row that ends at or after index ``start``; -1 when none does
        (a ``\\r`` at the view's end is counted)."""
        newline = find_byte(view, b"\n", start)
        ret = find_byte(view, b"\r", start)
        if ret < 0 or 0 <= newline < ret:
            return newline
        return ret + 1 if ret + 1 < len(view) and view[ret + 1] == 0x0A else ret


_LINE_ENDS = LineEnds()


def line_chunks(
    f: Any,
    chunk_bytes: int | None = None,
    read_bytes: int | None = None,
    row_ends: LineEnds | None = None,
) -> Iterator[pa.Buffer]:
    """Yield ``f``'s bytes in buffers of about ``chunk_bytes`` (default :data:`CHUNK_BYTES`),
    each ending at a row end (the last one at the end of the file, whatever it holds).

    ``f`` is read ``read_bytes`` at a time (default: a chunk; at least a chunk); the chunks
    are slices of those reads. A row longer than a read makes a chunk as long as the row.
    ``row_ends`` says where rows end (default: at every line break; CSV passes a
    :class:`~shardflow.connectors.csv.rows.CsvRowEnds`). The buffers come from Arrow's memory
    pool, like the tables parsed from them, so the memory of one read is reused for the next
    rather than left to the C allocator's heap.

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
    ends = row_ends or _LINE_ENDS
    for lines in _line_reads(f, read_size, ends):
        yield from _cut(lines, size, ends)


_BOM = b"\xef\xbb\xbf"


def without_bom_strip(chunk: pa.Buffer) -> pa.Buffer:
    """``chunk`` (not a file's first) as Arrow's readers must get it to keep its first bytes.

    They drop a UTF-8 byte order mark at the start of what they parse, which only a file's
    first bytes may be (Arrow's JSON reader drops some of its bytes alone too, such as a
    lone ``\xbf``). A chunk that starts with one of those bytes gets a byte order mark put
    before it (a copy, in that rare case only): Arrow drops that one and keeps the chunk.
    """
    if chunk.size == 0 or chunk.slice(0, 1).to_pybytes() not in (b"\xef", b"\xbb", b"\xbf"):
        return chunk
    return pa.py_buffer(_BOM + chunk.to_pybytes())


def read_bytes_for(local: bool) -> int | None:
    """The ``read_bytes`` of :func:`line_chunks` for a file on the local disk or elsewhere."""
    return None if local else READ_BYTES


def _line_reads(f: Any, size: int, ends: LineEnds) -> Iterator[pa.Buffer]:
    """``f``'s bytes in reads of about ``size``, each cut after its last row end."""
    carry: pa.Buffer | None = None  # the bytes after the previous read's last row end
    while True:
        kept = 0 if carry is None else carry.size
        # a read tops the carried bytes up to `size` (so a chunk of a local file, read a
        # chunk at a time, needs no second cut), unless they take half of it already
        buffer = pa.allocate_buffer(size if kept < size // 2 else kept + size)
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
        cut = ends.last(view, filled)
        view.release()
        if cut < 0:  # no row end yet: the row goes on into the next read
            carry = buffer
            continue
        carry = buffer.slice(cut + 1, filled - cut - 1)
        lines = buffer.slice(0, cut + 1)
        del buffer
        yield lines
        del lines


def _cut(lines: pa.Buffer, size: int, ends: LineEnds) -> Iterator[pa.Buffer]:
    """Zero-copy slices of ``lines`` of about ``size`` bytes, each ending at a row end (the
    last one where ``lines`` ends)."""
    if lines.size <= size:
        yield lines
        return
    view = memoryview(lines).cast("B")
    try:
        start = 0
        while lines.size - start > size:
            # one byte more than the chunk: a "\r" at its end then counts unless "\n" follows
            end = ends.last(view[start : start + size + 1], size + 1)
            if end < 0:  # a row longer than a chunk: the chunk ends where the row does
                end = ends.first(view[start:], size)
                if end < 0:
                    break
            yield lines.slice(start, end + 1)
            start += end + 1
        if start < lines.size:
            yield lines.slice(start)
    finally:
        view.release()


def find_byte(view: memoryview, needle: bytes, start: int) -> int:
    """Index of the first ``needle`` (one byte) at or after ``start``, else -1."""
    pos = start
    while pos < len(view):
        block = bytes(view[pos : pos + _SEARCH_BYTES])
        found = block.find(needle)
        if found >= 0:
            return pos + found
        pos += len(block)
    return -1


def _rfind(view: memoryview, needle: bytes, stop: int) -> int:
    """Index of the last ``needle`` (one byte) before ``stop``, else -1."""
    while stop > 0:
        start = max(0, stop - _SEARCH_BYTES)
        found = bytes(view[start:stop]).rfind(needle)
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
