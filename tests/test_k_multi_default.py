"""The default k_multi (``optimize(k_multi=None)``, ``phases.k_multi_for``): two iterations
of multi-pattern rules for small programs, one for large ones or where the cost model asks
for one (the ``xla`` model's ``default_k_multi``); and merge trees (``merge_trees=True``),
which merge a whole group of operators sharing an input in the first iteration."""

from __future__ import annotations

import pytest
import tensat_py
from tensat_py.builder import GraphBuilder
from tensat_py.phases import AUTO_K_MULTI_OPERATORS, k_multi_for


def _projections(n: int) -> tensat_py.Graph:
    """``n`` matmuls reading one input (NasRNN's pattern, eight per side there)."""
    b = GraphBuilder()
    x = b.input((1, 512), name="x")
    outs = [b.matmul(x, b.weight((512, 512), name=f"w{i}")) for i in range(n)]
    return b.finish([b.tanh(o) for o in outs])


def _matmuls(g: tensat_py.Graph) -> int:
    return sum(1 for n in g.nodes if n.op == "matmul" and not n.constant)


@pytest.mark.parametrize("n", [3, 4, 8])
def test_one_iteration_with_merge_trees_merges_a_group_of_matmuls_into_one(n: int) -> None:
    got = tensat_py.optimize(_projections(n), k_multi=1, time_limit=60)
    assert got.stats["k_multi"] == 1
    assert got.stats["merge_tree_applied"] == n - 1
    assert _matmuls(got.graph) == 1


def test_without_merge_trees_one_iteration_merges_pairs_only() -> None:
    g = _projections(4)
    trees = tensat_py.optimize(g, k_multi=1, time_limit=60)
    pairs = tensat_py.optimize(g, k_multi=1, merge_trees=False, time_limit=60)
    assert pairs.stats["merge_tree_applied"] == 0
    assert _matmuls(pairs.graph) == 2
    assert trees.cost_after < pairs.cost_after
    # the second pairwise iteration merges the merged pairs (Tensat's way there)
    two = tensat_py.optimize(g, merge_trees=False, time_limit=60)
    assert two.stats["k_multi"] == 2
    assert _matmuls(two.graph) == 1


def test_large_programs_keep_one_iteration() -> None:
    assert k_multi_for(None, AUTO_K_MULTI_OPERATORS) == 2
    assert k_multi_for(None, AUTO_K_MULTI_OPERATORS + 1) == 1
    assert k_multi_for(3, 10_000) == 3


class _OwnK:
    default_k_multi = 1


class _NoOwnK:
    default_k_multi = None


def test_a_cost_model_may_give_its_own_default() -> None:
    assert k_multi_for(None, 10, _OwnK()) == 1
    assert k_multi_for(None, 10, _NoOwnK()) == 2
    assert k_multi_for(2, 10, _OwnK()) == 2  # a k_multi given wins


def test_the_xla_model_explores_one_iteration_while_it_prices_whole_programs() -> None:
    pytest.importorskip("jax", reason="the xla cost model needs jax (the test extra)")
    from tensat_py.cost.xla import XlaCostModel

    assert XlaCostModel(db=":memory:").default_k_multi == 1
    assert XlaCostModel(db=":memory:", programs=False).default_k_multi is None


def test_a_negative_k_multi_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="k_multi: must be a non-negative integer, got -1"):
        tensat_py.optimize(_projections(4), k_multi=-1)
