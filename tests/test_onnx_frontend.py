"""The ONNX front end's machinery: registry dispatch, opaque fallback and its reasons,
translator errors, dtypes, shape sub-graph folding, sub-graphs in opaque payloads, and the
writer's renaming (no leftover Identity nodes, opsets/IR version/functions kept).

Models are built here with ``onnx.helper``; results are compared with onnxruntime on the
source model. Tests that need a misbehaving importer pass ``importers=`` to ``load`` so
the real registry is untouched.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import tensat_py
from onnx import TensorProto, helper, numpy_helper
from tensat_py import ops
from tensat_py.frontends import onnx as tonnx
from tensat_py.runtime import ort_exec

F, H, D, I64, B = (
    TensorProto.FLOAT,
    TensorProto.FLOAT16,
    TensorProto.DOUBLE,
    TensorProto.INT64,
    TensorProto.BOOL,
)


def _model(nodes, inputs, outputs, inits=(), opset: int = 17, **kw) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset), *kw.pop("extra_opsets", [])]
    m = helper.make_model(g, opset_imports=opsets, **kw)
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _vi(name: str, shape, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _w(name: str, shape, seed: int, dtype=np.float32) -> TensorProto:
    a = np.random.default_rng(seed).standard_normal(shape) * 0.1
    return numpy_helper.from_array(a.astype(dtype), name)


def _same(a: onnx.ModelProto, b: onnx.ModelProto, feeds, rtol: float = 1e-3) -> None:
    ya = ort_exec.session(a).run(None, feeds)
    yb = ort_exec.session(b).run(None, feeds)
    assert len(ya) == len(yb)
    for p, q in zip(ya, yb, strict=True):
        assert p.shape == q.shape and p.dtype == q.dtype
        p64, q64 = p.astype(np.float64), q.astype(np.float64)
        scale = max(float(np.abs(p64).max()), 1e-30)
        assert float(np.abs(p64 - q64).max()) <= rtol * scale


def _ops(m: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in m.graph.node)


def _x(shape, seed: int = 0, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------ dispatch and errors
def _relu_model() -> onnx.ModelProto:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="the_relu")],
        [_vi("x", [2, 3])],
        [_vi("y", [2, 3])],
    )


def test_importer_exception_is_a_clear_error_naming_node_and_file(tmp_path: Path) -> None:
    def broken(imp, node):
        raise KeyError("oops")

    path = tmp_path / "m.onnx"
    onnx.save(_relu_model(), str(path))
    with pytest.raises(tonnx.OnnxImportError) as ei:
        tonnx.load(path, importers={"Relu": broken})
    msg = str(ei.value)
    assert str(path) in msg and "'the_relu'" in msg and "(Relu)" in msg and "KeyError" in msg
    assert ei.value.node_name == "the_relu" and ei.value.op_type == "Relu"
    assert ei.value.model == str(path)
    assert isinstance(ei.value.__cause__, KeyError)


def test_type_checker_rejection_is_an_error_not_an_opaque_node() -> None:
    def bad(imp, node):  # matmul of [2, 3] with itself does not type-check
        x = imp.input(node, 0)
        imp.set_output(node, 0, imp.add("matmul", {"act": 0}, [x, x]))

    with pytest.raises(tonnx.OnnxImportError, match=r"'the_relu' \(Relu\).*type checker"):
        tonnx.load(_relu_model(), importers={"Relu": bad})


def test_wrong_output_shape_is_an_error() -> None:
    def bad(imp, node):
        x = imp.input(node, 0)
        imp.set_output(node, 0, imp.add("transpose", {"perm": [1, 0]}, [x]))

    with pytest.raises(tonnx.OnnxImportError, match="shape inference gives"):
        tonnx.load(_relu_model(), importers={"Relu": bad})


def test_unsupported_and_missing_importers_become_opaque_with_reasons() -> None:
    def refuse(imp, node):
        raise imp.Unsupported("not today")

    g = tonnx.load(_relu_model(), importers={"Relu": refuse})
    assert tonnx.opaque_ops(g) == {"Relu": 1}
    assert tonnx.opaque_reasons(g) == {"Relu": {"not today": 1}}
    g = tonnx.load(_relu_model(), importers={})
    assert tonnx.opaque_reasons(g) == {"Relu": {"no importer for ONNX operator `Relu`": 1}}
    # The opaque node still runs (onnxruntime) and exports unchanged.
    saved = tonnx.to_model(g)
    assert _ops(saved) == Counter({"Relu": 1})
    _same(_relu_model(), saved, {"x": _x((2, 3))})


def test_an_unbound_used_output_makes_the_node_opaque() -> None:
    m = _model(
        [
            helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2]),
            helper.make_node("Cast", ["idx"], ["mf"], to=F),
            helper.make_node("Add", ["y", "mf"], ["z"]),
        ],
        [_vi("x", [1, 1, 4, 4])],
        [_vi("z", [1, 1, 3, 3])],
    )
    g = tonnx.load(m)
    (reason,) = tonnx.opaque_reasons(g)["MaxPool"]
    assert "no value for used output" in reason and "idx" in reason
    _same(m, tonnx.to_model(g), {"x": _x((1, 1, 4, 4))})


# ------------------------------------------------------------------ export: names, identities
def test_exported_models_carry_no_identity_nodes(tmp_path: Path) -> None:
    m = _model(
        [
            helper.make_node("Identity", ["x"], ["a"]),
            helper.make_node("Dropout", ["a"], ["b"]),
            helper.make_node("Transpose", ["b"], ["c"], perm=[0, 1]),
            helper.make_node("MatMul", ["c", "w"], ["d"]),
            helper.make_node("Identity", ["d"], ["e"]),
            helper.make_node("Relu", ["e"], ["y"]),
            helper.make_node("Identity", ["y"], ["z"]),
        ],
        [_vi("x", [4, 8])],
        [_vi("z", [4, 8])],
        [_w("w", (8, 8), 1)],
    )
    g = tonnx.load(m)
    saved = tonnx.to_model(g)
    assert "Identity" not in _ops(saved), _ops(saved)
    assert [o.name for o in saved.graph.output] == ["z"]
    _same(m, saved, {"x": _x((4, 8))})
    result = tensat_py.optimize(g, device="cpu")
    out = tonnx.save(result.graph, tmp_path / "o.onnx")
    saved = onnx.load(str(out))
    assert "Identity" not in _ops(saved) and "Dropout" not in _ops(saved), _ops(saved)
    _same(m, saved, {"x": _x((4, 8))})


def test_identity_remains_only_for_inputs_and_repeated_outputs() -> None:
    m = _model(
        [
            helper.make_node("Identity", ["x"], ["a"]),
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Identity", ["r"], ["r2"]),
        ],
        [_vi("x", [2, 3])],
        [_vi("a", [2, 3]), _vi("r", [2, 3]), _vi("r2", [2, 3])],
    )
    saved = tonnx.to_model(tonnx.load(m))
    assert [o.name for o in saved.graph.output] == ["a", "r", "r2"]
    # `a` is the graph input, `r2` the same value as output `r`.
    assert _ops(saved) == Counter({"Relu": 1, "Identity": 2}), _ops(saved)
    _same(m, saved, {"x": _x((2, 3))})


def test_constant_output_is_an_initializer_of_the_output_name() -> None:
    m = _model(
        [helper.make_node("Transpose", ["w"], ["wt"]), helper.make_node("Relu", ["x"], ["y"])],
        [_vi("x", [2, 3])],
        [_vi("wt", [3, 2]), _vi("y", [2, 3])],
        [_w("w", (2, 3), 3)],
    )
    saved = tonnx.to_model(tonnx.load(m))
    assert "Identity" not in _ops(saved) and "Transpose" not in _ops(saved)
    assert "wt" in {t.name for t in saved.graph.initializer}
    _same(m, saved, {"x": _x((2, 3))})


def test_opset_ir_version_and_functions_are_kept() -> None:
    fn = helper.make_function(
        "my.domain",
        "Twice",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 15)],
    )
    m = _model(
        [
            helper.make_node("Twice", ["x"], ["t"], domain="my.domain"),
            helper.make_node("Relu", ["t"], ["y"]),
        ],
        [_vi("x", [2, 3])],
        [_vi("y", [2, 3])],
        opset=15,
        functions=[fn],
        extra_opsets=[helper.make_opsetid("my.domain", 1)],
    )
    m.ir_version = 8
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {"my.domain:Twice": 1}
    saved = tonnx.to_model(tensat_py.optimize(g, device="cpu").graph, source=g)
    assert saved.ir_version == 8
    assert {(o.domain, o.version) for o in saved.opset_import} == {("", 15), ("my.domain", 1)}
    assert [f.name for f in saved.functions] == ["Twice"]
    _same(m, saved, {"x": _x((2, 3))})


# ------------------------------------------------------------------ dtypes
def test_float16_flows_through_import_and_export() -> None:
    m = _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["h"]),
            helper.make_node("Relu", ["h"], ["y"]),
        ],
        [_vi("x", [4, 8], H)],
        [_vi("y", [4, 8], H)],
        [_w("w", (8, 8), 1, np.float16)],
    )
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {}
    assert {n.type.dtype for n in g.nodes} == {"float16"}
    saved = tonnx.to_model(g)
    assert saved.graph.output[0].type.tensor_type.elem_type == H
    assert saved.graph.initializer[0].data_type == H
    _same(m, saved, {"x": _x((4, 8), dtype=np.float16)})


def test_conv_bias_weight_keeps_its_dtype() -> None:
    m = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
        [_vi("x", [1, 2, 5, 5], D)],
        [_vi("y", [1, 4, 5, 5], D)],
        [_w("w", (4, 2, 3, 3), 1, np.float64), _w("b", (4,), 2, np.float64)],
    )
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {} and {n.type.dtype for n in g.nodes} == {"float64"}
    src = g.meta["onnx"]
    assert all(a.dtype == np.float64 for a in src.arrays.values()) and src.arrays
    saved = tonnx.to_model(g)
    assert {t.data_type for t in saved.graph.initializer} == {D}
    # onnxruntime has no float64 Conv: compare with ONNX's reference evaluator.
    from onnx.reference import ReferenceEvaluator

    feeds = {"x": _x((1, 2, 5, 5), dtype=np.float64)}
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    (got,) = ReferenceEvaluator(saved).run(None, feeds)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_int_and_bool_values_flow_through() -> None:
    m = _model(
        [
            helper.make_node("Add", ["i", "j"], ["s"]),
            helper.make_node("Greater", ["s", "k"], ["c"]),
            helper.make_node("Where", ["c", "x", "z"], ["y"]),
        ],
        [_vi("i", [3, 4], I64), _vi("j", [3, 4], I64), _vi("x", [3, 4])],
        [_vi("y", [3, 4]), _vi("s", [3, 4], I64)],
        [
            numpy_helper.from_array(np.array(1, np.int64), "k"),
            numpy_helper.from_array(np.zeros((3, 4), np.float32), "z"),
        ],
    )
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {}
    types = {g.nodes[o].op: g.type_of(o).dtype for o in g.outputs}
    assert types == {"select": "float32", "ewadd": "int64"}  # equal shapes: ewadd
    saved = tonnx.to_model(g)
    assert [i.type.tensor_type.elem_type for i in saved.graph.input] == [I64, I64, F]
    rng = np.random.default_rng(0)
    feeds = {
        "i": rng.integers(-3, 3, (3, 4)).astype(np.int64),
        "j": rng.integers(-3, 3, (3, 4)).astype(np.int64),
        "x": _x((3, 4)),
    }
    _same(m, saved, feeds)


def test_values_without_a_dtype_stay_inside_opaque_payloads() -> None:
    m = _model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Cast", ["r"], ["u"], to=TensorProto.STRING),
            helper.make_node("Cast", ["u"], ["f"], to=F),
            helper.make_node("Tanh", ["f"], ["y"]),
        ],
        [_vi("x", [2, 3])],
        [_vi("y", [2, 3])],
    )
    g = tonnx.load(m)
    # The string cast has no dtype; its consumer takes it into its own payload.
    reasons = tonnx.opaque_reasons(g)
    assert list(reasons) == ["Cast"] and sum(reasons["Cast"].values()) == 1
    (p,) = [g.opaque_payload(n) for n in g.opaque_nodes()]
    assert [n.op_type for n in p.nodes] == ["Cast", "Cast"]
    assert "STRING" in next(iter(reasons["Cast"]))
    x = 3 * _x((2, 3))
    _same(m, tonnx.to_model(g), {"x": x})
    report = tensat_py.verify(g, g, runner="numpy")
    assert report.passed, report


def test_inputs_of_an_element_type_without_dtype_are_a_clear_error() -> None:
    m = _model(
        [helper.make_node("Cast", ["x"], ["y"], to=F)],
        [_vi("x", [2], TensorProto.STRING)],
        [_vi("y", [2])],
    )
    with pytest.raises(tonnx.OnnxError, match="input 'x' has element type STRING"):
        tonnx.load(m)


def test_uint8_and_int8_models_load_whole_and_round_trip() -> None:
    m = _model(
        [
            helper.make_node("Cast", ["img"], ["f"], to=F),
            helper.make_node("Mul", ["f", "f"], ["y"]),
            helper.make_node("Cast", ["y"], ["q"], to=TensorProto.INT8),
        ],
        [_vi("img", [2, 3], TensorProto.UINT8)],
        [_vi("q", [2, 3], TensorProto.INT8)],
    )
    g = tonnx.load(m)
    assert not g.opaque_nodes()
    assert [g.type_of(i).dtype for i in g.inputs()] == ["uint8"]
    img = np.arange(6, dtype=np.uint8).reshape(2, 3)
    _same(m, tonnx.to_model(g), {"img": img})


# ------------------------------------------------------------------ constants and sub-graphs
def test_shape_sub_graphs_are_folded() -> None:
    m = _model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["flat"]),
            helper.make_node("MatMul", ["flat", "w"], ["y"]),
        ],
        [_vi("x", [2, 3, 4])],
        [_vi("y", [2, 5])],
        [
            numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array([0], np.int64), "zero1"),
            numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
            _w("w", (12, 5), 1),
        ],
    )
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {}
    assert g.op_counts()["reshape"] == 1
    saved = tonnx.to_model(g)
    assert "Shape" not in _ops(saved)
    _same(m, saved, {"x": _x((2, 3, 4))})


def test_opaque_payload_keeps_sub_graphs_and_their_outer_values() -> None:
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["h"], ["t"])], "then", [], [_vi("t", [2, 3])]
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["h"], ["e"])], "else", [], [_vi("e", [2, 3])]
    )
    m = _model(
        [
            helper.make_node("Tanh", ["x"], ["h"]),
            helper.make_node("If", ["cond"], ["o"], then_branch=then_g, else_branch=else_g),
            helper.make_node("Sigmoid", ["o"], ["y"]),
        ],
        [_vi("x", [2, 3]), _vi("cond", [], B)],
        [_vi("y", [2, 3])],
    )
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {"If": 1}
    (nid,) = g.opaque_nodes()
    p = g.opaque_payload(nid)
    assert "h" in p.operands and g.nodes[g.nodes[nid].inputs[p.operands.index("h")]].op == "tanh"
    result = tensat_py.optimize(g, device="cpu")
    saved = tonnx.to_model(result.graph, source=g)
    for c in (True, False):
        _same(m, saved, {"x": _x((2, 3)), "cond": np.array(c)})


def test_multi_output_opaque_node_is_written_once() -> None:
    m = _model(
        [
            helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
            helper.make_node("Cast", ["i"], ["fi"], to=F),
            helper.make_node("Add", ["v", "fi"], ["y"]),
        ],
        [_vi("x", [2, 5])],
        [_vi("y", [2, 3])],
        [numpy_helper.from_array(np.array([3], np.int64), "k")],
    )
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {"TopK": 1}
    saved = tonnx.to_model(g)
    assert _ops(saved)["TopK"] == 1
    _same(m, saved, {"x": _x((2, 5))})


def test_payload_evaluates_float64_through_onnxruntime() -> None:
    m = _model(
        [helper.make_node("Hardmax", ["x"], ["y"], axis=-1)],
        [_vi("x", [2, 5])],
        [_vi("y", [2, 5])],
    )
    g = tonnx.load(m)
    (nid,) = g.opaque_nodes()
    p = g.opaque_payload(nid)
    x = _x((2, 5), dtype=np.float64)
    out = p.evaluate([x])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, (x == x.max(axis=1, keepdims=True)).astype(np.float64))
    out32 = p.evaluate([x.astype(np.float32)])
    assert out32.dtype == np.float32


# ------------------------------------------------------------------ the writer
def test_writer_api() -> None:
    w = tonnx.Writer(17, {"taken"})
    a = w.fresh("x")
    assert a.startswith("tensat_x_") and a != w.fresh("x")
    c1 = w.const(np.array([1, 2], np.int64), "shape")
    assert w.const(np.array([1, 2], np.int64)) == c1  # shared
    assert w.initializers[c1].data_type == I64
    w.emit("Relu", ["in"], "r")
    w.alias("r2", "r")
    assert w.resolve("r2") == "r"
    with pytest.raises(tonnx.OnnxError):
        w.emit("Relu", ["in"], "r")
    w.set_pair("s", ("p0", "p1"))
    assert w.pair("s") == ("p0", "p1")
    assert w.elem_type("bfloat16") == TensorProto.BFLOAT16 and w.opset == 17


def test_every_language_operator_with_an_onnx_form_is_reached_through_the_registry() -> None:
    # No per-operator code in the front end: it never names a language operator.
    import inspect

    from tensat_py.frontends.onnx import exporter, importer

    src = inspect.getsource(exporter) + inspect.getsource(importer)
    for name, d in ops.all_ops().items():
        if d.to_onnx is not None and name not in ("input", "weight", "opaque"):
            assert f'"{name}"' not in src, name


def test_a_value_computed_twice_exports_once_and_runs():
    # Two identical AveragePool nodes on one input: one ONNX node stands for two graph
    # nodes; the export used to lose one of their names (KeyError on NasNet-A).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    pool = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]}
    nodes = [
        helper.make_node("AveragePool", ["x"], ["a"], name="p1", **pool),
        helper.make_node("AveragePool", ["x"], ["b"], name="p2", **pool),
        helper.make_node("Relu", ["b"], ["c"], name="r"),
        helper.make_node("Add", ["a", "c"], ["y"], name="s"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "twice", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    again = tonnx.to_model(tonnx.load(model))
    onnx.checker.check_model(again)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)}
    want = ort_exec.session(model).run(None, feeds)[0]
    got = ort_exec.session(again).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert len(again.graph.node) <= len(model.graph.node)


def test_an_exported_gelu_is_optimised_into_one_gelu_that_onnxruntime_fuses(tmp_path: Path):
    # What exporters write before opset 20: x * (1 + erf(x / 1.4142135)) * 0.5.
    c = [
        numpy_helper.from_array(np.asarray(v, np.float32), n)
        for n, v in (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5))
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Div", ["h", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["h", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    src = _model(
        nodes, [_vi("x", [4, 16])], [_vi("y", [4, 8])], [_w("w", [16, 8], 1), *c], opset=11
    )
    g = tonnx.load(src)
    res = tensat_py.optimize(g, extractor="greedy-dag", verify=True, min_gain=0.0)
    assert res.extraction_status not in tensat_py.pipeline.FALLBACKS, res.message
    ops_after = Counter(n.op for n in res.graph.nodes)
    assert ops_after["gelu"] == 1 and ops_after["erf"] == 0 and ops_after["div"] == 0
    out = tmp_path / "y.onnx"
    tensat_py.save(res.graph, str(out), source=g)
    saved = onnx.load(str(out))
    # Written back as the same five nodes (no Gelu before opset 20) ...
    assert _ops(saved) == Counter({"MatMul": 1, "Div": 1, "Erf": 1, "Add": 1, "Mul": 2})
    _same(src, saved, {"x": _x((4, 16))})
    # ... which onnxruntime fuses into one Gelu kernel.
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "fused.onnx")
    ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
    assert "Gelu" in _ops(onnx.load(so.optimized_model_filepath))


def _optimised_into_one_fast_gelu(src: onnx.ModelProto, feeds) -> onnx.ModelProto:
    """``src`` (one tanh GELU) optimised: one ``gelu_tanh`` left, saved, computing what
    ``src`` computes and fused by onnxruntime into one ``FastGelu``; the saved model."""
    from ort_helpers import optimised_ops

    g = tonnx.load(src)
    res = tensat_py.optimize(g, extractor="greedy-dag", verify=True, min_gain=0.0)
    assert res.extraction_status not in tensat_py.pipeline.FALLBACKS, res.message
    live = res.graph.live()
    ops_after = Counter(n.op for i, n in enumerate(res.graph.nodes) if live[i])
    assert ops_after["gelu_tanh"] == 1 and ops_after["tanh"] == 0, ops_after
    saved = tonnx.to_model(res.graph, source=g)
    _same(src, saved, feeds)
    fused = optimised_ops(saved)
    assert fused["FastGelu"] == 1 and "Tanh" not in fused, fused
    return saved


def test_a_jax_tanh_gelu_is_optimised_into_one_that_onnxruntime_fuses():
    # jax2tf's GELU (approximate=True), constants of shape [1, 1, 1] as its exporter folds
    # them: x * (0.5 * (1 + tanh(0.79788 * (x + x * (x * (0.044715 * x)))))).
    c = [
        numpy_helper.from_array(np.full((1, 1, 1), v, np.float32), n)
        for n, v in (("c", 0.044715), ("k", math.sqrt(2 / math.pi)), ("one", 1.0), ("half", 0.5))
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Mul", ["c", "h"], ["a"]),
        helper.make_node("Mul", ["h", "a"], ["b"]),
        helper.make_node("Mul", ["h", "b"], ["cube"]),
        helper.make_node("Add", ["h", "cube"], ["s"]),
        helper.make_node("Mul", ["k", "s"], ["arg"]),
        helper.make_node("Tanh", ["arg"], ["t"]),
        helper.make_node("Add", ["one", "t"], ["u"]),
        helper.make_node("Mul", ["half", "u"], ["v"]),
        helper.make_node("Mul", ["h", "v"], ["gelu"]),
        helper.make_node("Relu", ["gelu"], ["y"]),  # FastGelu is not fused at an output
    ]
    inits = [_w("w", [16, 8], 1), *c]
    src = _model(nodes, [_vi("x", [2, 4, 16])], [_vi("y", [2, 4, 8])], inits, opset=15)
    saved = _optimised_into_one_fast_gelu(src, {"x": _x((2, 4, 16))})
    assert saved.opset_import[0].version == 15


@pytest.mark.parametrize("form", ["pow", "first"])
def test_the_tanh_gelu_onnxruntime_fuses_is_recognised_and_written_back(form):
    # PyTorch's tanh GELU (x^3 as Pow; GPT-2's gelu_new) and FastGeluFusion's first form,
    # which the exporter writes for gelu_tanh before opset 20: both read back as gelu_tanh.
    k, c3 = math.sqrt(2 / math.pi), 0.044715
    c = [
        numpy_helper.from_array(np.asarray(v, np.float32), n)
        for n, v in (("c", c3), ("k", k), ("one", 1.0), ("half", 0.5), ("three", 3.0))
    ]
    if form == "pow":
        arg = [
            helper.make_node("Pow", ["h", "three"], ["p"]),
            helper.make_node("Mul", ["p", "c"], ["m1"]),
            helper.make_node("Add", ["h", "m1"], ["a1"]),
            helper.make_node("Mul", ["a1", "k"], ["arg"]),
        ]
    else:
        arg = [
            helper.make_node("Mul", ["h", "c"], ["m1"]),
            helper.make_node("Mul", ["m1", "h"], ["m2"]),
            helper.make_node("Add", ["m2", "one"], ["a1"]),
            helper.make_node("Mul", ["h", "k"], ["m4"]),
            helper.make_node("Mul", ["m4", "a1"], ["arg"]),
        ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        *arg,
        helper.make_node("Tanh", ["arg"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["a2"]),
        helper.make_node("Mul", ["h", "half"], ["hh"]),
        helper.make_node("Mul", ["hh", "a2"], ["gelu"]),
        helper.make_node("Relu", ["gelu"], ["y"]),
    ]
    src = _model(nodes, [_vi("x", [2, 16])], [_vi("y", [2, 8])], [_w("w", [16, 8], 1), *c])
    _optimised_into_one_fast_gelu(src, {"x": _x((2, 16))})


def test_an_exported_layer_norm_is_optimised_into_one_that_onnxruntime_fuses(tmp_path: Path):
    # What exporters write before opset 17, over the last axis of a [2, 16, 32] tensor.
    c = [
        numpy_helper.from_array(np.asarray(v, np.float32), n)
        for n, v in (("two", 2.0), ("eps", 1e-5))
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("ReduceMean", ["h"], ["m"], axes=[-1]),
        helper.make_node("Sub", ["h", "m"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["s"]),
        helper.make_node("Div", ["d", "s"], ["n"]),
        helper.make_node("Mul", ["n", "g"], ["ng"]),
        helper.make_node("Add", ["ng", "b"], ["y"]),
    ]
    inits = [_w("w", [32, 32], 1), _w("g", [32], 2), _w("b", [32], 3), *c]
    src = _model(nodes, [_vi("x", [2, 16, 32])], [_vi("y", [2, 16, 32])], inits, opset=11)
    g = tonnx.load(src)
    res = tensat_py.optimize(g, extractor="greedy-dag", verify=True, min_gain=0.0)
    assert res.extraction_status not in tensat_py.pipeline.FALLBACKS, res.message
    ops_after = Counter(n.op for n in res.graph.nodes)
    assert ops_after["layer_norm"] == 1 and ops_after["sqrt"] == ops_after["pow"] == 0
    out = tmp_path / "y.onnx"
    tensat_py.save(res.graph, str(out), source=g)
    _same(src, onnx.load(str(out)), {"x": _x((2, 16, 32))})
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "fused.onnx")
    ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
    assert "LayerNormalization" in _ops(onnx.load(so.optimized_model_filepath))
