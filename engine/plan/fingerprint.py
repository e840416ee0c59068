"""Fingerprints of plans: whether two runs of a write compute the same thing.

A resumed write may reuse the files an earlier run staged only when that run computed the
same rows from the same inputs. :func:`plan_fingerprint` describes every step of a logical
plan (the source's configuration, each operation with its functions and arguments) and
hashes each step on its own, so that a refusal can say which step changed.

Functions are described by their code (bytecode, constants, names, defaults, closure values,
and the functions, classes and constants of their own module that they use), not by where
they live: the same function defined in a script and imported from it by a test has the same
fingerprint, and moving it to other lines changes nothing. Resources (``num_cpus``,
``concurrency``, ``override_num_blocks``) change where and how work runs, never its result,
and are left out.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import pickle
import re
import sys
import sysconfig
import types
from typing import Any

from shardflow.engine.plan.logical import BlocksSource, LogicalPlan, ReadSource, Write

_MAX_DEPTH = 24
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_LIBRARY_ROOTS = tuple(
    {sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")}
)
# Fields of logical operations that say where or how work runs, not what it computes.
_RESOURCE_FIELDS = frozenset({"options", "parallelism", "concurrency", "per_task_row_limit"})


class TooLargeToFingerprint(ValueError):
    """A value in the plan is larger than the fingerprint's budget."""


def digest(value: Any, budget: int | None = None) -> str:
    """A short hash of ``describe(value)``; ``budget`` bounds the bytes of one value hashed
    (see :func:`describe`)."""
    return hashlib.sha256(repr(describe(value, budget)).encode()).hexdigest()[:24]


def plan_fingerprint(plan: LogicalPlan, budget: int | None = None) -> list[tuple[str, str]]:
    """``(step name, digest)`` for the source and every operation of ``plan`` except writes."""
    steps = [(plan.source.name, digest(_source(plan.source), budget))]
    for op in plan.ops:
        if isinstance(op, Write):
            continue
        steps.append((op.name, digest(_operation(op), budget)))
    return steps


def _source(source: Any) -> Any:
    if isinstance(source, ReadSource):
        return ["read", source.datasource]
    if isinstance(source, BlocksSource):
        return ["blocks", source.name, len(source.blocks)]
    return ["source", type(source).__qualname__]


def _operation(op: Any) -> Any:
    if dataclasses.is_dataclass(op):
        fields = {
            f.name: getattr(op, f.name)
            for f in dataclasses.fields(op)
            if f.name not in _RESOURCE_FIELDS
        }
        return [type(op).__qualname__, fields]
    return [type(op).__qualname__, op]


def describe(value: Any, budget: int | None = None) -> Any:
    """A structure of plain values that stands for ``value`` (see the module docstring).

    Data objects (arrays, frames) are hashed whole; with ``budget``, one larger than that
    many bytes raises :class:`TooLargeToFingerprint` instead of being hashed.
    """
    return _Describer(budget).describe(value, 0)


def _is_library(module_name: str | None) -> bool:
    """Whether ``module_name`` is installed code (the standard library or site-packages)
    rather than the user's own code or shardflow's."""
    if not module_name or module_name.split(".")[0] == "shardflow":
        return False
    if module_name in sys.builtin_module_names:
        return True
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if path is None:
        return module is not None and module_name != "__main__"
    return path.startswith(_LIBRARY_ROOTS)


