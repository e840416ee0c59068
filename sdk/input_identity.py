"""What a read consumes, by identity: the inputs of a resumable write.

A resumable write (``write_*(..., resume=True)``) recognises the work a killed or failed run
already did by *what its tasks read*, never by task numbers: the same inputs may be split into
other tasks on the next run (another ``override_num_blocks``, more CPUs).

* An :class:`InputItem` is one input of a read as it is now: a file (its path, size, and
  modification time or ETag), or the rows of ``range(n)``. Two runs read the same item only
  when all three agree.
* An :class:`InputPiece` is the part of an item one read task reads: the whole item, or a set
  of half-open position ranges (byte offsets of a Parquet file, where a row group belongs to
  the range its first byte lies in; row numbers of ``range``). Positions are the smallest
  thing recorded, so a rerun that cuts an item differently still knows exactly which parts
  are done.
* :class:`DoneInputs` merges the pieces that finished write tasks recorded; a read task of a
  rerun keeps only the positions nobody recorded (``ReadTask.without_done``).

A read task's ``read_fn`` supports resumable writes by implementing
``input_pieces() -> list[InputPiece]`` and ``remaining(done: DoneInputs) -> read_fn | None``
(None: everything it reads is done), and its Datasource by implementing
``input_items() -> list[InputItem]``; see :class:`~shardflow.sdk.file_reading.FileReadTask`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

Ranges = tuple[tuple[int, int], ...]

#: Where positions end when an item's size is unknown.
END = 2**62


@dataclass(frozen=True)
class InputItem:
    """One input of a read, identified by what it is now.

    Args:
        name: The path as users write it (no credentials), or a name such as ``range(100)``.
        size: Bytes of the file (rows of a range); None when unknown.
        version: The modification time (local disk, in nanoseconds), ETag or generation
            (object stores); None when the storage gives none.

    Examples:
        >>> from shardflow.sdk.input_identity import InputItem
        >>> InputItem("s3://b/x.parquet", 100, '"abc"').extent
        ((0, 101),)
    """

    name: str
    size: int | None
    version: str | None = None

    @property
    def key(self) -> str:
        return f"{self.name}\x00{self.size}\x00{self.version}"

    @property
    def extent(self) -> Ranges:
        """Every position of the item: ``[0, size]`` inclusive, as Parquet splits end at
        ``size + 1``."""
        return ((0, END if self.size is None else self.size + 1),)

    def to_json(self) -> list[Any]:
        return [self.name, self.size, self.version]

    @classmethod
    def from_json(cls, value: Sequence[Any]) -> InputItem:
        name, size, version = value
        return cls(str(name), None if size is None else int(size), version)


@dataclass(frozen=True)
class InputPiece:
    """The part of ``item`` one read task reads: ``ranges`` of positions, None for all."""

    item: InputItem
    ranges: Ranges | None = None

    def positions(self) -> Ranges:
        return self.item.extent if self.ranges is None else clip(self.ranges, self.item.extent)

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item.to_json(),
            "ranges": None if self.ranges is None else [list(r) for r in self.ranges],
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> InputPiece:
        ranges = value.get("ranges")
        return cls(
            InputItem.from_json(value["item"]),
            None if ranges is None else normalize((int(lo), int(hi)) for lo, hi in ranges),
        )


class OverlappingPiecesError(ValueError):
    """Two finished write tasks recorded the same input positions (their files would repeat
    rows); raised instead of committing either."""


class DoneInputs:
    """The positions of each input item that finished write tasks recorded.

    Examples:
        >>> from shardflow.sdk.input_identity import DoneInputs, InputItem, InputPiece
        >>> item = InputItem("f.parquet", 99, "1")
        >>> done = DoneInputs()
        >>> done.add(InputPiece(item, ((0, 50),)), "task a")
        >>> done.remaining(InputPiece(item))
        ((50, 100),)
        >>> done.add(InputPiece(item, ((50, 100),)), "task b")
        >>> done.remaining(InputPiece(item)) is None
        True
    """

    def __init__(self) -> None:
        self._done: dict[str, Ranges] = {}
        self._owner: dict[str, list[tuple[Ranges, str]]] = {}

    def __bool__(self) -> bool:
        return bool(self._done)

    def add(self, piece: InputPiece, owner: str) -> None:
        """Record that ``owner`` (a journal entry, for messages) wrote ``piece``."""
        key, positions = piece.item.key, piece.positions()
        for ranges, other in self._owner.get(key, []):
            if intersect(ranges, positions):
                raise OverlappingPiecesError(
                    f"{owner} and {other} both recorded positions {list(intersect(ranges, positions))} "
                    f"of {piece.item.name}; their files would hold the same rows twice."
                )
        self._owner.setdefault(key, []).append((positions, owner))
        self._done[key] = union(self._done.get(key, ()), positions)

    def remaining(self, piece: InputPiece) -> Ranges | None:
        """The positions of ``piece`` nobody recorded; None when there are none."""
        left = subtract(piece.positions(), self._done.get(piece.item.key, ()))
        return left or None

    def items(self) -> set[str]:
        """Keys of the items with any recorded positions."""
        return set(self._done)


# -- ranges: sorted, disjoint, non-empty half-open intervals ---------------------------------


def as_ranges(split: Any) -> Ranges | None:
    """A file unit's ``split`` as a tuple of ranges: None (the whole file) stays None,
    ``(start, end)`` becomes ``((start, end),)``, a tuple of ranges is kept."""
    if split is None:
        return None
    if len(split) == 2 and all(isinstance(v, int) for v in split):
        return ((int(split[0]), int(split[1])),)
    return tuple((int(lo), int(hi)) for lo, hi in split)


def normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """``ranges`` sorted and merged, empty ones dropped."""
    merged: list[list[int]] = []
    for lo, hi in sorted((int(lo), int(hi)) for lo, hi in ranges if hi > lo):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def union(a: Ranges, b: Ranges) -> Ranges:
    return normalize(list(a) + list(b))


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out = []
    for lo, hi in a:
        for blo, bhi in b:
            if min(hi, bhi) > max(lo, blo):
                out.append((max(lo, blo), min(hi, bhi)))
    return normalize(out)


def subtract(a: Ranges, b: Ranges) -> Ranges:
    """The positions of ``a`` not in ``b``."""
    out: list[tuple[int, int]] = []
    for lo, hi in a:
        start = lo
        for blo, bhi in b:
            if bhi <= start or blo >= hi:
                continue
            if blo > start:
                out.append((start, blo))
            start = max(start, bhi)
            if start >= hi:
                break
        if start < hi:
            out.append((start, hi))
    return normalize(out)


def clip(ranges: Ranges, extent: Ranges) -> Ranges:
    return intersect(normalize(ranges), extent)


# -- listings --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListingChange:
    """How the inputs of a read differ from those a resumable write recorded."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def describe(self) -> str:
        parts = []
        for label, names in (
            ("added", self.added),
            ("removed", self.removed),
            ("rewritten (size or modification time differs)", self.changed),
        ):
            if names:
                shown = ", ".join(names[:3]) + (
                    f" and {len(names) - 3} more" if len(names) > 3 else ""
                )
                parts.append(f"{len(names)} {label}: {shown}")
        return "; ".join(parts)


def compare_listings(recorded: Sequence[InputItem], current: Sequence[InputItem]) -> ListingChange:
    """The items added, removed and rewritten between two listings (by name)."""
    before = {item.name: item for item in recorded}
    now = {item.name: item for item in current}
    return ListingChange(
        added=tuple(sorted(set(now) - set(before))),
        removed=tuple(sorted(set(before) - set(now))),
        changed=tuple(
            sorted(name for name in set(now) & set(before) if now[name].key != before[name].key)
        ),
    )
