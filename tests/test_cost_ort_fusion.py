"""onnxruntime's chain fusions (GELU, layer normalisation, a scaled MatMul): that
``ort_fusions`` finds a chain exactly when onnxruntime's optimised graph fuses it, and that
measured models price the chain as the fused kernel. Prices come from a fixed fake
backend, never from this machine's speed."""

import math

import numpy as np
import onnx
import pytest
import tensat_py
from onnx import TensorProto, helper, numpy_helper
from ort_helpers import optimised_ops
from tensat_py.cost.base import graph_contexts
from tensat_py.cost.ort_fusion import ort_fusions
from tensat_py.cost.profile import Measurement, OrtBackend, ProfileCostModel
from tensat_py.graph import Graph

SHAPE = [1, 16, 64]


def _c(name, value, shape=()):
    return numpy_helper.from_array(np.full(shape, value, dtype=np.float32), name)


def _model(nodes, inits, out="y", out_shape=SHAPE, extra_outputs=()):
    outs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)]
    outs += [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in extra_outputs]
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        outs,
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _gelu(kind="div", half_first=False, erf_also_output=False):
    if kind == "div":
        first = helper.make_node("Div", ["x", "sqrt2"], ["d"])
        inits = [_c("sqrt2", math.sqrt(2.0))]
    else:
        first = helper.make_node("Mul", ["x", "rsqrt2"], ["d"])
        inits = [_c("rsqrt2", 1.0 / math.sqrt(2.0))]
    nodes = [
        first,
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
    ]
    if half_first:
        nodes += [
            helper.make_node("Mul", ["x", "half"], ["h"]),
            helper.make_node("Mul", ["h", "a"], ["y"]),
        ]
    else:
        nodes += [
            helper.make_node("Mul", ["x", "a"], ["m"]),
            helper.make_node("Mul", ["m", "half"], ["y"]),
        ]
    inits += [_c("one", 1.0), _c("half", 0.5)]
    return _model(nodes, inits, extra_outputs=["e"] if erf_also_output else ())


def _layer_norm(axes=(-1,), square="Pow"):
    sq = (
        helper.make_node("Pow", ["d", "two"], ["p"])
        if square == "Pow"
        else helper.make_node("Mul", ["d", "d"], ["p"])
    )
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=list(axes)),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        sq,
        helper.make_node("ReduceMean", ["p"], ["v"], axes=list(axes)),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd"]),
        helper.make_node("Div", ["d", "sd"], ["n"]),
        helper.make_node("Mul", ["n", "scale"], ["s"]),
        helper.make_node("Add", ["s", "bias"], ["y"]),
    ]
    inits = [_c("two", 2.0), _c("eps", 1e-5), _c("scale", 1.5, [64]), _c("bias", 0.25, [64])]
    return _model(nodes, inits)


def _scaled_matmul(side):
    w = numpy_helper.from_array(np.full((64, 32), 0.01, np.float32), "w")
    if side == "input":
        nodes = [
            helper.make_node("Mul", ["x", "s"], ["xs"]),
            helper.make_node("MatMul", ["xs", "w"], ["y"]),
        ]
    else:
        nodes = [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Div", ["m", "s"], ["y"]),
        ]
    return _model(nodes, [w, _c("s", 8.0)], out_shape=[1, 16, 32])


def _gelu_then_matmul():
    """A GELU whose last ``Mul(0.5)`` feeds a MatMul (a transformer's feed-forward)."""
    m = _gelu()
    g = m.graph
    g.node[-1].output[0] = "g"
    g.node.append(helper.make_node("MatMul", ["g", "w"], ["y"]))
    g.initializer.append(numpy_helper.from_array(np.full((64, 32), 0.01, np.float32), "w"))
    g.output[0].type.tensor_type.shape.dim[-1].dim_value = 32
    return m


