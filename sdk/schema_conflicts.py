"""Columns whose types conflict between the files of one read.

Text formats (CSV, JSON Lines) infer each file's column types from its own content, so a
column can be ``int64`` in one file and ``string`` in another. Such blocks cannot be combined
(batched, shuffled, written); Arrow's own error names neither file. A file datasource that
reads several files therefore infers the first file's schema from its start, on the driver,
and every read task compares each file's blocks with it: the first conflict raises
:class:`ArrowConversionError` naming both files and the column.

Columns that merely differ (missing in some files, null in some, ``int64`` in one file and
``double`` in another) are no conflict: they combine as Arrow's permissive promotion allows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa


class ArrowConversionError(Exception):
    """Blocks of a dataset cannot be converted to one Arrow schema: a column's types conflict
    (Ray Data raises an exception of this name when it combines such blocks).

    The message names the column, its two types and the two files they come from.
    """


@dataclass
class ReferenceSchema:
    """The schema inferred from the start of a read's first file, and the file's name."""

    path: str
    schema: pa.Schema
    _checked: dict[tuple[str, pa.DataType], None] = field(default_factory=dict, repr=False)

    def check(self, schema: pa.Schema, path: str) -> None:
        """Raise :class:`ArrowConversionError` when a column of ``schema`` (the blocks of
        ``path``) has a type that cannot be combined with the first file's."""
        if path == self.path:
            return
        for column in schema:
            key = (column.name, column.type)
            if key in self._checked:
                continue
            index = self.schema.get_field_index(column.name)
            if index >= 0:
                reference = self.schema.field(index).type
                if reference != column.type and not _combinable(reference, column.type):
                    raise ArrowConversionError(
                        f"Column {column.name!r} is {column.type} in {path} but {reference} in "
                        f"{self.path}: the files' types conflict and their rows cannot be "
                        "combined. Give the column one type, e.g. with read_csv(..., "
                        "convert_options=pyarrow.csv.ConvertOptions(column_types={"
                        f"{column.name!r}: pyarrow.string()}})) or read_json(..., "
                        "parse_options=pyarrow.json.ParseOptions(explicit_schema=...)), or "
                        "pass schema=."
                    )
            self._checked[key] = None

    def __getstate__(self) -> dict[str, object]:
        return {"path": self.path, "schema": self.schema, "_checked": {}}


def _combinable(a: pa.DataType, b: pa.DataType) -> bool:
    try:
        pa.unify_schemas(
            [pa.schema([pa.field("c", a)]), pa.schema([pa.field("c", b)])],
            promote_options="permissive",
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return False
    return True


def reference_from(path: str, schema: pa.Schema | None) -> ReferenceSchema | None:
    """A :class:`ReferenceSchema` for ``schema`` (None when nothing was inferred)."""
    return None if schema is None else ReferenceSchema(path, schema)
