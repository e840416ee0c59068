"""``Dataset.schema()``'s result: Ray Data's Schema, a thin view of a pyarrow.Schema."""

from __future__ import annotations

from typing import Any

import pyarrow as pa


class Schema:
    """The schema of a Dataset: column names and their Arrow types.

    As Ray Data's ``ray.data.Schema``: ``names``, ``types`` and ``base_schema`` (the
    ``pyarrow.Schema`` itself); two schemas are equal when their names and types are. Its
    repr is a table of columns and types.

    Args:
        base_schema: The ``pyarrow.Schema`` this wraps.
        data_context: Accepted for Ray Data's signature; shardflow's schema holds no settings.

    Examples:
        >>> import shardflow as sf
        >>> schema = sf.from_items([{"a": 1, "name": "x"}]).schema()
        >>> schema
        Column  Type
        ------  ----
        a       int64
        name    string
        >>> schema.names
        ['a', 'name']
        >>> schema.base_schema.field("a").type
        DataType(int64)
    """

    def __init__(self, base_schema: pa.Schema, *, data_context: Any | None = None):
        if not isinstance(base_schema, pa.Schema):
            raise TypeError(f"Schema wraps a pyarrow.Schema, got {type(base_schema).__name__}.")
        self.base_schema = base_schema

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return list(self.base_schema.names)

    @property
    def types(self) -> list[pa.DataType]:
        """The Arrow type of each column, in order."""
        return list(self.base_schema.types)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and (other.names, other.types) == (self.names, self.types)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, as Ray Data's

    def __repr__(self) -> str:
        width = max([len(name) for name in self.names] + [len("Column")]) + 2
        lines = ["Column".ljust(width) + "Type", "------".ljust(width) + "----"]
        lines += [name.ljust(width) + str(type_) for name, type_ in zip(self.names, self.types)]
        return "\n".join(lines).rstrip()

    def __reduce__(self):
        return (Schema, (self.base_schema,))
