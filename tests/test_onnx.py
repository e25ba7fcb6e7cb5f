"""ONNX front end: load -> optimize -> save round trips, checked by onnxruntime.

Every model is built here with ``onnx.helper``; nothing is downloaded.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import tensat_py
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper
from tensat_py.frontends import onnx as tonnx
from tensat_py.runtime import ort_exec

F = TensorProto.FLOAT


def _init(name: str, shape: tuple[int, ...], seed: int, scale: float = 0.1) -> TensorProto:
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * scale
    return numpy_helper.from_array(a, name)


def _model(nodes, inputs, outputs, inits, opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "test", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _vi(name: str, shape, elem: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort_exec.session(model).run(None, feeds)


def _assert_same(a: onnx.ModelProto, b: onnx.ModelProto, feeds, rtol: float = 1e-4) -> None:
    ya, yb = _run(a, feeds), _run(b, feeds)
    assert len(ya) == len(yb)
    for p, q in zip(ya, yb, strict=True):
        assert p.shape == q.shape
        scale = max(float(np.abs(p).max()), 1e-30)
        assert float(np.abs(p - q).max()) <= rtol * scale


def _ops(model: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


def _round_trip(model, tmp_path: Path, **opt) -> tuple[tensat_py.OptimizeResult, onnx.ModelProto]:
    graph = tonnx.load(model)
    result = tensat_py.optimize(graph, **opt)
    assert result.verify is not None and result.verify.passed, result.verify
    out = tmp_path / "opt.onnx"
    tonnx.save(result.graph, out)
    saved = onnx.load(str(out))
    onnx.checker.check_model(saved, full_check=True)
    return result, saved


def test_two_matmuls_sharing_an_input_merge(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
    ]
    m = _model(
        nodes,
        [_vi("x", [64, 1024])],
        [_vi("q", [64, 1024]), _vi("k", [64, 1024])],
        [_init("wq", (1024, 1024), 1), _init("wk", (1024, 1024), 2)],
    )
    result, saved = _round_trip(m, tmp_path)
    assert result.cost_after < result.cost_before
    ops = _ops(saved)
    assert ops["MatMul"] == 1, ops  # one matmul on the concatenated weights
    # The original initializers are kept by name; the concatenated weight is new.
    names = {t.name for t in saved.graph.initializer}
    assert any(n.startswith("tensat_const_") for n in names)
    assert [o.name for o in saved.graph.output] == ["q", "k"]
    x = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    _assert_same(m, saved, {"x": x})


def test_convolutions_sharing_an_input(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
    ]
    m = _model(
        nodes,
        [_vi("x", [1, 32, 28, 28])],
        [_vi("a", [1, 64, 28, 28]), _vi("b", [1, 64, 28, 28])],
        [_init("w1", (64, 32, 3, 3), 3), _init("w2", (64, 32, 3, 3), 4)],
    )
    graph = tonnx.load(m)
    assert graph.op_counts()["conv2d"] == 2 and "opaque" not in graph.op_counts()
    result, saved = _round_trip(m, tmp_path)
    assert result.cost_after < result.cost_before
    assert _ops(saved)["Conv"] == 1, _ops(saved)
    x = np.random.default_rng(1).standard_normal((1, 32, 28, 28)).astype(np.float32)
    _assert_same(m, saved, {"x": x})


# Softmax and LayerNormalization are modelled by the tensor dialect now
# (test_modelled_softmax_and_layer_norm); Hardmax and LpNormalization have no importer.
@pytest.mark.parametrize("unmodelled", ["Hardmax", "LpNormalization"])
def test_unmodelled_operator_between_modelled_ones(tmp_path: Path, unmodelled: str) -> None:
    extra: list[str] = []
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"]),
        helper.make_node("MatMul", ["x", "w2"], ["h2"]),
        helper.make_node(unmodelled, ["h1", *extra], ["s"], axis=-1),
        helper.make_node("MatMul", ["s", "w3"], ["o1"]),
        helper.make_node("Tanh", ["h2"], ["o2"]),
    ]
    inits = [
        _init("w1", (256, 256), 5),
        _init("w2", (256, 256), 6),
        _init("w3", (256, 128), 7),
        _init("gamma", (256,), 8),
        _init("beta", (256,), 9),
    ]
    m = _model(nodes, [_vi("x", [32, 256])], [_vi("o1", [32, 128]), _vi("o2", [32, 256])], inits)
    graph = tonnx.load(m)
    assert tonnx.opaque_ops(graph) == {unmodelled: 1}
    assert tonnx.opaque_reasons(graph) == {
        unmodelled: {f"no importer for ONNX operator `{unmodelled}`": 1}
    }
    result, saved = _round_trip(m, tmp_path)
    assert result.verify is not None and result.verify.runner == "onnxruntime"
    assert _ops(saved)[unmodelled] == 1
    x = np.random.default_rng(2).standard_normal((32, 256)).astype(np.float32)
    _assert_same(m, saved, {"x": x})


@pytest.mark.parametrize("op", ["Softmax", "LayerNormalization"])
def test_modelled_softmax_and_layer_norm(tmp_path: Path, op: str) -> None:
    extra = ["gamma", "beta"] if op == "LayerNormalization" else []
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"]),
        helper.make_node(op, ["h1", *extra], ["s"], axis=-1),
        helper.make_node("MatMul", ["s", "w3"], ["o1"]),
    ]
    inits = [
        _init("w1", (256, 256), 5),
        _init("w3", (256, 128), 7),
        _init("gamma", (256,), 8),
        _init("beta", (256,), 9),
    ]
    m = _model(nodes, [_vi("x", [32, 256])], [_vi("o1", [32, 128])], inits)
    graph = tonnx.load(m)
    assert tonnx.opaque_ops(graph) == {}
    assert graph.op_counts()[{"Softmax": "softmax", "LayerNormalization": "layer_norm"}[op]] == 1
    result, saved = _round_trip(m, tmp_path)
    assert _ops(saved)[op] == 1
    x = np.random.default_rng(2).standard_normal((32, 256)).astype(np.float32)
    _assert_same(m, saved, {"x": x})


def _zoo_of_operators() -> onnx.ModelProto:
    """One model using every translated operator and a few opaque cases."""
    nodes = [
        helper.make_node("Conv", ["x", "wc", "bc"], ["c1"], pads=[1, 1, 1, 1]),  # bias
        helper.make_node("BatchNormalization", ["c1", "s", "b", "mu", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(
            "AveragePool", ["r"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]
        ),
        # Stride-2 3x3 with symmetric padding is not TASO's SAME: opaque.
        helper.make_node(
            "Conv", ["r", "wc2"], ["c2"], pads=[2, 2, 2, 2], strides=[2, 2], dilations=[2, 2]
        ),
        helper.make_node("Concat", ["mp", "ap", "c2"], ["cat"], axis=1),
        helper.make_node("Split", ["cat", "sizes"], ["p1", "p2", "p3"], axis=1),
        helper.make_node("Sigmoid", ["p2"], ["sg"]),
        helper.make_node("Mul", ["p1", "sg"], ["m1"]),
        helper.make_node("Add", ["m1", "p3"], ["a1"]),
        helper.make_node("Reshape", ["a1", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "wg", "bg"], ["g"], transB=1),
        helper.make_node("Dropout", ["g"], ["d"]),
        helper.make_node("Identity", ["d"], ["i"]),
        helper.make_node("Transpose", ["i"], ["t"], perm=[1, 0]),
        helper.make_node("Add", ["t", "col"], ["bc2"]),  # broadcasting: `add`
        helper.make_node("Tanh", ["bc2"], ["y"]),
    ]
    inits = [
        _init("wc", (8, 4, 3, 3), 10),
        _init("bc", (8,), 11),
        _init("s", (8,), 12, 1.0),
        _init("b", (8,), 13),
        _init("mu", (8,), 14),
        numpy_helper.from_array(np.full(8, 0.7, np.float32), "var"),
        _init("wc2", (8, 8, 3, 3), 15),
        numpy_helper.from_array(np.array([8, 8, 8], np.int64), "sizes"),
        numpy_helper.from_array(np.array([2, -1], np.int64), "shape"),
        _init("wg", (10, 512), 16),
        _init("bg", (10,), 17),
        _init("col", (10, 1), 18),
    ]
    return _model(nodes, [_vi("x", [2, 4, 16, 16])], [_vi("y", [10, 2])], inits)


def test_operator_translation_round_trip(tmp_path: Path) -> None:
    m = _zoo_of_operators()
    graph = tonnx.load(m)
    counts = graph.op_counts()
    for op in ("conv2d", "batchnorm", "poolmax", "poolavg", "concat3", "split", "reshape"):
        assert counts.get(op), (op, counts)
    # Dropout (inference: the identity) is dropped by the shape folding before import.
    for op in ("matmul", "transpose", "ewmul", "ewadd", "sigmoid", "tanh"):
        assert counts.get(op), (op, counts)
    # Conv bias, Gemm's broadcast bias and the broadcast Add are the tensor dialect's `add`;
    # the dilated conv stays opaque, with its importer's reason.
    assert counts.get("add") == 3, counts
    assert tonnx.opaque_ops(graph) == {"Conv": 1}
    (reason,) = tonnx.opaque_reasons(graph)["Conv"]
    assert "dilations" in reason
    saved = tonnx.to_model(graph)
    x = np.random.default_rng(3).standard_normal((2, 4, 16, 16)).astype(np.float32)
    _assert_same(m, saved, {"x": x})
    # The NumPy executor runs the opaque nodes with ONNX's reference evaluator, in float64.
    from tensat_py.runtime.numpy_exec import random_feeds, run

    feeds = random_feeds(graph, dtype="float64")
    assert run(graph, feeds)[0].dtype == np.float64
    result, saved = _round_trip(m, tmp_path, device="cpu")
    _assert_same(m, saved, {"x": x})


def test_verify_runs_onnx_graphs_on_both_runners() -> None:
    graph = tonnx.load(_zoo_of_operators())
    result = tensat_py.optimize(graph, verify=False, extractor="greedy")
    for runner, dtype in (("numpy", "float64"), ("onnxruntime", "float32")):
        report = tensat_py.verify(graph, result.graph, runner=runner, dtype=dtype)
        assert report.passed and report.runner == runner, report


def test_symbolic_dimensions_need_input_shapes() -> None:
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Softmax", ["h"], ["y"]),
    ]
    m = _model(nodes, [_vi("x", ["batch", 8])], [_vi("y", ["batch", 4])], [_init("w", (8, 4), 1)])
    with pytest.raises(tonnx.OnnxError, match="input_shapes"):
        tonnx.load(m)
    g = tonnx.load(m, input_shapes={"x": (3, 8)})
    assert g.output_types()[0].shape == (3, 4)
    saved = tonnx.to_model(g)
    assert [d.dim_value for d in saved.graph.input[0].type.tensor_type.shape.dim] == [3, 8]


def test_integer_inputs_and_gather_load_whole() -> None:
    nodes = [
        helper.make_node("Gather", ["emb", "ids"], ["e"]),
        helper.make_node("MatMul", ["e", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["y"]),
    ]
    m = _model(
        nodes,
        [_vi("ids", [4, 6], TensorProto.INT64)],
        [_vi("y", [4, 6, 16])],
        [_init("emb", (50, 32), 1), _init("w", (32, 16), 2)],
    )
    graph = tonnx.load(m)
    assert tonnx.opaque_ops(graph) == {"Gather": 1}
    assert graph.op_counts()["matmul"] == 1
    result = tensat_py.optimize(graph, device="cpu")
    assert result.verify is not None and result.verify.passed
    saved = tonnx.to_model(result.graph)
    assert saved.graph.input[0].type.tensor_type.elem_type == TensorProto.INT64
    ids = np.random.default_rng(0).integers(0, 50, (4, 6)).astype(np.int64)
    _assert_same(m, saved, {"ids": ids})


def test_zoo_graph_exports_with_random_weights(tmp_path: Path) -> None:
    from tensat_py.builder import GraphBuilder

    b = GraphBuilder()
    x = b.input((1, 8, 8, 8), name="x")
    y = b.conv2d(x, b.weight((8, 8, 3, 3)), act="relu")
    z = b.poolavg(y, 3, 2, "same", act="tanh")
    graph = b.finish([z])
    path = tonnx.save(graph, tmp_path / "g.onnx", weights="random")
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert _ops(model) == Counter({"Conv": 1, "Relu": 1, "AveragePool": 1, "Tanh": 1})
    back = tonnx.load(model)
    report = tensat_py.verify(back, graph, runner="numpy")
    assert report.passed, report


def test_cli_optimize_writes_the_model_and_lists_opaque_operators(tmp_path: Path) -> None:
    from tensat_py.cli import main

    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("Hardmax", ["q"], ["s"]),
        helper.make_node("Add", ["s", "k"], ["y"]),
    ]
    m = _model(
        nodes,
        [_vi("x", [64, 512])],
        [_vi("y", [64, 512])],
        [_init("wq", (512, 512), 1), _init("wk", (512, 512), 2)],
    )
    src, dst = tmp_path / "m.onnx", tmp_path / "m.opt.onnx"
    onnx.save(m, str(src))
    res = CliRunner().invoke(main, ["optimize", str(src), "-o", str(dst), "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "Hardmax" in res.output
    saved = onnx.load(str(dst))
    onnx.checker.check_model(saved, full_check=True)
    x = np.random.default_rng(4).standard_normal((64, 512)).astype(np.float32)
    _assert_same(m, saved, {"x": x})
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
