"""LanceDatasource: the fragments of one version of one or more Lance datasets.

Planning opens each dataset once on the driver (its manifest: schema, fragments, row counts)
and pins its version, so every task reads the same snapshot even while writers commit. Read
tasks get contiguous runs of fragments balanced by rows. Pushed into the scan:

* ``columns=`` and ``select_columns`` / ``rename_columns`` after the read (projection);
* ``filter=`` (Lance SQL) and ``filter(expr=...)`` after the read: an engine expression goes to
  Lance as a pyarrow expression, or, when Lance cannot take it (or a SQL ``filter=`` is given
  too), is applied with Arrow to the scanned rows;
* ``limit(n)``: each fragment scan stops after the rows still needed.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from shardflow.connectors.lance.reading import LanceReadTask, ScanSpec, open_dataset, pylance
from shardflow.sdk.block import BlockMetadata
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.pushdowns import Pushdowns
from shardflow.sdk.retry import RetryConfig

# Arguments of LanceDataset.scanner that read_lance sets itself.
_OWN_SCANNER_OPTIONS = ("columns", "filter", "limit", "offset", "fragments", "with_row_id")


def _uris(uri: Any) -> list[str]:
    uris = [uri] if isinstance(uri, str) else uri
    if not isinstance(uris, (list, tuple)) or not all(isinstance(u, str) and u for u in uris):
        raise TypeError(f"uri must be a Lance dataset URI or a list of them, got {uri!r}.")
    if not uris:
        raise ValueError("`uri` list must not be empty.")
    return [str(u) for u in uris]


def _check_columns(columns: Any) -> list[str] | None:
    if columns is None:
        return None
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise TypeError(f"columns must be a list of column names, got {columns!r}.")
    return list(columns)


def _check_scanner_options(options: Any) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"scanner_options must be a dict, got {type(options).__name__}.")
    own = sorted(set(options) & set(_OWN_SCANNER_OPTIONS))
    if own:
        raise ValueError(
            f"scanner_options may not set {own}: use read_lance's columns= and filter=, "
            "Dataset.limit, or the columns and filter steps after the read."
        )
    return dict(options)


class LanceDatasource(Datasource):
    """Reads Lance datasets. See :func:`shardflow.read_lance` for the arguments."""

    def __init__(
        self,
        uri: str | list[str],
        *,
        version: int | str | None = None,
        columns: list[str] | None = None,
        filter: str | None = None,
        storage_options: dict[str, str] | None = None,
        scanner_options: dict[str, Any] | None = None,
    ):
        pylance()
        self._uris = _uris(uri)
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, (int, str))
        ):
            raise TypeError(f"version must be a version number or a tag, got {version!r}.")
        if filter is not None and not isinstance(filter, str):
            raise TypeError(
                f'filter must be a SQL WHERE clause such as "id > 3", got {filter!r}; use '
                "Dataset.filter(expr=...) for expressions."
            )
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError("storage_options must be a dict of Lance object store options.")
        self._columns = _check_columns(columns)
        self._sql_filter = filter
        self._storage_options = dict(storage_options) if storage_options else None
        self._scanner_options = _check_scanner_options(scanner_options)
        datasets = [open_dataset(u, version, self._storage_options) for u in self._uris]
        self._versions = [d.version for d in datasets]
        schemas = [d.schema for d in datasets]
        try:
            full = schemas[0] if len(schemas) == 1 else pa.unify_schemas(schemas)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ValueError(
                f"The Lance datasets {self._uris} have conflicting schemas: {exc}"
            ) from None
        self._dataset_schema = full
        if self._columns is not None:
            missing = [c for c in self._columns if c not in full.names]
            if missing:
                raise ValueError(
                    f"Column(s) {missing} not found in the Lance dataset {self._uris[0]!r}; "
                    f"it has {full.names}."
                )
        # fragment ids, rows and data bytes of each dataset (planning reads them once)
        self._fragments: list[list[tuple[int, int, int | None]]] | None = None
        self._opened = datasets

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_opened"] = None  # tasks reopen datasets by URI and version
        return state

    def get_name(self) -> str:
        return "Lance"

    # -- schema and pushdowns -------------------------------------------------------------

    def _read_schema(self) -> pa.Schema:
        """The schema of the rows before the engine's projection."""
        if self._columns is None:
            return self._dataset_schema
        return pa.schema([self._dataset_schema.field(c) for c in self._columns])

    def _output_schema(self) -> pa.Schema:
        schema = self._read_schema()
        projection = self.pushdowns.projection
        if projection is None:
            return schema
        return pa.schema([schema.field(src).with_name(out) for src, out in projection])

    def supports_projection_pushdown(self) -> bool:
        return True

    def supports_predicate_pushdown(self) -> bool:
        return True

    def with_pushdowns(self, pushdowns: Pushdowns) -> Datasource:
        clone = super().with_pushdowns(pushdowns)
        if pushdowns.projection is not None:
            missing = [c for c, _ in pushdowns.projection if c not in self._read_schema().names]
            if missing:
                raise ValueError(
                    f"Column(s) {missing} not found in the Lance dataset {self._uris[0]!r}; "
                    f"it reads {self._read_schema().names}."
                )
        return clone

    def _scan_spec(self) -> ScanSpec:
        pushdowns = self.pushdowns
        read_names = self._read_schema().names
        predicate = pushdowns.filter
        lance_filter: Any = self._sql_filter
        post_filter = None
        if predicate is not None:
            if lance_filter is None and self._lance_takes(predicate.to_pyarrow()):
                lance_filter = predicate.to_pyarrow()
            else:
                post_filter = predicate
        output = pushdowns.projection
        columns: list[str] | None = list(read_names) if self._columns is not None else None
        if output is not None:
            columns = [src for src, _ in output]
        if post_filter is not None and columns is not None:
            needed = [c for c in sorted(post_filter.referenced_columns()) if c not in columns]
            columns = columns + needed
            if needed and output is None:
                output = tuple((c, c) for c in read_names)
        schema = self._dataset_schema if len(self._uris) > 1 and output is None else None
        if schema is not None and self._columns is not None:
            schema = self._read_schema()
        return ScanSpec(
            columns=tuple(columns) if columns is not None else None,
            lance_filter=lance_filter,
            post_filter=post_filter,
            output=output,
            schema=schema,
            scanner_options=self._scanner_options,
        )

    def _lance_takes(self, expression: Any) -> bool:
        """Whether Lance can evaluate a pyarrow expression (through Substrait)."""
        dataset = self._dataset(0)
        try:
            dataset.scanner(filter=expression, limit=0)
        except Exception:
            return False
        return True

    def _dataset(self, i: int) -> Any:
        if self._opened is None:
            self._opened = [
                open_dataset(u, v, self._storage_options)
                for u, v in zip(self._uris, self._versions)
            ]
        return self._opened[i]

    # -- planning -------------------------------------------------------------------------

    def _fragment_table(self) -> list[list[tuple[int, int, int | None]]]:
        if self._fragments is None:
            listing = []
            for i in range(len(self._uris)):
                fragments = []
                for fragment in self._dataset(i).get_fragments():
                    sizes = [f.file_size_bytes for f in fragment.data_files()]
                    size = None if any(s is None for s in sizes) else sum(sizes)
                    fragments.append((fragment.metadata.id, fragment.count_rows(), size))
                listing.append(fragments)
            self._fragments = listing
        return self._fragments

    def estimate_inmemory_data_size(self) -> int | None:
        sizes = [size for fragments in self._fragment_table() for _, _, size in fragments]
        if any(s is None for s in sizes):
            return None
        share = len(self._output_schema()) / max(1, len(self._dataset_schema))
        return int(sum(s or 0 for s in sizes) * share)

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
    ) -> list[ReadTask]:
        entries = [
            (i, fragment)
            for i, fragments in enumerate(self._fragment_table())
            for fragment in fragments
            if fragment[1] > 0
        ]
        if not entries:
            return []
        spec = self._scan_spec()
        limit = self.effective_pushdowns(per_task_row_limit).limit
        retry = RetryConfig.from_data_context(data_context)
        schema = self._output_schema()
        exact_rows = spec.lance_filter is None and spec.post_filter is None
        share = len(schema) / max(1, len(self._dataset_schema))
        tasks = []
        for group in _balanced_runs(entries, max(1, int(parallelism))):
            by_dataset: dict[int, list[int]] = {}
            for i, (fragment_id, _, _) in group:
                by_dataset.setdefault(i, []).append(fragment_id)
            rows = sum(fragment[1] for _, fragment in group)
            sizes = [fragment[2] for _, fragment in group]
            size = None if any(s is None for s in sizes) else int(sum(sizes) * share)
            for i, fragment_ids in by_dataset.items():
                reader = LanceReadTask(
                    self._uris[i],
                    self._versions[i],
                    self._storage_options,
                    fragment_ids,
                    spec,
                    limit,
                    retry,
                )
                n = rows if len(by_dataset) == 1 else None
                metadata = BlockMetadata(
                    num_rows=n if exact_rows else None,
                    size_bytes=size if len(by_dataset) == 1 else None,
                    input_files=[f"{self._uris[i]}#fragment={f}" for f in fragment_ids],
                )
                tasks.append(ReadTask(reader, metadata, schema, per_task_row_limit))
        return tasks

    def __repr__(self) -> str:
        return f"LanceDatasource(uri={self._uris if len(self._uris) > 1 else self._uris[0]!r})"


def _balanced_runs(entries: list[Any], parallelism: int) -> list[list[Any]]:
    """Contiguous runs of fragments, at most ``parallelism``, of about equal row counts."""
    count = min(parallelism, len(entries))
    total = sum(fragment[1] for _, fragment in entries)
    runs: list[list[Any]] = []
    current: list[Any] = []
    cumulative = 0
    for position, entry in enumerate(entries):
        current.append(entry)
        cumulative += entry[1][1]
        runs_left = count - len(runs) - 1
        entries_left = len(entries) - position - 1
        if runs_left > 0 and (
            cumulative >= total * (len(runs) + 1) / count or entries_left == runs_left
        ):
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs
