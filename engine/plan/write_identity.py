"""What a write computes, for resumable writes and for finishing interrupted commits.

:func:`write_identity` gives the :class:`~shardflow.sdk.write_journal.WriteIdentity` of a
write (a fingerprint of each plan step and of the sink's options, and of the input listing)
and, where the source can tell, the listing itself (every input file with its size and
version). File sinks record it: a resumable write resumes only a run with the same identity
and inputs, and a rerun that finishes an interrupted commit of the same write knows that its
own work is done.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from shardflow.engine.plan.fingerprint import digest, plan_fingerprint
from shardflow.engine.plan.logical import LogicalPlan, ReadSource
from shardflow.sdk.input_identity import InputItem
from shardflow.sdk.write_journal import WriteIdentity

logger = logging.getLogger(__name__)

# A write that is not resumable fingerprints its plan only so that a rerun recognises its own
# interrupted commit: data larger than this in a function's closure or arguments is not hashed
# (the rerun then treats the commit as another write's), so the fingerprint never costs more
# than a few milliseconds. Resumable writes hash everything.
_BUDGET_WITHOUT_RESUME = 4 * 1024 * 1024


def write_identity(
    plan: LogicalPlan, datasink: Any, resume: bool
) -> tuple[WriteIdentity | None, list[InputItem] | None]:
    """The identity of writing ``plan`` through ``datasink``, and the input listing.

    Without ``resume`` a plan that cannot be fingerprinted gives ``(None, None)``: the write
    goes on, and only a rerun's recognition of its own interrupted commit is lost.

    Raises:
        ValueError: with ``resume``, when the source cannot list its inputs, names a file
            twice, or the plan cannot run the write in the read's tasks.
    """
    from shardflow.engine.plan.planner import check_resumable

    if resume:
        check_resumable(plan.ops, datasink)
    listing = None
    source = plan.source
    if isinstance(source, ReadSource):
        listing = source.datasource.input_items()
    if resume:
        if listing is None:
            raise ValueError(
                f"resume=True needs a source that tells what it reads (files of read_parquet, "
                f"read_csv, ... or sf.range); {source.name} cannot, so a rerun could not know "
                "which rows are written already."
            )
        seen: set[str] = set()
        for item in listing:
            if item.name in seen:
                raise ValueError(
                    f"{item.name} is named twice in the paths of this read; a resumable write "
                    "cannot tell its two readings apart. Name each file once."
                )
            seen.add(item.name)
    budget = None if resume else _BUDGET_WITHOUT_RESUME
    try:
        steps = tuple(plan_fingerprint(plan, budget))
        sink = digest(datasink, budget)
    except Exception as exc:
        if resume:
            raise ValueError(
                f"resume=True needs a fingerprint of the plan, which failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        logger.debug("No fingerprint for the write to %s: %s", datasink, exc)
        return None, None
    inputs = None
    if listing is not None:
        keys = "\n".join(sorted(item.key for item in listing))
        inputs = hashlib.sha256(keys.encode()).hexdigest()[:24]
    return WriteIdentity(steps, sink, inputs), listing
