"""The tensor dialect's Python side (``tensat_py.ops.tensor``), checked against onnxruntime.

Every ONNX model here is one node (or one operator's export) built with ``onnx.helper``;
nothing is downloaded. Three paths are exercised:

* importers: an ONNX node goes through the dialect's importer into a small program
  (a stand-in importer evaluates each added operator with its ``evaluate`` at once), and
  the result is compared with onnxruntime running the node itself;
* ``to_onnx``: an operator is written with a stand-in writer and the model run by
  onnxruntime, compared with ``evaluate`` (round trips, several opsets);
* costs and dtype rules directly on ``OpContext``.

None of this needs the Rust core to declare the tensor dialect; the graph-level test at
the end is skipped until it does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from tensat_py import _core
from tensat_py.graph import TensorType
from tensat_py.ops import OpContext, all_ops, get, onnx_importers
from tensat_py.ops.tensor import DTYPES, np_dtype

#: The tensor dialect as the Rust core declares it (rust/src/lang/tensor.rs).
TENSOR_OPS = tuple(n for n, d in _core.operators().items() if d["dialect"] == "tensor")

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


# ------------------------------------------------------------------------------ helpers
def _dtname(a: np.ndarray) -> str:
    for k, v in DTYPES.items():
        if v == a.dtype:
            return k
    raise AssertionError(a.dtype)


def _tt(a: np.ndarray) -> TensorType:
    return TensorType(tuple(int(d) for d in a.shape), _dtname(a))


def _rand(shape: Sequence[int], dtype: str, seed: int = 0, kind: str = "normal") -> np.ndarray:
    rng = np.random.default_rng([seed, *map(int, shape), len(dtype)])
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo, hi = (1, 6) if kind == "positive" else (0, 4) if kind == "small" else (-9, 10)
        a = rng.integers(lo, hi, size=shape)
        if kind == "nonzero":
            a = np.where(a == 0, 3, a)
        return a.astype(dt)
    if kind in ("positive", "nonzero"):
        a = rng.uniform(0.5, 2.0, shape) * (1 if kind == "positive" else rng.choice([-1, 1], shape))
    elif kind == "small":
        a = rng.uniform(-2, 2, shape)
    else:
        a = rng.standard_normal(shape) * 2
    return np.asarray(a).astype(dt)


def _elem(a: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def _model(
    nodes: list,
    feeds: dict[str, np.ndarray],
    outputs: dict[str, tuple[int, Sequence[int] | None]],
    inits: Sequence[TensorProto] = (),
    opset: int = 18,
) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info(n, _elem(a), list(a.shape)) for n, a in feeds.items()],
        [helper.make_tensor_value_info(n, e, s) for n, (e, s) in outputs.items()],
        list(inits),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime (CPU); ONNX's reference evaluator only where onnxruntime has no kernel
    for the dtype (float16/bfloat16 on some operators)."""
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        if "NOT_IMPLEMENTED" not in str(e) and "Could not find an implementation" not in str(e):
            raise
        from onnx.reference import ReferenceEvaluator

        return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]
    return sess.run(None, feeds)


def _tol(dtype: np.dtype) -> dict[str, float]:
    if dtype in (np.float16, np.dtype(ml_dtypes.bfloat16)):
        eps = 1e-3 if dtype == np.float16 else 8e-3
        return {"rtol": 2 * eps, "atol": 2 * eps}
    return {"rtol": 1e-6, "atol": 1e-6}


def _close(got: np.ndarray, want: np.ndarray) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(
            got.astype(np.float64), want.astype(np.float64), equal_nan=True, **_tol(got.dtype)
        )


def _ctx(op: str, params: dict[str, Any], args: Sequence[np.ndarray]) -> OpContext:
    """An OpContext for ``args``; the output type from evaluating once."""
    ins = [_tt(np.asarray(a)) for a in args]
    tmp = OpContext(op, params, ins, TensorType(()))
    out = np.asarray(get(op).evaluate(tmp, list(args)))
    return OpContext(op, params, ins, _tt(out))


def _eval(op: str, params: dict[str, Any], args: Sequence[np.ndarray]) -> np.ndarray:
    ctx = _ctx(op, params, args)
    out = np.asarray(get(op).evaluate(ctx, list(args)))
    assert tuple(out.shape) == ctx.output.shape
    return out


# -------------------------------------------------------------------- stand-in importer
class Unsupported(Exception):
    pass


class FakeImporter:
    """The importer API of the contract over concrete arrays: every ``add`` is evaluated
    at once with the registry's ``evaluate``, so the program can be compared with
    onnxruntime."""

    Unsupported = Unsupported

    def __init__(self, values: dict[str, np.ndarray], consts: set[str]) -> None:
        self.vals: list[np.ndarray] = []
        self.ids: dict[str, int] = {}
        self.consts = consts
        self.ops: list[tuple[str, dict[str, Any]]] = []
        self.outputs: dict[int, int] = {}
        for name, a in values.items():
            self.ids[name] = len(self.vals)
            self.vals.append(np.asarray(a))

    def attrs(self, node: onnx.NodeProto) -> dict[str, Any]:
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def input(self, node: onnx.NodeProto, i: int) -> int | None:
        if i >= len(node.input) or not node.input[i]:
            return None
        return self.ids[node.input[i]]

    def const_value(self, node: onnx.NodeProto, i: int) -> np.ndarray | None:
        if i >= len(node.input) or node.input[i] not in self.consts:
            return None
        return self.vals[self.ids[node.input[i]]]

    def type(self, node: onnx.NodeProto, i: int) -> TensorType:
        return _tt(self.vals[self.ids[node.input[i]]])

    def add(self, op: str, params: dict[str, Any], inputs: Sequence[int]) -> int:
        args = [self.vals[i] for i in inputs]
        self.ops.append((op, dict(params)))
        self.vals.append(np.asarray(_eval(op, params, args)))
        return len(self.vals) - 1

    def weight(self, array: np.ndarray, stem: str) -> int:
        self.vals.append(np.asarray(array))
        return len(self.vals) - 1

    def set_output(self, node: onnx.NodeProto, k: int, nid: int) -> None:
        self.outputs[k] = nid