def _tanh_gelu(form="first", at_output=False):
    """GELU's tanh approximation in FastGeluFusion's first form, its second (``Pow``,
    PyTorch's) or JAX's, read by a Relu (or ending at the output)."""
    k, c = math.sqrt(2.0 / math.pi), 0.044715
    if form == "first":
        arg = [
            helper.make_node("Mul", ["x", "c"], ["m1"]),
            helper.make_node("Mul", ["m1", "x"], ["m2"]),
            helper.make_node("Add", ["m2", "one"], ["a1"]),
            helper.make_node("Mul", ["x", "k"], ["m4"]),
            helper.make_node("Mul", ["m4", "a1"], ["arg"]),
        ]
    elif form == "pow":
        arg = [
            helper.make_node("Pow", ["x", "three"], ["p"]),
            helper.make_node("Mul", ["p", "c"], ["m1"]),
            helper.make_node("Add", ["x", "m1"], ["a1"]),
            helper.make_node("Mul", ["a1", "k"], ["arg"]),
        ]
    else:  # jax2tf: x * (x * (c * x))
        arg = [
            helper.make_node("Mul", ["c", "x"], ["m1"]),
            helper.make_node("Mul", ["x", "m1"], ["m2"]),
            helper.make_node("Mul", ["x", "m2"], ["m3"]),
            helper.make_node("Add", ["x", "m3"], ["a1"]),
            helper.make_node("Mul", ["k", "a1"], ["arg"]),
        ]
    last = "y" if at_output else "g"
    nodes = [
        *arg,
        helper.make_node("Tanh", ["arg"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["a2"]),
        helper.make_node("Mul", ["x", "half"], ["h"]),
        helper.make_node("Mul", ["h", "a2"], [last]),
    ]
    if not at_output:
        nodes.append(helper.make_node("Relu", ["g"], ["y"]))
    inits = [_c("c", c), _c("k", k), _c("one", 1.0), _c("half", 0.5), _c("three", 3.0)]
    return _model(nodes, inits)


@pytest.mark.parametrize("form", ["first", "pow"])
def test_a_tanh_gelu_is_found_where_onnxruntime_fuses_it(form, tmp_path):
    model = _tanh_gelu(form)
    assert "FastGelu" in _ort_ops(model, tmp_path)
    g, found = _ours(model, tmp_path)
    assert [f.op for f in found.values()] == ["gelu_tanh"]
    (root,) = found
    chain = {i for i, n in enumerate(g.nodes) if n.op not in ("input", "scalar", "relu")}
    assert set(found[root].absorbed) | {root} == chain


@pytest.mark.parametrize(("form", "at_output"), [("first", True), ("pow", True), ("jax", False)])
def test_no_tanh_gelu_where_onnxruntime_does_not_fuse_it(form, at_output, tmp_path):
    model = _tanh_gelu(form, at_output)
    assert "FastGelu" not in _ort_ops(model, tmp_path)
    _, found = _ours(model, tmp_path)
    assert found == {}


def _ort_ops(model, tmp_path):
    """Operator types in onnxruntime's optimised graph (CPU, ORT_ENABLE_ALL)."""
    return set(optimised_ops(model))


def _ours(model, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    g = tensat_py.load(path)
    return g, ort_fusions(g)


CASES = {
    "gelu, Div by sqrt 2": (_gelu, {}, "Gelu", "gelu"),
    "gelu, 0.5 on x first": (_gelu, {"half_first": True}, "Gelu", "gelu"),
    "layer norm, Pow": (_layer_norm, {}, "LayerNormalization", "layer_norm"),
    "scale on a MatMul operand": (_scaled_matmul, {"side": "input"}, "FusedMatMul", "matmul"),
    "scale on a MatMul output": (_scaled_matmul, {"side": "output"}, "FusedMatMul", "matmul"),
}


def test_a_gelu_feeding_a_matmul_keeps_its_last_mul(tmp_path):
    model = _gelu_then_matmul()
    ops = _ort_ops(model, tmp_path)
    assert "Gelu" in ops and "FusedMatMul" not in ops
    _, found = _ours(model, tmp_path)
    assert [f.op for f in found.values()] == ["gelu"]


@pytest.mark.parametrize("case", list(CASES))
def test_a_chain_is_found_where_onnxruntime_fuses_it(case, tmp_path):
    make, kw, ort_op, op = CASES[case]
    model = make(**kw)
    assert ort_op in _ort_ops(model, tmp_path)
    g, found = _ours(model, tmp_path)
    assert [f.op for f in found.values()] == [op]
    (root,) = found
    # the chain absorbs every other operator node (the flattening reshapes the front end
    # puts around a MatMul are views, which the exporter removes again)
    ops_left = {
        n.op
        for i, n in enumerate(g.nodes)
        if i != root and n.op not in ("input", "weight", "scalar", "reshape")
    }
    absorbed = {g.nodes[a].op for a in found[root].absorbed}
    assert absorbed == ops_left


NOT_FUSED = {
    "gelu with Mul by 1/sqrt 2": (_gelu, {"kind": "mul"}, "Gelu"),
    "gelu whose Erf is also an output": (_gelu, {"erf_also_output": True}, "Gelu"),
    "layer norm over a middle axis": (_layer_norm, {"axes": (1,)}, "LayerNormalization"),
}


@pytest.mark.parametrize("case", list(NOT_FUSED))
def test_no_chain_where_onnxruntime_does_not_fuse(case, tmp_path):
    make, kw, ort_op = NOT_FUSED[case]
    model = make(**kw)
    assert ort_op not in _ort_ops(model, tmp_path)
    _, found = _ours(model, tmp_path)
    assert found == {}


class _Fixed(OrtBackend):
    """onnxruntime's pricing rules with fixed figures: 10 us per operator, 4 us for
    ``gelu`` and ``layer_norm``; no call overhead; a fused activation at the per-node
    floor (share 0). Records what it was asked to run."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def info(self):
        return {"backend": "fixed-ort"}

    def calibrate(self):
        return 0.0, 0.0

    def fused_activation_share(self, op):
        return 0.0

    def measure(self, ctx):
        self.asked.append(ctx.op)
        t = 4e-6 if ctx.op in ("gelu", "layer_norm") else 1e-5
        return Measurement(t, 0.0, 1, t)


def _fused_form(op):
    g = Graph()
    x = g.add_input("x", tuple(SHAPE), "float32")
    if op == "gelu":
        g.outputs = [g.add_node("gelu", {}, [x])]
    else:
        s, b = g.add_weight("scale", (64,), "float32"), g.add_weight("bias", (64,), "float32")
        eps = float(np.float32(1e-5))  # the chain's epsilon, a float32 scalar
        g.outputs = [g.add_node("layer_norm", {"axis": 2, "epsilon": eps}, [x, s, b])]
    return g


@pytest.mark.parametrize("make,op", [(_gelu, "gelu"), (_layer_norm, "layer_norm")])
def test_profile_prices_a_chain_as_the_fused_kernel(make, op, cache, tmp_path):
    g, _ = _ours(make(), tmp_path)
    fused = ProfileCostModel("cpu", backend=_Fixed())
    assert fused.graph_cost(g) == pytest.approx(4e-6)
    assert fused.graph_cost(g) == pytest.approx(fused.graph_cost(_fused_form(op)))
    assert fused.backend.asked == [op] * fused.passes  # one signature, in each pass
    plain = ProfileCostModel("cpu", backend=_Fixed(), fusion=False)
    kernels = [c for c in graph_contexts(g) if c.op not in ("input", "weight", "scalar")]
    assert plain.graph_cost(g) == pytest.approx(1e-5 * len(kernels))
    assert len(kernels) == (5 if op == "gelu" else 9)


@pytest.mark.parametrize("make,op", [(_gelu, "gelu"), (_layer_norm, "layer_norm")])
def test_learned_prices_a_chain_as_the_fused_kernel(make, op, tmp_path):
    pytest.importorskip("lightgbm", reason="the 'learn' extra (LightGBM) is not installed")
    from tensat_py.cost.learned import LearnedCostModel

    def predictor(x):  # every operator predicted at 5 seconds
        return [5.0] * len(x)

    g, _ = _ours(make(), tmp_path)
    fused = LearnedCostModel(predictor, "cpu", "fp", fusion=True)
    assert fused.graph_cost(g) == pytest.approx(fused.graph_cost(_fused_form(op))) == 5.0
    plain = LearnedCostModel(predictor, "cpu", "fp", fusion=False)
    assert plain.graph_cost(g) == pytest.approx(5.0 * (5 if op == "gelu" else 9))
