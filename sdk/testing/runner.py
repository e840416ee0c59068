"""Run the conformance checks without pytest and report the outcome.

This is what ``shardflow check-connector`` runs.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardflow.sdk.testing.checks import SkipCheck
from shardflow.sdk.testing.suite import checks_for

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class CheckResult:
    """The outcome of one check: ``status`` is "passed", "failed" or "skipped"."""

    name: str
    status: str
    doc: str
    message: str = ""
    seconds: float = 0.0


@dataclass
class ConformanceReport:
    """The outcome of every check run against one connector."""

    suite: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped checks do not count against it)."""
        return all(r.status != FAILED for r in self.results)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    def format(self, verbose: bool = False) -> str:
        """A readable report: one line per check, then the failures in full."""
        lines = [f"Conformance of {self.suite}:"]
        marks = {PASSED: "ok  ", FAILED: "FAIL", SKIPPED: "skip"}
        for r in self.results:
            note = f" ({r.message})" if r.status == SKIPPED else ""
            lines.append(f"  {marks[r.status]} {r.name:<42} {r.seconds:6.2f}s{note}")
            if verbose and r.status != SKIPPED:
                lines.append(f"       {r.doc}")
        for r in self.results:
            if r.status == FAILED:
                lines += ["", f"{r.name}: {r.doc}", _indent(r.message)]
        lines.append("")
        lines.append(
            f"{self.count(PASSED)} passed, {self.count(FAILED)} failed, "
            f"{self.count(SKIPPED)} skipped"
        )
        return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines())


def run_conformance(
    suite: Any,
    checks: Iterable[str] | None = None,
    tmp_root: str | None = None,
) -> ConformanceReport:
    """Run the conformance checks against a suite, outside pytest.

    Each check gets a fresh empty folder, as pytest's ``tmp_path`` would give it.

    Args:
        suite: A DatasourceConformance / DatasinkConformance / ConnectorConformance subclass
            (or an instance of one).
        checks: Names of the checks to run; all that apply by default.
        tmp_root: Folder under which the per-check folders are made; a temporary one by default.

    Returns:
        A ConformanceReport; ``report.ok`` is False when any check failed.

    Examples:
        >>> from shardflow.sdk.testing import run_conformance
        >>> report = run_conformance(MySuite)  # doctest: +SKIP
        >>> print(report.format())  # doctest: +SKIP
    """
    instance = suite() if isinstance(suite, type) else suite
    selected = checks_for(instance)
    if not selected:
        raise TypeError(
            f"{type(instance).__name__} is not a conformance suite: subclass "
            "DatasourceConformance, DatasinkConformance or ConnectorConformance from "
            "shardflow.sdk.testing."
        )
    if checks is not None:
        wanted = list(checks)
        known = {c.name for c in selected}
        unknown = [n for n in wanted if n not in known]
        if unknown:
            raise ValueError(f"Unknown check(s) {unknown}; this suite has {sorted(known)}.")
        selected = [c for c in selected if c.name in wanted]
    report = ConformanceReport(type(instance).__name__)
    with tempfile.TemporaryDirectory(prefix="shardflow-conformance-", dir=tmp_root) as root:
        for chk in selected:
            tmp_path = Path(root) / chk.name
            tmp_path.mkdir()
            start = time.perf_counter()
            try:
                chk.fn(instance, tmp_path)
            except SkipCheck as exc:
                result = CheckResult(chk.name, SKIPPED, chk.doc, str(exc))
            except Exception as exc:
                message = (
                    str(exc) if isinstance(exc, AssertionError) else traceback.format_exc(limit=-8)
                )
                result = CheckResult(chk.name, FAILED, chk.doc, message)
            else:
                result = CheckResult(chk.name, PASSED, chk.doc)
            result.seconds = time.perf_counter() - start
            report.results.append(result)
    return report