def _check_import(
    op_type: str,
    inputs: Sequence[tuple[str, np.ndarray, bool]],
    attrs: dict[str, Any] | None = None,
    opset: int = 18,
    n_out: int = 1,
) -> FakeImporter:
    """Import a one-node model's node and compare the program with onnxruntime.

    ``inputs``: (name, value, constant?) per ONNX input ('' name = absent); constants
    become initializers of the onnxruntime model."""
    names = [n for n, _, _ in inputs]
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op_type, names, outs, name="n0", **(attrs or {}))
    present = [(n, a, c) for n, a, c in inputs if n]
    feeds = {n: a for n, a, c in present if not c}
    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a, c in present if c]
    imp = FakeImporter({n: a for n, a, _ in present}, {n for n, _, c in present if c})
    onnx_importers()[op_type](imp, node)
    got = imp.vals[imp.outputs[0]]
    m = _model([node], feeds, {"y0": (_elem(got), None)}, inits, opset)
    want = _run(m, feeds)[0]
    _close(got, want)
    return imp


def _c(name: str, values: Any, dtype: Any = np.int64) -> tuple[str, np.ndarray, bool]:
    return (name, np.asarray(values, dtype=dtype), True)


def _x(name: str, a: np.ndarray) -> tuple[str, np.ndarray, bool]:
    return (name, a, False)


# ------------------------------------------------------------------------ registration
def test_every_tensor_operator_is_registered_with_all_fields():
    ops = all_ops()
    for name in TENSOR_OPS:
        op = ops[name]
        assert op.dialect == "tensor"
        assert callable(op.evaluate) and callable(op.cost) and callable(op.to_onnx)
        assert op.doc.strip(), name
    assert get("scalar").launches_kernel is False
    assert {n for n, o in ops.items() if o.dialect == "tensor"} == set(TENSOR_OPS)


def test_onnx_types_name_registered_importers():
    imps = onnx_importers()
    for name in TENSOR_OPS:
        for t in get(name).onnx_types:
            assert t in imps, (name, t)


# -------------------------------------------------------------- elementwise vs onnxruntime
ARITH = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize("op_type", ARITH)
def test_binary_arithmetic_matches_onnxruntime_with_broadcasting(op_type, dtype):
    if op_type == "Pow" and dtype == "float16":
        pytest.skip("onnxruntime has no float16 Pow kernel")
    kind_a = {"Pow": "positive", "Div": "nonzero"}.get(op_type, "normal")
    kind_b = {"Pow": "small", "Div": "nonzero"}.get(op_type, "normal")
    if op_type == "Pow" and np_dtype(dtype).kind == "i":
        kind_b = "small"
    a = _rand((2, 3, 4), dtype, 1, kind_a)
    b = _rand((3, 1), dtype, 2, kind_b)
    _check_import(op_type, [_x("a", a), _x("b", b)])
    _check_import(op_type, [_x("b", b), _x("a", a)] if op_type != "Pow" else [_x("a", a)] * 2)


def test_integer_div_truncates_toward_zero_like_onnxruntime():
    a = np.array([-7, 7, -7, 7, -1, 0, 9], dtype=np.int64)
    b = np.array([2, -2, -2, 2, 3, 5, -4], dtype=np.int64)
    imp = _check_import("Div", [_x("a", a), _x("b", b)])
    np.testing.assert_array_equal(imp.vals[imp.outputs[0]], [-3, -3, 3, 3, 0, 0, -2])


def test_add_and_mul_of_equal_types_import_as_taso_ewadd_and_ewmul():
    a, b = _rand((2, 3), "float32", 1), _rand((2, 3), "float32", 2)
    assert [o for o, _ in _check_import("Add", [_x("a", a), _x("b", b)]).ops] == ["ewadd"]
    assert [o for o, _ in _check_import("Mul", [_x("a", a), _x("b", b)]).ops] == ["ewmul"]
    c = _rand((3,), "float32", 3)
    assert [o for o, _ in _check_import("Add", [_x("a", a), _x("c", c)]).ops] == ["add"]
    assert [o for o, _ in _check_import("Mul", [_x("a", a), _x("c", c)]).ops] == ["mul"]


def test_variadic_max_and_min_chain_left_to_right():
    xs = [_x(f"x{i}", _rand(s, "float32", i)) for i, s in enumerate([(2, 3), (3,), (2, 1)])]
    imp = _check_import("Max", xs)
    assert [o for o, _ in imp.ops] == ["max", "max"]
    imp = _check_import("Min", xs[:1])
    assert imp.ops == [] and imp.outputs[0] == 0


def test_pow_with_integer_exponent_casts_it_to_the_base_dtype():
    a = _rand((2, 3), "float32", 1, "positive")
    imp = _check_import("Pow", [_x("a", a), _c("e", [2, 3, 1], np.int64)])
    assert [o for o, _ in imp.ops] == ["cast", "pow"]


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "bool"])
@pytest.mark.parametrize("op_type", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
def test_comparisons_match_onnxruntime_and_give_bool(op_type, dtype):
    if dtype == "bool" and op_type != "Equal":
        pytest.skip("ONNX orders numbers only")
    a = _rand((2, 3, 4), dtype, 1)
    b = _rand((4,), dtype, 2)
    b2 = a[0, 0].copy()  # equal elements appear
    imp = _check_import(op_type, [_x("a", a), _x("b", b)])
    assert imp.vals[imp.outputs[0]].dtype == np.bool_
    _check_import(op_type, [_x("a", a), _x("b", b2)])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "float16"])
