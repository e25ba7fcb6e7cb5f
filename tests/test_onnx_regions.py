"""Region-preserving ONNX export: what the optimised graph still computes as the source
model's nodes did is written as those nodes; the rest goes through the operators'
``to_onnx`` and the export-time fusions (Pad + Conv, flattened MatMul)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import tensat_py
from onnx import TensorProto, helper, numpy_helper
from tensat_py.frontends import onnx as tonnx
from tensat_py.frontends.onnx import peephole
from tensat_py.frontends.onnx.regions import Matcher, structural_keys
from tensat_py.graph import Graph
from tensat_py.runtime import ort_exec


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _arr(name, shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return numpy_helper.from_array(a, name)


def _run(model, feeds):
    return ort_exec.session(model).run(None, feeds)


def _conv_matmul_model():
    """A padded strided Conv with bias, a Relu, and a 3-D x 2-D MatMul with a bias."""
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv"
        ),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
        helper.make_node("MatMul", ["t", "w2"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "b2"], ["z"], name="add"),
    ]
    inits = [
        _arr("w", (4, 3, 3, 3)),
        _arr("b", (4,), 1),
        _arr("w2", (5, 6), 2),
        _arr("b2", (6,), 3),
    ]
    return _model(
        nodes,
        [_f("x", [1, 3, 8, 8]), _f("t", [2, 7, 5])],
        [_f("y", [1, 4, 4, 4]), _f("z", [2, 7, 6])],
        inits,
    )


def _without_regions(g: Graph) -> Graph:
    """``g`` whose source model records no translated nodes: everything is written
    through ``to_onnx`` (the parts an optimiser changed)."""
    g.meta["onnx"] = dataclasses.replace(g.meta["onnx"], source_nodes=())
    return g


def test_unchanged_model_is_saved_as_the_source_nodes(tmp_path):
    m = _conv_matmul_model()
    src = tmp_path / "in.onnx"
    onnx.save(m, src)
    g = tensat_py.load(src)
    out = tensat_py.save(g, tmp_path / "out.onnx", source=g)
    saved = onnx.load(out)

    def key(n):
        return n.SerializeToString(deterministic=True)

    # The same nodes (the shape folding before import may order them differently).
    assert sorted(map(key, saved.graph.node)) == sorted(map(key, m.graph.node))
    assert {t.name for t in saved.graph.initializer} == {t.name for t in m.graph.initializer}
    assert out.stat().st_size <= src.stat().st_size


def test_a_node_the_optimiser_removed_leaves_the_others_as_they_were():
    # Source y = Sigmoid(Relu(Conv(x))); the "optimised" graph drops the Relu: Conv and
    # Sigmoid are written as the source's nodes, the Sigmoid reading the Conv's value.
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Sigmoid", ["r"], ["y"]),
    ]
    m = _model(nodes, [_f("x", [1, 3, 8, 8])], [_f("y", [1, 4, 4, 4])], [_arr("w", (4, 3, 3, 3))])
    g = tonnx.load(m)
    assert [n.op for n in g.nodes] == ["input", "weight", "pad", "conv2d", "relu", "sigmoid"]
    opt = Graph()
    x = opt.add_input("x", (1, 3, 8, 8))
    w = opt.add_weight("w", (4, 3, 3, 3))
    p = opt.add_node("pad", g.nodes[2].params, [x])
    c = opt.add_node("conv2d", g.nodes[3].params, [p, w])
    opt.outputs = [opt.add_node("sigmoid", {}, [c])]
    opt.meta = dict(g.meta)
    saved = tonnx.to_model(opt)
    conv, sig = saved.graph.node
    assert conv == m.graph.node[0]
    assert sig.op_type == "Sigmoid" and list(sig.input) == ["c"] and list(sig.output) == ["y"]
    xv = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = 1 / (
        1
        + np.exp(
            -_run(
                _model(nodes[:1], m.graph.input, [_f("c", None)], m.graph.initializer), {"x": xv}
            )[0]
        )
    )
    np.testing.assert_allclose(_run(saved, {"x": xv})[0], want, rtol=1e-5, atol=1e-6)


def test_source_node_matches_with_commuted_operands():
    src = Graph()
    a, b = src.add_input("a", (2, 3)), src.add_input("b", (3,))
    src.add_node("add", {}, [a, b])
    table: dict = {}
    keys = structural_keys(src, table)
    proto = helper.make_node("Add", ["a", "b"], ["s"])
    from tensat_py.frontends.onnx.regions import record

    sources = record(src, [(proto, [a, b], [2])], keys)
    opt = Graph()
    a2, b2 = opt.add_input("a", (2, 3)), opt.add_input("b", (3,))
    s2 = opt.add_node("add", {}, [b2, a2])  # commuted: Add(a, b) computes it
    m = Matcher(opt, table, sources).match(s2)
    assert m is not None and dict(m.bindings) == {0: a2, 1: b2}


def test_source_node_does_not_match_inputs_of_another_type():
    src = Graph()
    x = src.add_input("x", (2, 3))
    src.add_node("relu", {}, [x])
    table: dict = {}
    keys = structural_keys(src, table)
    from tensat_py.frontends.onnx.regions import record

    sources = record(src, [(helper.make_node("Relu", ["x"], ["y"]), [x], [1])], keys)
    opt = Graph()
    z = opt.add_input("z", (4, 3))
    r = opt.add_node("relu", {}, [z])
    assert Matcher(opt, table, sources).match(r) is None


def test_pad_feeding_a_valid_conv_is_written_as_one_conv():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 2, 0, 1])]
    m = _model(nodes, [_f("x", [1, 3, 8, 8])], [_f("y", None)], [_arr("w", (4, 3, 3, 3))])
    g = _without_regions(tonnx.load(m))
    assert {"pad", "conv2d"} <= {n.op for n in g.nodes}
    saved = tonnx.to_model(g)
    (conv,) = saved.graph.node
    assert conv.op_type == "Conv" and list(conv.input)[0] == "x"
    assert list(
        helper.get_attribute_value(next(a for a in conv.attribute if a.name == "pads"))
    ) == [
        1,
        2,
        0,
        1,
    ]
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(saved, {"x": x})[0], _run(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_pad_of_a_nonzero_value_stays_a_pad():
    nodes = [
        helper.make_node("Pad", ["x", "pads", "v"], ["p"]),
        helper.make_node("Conv", ["p", "w"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
        numpy_helper.from_array(np.array(2.0, np.float32), "v"),
        _arr("w", (4, 3, 3, 3)),
    ]
    m = _model(nodes, [_f("x", [1, 3, 8, 8])], [_f("y", [1, 4, 8, 8])], inits)
    before = [n.op_type for n in m.graph.node]
    assert peephole.fuse(m)["pad_conv"] == 0
    assert [n.op_type for n in m.graph.node] == before


def test_fusions_leave_protected_source_nodes_alone():
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["p"]),
        helper.make_node("Conv", ["p", "w"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
        _arr("w", (4, 3, 3, 3)),
    ]
    m = _model(nodes, [_f("x", [1, 3, 8, 8])], [_f("y", [1, 4, 8, 8])], inits)
    assert peephole.fuse(m, protected={"p", "y"})["pad_conv"] == 0
    assert [n.op_type for n in m.graph.node] == ["Pad", "Conv"]


def test_flattened_matmul_is_written_as_one_matmul():
    nodes = [
        helper.make_node("MatMul", ["t", "w"], ["mm"]),
        helper.make_node("Relu", ["mm"], ["z"]),
    ]
    m = _model(nodes, [_f("t", [2, 7, 5])], [_f("z", [2, 7, 6])], [_arr("w", (5, 6))])
    g = _without_regions(tonnx.load(m))
    assert sum(n.op == "reshape" for n in g.nodes) == 2
    saved = tonnx.to_model(g)
    assert [n.op_type for n in saved.graph.node] == ["MatMul", "Relu"]
    assert list(saved.graph.node[0].input) == ["t", "w"]
    t = np.random.default_rng(2).standard_normal((2, 7, 5)).astype(np.float32)
    np.testing.assert_allclose(_run(saved, {"t": t})[0], _run(m, {"t": t})[0], rtol=1e-5)


def test_reshape_to_rows_for_a_matmul_takes_the_shape_restored_downstream():
    # [4, 35] -> [28, 5] @ w -> [2, 14, 6]: the first Reshape targets [2, 14, 5] instead,
    # and the last one (then a no-op) goes.
    nodes = [
        helper.make_node("Reshape", ["t", "s1"], ["f"]),
        helper.make_node("MatMul", ["f", "w"], ["mm"]),
        helper.make_node("Reshape", ["mm", "s2"], ["r"]),
        helper.make_node("Relu", ["r"], ["z"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([28, 5], np.int64), "s1"),
        numpy_helper.from_array(np.array([2, 14, 6], np.int64), "s2"),
        _arr("w", (5, 6)),
    ]
    m = _model(nodes, [_f("t", [4, 35])], [_f("z", [2, 14, 6])], inits)
    t = np.random.default_rng(3).standard_normal((4, 35)).astype(np.float32)
    (want,) = _run(m, {"t": t})
    fused = onnx.ModelProto()
    fused.CopyFrom(m)
    counts = peephole.fuse(fused)
    assert counts["flatten_matmul"] == 1 and counts["noop_reshape"] == 1
    assert [n.op_type for n in fused.graph.node] == ["Reshape", "MatMul", "Relu"]
    np.testing.assert_allclose(_run(fused, {"t": t})[0], want, rtol=1e-6)


def test_split_of_a_concat_exports_under_opset_18():
    # Split at opset 18 needs a `split` input or `num_outputs`; ours writes the input.
    nodes = [
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
        helper.make_node("Split", ["c"], ["p", "q"], axis=1, num_outputs=2),
        helper.make_node("Relu", ["p"], ["rp"]),
        helper.make_node("Sigmoid", ["q"], ["rq"]),
    ]
    m = _model(
        nodes,
        [_f("a", [2, 3]), _f("b", [2, 3])],
        [_f("rp", [2, 3]), _f("rq", [2, 3])],
        opset=18,
    )
    g = _without_regions(tonnx.load(m))
    saved = tonnx.to_model(g)
    (split,) = [n for n in saved.graph.node if n.op_type == "Split"]
    assert len(split.input) == 2 and split.input[1]
    feeds = {k: np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32) for k in "ab"}
    for got, want in zip(_run(saved, feeds), _run(m, feeds), strict=True):
        np.testing.assert_allclose(got, want)


def test_equal_initializers_are_written_once():
    w = _arr("w", (3, 3))
    nodes = [
        helper.make_node("Identity", ["w"], ["w_copy"]),
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("MatMul", ["m", "w_copy"], ["y"]),
    ]
    m = _model(nodes, [_f("x", [2, 3])], [_f("y", [2, 3])], [w])
    saved = tonnx.to_model(tonnx.load(m))
    assert len(saved.graph.initializer) == 1
    assert [n.op_type for n in saved.graph.node] == ["MatMul", "MatMul"]
