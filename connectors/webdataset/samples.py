"""WebDataset shards as samples: the members of a tar stream, grouped by key.

A WebDataset shard is a tar archive whose members are named ``<key>.<suffix>``; the members
that share a key, next to each other in the archive, make one sample:
``{"__key__": key, suffix: bytes, ...}``. The key is the member's path up to the first
``.`` of its file name (``train/0001.seg.png`` has key ``train/0001`` and suffix
``seg.png``), as the ``webdataset`` library and Ray Data split it.
"""

from __future__ import annotations

import fnmatch
import tarfile
from collections.abc import Callable, Iterator
from typing import Any

KEY = "__key__"
URL = "__url__"

Selector = Callable[[str], bool] | list[str] | tuple[str, ...] | None
"""Which names to keep: None for all, a function of the name, or patterns (see ``matches``)."""


def split_key(name: str) -> tuple[str, str] | None:
    """``(key, suffix)`` of a member name, or None when its file name has no ``.``.

    Examples:
        >>> split_key("train/0001.seg.png")
        ('train/0001', 'seg.png')
        >>> split_key("README") is None
        True
    """
    folder, _, base = name.rpartition("/")
    stem, dot, suffix = base.partition(".")
    if not dot or not stem:
        return None
    return (f"{folder}/{stem}" if folder else stem), suffix


def matches(name: str, selector: Selector) -> bool:
    """Whether ``name`` is selected: a pattern with ``*`` or ``?`` is a glob matched against
    ``"." + name``; any other pattern must equal ``name`` or ``"." + name``.

    Examples:
        >>> matches("0001.jpg", ["*.jpg"]), matches("jpg", [".jpg"]), matches("cls", ["jpg"])
        (True, True, False)
    """
    if selector is None:
        return True
    if callable(selector):
        return bool(selector(name))
    for pattern in selector:
        if "*" in pattern or "?" in pattern:
            if fnmatch.fnmatch("." + name, pattern):
                return True
        elif name == pattern or "." + name == pattern:
            return True
    return False


def check_selector(value: Any, argument: str) -> Selector:
    """``value`` as a selector, or a TypeError naming ``argument``."""
    if value is None or callable(value):
        return value
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(p, str) for p in value):
        return list(value)
    raise TypeError(
        f"{argument} must be None, a function of a name returning True to keep it, or a list "
        f"of patterns such as ['*.jpg', 'cls']; got {value!r}."
    )


def check_renamer(value: Any) -> list[Callable[[str], str]] | None:
    """``filerename`` as a list of functions applied in order, or a TypeError."""
    if value is None:
        return None
    functions = list(value) if isinstance(value, (list, tuple)) else [value]
    if not functions or not all(callable(f) for f in functions):
        raise TypeError(
            "filerename must be a function of a member name returning its new name, or a list "
            f"of such functions applied in order; got {value!r}."
        )
    return functions


def tar_members(
    f: Any,
    *,
    fileselect: Selector = None,
    filerename: list[Callable[[str], str]] | None = None,
) -> Iterator[tuple[str, bytes]]:
    """``(name, content)`` of each regular file of the tar stream ``f``, in archive order.

    ``f`` is read forward only (a compressed or remote stream is fine). Names are renamed by
    ``filerename`` first, then kept if ``fileselect`` selects them.

    Raises:
        tarfile.ReadError: the stream is not a tar archive, or is truncated.
    """
    with tarfile.open(fileobj=f, mode="r|*") as archive:
        for info in archive:
            if not info.isreg():
                continue
            member = archive.extractfile(info)
            data = member.read() if member is not None else b""
            if len(data) != info.size:
                raise tarfile.ReadError(
                    f"member {info.name!r} is truncated: {len(data)} of {info.size} bytes"
                )
            name = info.name
            for rename in filerename or ():
                name = rename(name)
                if not isinstance(name, str):
                    raise TypeError(
                        f"filerename must return a string; it returned {type(name).__name__} "
                        f"for {info.name!r}."
                    )
            if matches(name, fileselect):
                yield name, data


def group_samples(
    members: Iterator[tuple[str, bytes]],
    *,
    suffixes: Selector = None,
    keep: Callable[[str], bool] | None = None,
) -> Iterator[dict[str, Any]]:
    """Samples of consecutive members sharing a key: ``{"__key__": key, suffix: bytes}``.

    Members whose file name has no ``.`` are skipped, as are suffixes that ``suffixes`` does
    not select or ``keep`` rejects (the sample is still yielded, as in Ray Data, holding only
    its key when no member is left).

    Raises:
        ValueError: a key's members are not next to each other in the archive, or a key
            has two members with the same suffix.
    """
    current: dict[str, Any] | None = None
    finished: set[str] = set()
    for name, data in members:
        parts = split_key(name)
        if parts is None:
            continue
        key, suffix = parts
        if current is None or key != current[KEY]:
            if current is not None:
                finished.add(current[KEY])
                yield current
            if key in finished:
                raise ValueError(
                    f"the members of sample {key!r} are not next to each other in the archive: "
                    "WebDataset needs the files of one key to be adjacent. Re-create the shard "
                    "with its members sorted by name (e.g. `tar --sort=name`)."
                )
            current = {KEY: key}
        if suffix in current:
            raise ValueError(f"sample {key!r} has two members with the suffix {suffix!r}.")
        if matches(suffix, suffixes) and (keep is None or keep(suffix)):
            current[suffix] = data
    if current is not None:
        yield current
