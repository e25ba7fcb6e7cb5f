"""A squeeze-excite gate ``mul(x[N,C,H,W], g[N,C,1,1])`` and onnxruntime's NCHWc layout:
the reorders ``layout.reorders`` estimates for the broadcast, the NCHWc ``Upsample`` a
nearest ``resize`` of the gate runs as (``layout.nchwc_kernel``), that onnxruntime's
optimised graph has exactly those, and that ``profile`` and ``learned`` price them. Prices
come from stored records, never from this machine's speed."""

import collections
import dataclasses

import pytest
from ort_helpers import optimised_ops
from tensat_py.builder import GraphBuilder
from tensat_py.cost import layout, nchwc
from tensat_py.cost.base import CostContext, graph_contexts
from tensat_py.cost.database import Record
from tensat_py.cost.ort_fusion import ort_fusions
from tensat_py.cost.profile import Measurement, OrtBackend, ProfileCostModel, ort_kernels, signature
from tensat_py.graph import TensorType

X = TensorType((1, 32, 14, 14), "float32")
G = TensorType((1, 32, 1, 1), "float32")
CONV = frozenset({"conv2d+act"})


def _mul(a, b, pa=CONV, pb=frozenset({"hard_sigmoid"})):
    return CostContext("mul", {}, [a, b], X, producers=(pa, pb))


def _resize(producers=frozenset({"hard_sigmoid"}), sizes=(1, 32, 14, 14), mode="nearest"):
    params = {"sizes": sizes, "mode": mode}
    out = TensorType(tuple(sizes), "float32")
    return CostContext("resize", params, [G], out, producers=(producers,))


def test_a_broadcast_gate_reorders_both_operands_out_and_the_product_back_in():
    want = [("output", X.shape), ("output", G.shape), ("input", X.shape)]
    assert layout.reorders(_mul(X, G), 8) == want
    # the gate first: the same reorders
    assert layout.reorders(_mul(G, X, frozenset({"sigmoid"}), CONV), 8) == want
    # a gate no NCHWc operator makes is not reordered out
    assert layout.reorders(_mul(X, G, pb=frozenset({"reshape"})), 8) == [want[0], want[2]]
    # nor is a feature map, and then the product stays NCHW for its reader
    assert layout.reorders(_mul(X, G, pa=frozenset({"exp"})), 8) == [want[1]]


def test_a_constant_or_3d_operand_is_never_reordered():
    bias = TensorType((32, 1, 1), "float32")
    add = CostContext(
        "add",
        {},
        [X, bias],
        X,
        operand_constant=(False, True),
        producers=(frozenset({"conv2d"}), frozenset({"ewadd"})),
    )
    assert layout.reorders(add, 8) == []  # folded into the convolution
    summed = dataclasses.replace(add, producers=(frozenset({"ewadd<conv2d"}), frozenset({"ewadd"})))
    assert layout.reorders(summed, 8) == [("output", X.shape), ("input", X.shape)]
    gate = dataclasses.replace(_mul(X, G), operand_constant=(False, True))
    assert layout.reorders(gate, 8) == [("output", X.shape), ("input", X.shape)]


def test_no_gate_reorders_for_other_products():
    assert layout.reorders(_mul(X, G), 0) == []  # no NCHWc on this CPU
    assert layout.reorders(_mul(X, X), 8) == []  # an elementwise product runs NCHWc
    one = TensorType((1, 32, 1, 1), "float32")
    assert layout.reorders(_mul(one, G), 8) == []  # 1x1 feature map: no broadcast
    other = TensorType((1, 16, 1, 1), "float32")
    assert layout.reorders(_mul(X, other), 8) == []  # not per channel of x


def test_a_nearest_resize_of_an_nchwc_tensor_by_whole_factors_is_an_nchwc_upsample():
    assert layout.nchwc_kernel(_resize(), 8) == ("upsample", (1, 32, 1, 1, 14, 14))
    assert layout.nchwc_kernel(_resize(CONV, sizes=(1, 32, 2, 3)), 8) == (
        "upsample",
        (1, 32, 1, 1, 2, 3),
    )
    assert layout.nchwc_kernel(_resize(), 0) is None
    assert layout.nchwc_kernel(_resize(mode="linear"), 8) is None
    assert layout.nchwc_kernel(_resize(frozenset({"reshape"})), 8) is None
    assert layout.upsample_key((1, 32, 2, 2), (1, 32, 3, 3)) is None  # not a whole factor
    assert layout.upsample_key((1, 32, 2, 2), (1, 64, 4, 4)) is None  # channels change