def test_where_selects_with_three_way_broadcasting(dtype):
    c = _rand((3, 1), "bool", 1)
    a = _rand((2, 1, 4), dtype, 2)
    b = _rand((4,), dtype, 3)
    imp = _check_import("Where", [_x("c", c), _x("a", a), _x("b", b)])
    assert [o for o, _ in imp.ops] == ["select"]


UNARY = {
    "Neg": ("normal", ["float32", "float64", "int32", "int64", "float16"]),
    "Abs": ("normal", ["float32", "float64", "int32", "int64", "float16"]),
    "Exp": ("normal", ["float32", "float64", "float16"]),
    "Log": ("positive", ["float32", "float64", "float16"]),
    "Sqrt": ("positive", ["float32", "float64", "float16"]),
    "Reciprocal": ("nonzero", ["float32", "float64", "float16"]),
    "Erf": ("normal", ["float32", "float64", "float16"]),
    "HardSwish": ("normal", ["float32", "float64", "float16"]),
}


@pytest.mark.parametrize(
    ("op_type", "kind", "dtype"),
    [(o, k, d) for o, (k, ds) in UNARY.items() for d in ds],
)
def test_unary_matches_onnxruntime(op_type, kind, dtype):
    x = _rand((3, 4, 5), dtype, 7, kind)
    _check_import(op_type, [_x("x", x)])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gelu_is_exact_erf_gelu(dtype):
    x = _rand((4, 33), dtype, 5)
    imp = _check_import("Gelu", [_x("x", x)], opset=20)
    assert [o for o, _ in imp.ops] == ["gelu"]
    x64 = x.astype(np.float64)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x64.ravel()])
    _close(imp.vals[imp.outputs[0]], want.reshape(x.shape).astype(x.dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gelu_tanh_is_the_tanh_approximation(dtype):
    x = _rand((4, 33), dtype, 5)
    imp = _check_import("Gelu", [_x("x", x)], {"approximate": "tanh"}, 20)
    assert [o for o, _ in imp.ops] == ["gelu_tanh"]
    x64 = x.astype(np.float64)
    k = math.sqrt(2 / math.pi)
    want = 0.5 * x64 * (1 + np.tanh(k * (x64 + 0.044715 * x64**3)))
    _close(imp.vals[imp.outputs[0]], want.astype(x.dtype))


def test_gelu_of_an_unknown_approximation_is_unsupported():
    with pytest.raises(Unsupported, match="approximate"):
        _check_import("Gelu", [_x("x", _rand((3,), "float32"))], {"approximate": "fast"}, 20)


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
def test_a_one_element_constant_operand_imports_as_a_scalar(op_type):
    x = _rand((2, 3, 4), "float32", 5, "positive")
    imp = _check_import(op_type, [_x("x", x), _c("c", [[[1.5]]], np.float32)])
    assert [o for o, _ in imp.ops][-2:] == ["scalar", op_type.lower()], imp.ops
    # of a higher rank than the other operand, it would widen the result: kept as it is
    imp = _check_import(op_type, [_x("x", x[0, 0]), _c("c", [[[1.5]]], np.float32)])
    assert "scalar" not in [o for o, _ in imp.ops]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
def test_clip_with_constant_bounds_matches_onnxruntime(dtype):
    x = _rand((3, 4, 5), dtype, 3)
    dt = np_dtype(dtype)
    _check_import("Clip", [_x("x", x), _c("lo", -1, dt), _c("hi", 2, dt)])
    _check_import("Clip", [_x("x", x), ("", None, True), _c("hi", 1, dt)])
    imp = _check_import("Clip", [_x("x", x), _c("lo", -0.5 if dt.kind == "f" else 0, dt)])
    assert imp.ops[0][1]["hi"] == math.inf


def test_clip_with_a_computed_bound_is_unsupported():
    x = _rand((3,), "float32")
    with pytest.raises(Unsupported, match="min"):
        _check_import("Clip", [_x("x", x), _x("lo", np.asarray(0.0, np.float32))])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_hard_sigmoid_and_leaky_relu_match_onnxruntime(dtype):
    x = _rand((3, 4, 5), dtype, 4)
    _check_import("HardSigmoid", [_x("x", x)])
    imp = _check_import("HardSigmoid", [_x("x", x)], {"alpha": 0.3, "beta": 0.4})
    assert imp.ops[0][1]["alpha"] == pytest.approx(0.3)
    _check_import("LeakyRelu", [_x("x", x)])
    _check_import("LeakyRelu", [_x("x", x)], {"alpha": 0.25})


# --------------------------------------------------------------------------- reductions
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("op_type", REDUCE)
@pytest.mark.parametrize("opset", [13, 18])
def test_reductions_match_onnxruntime(op_type, dtype, opset):
    x = _rand((2, 3, 4, 5), dtype, 2, "small" if op_type == "ReduceProd" else "normal")
    as_input = opset >= 18 or op_type == "ReduceSum"
    for axes, keep in [([1, -1], 1), ([0], 0), ([-3, 1, 2], 0)]:
        if as_input:
            imp = _check_import(op_type, [_x("x", x), _c("axes", axes)], {"keepdims": keep}, opset)
        else:
            imp = _check_import(op_type, [_x("x", x)], {"axes": axes, "keepdims": keep}, opset)
        params = imp.ops[0][1]
        assert list(params["axes"]) == sorted({a % 4 for a in axes})
    # no axes: every axis, or nothing with noop_with_empty_axes
    imp = _check_import(op_type, [_x("x", x)], {"keepdims": 0}, opset)
    assert imp.ops[0][1]["axes"] == (0, 1, 2, 3)
    if as_input:
        imp = _check_import(op_type, [_x("x", x)], {"noop_with_empty_axes": 1}, opset)
        assert imp.ops == []


def test_float16_reductions_accumulate_in_float32():
    x = np.full((4096,), 0.1, dtype=np.float16)
    got = _eval("reduce_sum", {"axes": (0,), "keepdims": 0}, [x])
    assert got.dtype == np.float16
    assert abs(float(got) - 4096 * float(np.float16(0.1))) < 1.0


def test_reduction_with_computed_axes_is_unsupported():
    x = _rand((2, 3), "float32")
    with pytest.raises(Unsupported, match="axes"):
        _check_import("ReduceSum", [_x("x", x), _x("axes", np.array([1], np.int64))])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_softmax_matches_onnxruntime_on_each_axis(dtype):
    x = _rand((2, 3, 5), dtype, 6) * 3
    for axis in (-1, 0, 1):
        imp = _check_import("Softmax", [_x("x", x)], {"axis": axis}, 13)
        assert imp.ops[0][1]["axis"] == axis % 3
    _check_import("Softmax", [_x("x", x)])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_layer_norm_matches_onnxruntime(dtype):
    x = _rand((2, 3, 8), dtype, 8)
    s, b = _rand((3, 8), dtype, 9), _rand((3, 8), dtype, 10)
    imp = _check_import("LayerNormalization", [_x("x", x), _x("s", s), _x("b", b)], {"axis": 1}, 17)
    assert imp.ops == [("layer_norm", {"axis": 1, "epsilon": pytest.approx(1e-5)})]
    # scale broadcasting to x.shape[axis:], bias absent (zero weight), eps attribute
    s1 = _rand((8,), dtype, 11)
    imp = _check_import("LayerNormalization", [_x("x", x), _x("s", s1)], {"epsilon": 1e-3}, 17)
    _check_import("LayerNormalization", [_x("x", x), _x("s", s1)], {"axis": -2}, 17)


def test_layer_norm_with_used_mean_output_is_unsupported():
    x = _rand((2, 4), "float32")
    with pytest.raises(Unsupported, match="Mean"):
        _check_import("LayerNormalization", [_x("x", x), _x("s", x[0])], None, 17, n_out=2)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 2, 2)])
