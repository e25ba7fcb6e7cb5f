"""The tensor dialect: general tensor operators with NumPy/ONNX broadcasting.

One :class:`~tensat_py.ops.OpDef` per operator (registered at import) and the ONNX
importers that produce them. ONNX and HLO both translate into these operators; the
Knossos dialect's scalar arithmetic is these operators on rank-0 tensors. Operand order
is the e-node's child order (``tensat_py._core.signatures()``); parameter names are
those of the Rust declarations (``rust/src/lang/tensor.rs``).

Conventions shared by every ``evaluate`` here:

* Broadcasting is NumPy's (ONNX "multidirectional") for every binary and ternary
  elementwise operator.
* dtypes: ``float32 float16 bfloat16 float64 int32 int64 bool int8 uint8 int16 uint16
  uint32 uint64`` (``bfloat16`` is
  ``ml_dtypes.bfloat16``). The output keeps the first tensor operand's dtype, except
  comparisons (``bool``) and ``cast`` (its ``dtype``). Float arrays may arrive wider than
  declared (verification runs float graphs in float64): a float array is never
  narrowed, so a float64 array stays float64 through every operator (``cast`` between
  float types included, see :func:`_cast`). Transcendental functions of ``float16`` /
  ``bfloat16`` arrays are computed in float32 and rounded back once; ``erf``, ``gelu``,
  ``gelu_tanh``, ``softmax``, ``layer_norm`` and ``resize`` (linear) are computed in
  float64 and rounded back to the array's dtype (a reference, not a fast kernel).
* Integer operands of float-only functions (``exp``, ``sqrt``, ``erf``...; ONNX has no
  integer kernel for them) are computed in float64 and truncated back toward zero, so
  the output dtype is always the declared one.
* ``div`` on integers truncates toward zero (ONNX ``Div``, C semantics); ``pow`` of an
  integer base by a negative exponent is ``trunc(float(a) ** b)`` (as onnxruntime).

FLOPs (``cost``): one per output element for every elementwise, comparison and
``select`` operator except the documented factors of ``erf`` (4), ``gelu`` (6),
``gelu_tanh`` (8), ``hard_sigmoid`` (3) and ``hard_swish`` (4); reductions one per input
element; ``softmax`` 5 per input element (max, subtract, exp, sum, divide); ``layer_norm`` 8 per
input element (mean, subtract, square, variance sum, rsqrt-scale, multiply, scale,
bias); ``global_avg_pool`` one per input element; data movement (``broadcast_to``,
``slice``, ``pad``, ``gather``, ``cast``, ``resize`` nearest) none; ``resize`` linear
``2**k`` per output element where ``k`` is the number of resized axes (the taps of the
n-linear interpolation). Bytes are :func:`~tensat_py.ops.default_bytes` (each operand
read once, the output written once). ``scalar`` computes nothing at run time: (0, 0),
``launches_kernel=False``.

Sources: the ONNX operator specification (https://onnx.ai/onnx/operators/, opset 13 and
newer), the NumPy reference (``numpy.broadcast_to``, ``numpy.pad``, ``numpy.take``,
``ndarray.astype``) and the contract of the open language (``docs/language.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
from onnx import TensorProto

from tensat_py.graph import DTYPE_BYTES, TensorType
from tensat_py.ops import OpContext, OpDef, ToHlo, default_bytes, onnx_importer, register

__all__ = ["np_dtype", "DTYPES", "ONNX_DTYPES"]

# ----------------------------------------------------------------------------- dtypes
_BF16 = np.dtype(ml_dtypes.bfloat16)

#: Our dtype name -> NumPy dtype (the names of :data:`tensat_py.graph.DTYPE_BYTES`).
DTYPES: dict[str, np.dtype] = {
    name: _BF16 if name == "bfloat16" else np.dtype(name) for name in DTYPE_BYTES
}

#: ONNX ``TensorProto`` element type -> our dtype name.
ONNX_DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "float32",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.DOUBLE: "float64",
    TensorProto.INT32: "int32",
    TensorProto.INT64: "int64",
    TensorProto.BOOL: "bool",
    TensorProto.INT8: "int8",
    TensorProto.UINT8: "uint8",
    TensorProto.INT16: "int16",
    TensorProto.UINT16: "uint16",
    TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64",
}

_HALF = (np.dtype(np.float16), _BF16)


def np_dtype(name: str) -> np.dtype:
    """The NumPy dtype of one of our dtype names. Raises ``ValueError`` for others."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype `{name}` (expected one of {', '.join(DTYPES)})") from None


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt == _BF16


def _via(x: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], wide: bool = False) -> np.ndarray:
    """``fn`` applied in a float working precision, rounded back to ``x``'s dtype.

    float32/float64 arrays are computed as they are (``wide``: in float64), float16 and
    bfloat16 in float32 (``wide``: float64), integers and bool in float64 (the result
    truncated toward zero).
    """
    dt = x.dtype
    if dt == np.float64 or (dt == np.float32 and not wide):
        work = x
    elif dt == np.float32 or wide or not _is_float(dt):
        work = x.astype(np.float64)
    else:
        work = x.astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(work))
        return y if y.dtype == dt else y.astype(dt)