def _gate_block(upsampled: bool, exp: bool = False):
    """MobileNetV3's squeeze-excite block, its gate broadcast or upsampled (the ``layout``
    rule's target); with ``exp``, the gate's hard sigmoid reads an ``exp`` (plain NCHW)."""
    b = GraphBuilder()
    x = b.input((1, 16, 14, 14), "x")
    h = b.conv2d(x, (32, 16, 1, 1), act="relu")
    g = b.conv2d(b.conv2d(b.op("global_avg_pool", h), (8, 32, 1, 1), act="relu"), (32, 8, 1, 1))
    if exp:
        g = b.op("exp", g)
    gate = b.op("hard_sigmoid", g, alpha=0.2, beta=0.5)
    if upsampled:
        gate = b.op("resize", gate, sizes=(1, 32, 14, 14), mode="nearest")
    return b.finish([b.conv2d(b.op("mul", h, gate), (16, 32, 1, 1))])


def _reorders(counts: collections.Counter) -> int:
    return counts["ReorderInput"] + counts["ReorderOutput"]


def test_onnxruntime_upsamples_the_gate_in_nchwc_and_drops_the_estimated_reorders(block):
    broadcast, upsampled = _gate_block(False), _gate_block(True)
    ort_b, ort_u = optimised_ops(broadcast), optimised_ops(upsampled)
    assert ort_u["Upsample"] == 1 and ort_b["Upsample"] == 0
    plan_b = nchwc.nchwc_plan(broadcast, block, ort_fusions(broadcast))
    plan_u = nchwc.nchwc_plan(upsampled, block, ort_fusions(upsampled))
    assert (len(plan_b.reorders), len(plan_u.reorders)) == (_reorders(ort_b), _reorders(ort_u))
    resize = next(n for n, node in enumerate(upsampled.nodes) if node.op == "resize")
    assert resize in plan_u.nchwc
    # what the broadcast gate's estimate holds is what the upsample saves
    gate = next(c for c in graph_contexts(broadcast) if c.op == "mul")
    assert _reorders(ort_b) - _reorders(ort_u) == len(layout.reorders(gate, block)) == 3


def test_an_upsample_runs_alone_on_onnxruntime_in_nchwc(block):
    from tensat_py.cost.profile import OrtBackend

    for shape in ((1, 32, 1, 1, 14, 14), (1, 12, 1, 1, 7, 7)):  # 12: padded to the block
        m = OrtBackend().reorder("upsample", shape, block)
        assert m.reps >= 7 and m.low > 0
    with pytest.raises(ValueError, match="'sideways' is not input, output or upsample"):
        OrtBackend().reorder("sideways", (1, 8, 2, 2), block)
    with pytest.raises(ValueError, match=r"output of shape \(8, 1, 1\): an NCHWc tensor is 4-D"):
        OrtBackend().reorder("output", (8, 1, 1), block)


def _stored(db, fp, graphs, seconds: float, copy: float, upsample: float) -> None:
    """Every operator of ``graphs`` at ``seconds``, every reorder at ``copy``, every
    NCHWc upsample at ``upsample``."""
    recs = [Record(layout.BLOCK_SIGNATURE, "__nchwc_block__", 8, 0.0, 0, 8)]
    copies = set()
    for graph in graphs:
        plan = nchwc.nchwc_plan(graph, 8, ort_fusions(graph))
        ctxs = graph_contexts(graph)
        copies |= {
            *plan.reorders,
            *plan.measured,
            *(r for c in ctxs for r in layout.reorders(c, 8)),
        }
        copies |= {k for c in ctxs if (k := layout.nchwc_kernel(c, 8)) is not None}
        for node in graph.nodes:
            if node.op == "resize":
                key = layout.upsample_key(
                    graph.nodes[node.inputs[0]].type.shape, node.params["sizes"]
                )
                copies.add(("upsample", key))
        kernels = [*ctxs, *ort_kernels(ctxs)[0]]  # a fused convolution: its plain kernel
        recs += [Record(signature(c), c.op, seconds, 0.0, 7, seconds) for c in kernels]
    for kind, shape in copies:
        t = upsample if kind == "upsample" else copy
        recs.append(
            Record(layout.reorder_signature(kind, shape), layout.reorder_op(kind), t, 0.0, 7, t)
        )
    db.put(fp, recs)


