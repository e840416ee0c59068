"""``repr(ds)`` as Ray Data shows it: a table when the schema is known, else a plan summary.

When the schema is known without running anything, the repr is a table of the columns and
their types with the shape (rows, columns); a materialized dataset (or one built from data
in memory) also shows its first and last rows. Otherwise it lists the plan's operations over
``Dataset(num_rows=..., schema=...)`` of the source. A repr never runs the plan.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

ELLIPSIS = "…"
MAX_ROWS = 10  # rows previewed in all; more than this shows the first and last HEAD_ROWS
HEAD_ROWS = 5
MAX_CELL_WIDTH = 40
LINE_LIMIT = 80  # a summary longer than this puts each argument on its own line
INDENT = "   "


def dataset_repr(ds: Any) -> str:
    """The repr of ``ds`` (see the module docstring)."""
    from shardflow.engine.api.consumption import PreparedPlan

    try:
        prepared = PreparedPlan(ds._plan)
        schema = prepared.known_schema()
        num_rows = prepared.known_num_rows()
    except Exception:
        prepared, schema, num_rows = None, None, None
    if schema is None or not schema.names:
        return _summary(ds, prepared)
    materialized = is_materialized(ds)
    head: list[dict[str, Any]] = []
    tail: list[dict[str, Any]] = []
    if materialized and prepared is not None:
        head, tail = _preview_rows(ds, prepared, num_rows)
    return render_table(schema, num_rows, ds._name, materialized, head, tail)


def is_materialized(ds: Any) -> bool:
    """Whether ``ds`` holds its blocks (materialized, or built from data in memory)."""
    from shardflow.engine.plan.logical import BlocksSource

    return isinstance(ds._plan.source, BlocksSource) and not ds._plan.ops


# -- the table ------------------------------------------------------------------------------


def render_table(
    schema: pa.Schema,
    num_rows: int | None,
    name: str | None,
    materialized: bool,
    head: list[dict[str, Any]],
    tail: list[dict[str, Any]],
) -> str:
    """The tabular repr: shape, a box of headers, types and preview rows, and a summary."""
    columns = list(schema.names)
    headers = [_cell(str(c)) for c in columns]
    types = [_cell(str(t)) for t in schema.types]
    rows = [[_cell(_format_value(row.get(c))) for c in columns] for row in head]
    if head and tail:
        rows.append([ELLIPSIS] * len(columns))
    rows += [[_cell(_format_value(row.get(c))) for c in columns] for row in tail]
    widths = [
        max([len(headers[i]), len(types[i]), 3] + [len(r[i]) for r in rows])
        for i in range(len(columns))
    ]
    lines = [
        _border("╭", "┬", "╮", "─", widths),
        _row(headers, widths),
        _row(["---"] * len(columns), widths),
        _row(types, widths),
    ]
    if rows:
        lines.append(_border("╞", "╪", "╡", "═", widths))
        lines += [_row(r, widths) for r in rows]
    lines.append(_border("╰", "┴", "╯", "─", widths))
    shown = "?" if num_rows is None else num_rows
    if materialized:
        footer = f"(Showing {len(head) + len(tail)} of {shown} rows)"
    else:
        footer = "(Dataset isn't materialized)"
    parts = [] if name is None else [f"name: {name}"]
    parts += [f"shape: ({shown}, {len(columns)})", "\n".join(lines), footer]
    return "\n".join(parts)


def _format_value(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    return str(value).replace("\n", " ").replace("\r", " ")


def _cell(text: str) -> str:
    if len(text) <= MAX_CELL_WIDTH:
        return text
    return text[: MAX_CELL_WIDTH - 1] + ELLIPSIS


def _border(left: str, middle: str, right: str, fill: str, widths: list[int]) -> str:
    return left + middle.join(fill * (w + 2) for w in widths) + right


def _row(cells: list[str], widths: list[int]) -> str:
    return "│" + "┆".join(f" {c.ljust(w)} " for c, w in zip(cells, widths)) + "│"


def _preview_rows(ds: Any, prepared: Any, num_rows: int | None) -> tuple[list[dict], list[dict]]:
    """The first and last rows of a materialized dataset, reading only the blocks needed."""
    from shardflow.engine.iteration.batches import iter_rows_from_blocks

    if num_rows is None or num_rows <= MAX_ROWS:
        want_head, want_tail = (MAX_ROWS if num_rows is None else num_rows), 0
    else:
        want_head, want_tail = HEAD_ROWS, MAX_ROWS - HEAD_ROWS
    source = ds._plan.source
    blocks = list(source.blocks)
    metas = source.metadata or [None] * len(blocks)

    def load(i: int) -> pa.Table:
        return blocks[i] if source.metadata is None else prepared.backend.get(blocks[i])

    head: list[dict] = []
    for i in range(len(blocks)):
        if len(head) >= want_head:
            break
        block = load(i)
        head += list(iter_rows_from_blocks(iter([block.slice(0, want_head - len(head))])))
    tail_blocks: list[pa.Table] = []
    missing = want_tail
    for i in reversed(range(len(blocks))):
        if missing <= 0:
            break
        rows = metas[i].num_rows if metas[i] is not None else None
        if rows == 0:
            continue
        block = load(i)
        piece = block.slice(max(0, block.num_rows - missing))
        tail_blocks.insert(0, piece)
        missing -= piece.num_rows
    tail = list(iter_rows_from_blocks(iter(tail_blocks))) if tail_blocks else []
    return head, tail


# -- the plan summary -----------------------------------------------------------------------


def _summary(ds: Any, prepared: Any) -> str:
    """Operations over ``Dataset(num_rows=..., schema=...)`` of the source."""
    from shardflow.engine.plan.metadata import source_num_rows, source_schema

    materialized = is_materialized(ds)
    ops = [] if materialized else [op.name for op in reversed(ds._plan.ops)]
    schema = count = None
    if prepared is not None:
        try:
            source = ds._plan.source
            schema = source_schema(source, prepared.read_tasks, prepared.backend.get)
            count = source_num_rows(source, prepared.read_tasks)
            if materialized:
                count = prepared.known_num_rows()
        except Exception:
            schema = count = None
    fields = None if schema is None else [f"{f.name}: {f.type}" for f in schema]
    num_blocks = _num_blocks(ds) if materialized else None
    depth = len(ops)
    described = _describe(
        "MaterializedDataset" if materialized else "Dataset",
        ds._name,
        num_blocks,
        "?" if count is None else count,
        fields,
        depth,
    )
    lines = []
    for level, name in enumerate(ops):
        lines.append(name if level == 0 else f"{INDENT * (level - 1)}+- {name}")
    if depth:
        described = f"{INDENT * (depth - 1)}+- {described}"
    return "\n".join(lines + [described])


def _num_blocks(ds: Any) -> int | None:
    source = ds._plan.source
    if source.metadata is not None:
        return sum(1 for m in source.metadata if m.num_rows)
    return sum(1 for b in source.blocks if b.num_rows or b.num_columns)


def _describe(
    kind: str,
    name: str | None,
    num_blocks: int | None,
    count: Any,
    fields: list[str] | None,
    depth: int,
) -> str:
    schema_text = "Unknown schema" if fields is None else "{" + ", ".join(fields) + "}"
    args = [] if name is None else [f"name={name}"]
    if num_blocks:
        args.append(f"num_blocks={num_blocks}")
    one_line = f"{kind}({', '.join(args + [f'num_rows={count}', f'schema={schema_text}'])})"
    if len(one_line) <= LINE_LIMIT:
        return one_line
    pad = INDENT * depth
    if fields is not None and len(f"{pad}{INDENT}schema={schema_text}") > LINE_LIMIT:
        items = []
        for field_text in fields:
            item = f"{pad}{INDENT * 2}{field_text}"
            if len(item) > LINE_LIMIT:
                type_text = field_text.split(": ", 1)[1]
                suffix = f"...: {type_text}"
                item = item[: max(LINE_LIMIT - len(suffix), 10)] + suffix
            items.append(item)
        schema_text = "{\n" + ",\n".join(items) + f"\n{pad}{INDENT}}}"
    lines = [f"{kind}("] + [f"{pad}{INDENT}{a}," for a in args]
    lines += [f"{pad}{INDENT}num_rows={count},", f"{pad}{INDENT}schema={schema_text}", f"{pad})"]
    return "\n".join(lines)
