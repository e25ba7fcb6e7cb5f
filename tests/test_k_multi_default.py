"""The default k_multi (``optimize(k_multi=None)``, ``phases.k_multi_for``): two iterations
of multi-pattern rules for small programs, so merged operators merge again."""

from __future__ import annotations

import pytest
import tensat_py
from tensat_py.builder import GraphBuilder
from tensat_py.phases import AUTO_K_MULTI_OPERATORS, k_multi_for


def _four_projections() -> tensat_py.Graph:
    """Four matmuls reading one input (NasRNN's pattern, eight per side there)."""
    b = GraphBuilder()
    x = b.input((1, 512), name="x")
    outs = [b.matmul(x, b.weight((512, 512), name=f"w{i}")) for i in range(4)]
    return b.finish([b.tanh(o) for o in outs])


def _matmuls(g: tensat_py.Graph) -> int:
    return sum(1 for n in g.nodes if n.op == "matmul" and not n.constant)


def test_the_default_merges_merged_matmuls_again() -> None:
    g = _four_projections()
    default = tensat_py.optimize(g, time_limit=60)
    assert default.stats["k_multi"] == 2
    one = tensat_py.optimize(g, k_multi=1, time_limit=60)
    assert one.stats["k_multi"] == 1
    # one iteration merges pairs at best; the second merges the merged pairs
    assert _matmuls(one.graph) == 2
    assert _matmuls(default.graph) == 1
    assert default.cost_after < one.cost_after


def test_large_programs_keep_one_iteration() -> None:
    assert k_multi_for(None, AUTO_K_MULTI_OPERATORS) == 2
    assert k_multi_for(None, AUTO_K_MULTI_OPERATORS + 1) == 1
    assert k_multi_for(3, 10_000) == 3


def test_a_negative_k_multi_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="k_multi: must be a non-negative integer, got -1"):
        tensat_py.optimize(_four_projections(), k_multi=-1)