def test_global_avg_pool_matches_onnxruntime(shape):
    for dtype in ("float32", "float64"):
        imp = _check_import("GlobalAveragePool", [_x("x", _rand(shape, dtype, 2))])
        assert imp.vals[imp.outputs[0]].shape == shape[:2] + (1,) * (len(shape) - 2)


# ------------------------------------------------------------------------ data movement
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_expand_broadcasts_both_ways(dtype):
    x = _rand((3, 1), dtype, 1)
    imp = _check_import("Expand", [_x("x", x), _c("shape", [2, 1, 4])])
    assert imp.ops == [("broadcast_to", {"shape": (2, 3, 4)})]
    imp = _check_import("Expand", [_x("x", x), _c("shape", [1])])  # smaller than x: x itself
    assert imp.ops == []
    imp = _check_import("Expand", [_x("x", _rand((2, 3), dtype)), _c("shape", [3, 1, 1])])
    assert imp.ops == [("broadcast_to", {"shape": (3, 2, 3)})]
    assert _check_import("Expand", [_x("x", x), _c("shape", [3, 1])]).ops == []


SLICES = [
    ([1], [3], None, None),
    ([0, 1], [INT64_MAX, -1], [0, 2], None),
    ([-1], [INT64_MIN], [1], [-1]),
    ([INT64_MAX], [-100], [-1], [-2]),
    ([-2, 0], [-100, 5], [0, -2], [-1, 2]),
    ([0], [INT64_MAX], [1], [1]),  # keeps everything: the input itself
    ([5], [1], [2], [1]),  # empty
]


@pytest.mark.parametrize(("starts", "ends", "axes", "steps"), SLICES)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_slice_matches_onnxruntime_including_sentinels_and_negative_steps(
    starts, ends, axes, steps, dtype
):
    x = _rand((4, 5, 6), dtype, 3)
    ins = [_x("x", x), _c("st", starts), _c("en", ends)]
    if axes is not None or steps is not None:
        ins.append(_c("ax", axes if axes is not None else list(range(len(starts)))))
    if steps is not None:
        ins.append(_c("sp", steps))
    imp = _check_import("Slice", ins)
    for _, p in imp.ops:
        dims = [x.shape[a] for a in p["axes"]]
        assert all(-d - 1 <= e <= d for e, d in zip(p["ends"], dims, strict=True))
        assert all(0 <= s <= d for s, d in zip(p["starts"], dims, strict=True))


def test_slice_evaluate_follows_python_slice_indices():
    x = np.arange(7 * 3).reshape(7, 3)
    p = {"starts": (-1, 0), "ends": (-8, 3), "axes": (0, 1), "steps": (-2, 2)}
    np.testing.assert_array_equal(_eval("slice", p, [x]), x[-1:-8:-2, 0:3:2])
    with pytest.raises(ValueError, match="step 0"):
        _eval("slice", {"starts": (0,), "ends": (1,), "axes": (0,), "steps": (0,)}, [x])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_pad_matches_onnxruntime(mode, dtype):
    x = _rand((2, 3, 4), dtype, 5)
    pads = [0, 1, 2, 1, 0, 3]
    ins = [_x("x", x), _c("p", pads)]
    if mode == "constant":
        ins.append(_c("v", 7 if np_dtype(dtype).kind == "i" else 1.5, np_dtype(dtype)))
    imp = _check_import("Pad", ins, {"mode": mode})
    assert imp.ops[0][1]["pads"] == tuple(pads)
    # opset 18 axes input: pads of the listed axes only
    imp = _check_import(
        "Pad", [_x("x", x), _c("p", [1, 2]), ("", None, True), _c("a", [-1])], {"mode": mode}
    )
    assert imp.ops[0][1]["pads"] == (0, 0, 1, 0, 0, 2)