def test_profile_prices_the_gates_resize_as_the_nchwc_upsample(cache):
    model = ProfileCostModel("cpu")
    upsampled, broadcast = _gate_block(True), _gate_block(False)
    _stored(model.db, model.fingerprint, [upsampled, broadcast], 1.0, 0.25, 0.125)
    call, _ = model.overhead()
    ctxs = model.program_contexts(upsampled)
    costs = dict(zip((c.op for c in ctxs), model.costs(ctxs), strict=False))
    assert costs["resize"] == pytest.approx(0.125 - call)
    assert costs["mul"] == pytest.approx(1.0 - call)
    gate = next(c for c in model.program_contexts(broadcast) if c.op == "mul")
    assert model.cost(gate) == pytest.approx(1.0 - call + 3 * (0.25 - call))  # and 3 reorders
    # The plan keeps the resize in NCHWc as guessed: the program adds only its reorders.
    plan = nchwc.nchwc_plan(upsampled, 8, ort_fusions(upsampled))
    held = len(plan.measured) + sum(len(layout.reorders(c, 8)) for c in ctxs)
    want = sum(model.costs(ctxs)) + (len(plan.reorders) - held) * (0.25 - call)
    assert model.graph_cost(upsampled) == pytest.approx(want)
    assert model.graph_cost(upsampled) < model.graph_cost(broadcast)
    assert model.measured == 0


def test_a_resize_the_plan_keeps_out_of_nchwc_is_priced_as_plain_resize(cache):
    model = ProfileCostModel("cpu")
    graph = _gate_block(True, exp=True)  # hard_sigmoid's gate guessed NCHWc, plan says no
    _stored(model.db, model.fingerprint, [graph], 1.0, 0.25, 0.125)
    call, _ = model.overhead()
    ctxs = model.program_contexts(graph)
    resize = next(n for n, node in enumerate(graph.nodes) if node.op == "resize")
    plan = nchwc.nchwc_plan(graph, 8, ort_fusions(graph))
    assert resize not in plan.nchwc
    assert model.cost(next(c for c in ctxs if c.op == "resize")) == pytest.approx(0.125 - call)
    held = len(plan.measured) + sum(len(layout.reorders(c, 8)) for c in ctxs)
    want = sum(model.costs(ctxs)) + (len(plan.reorders) - held) * (0.25 - call)
    want += (1.0 - call) - (0.125 - call)  # the plain Resize's figure, not the upsample's
    assert model.graph_cost(graph) == pytest.approx(want)


def test_learned_prices_an_upsample_at_the_input_reorders_rate_until_one_is_cached():
    rates = layout.ReorderCurves({"input": [(4000, 4e-6)]}, floor=1e-7)
    key = (1, 32, 1, 1, 14, 14)  # output: 1 x 32 x 14 x 14 float32, 25088 bytes
    assert rates.price("upsample", key) == pytest.approx(25088e-9)
    rates = layout.ReorderCurves({"input": [(4000, 4e-6)], "upsample": [(1000, 2e-6)]})
    assert rates.price("upsample", key) == pytest.approx(2 * 25088e-9)


class _Fixed(OrtBackend):
    """onnxruntime's pricing rules with fixed figures, no call overhead: 10 us per
    operator, 5 us per reorder, 1 us per NCHWc upsample; NCHWc block 8; a fused
    activation at the per-node floor (share 0)."""

    def info(self):
        return {"backend": "fixed-ort-nchwc"}

    def calibrate(self):
        return 0.0, 0.0

    def nchwc_block(self):
        return 8

    def fused_activation_share(self, op):
        return 0.0

    def measure(self, ctx):
        return Measurement(1e-5, 0.0, 1, 1e-5)

    def reorder(self, kind, shape, block=0):
        t = 1e-6 if kind == "upsample" else 5e-6
        return Measurement(t, 0.0, 1, t)


def test_optimize_upsamples_a_gate_when_the_profile_prices_the_nchwc_layout(cache):
    import tensat_py
    from test_rules_layout import _squeeze_excite

    graph = tensat_py.frontends.onnx.load(_squeeze_excite())
    model = ProfileCostModel("cpu", backend=_Fixed(), db=cache / "fixed.sqlite")
    res = tensat_py.optimize(graph, cost_model=model, confirm=False, time_limit=30)
    assert res.extraction_status in ("optimal", "feasible") and res.verify.passed
    resized = [n for n in res.graph.nodes if n.op == "resize"]
    assert [tuple(n.params["sizes"]) for n in resized] == [(1, 16, 8, 8)]
    # the gate's 3 reorders (10 + 3 x 5 us) gave way to an upsample (1 us)
    assert res.cost_before - res.cost_after == pytest.approx(14e-6, rel=1e-3)
    assert res.stats["refinement"]["cost"] == pytest.approx(res.cost_after)
