"""Operations, unary expressions and the nodes that draw numbers or expand structs,
checked against Python and NumPy oracles."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardflow.sdk.datatype import DataType
from shardflow.sdk.expression_eval import ArrowEvaluator, RowPosition, evaluate
from shardflow.sdk.expression_operations import Operation
from shardflow.sdk.expressions import (
    BinaryExpr,
    ExprVisitor,
    StructFieldExpr,
    UnaryExpr,
    col,
    lit,
    random,
    star,
    udf,
    unnest,
)

values = st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(values, st.lists(st.integers(-5, 5), max_size=4))
def test_unary_and_membership_operations_match_python(column, members):
    table = pa.table({"x": pa.array(column, pa.int64())})
    x = col("x")
    is_null = [v is None for v in column]
    cases = {
        "is_null": (UnaryExpr(Operation.IS_NULL, x), is_null),
        "is_not_null": (x.is_not_null(), [not n for n in is_null]),
        "is_in": (x.is_in(members), [v is not None and v in members for v in column]),
        "not_in": (x.not_in(members), [not (v is not None and v in members) for v in column]),
        "not": (~(x > 0), [None if v is None else not v > 0 for v in column]),
    }
    for name, (expr, expected) in cases.items():
        assert evaluate(expr, table).to_pylist() == expected, name
        # the same through Arrow's expression (what reads push down)
        assert table.filter(expr.to_pyarrow()).column("x").to_pylist() == [
            v for v, keep in zip(column, expected) if keep
        ], name


def test_operations_are_ray_datas_and_symbols_still_build_expressions():
    assert [op.value for op in Operation][:6] == ["add", "sub", "mul", "div", "mod", "floordiv"]
    assert Operation.of(">=") is Operation.GE and Operation.of("ge") is Operation.GE
    assert BinaryExpr(">", col("x"), lit(1)).structurally_equals(col("x") > 1)
    assert (col("x") > 1).op is Operation.GT and (col("x") > 1).op.symbol == ">"
    with pytest.raises(ValueError, match="Unknown operation"):
        Operation.of("**")
    with pytest.raises(ValueError, match="not a unary operation"):
        UnaryExpr(Operation.ADD, col("x"))
    with pytest.raises(ValueError, match="literal list"):
        BinaryExpr(Operation.IN, col("x"), col("y"))
    expr = pickle.loads(pickle.dumps((col("x") + 1).is_not_null() & col("y").not_in([2])))
    assert expr.structurally_equals((col("x") + 1).is_not_null() & col("y").not_in([2]))


class _Terms(ExprVisitor[str]):
    """A visitor written before is_not_null and not_in had kinds of their own."""

    def visit_column(self, expr):
        return expr.name

    def visit_not(self, expr):
        return f"NOT {self.visit(expr.operand)}"

    def visit_is_null(self, expr):
        return f"{self.visit(expr.operand)} IS NULL"

    def visit_is_in(self, expr):
        return f"{self.visit(expr.operand)} IN {tuple(expr.values)}"


def test_visitors_see_new_kinds_as_the_old_ones():
    assert _Terms().visit(col("a").is_not_null()) == "NOT a IS NULL"
    assert _Terms().visit(col("a").not_in([1, 2])) == "NOT a IN (1, 2)"
    with pytest.raises(TypeError, match="star"):
        _Terms().visit(star())
    with pytest.raises(TypeError, match="unnest"):
        _Terms().visit(unnest(col("s")))


def test_random_draws_numpys_numbers_per_block_task_and_execution():
    table = pa.table({"i": list(range(4))})
    fixed = random(seed=3, reseed_after_execution=False)
    reseeded = random(seed=3)
    position = RowPosition(task_idx=2, block_idx=1, executions={reseeded._instance_id: 5})
    expected = np.random.default_rng([1, 2, 0, 3]).random(4)
    assert evaluate(fixed, table, position=position).to_pylist() == list(expected)
    expected = np.random.default_rng([1, 2, 5, 3]).random(4)
    assert evaluate(reseeded, table, position=position).to_pylist() == list(expected)
    unseeded = evaluate(random(), table).to_numpy()
    assert unseeded.dtype == np.float64 and ((unseeded >= 0) & (unseeded < 1)).all()
    assert [reseeded.next_execution() for _ in range(3)] == [0, 1, 2]


def test_struct_fields_share_one_evaluation_of_their_struct():
    calls = []

    def counted(table):
        calls.append(1)
        return table

    table = pa.table({"s": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])})
    struct_type = DataType.from_arrow(table.schema.field("s").type)
    struct = udf(return_dtype=struct_type)(counted)(col("s"))
    evaluator = ArrowEvaluator(table)
    a = evaluator.visit(StructFieldExpr(struct, 0))
    b = evaluator.visit(StructFieldExpr(struct, 1))
    assert (a.to_pylist(), b.to_pylist(), len(calls)) == ([1, 2], ["x", "y"], 1)
