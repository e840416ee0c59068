"""The journal of a resumable file write: what the write is, and what its tasks finished.

With ``write_*(..., resume=True)`` a write stages into the one resumable staging folder of its
destination (see :mod:`shardflow.sdk.staging`), which outlives a failed or killed run:

* ``_write.json``, written when the folder is made: the write's :class:`WriteIdentity` (a
  fingerprint of each step of its plan and of the sink's options) and the listing of every
  input (path, size, version). A later run resumes only when its plan and its inputs are the
  same; otherwise it refuses with :class:`ResumeMismatchError`, naming what changed.
* ``_task-<run>-<task>.json``, written by every write task once all its files are staged: the
  files, rows and bytes, and the input pieces it read (files and byte ranges, see
  :mod:`shardflow.sdk.input_identity`). A later run skips exactly those pieces, however it
  splits its inputs into tasks, and commits the recorded files with its own.

Each record is written whole (see ``staging.write_json``): a task killed while writing its
entry leaves no entry, and its staged files are not committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from shardflow.sdk.filesystems import basename, display_path, join
from shardflow.sdk.input_identity import (
    DoneInputs,
    InputItem,
    InputPiece,
    compare_listings,
)
from shardflow.sdk.staging import DATA_FOLDER, clean_command, read_json, write_json

_WRITE_FILE = "_write.json"
_TASK_PREFIX = "_task-"


class ResumeMismatchError(ValueError):
    """A resumed write found staged work of another plan or other inputs; the message says
    what changed and how to start over."""


@dataclass(frozen=True)
class WriteIdentity:
    """What a write computes, as far as a resumed or repeated run must agree.

    Args:
        plan: ``(step name, fingerprint)`` for the source and each operation.
        sink: A fingerprint of the sink's options (format, compression, names, ...).
        inputs: A fingerprint of the input listing; None when the source cannot list its
            inputs (data in memory), in which case no two runs count as the same write.
    """

    plan: tuple[tuple[str, str], ...]
    sink: str
    inputs: str | None

    def to_json(self) -> dict[str, Any]:
        return {"plan": [list(s) for s in self.plan], "sink": self.sink, "inputs": self.inputs}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> WriteIdentity:
        return cls(
            tuple((str(n), str(d)) for n, d in value.get("plan", [])),
            str(value.get("sink")),
            value.get("inputs"),
        )

    def plan_change(self, recorded: WriteIdentity) -> str | None:
        """How this plan differs from ``recorded``, in words; None when it does not."""
        before = [name for name, _ in recorded.plan]
        now = [name for name, _ in self.plan]
        if before != now:
            return f"its steps were {' -> '.join(before)} and are now {' -> '.join(now)}"
        for (name, old), (_, new) in zip(recorded.plan, self.plan):
            if old != new:
                return f"step {name} changed (its function, code, arguments or options)"
        if self.sink != recorded.sink:
            return "the write's options changed (format options, file names, partitioning)"
        return None


@dataclass
class ResumeState:
    """What earlier runs of a resumable write finished."""

    done: DoneInputs = field(default_factory=DoneInputs)
    returns: list[list[str]] = field(default_factory=list)
    rows: int = 0
    size_bytes: int = 0
    staged: set[str] = field(default_factory=set)


class WriteJournal:
    """The journal in the resumable staging folder ``staging`` of ``dest`` on ``fs``."""

    def __init__(self, fs: Any, dest: str, staging: str):
        self.fs, self.dest, self.staging = fs, dest, staging

    def _start_over(self) -> str:
        return (
            f"To start over, remove the staged work with `{clean_command(self.fs, self.dest)}`, "
            "or write with resume=False (which removes it); to resume instead, run the same "
            "plan on the same inputs."
        )

    def open(self, identity: WriteIdentity, listing: list[InputItem]) -> bool:
        """Check the recorded write against this one, or record this one when the folder is
        new. Returns True when earlier runs are resumed.

        Raises:
            ResumeMismatchError: naming the plan step or the input files that changed.
        """
        path = join(self.fs, self.staging, _WRITE_FILE)
        recorded = read_json(self.fs, path)
        shown = display_path(self.fs, self.dest)
        if recorded is None or "identity" not in recorded:
            write_json(
                self.fs,
                path,
                {
                    "identity": identity.to_json(),
                    "listing": [item.to_json() for item in listing],
                    "created": time.time(),
                },
            )
            return False
        change = identity.plan_change(WriteIdentity.from_json(recorded["identity"]))
        if change:
            raise ResumeMismatchError(
                f"Cannot resume the write to {shown}: the staged work was written by another "
                f"plan ({change}), and resuming would mix the rows of both. {self._start_over()}"
            )
        before = [InputItem.from_json(v) for v in recorded.get("listing", [])]
        inputs = compare_listings(before, listing)
        if inputs:
            raise ResumeMismatchError(
                f"Cannot resume the write to {shown}: its inputs changed since the staged work "
                f"was written ({inputs.describe()}), so the staged files may repeat or miss "
                f"rows. {self._start_over()}"
            )
        return True

    def state(self) -> ResumeState:
        """The tasks recorded so far, with the check that their files are still staged."""
        fs, state = self.fs, ResumeState()
        try:
            names = fs.ls(self.staging, detail=False)
        except FileNotFoundError:
            return state
        data = join(fs, self.staging, DATA_FOLDER)
        try:
            present = {p.rstrip("/")[len(data.rstrip("/")) + 1 :] for p in fs.find(data)}
        except FileNotFoundError:
            present = set()
        for name in sorted(names):
            base = basename(name)
            if not (base.startswith(_TASK_PREFIX) and base.endswith(".json")):
                continue
            entry = read_json(fs, name)
            if entry is None:
                continue
            missing = [f for f in entry.get("files", []) if f not in present]
            if missing:
                raise ResumeMismatchError(
                    f"Cannot resume the write to {display_path(fs, self.dest)}: the staged file "
                    f"{missing[0]} recorded by {base} is gone. {self._start_over()}"
                )
            for piece in entry.get("inputs") or []:
                state.done.add(InputPiece.from_json(piece), base)
            state.returns.append(list(entry.get("files", [])))
            state.staged.update(entry.get("files", []))
            state.rows += int(entry.get("rows", 0))
            state.size_bytes += int(entry.get("bytes", 0))
        return state

    def record(
        self,
        run: str,
        task_index: int,
        files: list[str],
        rows: int,
        size: int,
        pieces: list[InputPiece],
    ) -> None:
        """A task of run ``run`` staged all its ``files`` from the input ``pieces``."""
        entry = {
            "run": run,
            "task": task_index,
            "files": files,
            "rows": rows,
            "bytes": size,
            "inputs": [p.to_json() for p in pieces],
        }
        write_json(
            self.fs,
            join(self.fs, self.staging, f"{_TASK_PREFIX}{run}-{task_index:06d}.json"),
            entry,
        )
