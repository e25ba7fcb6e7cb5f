"""Every operator of the language has an HLO form (issue 41, item 1).

Each operator (the TASO and tensor dialects; the hlo dialect's own are covered by
``tests/test_hlo_roundtrip.py``) is exported in one small graph per parameter variant,
compiled and run by XLA on CPU (:func:`tensat_py.runtime.xla_exec.run_text`) and
compared with the graph's NumPy evaluation (:func:`tensat_py.runtime.numpy_exec.run`) on
the same values, twice: with its weights written as literals (their values) and as entry
parameters (no values). The zoo models' input programs, an ONNX model with its
initializers and a TASO ``.model`` graph go the same way.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensat_py
from tensat_py import models, ops
from tensat_py.builder import GraphBuilder
from tensat_py.frontends.hlo import (
    LITERAL_LIMIT,
    HloExportError,
    dumps,
    entry_leaves,
    loads,
    random_args,
)
from tensat_py.graph import Graph
from tensat_py.runtime import xla_exec
from tensat_py.runtime.numpy_exec import random_feeds, run

FIXTURES = Path(__file__).parent / "fixtures"

#: Operators some test of this file exported (checked against the registry at the end).
EXERCISED: set[str] = set()


def _rel(got: Any, want: Any) -> float:
    a, b = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype == bool or not a.size:
        return float(np.any(a != b))
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & (a == b)
    d = np.where(both_nan | same_inf, 0.0, np.abs(a - b))
    scale = max(float(np.max(np.abs(np.where(np.isfinite(b), b, 0.0)))), 1.0)
    return float(np.max(d)) / scale


def check(
    g: Graph,
    feeds: dict[str, np.ndarray] | None = None,
    *,
    tol: float = 2e-6,
    modes: tuple[str, ...] = ("literal", "parameter"),
) -> str:
    """Export ``g``, run it on XLA and compare with NumPy; returns the HLO text of the
    last mode. ``literal``: the weights' values are given (literals); ``parameter``: not
    (entry parameters, fed the same values)."""
    values = random_feeds(g)
    values.update(feeds or {})
    want = run(g, values)
    live = g.live()
    EXERCISED.update(n.op for i, n in enumerate(g.nodes) if live[i])
    text = ""
    for mode in modes:
        weights = {g.nodes[i].name: values[g.nodes[i].name] for i in g.weights()}
        kw: dict[str, Any] = (
            {"weights": weights, "literal_limit": None} if mode == "literal" else {"weights": {}}
        )
        text = dumps(g, **kw)
        names = entry_leaves(g, **kw)
        if mode == "literal":
            assert names == [g.nodes[i].name for i in g.inputs()], names
        got = xla_exec.run_text(text, [values[n] for n in names])
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert np.asarray(a).dtype == np.asarray(b).dtype or np.asarray(b).dtype.kind == "f"
            err = _rel(a, b)
            assert err <= tol, f"{mode}: max rel error {err:.3g} > {tol}\n{text}"
    return text


def unary(op: str, params: dict[str, Any] | None = None, shape=(2, 3, 4), dtype="float32"):
    g = Graph()
    x = g.add_input("x", shape, dtype)
    g.outputs = [g.add_node(op, params or {}, [x])]
    return g


# ============================================================================ TASO
CONV_CASES = [
    # (x shape, w shape, strides, pad, act)
    ((1, 3, 7, 9), (4, 3, 3, 3), (1, 1), 0, 0),
    ((1, 3, 7, 9), (4, 3, 3, 3), (2, 2), 0, 2),
    ((2, 3, 8, 8), (4, 3, 3, 3), (2, 2), 0, 1),
    ((1, 3, 7, 9), (4, 3, 3, 3), (1, 1), 1, 3),
    ((1, 3, 7, 9), (4, 3, 3, 3), (2, 1), 1, 0),
    ((1, 4, 9, 6), (6, 2, 3, 3), (1, 1), 0, 2),  # groups 2
    ((1, 4, 9, 6), (8, 1, 3, 3), (2, 2), 0, 0),  # depthwise (groups 4)
    ((1, 4, 9, 6), (8, 1, 5, 3), (1, 2), 1, 3),  # depthwise, VALID, 5x3
    ((1, 3, 7, 9), (5, 3, 1, 1), (1, 1), 0, 0),  # 1x1
    ((1, 3, 7, 9), (5, 3, 1, 1), (2, 2), 1, 2),  # 1x1 strided VALID
    ((1, 3, 6, 6), (4, 3, 4, 2), (3, 3), 0, 0),  # even kernel, SAME pads split unevenly
    ((1, 3, 5, 5), (2, 3, 5, 5), (1, 1), 1, 0),  # VALID to 1x1
]


@pytest.mark.parametrize(("xs", "ws", "stride", "pad", "act"), CONV_CASES)
def test_conv2d(xs, ws, stride, pad, act) -> None:
    b = GraphBuilder()
    y = b.conv2d(b.input(xs, "x"), b.weight(ws, "w"), stride=stride, padding=pad, act=act)
    text = check(b.finish(y), tol=5e-6)
    assert "dim_labels=bf01_oi01->bf01" in text
    assert ("feature_group_count" in text) == (xs[1] != ws[1])


POOL_CASES = [
    # (x shape, kernel, stride, pad, act)
    ((1, 3, 7, 9), (3, 3), (2, 2), 0, 0),
    ((1, 3, 8, 8), (2, 2), (2, 2), 1, 0),
    ((2, 2, 7, 5), (3, 1), (1, 1), 0, 2),
    ((1, 2, 6, 7), (3, 3), (1, 1), 0, 1),
    ((1, 2, 6, 7), (3, 2), (2, 3), 1, 3),
    ((1, 2, 6, 6), (4, 4), (3, 3), 0, 0),
]


@pytest.mark.parametrize("kind", ["poolmax", "poolavg"])
@pytest.mark.parametrize(("xs", "k", "s", "pad", "act"), POOL_CASES)
def test_pool(kind, xs, k, s, pad, act) -> None:
    b = GraphBuilder()
    y = getattr(b, kind)(b.input(xs, "x"), k, s, padding=pad, act=act)
    assert "reduce-window" in check(b.finish(y))


@pytest.mark.parametrize("op", ["ewadd", "ewmul"])
def test_taso_binary(op) -> None:
    g = Graph()
    x, w = g.add_input("x", (2, 3)), g.add_weight("w", (2, 3))
    g.outputs = [g.add_node(op, {}, [x, w])]
    check(g)


@pytest.mark.parametrize("op", ["relu", "tanh", "sigmoid", "dropout"])
def test_taso_unary(op) -> None:
    check(unary(op))


@pytest.mark.parametrize("act", [0, 1, 2, 3])
@pytest.mark.parametrize(("a", "b"), [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5))])
def test_matmul(a, b, act) -> None:
    g = Graph()
    x, w = g.add_input("x", a), g.add_weight("w", b)
    g.outputs = [g.add_node("matmul", {"act": act}, [x, w])]
    check(g)


def test_transpose_and_reshape() -> None:
    b = GraphBuilder()
    x = b.input((2, 3, 4), "x")
    y = b.reshape(b.transpose(x, (2, 0, 1)), (4, 6))
    check(b.finish(y))


@pytest.mark.parametrize(
    ("small", "big"), [((4, 3, 1, 1), (4, 3, 3, 3)), ((2, 3, 3, 1), (2, 3, 5, 5))]
)
def test_enlarge(small, big) -> None:
    g = Graph()
    w, r = g.add_weight("w", small), g.add_weight("r", big)
    g.outputs = [g.add_node("enlarge", {}, [w, r])]
    text = check(g)
    assert "pad(" in text


@pytest.mark.parametrize(
    ("shape", "count"), [((4, 2, 3, 3), 1), ((4, 2, 3, 3), 2), ((8, 1, 1, 1), 4)]
)
def test_merge(shape, count) -> None:
    g = Graph()
    g.outputs = [g.add_node("merge", {"count": count}, [g.add_weight("w", shape)])]
    check(g)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7])
def test_concat_of_any_arity(n) -> None:
    b = GraphBuilder()
    xs = [b.input((2, i + 1, 3), f"x{i}") for i in range(n)]
    check(b.finish(b.concat(1, xs)))


@pytest.mark.parametrize("axis", [0, 1])
def test_split(axis) -> None:
    b = GraphBuilder()
    x = b.input((2, 3, 4), "x")
    y = b.input((3, 3, 4) if axis == 0 else (2, 5, 4), "y")
    c = b.concat(axis, [x, y])
    p, q = b.split(c, axis)
    g = b.finish([b.relu(q), b.tanh(p)])
    check(g)
    EXERCISED.update({"split", "split_0", "split_1"})


def test_batchnorm() -> None:
    g = Graph()
    x = g.add_input("x", (2, 3, 4, 5))
    ps = [g.add_weight(n, (3,)) for n in ("scale", "bias", "mean", "var")]
    g.outputs = [g.add_node("batchnorm", {}, [x, *ps])]
    check(g)


# ============================================================================ tensor
BINARY = ["add", "sub", "mul", "div", "pow", "max", "min"]
COMPARE = ["equal", "less", "less_equal", "greater", "greater_equal"]


@pytest.mark.parametrize("op", BINARY + COMPARE)
@pytest.mark.parametrize(("sa", "sb"), [((2, 3), (2, 3)), ((2, 1, 4), (3, 1)), ((), (2, 2))])
def test_tensor_binary(op, sa, sb) -> None:
    g = Graph()
    a, b = g.add_input("a", sa), g.add_input("b", sb)
    g.outputs = [g.add_node(op, {}, [a, b])]
    feeds = {"a": np.abs(random_feeds(g)["a"]) + 0.5} if op == "pow" else None
    check(g, feeds)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["add", "mul", "max", "less"])
def test_tensor_binary_on_integers(op, dtype) -> None:
    g = Graph()
    a, b = g.add_input("a", (2, 3), dtype), g.add_input("b", (3,), dtype)
    g.outputs = [g.add_node(op, {}, [a, b])]
    check(g)


def test_select() -> None:
    g = Graph()
    c, a, b = g.add_input("c", (2, 3), "bool"), g.add_input("a", (2, 3)), g.add_input("b", (3,))
    g.outputs = [g.add_node("select", {}, [c, a, b])]
    check(g)


POSITIVE = {"log", "sqrt", "rsqrt"}


@pytest.mark.parametrize(
    "op",
    [
        "neg",
        "abs",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "erf",
        "hard_swish",
        "softplus",
        "gelu",
        "gelu_tanh",
    ],
)
def test_tensor_unary(op) -> None:
    g = unary(op)
    x = random_feeds(g)["x"] * 4
    check(g, {"x": np.abs(x) + 0.1 if op in POSITIVE else x})


@pytest.mark.parametrize(
    ("lo", "hi", "dtype"),
    [
        (-0.5, 0.5, "float32"),
        (-math.inf, 0.2, "float32"),
        (0.0, math.inf, "float32"),
        (0.5, 2.5, "int32"),
    ],
)
def test_clip(lo, hi, dtype) -> None:
    check(unary("clip", {"lo": lo, "hi": hi}, dtype=dtype))


@pytest.mark.parametrize(("alpha", "beta"), [(0.2, 0.5), (1 / 6, 0.5), (-0.3, 0.1)])
def test_hard_sigmoid(alpha, beta) -> None:
    g = unary("hard_sigmoid", {"alpha": alpha, "beta": beta})
    check(g, {"x": random_feeds(g)["x"] * 5})


@pytest.mark.parametrize("alpha", [0.01, 0.2, -1.5])
def test_leaky_relu(alpha) -> None:
    check(unary("leaky_relu", {"alpha": alpha}))


@pytest.mark.parametrize(
    "op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]
)
@pytest.mark.parametrize(("axes", "keep"), [((1,), 0), ((0, 2), 1), ((0, 1, 2), 0)])
def test_reductions(op, axes, keep) -> None:
    check(unary(op, {"axes": axes, "keepdims": keep}))


@pytest.mark.parametrize("axis", [0, 2])
def test_softmax(axis) -> None:
    check(unary("softmax", {"axis": axis}))


@pytest.mark.parametrize("axis", [1, 2])
def test_layer_norm(axis) -> None:
    g = Graph()
    x = g.add_input("x", (2, 3, 8))
    tail = (2, 3, 8)[axis:]
    s, b = g.add_weight("scale", tail), g.add_weight("bias", tail)
    g.outputs = [g.add_node("layer_norm", {"axis": axis, "epsilon": 1e-5}, [x, s, b])]
    check(g, tol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3, 7)])
def test_global_avg_pool(shape) -> None:
    check(unary("global_avg_pool", shape=shape))


def test_broadcast_to() -> None:
    check(unary("broadcast_to", {"shape": (3, 2, 3, 4)}, shape=(2, 1, 4)))


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ((0,), (2,), (1,), (1,)),
        ((1, 0), (3, 4), (1, 2), (1, 2)),
        ((-1,), (-5,), (2,), (-1,)),  # reversed
        ((2, 3), (-9, 0), (1, 2), (-2, -2)),
        ((-3,), (100,), (2,), (2,)),
    ],
)
def test_slice(starts, ends, axes, steps) -> None:
    p = {"starts": starts, "ends": ends, "axes": axes, "steps": steps}
    check(unary("slice", p, shape=(2, 3, 5)))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
@pytest.mark.parametrize("pads", [(0, 1, 2, 0, 2, 1), (1, 0, 0, 1, 0, 0)])
def test_pad(mode, pads) -> None:
    check(unary("pad", {"pads": pads, "mode": mode, "value": -1.5}, shape=(2, 3, 4)))


def test_pad_of_integers_truncates_the_value() -> None:
    p = {"pads": (1, 1, 0, 2), "mode": "constant", "value": 2.75}
    check(unary("pad", p, shape=(2, 3), dtype="int32"))


def test_a_form_that_cannot_write_its_parameters_is_one_line_naming_op_and_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    def refuses(w: Any, ctx: Any, ins: Any) -> str:
        raise ValueError("pad mode `wrap` has no HLO form")

    monkeypatch.setitem(ops._REGISTRY, "neg", replace(ops.get("neg"), to_hlo=refuses))
    g = unary("neg")
    with pytest.raises(HloExportError) as e:
        dumps(g)
    msg = str(e.value)
    assert msg.startswith("operator `neg` (node `neg_1`)") and "wrap" in msg and "\n" not in msg


@pytest.mark.parametrize(("axis", "indices"), [(0, (1, 0, 1)), (1, (2, -1, 0, 0)), (2, (-4,))])
def test_gather(axis, indices) -> None:
    text = check(unary("gather", {"axis": axis, "indices": indices}, shape=(2, 3, 4)))
    assert "gather(" in text


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("sizes", [(1, 2, 8, 12), (1, 2, 3, 2), (2, 2, 5, 4)])
def test_resize(mode, sizes) -> None:
    check(unary("resize", {"sizes": sizes, "mode": mode}, shape=(1, 2, 4, 6)), tol=5e-6)


@pytest.mark.parametrize(
    ("src", "dst"), [("float32", "int32"), ("int32", "float32"), ("float32", "bool")]
)
def test_cast(src, dst) -> None:
    g = unary("cast", {"dtype": dst}, dtype=src)
    check(g, {"x": random_feeds(g)["x"] * 3} if src == "float32" else None)


def test_scalar() -> None:
    g = Graph()
    x = g.add_input("x", (2, 3))
    s = g.add_node("scalar", {"value": 0.1, "dtype": "float32"}, [])
    g.outputs = [g.add_node("mul", {}, [x, s])]
    check(g)


# ============================================================================ weights
def test_weights_are_literals_that_round_trip_float32_exactly() -> None:
    g = Graph()
    x = g.add_input("x", (2, 2, 3))
    w = g.add_weight("w", (2, 2, 3))
    g.outputs = [w, g.add_node("neg", {}, [x])]
    value = np.array(
        [[[0.1, -1e-38, 3.4028235e38], [np.pi, 1 / 3, -0.0]], [[1e-45, 7.0, 2.5e-8], [1, 2, 3]]],
        np.float32,
    )
    text = dumps(g, weights={"w": value})
    assert "{{{0.10000000149011612, " in text and "{...}" not in text
    out, _ = xla_exec.run_text(text, [np.zeros((2, 2, 3), np.float32)])
    assert np.array_equal(out.view(np.uint32), value.view(np.uint32))


def test_large_weights_and_weights_without_values_become_parameters() -> None:
    n = LITERAL_LIMIT + 1
    g = Graph()
    x = g.add_input("x", (n,))
    big, small, novalue = (
        g.add_weight("big", (n,)),
        g.add_weight("small", (4,)),
        g.add_weight("b/v", (n,)),
    )
    y = g.add_node("add", {}, [g.add_node("add", {}, [x, big]), novalue])
    g.outputs = [y, g.add_node("neg", {}, [small])]
    rng = np.random.default_rng(0)
    vals = {"big": rng.standard_normal(n).astype(np.float32), "small": np.float32([1, 2, 3, 4])}
    text = dumps(g, weights=vals)
    assert entry_leaves(g, weights=vals) == ["x", "b/v", "big"]  # weights sorted by name
    assert "parameter(2)" in text and "parameter(3)" not in text
    args = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    got = xla_exec.run_text(text, args)
    np.testing.assert_array_equal(got[0], args[0] + args[2] + args[1])
    np.testing.assert_array_equal(got[1], -vals["small"])
    # the verifier's arguments: one per parameter, weights drawn as random_feeds does
    assert [a.shape for a in random_args(g, weights=vals)] == [(n,)] * 3
    assert [a.shape for a in random_args(g)] == [(n,)] * 3 + [(4,)]  # no values: all


def test_a_zoo_model_s_weights_export_as_parameters_and_verify_on_xla() -> None:
    g = models.get("nasrnn")
    text = dumps(g)
    assert "{...}" not in text and "s0_wx1 = f32[512,512]" in text
    report = tensat_py.verify(g, g, runner="xla")
    assert report.passed, report


def test_xla_verification_matches_weight_parameters_by_name() -> None:
    def build(with_dead_term: bool, scale: float) -> Graph:
        g = Graph()
        x = g.add_input("x", (3, 4))
        if with_dead_term:  # x + w1 * 0: the candidate drops w1
            zero = g.add_node("scalar", {"value": 0.0, "dtype": "float32"}, [])
            x = g.add_node(
                "add", {}, [x, g.add_node("mul", {}, [g.add_weight("w1", (3, 4)), zero])]
            )
        w2 = g.add_weight("w2", (4, 2))
        s = g.add_node("scalar", {"value": scale, "dtype": "float32"}, [])
        g.outputs = [g.add_node("mul", {}, [g.add_node("matmul", {"act": 0}, [x, w2]), s])]
        return g

    original = build(True, 1.0)
    assert entry_leaves(original) == ["x", "w1", "w2"]
    assert entry_leaves(build(False, 1.0)) == ["x", "w2"]
    assert tensat_py.verify(original, build(False, 1.0), runner="xla").passed
    assert not tensat_py.verify(original, build(False, 1.01), runner="xla").passed


# ============================================================================ programs
@pytest.mark.parametrize("name", sorted(models.ZOO))
def test_zoo_model_exports_and_runs_on_xla_as_numpy_evaluates_it(name) -> None:
    g = models.get(name)
    feeds = random_feeds(g)
    got = xla_exec.run_text(dumps(g), [feeds[n] for n in entry_leaves(g)])
    want = run(g, feeds)
    assert max(_rel(a, b) for a, b in zip(got, want, strict=True)) <= 2e-5
    live = g.live()
    EXERCISED.update(n.op for i, n in enumerate(g.nodes) if live[i])


def test_tensat_optimize_writes_hlo_for_a_zoo_model(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from tensat_py.cli import main

    out = tmp_path / "n.hlo"
    res = CliRunner().invoke(main, ["optimize", "squeezenet", "-o", str(out), "--time-limit", "20"])
    assert res.exit_code == 0, res.output
    g = tensat_py.load(str(out))
    assert g.op_counts().get("convolution", 0) > 0


def test_a_taso_model_graph_saves_as_hlo(tmp_path: Path) -> None:
    g = tensat_py.load(str(FIXTURES / "taso" / "mini_inception.model"))
    path = tmp_path / "m.hlo"
    tensat_py.save(g, str(path))
    feeds = random_feeds(g)
    got = xla_exec.run_text(path.read_text(), [feeds[n] for n in entry_leaves(g)])
    assert max(_rel(a, b) for a, b in zip(got, run(g, feeds), strict=True)) <= 2e-5


def test_an_onnx_model_saves_as_hlo_with_its_initializers(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    conv = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    fc = rng.standard_normal((8, 600)).astype(np.float32)  # 4800 elements: a parameter
    bn = [np.abs(rng.standard_normal(8)).astype(np.float32) + 0.5 for _ in range(4)]
    inits = [numpy_helper.from_array(conv, "conv_w"), numpy_helper.from_array(fc, "fc_w")]
    inits += [numpy_helper.from_array(v, n) for v, n in zip(bn, ("s", "b", "m", "v"), strict=True)]
    nodes = [
        helper.make_node("Conv", ["x", "conv_w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "fc_w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 600])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    g = tensat_py.load(str(src))
    path = tmp_path / "m.hlo"
    tensat_py.save(g, str(path))
    text = path.read_text()
    leaves = entry_leaves(g)
    assert len(leaves) == 2 and leaves[0] == "x"  # the 4800-element weight; the rest literals
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    values = g.meta["onnx"].weight_values(g)
    (got,) = xla_exec.run_text(text, [x, values[leaves[1]]])
    (want,) = run(g, {"x": x, **values})
    assert _rel(got, want) <= 2e-6


def test_an_hlo_source_keeps_its_literals() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  c = f32[2] constant({1.5, -2})
  ROOT a = f32[2] add(x, c)
}
"""
    g = loads(text)
    g.outputs = [g.add_node("neg", {}, [g.outputs[0]])]  # not the source program any more
    out = dumps(g)
    assert "constant({1.5, -2})" in out
    (got,) = xla_exec.run_text(out, [np.float32([1, 1])])
    np.testing.assert_array_equal(got, [-2.5, 1])