def _out_dtype(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``y`` in ``x``'s dtype (for integer inputs of float computations)."""
    if y.dtype == x.dtype:
        return y
    with np.errstate(all="ignore"):
        return y.astype(x.dtype)


# ------------------------------------------------------------------------ registration
def _op(
    name: str,
    evaluate: Callable[[OpContext, Sequence[Any]], Any],
    cost: Callable[[OpContext], tuple[float, float]],
    to_onnx: Callable[[Any, OpContext, Sequence[str], str], None] | None,
    onnx_types: tuple[str, ...] = (),
    *,
    to_hlo: ToHlo | None = None,
    launches_kernel: bool = True,
    doc: str = "",
    fusion: str = "none",
    kernel: str | None = None,
    commutative: bool = False,
) -> None:
    register(
        OpDef(
            name=name,
            dialect="tensor",
            evaluate=evaluate,
            cost=cost,
            to_onnx=to_onnx,
            onnx_types=onnx_types,
            launches_kernel=launches_kernel,
            doc=doc or (evaluate.__doc__ or ""),
            to_hlo=to_hlo,
            fusion=fusion,
            kernel=kernel,
            commutative=commutative,
        )
    )


def _numel(t: Any) -> int:
    return math.prod(t.shape)


def _elementwise_cost(factor: float) -> Callable[[OpContext], tuple[float, float]]:
    def cost(ctx: OpContext) -> tuple[float, float]:
        return float(factor * _numel(ctx.output)), default_bytes(ctx)

    cost.__doc__ = f"FLOPs = {factor} x numel(output); bytes = default_bytes."
    return cost


def _per_input_cost(factor: float) -> Callable[[OpContext], tuple[float, float]]:
    def cost(ctx: OpContext) -> tuple[float, float]:
        return float(factor * _numel(ctx.inputs[0])), default_bytes(ctx)

    cost.__doc__ = f"FLOPs = {factor} x numel(first input); bytes = default_bytes."
    return cost


def _move_cost(ctx: OpContext) -> tuple[float, float]:
    """Data movement only: FLOPs = 0; bytes = default_bytes."""
    return 0.0, default_bytes(ctx)


def _const(w: Any, value: Any, dtype: str, stem: str = "c") -> str:
    return w.const(np.asarray(value, dtype=np_dtype(dtype)), stem)


def _ints(w: Any, values: Sequence[int], stem: str) -> str:
    return w.const(np.asarray(list(values), dtype=np.int64).reshape(-1), stem)


def _simple_onnx(onnx_op: str) -> Callable[[Any, OpContext, Sequence[str], str], None]:
    def to_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
        w.emit(onnx_op, list(ins), [out])

    to_onnx.__doc__ = f"ONNX ``{onnx_op}``."
    return to_onnx


# ============================================================================ HLO forms
# ``to_hlo(writer, ctx, operand_names) -> name``: the HLO instruction(s) an operator prints
# as, passed to its declaration below as ``to_onnx`` is. The writer is
# ``tensat_py.frontends.hlo.translate.HloWriter``. Every form follows XLA's operation
# semantics (https://openxla.org/xla/operation_semantics) and computes what the
# operator's ``evaluate`` computes, to the rounding of the declared dtype: elementwise
# forms broadcast their operands to the output shape first (HLO takes equal shapes);
# float-only functions of integer operands compute in ``f64`` and ``convert`` back
# (truncation toward zero, as ``evaluate``), those of ``f16``/``bf16`` operands in ``f32``.
# A form that cannot write its parameters raises ``ValueError``; the writer reports it as
# ``HloExportError`` naming the operator and the node.


def _hlo_ew(opcode: str) -> ToHlo:
    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        return w.elementwise(opcode, ctx, ins)

    to_hlo.__doc__ = f"HLO ``{opcode}`` of the operands broadcast to the output shape."
    return to_hlo


def _hlo_compare(direction: str) -> ToHlo:
    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        return w.elementwise("compare", ctx, ins, [("direction", direction)])

    to_hlo.__doc__ = f"HLO ``compare(a, b), direction={direction}`` (operands broadcast)."
    return to_hlo


def _hlo_full(w: Any, value: Any, ty: TensorType) -> str:
    """The constant ``value`` of ``ty``'s dtype broadcast to ``ty``'s shape."""
    return w.broadcast(w.constant(value, ty.dtype), TensorType((), ty.dtype), ty.shape)


def _hlo_like(w: Any, ctx: OpContext, value: float) -> str:
    """A constant ``value`` broadcast to the output shape."""
    out = ctx.output
    assert isinstance(out, TensorType)
    return _hlo_full(w, value, out)


def _hlo_float(body: Callable[[Any, str, TensorType], str], doc: str) -> ToHlo:
    """The form of a float function of one operand: ``body(w, x, t)`` computes it on ``x``
    of type ``t``; an integer operand is computed in ``f64``, a half one in ``f32``, each
    converted back (``convert`` truncates toward zero, as ``evaluate``)."""

    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        t = ctx.output
        assert isinstance(t, TensorType)
        dt = np_dtype(t.dtype)
        if dt in (np.float32, np.float64):
            return body(w, ins[0], t)
        work = TensorType(t.shape, "float32" if _is_float(dt) else "float64")
        y = body(w, w.emit("convert", work, [ins[0]]), work)
        return w.emit("convert", t, [y])

    to_hlo.__doc__ = doc
    return to_hlo


def _hlo_unary(opcode: str) -> ToHlo:
    return _hlo_float(lambda w, x, t: w.emit(opcode, t, [x]), f"HLO ``{opcode}``.")


def _hlo_scalar(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO scalar ``constant`` (integers without a fraction)."""
    return w.constant(ctx.params["value"], ctx.output.dtype)  # type: ignore[union-attr]


def _reciprocal_hlo(w: Any, x: str, t: TensorType) -> str:
    return w.emit("divide", t, [_hlo_full(w, 1.0, t), x])


def _softplus_hlo(w: Any, x: str, t: TensorType) -> str:
    """``max(x, 0) + log1p(exp(-|x|))`` (no overflow; ``numpy.logaddexp(0, x)``)."""
    pos = w.emit("maximum", t, [x, _hlo_full(w, 0.0, t)])
    e = w.emit("exponential", t, [w.emit("negate", t, [w.emit("abs", t, [x])])])
    return w.emit("add", t, [pos, w.emit("log-plus-one", t, [e])])


def _hard_swish_hlo(w: Any, x: str, t: TensorType) -> str:
    """``x * max(0, min(1, x / 6 + 0.5))``."""
    y = w.emit("divide", t, [x, _hlo_full(w, 6.0, t)])
    y = w.emit("add", t, [y, _hlo_full(w, 0.5, t)])
    y = w.emit("minimum", t, [_hlo_full(w, 1.0, t), y])
    y = w.emit("maximum", t, [_hlo_full(w, 0.0, t), y])
    return w.emit("multiply", t, [x, y])


def _hlo_gelu(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """``0.5 * x * (1 + erf(x / sqrt(2)))`` with HLO ``erf``; sqrt(2) rounded to x's
    declared dtype, as ``evaluate``."""
    s = _rounded_to(_SQRT2, ctx.inputs[0].dtype)  # type: ignore[union-attr]

    def body(w: Any, x: str, t: TensorType) -> str:
        e = w.emit("erf", t, [w.emit("divide", t, [x, _hlo_full(w, s, t)])])
        p = w.emit("add", t, [_hlo_full(w, 1.0, t), e])
        h = w.emit("multiply", t, [_hlo_full(w, 0.5, t), x])
        return w.emit("multiply", t, [h, p])

    return _hlo_float(body, "")(w, ctx, ins)


def _hlo_gelu_tanh(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """``0.5 * x * (1 + tanh(k * (x + c * x ** 3)))`` (``c`` = 0.044715, ``k`` =
    sqrt(2 / pi), both rounded to x's declared dtype, as ``evaluate``)."""
    dt = ctx.inputs[0].dtype  # type: ignore[union-attr]
    c, k = _rounded_to(_GELU_TANH_CUBE, dt), _rounded_to(_GELU_TANH_SCALE, dt)

    def body(w: Any, x: str, t: TensorType) -> str:
        cube = w.emit("multiply", t, [_hlo_full(w, c, t), x])
        cube = w.emit("multiply", t, [w.emit("multiply", t, [cube, x]), x])
        inner = w.emit("multiply", t, [_hlo_full(w, k, t), w.emit("add", t, [x, cube])])
        p = w.emit("add", t, [_hlo_full(w, 1.0, t), w.emit("tanh", t, [inner])])
        return w.emit("multiply", t, [w.emit("multiply", t, [_hlo_full(w, 0.5, t), x]), p])

    return _hlo_float(body, "")(w, ctx, ins)


def _hlo_hard_sigmoid(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """``max(0, min(1, alpha * x + beta))``."""
    a, b = float(ctx.params["alpha"]), float(ctx.params["beta"])

    def body(w: Any, x: str, t: TensorType) -> str:
        y = w.emit("multiply", t, [_hlo_full(w, a, t), x])
        y = w.emit("add", t, [y, _hlo_full(w, b, t)])
        y = w.emit("minimum", t, [_hlo_full(w, 1.0, t), y])
        return w.emit("maximum", t, [_hlo_full(w, 0.0, t), y])

    return _hlo_float(body, "")(w, ctx, ins)


def _hlo_leaky_relu(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """``select(x >= 0, x, alpha * x)``."""
    a = float(ctx.params["alpha"])

    def body(w: Any, x: str, t: TensorType) -> str:
        ge = w.emit(
            "compare",
            TensorType(t.shape, "bool"),
            [x, _hlo_full(w, 0.0, t)],
            [("direction", "GE")],
        )
        return w.emit("select", t, [ge, x, w.emit("multiply", t, [_hlo_full(w, a, t), x])])

    return _hlo_float(body, "")(w, ctx, ins)


def _hlo_clip(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``maximum``/``minimum`` with the finite bounds (integers: ``ceil(lo)`` and
    ``floor(hi)`` clamped to the dtype's range, as ``evaluate``)."""
    out = ctx.output
    assert isinstance(out, TensorType)
    cur = ins[0]
    lo, hi = float(ctx.params["lo"]), float(ctx.params["hi"])
    dt = np_dtype(out.dtype)
    if not _is_float(dt):
        lo, hi = (float(v) for v in _int_bounds(dt, lo, hi))
    if lo != -math.inf:
        cur = w.emit("maximum", out, [cur, _hlo_full(w, lo, out)])
    if hi != math.inf:
        cur = w.emit("minimum", out, [cur, _hlo_full(w, hi, out)])
    return cur


def _hlo_reduce_over(
    w: Any, x: str, t: TensorType, axes: Sequence[int], opcode: str, mean: bool = False
) -> tuple[str, TensorType]:
    """HLO ``reduce`` of ``x`` (type ``t``) over ``axes`` with an ``opcode`` computation
    and that operation's identity as init value (``mean``: then divided by the count);
    returns the result (the reduced axes dropped) and its type."""
    from tensat_py.ops.hlo import identity

    kind = {"add": "add", "maximum": "max", "minimum": "min", "multiply": "mul"}[opcode]
    np_name = "float32" if t.dtype == "bfloat16" else t.dtype
    init = w.constant(identity(kind, np.dtype(np_name)), t.dtype)
    kept = tuple(d for i, d in enumerate(t.shape) if i not in axes)
    rt = TensorType(kept, t.dtype)
    dims = "{" + ",".join(str(a) for a in axes) + "}"
    comp = w.reducer(opcode, t.dtype)
    r = w.emit("reduce", rt, [x, init], [("dimensions", dims), ("to_apply", f"%{comp}")])
    if mean:
        n = math.prod(t.shape[a] for a in axes)
        r = w.emit("divide", rt, [r, _hlo_full(w, n, rt)])
    return r, rt


def _hlo_reduce(opcode: str) -> ToHlo:
    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        x = ctx.inputs[0]
        assert isinstance(x, TensorType)
        axes = tuple(int(a) for a in ctx.params["axes"])
        r, rt = _hlo_reduce_over(w, ins[0], x, axes, opcode, ctx.op == "reduce_mean")
        return w.reshape(r, rt, ctx.output.shape)  # type: ignore[union-attr]

    to_hlo.__doc__ = (
        f"HLO ``reduce`` with an ``{opcode}`` computation and its identity as init value "
        "(``reduce_mean``: then ``divide`` by the count), then ``reshape`` for keepdims."
    )
    return to_hlo


def _hlo_softmax(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """max-subtract, exp, sum, divide over one axis (``reduce`` and ``broadcast``)."""
    x = ctx.inputs[0]
    assert isinstance(x, TensorType)
    ax = int(ctx.params["axis"])
    bdims = "{" + ",".join(str(i) for i in range(len(x.shape)) if i != ax) + "}"
    m, _ = _hlo_reduce_over(w, ins[0], x, (ax,), "maximum")
    mb = w.emit("broadcast", x, [m], [("dimensions", bdims)])
    e = w.emit("exponential", x, [w.emit("subtract", x, [ins[0], mb])])
    s, _ = _hlo_reduce_over(w, e, x, (ax,), "add")
    return w.emit("divide", x, [e, w.emit("broadcast", x, [s], [("dimensions", bdims)])])


def _hlo_layer_norm(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """``d = x - mean(x)``, ``d / sqrt(mean(d * d) + epsilon) * scale + bias`` over axes
    ``[axis, rank)`` (population variance); ``scale``/``bias`` (shape
    ``x.shape[axis:]``) broadcast with ``dimensions={axis..rank-1}``. Computed in x's
    dtype (``evaluate``: in float64, rounded once)."""
    x = ctx.inputs[0]
    assert isinstance(x, TensorType)
    axis, eps = int(ctx.params["axis"]), float(ctx.params["epsilon"])
    r = len(x.shape)
    axes = tuple(range(axis, r))
    back = "{" + ",".join(str(i) for i in range(axis)) + "}"
    tail = "{" + ",".join(str(i) for i in axes) + "}"
    mean, _ = _hlo_reduce_over(w, ins[0], x, axes, "add", mean=True)
    d = w.emit("subtract", x, [ins[0], w.emit("broadcast", x, [mean], [("dimensions", back)])])
    var, vt = _hlo_reduce_over(w, w.emit("multiply", x, [d, d]), x, axes, "add", mean=True)
    sd = w.emit("sqrt", vt, [w.emit("add", vt, [var, _hlo_full(w, eps, vt)])])
    n = w.emit("divide", x, [d, w.emit("broadcast", x, [sd], [("dimensions", back)])])
    names = []
    for name, t in zip(ins[1:], ctx.inputs[1:], strict=True):
        if t.dtype != x.dtype:  # type: ignore[union-attr]
            name = w.emit("convert", TensorType(t.shape, x.dtype), [name])  # type: ignore[union-attr]
        names.append(w.emit("broadcast", x, [name], [("dimensions", tail)]))
    return w.emit("add", x, [w.emit("multiply", x, [n, names[0]]), names[1]])


def _hlo_global_avg_pool(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``reduce`` (add) over axes ``2..rank``, ``divide`` by their element count,
    ``reshape`` to ``[N, C, 1, ...]``."""
    x = ctx.inputs[0]
    assert isinstance(x, TensorType)
    r, rt = _hlo_reduce_over(w, ins[0], x, tuple(range(2, len(x.shape))), "add", mean=True)
    return w.reshape(r, rt, ctx.output.shape)  # type: ignore[union-attr]


def _hlo_broadcast_to(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``broadcast`` by NumPy's rule (size-1 axes that expand reshaped away first)."""
    return w.broadcast(ins[0], ctx.inputs[0], tuple(ctx.output.shape))  # type: ignore[union-attr]


def _slice_text(spec: Sequence[tuple[int, int, int]]) -> str:
    return "{" + ", ".join(f"[{a}:{b}]" if c == 1 else f"[{a}:{b}:{c}]" for a, b, c in spec) + "}"


def _hlo_slice_axis(w: Any, x: str, t: TensorType, axis: int, start: int, stop: int) -> str:
    """``x[..., start:stop, ...]`` on ``axis`` (HLO ``slice``); returns the name."""
    spec = [(0, d, 1) for d in t.shape]
    spec[axis] = (start, stop, 1)
    shape = tuple(stop - start if i == axis else d for i, d in enumerate(t.shape))
    return w.emit("slice", TensorType(shape, t.dtype), [x], [("slice", _slice_text(spec))])


def _hlo_slice(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``slice={[start:limit:stride], ...}`` with Python's bounds resolved; axes with a
    negative step are sliced ascending then ``reverse``d."""
    x = ctx.inputs[0]
    assert isinstance(x, TensorType)
    spec = [(0, d, 1) for d in x.shape]
    flip = []
    p = ctx.params
    for s, e, a, st in zip(p["starts"], p["ends"], p["axes"], p["steps"], strict=True):
        start, stop, step = slice(int(s), int(e), int(st)).indices(x.shape[int(a)])
        n = len(range(start, stop, step))
        if step < 0:
            start, step = start + (n - 1) * step, -step
            flip.append(int(a))
        spec[int(a)] = (start, start + (n - 1) * step + 1, step)
    out = w.emit("slice", ctx.output, [ins[0]], [("slice", _slice_text(spec))])
    if flip:
        dims = "{" + ",".join(str(a) for a in sorted(flip)) + "}"
        out = w.emit("reverse", ctx.output, [out], [("dimensions", dims)])
    return out


def _hlo_pad(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """``constant``: HLO ``pad(x, value), padding=lo_hi x ...``. ``edge`` and ``reflect``:
    axis by axis (as ``numpy.pad``), a ``concatenate`` of the border (``edge``: the first
    or last slice ``broadcast``; ``reflect``: a ``slice`` ``reverse``d, pads < the axis
    size) with the operand."""
    x = ctx.inputs[0]
    assert isinstance(x, TensorType)
    mode = str(ctx.params["mode"])
    pads = [int(v) for v in ctx.params["pads"]]
    r = len(x.shape)
    if mode == "constant":
        text = "x".join(f"{pads[i]}_{pads[r + i]}" for i in range(r))
        with np.errstate(all="ignore"):
            fill = np.asarray(float(ctx.params["value"])).astype(np_dtype(x.dtype))
        value = w.constant(fill.item() if fill.dtype != _BF16 else float(fill), x.dtype)
        return w.emit("pad", ctx.output, [ins[0], value], [("padding", text)])
    if mode not in ("edge", "reflect"):
        raise ValueError(f"pad mode `{mode}` has no HLO form")
    cur, t = ins[0], x
    for ax in range(r):
        lo, hi = pads[ax], pads[r + ax]
        if not lo and not hi:
            continue
        n = t.shape[ax]
        parts = []
        for count, first in ((lo, True), (hi, False)):
            if not count:
                parts.append(None)
                continue
            if mode == "edge":
                edge = (
                    _hlo_slice_axis(w, cur, t, ax, 0, 1)
                    if first
                    else _hlo_slice_axis(w, cur, t, ax, n - 1, n)
                )
                et = TensorType(tuple(1 if i == ax else d for i, d in enumerate(t.shape)), t.dtype)
                bt = TensorType(
                    tuple(count if i == ax else d for i, d in enumerate(t.shape)), t.dtype
                )
                parts.append(w.broadcast(edge, et, bt.shape))
            else:
                if count > n - 1:
                    raise ValueError(
                        f"reflect padding {count} on an axis of size {n} (HLO form: pads < size)"
                    )
                lo_i, hi_i = (1, count + 1) if first else (n - 1 - count, n - 1)
                piece = _hlo_slice_axis(w, cur, t, ax, lo_i, hi_i)
                pt = TensorType(
                    tuple(count if i == ax else d for i, d in enumerate(t.shape)), t.dtype
                )
                parts.append(w.emit("reverse", pt, [piece], [("dimensions", "{" + str(ax) + "}")]))
        names = [p for p in (parts[0], cur, parts[1]) if p is not None]
        t = TensorType(tuple(n + lo + hi if i == ax else d for i, d in enumerate(t.shape)), t.dtype)
        cur = w.emit("concatenate", t, names, [("dimensions", "{" + str(ax) + "}")])
    return cur


def _hlo_take(w: Any, x: str, t: TensorType, axis: int, indices: Sequence[int]) -> str:
    """``numpy.take(x, indices, axis)`` (indices in ``[0, dim)``) as HLO ``gather`` of
    slices of size 1 on ``axis`` (``collapsed_slice_dims={axis}``) at an ``s64``
    constant of indices (``index_vector_dim=1``: one index per row)."""
    r = len(t.shape)
    out = TensorType(
        tuple(len(indices) if i == axis else d for i, d in enumerate(t.shape)), t.dtype
    )
    idx = w.literal(np.asarray(list(indices), dtype=np.int64).reshape(-1, 1), "int64")
    sizes = "{" + ",".join("1" if i == axis else str(d) for i, d in enumerate(t.shape)) + "}"
    attrs = [
        ("offset_dims", "{" + ",".join(str(i) for i in range(r) if i != axis) + "}"),
        ("collapsed_slice_dims", "{" + str(axis) + "}"),
        ("start_index_map", "{" + str(axis) + "}"),
        ("index_vector_dim", "1"),
        ("slice_sizes", sizes),
    ]
    return w.emit("gather", out, [x, idx], attrs)


def _hlo_gather(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``gather`` of size-1 slices along ``axis`` at the constant indices (negative
    ones counted from the end first); see :func:`_hlo_take`."""
    x = ctx.inputs[0]
    assert isinstance(x, TensorType)
    axis = int(ctx.params["axis"])
    dim = x.shape[axis]
    ind = [int(i) % dim if -dim <= int(i) < dim else int(i) for i in ctx.params["indices"]]
    if any(not 0 <= i < dim for i in ind):
        raise ValueError(
            f"gather: an index of {list(ctx.params['indices'])} is outside [-{dim}, {dim})"
        )
    return _hlo_take(w, ins[0], x, axis, ind)


def _linear_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Linear resizing of one axis from ``n_in`` to ``n_out`` samples, ONNX ``Resize``'s
    ``half_pixel`` coordinates: output ``j`` reads input ``(j + 0.5) * n_in / n_out -
    0.5`` clamped to ``[0, n_in - 1]``. Returns the lower and upper source indices
    (int64, ``[n_out]``) and the upper one's weight (float64, ``[n_out]``), which
    :func:`_resize` and its HLO form share."""
    src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
    src = np.clip(src, 0.0, n_in - 1)
    i0 = np.floor(src).astype(np.int64)
    return i0, np.minimum(i0 + 1, n_in - 1), src - i0


def _hlo_resize(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """Axis by axis, as ``evaluate``: ``nearest`` a ``gather`` of positions
    ``floor(d * in / out)``; ``linear`` two ``gather``s (the taps ``i0``, ``i1`` at
    ``src = (d + 0.5) * in / out - 0.5`` clamped to ``[0, in - 1]``) blended with
    constant weights ``a * (1 - f) + b * f`` (weights broadcast along the axis), computed
    in ``f32`` for float16/bfloat16/float32 and ``f64`` for float64 and integers
    (rounded to nearest even, then converted back)."""
    x = ctx.inputs[0]
    assert isinstance(x, TensorType)
    sizes = tuple(int(v) for v in ctx.params["sizes"])
    mode = str(ctx.params["mode"])
    cur, t = ins[0], x
    if mode == "nearest":
        for ax, (n_in, n_out) in enumerate(zip(x.shape, sizes, strict=True)):
            if n_in != n_out:
                cur = _hlo_take(w, cur, t, ax, (np.arange(n_out) * n_in // n_out).tolist())
                t = TensorType(
                    tuple(n_out if i == ax else d for i, d in enumerate(t.shape)), t.dtype
                )
        return cur
    if mode != "linear":
        raise ValueError(f"resize mode `{mode}` has no HLO form")
    dt = np_dtype(x.dtype)
    work = "float64" if dt == np.float64 or not _is_float(dt) else "float32"
    if work != x.dtype:
        t = TensorType(x.shape, work)
        cur = w.emit("convert", t, [cur])
    for ax, (n_in, n_out) in enumerate(zip(x.shape, sizes, strict=True)):
        if n_in == n_out:
            continue
        i0, i1, frac = _linear_taps(n_in, n_out)
        a = _hlo_take(w, cur, t, ax, i0.tolist())
        b = _hlo_take(w, cur, t, ax, i1.tolist())
        t = TensorType(tuple(n_out if i == ax else d for i, d in enumerate(t.shape)), work)
        dims = [("dimensions", "{" + str(ax) + "}")]
        wa = w.emit("broadcast", t, [w.literal(1.0 - frac, work)], dims)
        wb = w.emit("broadcast", t, [w.literal(frac, work)], dims)
        cur = w.emit("add", t, [w.emit("multiply", t, [a, wa]), w.emit("multiply", t, [b, wb])])
    if not _is_float(dt):
        cur = w.emit("round-nearest-even", t, [cur])
    if work != x.dtype:
        cur = w.emit("convert", ctx.output, [cur])
    return cur


def _hlo_cast(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``convert`` (float to integer truncates toward zero; to ``pred``: ``x != 0``)."""
    return w.emit("convert", ctx.output, [ins[0]])


# ------------------------------------------------------------------ binary elementwise
def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C / ONNX ``Div``); x / 0 gives 0."""
    with np.errstate(all="ignore"):
        q = np.floor_divide(a, b)
        r = np.remainder(a, b)
    fix = (r != 0) & ((a < 0) != (b < 0))
    return (q + fix.astype(q.dtype)).astype(np.result_type(a, b), copy=False)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_float(np.result_type(a, b)):
        with np.errstate(all="ignore"):
            return np.divide(a, b)
    if a.dtype == np.bool_:
        raise ValueError("div: bool operands")
    return _int_div(a, b)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dt = np.result_type(a, b)
    with np.errstate(all="ignore"):
        if _is_float(dt):
            return np.power(a, b)
        if dt == np.bool_:
            raise ValueError("pow: bool operands")
        if np.any(b < 0):
            # onnxruntime: static_cast<T>(std::pow(double(a), double(b))).
            return np.power(a.astype(np.float64), b.astype(np.float64)).astype(dt)
        return np.power(a, b)


# name -> (NumPy function, ONNX op, description, HLO form)
_BINARY: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], str, str, ToHlo]] = {
    "add": (np.add, "Add", "a + b", _hlo_ew("add")),
    "sub": (np.subtract, "Sub", "a - b", _hlo_ew("subtract")),
    "mul": (np.multiply, "Mul", "a * b", _hlo_ew("multiply")),
    "div": (
        _div,
        "Div",
        "a / b; integers truncate toward zero (C semantics), x / 0 gives 0",
        _hlo_ew("divide"),
    ),
    "pow": (
        _pow,
        "Pow",
        "a ** b (the base's dtype); integer ** negative = trunc(float pow)",
        _hlo_ew("power"),
    ),
    "max": (
        np.maximum,
        "Max",
        "elementwise maximum (NaN propagates), numpy.maximum",
        _hlo_ew("maximum"),
    ),
    "min": (
        np.minimum,
        "Min",
        "elementwise minimum (NaN propagates), numpy.minimum",
        _hlo_ew("minimum"),
    ),
}

_COMPARE: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], str, str, ToHlo]] = {
    "equal": (np.equal, "Equal", "a == b", _hlo_compare("EQ")),
    "less": (np.less, "Less", "a < b", _hlo_compare("LT")),
    "less_equal": (np.less_equal, "LessOrEqual", "a <= b", _hlo_compare("LE")),
    "greater": (np.greater, "Greater", "a > b", _hlo_compare("GT")),
    "greater_equal": (np.greater_equal, "GreaterOrEqual", "a >= b", _hlo_compare("GE")),
}


def _make_binary(
    name: str, fn: Callable, onnx_op: str, what: str, to_hlo: ToHlo, compare: bool
) -> None:
    def evaluate(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
        a, b = np.asarray(args[0]), np.asarray(args[1])
        return np.asarray(fn(a, b))

    out = "bool" if compare else "a's dtype (equal to b's; a float64 array stays float64)"
    evaluate.__doc__ = (
        f"``{name}(a, b)``: {what}, elementwise with NumPy/ONNX multidirectional broadcasting.\n\n"
        f"Shapes: a and b broadcast (right-aligned, dims 1 or equal); out = the broadcast "
        f"shape. dtype: a and b equal; out {out}. Errors: the type rule rejects "
        f"non-broadcastable shapes and unequal dtypes. Source: ONNX ``{onnx_op}`` (opset 13+)."
    )
    _op(
        name,
        evaluate,
        _elementwise_cost(1),
        _simple_onnx(onnx_op),
        (onnx_op,),
        to_hlo=to_hlo,
        fusion="elementwise",
        commutative=name in _COMMUTATIVE,
    )


#: Binary operators whose operands commute (``OpDef.commutative``).
_COMMUTATIVE = frozenset(("add", "mul", "max", "min", "equal"))

for _n, (_f, _o, _w, _h) in _BINARY.items():
    _make_binary(_n, _f, _o, _w, _h, compare=False)
for _n, (_f, _o, _w, _h) in _COMPARE.items():
    _make_binary(_n, _f, _o, _w, _h, compare=True)


def _select(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``select(cond, a, b)``: ``a`` where ``cond`` else ``b`` (``numpy.where``).

    Shapes: the three broadcast (NumPy rules); out = the broadcast shape. dtype: cond
    bool, a and b equal; out a's. Source: ONNX ``Where``, HLO ``select``.
    """
    c, a, b = (np.asarray(v) for v in args)
    return np.where(c.astype(bool, copy=False), a, b)


_op(
    "select",
    _select,
    _elementwise_cost(1),
    _simple_onnx("Where"),
    ("Where",),
    to_hlo=_hlo_ew("select"),
    fusion="elementwise",
)


# ----------------------------------------------------------------------------- unary
_SQRT2 = math.sqrt(2.0)
_erf_obj = np.frompyfunc(math.erf, 1, 1)


def _erf64(x: np.ndarray) -> np.ndarray:
    """erf of a float64 array, correctly rounded per element (``math.erf``)."""
    return np.asarray(_erf_obj(x), dtype=np.float64).reshape(np.shape(x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(np.sqrt(x))


def _rounded_to(value: float, dtype: str) -> float:
    """``value`` rounded to the float dtype ``dtype``, as ONNX ``Gelu``'s function body casts
    its constants to X's type (``CastLike``; float32 sqrt(2): 1.4142135381698608); unchanged
    for an unknown or non-float dtype."""
    try:
        dt = np.dtype(np_dtype(dtype))
    except (KeyError, ValueError, TypeError):
        return value
    return float(np.asarray(value, dtype=dt)) if _is_float(dt) else value


def _gelu(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``gelu(x)``: ``0.5 * x * (1 + erf(x / sqrt(2)))`` elementwise (exact GELU), with
    sqrt(2) rounded to x's declared dtype as in ONNX ``Gelu``'s function body (opset 20:
    ``Div(X, Sqrt(CastLike(2, X)))``), which is also what exporters write before opset 20.

    Shape and dtype: x's. Computed in float64 and rounded once. Source: ONNX ``Gelu``
    (approximate="none")."""
    x = np.asarray(args[0])
    declared = getattr(ctx.inputs[0], "dtype", str(x.dtype)) if ctx.inputs else str(x.dtype)
    s = _rounded_to(_SQRT2, declared)
    return _via(x, lambda v: 0.5 * v * (1.0 + _erf64(v / s)), True)


#: The tanh approximation's constants as written by ONNX ``Gelu``'s function body
#: (approximate="tanh", opset 20): 0.044715 and sqrt(2 / pi).
_GELU_TANH_CUBE = 0.044715
_GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)


def _gelu_tanh(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``gelu_tanh(x)``: ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``
    elementwise (GELU's tanh approximation, GPT-2's ``gelu_new``), with both constants
    rounded to x's declared dtype as ONNX ``Gelu``'s function body casts them (float32:
    0.044714998453855515 and 0.7978845834732056).

    Shape and dtype: x's. Computed in float64 and rounded once. Source: ONNX ``Gelu``
    (approximate="tanh", opset 20); Hendrycks and Gimpel, "Gaussian Error Linear Units"
    (2016), section 2."""
    x = np.asarray(args[0])
    declared = getattr(ctx.inputs[0], "dtype", str(x.dtype)) if ctx.inputs else str(x.dtype)
    c, k = _rounded_to(_GELU_TANH_CUBE, declared), _rounded_to(_GELU_TANH_SCALE, declared)
    return _via(x, lambda v: 0.5 * v * (1.0 + np.tanh(k * (v + c * v * v * v))), True)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.maximum(0, np.minimum(1, x / 6 + 0.5))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


# name -> (function on a float working array, wide, FLOP factor, ONNX op, description,
# HLO form)
_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], bool, float, str, str, ToHlo]] = {
    "exp": (np.exp, False, 1, "Exp", "e ** x", _hlo_unary("exponential")),
    "log": (
        np.log,
        False,
        1,
        "Log",
        "natural logarithm (log 0 = -inf, log x<0 = NaN)",
        _hlo_unary("log"),
    ),
    "sqrt": (np.sqrt, False, 1, "Sqrt", "square root (NaN below 0)", _hlo_unary("sqrt")),
    "rsqrt": (
        _rsqrt,
        False,
        1,
        "Sqrt",
        "1 / sqrt(x) (ONNX: Reciprocal(Sqrt(x)))",
        _hlo_unary("rsqrt"),
    ),
    "reciprocal": (
        np.reciprocal,
        False,
        1,
        "Reciprocal",
        "1 / x",
        _hlo_float(_reciprocal_hlo, "HLO ``divide(1, x)``."),
    ),
    "erf": (
        _erf64,
        True,
        4,
        "Erf",
        "the error function (math.erf per element)",
        _hlo_unary("erf"),
    ),
    "hard_swish": (
        _hard_swish,
        False,
        4,
        "HardSwish",
        "x * max(0, min(1, x / 6 + 0.5))",
        _hlo_float(_hard_swish_hlo, "``x * max(0, min(1, x / 6 + 0.5))`` in HLO."),
    ),
    "softplus": (
        _softplus,
        False,
        3,
        "Softplus",
        "log(1 + exp(x)), overflow-free",
        _hlo_float(_softplus_hlo, "``max(x, 0) + log-plus-one(exp(-|x|))``."),
    ),
}


def _make_unary(name: str, fn: Callable, wide: bool, onnx_op: str, what: str) -> Callable:
    def evaluate(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
        return _via(np.asarray(args[0]), fn, wide)

    evaluate.__doc__ = (
        f"``{name}(x)``: {what}, elementwise.\n\nShape and dtype: x's. float16/bfloat16 "
        f"are computed in {'float64' if wide else 'float32'} and rounded once; integer "
        f"operands in float64, truncated back. Source: ONNX ``{onnx_op}``."
    )
    return evaluate


def _neg(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``neg(x)``: -x elementwise (integers wrap). Shape and dtype: x's. Source: ONNX ``Neg``."""
    return np.negative(np.asarray(args[0]))


def _abs(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``abs(x)``: |x| elementwise (integers wrap at the minimum).

    Shape and dtype: x's. Source: ONNX ``Abs``."""
    return np.abs(np.asarray(args[0]))


_op(
    "neg",
    _neg,
    _elementwise_cost(1),
    _simple_onnx("Neg"),
    ("Neg",),
    to_hlo=_hlo_ew("negate"),
    fusion="elementwise",
)
_op(
    "abs",
    _abs,
    _elementwise_cost(1),
    _simple_onnx("Abs"),
    ("Abs",),
    to_hlo=_hlo_ew("abs"),
    fusion="elementwise",
)


def _rsqrt_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Reciprocal(Sqrt(x))``."""
    s = w.fresh("rsqrt_sqrt")
    w.emit("Sqrt", [ins[0]], [s])
    w.emit("Reciprocal", [s], [out])


def _gelu_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Gelu`` (opset >= 20), else ``Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)``."""
    if w.opset >= 20:
        w.emit("Gelu", [ins[0]], [out])
        return
    dt = ctx.inputs[0].dtype
    t, e, p, m = (w.fresh(f"gelu_{s}") for s in ("div", "erf", "add", "mul"))
    w.emit("Div", [ins[0], _const(w, _SQRT2, dt, "sqrt2")], [t])
    w.emit("Erf", [t], [e])
    w.emit("Add", [e, _const(w, 1.0, dt, "one")], [p])
    w.emit("Mul", [ins[0], p], [m])
    w.emit("Mul", [m, _const(w, 0.5, dt, "half")], [out])


def _gelu_tanh_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Gelu(approximate="tanh")`` (opset >= 20), else the chain onnxruntime's
    FastGeluFusion (``fast_gelu_fusion.cc``, its first formula) fuses into one
    ``FastGelu`` kernel: ``Mul(Mul(x, 0.5), Add(Tanh(Mul(Mul(x, 0.7978845834732056),
    Add(Mul(Mul(x, 0.044715), x), 1))), 1))``. onnxruntime 1.32 does not fuse the chain
    when its result is a model output."""
    if w.opset >= 20:
        w.emit("Gelu", [ins[0]], [out], approximate="tanh")
        return
    dt = ctx.inputs[0].dtype
    x = ins[0]
    m1, m2, a1, m4, m3, t, a2, m6 = (
        w.fresh(f"gelu_tanh_{s}") for s in ("c", "cx", "one", "k", "arg", "tanh", "add", "half")
    )
    w.emit("Mul", [x, _const(w, _GELU_TANH_CUBE, dt, "gelu_cube")], [m1])
    w.emit("Mul", [m1, x], [m2])
    w.emit("Add", [m2, _const(w, 1.0, dt, "one")], [a1])
    w.emit("Mul", [x, _const(w, _GELU_TANH_SCALE, dt, "gelu_scale")], [m4])
    w.emit("Mul", [m4, a1], [m3])
    w.emit("Tanh", [m3], [t])
    w.emit("Add", [t, _const(w, 1.0, dt, "one")], [a2])
    w.emit("Mul", [x, _const(w, 0.5, dt, "half")], [m6])
    w.emit("Mul", [m6, a2], [out])


def _hard_swish_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``HardSwish`` (opset >= 14), else ``Mul(x, HardSigmoid(x, 1/6, 0.5))``."""
    if w.opset >= 14:
        w.emit("HardSwish", [ins[0]], [out])
        return
    h = w.fresh("hard_swish_hs")
    w.emit("HardSigmoid", [ins[0]], [h], alpha=1.0 / 6.0, beta=0.5)
    w.emit("Mul", [ins[0], h], [out])


_UNARY_ONNX = {"rsqrt": _rsqrt_onnx, "hard_swish": _hard_swish_onnx}

for _n, (_f, _wide, _k, _o, _w, _h) in _UNARY.items():
    _op(
        _n,
        _make_unary(_n, _f, _wide, _o, _w),
        _elementwise_cost(_k),
        _UNARY_ONNX.get(_n, _simple_onnx(_o)),
        () if _n == "rsqrt" else (_o,),
        to_hlo=_h,
        fusion="elementwise",
    )
_op(
    "gelu",
    _gelu,
    _elementwise_cost(6),
    _gelu_onnx,
    ("Gelu",),
    to_hlo=_hlo_gelu,
    fusion="elementwise",
)
_op(
    "gelu_tanh",
    _gelu_tanh,
    _elementwise_cost(8),
    _gelu_tanh_onnx,
    ("Gelu",),
    to_hlo=_hlo_gelu_tanh,
    fusion="elementwise",
)


# ------------------------------------------------------- clip, hard_sigmoid, leaky_relu
def _int_bounds(dt: np.dtype, lo: float, hi: float) -> tuple[int, int]:
    info = np.iinfo(dt)
    ilo = info.min if lo == -math.inf else max(info.min, min(info.max, math.ceil(lo)))
    ihi = info.max if hi == math.inf else max(info.min, min(info.max, math.floor(hi)))
    return int(ilo), int(ihi)


def _clip(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``clip(x, lo, hi)``: ``min(max(x, lo), hi)`` elementwise (lo > hi gives hi).

    Shape and dtype: x's. ``lo``/``hi`` are floats (``-inf``/``inf`` = no bound); for
    integer x they act as ``ceil(lo)``/``floor(hi)`` clamped to the dtype's range.
    Source: ONNX ``Clip`` (opset 11+: min/max inputs), ``numpy.clip`` order of operations.
    """
    x = np.asarray(args[0])
    lo, hi = float(ctx.params["lo"]), float(ctx.params["hi"])
    if x.dtype == np.bool_:
        raise ValueError("clip: bool operand")
    if _is_float(x.dtype):
        lo_v, hi_v = np.asarray(lo, x.dtype), np.asarray(hi, x.dtype)
    else:
        ilo, ihi = _int_bounds(x.dtype, lo, hi)
        lo_v, hi_v = np.asarray(ilo, x.dtype), np.asarray(ihi, x.dtype)
    return np.minimum(np.maximum(x, lo_v), hi_v)


def _clip_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Clip(x, min, max)`` with constant bounds of x's dtype (infinite: omitted)."""
    dt = ctx.inputs[0].dtype
    lo, hi = float(ctx.params["lo"]), float(ctx.params["hi"])
    if not _is_float(np_dtype(dt)):
        ilo, ihi = _int_bounds(np_dtype(dt), lo, hi)
        lo_n, hi_n = _const(w, ilo, dt, "clip_min"), _const(w, ihi, dt, "clip_max")
    else:
        lo_n = "" if lo == -math.inf else _const(w, lo, dt, "clip_min")
        hi_n = "" if hi == math.inf else _const(w, hi, dt, "clip_max")
    inputs = [ins[0], lo_n, hi_n]
    while inputs[-1] == "":
        inputs.pop()
    w.emit("Clip", inputs, [out])


_op(
    "clip",
    _clip,
    _elementwise_cost(1),
    _clip_onnx,
    ("Clip",),
    to_hlo=_hlo_clip,
    fusion="elementwise",
)


def _hard_sigmoid(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``hard_sigmoid(x, alpha, beta)``: ``max(0, min(1, alpha * x + beta))``.

    Shape and dtype: x's (float). Source: ONNX ``HardSigmoid`` (defaults alpha 0.2, beta 0.5).
    """
    a, b = float(ctx.params["alpha"]), float(ctx.params["beta"])
    return _via(np.asarray(args[0]), lambda x: np.maximum(0, np.minimum(1, a * x + b)))


def _hard_sigmoid_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``HardSigmoid`` with ``alpha``, ``beta``."""
    w.emit(
        "HardSigmoid",
        [ins[0]],
        [out],
        alpha=float(ctx.params["alpha"]),
        beta=float(ctx.params["beta"]),
    )


_op(
    "hard_sigmoid",
    _hard_sigmoid,
    _elementwise_cost(3),
    _hard_sigmoid_onnx,
    ("HardSigmoid",),
    to_hlo=_hlo_hard_sigmoid,
    fusion="elementwise",
)


def _leaky_relu(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``leaky_relu(x, alpha)``: ``x if x >= 0 else alpha * x``.

    Shape and dtype: x's (float). Source: ONNX ``LeakyRelu`` (default alpha 0.01).
    """
    a = float(ctx.params["alpha"])
    return _via(np.asarray(args[0]), lambda x: np.where(x >= 0, x, a * x))


def _leaky_relu_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``LeakyRelu`` with ``alpha``."""
    w.emit("LeakyRelu", [ins[0]], [out], alpha=float(ctx.params["alpha"]))


_op(
    "leaky_relu",
    _leaky_relu,
    _elementwise_cost(1),
    _leaky_relu_onnx,
    ("LeakyRelu",),
    to_hlo=_hlo_leaky_relu,
    fusion="elementwise",
)


# -------------------------------------------------------------------------- reductions
def _axes(ctx: OpContext, rank: int) -> tuple[int, ...]:
    axes = tuple(int(a) for a in ctx.params["axes"])
    if not axes or list(axes) != sorted(set(axes)) or axes[0] < 0 or axes[-1] >= rank:
        raise ValueError(f"{ctx.op}: axes {list(axes)} are not sorted distinct axes < {rank}")
    return axes


def _reduce_fn(kind: str) -> Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]:
    def sum_(x, axes, keep):
        if x.dtype in _HALF:
            return x.astype(np.float32).sum(axis=axes, keepdims=keep).astype(x.dtype)
        return np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)

    def prod_(x, axes, keep):
        if x.dtype in _HALF:
            return x.astype(np.float32).prod(axis=axes, keepdims=keep).astype(x.dtype)
        return np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)

    def mean_(x, axes, keep):
        n = math.prod(x.shape[a] for a in axes)
        if _is_float(x.dtype):
            return _via(x, lambda v: np.mean(v, axis=axes, keepdims=keep))
        s = np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
        return _int_div(s, np.asarray(n, dtype=x.dtype))

    def max_(x, axes, keep):
        return np.max(x, axis=axes, keepdims=keep)

    def min_(x, axes, keep):
        return np.min(x, axis=axes, keepdims=keep)

    return {"sum": sum_, "mean": mean_, "max": max_, "min": min_, "prod": prod_}[kind]


# name -> (kind, ONNX op, description, HLO reduce computation's opcode)
_REDUCE = {
    "reduce_sum": ("sum", "ReduceSum", "sum (float16/bfloat16 accumulate in float32)", "add"),
    "reduce_mean": (
        "mean",
        "ReduceMean",
        "arithmetic mean (integers: sum / n truncated)",
        "add",
    ),
    "reduce_max": ("max", "ReduceMax", "maximum", "maximum"),
    "reduce_min": ("min", "ReduceMin", "minimum", "minimum"),
    "reduce_prod": ("prod", "ReduceProd", "product", "multiply"),
}


def _emit_reduce(
    w: Any, onnx_op: str, x: str, axes: Sequence[int], keepdims: int, out: str
) -> None:
    """``onnx_op`` over ``axes``: axes as an input where the opset wants one (ReduceSum
    from opset 13, the other reductions from opset 18), else as an attribute."""
    if w.opset >= 18 or (onnx_op == "ReduceSum" and w.opset >= 13):
        w.emit(onnx_op, [x, _ints(w, axes, "axes")], [out], keepdims=int(keepdims))
    else:
        w.emit(onnx_op, [x], [out], axes=[int(a) for a in axes], keepdims=int(keepdims))


def _make_reduce(name: str, kind: str, onnx_op: str, what: str, hlo_opcode: str) -> None:
    fn = _reduce_fn(kind)

    def evaluate(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
        x = np.asarray(args[0])
        axes = _axes(ctx, x.ndim)
        return np.asarray(fn(x, axes, bool(int(ctx.params["keepdims"]))))

    evaluate.__doc__ = (
        f"``{name}(x, axes, keepdims)``: the {what} over ``axes``.\n\nShapes: axes are "
        f"non-empty, sorted, distinct, non-negative and < rank (front ends normalise; "
        f"ONNX's 'all axes' is the full list); out drops them (keepdims 0) or keeps them as "
        f"1 (keepdims 1). dtype: x's. Errors: ``ValueError`` on malformed axes. Source: "
        f"ONNX ``{onnx_op}``; NumPy ``numpy.{kind}``."
    )

    def to_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
        _emit_reduce(w, onnx_op, ins[0], ctx.params["axes"], int(ctx.params["keepdims"]), out)

    to_onnx.__doc__ = f"ONNX ``{onnx_op}`` (axes input or attribute by opset)."
    extra = ("GlobalMaxPool",) if onnx_op == "ReduceMax" else ()
    _op(
        name,
        evaluate,
        _per_input_cost(1),
        to_onnx,
        (onnx_op, *extra),
        to_hlo=_hlo_reduce(hlo_opcode),
        fusion="reduce",
    )


for _n, (_k, _o, _w, _h) in _REDUCE.items():
    _make_reduce(_n, _k, _o, _w, _h)


# ----------------------------------------------------------- softmax and normalisation
def _softmax(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``softmax(x, axis)``: ``exp(x - max) / sum(exp(x - max))`` over one axis.

    Shape and dtype: x's; axis non-negative < rank. Computed in float64, rounded back.
    Source: ONNX ``Softmax`` (opset 13 semantics: a single axis).
    """
    x = np.asarray(args[0])
    axis = int(ctx.params["axis"])
    if not 0 <= axis < x.ndim:
        raise ValueError(f"softmax: axis {axis} is not in [0, {x.ndim})")

    def f(v: np.ndarray) -> np.ndarray:
        e = np.exp(v - np.max(v, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)

    return _via(x, f, wide=True)


def _softmax_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Softmax(axis)``."""
    w.emit("Softmax", [ins[0]], [out], axis=int(ctx.params["axis"]))


_op(
    "softmax",
    _softmax,
    _per_input_cost(5),
    _softmax_onnx,
    ("Softmax",),
    to_hlo=_hlo_softmax,
    fusion="reduce",
)


def _layer_norm(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``layer_norm(x, scale, bias, axis, epsilon)``: normalise over axes ``[axis, rank)``.

    ``y = (x - mean) / sqrt(var + epsilon) * scale + bias`` with the population
    variance. Shapes: scale and bias have shape ``x.shape[axis:]``; out = x's. dtype: x's
    (computed in float64, rounded back). Source: ONNX ``LayerNormalization`` (opset 17,
    output Y; stash_type has no effect on this reference).
    """
    x, scale, bias = (np.asarray(v) for v in args)
    axis = int(ctx.params["axis"])
    eps = float(ctx.params["epsilon"])
    if not 0 <= axis < x.ndim:
        raise ValueError(f"layer_norm: axis {axis} is not in [0, {x.ndim})")
    axes = tuple(range(axis, x.ndim))
    s = scale.astype(np.float64)
    b = bias.astype(np.float64)

    def f(v: np.ndarray) -> np.ndarray:
        mean = np.mean(v, axis=axes, keepdims=True)
        d = v - mean
        var = np.mean(d * d, axis=axes, keepdims=True)
        return d / np.sqrt(var + eps) * s + b

    if _is_float(x.dtype) and all(_is_float(v.dtype) for v in (scale, bias)):
        # a wider scale/bias (mixed-precision verification) widens the result
        wider = max((x.dtype, scale.dtype, bias.dtype), key=lambda d: d.itemsize)
        if wider != x.dtype:
            with np.errstate(all="ignore"):
                return f(x.astype(np.float64)).astype(wider)
    return _via(x, f, wide=True)


def _layer_norm_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``LayerNormalization`` (opset >= 17), else its expansion as exporters write it
    (ReduceMean, Sub, Pow 2, ReduceMean, Add, Sqrt, Div, Mul, Add), the form onnxruntime's
    LayerNormFusion turns back into one kernel (with ``Mul(d, d)`` for the square it does
    not)."""
    axis, eps = int(ctx.params["axis"]), float(ctx.params["epsilon"])
    if w.opset >= 17:
        w.emit("LayerNormalization", list(ins), [out], axis=axis, epsilon=eps)
        return
    x, scale, bias = ins
    axes = list(range(axis, len(ctx.inputs[0].shape)))
    mean, d, d2, var, ve, sd, n, s = (
        w.fresh(f"ln_{k}") for k in ("mean", "d", "d2", "var", "ve", "sd", "n", "s")
    )
    _emit_reduce(w, "ReduceMean", x, axes, 1, mean)
    w.emit("Sub", [x, mean], [d])
    w.emit("Pow", [d, _const(w, 2.0, ctx.inputs[0].dtype, "ln_two")], [d2])
    _emit_reduce(w, "ReduceMean", d2, axes, 1, var)
    w.emit("Add", [var, _const(w, eps, ctx.inputs[0].dtype, "ln_eps")], [ve])
    w.emit("Sqrt", [ve], [sd])
    w.emit("Div", [d, sd], [n])
    w.emit("Mul", [n, scale], [s])
    w.emit("Add", [s, bias], [out])


_op(
    "layer_norm",
    _layer_norm,
    _per_input_cost(8),
    _layer_norm_onnx,
    ("LayerNormalization",),
    to_hlo=_hlo_layer_norm,
    fusion="reduce",
)


def _global_avg_pool(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``global_avg_pool(x)``: mean over the spatial axes ``2..rank``, kept as 1.

    Shapes: x ``[N, C, d1, ...]`` (rank >= 3) -> ``[N, C, 1, ...]``. dtype: x's (float).
    Source: ONNX ``GlobalAveragePool``.
    """
    x = np.asarray(args[0])
    if x.ndim < 3:
        raise ValueError(f"global_avg_pool: rank {x.ndim} < 3")
    axes = tuple(range(2, x.ndim))
    return _via(x, lambda v: np.mean(v, axis=axes, keepdims=True))


_op(
    "global_avg_pool",
    _global_avg_pool,
    _per_input_cost(1),
    _simple_onnx("GlobalAveragePool"),
    ("GlobalAveragePool",),
    to_hlo=_hlo_global_avg_pool,
    fusion="reduce",
)


# -------------------------------------------------------------------- data movement
def _broadcast_to(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``broadcast_to(x, shape)``: ``numpy.broadcast_to`` (materialised, writeable).

    Shapes: x's shape right-aligned against ``shape``, each dim 1 or equal. dtype: x's.
    Errors: ``ValueError`` when x does not broadcast to ``shape``. Source: NumPy
    ``broadcast_to``; ONNX ``Expand`` (whose result shape is the broadcast of both).
    """
    x = np.asarray(args[0])
    return np.array(np.broadcast_to(x, tuple(int(d) for d in ctx.params["shape"])))


def _broadcast_to_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Expand(x, shape)``."""
    w.emit("Expand", [ins[0], _ints(w, ctx.params["shape"], "shape")], [out])


_op(
    "broadcast_to",
    _broadcast_to,
    _move_cost,
    _broadcast_to_onnx,
    ("Expand",),
    to_hlo=_hlo_broadcast_to,
    fusion="broadcast",
)


def _slices(ctx: OpContext, ndim: int) -> tuple[slice, ...]:
    p = ctx.params
    starts, ends, axes, steps = (
        tuple(int(v) for v in p[k]) for k in ("starts", "ends", "axes", "steps")
    )
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ValueError("slice: starts, ends, axes and steps differ in length")
    if len(set(axes)) != len(axes) or any(not 0 <= a < ndim for a in axes):
        raise ValueError(f"slice: axes {list(axes)} are not distinct axes in [0, {ndim})")
    if any(s == 0 for s in steps):
        raise ValueError("slice: step 0")
    idx = [slice(None)] * ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        idx[a] = slice(s, e, st)
    return tuple(idx)


def _slice(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``slice(x, starts, ends, axes, steps)``: Python slicing per listed axis.

    For each listed axis, the kept positions are ``range(*slice(start, end,
    step).indices(dim))``: negative start/end count from the end, out-of-range values
    clamp, step != 0 (negative allowed). Other axes are kept whole. Shapes: the four
    lists have equal lengths; axes non-negative and distinct; out dim = len of the range.
    dtype: x's. Errors: ``ValueError``. Source: ONNX ``Slice`` (after normalisation);
    Python ``slice.indices``.
    """
    x = np.asarray(args[0])
    return x[_slices(ctx, x.ndim)]


def _slice_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Slice(x, starts, ends, axes, steps)`` with int64 constants.

    A negative-step slice that runs to the front has end ``-dim-1`` in ONNX (``-1``
    after adding dim: before the first element), the same as Python."""
    p = ctx.params
    names = [_ints(w, p[k], k) for k in ("starts", "ends", "axes", "steps")]
    w.emit("Slice", [ins[0], *names], [out])


_op("slice", _slice, _move_cost, _slice_onnx, ("Slice",), to_hlo=_hlo_slice, fusion="reshape")

_PAD_MODES = ("constant", "reflect", "edge")


def _pad(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``pad(x, pads, mode, value)``: ``numpy.pad`` with ONNX's pads order.

    ``pads = [b_0, ..., b_{r-1}, e_0, ..., e_{r-1}]`` (before/after per axis),
    non-negative; ``mode`` is ``constant`` (filled with ``value`` converted to x's dtype,
    truncating for integers), ``reflect`` or ``edge`` (NumPy's modes of the same names).
    Shapes: out dim i = dim i + b_i + e_i. dtype: x's. Errors: ``ValueError`` on a bad
    pads length, negative pads or an unknown mode. Source: ONNX ``Pad``; ``numpy.pad``.
    """
    x = np.asarray(args[0])
    pads = tuple(int(v) for v in ctx.params["pads"])
    mode = str(ctx.params["mode"])
    r = x.ndim
    if len(pads) != 2 * r or any(v < 0 for v in pads):
        raise ValueError(f"pad: pads {list(pads)} are not 2*{r} non-negative integers")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode `{mode}` is not one of {', '.join(_PAD_MODES)}")
    width = list(zip(pads[:r], pads[r:], strict=True))
    if mode == "constant":
        with np.errstate(all="ignore"):
            fill = np.asarray(float(ctx.params["value"])).astype(x.dtype)
        return np.pad(x, width, mode="constant", constant_values=fill)
    return np.pad(x, width, mode=mode)


def _pad_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Pad(x, pads[, constant_value])`` with ``mode``."""
    mode = str(ctx.params["mode"])
    inputs = [ins[0], _ints(w, ctx.params["pads"], "pads")]
    if mode == "constant":
        dt = np_dtype(ctx.inputs[0].dtype)
        with np.errstate(all="ignore"):
            fill = np.asarray(float(ctx.params["value"])).astype(dt)
        inputs.append(w.const(fill, "pad_value"))
    w.emit("Pad", inputs, [out], mode=mode)


_op("pad", _pad, _move_cost, _pad_onnx, ("Pad",), to_hlo=_hlo_pad, fusion="reshape")


def _gather(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``gather(x, axis, indices)``: ``numpy.take(x, indices, axis)``.

    Constant indices, each in ``[-dim, dim)`` (negative counts from the end). Shapes:
    out = ``x.shape[:axis] + [len(indices)] + x.shape[axis+1:]``. dtype: x's. Errors:
    ``ValueError`` on an axis or index out of range. Source: ONNX ``Gather`` (a scalar
    index is gather of one index + reshape); ``numpy.take``.
    """
    x = np.asarray(args[0])
    axis = int(ctx.params["axis"])
    if not 0 <= axis < x.ndim:
        raise ValueError(f"gather: axis {axis} is not in [0, {x.ndim})")
    ind = np.asarray([int(i) for i in ctx.params["indices"]], dtype=np.int64)
    dim = x.shape[axis]
    if ind.size and (ind.min() < -dim or ind.max() >= dim):
        raise ValueError(f"gather: an index of {ind.tolist()} is outside [-{dim}, {dim})")
    return np.take(x, ind, axis=axis)


def _gather_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Gather(x, indices)`` with a 1-D int64 constant and ``axis``."""
    w.emit(
        "Gather",
        [ins[0], _ints(w, ctx.params["indices"], "indices")],
        [out],
        axis=int(ctx.params["axis"]),
    )


_op("gather", _gather, _move_cost, _gather_onnx, ("Gather",), to_hlo=_hlo_gather)


def _resize(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``resize(x, sizes, mode)``: resample x to the full output shape ``sizes``.

    ``nearest``: output position d of an axis reads ``floor(d * in / out)`` (ONNX
    coordinate_transformation_mode=asymmetric, nearest_mode=floor, computed exactly in
    integers). ``linear``: n-linear interpolation, separable per axis, at ``src = (d +
    0.5) * in / out - 0.5`` clamped to ``[0, in - 1]`` (ONNX half_pixel); computed in
    float64 and rounded back (integers: to nearest). Axes whose size does not change are
    untouched. Shapes: len(sizes) = rank, sizes positive. dtype: x's. Errors:
    ``ValueError``. Source: ONNX ``Resize`` (opset 13+).
    """
    x = np.asarray(args[0])
    sizes = tuple(int(v) for v in ctx.params["sizes"])
    mode = str(ctx.params["mode"])
    if len(sizes) != x.ndim or any(s <= 0 for s in sizes):
        raise ValueError(f"resize: sizes {list(sizes)} are not {x.ndim} positive dims")
    if mode not in ("nearest", "linear"):
        raise ValueError(f"resize: mode `{mode}` is not nearest or linear")
    if mode == "nearest":
        for ax, (n_in, n_out) in enumerate(zip(x.shape, sizes, strict=True)):
            if n_in != n_out:
                x = np.take(x, (np.arange(n_out, dtype=np.int64) * n_in) // n_out, axis=ax)
        return x
    dt = x.dtype
    y = x.astype(np.float64)
    for ax, (n_in, n_out) in enumerate(zip(x.shape, sizes, strict=True)):
        if n_in == n_out:
            continue
        i0, i1, frac = _linear_taps(n_in, n_out)
        shape = [1] * y.ndim
        shape[ax] = n_out
        wt = frac.reshape(shape)
        y = np.take(y, i0, axis=ax) * (1.0 - wt) + np.take(y, i1, axis=ax) * wt
    if not _is_float(dt):
        y = np.rint(y)
    with np.errstate(all="ignore"):
        return y.astype(dt)


def _resize_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Resize(x, "", "", sizes)``: nearest = asymmetric + floor; linear =
    half_pixel."""
    sizes = _ints(w, ctx.params["sizes"], "sizes")
    if str(ctx.params["mode"]) == "nearest":
        attrs = {
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        }
    else:
        attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    w.emit("Resize", [ins[0], "", "", sizes], [out], **attrs)


def _resize_cost(ctx: OpContext) -> tuple[float, float]:
    """nearest: 0 FLOPs; linear: 2**k per output element (k = resized axes)."""
    if str(ctx.params["mode"]) != "linear":
        return 0.0, default_bytes(ctx)
    k = sum(a != b for a, b in zip(ctx.inputs[0].shape, ctx.params["sizes"], strict=False))
    return float(2**k * _numel(ctx.output)), default_bytes(ctx)


_op("resize", _resize, _resize_cost, _resize_onnx, ("Resize",), to_hlo=_hlo_resize)


def _cast(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``cast(x, dtype)``: ``x.astype(dtype)``.

    float -> int truncates toward zero; -> bool is ``x != 0``; bool -> number is 0/1.
    Shapes: x's. Verification mode: a float array wider than x's declared dtype (a
    float graph run in float64) cast to a float dtype keeps its width, as every float
    here is never narrowed; a cast whose array has the declared dtype is exact
    ``astype``. Errors: ``ValueError`` on an unknown dtype. Source: ONNX ``Cast``;
    ``numpy.ndarray.astype``.
    """
    x = np.asarray(args[0])
    target = np_dtype(str(ctx.params["dtype"]))
    if ctx.float_dtype is not None and _is_float(target):
        target = np_dtype(ctx.float_dtype)
    elif _is_float(target) and _is_float(x.dtype) and ctx.inputs:
        declared = np_dtype(ctx.inputs[0].dtype) if ctx.inputs[0].dtype in DTYPES else x.dtype
        if x.dtype != declared and x.dtype.itemsize > target.itemsize:
            return x
    with np.errstate(all="ignore"):
        return x.astype(target)


def _cast_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """ONNX ``Cast(to=...)``."""
    w.emit("Cast", [ins[0]], [out], to=int(w.elem_type(str(ctx.params["dtype"]))))


_op("cast", _cast, _move_cost, _cast_onnx, ("Cast",), to_hlo=_hlo_cast, fusion="elementwise")


def _scalar(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``scalar(value, dtype)``: the rank-0 constant ``value`` of ``dtype``.

    Shape ``()``; dtype the parameter; always constant. Source: ONNX ``Constant`` of a
    scalar, HLO ``constant``.
    """
    dtype = np_dtype(str(ctx.params["dtype"]))
    if ctx.float_dtype is not None and _is_float(dtype):
        dtype = np_dtype(ctx.float_dtype)
    with np.errstate(all="ignore"):
        return np.asarray(float(ctx.params["value"])).astype(dtype)


def _scalar_cost(ctx: OpContext) -> tuple[float, float]:
    """A constant: computes and moves nothing at run time."""
    return 0.0, 0.0


def _scalar_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """An initializer holding the value (``w.const``), aliased to ``out``."""
    w.alias(out, w.const(_scalar(ctx, ()), "scalar"))


_op(
    "scalar",
    _scalar,
    _scalar_cost,
    _scalar_onnx,
    (),
    to_hlo=_hlo_scalar,
    launches_kernel=False,
)


# =========================================================================== importers
def rank0_constant(value: np.ndarray, dtype: str) -> tuple[str, dict[str, Any]] | None:
    """How the ONNX importer writes a rank-0 constant of language dtype ``dtype``: the
    ``scalar`` operator and its parameters, or None when ``value`` is not exact as a float
    parameter (an int64 beyond 2**53, ...); the importer then keeps a ``weight``."""
    v = np.asarray(value)
    f = float(v)
    if np.isnan(f):
        return ("scalar", {"value": f, "dtype": dtype}) if np.isnan(v) else None
    if np.asarray(f).astype(v.dtype) != v:
        return None
    return "scalar", {"value": f, "dtype": dtype}


def _present(node: Any, i: int) -> bool:
    return i < len(node.input) and node.input[i] != ""


def _const_in(imp: Any, node: Any, i: int, what: str) -> np.ndarray | None:
    """The constant value of input ``i`` (None when absent); Unsupported when computed."""
    if not _present(node, i):
        return None
    v = imp.const_value(node, i)
    if v is None:
        raise imp.Unsupported(f"{node.op_type}: {what} (input {i}) is not a constant")
    return np.asarray(v)


def _identity(imp: Any, node: Any) -> None:
    imp.set_output(node, 0, imp.input(node, 0))


def _norm_axis(a: int, rank: int, node: Any) -> int:
    if not -rank <= a < max(rank, 1):
        raise ValueError(f"{node.op_type} '{node.name}': axis {a} is out of range for rank {rank}")
    return a % rank if rank else 0


def _exact_float(imp: Any, node: Any, v: Any, what: str) -> float:
    a = np.asarray(v).reshape(-1)
    if a.size != 1:
        raise imp.Unsupported(f"{node.op_type}: {what} is not a scalar")
    f = float(a[0])
    if a.dtype.kind in "iu" and int(f) != int(a[0]):
        raise imp.Unsupported(f"{node.op_type}: {what} {int(a[0])} is not exact as a float")
    return f


_ONNX_BINARY = {v[1]: k for k, v in _BINARY.items()} | {v[1]: k for k, v in _COMPARE.items()}


@onnx_importer("Add", "Sub", "Mul", "Div", "Pow")
def _import_arith(imp: Any, node: Any) -> None:
    """Add/Sub/Mul/Div/Pow -> add/sub/mul/div/pow; Add and Mul of equal shapes and
    dtypes -> TASO ``ewadd``/``ewmul`` (the TASO rules match those). Pow with an
    exponent of another dtype casts the exponent to the base's (float base only).

    A one-element constant operand (shape ``(1, 1, 1)``, as TensorFlow and JAX exporters
    write) whose rank is at most the other operand's broadcasts exactly as its value does:
    it becomes a ``scalar``, so that the rules written over scalars (``mul-one``, the GELU
    patterns) match it."""
    a, b = imp.input(node, 0), imp.input(node, 1)
    ta, tb = imp.type(node, 0), imp.type(node, 1)
    op = _ONNX_BINARY[node.op_type]
    if ta.dtype != tb.dtype:
        if op != "pow" or not _is_float(np_dtype(ta.dtype)):
            raise imp.Unsupported(f"{node.op_type}: operand dtypes {ta.dtype} and {tb.dtype}")
        b = imp.add("cast", {"dtype": ta.dtype}, [b])
    else:
        s = _broadcast_scalar(imp, node, 0, ta, tb)
        if s is not None:
            a, ta = s, TensorType((), ta.dtype)
        s = _broadcast_scalar(imp, node, 1, tb, ta)
        if s is not None:
            b, tb = s, TensorType((), tb.dtype)
        if ta.shape == tb.shape and op in ("add", "mul"):
            op = "ewadd" if op == "add" else "ewmul"
    imp.set_output(node, 0, imp.add(op, {}, [a, b]))


def _broadcast_scalar(imp: Any, node: Any, i: int, t: Any, other: Any) -> int | None:
    """Input ``i`` (type ``t``) as a ``scalar`` node when it is a constant of one element
    and rank 1 to ``len(other.shape)``, so that broadcasting it against ``other`` gives
    the shape its value would; else None."""
    if not t.shape or math.prod(t.shape) != 1 or len(t.shape) > len(other.shape):
        return None
    v = imp.const_value(node, i)
    if v is None:
        return None
    spec = rank0_constant(np.asarray(v).reshape(()), t.dtype)
    return None if spec is None else imp.add(spec[0], spec[1], [])


@onnx_importer("Max", "Min")
def _import_max_min(imp: Any, node: Any) -> None:
    """Max/Min: one input -> the input; two -> max/min; more -> a left-to-right chain."""
    op = _ONNX_BINARY[node.op_type]
    ids = [imp.input(node, i) for i in range(len(node.input)) if _present(node, i)]
    if not ids:
        raise ValueError(f"{node.op_type} '{node.name}' has no inputs")
    acc = ids[0]
    for nxt in ids[1:]:
        acc = imp.add(op, {}, [acc, nxt])
    imp.set_output(node, 0, acc)


@onnx_importer(*(v[1] for v in _COMPARE.values()))
def _import_compare(imp: Any, node: Any) -> None:
    """Equal/Less/LessOrEqual/Greater/GreaterOrEqual -> the comparison operator."""
    op = _ONNX_BINARY[node.op_type]
    imp.set_output(node, 0, imp.add(op, {}, [imp.input(node, 0), imp.input(node, 1)]))


@onnx_importer("Where")
def _import_where(imp: Any, node: Any) -> None:
    """Where(cond, X, Y) -> select."""
    ins = [imp.input(node, i) for i in range(3)]
    imp.set_output(node, 0, imp.add("select", {}, ins))


_ONNX_UNARY = {
    "Neg": "neg",
    "Abs": "abs",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Reciprocal": "reciprocal",
    "Erf": "erf",
    "HardSwish": "hard_swish",
    "Softplus": "softplus",
}


@onnx_importer(*_ONNX_UNARY)
def _import_unary(imp: Any, node: Any) -> None:
    """Neg/Abs/Exp/Log/Sqrt/Reciprocal/Erf/HardSwish/Softplus -> the unary operator."""
    imp.set_output(node, 0, imp.add(_ONNX_UNARY[node.op_type], {}, [imp.input(node, 0)]))


@onnx_importer("Gelu")
def _import_gelu(imp: Any, node: Any) -> None:
    """Gelu -> gelu (approximate="none") or gelu_tanh (approximate="tanh")."""
    approx = imp.attrs(node).get("approximate", "none")
    approx = approx.decode() if isinstance(approx, bytes) else str(approx)
    ops = {"none": "gelu", "tanh": "gelu_tanh"}
    if approx not in ops:
        raise imp.Unsupported(f"Gelu: approximate={approx!r} is not an ONNX mode")
    imp.set_output(node, 0, imp.add(ops[approx], {}, [imp.input(node, 0)]))


@onnx_importer("Clip")
def _import_clip(imp: Any, node: Any) -> None:
    """Clip(x[, min][, max]) with constant bounds (absent: -inf/inf) -> clip."""
    attrs = imp.attrs(node)
    lo, hi = float(attrs.get("min", -math.inf)), float(attrs.get("max", math.inf))
    v = _const_in(imp, node, 1, "min")
    if v is not None:
        lo = _exact_float(imp, node, v, "min")
    v = _const_in(imp, node, 2, "max")
    if v is not None:
        hi = _exact_float(imp, node, v, "max")
    imp.set_output(node, 0, imp.add("clip", {"lo": lo, "hi": hi}, [imp.input(node, 0)]))


@onnx_importer("HardSigmoid")
def _import_hard_sigmoid(imp: Any, node: Any) -> None:
    """HardSigmoid(alpha=0.2, beta=0.5) -> hard_sigmoid."""
    a = imp.attrs(node)
    params = {"alpha": float(a.get("alpha", 0.2)), "beta": float(a.get("beta", 0.5))}
    imp.set_output(node, 0, imp.add("hard_sigmoid", params, [imp.input(node, 0)]))


@onnx_importer("LeakyRelu")
def _import_leaky_relu(imp: Any, node: Any) -> None:
    """LeakyRelu(alpha=0.01) -> leaky_relu."""
    alpha = float(imp.attrs(node).get("alpha", 0.01))
    imp.set_output(node, 0, imp.add("leaky_relu", {"alpha": alpha}, [imp.input(node, 0)]))


_ONNX_REDUCE = {v[1]: k for k, v in _REDUCE.items()}


@onnx_importer(*_ONNX_REDUCE)
def _import_reduce(imp: Any, node: Any) -> None:
    """ReduceSum/Mean/Max/Min/Prod -> reduce_*; axes from the attribute or the (constant)
    input, negatives normalised, sorted, deduplicated; no axes: all axes, or the input
    itself with noop_with_empty_axes=1 (and for a rank-0 input)."""
    attrs = imp.attrs(node)
    keepdims = int(attrs.get("keepdims", 1))
    noop = int(attrs.get("noop_with_empty_axes", 0))
    rank = len(imp.type(node, 0).shape)
    if "axes" in attrs:
        axes = [int(a) for a in attrs["axes"]]
    else:
        v = _const_in(imp, node, 1, "axes")
        axes = [] if v is None else [int(a) for a in v.reshape(-1)]
    if not axes:
        if noop or rank == 0:
            _identity(imp, node)
            return
        axes = list(range(rank))
    norm = sorted({_norm_axis(a, rank, node) for a in axes})
    params = {"axes": tuple(norm), "keepdims": keepdims}
    imp.set_output(node, 0, imp.add(_ONNX_REDUCE[node.op_type], params, [imp.input(node, 0)]))


@onnx_importer("Softmax")
def _import_softmax(imp: Any, node: Any) -> None:
    """Softmax(axis=-1), opset 13 semantics (one axis) -> softmax."""
    rank = len(imp.type(node, 0).shape)
    if rank == 0:
        raise imp.Unsupported("Softmax of a rank-0 tensor")
    axis = _norm_axis(int(imp.attrs(node).get("axis", -1)), rank, node)
    imp.set_output(node, 0, imp.add("softmax", {"axis": axis}, [imp.input(node, 0)]))


@onnx_importer("LayerNormalization")
def _import_layer_norm(imp: Any, node: Any) -> None:
    """LayerNormalization(X, Scale[, B]) -> layer_norm (output Y only; a named Mean or
    InvStdDev output is Unsupported). A scale/bias broadcasting to x.shape[axis:] is
    broadcast; an absent bias is a zero weight. stash_type is ignored."""
    if any(o for o in node.output[1:]):
        raise imp.Unsupported("LayerNormalization: the Mean/InvStdDev outputs are not modelled")
    attrs = imp.attrs(node)
    t = imp.type(node, 0)
    rank = len(t.shape)
    if rank == 0:
        raise imp.Unsupported("LayerNormalization of a rank-0 tensor")
    axis = _norm_axis(int(attrs.get("axis", -1)), rank, node)
    eps = float(attrs.get("epsilon", 1e-5))
    norm_shape = tuple(t.shape[axis:])
    x = imp.input(node, 0)
    ops = []
    for i, stem in ((1, "scale"), (2, "bias")):
        if _present(node, i):
            nid, ti = imp.input(node, i), imp.type(node, i)
            if ti.dtype != t.dtype:
                raise imp.Unsupported(f"LayerNormalization: {stem} dtype {ti.dtype}")
            if tuple(ti.shape) != norm_shape:
                if np.broadcast_shapes(tuple(ti.shape), norm_shape) != norm_shape:
                    raise imp.Unsupported(f"LayerNormalization: {stem} shape {ti.shape}")
                nid = imp.add("broadcast_to", {"shape": norm_shape}, [nid])
        else:
            nid = imp.weight(np.zeros(norm_shape, dtype=np_dtype(t.dtype)), f"{node.name}_{stem}")
        ops.append(nid)
    nid = imp.add("layer_norm", {"axis": axis, "epsilon": eps}, [x, *ops])
    imp.set_output(node, 0, nid)


@onnx_importer("GlobalAveragePool")
def _import_global_avg_pool(imp: Any, node: Any) -> None:
    """GlobalAveragePool -> global_avg_pool."""
    imp.set_output(node, 0, imp.add("global_avg_pool", {}, [imp.input(node, 0)]))


@onnx_importer("GlobalMaxPool")
def _import_global_max_pool(imp: Any, node: Any) -> None:
    """GlobalMaxPool (x ``[N, C, d1, ...]``) -> reduce_max over the spatial axes with
    keepdims 1: ``[N, C, 1, ...]``. Source: ONNX GlobalMaxPool."""
    rank = len(imp.type(node, 0).shape)
    if rank < 3:
        raise ValueError(f"GlobalMaxPool '{node.name}': rank {rank} input (N, C, spatial...)")
    params = {"axes": tuple(range(2, rank)), "keepdims": 1}
    imp.set_output(node, 0, imp.add("reduce_max", params, [imp.input(node, 0)]))


def _reshape_to(imp: Any, node: Any, out: Sequence[int]) -> None:
    """Binds the output to ``reshape(input 0, out)`` (the input itself when the shape does
    not change)."""
    if tuple(out) == tuple(imp.type(node, 0).shape):
        _identity(imp, node)
        return
    from tensat_py.ops.taso import list_param

    shape = list_param("reshape", "shape", tuple(int(d) for d in out))
    imp.set_output(node, 0, imp.add("reshape", {"shape": shape}, [imp.input(node, 0)]))


def _axes_of(imp: Any, node: Any, rank: int) -> list[int] | None:
    """Squeeze/Unsqueeze axes: the ``axes`` attribute (opset < 13) or the constant input 1
    (opset 13+), normalised against ``rank``; None when absent."""
    attrs = imp.attrs(node)
    if "axes" in attrs:
        raw = [int(a) for a in attrs["axes"]]
    else:
        v = _const_in(imp, node, 1, "axes")
        if v is None:
            return None
        raw = [int(a) for a in v.reshape(-1)]
    axes = [_norm_axis(a, rank, node) for a in raw]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{node.op_type} '{node.name}': axes {raw} repeat")
    return axes


@onnx_importer("Squeeze")
def _import_squeeze(imp: Any, node: Any) -> None:
    """Squeeze(data[, axes]) -> reshape dropping the listed size-1 axes (every size-1 axis
    when absent). Source: ONNX Squeeze (opset 11: attribute, 13+: input)."""
    shape = tuple(imp.type(node, 0).shape)
    axes = _axes_of(imp, node, len(shape))
    if axes is None:
        axes = [k for k, d in enumerate(shape) if d == 1]
    if any(shape[a] != 1 for a in axes):
        raise ValueError(f"Squeeze '{node.name}': axes {axes} of {list(shape)} are not all 1")
    _reshape_to(imp, node, [d for k, d in enumerate(shape) if k not in axes])


@onnx_importer("Unsqueeze")
def _import_unsqueeze(imp: Any, node: Any) -> None:
    """Unsqueeze(data, axes) -> reshape inserting size-1 axes at ``axes`` (of the output's
    rank). Source: ONNX Unsqueeze (opset 11: attribute, 13+: input)."""
    shape = list(imp.type(node, 0).shape)
    rank = len(shape)
    attrs = imp.attrs(node)
    n_axes = len(attrs["axes"]) if "axes" in attrs else _const_in(imp, node, 1, "axes").size
    axes = _axes_of(imp, node, rank + n_axes)
    if axes is None:
        raise ValueError(f"Unsqueeze '{node.name}' has no axes")
    out = []
    it = iter(shape)
    for k in range(rank + len(axes)):
        out.append(1 if k in axes else next(it))
    _reshape_to(imp, node, out)


@onnx_importer("Flatten")
def _import_flatten(imp: Any, node: Any) -> None:
    """Flatten(axis=1) -> reshape to ``[prod(shape[:axis]), prod(shape[axis:])]``. Source:
    ONNX Flatten."""
    shape = tuple(imp.type(node, 0).shape)
    axis = int(imp.attrs(node).get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise ValueError(f"Flatten '{node.name}': axis {axis} for rank {len(shape)}")
    _reshape_to(imp, node, [math.prod(shape[:axis]), math.prod(shape[axis:])])


@onnx_importer("Expand")
def _import_expand(imp: Any, node: Any) -> None:
    """Expand(x, shape) with a constant shape -> broadcast_to of the broadcast of x's
    shape and ``shape`` (the input itself when that is x's shape)."""
    v = _const_in(imp, node, 1, "shape")
    if v is None:
        raise ValueError(f"Expand '{node.name}' has no shape input")
    xs = tuple(imp.type(node, 0).shape)
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(xs, tuple(int(d) for d in v.reshape(-1))))
    except ValueError:
        raise ValueError(
            f"Expand '{node.name}': {list(xs)} does not broadcast with {v.tolist()}"
        ) from None
    if out == xs:
        _identity(imp, node)
        return
    imp.set_output(node, 0, imp.add("broadcast_to", {"shape": out}, [imp.input(node, 0)]))


@onnx_importer("Slice")
def _import_slice(imp: Any, node: Any) -> None:
    """Slice(data, starts, ends[, axes][, steps]) with constant operands -> slice.

    Each axis is canonicalised with Python's ``slice.indices`` (which clamps exactly as
    ONNX does, INT64 sentinels included) to ``0 <= start <= dim`` and ``end`` in
    ``[0, dim]``, or ``-dim-1`` for a negative step running to the front; axes that keep
    everything are dropped; no axis left -> the input itself."""
    shape = tuple(imp.type(node, 0).shape)
    rank = len(shape)
    starts = _const_in(imp, node, 1, "starts")
    ends = _const_in(imp, node, 2, "ends")
    if starts is None or ends is None:
        raise ValueError(f"Slice '{node.name}' lacks starts or ends")
    n = starts.size
    axes_v = _const_in(imp, node, 3, "axes")
    steps_v = _const_in(imp, node, 4, "steps")
    axes = list(range(n)) if axes_v is None else [int(a) for a in axes_v.reshape(-1)]
    steps = [1] * n if steps_v is None else [int(s) for s in steps_v.reshape(-1)]
    if not len(axes) == len(steps) == n == ends.size:
        raise ValueError(f"Slice '{node.name}': starts/ends/axes/steps lengths differ")
    out: dict[int, tuple[int, int, int]] = {}
    for s, e, a, st in zip(starts.reshape(-1), ends.reshape(-1), axes, steps, strict=True):
        ax = _norm_axis(a, rank, node)
        if ax in out:
            raise ValueError(f"Slice '{node.name}': axis {a} repeats")
        if st == 0:
            raise ValueError(f"Slice '{node.name}': step 0")
        dim = shape[ax]
        cs, ce, cst = slice(int(s), int(e), st).indices(dim)
        if ce < 0:
            ce = -dim - 1
        if range(cs, ce if ce >= 0 else -1, cst) == range(dim):
            continue
        out[ax] = (cs, ce, cst)
    if not out:
        _identity(imp, node)
        return
    keys = sorted(out)
    params = {
        "starts": tuple(out[k][0] for k in keys),
        "ends": tuple(out[k][1] for k in keys),
        "axes": tuple(keys),
        "steps": tuple(out[k][2] for k in keys),
    }
    imp.set_output(node, 0, imp.add("slice", params, [imp.input(node, 0)]))


@onnx_importer("Pad")
def _import_pad(imp: Any, node: Any) -> None:
    """Pad(data, pads[, constant_value][, axes]) with constants, mode constant/reflect/edge,
    non-negative pads -> pad (all-zero pads: the input itself). ``axes`` expands to the
    full pads list; other modes (wrap) and negative pads are Unsupported."""
    mode = imp.attrs(node).get("mode", "constant")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in _PAD_MODES:
        raise imp.Unsupported(f"Pad: mode {mode!r} is not modelled")
    rank = len(imp.type(node, 0).shape)
    pv = _const_in(imp, node, 1, "pads")
    if pv is None:
        raise ValueError(f"Pad '{node.name}' has no pads input")
    pv = [int(p) for p in pv.reshape(-1)]
    av = _const_in(imp, node, 3, "axes")
    axes = (
        list(range(rank))
        if av is None
        else [_norm_axis(int(a), rank, node) for a in av.reshape(-1)]
    )
    if len(pv) != 2 * len(axes) or len(set(axes)) != len(axes):
        raise ValueError(f"Pad '{node.name}': pads {pv} do not fit axes {axes}")
    full = [0] * (2 * rank)
    for k, a in enumerate(axes):
        full[a], full[rank + a] = pv[k], pv[len(axes) + k]
    if any(p < 0 for p in full):
        raise imp.Unsupported(f"Pad: negative pads {full} (cropping) are not modelled")
    value = 0.0
    cv = _const_in(imp, node, 2, "constant_value")
    if cv is not None and cv.size:
        value = _exact_float(imp, node, cv, "constant_value")
    if not any(full):
        _identity(imp, node)
        return
    params = {"pads": tuple(full), "mode": mode, "value": value}
    imp.set_output(node, 0, imp.add("pad", params, [imp.input(node, 0)]))


@onnx_importer("Gather")
def _import_gather(imp: Any, node: Any) -> None:
    """Gather(data, indices) with constant indices -> gather (indices flattened); a
    rank != 1 indices tensor adds a TASO ``reshape`` to ONNX's output shape."""
    shape = tuple(imp.type(node, 0).shape)
    axis = _norm_axis(int(imp.attrs(node).get("axis", 0)), len(shape), node)
    ind = _const_in(imp, node, 1, "indices")
    if ind is None:
        raise ValueError(f"Gather '{node.name}' has no indices")
    flat = tuple(int(i) for i in ind.reshape(-1))
    nid = imp.add("gather", {"axis": axis, "indices": flat}, [imp.input(node, 0)])
    if ind.ndim != 1:
        out = shape[:axis] + tuple(ind.shape) + shape[axis + 1 :]
        from tensat_py.ops.taso import list_param  # sym or list, whichever the core declares

        nid = imp.add("reshape", {"shape": list_param("reshape", "shape", out)}, [nid])
    imp.set_output(node, 0, nid)


def _nearest_coord(d: Any, n_in: int, n_out: int, scale: Any, ctm: str, half: Any) -> Any:
    """ONNX Resize's source coordinate of output position ``d`` (``half`` = 1/2 in the
    arithmetic of ``d`` and ``scale``: Fraction for exact, float32 as onnxruntime)."""
    if ctm == "asymmetric":
        return d / scale
    if ctm == "half_pixel":
        return (d + half) / scale - half
    if ctm == "pytorch_half_pixel":
        return (d + half) / scale - half if n_out > 1 else d * 0
    if ctm == "tf_half_pixel_for_nearest":
        return (d + half) / scale
    if ctm == "align_corners":
        return d * 0 if n_out == 1 else d * (n_in - 1) / (n_out - 1)
    raise KeyError(ctm)


def _round_nearest(x: Any, nearest: str) -> int:
    fl = math.floor(x)
    if nearest == "floor":
        return fl
    if nearest == "ceil":
        return math.ceil(x)
    if x - fl == 0.5:
        return fl if nearest == "round_prefer_floor" else fl + 1
    if nearest in ("round_prefer_floor", "round_prefer_ceil"):
        return fl + (x - fl > 0.5)
    raise KeyError(nearest)


def _nearest_map(
    n_in: int, n_out: int, scale: Fraction, scale32: np.float32, ctm: str, nearest: str
) -> list[int] | None:
    """ONNX Resize nearest source indices of one axis, or None when they are not
    well defined: computed in exact arithmetic (the specification) and in float32 as
    onnxruntime computes them (``scale32``); the two must agree (they can differ where a
    coordinate lands on a rounding boundary). None also for an unknown mode."""
    res = []
    h32 = np.float32(0.5)
    try:
        for d in range(n_out):
            i = _round_nearest(
                _nearest_coord(Fraction(d), n_in, n_out, scale, ctm, Fraction(1, 2)), nearest
            )
            x32 = _nearest_coord(np.float32(d), n_in, n_out, scale32, ctm, h32)
            if i != _round_nearest(float(np.float32(x32)), nearest):
                return None
            res.append(min(max(i, 0), n_in - 1))
    except KeyError:
        return None
    return res


@onnx_importer("Resize")
def _import_resize(imp: Any, node: Any) -> None:
    """Resize(X, roi, scales, sizes) with constant scales or sizes -> resize, when ONNX's
    result is exactly the modelled one: ``nearest`` when every axis' source indices equal
    ``floor(d * in / out)``, both in exact arithmetic (the specification) and in float32 as
    onnxruntime computes them (asymmetric + floor, or any other coordinate/nearest mode
    giving the same indices, e.g. half_pixel + round_prefer_floor at 2x); ``linear`` with
    half_pixel (or pytorch_half_pixel where no axis resizes to 1) and a scale equal to
    out/in. cubic, tf_crop_and_resize, half_pixel_symmetric, antialias on a downscale,
    exclude_outside and keep_aspect_ratio_policy other than stretch -> Unsupported."""
    attrs = imp.attrs(node)

    def s(key: str, default: str) -> str:
        v = attrs.get(key, default)
        return v.decode() if isinstance(v, bytes) else str(v)

    mode = s("mode", "nearest")
    ctm = s("coordinate_transformation_mode", "half_pixel")
    nearest = s("nearest_mode", "round_prefer_floor")
    shape = tuple(imp.type(node, 0).shape)
    rank = len(shape)
    if mode not in ("nearest", "linear"):
        raise imp.Unsupported(f"Resize: mode {mode!r} is not modelled")
    if ctm in ("tf_crop_and_resize", "half_pixel_symmetric"):
        raise imp.Unsupported(f"Resize: coordinate_transformation_mode {ctm!r} is not modelled")
    if s("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise imp.Unsupported("Resize: keep_aspect_ratio_policy other than stretch")
    if int(attrs.get("exclude_outside", 0)) != 0:
        raise imp.Unsupported("Resize: exclude_outside=1 is not modelled")
    axes = [_norm_axis(int(a), rank, node) for a in attrs.get("axes", range(rank))]
    sizes_v = _const_in(imp, node, 3, "sizes")
    scales_v = _const_in(imp, node, 2, "scales")
    if scales_v is not None and scales_v.size == 0:
        scales_v = None
    sizes = list(shape)
    scales: list[Fraction] = [Fraction(1)] * rank
    scales32: list[np.float32] = [np.float32(1.0)] * rank
    if sizes_v is not None and sizes_v.size:
        sv = [int(v) for v in sizes_v.reshape(-1)]
        if len(sv) != len(axes):
            raise ValueError(f"Resize '{node.name}': sizes {sv} do not fit axes {axes}")
        for a, n in zip(axes, sv, strict=True):
            sizes[a] = n
            scales[a] = Fraction(n, shape[a])
            scales32[a] = np.float32(n) / np.float32(shape[a])
    elif scales_v is not None:
        sc = [float(np.float32(v)) for v in scales_v.reshape(-1)]
        if len(sc) != len(axes):
            raise ValueError(f"Resize '{node.name}': scales {sc} do not fit axes {axes}")
        for a, v in zip(axes, sc, strict=True):
            if v <= 0:
                raise ValueError(f"Resize '{node.name}': scale {v} <= 0")
            sizes[a] = math.floor(shape[a] * v)
            scales[a] = Fraction(v)
            scales32[a] = np.float32(v)
    else:
        raise ValueError(f"Resize '{node.name}' has neither scales nor sizes")
    if any(n <= 0 for n in sizes):
        raise imp.Unsupported(f"Resize: output shape {sizes} has an empty axis")
    for a in range(rank):
        n_in, n_out = shape[a], sizes[a]
        if n_in == n_out and scales[a] == 1:
            continue
        if mode == "nearest":
            got = _nearest_map(n_in, n_out, scales[a], scales32[a], ctm, nearest)
            if got != [(d * n_in) // n_out for d in range(n_out)]:
                raise imp.Unsupported(
                    f"Resize: nearest ({ctm}, {nearest}) on axis {a} ({n_in} -> {n_out}) "
                    "differs from asymmetric/floor"
                )
            continue
        if ctm not in ("half_pixel", "pytorch_half_pixel") or (
            ctm == "pytorch_half_pixel" and n_out == 1 and n_in != 1
        ):
            raise imp.Unsupported(f"Resize: linear with {ctm!r} is not modelled")
        if abs(float(scales[a]) - n_out / n_in) > 1e-6 * (n_out / n_in):
            raise imp.Unsupported(f"Resize: scale {float(scales[a])} is not out/in on axis {a}")
        if n_out < n_in and int(attrs.get("antialias", 0)):
            raise imp.Unsupported("Resize: antialiased downscaling is not modelled")
    if tuple(sizes) == shape:
        _identity(imp, node)
        return
    params = {"sizes": tuple(sizes), "mode": mode}
    imp.set_output(node, 0, imp.add("resize", params, [imp.input(node, 0)]))


@onnx_importer("Cast")
def _import_cast(imp: Any, node: Any) -> None:
    """Cast(to) -> cast (the input itself when the dtype does not change); element types
    outside the language's dtypes are Unsupported."""
    to = int(imp.attrs(node)["to"])
    if to not in ONNX_DTYPES:
        raise imp.Unsupported(f"Cast: element type {to} is not a dtype of the language")
    dt = ONNX_DTYPES[to]
    if imp.type(node, 0).dtype == dt:
        _identity(imp, node)
        return
    imp.set_output(node, 0, imp.add("cast", {"dtype": dt}, [imp.input(node, 0)]))
