"""``Dataset.mix``: weighted interleaving of datasets, and its ``MixStoppingCondition``."""

from __future__ import annotations

import enum
import numbers
from typing import Any

from shardflow.engine.plan.logical import LogicalPlan, Mix


class MixStoppingCondition(enum.Enum):
    """When ``Dataset.mix`` ends, as in Ray Data.

    ``STOP_ON_SHORTEST``: when the input whose turn it is has run out; the others are cut
    there.
    ``STOP_ON_LONGEST_DROP``: when every input is exhausted; an exhausted input drops out
    and the rest of the output comes from the inputs left.

    Examples:
        >>> import shardflow as sf
        >>> sf.MixStoppingCondition("stop_on_shortest")
        <MixStoppingCondition.STOP_ON_SHORTEST: 'stop_on_shortest'>
    """

    STOP_ON_SHORTEST = "stop_on_shortest"
    STOP_ON_LONGEST_DROP = "stop_on_longest_drop"


class MixMixin:
    """The ``mix`` method of Dataset."""

    _plan: LogicalPlan

    def mix(
        self,
        *other: Any,
        weights: list[float] | None = None,
        stopping_condition: MixStoppingCondition = MixStoppingCondition.STOP_ON_LONGEST_DROP,
    ) -> Any:
        """Interleave the blocks of this dataset and ``other`` datasets toward row ratios.

        Each output block is a whole block of one input. The next block always comes from
        the input furthest behind its target share of the rows output so far (ties go to
        the larger weight, then to the earlier input); when that input has no block ready
        yet, the output waits for it. The output therefore depends only on the inputs'
        blocks, not on timing, on both backends, and is the same as Ray Data's for the same
        blocks.

        Args:
            *other: The datasets to mix with this one.
            weights: Target ratios of rows, this dataset's first; they need not sum to 1.
                None (the default) weighs every dataset the same.
            stopping_condition: A :class:`MixStoppingCondition`: stop when the first input
                runs out (``STOP_ON_SHORTEST``), or go on with the others until all are
                exhausted (``STOP_ON_LONGEST_DROP``, the default).

        Returns:
            A new Dataset whose rows come from the inputs, block by block.

        Raises:
            ValueError: when the number of weights is not the number of datasets, a
                weight is not positive, or ``stopping_condition`` is not a
                ``MixStoppingCondition``.

        Examples:
            >>> import shardflow as sf
            >>> a = sf.from_items([{"x": i} for i in range(4)], override_num_blocks=4)
            >>> b = sf.from_items([{"x": 10 + i} for i in range(4)], override_num_blocks=4)
            >>> [r["x"] for r in a.mix(b, weights=[0.75, 0.25]).take_all()]
            [0, 10, 1, 2, 3, 11, 12, 13]
        """
        from shardflow.engine.api.exchanges import _check_datasets

        _check_datasets(other, "mix")
        count = 1 + len(other)
        if weights is None:
            weights = [1.0] * count
        if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__"):
            raise TypeError(f"mix: weights must be a list of numbers, got {weights!r}.")
        if len(weights) != count:
            raise ValueError(
                f"Number of datasets ({count}) must match number of weights ({len(weights)})."
            )
        if not all(isinstance(w, numbers.Real) and not isinstance(w, bool) for w in weights):
            raise TypeError(f"mix: weights must be numbers, got {list(weights)!r}.")
        if any(w <= 0 for w in weights):
            raise ValueError(f"Weights must be positive. Got weights: {list(weights)}")
        if not isinstance(stopping_condition, MixStoppingCondition):
            raise ValueError(
                f"Unknown stopping condition: {stopping_condition!r}; pass "
                "MixStoppingCondition.STOP_ON_SHORTEST or "
                "MixStoppingCondition.STOP_ON_LONGEST_DROP."
            )
        op = Mix(
            tuple(d._plan for d in other),
            tuple(float(w) for w in weights),
            stopping_condition is MixStoppingCondition.STOP_ON_SHORTEST,
        )
        return self._with(op)  # type: ignore[attr-defined]