# ============================================================================ import
def test_hlo_import_goes_through_a_per_opcode_registry() -> None:
    from tensat_py.frontends.hlo.translate import HLO_IMPORTERS, hlo_importer

    for op in ("add", "erf", "compare", "dot", "convolution", "reduce-window", "pad", "slice"):
        assert op in HLO_IMPORTERS, op
    assert "while" not in HLO_IMPORTERS  # opaque
    with pytest.raises(ValueError, match="`add` has two importers"):
        hlo_importer("add")(lambda *a: 0)


# ============================================================================ coverage
WRITTEN_BY_THE_WRITER = {"input", "weight", "opaque", "noop"}


def test_every_taso_and_tensor_operator_has_an_hlo_form_declared_with_it() -> None:
    missing = sorted(
        n
        for n, d in ops.all_ops().items()
        if d.dialect in ("taso", "tensor", "hlo") and d.to_hlo is None
    )
    assert missing == sorted(WRITTEN_BY_THE_WRITER)
    assert not hasattr(ops, "attach_hlo")


def test_this_file_exercised_every_taso_and_tensor_operator() -> None:
    # runs last in file order; the zoo and the small graphs above export them all
    want = {
        n
        for n, d in ops.all_ops().items()
        if d.dialect in ("taso", "tensor") and n not in WRITTEN_BY_THE_WRITER
    }
    if len(EXERCISED) < 10:
        pytest.skip("run with the whole file")
    assert sorted(want - EXERCISED) == []
