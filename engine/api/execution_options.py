"""``DataContext.execution_options``: Ray Data's ExecutionOptions and ExecutionResources.

shardflow applies what it has an equivalent for and says so once for the rest:

- ``preserve_order`` is the context's ``preserve_order`` (the same setting);
- ``resource_limits.cpu`` sets the local backend's worker slots (``DataContext.num_cpus``)
  and ``resource_limits.object_store_memory`` the bytes of blocks in flight
  (``DataContext.memory_budget_bytes``); an infinite limit (the default) changes nothing;
- ``actor_locality_enabled`` (on by default) sends each task of an actor pool on Ray to an
  actor on the node holding its input (engine/execution/operators/actor_map.py); the local
  backend has one machine, where it changes nothing;
- ``resource_limits.gpu`` and ``.memory``, ``exclude_resources``, ``label_selector``,
  and ``locality_with_output`` have no effect in shardflow: setting them warns once;
- ``verbose_progress`` shows a progress bar per operator (True, the default) or only the
  dataset's and the exchanges' (False).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

_warned: set = set()


def warn_once(key: str, message: str) -> None:
    """Warn with ``message`` the first time ``key`` is seen in this process."""
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, UserWarning, stacklevel=3)


def _check_amount(name: str, value: Any, digits: int) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"ExecutionResources.{name} must be a number >= 0 or None, got {value!r}.")
    return value if value == math.inf else round(value, digits)  # an int stays an int


def _bytes_text(amount: float) -> str:
    """``1.5GiB``-style text of an amount of bytes (``inf`` for no limit)."""
    if amount == math.inf:
        return "inf"
    value, unit = float(amount), 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{value:.1f}{_UNITS[unit]}"


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


class ExecutionResources:
    """Amounts of resources: the limits an execution may use.

    Immutable, as in Ray Data: make a new one (or ``copy(cpu=...)``) to change a limit.
    Amounts left None are unset; :meth:`for_limits` makes them infinite.

    Args:
        cpu: Logical CPU slots.
        gpu: Logical GPU slots.
        object_store_memory: Bytes of blocks held at once.
        memory: Bytes of worker heap memory.

    Examples:
        >>> from shardflow import ExecutionResources
        >>> ExecutionResources.for_limits(cpu=2)
        ExecutionResources(cpu=2.0, gpu=inf, object_store_memory=inf, memory=inf)
    """

    __slots__ = ("_cpu", "_gpu", "_object_store_memory", "_memory")

    def __init__(
        self,
        cpu: float | None = None,
        gpu: float | None = None,
        object_store_memory: float | None = None,
        memory: float | None = None,
    ):
        self._cpu = _check_amount("cpu", cpu, 5)
        self._gpu = _check_amount("gpu", gpu, 5)
        self._object_store_memory = _check_amount("object_store_memory", object_store_memory, 0)
        self._memory = _check_amount("memory", memory, 0)

    @classmethod
    def for_limits(
        cls,
        cpu: float | None = None,
        gpu: float | None = None,
        object_store_memory: float | None = None,
        memory: float | None = None,
    ) -> ExecutionResources:
        """Limits: every amount not given is infinite (no limit)."""
        inf = math.inf
        return cls(
            cpu if cpu is not None else inf,
            gpu if gpu is not None else inf,
            object_store_memory if object_store_memory is not None else inf,
            memory if memory is not None else inf,
        )

    @property
    def cpu(self) -> float:
        return self._cpu or 0.0

    @property
    def gpu(self) -> float:
        return self._gpu or 0.0

    @property
    def object_store_memory(self) -> float:
        return self._object_store_memory or 0

    @property
    def memory(self) -> float:
        return self._memory or 0

    def copy(self, **changes: float | None) -> ExecutionResources:
        """A copy with some amounts changed, e.g. ``copy(cpu=4)``."""
        unknown = set(changes) - {"cpu", "gpu", "object_store_memory", "memory"}
        if unknown:
            raise TypeError(f"ExecutionResources.copy got unknown amounts {sorted(unknown)}.")
        values = {
            n: getattr(self, f"_{n}") for n in ("cpu", "gpu", "object_store_memory", "memory")
        }
        values.update(changes)
        return ExecutionResources(**values)

    def _amounts(self) -> tuple:
        return (self._cpu, self._gpu, self._object_store_memory, self._memory)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecutionResources) and self._amounts() == other._amounts()

    def __hash__(self) -> int:
        return hash(self._amounts())

    def __repr__(self) -> str:
        return (
            f"ExecutionResources(cpu={self.cpu}, gpu={self.gpu}, "
            f"object_store_memory={_bytes_text(self.object_store_memory)}, "
            f"memory={_bytes_text(self.memory)})"
        )

    def __reduce__(self):
        return (ExecutionResources, self._amounts())


class ExecutionOptions:
    """Options of executions, as Ray Data's ``DataContext.execution_options``.

    Bound to a DataContext (``ctx.execution_options``, or assigned to it), an option with a
    shardflow equivalent sets it (see the module docstring); the others warn once.

    Args:
        resource_limits: Limits of the resources an execution uses; none by default.
        exclude_resources: Resources to leave to other work (no effect in shardflow).
        preserve_order: Emit rows in the order of the input. shardflow's contexts start
            with True (deterministic results); a new ExecutionOptions defaults to False,
            as Ray Data's.
        actor_locality_enabled: On Ray, send each task of an actor pool to an actor on the
            node that holds its input, where one has room.
        verbose_progress: Show a progress bar per operator (True, the default), or only the
            dataset's bar and the exchanges' (False), as in Ray Data.
        label_selector: Node labels for the tasks (no effect in shardflow).

    Examples:
        >>> import shardflow as sf
        >>> ctx = sf.DataContext.get_current()
        >>> ctx.execution_options.preserve_order = True
        >>> ctx.preserve_order
        True
    """

    def __init__(
        self,
        resource_limits: ExecutionResources | None = None,
        exclude_resources: ExecutionResources | None = None,
        preserve_order: bool = False,
        actor_locality_enabled: bool = True,
        verbose_progress: bool | None = None,
        label_selector: dict[str, str] | None = None,
    ):
        self._owner: Any = None
        self._preserve_order = False
        self._resource_limits = ExecutionResources.for_limits()
        self.resource_limits = (
            resource_limits if resource_limits is not None else ExecutionResources.for_limits()
        )
        self._exclude_resources = ExecutionResources(0, 0, 0, 0)
        if exclude_resources is not None:
            self.exclude_resources = exclude_resources
        self.preserve_order = preserve_order
        self._actor_locality_enabled = True
        self.actor_locality_enabled = actor_locality_enabled
        self._verbose_progress = True
        self.verbose_progress = True if verbose_progress is None else verbose_progress
        self._label_selector: dict[str, str] | None = None
        self.label_selector = label_selector

    # -- binding to a context -------------------------------------------------------------

    def _bind(self, owner: Any, push: bool) -> None:
        """Attach to ``owner`` (a DataContext). With ``push`` this object's settings are
        applied to it; otherwise this object adopts the context's."""
        self._owner = None
        if push:
            local_order = self._preserve_order
            self._owner = owner
            self.preserve_order = local_order
            self.resource_limits = self._resource_limits
        else:
            self._owner = owner

    # -- options ----------------------------------------------------------------------------

    @property
    def preserve_order(self) -> bool:
        if self._owner is not None:
            return self._owner.preserve_order
        return self._preserve_order

    @preserve_order.setter
    def preserve_order(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"preserve_order must be a bool, got {value!r}.")
        if self._owner is not None:
            self._owner.preserve_order = value
        self._preserve_order = value

    @property
    def resource_limits(self) -> ExecutionResources:
        return self._resource_limits

    @resource_limits.setter
    def resource_limits(self, value: ExecutionResources) -> None:
        if not isinstance(value, ExecutionResources):
            raise TypeError(
                f"resource_limits must be an ExecutionResources, got {type(value).__name__}."
            )
        limits = ExecutionResources.for_limits(
            value._cpu, value._gpu, value._object_store_memory, value._memory
        )
        self._resource_limits = limits
        for name in ("gpu", "memory"):
            if math.isfinite(getattr(limits, name)):
                warn_once(
                    f"resource_limits.{name}",
                    f"shardflow does not limit {name} per execution; "
                    f"ExecutionOptions.resource_limits.{name} has no effect.",
                )
        owner = self._owner
        if owner is None:
            return
        if math.isfinite(limits.cpu):
            owner.num_cpus = max(1, int(limits.cpu))
        if math.isfinite(limits.object_store_memory):
            owner.memory_budget_bytes = max(1, int(limits.object_store_memory))

    @property
    def exclude_resources(self) -> ExecutionResources:
        return self._exclude_resources

    @exclude_resources.setter
    def exclude_resources(self, value: ExecutionResources | None) -> None:
        value = value if value is not None else ExecutionResources(0, 0, 0, 0)
        if not isinstance(value, ExecutionResources):
            raise TypeError(
                f"exclude_resources must be an ExecutionResources, got {type(value).__name__}."
            )
        if any(value._amounts()):
            warn_once(
                "exclude_resources",
                "ExecutionOptions.exclude_resources has no effect in shardflow.",
            )
        self._exclude_resources = value

    @property
    def actor_locality_enabled(self) -> bool:
        return self._actor_locality_enabled

    @actor_locality_enabled.setter
    def actor_locality_enabled(self, value: bool) -> None:
        self._actor_locality_enabled = bool(value)

    @property
    def locality_with_output(self) -> bool:
        return False

    @locality_with_output.setter
    def locality_with_output(self, value: Any) -> None:
        if value:
            warn_once(
                "locality_with_output",
                "ExecutionOptions.locality_with_output has no effect in shardflow, which does "
                "not place tasks next to the consumer of the output.",
            )

    @property
    def verbose_progress(self) -> bool:
        return self._verbose_progress

    @verbose_progress.setter
    def verbose_progress(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"verbose_progress must be a bool, got {value!r}.")
        self._verbose_progress = value

    @property
    def label_selector(self) -> dict[str, str] | None:
        return self._label_selector

    @label_selector.setter
    def label_selector(self, value: dict[str, str] | None) -> None:
        if value:
            warn_once(
                "label_selector", "ExecutionOptions.label_selector has no effect in shardflow."
            )
        self._label_selector = value

    def is_resource_limits_default(self) -> bool:
        """Whether no resource limit was set."""
        return self._resource_limits == ExecutionResources.for_limits()

    def validate(self) -> None:
        """Nothing to check beyond what the setters check; kept for Ray Data's API."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExecutionOptions):
            return NotImplemented
        return (
            self.resource_limits == other.resource_limits
            and self.exclude_resources == other.exclude_resources
            and self.preserve_order == other.preserve_order
            and self.actor_locality_enabled == other.actor_locality_enabled
            and self.verbose_progress == other.verbose_progress
            and self.label_selector == other.label_selector
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ExecutionOptions(resource_limits={self.resource_limits}, "
            f"exclude_resources={self.exclude_resources}, "
            f"preserve_order={self.preserve_order}, "
            f"actor_locality_enabled={self.actor_locality_enabled}, "
            f"verbose_progress={self.verbose_progress}, "
            f"label_selector={self.label_selector})"
        )
