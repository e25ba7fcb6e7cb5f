"""ONNX front end on real-model constructs (issue 10): shape sub-graphs folded at fixed
input shapes, explicit Conv padding, Split without a concat, rank-0 constants as
``scalar``, squeeze/unsqueeze/flatten, control flow kept whole, IR versions newer than
onnxruntime reads, and exported models without leftover Identity nodes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tensat_py
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper
from tensat_py.cli import main
from tensat_py.frontends import onnx as tonnx
from tensat_py.runtime import ort_exec


def _model(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _ops(graph) -> list[str]:
    return [n.op for n in graph.nodes]


def _ort(model, feeds):
    return ort_exec.session(model).run(None, feeds)


def _shape_subgraph_model():
    """y = Reshape(x, Concat(Shape(x)[0], [-1])) with a symbolic batch."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
    ]
    return _model(nodes, [_f("x", ["batch", 3, 4])], [_f("y", None)], inits)


def test_shape_subgraph_folds_at_given_input_shapes():
    g = tonnx.load(_shape_subgraph_model(), input_shapes={"x": (2, 3, 4)})
    assert "opaque" not in _ops(g)
    (reshape,) = [n for n in g.nodes if n.op == "reshape"]
    assert tuple(reshape.params["shape"]) == (2, 12)


def test_tensat_load_forwards_input_shapes(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_shape_subgraph_model(), path)
    g = tensat_py.load(path, input_shapes={"x": [5, 3, 4]})
    assert g.type_of(g.outputs[0]).shape == (5, 12)


def test_input_shapes_rejects_unknown_input():
    with pytest.raises(tonnx.OnnxError, match="unknown input 'nope'"):
        tonnx.load(_shape_subgraph_model(), input_shapes={"nope": (1,)})


