"""Orca's reader options: what ``read_csv`` / ``read_json`` do with ``header``, ``names``,
``usecols``, ``dtype``, ``squeeze`` and ``index_col``, the way Orca's default reader (Spark's)
does, on top of pandas' parsing of each file.

The options are checked against the first file's columns when the reader is called, which
gives a :class:`FramePlan`: every file is then parsed by pandas and reshaped by the plan, so
all shards have the same columns. What Orca does and pandas does not:

- ``header=None`` names the columns ``"0"``, ``"1"``, ... (strings, as Spark names them);
- ``names`` renames columns by position (all of them, or only those ``usecols`` keeps);
- ``usecols`` keeps columns in the file's order, whether given by name, position or a function;
- ``dtype`` applies after parsing (``{0: np.float32}`` names a column by its position in the
  file); an unknown column is an error at the read call, with Orca's message;
- ``squeeze=True`` makes a one-column shard a Series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shardflow.engine.xshards.errors import XShardsKeyError, XShardsValueError

# Options Orca takes out of the pandas arguments and applies itself.
ORCA_OPTIONS = ("header", "names", "usecols", "dtype", "squeeze", "index_col")


@dataclass
class FramePlan:
    """How to turn a parsed file (columns in file order) into a shard."""

    width: int  # columns of the file
    rename_all: list[str]
    select: list[str] | None = None
    rename_selected: list[str] | None = None
    dtype: Any = None
    squeeze: bool = False
    index_col: Any = None
    source: str = ""
    parse_header: int | None = 0
    fmt: str = "csv"
    base: list[Any] | None = None
    options: dict[str, Any] | None = None

    def apply(self, df: Any, shown: str) -> Any:
        """``df`` (one parsed file) reshaped as Orca's reader would."""
        if self.fmt == "json" and list(df.columns) != self.base:
            # Records may add keys after the first line: plan again on this file's columns.
            return make_plan(self.fmt, list(df.columns), self.options or {}, shown).apply(df, shown)
        if len(df.columns) != self.width:
            raise XShardsValueError(
                f"{shown} has {len(df.columns)} columns but {self.source} has {self.width}; "
                "files read into one XShards need the same columns."
            )
        df.columns = self.rename_all
        if self.select is not None:
            df = df[self.select]
        if self.rename_selected is not None:
            df.columns = self.rename_selected
        if isinstance(self.dtype, dict):
            for column, kind in self.dtype.items():
                df[column] = df[column].astype(kind)
        elif self.dtype is not None:
            df = df.astype(self.dtype)
        if self.squeeze and len(df.columns) == 1:
            df = df.iloc[:, 0]
        if self.index_col is not None and self.index_col is not False:
            df = df.set_index(self.index_col)
        return df


