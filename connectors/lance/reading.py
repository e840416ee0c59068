"""Inside a Lance read task: scan fragments of one dataset version, one fragment at a time.

A task carries the dataset's URI and version and its fragments' ids (a LanceDataset object is
opened again in the task: it is cheaper to open than to pickle). Each fragment gets a scanner
of its own, so an error names the fragment and its data files, and a transient storage error
retries the fragment from its start, skipping the rows already handed downstream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from shardflow.sdk.expressions import Expr
from shardflow.sdk.file_datasource import conform_to_schema
from shardflow.sdk.file_reading import file_error
from shardflow.sdk.optional import require
from shardflow.sdk.retry import RetryConfig, is_transient_error

logger = logging.getLogger(__name__)


def pylance() -> Any:
    return require("lance", "lance", "Reading and writing Lance datasets")


def open_dataset(uri: str, version: int | str | None, storage_options: Any) -> Any:
    """``lance.dataset(uri, version=...)``, raising FileNotFoundError naming ``uri`` when there is
    no Lance dataset there."""
    lance = pylance()
    try:
        return lance.dataset(uri, version=version, storage_options=storage_options)
    except ValueError as exc:
        if "not found" in str(exc).lower():
            raise FileNotFoundError(f"No Lance dataset at {uri!r}: {exc}") from exc
        raise ValueError(f"Cannot open the Lance dataset at {uri!r}: {exc}") from exc


@dataclass(frozen=True)
class ScanSpec:
    """What every fragment scan of a read reads.

    Args:
        columns: Columns to scan (those kept plus those a post-filter needs); None for all.
        lance_filter: Filter evaluated by Lance (SQL text or a pyarrow expression), or None.
        post_filter: Filter applied with Arrow to the scanned rows (one Lance cannot take).
        output: ``(scanned column, output name)`` pairs kept after filtering; None for all.
        schema: Every block is conformed to it (datasets of several URIs share one schema);
            None to keep the scanned schema.
        scanner_options: Other arguments of ``LanceDataset.scanner`` (``batch_size``, ...).
    """

    columns: tuple[str, ...] | None = None
    lance_filter: Any = None
    post_filter: Expr | None = None
    output: tuple[tuple[str, str], ...] | None = None
    schema: pa.Schema | None = None
    scanner_options: dict[str, Any] = field(default_factory=dict)


class LanceReadTask:
    """The picklable body of one read task: the fragments ``fragment_ids`` of a dataset."""

    def __init__(
        self,
        uri: str,
        version: int,
        storage_options: dict[str, Any] | None,
        fragment_ids: list[int],
        spec: ScanSpec,
        limit: int | None,
        retry: RetryConfig,
    ):
        self.uri = uri
        self.version = version
        self.storage_options = storage_options
        self.fragment_ids = list(fragment_ids)
        self.spec = spec
        self.limit = limit
        self.retry = retry

    def __call__(self) -> Iterator[pa.Table]:
        dataset = open_dataset(self.uri, self.version, self.storage_options)
        remaining = self.limit
        for fragment_id in self.fragment_ids:
            if remaining is not None and remaining <= 0:
                return
            for table in self._fragment(dataset, fragment_id, remaining):
                if remaining is not None:
                    table = table.slice(0, remaining)
                    remaining -= table.num_rows
                yield table

    def _fragment(self, dataset: Any, fragment_id: int, limit: int | None) -> Iterator[pa.Table]:
        emitted, attempt = 0, 1
        while True:
            to_skip = emitted
            try:
                for table in self._scan(dataset, fragment_id, limit):
                    if to_skip:
                        if table.num_rows <= to_skip:
                            to_skip -= table.num_rows
                            continue
                        table, to_skip = table.slice(to_skip), 0
                    emitted += table.num_rows
                    yield table
                return
            except Exception as exc:
                if is_transient_error(exc) and attempt < self.retry.max_attempts:
                    wait = self.retry.backoff_s(attempt)
                    logger.info(
                        "Transient error reading fragment %d of %s (attempt %d), retrying in "
                        "%.2fs: %s",
                        fragment_id,
                        self.uri,
                        attempt,
                        wait,
                        exc,
                    )
                    time.sleep(wait)
                    attempt += 1
                    dataset = open_dataset(self.uri, self.version, self.storage_options)
                    continue
                raise file_error(exc, self._where(dataset, fragment_id), attempt, "Lance") from exc

    def _scan(self, dataset: Any, fragment_id: int, limit: int | None) -> Iterator[pa.Table]:
        spec = self.spec
        fragment = dataset.get_fragment(fragment_id)
        if fragment is None:
            raise ValueError(f"fragment {fragment_id} is not in version {self.version}")
        options = dict(spec.scanner_options)
        if spec.columns is not None:
            options["columns"] = list(spec.columns)
        if spec.lance_filter is not None:
            options["filter"] = spec.lance_filter
        if limit is not None and spec.post_filter is None:
            options["limit"] = limit
        scanner = dataset.scanner(fragments=[fragment], **options)
        for batch in scanner.to_reader():
            table = pa.Table.from_batches([batch])
            if spec.post_filter is not None:
                table = table.filter(spec.post_filter.to_pyarrow())
            if spec.output is not None:
                table = table.select([src for src, _ in spec.output]).rename_columns(
                    [out for _, out in spec.output]
                )
            elif spec.schema is not None:
                table = conform_to_schema(table, spec.schema, where=self.uri)
            yield table

    def _where(self, dataset: Any, fragment_id: int) -> str:
        try:
            files = [f.path for f in dataset.get_fragment(fragment_id).data_files()]
        except Exception:
            files = []
        shown = f" (data files {', '.join(files)})" if files else ""
        return f"fragment {fragment_id} of the Lance dataset {self.uri!r}{shown}"