def test_conv_with_explicit_pads_translates_to_pad_and_valid_conv():
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = np.arange(4, dtype=np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])
    m = _model(
        [node],
        [_f("x", [1, 3, 8, 8])],
        [_f("y", [1, 4, 4, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    g = tonnx.load(m)
    ops = _ops(g)
    assert "opaque" not in ops and "pad" in ops and "conv2d" in ops
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (want,) = _ort(m, {"x": x})
    (got,) = _ort(tonnx.to_model(g), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_1d_translates_through_reshape():
    w = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1])
    m = _model(
        [node], [_f("x", [1, 2, 7])], [_f("y", [1, 5, 7])], [numpy_helper.from_array(w, "w")]
    )
    g = tonnx.load(m)
    assert "opaque" not in _ops(g) and "conv2d" in _ops(g)
    x = np.random.default_rng(1).standard_normal((1, 2, 7)).astype(np.float32)
    np.testing.assert_allclose(
        _ort(tonnx.to_model(g), {"x": x})[0], _ort(m, {"x": x})[0], rtol=1e-5, atol=1e-5
    )


def test_split_of_a_non_concat_becomes_slices():
    node = helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)
    m = _model(
        [node],
        [_f("x", [2, 5])],
        [_f("a", [2, 2]), _f("b", [2, 3])],
        [numpy_helper.from_array(np.array([2, 3], np.int64), "sizes")],
    )
    g = tonnx.load(m)
    assert _ops(g).count("slice") == 2 and "opaque" not in _ops(g)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    for got, want in zip(_ort(tonnx.to_model(g), {"x": x}), _ort(m, {"x": x}), strict=True):
        np.testing.assert_array_equal(got, want)


def test_split_of_a_concat_stays_tasos_split():
    nodes = [
        helper.make_node("Concat", ["x", "z"], ["c"], axis=1),
        helper.make_node("Split", ["c", "sizes"], ["a", "b"], axis=1),
    ]
    m = _model(
        nodes,
        [_f("x", [2, 2]), _f("z", [2, 3])],
        [_f("a", [2, 2]), _f("b", [2, 3])],
        [numpy_helper.from_array(np.array([2, 3], np.int64), "sizes")],
    )
    ops = _ops(tonnx.load(m))
    assert "split" in ops and "slice" not in ops


def test_rank0_constant_imports_as_scalar():
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["m"]),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    m = _model(
        nodes,
        [_f("x", [2, 3])],
        [_f("y", [2, 3])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    g = tonnx.load(m)
    (sc,) = [n for n in g.nodes if n.op == "scalar"]
    assert sc.params["value"] == 2.0 and sc.params["dtype"] == "float32"
    assert not g.weights()
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(_ort(tonnx.to_model(g), {"x": x})[0], _ort(m, {"x": x})[0])


def test_squeeze_unsqueeze_flatten_and_global_max_pool_translate():
    nodes = [
        helper.make_node("GlobalMaxPool", ["x"], ["p"]),
        helper.make_node("Squeeze", ["p", "ax23"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "ax1"], ["u"]),
        helper.make_node("Flatten", ["u"], ["y"], axis=1),
    ]
    m = _model(
        nodes,
        [_f("x", [2, 3, 4, 5])],
        [_f("y", [2, 3])],
        [
            numpy_helper.from_array(np.array([2, 3], np.int64), "ax23"),
            numpy_helper.from_array(np.array([1], np.int64), "ax1"),
        ],
    )
    g = tonnx.load(m)
    assert "opaque" not in _ops(g) and "reduce_max" in _ops(g)
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(_ort(tonnx.to_model(g), {"x": x})[0], _ort(m, {"x": x})[0])


def _if_model(ir: int = 8):
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [_f("t", [2, 3])]
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [_f("e", [2, 3])]
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["i"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Softmax", ["i"], ["y"], axis=1),
    ]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    return _model(nodes, [_f("x", [2, 3])], [_f("y", [2, 3])], inits, ir=ir)


def test_if_is_kept_whole_as_an_opaque_node_with_its_branches():
    g = tonnx.load(_if_model())
    assert tonnx.opaque_ops(g) == {"If": 1}
    (nid,) = g.opaque_nodes()
    payload = g.opaque_payload(nid)
    (node,) = [n for n in payload.nodes if n.op_type == "If"]
    assert {a.name for a in node.attribute} == {"then_branch", "else_branch"}
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(
        _ort(tonnx.to_model(g), {"x": x})[0], _ort(_if_model(), {"x": x})[0], rtol=1e-6
    )


def test_model_with_newer_ir_version_loads_optimises_and_verifies():
    m = _if_model(ir=onnx.IR_VERSION)
    g = tonnx.load(m)
    result = tensat_py.optimize(g, extractor="greedy-dag", verify=True)
    assert result.verify is not None and result.verify.passed
    out = tonnx.to_model(result.graph, source=g)
    assert out.ir_version <= 13
    ort_exec.session(out)  # onnxruntime reads it


def test_export_has_no_identity_and_is_not_larger(tmp_path):
    w = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("MatMul", ["i", "w"], ["m"]),
        helper.make_node("Identity", ["m"], ["y"]),
    ]
    m = _model(nodes, [_f("x", [2, 3])], [_f("y", [2, 3])], [numpy_helper.from_array(w, "w")])
    src = tmp_path / "in.onnx"
    onnx.save(m, src)
    g = tensat_py.load(src)
    out = tensat_py.save(g, tmp_path / "out.onnx", source=g)
    saved = onnx.load(out)
    assert [n.op_type for n in saved.graph.node] == ["MatMul"]
    assert out.stat().st_size <= src.stat().st_size


def test_cli_input_shape_option_fixes_symbolic_dimensions(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_shape_subgraph_model(), path)
    out = tmp_path / "o.onnx"
    r = CliRunner().invoke(
        main,
        [
            "optimize",
            str(path),
            "--input-shape",
            "x=2,3,4",
            "-o",
            str(out),
            "-q",
            "--extractor",
            "greedy-dag",
        ],
    )
    assert r.exit_code == 0, r.output
    dims = [d.dim_value for d in onnx.load(out).graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 3, 4]


def test_cli_input_shape_rejects_a_bad_spec(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_shape_subgraph_model(), path)
    r = CliRunner().invoke(main, ["optimize", str(path), "--input-shape", "x=2,a"])
    assert r.exit_code != 0 and "--input-shape" in r.output
