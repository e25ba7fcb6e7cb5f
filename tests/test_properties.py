"""Property-based tests: random well-typed graphs over the builder's operators, optimised
with every extractor / k_multi / cycle filter, give a verified, no-costlier, acyclic,
well-typed program.

Settings (kept small so the suite stays fast): ``max_examples=25``, ``deadline=None``,
shapes with dimensions 2..6, graphs of 1..6 construction steps (a step may add two
operators sharing an operand), ``node_limit=2000``,
``iter_limit=4``, ``time_limit=5`` seconds.
"""

from __future__ import annotations

import pytest
import tensat_py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensat_py.builder import GraphBuilder, Tensor
from tensat_py.graph import Graph, GraphError

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

MATRIX_OPS = [
    "matmul",
    "matmul-pair",
    "ewadd",
    "ewmul",
    "relu",
    "tanh",
    "sigmoid",
    "concat",
    "transpose",
]
IMAGE_OPS = ["conv2d", "conv-pair", "ewadd", "relu", "concat", "poolmax", "poolavg", "batchnorm"]


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    """A random well-typed program: matrices (matmul family) or images (conv family)."""
    b = GraphBuilder()
    dim = st.integers(2, 6)
    image = draw(st.booleans())
    if image:
        c = draw(st.sampled_from([2, 4]))
        shape = (1, c, draw(st.integers(3, 6)), draw(st.integers(3, 6)))
    else:
        shape = (draw(dim), draw(dim))
    pool: list[Tensor] = [b.input(shape, name="x")]
    if draw(st.booleans()):
        pool.append(b.input(shape, name="y"))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(IMAGE_OPS if image else MATRIX_OPS))
        a = draw(st.sampled_from(pool))
        same = [t for t in pool if t.shape == a.shape]
        other = draw(st.sampled_from(same))
        try:
            if op == "matmul":
                n = draw(dim)
                w = b.weight((a.shape[-1], n)) if draw(st.booleans()) else None
                rhs = w if w is not None else draw(st.sampled_from(pool))
                t = b.matmul(a, rhs, act=draw(st.sampled_from(["none", "relu"])))
            elif op == "matmul-pair":  # two products sharing an operand (multi-pattern rules)
                n = draw(dim)
                p1 = b.matmul(a, b.weight((a.shape[-1], n)))
                pool.append(p1)
                t = b.matmul(a, b.weight((a.shape[-1], n)))
                if draw(st.booleans()):
                    pool.append(t)
                    t = b.ewadd(p1, t)
            elif op == "conv-pair":  # two convolutions of one input (merged by the rules)
                o = draw(st.sampled_from([2, 4]))
                c1 = b.conv2d(a, (o, a.shape[1], 1, 1), act=draw(st.sampled_from([0, 2])))
                pool.append(c1)
                t = b.conv2d(a, (o, a.shape[1], 3, 3))
                if draw(st.booleans()):
                    pool.append(t)
                    t = b.ewadd(c1, t)
            elif op in ("ewadd", "ewmul"):
                t = getattr(b, op)(a, other)
            elif op in ("relu", "tanh", "sigmoid"):
                t = getattr(b, op)(a)
            elif op == "concat":
                t = b.concat(draw(st.integers(0, len(a.shape) - 1)), [a, other])
            elif op == "transpose":
                t = b.transpose(a, (1, 0))
            elif op == "conv2d":
                o = draw(st.sampled_from([2, 4]))
                k = draw(st.sampled_from([1, 3]))
                t = b.conv2d(
                    a,
                    (o, a.shape[1], k, k),
                    padding=draw(st.sampled_from(["same", "valid"])),
                    act=draw(st.sampled_from(["none", "relu"])),
                )
            elif op in ("poolmax", "poolavg"):
                t = getattr(b, op)(a, 2, 1, padding="same")
            else:
                t = b.batchnorm(a)
        except GraphError:
            continue  # an ill-typed draw (e.g. matmul of mismatched operands): skip it
        pool.append(t)
    # Outputs: every tensor nothing else reads (at most three, newest first).
    used = {i for n in b.graph.nodes for i in n.inputs}
    outs = [t for t in reversed(pool) if t.id not in used][:3] or pool[-1:]
    return b.finish(outs)


def _check(g: Graph, **opts) -> None:
    res = tensat_py.optimize(g, node_limit=2000, iter_limit=4, time_limit=5.0, verify=True, **opts)
    # the candidate itself verifies numerically (float64) and was kept
    assert res.verify is not None and res.verify.passed, (res.verify, res.message)
    assert res.extraction_status != "fallback-unverified", res.message
    # a proved-optimal candidate costs no more than the input (which is in the e-graph)
    if res.candidate_status == "optimal":
        assert res.candidate_cost <= res.cost_before * (1 + 1e-12), res.message
    assert res.cost_after <= res.cost_before * (1 + 1e-12)
    out = res.candidate
    assert out is not None
    # acyclic: node inputs always refer to earlier nodes (topological order)
    for i, n in enumerate(out.nodes):
        assert all(0 <= j < i for j in n.inputs)
    # type-checks: rebuilding through the Rust analysis succeeds with the same types
    again = Graph.from_nodes(out.nodes, out.outputs)
    assert again.output_types() == out.output_types() == g.output_types()
    # and it can enter the e-graph again
    tensat_py._core.EGraph(out.to_flat())


@pytest.mark.parametrize("cycle_filter", ["efficient", "vanilla", "none"])
@SETTINGS
@given(g=graphs(), k_multi=st.integers(0, 2))
def test_greedy(cycle_filter: str, g: Graph, k_multi: int) -> None:
    _check(g, extractor="greedy", k_multi=k_multi, cycle_filter=cycle_filter)


@pytest.mark.parametrize("cycle_filter", ["efficient", "vanilla", "none"])
@SETTINGS
@given(g=graphs(), k_multi=st.integers(0, 2))
def test_ilp(cycle_filter: str, g: Graph, k_multi: int) -> None:
    _check(g, extractor="ilp", k_multi=k_multi, cycle_filter=cycle_filter)