def split_options(fmt: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Orca's options, the options passed to pandas for each file)."""
    if kwargs.get("chunksize") or kwargs.get("iterator"):
        raise XShardsValueError(
            f"read_{fmt}: chunksize and iterator are not supported; a shard is a whole DataFrame."
        )
    orca = {k: kwargs[k] for k in ORCA_OPTIONS if k in kwargs}
    pandas_options = {k: v for k, v in kwargs.items() if k not in ORCA_OPTIONS}
    if "mangle_dupe_cols" in pandas_options:
        if not pandas_options.pop("mangle_dupe_cols"):
            raise XShardsValueError("mangle_dupe_cols can only be True")
    if fmt == "json":
        pandas_options.setdefault("lines", True)  # Spark reads JSON Lines
    return orca, pandas_options


def header_row(fmt: str, orca: dict[str, Any]) -> int | None:
    """The header argument for pandas: 0 when the files have a header line, else None."""
    if fmt == "json":
        return None
    header = orca.get("header", "infer")
    if header == "infer":
        return 0 if orca.get("names") is None else None
    if header is True or header == 0:
        return 0
    if header is None or header is False:
        return None
    raise XShardsValueError(f"Unknown header argument {header}")


def make_plan(fmt: str, columns: list[Any], orca: dict[str, Any], source: str) -> FramePlan:
    """Check Orca's options against a file's ``columns`` and plan every file's reshaping.

    Raises:
        XShardsValueError / XShardsKeyError: With Orca's messages, naming the option.
    """
    header = header_row(fmt, orca)
    base = [str(c) for c in columns] if header is None and fmt == "csv" else list(columns)
    names = orca.get("names")
    usecols = orca.get("usecols")
    if names is not None and not isinstance(names, (list, tuple)):
        raise XShardsValueError(
            "names must be a list of column names (a Spark DDL string is not supported), got "
            f"{names!r}."
        )
    if usecols is not None and not callable(usecols):
        if isinstance(usecols, str):
            raise XShardsValueError(
                "usecols must only be list-like of all strings, all unicode, all integers or "
                "a callable."
            )
        usecols = list(usecols)
    plan = FramePlan(len(base), list(base), source=source, parse_header=header, fmt=fmt)
    plan.base, plan.options = list(columns), dict(orca)
    renamed = False
    if names is not None:
        names = list(names)
        if len(set(names)) != len(names):
            raise XShardsValueError("Found duplicate names, please check your names input")
        if usecols is not None:
            if not callable(usecols) and len(names) != len(usecols) and len(names) != len(base):
                raise XShardsValueError(
                    f"Passed names did not match usecols: {len(names)} names, "
                    f"{len(usecols)} usecols and {len(base)} columns in {source}."
                )
            if len(names) == len(base):
                plan.rename_all, renamed = names, True
        else:
            if len(names) != len(base):
                raise XShardsValueError(
                    f"The number of names [{len(names)}] does not match the number of columns "
                    f"[{len(base)}] of {source}."
                )
            plan.rename_all, renamed = names, True
    index_map = dict(enumerate(plan.rename_all))
    if usecols is not None:
        plan.select = _selected(usecols, plan.rename_all, names)
        if names is not None and not renamed:
            plan.rename_selected = names[: len(plan.select)]
            for position, column in index_map.items():
                if column in plan.select:
                    index_map[position] = names[plan.select.index(column)]
    final = plan.rename_selected or plan.select or plan.rename_all
    plan.dtype = _resolve_dtype(orca.get("dtype"), final, index_map)
    plan.squeeze = bool(orca.get("squeeze", False))
    plan.index_col = orca.get("index_col")
    return plan


def _selected(usecols: Any, columns: list[str], names: Any) -> list[str]:
    if callable(usecols):
        return [c for c in columns if usecols(c)]
    if all(isinstance(c, int) and not isinstance(c, bool) for c in usecols):
        chosen = [c for i, c in enumerate(columns) if i in usecols]
        missing = [i for i in usecols if i >= len(columns) or i < 0]
    elif all(isinstance(c, str) for c in usecols):
        chosen = [c for c in columns if c in usecols]
        known = names if isinstance(names, list) else chosen
        missing = [c for c in usecols if c not in known]
    else:
        raise XShardsValueError(
            "usecols must only be list-like of all strings, all unicode, all integers or a "
            "callable."
        )
    if missing:
        raise XShardsKeyError(
            f"usecols do not match columns, columns expected but not found: {missing}"
        )
    return chosen


def _resolve_dtype(dtype: Any, columns: list[str], index_map: dict[int, str]) -> Any:
    if not isinstance(dtype, dict):
        return dtype
    out = {}
    for key, kind in dtype.items():
        if isinstance(key, str):
            if key not in columns:
                raise XShardsKeyError(
                    f"column to be set type is not in current dataframe: {key!r} is not one "
                    f"of {columns}."
                )
            out[key] = kind
        elif isinstance(key, int) and not isinstance(key, bool):
            if index_map.get(key) not in columns:
                raise XShardsKeyError(
                    f"column index to be set type is not in current dataframe: {key} is not "
                    f"the position of one of {columns} in the file."
                )
            out[index_map[key]] = kind
        else:
            raise XShardsValueError(f"dtype keys are column names or positions, got {key!r}.")
    return out