def test_pad_negative_and_wrap_are_unsupported():
    x = _rand((2, 3), "float32")
    with pytest.raises(Unsupported, match="negative"):
        _check_import("Pad", [_x("x", x), _c("p", [0, -1, 0, 0])])
    with pytest.raises(Unsupported, match="wrap"):
        _check_import("Pad", [_x("x", x), _c("p", [0, 1, 0, 0])], {"mode": "wrap"}, 19)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_gather_matches_onnxruntime_for_scalar_vector_and_matrix_indices(dtype):
    x = _rand((4, 5, 3), dtype, 4)
    imp = _check_import("Gather", [_x("x", x), _c("i", [3, -1, 0, 3])], {"axis": 1})
    assert imp.ops == [("gather", {"axis": 1, "indices": (3, -1, 0, 3)})]
    imp = _check_import("Gather", [_x("x", x), _c("i", -2)], {"axis": -1})
    assert [o for o, _ in imp.ops] == ["gather", "reshape"]
    assert imp.vals[imp.outputs[0]].shape == (4, 5)
    imp = _check_import("Gather", [_x("x", x), _c("i", [[0, 1], [2, 2]], np.int32)])
    assert imp.vals[imp.outputs[0]].shape == (2, 2, 5, 3)


def test_gather_rejects_out_of_range_indices():
    with pytest.raises(ValueError, match="outside"):
        _eval("gather", {"axis": 0, "indices": (2,)}, [np.zeros((2, 3))])