class _Describer:
    def __init__(self, budget: int | None = None) -> None:
        self._path: set[int] = set()
        self._budget = budget

    def describe(self, value: Any, depth: int) -> Any:
        if value is None or isinstance(value, (bool, int, float, str, bytes)):
            return value
        if depth > _MAX_DEPTH:
            return "<deep>"
        if id(value) in self._path:
            return "<cycle>"
        self._path.add(id(value))
        try:
            return self._describe(value, depth + 1)
        finally:
            self._path.discard(id(value))

    def _describe(self, value: Any, depth: int) -> Any:
        d = self.describe
        if isinstance(value, (list, tuple)):
            return [type(value).__name__] + [d(v, depth) for v in value]
        if isinstance(value, (set, frozenset)):
            return ["set"] + sorted((d(v, depth) for v in value), key=repr)
        if isinstance(value, dict):
            return ["dict"] + sorted(
                ([d(k, depth), d(v, depth)] for k, v in value.items()), key=repr
            )
        if isinstance(value, types.FunctionType):
            return self._function(value, depth)
        if isinstance(value, types.MethodType):
            return ["method", d(value.__func__, depth), d(value.__self__, depth)]
        if isinstance(value, functools.partial):
            return ["partial", d(value.func, depth), d(value.args, depth), d(value.keywords, depth)]
        if isinstance(value, types.CodeType):
            return self._code(value, depth)
        if isinstance(value, type):
            return self._class(value, depth)
        if isinstance(value, types.ModuleType):
            return ["module", value.__name__]
        if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
            return ["builtin", getattr(value, "__module__", None), value.__qualname__]
        if _is_filesystem(value):
            return ["filesystem", type(value).__qualname__]
        kind = type(value)
        state = getattr(value, "__dict__", None)
        if state is not None and not _is_library(kind.__module__):
            skips = getattr(kind, "_FINGERPRINT_SKIPS", frozenset())
            fields = {k: v for k, v in state.items() if k not in skips}
            return ["object", self._class(kind, depth), d(fields, depth)]
        size = getattr(value, "nbytes", None)
        if self._budget is not None and isinstance(size, int) and size > self._budget:
            raise TooLargeToFingerprint(f"a {kind.__qualname__} of {size:,} bytes")
        try:
            payload = pickle.dumps(value, protocol=5)
        except Exception:
            return ["repr", kind.__qualname__, _ADDRESS.sub("", repr(value))]
        if self._budget is not None and len(payload) > self._budget:
            raise TooLargeToFingerprint(f"a {kind.__qualname__} of {len(payload):,} bytes")
        return ["pickle", kind.__qualname__, hashlib.sha256(payload).hexdigest()]

    def _function(self, fn: types.FunctionType, depth: int) -> Any:
        d = self.describe
        closure = [d(cell.cell_contents, depth) for cell in fn.__closure__ or () if _filled(cell)]
        used = {}
        module = fn.__module__
        for name in _names(fn.__code__):
            if name in fn.__globals__:
                target = fn.__globals__[name]
                if _defined_in(target, module) or isinstance(
                    target, (bool, int, float, str, bytes, tuple, frozenset)
                ):
                    used[name] = target
        return [
            "function",
            fn.__qualname__,
            self._code(fn.__code__, depth),
            d(fn.__defaults__, depth),
            d(fn.__kwdefaults__, depth),
            closure,
            d(used, depth),
        ]

    def _code(self, code: types.CodeType, depth: int) -> Any:
        consts = [
            self._code(c, depth) if isinstance(c, types.CodeType) else self.describe(c, depth)
            for c in code.co_consts
        ]
        return [code.co_code.hex(), consts, list(code.co_names), code.co_argcount]

    def _class(self, cls: type, depth: int) -> Any:
        """A user's class by its code; installed classes and shardflow's own by name (their
        code is not part of the plan)."""
        module = cls.__module__ or ""
        if _is_library(module) or module == "builtins" or module.split(".")[0] == "shardflow":
            return ["class", module, cls.__qualname__]
        members = {}
        for name, member in sorted(vars(cls).items()):
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if isinstance(member, property):
                members[name] = [
                    self.describe(member.fget, depth),
                    self.describe(member.fset, depth),
                ]
            elif isinstance(member, types.FunctionType) or (
                not name.startswith("__") and isinstance(member, (bool, int, float, str))
            ):
                members[name] = self.describe(member, depth)
        bases = [b.__qualname__ for b in cls.__mro__[1:]]
        return ["class", cls.__qualname__, bases, members]


def _filled(cell: Any) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _defined_in(target: Any, module: str) -> bool:
    return (
        isinstance(target, (types.FunctionType, type))
        and getattr(target, "__module__", None) == module
    )


def _is_filesystem(value: Any) -> bool:
    kind = type(value)
    names = {c.__module__.split(".")[0] + "." + c.__name__ for c in kind.__mro__}
    return bool(
        names & {"fsspec.AbstractFileSystem", "pyarrow.FileSystem", "shardflow.LocalDisk"}
        or kind.__name__ == "LocalDisk"
    )