RESIZE_OK = [
    # (x shape, sizes or None, scales or None, attrs)
    (
        (1, 2, 3, 4),
        [1, 2, 6, 8],
        None,
        {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    ),
    (
        (1, 2, 6, 8),
        [1, 2, 3, 4],
        None,
        {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    ),
    (
        (1, 1, 4, 6),
        [1, 1, 7, 5],
        None,
        {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    ),
    ((1, 2, 3, 4), None, [1, 1, 2, 2], {}),  # half_pixel + round_prefer_floor at 2x
    ((1, 2, 3, 4), None, [1, 1, 2, 3], {"mode": "linear"}),
    ((1, 2, 6, 8), [1, 2, 3, 4], None, {"mode": "linear"}),
    ((1, 1, 5, 7), [1, 1, 3, 10], None, {"mode": "linear"}),
    (
        (2, 3, 4, 5),
        [2, 3, 8, 10],
        None,
        {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
    ),
]


@pytest.mark.parametrize(("shape", "sizes", "scales", "attrs"), RESIZE_OK)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_resize_matches_onnxruntime_in_modelled_modes(shape, sizes, scales, attrs, dtype):
    x = _rand(shape, dtype, 9)
    ins = [_x("x", x), ("", None, True)]
    if sizes is not None:
        ins += [("", None, True), _c("sz", sizes)]
    else:
        ins.append(_c("sc", scales, np.float32))
    imp = _check_import("Resize", ins, attrs, 13)
    assert [o for o, _ in imp.ops] == ["resize"]
    assert imp.ops[0][1]["mode"] == attrs.get("mode", "nearest")


RESIZE_BAD = [
    ({"mode": "cubic"}, "cubic"),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, "align_corners"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, "tf_crop"),
    (
        {"coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_ceil"},
        "differs",
    ),
]


@pytest.mark.parametrize(("attrs", "match"), RESIZE_BAD)
def test_resize_outside_the_modelled_modes_is_unsupported(attrs, match):
    x = _rand((1, 1, 3, 4), "float32")
    ins = [_x("x", x), ("", None, True), ("", None, True), _c("sz", [1, 1, 5, 9])]
    with pytest.raises(Unsupported, match=match):
        _check_import("Resize", ins, attrs, 13)


CASTS = [
    ("float32", TensorProto.INT32),
    ("float32", TensorProto.INT64),
    ("float32", TensorProto.FLOAT16),
    ("float32", TensorProto.DOUBLE),
    ("float32", TensorProto.BOOL),
    ("float64", TensorProto.FLOAT),
    ("int64", TensorProto.FLOAT),
    ("int64", TensorProto.INT32),
    ("bool", TensorProto.FLOAT),
    ("int32", TensorProto.BOOL),
    ("float16", TensorProto.FLOAT),
]


@pytest.mark.parametrize(("src", "to"), CASTS)
def test_cast_matches_onnxruntime(src, to):
    x = _rand((3, 4), src, 2) * (3 if src != "bool" else 1)
    if src == "float32":
        x[0, :3] = [-2.7, 2.7, 0.0]  # truncation toward zero, zero -> False
    imp = _check_import("Cast", [_x("x", x)], {"to": to})
    assert [o for o, _ in imp.ops] == ["cast"]


def test_cast_to_an_unmodelled_type_is_unsupported_and_to_the_same_type_is_identity():
    x = _rand((3,), "float32")
    with pytest.raises(Unsupported, match="element type"):
        _check_import("Cast", [_x("x", x)], {"to": TensorProto.STRING})
    assert _check_import("Cast", [_x("x", x)], {"to": TensorProto.FLOAT}).ops == []


# ------------------------------------------------------------- to_onnx round trips (writer)
class FakeWriter:
    """The writer API of the contract, building a plain model."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.aliases: dict[str, str] = {}
        self._n = 0

    def emit(self, op_type: str, inputs: list[str], outputs: list[str] | str, **attrs) -> None:
        outs = [outputs] if isinstance(outputs, str) else list(outputs)
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))

    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}__{self._n}"

    def const(self, array: np.ndarray, stem: str = "c") -> str:
        name = self.fresh(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def alias(self, out: str, name: str) -> None:
        self.aliases[out] = name

    def elem_type(self, dtype: str) -> int:
        return helper.np_dtype_to_tensor_dtype(np_dtype(dtype))


def _roundtrip(op: str, params: dict[str, Any], args: Sequence[np.ndarray], opset: int):
    ctx = _ctx(op, params, args)
    want = np.asarray(get(op).evaluate(ctx, list(args)))
    w = FakeWriter(opset)
    names = [f"x{i}" for i in range(len(args))]
    get(op).to_onnx(w, ctx, names, "y")
    if "y" in w.aliases:
        w.emit("Identity", [w.aliases["y"]], ["y"])
    feeds = dict(zip(names, args, strict=True))
    m = _model(w.nodes, feeds, {"y": (_elem(want), list(want.shape))}, w.inits, opset)
    onnx.checker.check_model(m, full_check=True)
    got = _run(m, feeds)[0]
    _close(want, np.asarray(got))
    return w


F32 = "float32"
ROUNDTRIPS: list[tuple[str, dict[str, Any], list[tuple[tuple[int, ...], str, str]], list[int]]] = [
    *[
        (o, {}, [((2, 3, 4), F32, "positive"), ((3, 1), F32, "small")], [13])
        for o in ("add", "sub", "mul", "div", "pow", "max", "min")
    ],
    ("div", {}, [((2, 3), "int32", "normal"), ((3,), "int32", "nonzero")], [13]),
    *[
        (o, {}, [((2, 3), "int64", "normal"), ((2, 1), "int64", "normal")], [13])
        for o in ("equal", "less", "less_equal", "greater", "greater_equal")
    ],
    ("select", {}, [((3, 1), "bool", ""), ((2, 3, 4), F32, ""), ((4,), F32, "")], [13]),
    *[
        (o, {}, [((2, 3, 4), F32, "positive")], [13])
        for o in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "erf")
    ],
    ("gelu", {}, [((2, 33), F32, "normal")], [13, 20]),
    ("gelu_tanh", {}, [((2, 33), F32, "normal")], [13, 20]),
    ("hard_swish", {}, [((2, 33), F32, "normal")], [13, 14]),
    ("clip", {"lo": -0.5, "hi": 1.0}, [((2, 9), F32, "normal")], [13]),
    ("clip", {"lo": -math.inf, "hi": 1.0}, [((2, 9), F32, "normal")], [13]),
    ("clip", {"lo": -2.5, "hi": math.inf}, [((2, 9), "int64", "normal")], [13]),
    ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}, [((2, 9), F32, "normal")], [13]),
    ("leaky_relu", {"alpha": 0.1}, [((2, 9), F32, "normal")], [13]),
    *[
        (o, {"axes": (0, 2), "keepdims": k}, [((3, 4, 5), F32, "small")], [13, 18])
        for o in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod")
        for k in (0, 1)
    ],
    ("softmax", {"axis": 1}, [((2, 5, 3), F32, "normal")], [13]),
    (
        "layer_norm",
        {"axis": 1, "epsilon": 1e-5},
        [((2, 3, 4), F32, "normal"), ((3, 4), F32, "normal"), ((3, 4), F32, "normal")],
        [13, 17],
    ),
    ("global_avg_pool", {}, [((2, 3, 4, 5), F32, "normal")], [13]),
    ("broadcast_to", {"shape": (2, 3, 4)}, [((3, 1), F32, "normal")], [13]),
    (
        "slice",
        {"starts": (-1, 1), "ends": (-6, 100), "axes": (0, 2), "steps": (-2, 2)},
        [((5, 3, 6), F32, "normal")],
        [13],
    ),
    (
        "pad",
        {"pads": (1, 0, 2, 3), "mode": "constant", "value": -1.5},
        [((2, 3), F32, "normal")],
        [13],
    ),
    (
        "pad",
        {"pads": (1, 0, 2, 2), "mode": "reflect", "value": 0.0},
        [((3, 4), F32, "normal")],
        [13],
    ),
    (
        "pad",
        {"pads": (0, 3, 0, 1), "mode": "edge", "value": 0.0},
        [((3, 4), "int64", "normal")],
        [13],
    ),
    ("gather", {"axis": 1, "indices": (2, -1, 0)}, [((2, 3, 4), F32, "normal")], [13]),
    ("resize", {"sizes": (1, 2, 6, 8), "mode": "nearest"}, [((1, 2, 3, 4), F32, "")], [13]),
    ("resize", {"sizes": (1, 2, 5, 3), "mode": "nearest"}, [((1, 2, 3, 4), F32, "")], [13]),
    ("resize", {"sizes": (1, 2, 7, 3), "mode": "linear"}, [((1, 2, 3, 4), F32, "")], [13]),
    ("cast", {"dtype": "int32"}, [((3, 4), F32, "normal")], [13]),
    ("cast", {"dtype": "float16"}, [((3, 4), F32, "normal")], [13]),
    ("cast", {"dtype": "bool"}, [((3, 4), "int64", "normal")], [13]),
    ("scalar", {"value": 2.5, "dtype": "float32"}, [], [13]),
    ("scalar", {"value": -3.0, "dtype": "int64"}, [], [13]),
    ("scalar", {"value": 1.0, "dtype": "bool"}, [], [13]),
]


@pytest.mark.parametrize(
    ("op", "params", "specs", "opset"),
    [(o, p, s, v) for o, p, s, vs in ROUNDTRIPS for v in vs],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_to_onnx_round_trips_through_onnxruntime(op, params, specs, opset):
    args = [_rand(shape, dt, i + 3, kind or "normal") for i, (shape, dt, kind) in enumerate(specs)]
    _roundtrip(op, params, args, opset)


def test_to_onnx_chooses_node_forms_by_opset():
    x = _rand((2, 4), F32)
    ops = lambda w: [n.op_type for n in w.nodes]  # noqa: E731
    assert ops(_roundtrip("gelu", {}, [x], 20)) == ["Gelu"]
    assert "Erf" in ops(_roundtrip("gelu", {}, [x], 18))
    assert ops(_roundtrip("gelu_tanh", {}, [x], 20)) == ["Gelu"]
    assert "Tanh" in ops(_roundtrip("gelu_tanh", {}, [x], 18))
    assert ops(_roundtrip("rsqrt", {}, [np.abs(x) + 1], 13)) == ["Sqrt", "Reciprocal"]
    w = _roundtrip("reduce_mean", {"axes": (1,), "keepdims": 1}, [x], 13)
    assert [a.name for a in w.nodes[0].attribute] == ["axes", "keepdims"]
    w = _roundtrip("reduce_mean", {"axes": (1,), "keepdims": 1}, [x], 18)
    assert len(w.nodes[0].input) == 2
    w = _roundtrip("reduce_sum", {"axes": (1,), "keepdims": 1}, [x], 13)
    assert len(w.nodes[0].input) == 2
    s = _rand((4,), F32)
    assert ops(_roundtrip("layer_norm", {"axis": 1, "epsilon": 1e-5}, [x, s, s], 17)) == [
        "LayerNormalization"
    ]
    w = _roundtrip("scalar", {"value": 0.5, "dtype": "float16"}, [], 13)
    assert w.nodes[0].op_type == "Identity" and len(w.inits) == 1  # w.alias, no node


# -------------------------------------------------------------------------------- costs
def _cost(op: str, params: dict[str, Any], args: Sequence[np.ndarray]) -> tuple[float, float]:
    return get(op).cost(_ctx(op, params, args))


def test_costs_follow_the_contract():
    a, b = np.zeros((2, 3, 4), np.float32), np.zeros((3, 1), np.float32)
    isz = TensorType((), "float32").itemsize
    assert _cost("add", {}, [a, b]) == (24.0, float((24 + 3 + 24) * isz))
    assert _cost("less", {}, [a, b])[0] == 24.0
    assert _cost("gelu", {}, [a])[0] == 6 * 24.0
    assert _cost("erf", {}, [a])[0] == 4 * 24.0
    assert _cost("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}, [a])[0] == 3 * 24.0
    assert _cost("reduce_sum", {"axes": (1,), "keepdims": 0}, [a])[0] == 24.0
    assert _cost("softmax", {"axis": 2}, [a])[0] == 5 * 24.0
    assert _cost("slice", {"starts": (0,), "ends": (1,), "axes": (0,), "steps": (1,)}, [a])[0] == 0
    assert _cost("broadcast_to", {"shape": (2, 3, 4)}, [b])[0] == 0
    x = np.zeros((1, 2, 3, 4), np.float32)
    fl, by = _cost("resize", {"sizes": (1, 2, 6, 8), "mode": "linear"}, [x])
    assert fl == 4 * 96 and by == float((24 + 96) * isz)
    assert _cost("resize", {"sizes": (1, 2, 6, 8), "mode": "nearest"}, [x])[0] == 0
    assert _cost("scalar", {"value": 1.0, "dtype": "float32"}, []) == (0.0, 0.0)


# ------------------------------------------------------------------- dtype conventions
def test_float64_arrays_are_never_narrowed():
    a64 = _rand((2, 3), "float64")
    ctx32 = OpContext("add", {}, [TensorType((2, 3)), TensorType((2, 3))], TensorType((2, 3)))
    assert get("add").evaluate(ctx32, [a64, a64]).dtype == np.float64
    for op in ("exp", "erf", "gelu", "gelu_tanh", "hard_swish", "rsqrt"):
        ctx = OpContext(op, {}, [TensorType((2, 3))], TensorType((2, 3)))
        assert get(op).evaluate(ctx, [np.abs(a64)]).dtype == np.float64, op
    ctx = OpContext("softmax", {"axis": 1}, [TensorType((2, 3))], TensorType((2, 3)))
    assert get("softmax").evaluate(ctx, [a64]).dtype == np.float64
    # a float32 graph run in float64: cast to float16 keeps float64; int cast is exact
    cctx = OpContext("cast", {"dtype": "float16"}, [TensorType((2, 3))], TensorType((2, 3)))
    assert get("cast").evaluate(cctx, [a64]).dtype == np.float64
    ictx = OpContext("cast", {"dtype": "int32"}, [TensorType((2, 3))], TensorType((2, 3)))
    assert get("cast").evaluate(ictx, [a64]).dtype == np.int32
    # a declared float32 array is cast exactly
    assert get("cast").evaluate(cctx, [a64.astype(np.float32)]).dtype == np.float16


def test_bfloat16_is_computed_in_float32_and_rounded_once():
    bf = np.dtype(ml_dtypes.bfloat16)
    x = _rand((4, 7), "float32", 3).astype(bf)
    for op, ref in [("exp", np.exp), ("sqrt", lambda v: np.sqrt(np.abs(v)))]:
        arg = x if op == "exp" else np.abs(x)
        got = _eval(op, {}, [arg])
        assert got.dtype == bf
        np.testing.assert_array_equal(got, ref(arg.astype(np.float32)).astype(bf))
    got = _eval("reduce_sum", {"axes": (1,), "keepdims": 0}, [x])
    np.testing.assert_array_equal(got, x.astype(np.float32).sum(axis=1).astype(bf))
    assert _eval("scalar", {"value": 0.1, "dtype": "bfloat16"}, []).dtype == bf


def test_float_only_functions_keep_integer_dtypes():
    x = np.array([1, 4, 9, -1], np.int32)
    assert _eval("sqrt", {}, [np.abs(x)]).tolist() == [1, 2, 3, 1]
    assert _eval("sqrt", {}, [np.abs(x)]).dtype == np.int32
    assert _eval("reduce_mean", {"axes": (0,), "keepdims": 0}, [x]).tolist() == 3
    assert _eval("clip", {"lo": -math.inf, "hi": 2.5}, [x]).tolist() == [1, 2, 2, -1]


def test_invalid_parameters_raise_value_error():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="axes"):
        _eval("reduce_sum", {"axes": (), "keepdims": 0}, [x])
    with pytest.raises(ValueError, match="axes"):
        _eval("reduce_sum", {"axes": (1, 0), "keepdims": 0}, [x])
    with pytest.raises(ValueError, match="pads"):
        _eval("pad", {"pads": (1, 1), "mode": "constant", "value": 0.0}, [x])
    with pytest.raises(ValueError, match="mode"):
        _eval("pad", {"pads": (0, 0, 0, 0), "mode": "wrap", "value": 0.0}, [x])
    with pytest.raises(ValueError, match="mode"):
        _eval("resize", {"sizes": (2, 3), "mode": "cubic"}, [x])
    with pytest.raises(ValueError, match="dtype"):
        _eval("cast", {"dtype": "complex64"}, [x])


# --------------------------------------------------------------- through the real graph
@pytest.mark.skipif(
    "add" not in _core.signatures(), reason="the Rust core does not declare the tensor dialect yet"
)
def test_graph_of_tensor_operators_runs_in_the_numpy_executor():
    from tensat_py.graph import Graph
    from tensat_py.runtime import numpy_exec

    g = Graph()
    x = g.add_input("x", (2, 3))
    b = g.add_weight("b", (3,))
    s = g.add_node("add", {}, [x, b], name="s")
    e = g.add_node("exp", {}, [s], name="e")
    r = g.add_node("reduce_sum", {"axes": (1,), "keepdims": 1}, [e], name="r")
    d = g.add_node("div", {}, [e, r], name="d")
    g.outputs = [d]
    assert g.type_of(d) == TensorType((2, 3), "float32")
    xv, bv = _rand((2, 3), F32, 1), _rand((3,), F32, 2)
    (out,) = numpy_exec.run(g, {"x": xv, "b": bv})
    z = np.exp(xv + bv)
    np.testing.assert_allclose(out, z / z.sum(axis=1, keepdims=True), rtol=1e-6)


@pytest.mark.skipif(
    "add" not in _core.signatures(), reason="the Rust core does not declare the tensor dialect yet"
)
def test_onnx_model_of_tensor_operators_loads_runs_and_exports_unchanged_in_value():
    from tensat_py.frontends import onnx as tonnx
    from tensat_py.runtime import numpy_exec

    rng = np.random.default_rng(0)
    consts = {
        "s": rng.standard_normal((8,)).astype(np.float32),
        "b": rng.standard_normal((8,)).astype(np.float32),
        "ax1": np.array([1], np.int64),
        "st": np.array([0, 1], np.int64),
        "en": np.array([2, 7], np.int64),
        "sax": np.array([1, 2], np.int64),
        "pads": np.array([0, 0, 1, 0, 0, 0, 1, 0], np.int64),
        "gi": np.array(2, np.int64),
        "sizes": np.array([1, 1, 4, 12], np.int64),
        "half": np.array(0.5, np.float32),
        "eshape": np.array([2, 1, 1, 1], np.int64),
    }
    mk = helper.make_node
    nodes = [
        mk("LayerNormalization", ["x", "s", "b"], ["ln"], axis=-1),
        mk("Gelu", ["ln"], ["g"]),
        mk("Softmax", ["g"], ["sm"], axis=1),
        mk("ReduceMean", ["sm", "ax1"], ["rm"], keepdims=1),
        mk("Sub", ["sm", "rm"], ["d"]),
        mk("Mul", ["d", "half"], ["dh"]),
        mk("Clip", ["dh", "", ""], ["c"]),
        mk("Slice", ["c", "st", "en", "sax"], ["sl"]),
        mk("Pad", ["sl", "pads"], ["pd"], mode="reflect"),
        mk(
            "Resize",
            ["pd", "", "", "sizes"],
            ["rs"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        mk("Expand", ["rs", "eshape"], ["ex"]),
        mk("Gather", ["ex", "gi"], ["ga"], axis=2),
        mk("Cast", ["ga"], ["ca"], to=TensorProto.FLOAT16),
        mk("Cast", ["ca"], ["y"], to=TensorProto.FLOAT),
        mk("HardSwish", ["y"], ["z"]),
        mk("Where", ["cond", "z", "y"], ["w"]),
        mk("Max", ["w", "y", "z"], ["out"]),
    ]
    feeds = {
        "x": rng.standard_normal((1, 3, 4, 8)).astype(np.float32),
        "cond": rng.random(12) < 0.5,
    }
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    m = _model(nodes, feeds, {"out": (TensorProto.FLOAT, [2, 1, 12])}, inits, 20)
    want = _run(m, feeds)[0]
    g = tonnx.load(m)
    assert tonnx.opaque_ops(g) == {}
    assert {"layer_norm", "gelu", "resize", "gather", "select", "cast"} <= set(g.op_counts())
    leaf = dict(g.meta["onnx"].weight_values(g))
    leaf.update({n.name: feeds[n.name] for n in g.nodes if n.op == "input"})
    _close(numpy_exec.run(g, leaf)[0], want)
    m2 = tonnx.to_model(g)
    onnx.checker.check_model(m2, full_check=True)
    _close(_run(m2, feeds)[0], want)


@pytest.mark.parametrize(
    "ctm",
    [
        "asymmetric",
        "half_pixel",
        "pytorch_half_pixel",
        "align_corners",
    ],
)
@pytest.mark.parametrize("nearest", ["floor", "ceil", "round_prefer_floor", "round_prefer_ceil"])
def test_resize_nearest_imports_exactly_when_it_agrees_with_onnxruntime(ctm, nearest):
    """Every accepted (coordinate mode, nearest mode, in -> out) gives onnxruntime's values;
    asymmetric + floor is accepted for every size pair."""
    accepted = 0
    for n_in in range(1, 7):
        for n_out in range(1, 10):
            x = np.arange(n_in * 2, dtype=np.float32).reshape(1, 1, 2, n_in)
            ins = [_x("x", x), ("", None, True), ("", None, True), _c("sz", [1, 1, 2, n_out])]
            attrs = {"coordinate_transformation_mode": ctm, "nearest_mode": nearest}
            try:
                _check_import("Resize", ins, attrs, 13)
            except Unsupported:
                assert (ctm, nearest) != ("asymmetric", "floor")
                continue
            accepted += 1
    assert accepted > 0
