"""The TASO dialect: Tensat's operator set, one :class:`~tensat_py.ops.OpDef` per operator.

Sources: TASO (Jia et al., SOSP 2019, ``src/core/*.cc``: operator semantics and the
``ActiMode``/``PaddingMode`` codes) and Tensat (Yang et al., MLSys 2021, the e-graph
language). ``docs/language.md`` is the reference for every operator; this module is its
executable form:

* ``evaluate``: NumPy semantics (the reference executor,
  :mod:`tensat_py.runtime.numpy_exec`). Float arrays keep their dtype (verification runs
  float graphs in float64); nothing is downcast.
* ``cost``: ``(FLOPs, bytes moved)`` for the roofline model (:mod:`tensat_py.cost.roofline`),
  bytes by :func:`~tensat_py.ops.default_bytes` (every operand read once, the output
  written once, at each tensor's own itemsize).
* ``to_onnx``: the ONNX node(s), through the exporter's writer ``w``.
* ONNX importers (:func:`~tensat_py.ops.onnx_importer`) for Conv, MatMul, Gemm, MaxPool,
  AveragePool, Concat, Split, Reshape, Transpose, BatchNormalization, Relu, Tanh, Sigmoid,
  Dropout and Identity (``Add``/``Mul`` belong to the tensor dialect, which emits
  ``ewadd``/``ewmul`` for equal shapes and dtypes).

Conventions (shared with the Rust analysis):

* conv2d / pooling: NCHW input, OIHW weight, ``groups = C // I`` with contiguous channel
  groups.
* padding codes (TASO ``PaddingMode``): ``0`` SAME: ``out = ceil(h / s)``,
  ``pad_total = max((out - 1) * s + k - h, 0)``, ``pad_before = pad_total // 2`` (the rest
  after); ``1`` VALID: ``out = ceil((h - k + 1) / s)``, no padding.
* activation codes (TASO ``ActiMode``): 0 none, 1 sigmoid, 2 relu, 3 tanh.
* ``poolavg`` divides by the number of non-padding elements in each window (ONNX
  ``count_include_pad = 0``); ``poolmax`` pads with ``-inf``.
* ``batchnorm``: ``(x - mean) / sqrt(var + 1e-5) * scale + bias`` on axis 1.
* ``merge`` (TASO MergeGConv): ``[O, I, kh, kw] -> [O, I*count, kh, kw]``; output channel
  ``o`` keeps its kernel in input-channel slot ``o // (O // count)``, zeros elsewhere.
* ``enlarge``: centred zero padding of a kernel to the reference's ``kh, kw``.
* ``split``: at the position the analysis recorded (the node's pair type).
* ``transpose``'s ``perm`` and ``reshape``'s ``shape`` are list parameters (tuples of ints);
  the older symbol text ``"1_0_2"`` is accepted too (:func:`dims_param`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tensat_py.graph import TensorType, dims_text, parse_dims, signatures
from tensat_py.ops import OpContext, OpDef, default_bytes, onnx_importer, register
from tensat_py.ops.tensor import np_dtype

__all__ = [
    "BN_EPS",
    "ACT_ONNX",
    "FLOAT_DTYPES",
    "act",
    "sigmoid",
    "conv2d",
    "pool2d",
    "merge",
    "enlarge",
    "batchnorm",
    "same_pads",
    "onnx_pads",
    "dims_param",
    "list_param",
]

#: Batch-norm epsilon (TASO's, and the ONNX default).
BN_EPS = 1e-5
#: Activation code -> ONNX operator type (code 0 is no activation).
ACT_ONNX = {1: "Sigmoid", 2: "Relu", 3: "Tanh"}
#: The dtypes arithmetic TASO operators accept in ONNX import.
FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16", "float64"})
_DIALECT = "taso"


# ============================================================================ helpers
def dims_param(value: Any) -> tuple[int, ...]:
    """A ``perm``/``shape`` parameter as a tuple of ints.

    Accepts the list form (a tuple or list of ints) and the older symbol text ``"1_0_2"``.

    Raises:
        ValueError: malformed symbol text.
    """
    if isinstance(value, str):
        return parse_dims(value)
    return tuple(int(d) for d in value)


def list_param(op: str, pname: str, dims: Sequence[int]) -> tuple[int, ...] | str:
    """The value to pass for list parameter ``pname`` of ``op`` in ``Graph.add_node``.

    A tuple of ints when the Rust core declares the operand a ``list``; the symbol text
    ``d0_d1`` when it still declares a ``sym`` (cores before the open language).
    """
    kind = dict(signatures().get(op, ())).get(pname)
    if kind == "sym":
        return dims_text(dims)
    return tuple(int(d) for d in dims)


def _symbol_lists() -> bool:
    """True while the core still spells transpose/reshape lists as symbols (no rank 1)."""
    return dict(signatures().get("reshape", ())).get("shape") == "sym"


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic function ``1 / (1 + exp(-x))``, numerically stable for both signs.

    Keeps ``x``'s float dtype.
    """
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def act(y: np.ndarray, code: int) -> np.ndarray:
    """Applies TASO activation ``code`` (0 none, 1 sigmoid, 2 relu, 3 tanh).

    Raises:
        ValueError: ``code`` is not 0..3.
    """
    if code == 0:
        return y
    if code == 1:
        return sigmoid(y)
    if code == 2:
        return np.maximum(y, 0)
    if code == 3:
        return np.tanh(y)
    raise ValueError(f"activation {code} is not 0..3")


def _pads(size: int, k: int, s: int, pad: int) -> tuple[int, int, int]:
    """(out, before, after) for one spatial axis under padding code ``pad``."""
    if pad == 0:
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        return out, total // 2, total - total // 2
    if pad == 1:
        if k > size:
            raise ValueError(f"VALID padding with kernel {k} > size {size}")
        return -(-(size - k + 1) // s), 0, 0
    raise ValueError(f"padding mode {pad} is not 0 (SAME) or 1 (VALID)")


def same_pads(size: Sequence[int], kernel: Sequence[int], stride: Sequence[int]) -> list[int]:
    """ONNX ``pads`` (``[b_h, b_w, e_h, e_w]``) of TASO's SAME padding for spatial ``size``."""
    before, after = [], []
    for h, k, s in zip(size, kernel, stride, strict=True):
        _, b, a = _pads(h, k, s, 0)
        before.append(b)
        after.append(a)
    return before + after


def onnx_pads(
    size: Sequence[int], kernel: Sequence[int], stride: Sequence[int], pad: int
) -> list[int]:
    """ONNX ``pads`` for padding code ``pad`` (0 SAME, 1 VALID) on spatial ``size``."""
    return [0] * (2 * len(size)) if pad == 1 else same_pads(size, kernel, stride)


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, pad: int, fill: float):
    """Padded sliding windows ``[N, C, OH, OW, kh, kw]`` (a view where possible)."""
    oh, pt, pb = _pads(x.shape[2], kh, sh, pad)
    ow, pl, pr = _pads(x.shape[3], kw, sw, pad)
    if pt or pb or pl or pr:
        x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    v = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return v[:, :, :oh, :ow], (pt, pb, pl, pr)


def conv2d(x: np.ndarray, w: np.ndarray, sh: int, sw: int, pad: int, act_code: int) -> np.ndarray:
    """Grouped 2-D convolution (cross-correlation), then activation ``act_code``.

    Args:
        x: ``[N, C, H, W]``.
        w: ``[O, I, kh, kw]``; ``groups = C // I``, contiguous channel groups.
        sh, sw: strides.
        pad: 0 SAME, 1 VALID (see the module docstring).
        act_code: TASO activation code.

    Returns:
        ``[N, O, H', W']`` in ``np.result_type(x, w)``.

    Raises:
        ValueError: ``w`` does not fit ``x``, a bad padding or activation code.
    """
    n, c, _, _ = x.shape
    o, i, kh, kw = w.shape
    g = c // i
    if i * g != c or o % g:
        raise ValueError(f"conv2d: weight {list(w.shape)} does not fit input {list(x.shape)}")
    if kh == 1 and kw == 1 and pad in (0, 1):
        xs = x[:, :, ::sh, ::sw]
        oh, ow = _pads(x.shape[2], 1, sh, pad)[0], _pads(x.shape[3], 1, sw, pad)[0]
        xs = xs[:, :, :oh, :ow]
        xg = xs.reshape(n, g, i, oh * ow)
        wg = w.reshape(g, o // g, i)
        y = np.matmul(wg[None], xg).reshape(n, o, oh, ow)
        return act(y, act_code)
    # Sum over kernel taps of (grouped) matmuls on shifted views: avoids materialising
    # the full im2col matrix and is several times faster than it on CPU.
    v, _ = _windows(x, kh, kw, sh, sw, pad, 0.0)
    _, _, oh, ow, _, _ = v.shape
    og = o // g
    y = np.zeros((n, g, og, oh * ow), dtype=np.result_type(x, w))
    for a in range(kh):
        for b in range(kw):
            xs = np.ascontiguousarray(v[:, :, :, :, a, b]).reshape(n, g, i, oh * ow)
            y += np.matmul(w[:, :, a, b].reshape(g, og, i)[None], xs)
    y = y.reshape(n, o, oh, ow)
    return act(np.ascontiguousarray(y), act_code)


def pool2d(
    x: np.ndarray, kh: int, kw: int, sh: int, sw: int, pad: int, act_code: int, kind: str
) -> np.ndarray:
    """2-D max (``kind="max"``) or average (``"avg"``) pooling on ``x`` ``[N, C, H, W]``.

    Max pooling pads with ``-inf``; average pooling divides by the number of non-padding
    elements of each window. Returns ``[N, C, H', W']`` in ``x``'s dtype.
    """
    if kind == "max":
        v, _ = _windows(x, kh, kw, sh, sw, pad, -np.inf)
        y = _taps(v, np.maximum)
    else:
        v, pads = _windows(x, kh, kw, sh, sw, pad, 0.0)
        y = _taps(v, np.add)
        if any(pads):
            ones = np.ones((1, 1) + x.shape[2:], dtype=x.dtype)
            cnt, _ = _windows(ones, kh, kw, sh, sw, pad, 0.0)
            y = y / _taps(cnt, np.add)
        else:
            y = y / (kh * kw)
    return act(y.astype(x.dtype, copy=False), act_code)


def _taps(v: np.ndarray, combine: np.ufunc) -> np.ndarray:
    """``combine`` (``np.maximum`` or ``np.add``) over the kernel taps of windows ``v``
    ``[N, C, OH, OW, kh, kw]``, tap by tap: a reduction over the last two axes of the
    strided window view is several times slower (NasNet-A's 58 poolings: 0.9 s)."""
    kh, kw = v.shape[4], v.shape[5]
    y = np.array(v[:, :, :, :, 0, 0])
    for a in range(kh):
        for b in range(kw):
            if a or b:
                combine(y, v[:, :, :, :, a, b], out=y)
    return y


def merge(w: np.ndarray, count: int) -> np.ndarray:
    """TASO MergeGConv on a kernel ``[O, I, kh, kw]`` -> ``[O, I*count, kh, kw]``.

    Raises:
        ValueError: ``count < 1`` or ``count`` does not divide ``O``.
    """
    o, i, kh, kw = w.shape
    if count < 1 or o % count:
        raise ValueError(f"merge: weight {list(w.shape)} cannot merge {count} groups")
    out = np.zeros((o, i * count, kh, kw), dtype=w.dtype)
    per = o // count
    for oc in range(o):
        s = oc // per
        out[oc, s * i : (s + 1) * i] = w[oc]
    return out


def enlarge(w: np.ndarray, ref_shape: Sequence[int]) -> np.ndarray:
    """Centred zero padding of kernel ``w`` (OIHW) to ``ref_shape``'s ``kh, kw``.

    Raises:
        ValueError: the kernel is larger than the reference or the difference is odd.
    """
    kh, kw = ref_shape[2], ref_shape[3]
    dh, dw = kh - w.shape[2], kw - w.shape[3]
    if dh < 0 or dw < 0 or dh % 2 or dw % 2:
        raise ValueError(f"enlarge: kernel {list(w.shape)} cannot be centred in {kh}x{kw}")
    return np.pad(w, ((0, 0), (0, 0), (dh // 2, dh // 2), (dw // 2, dw // 2)))


def batchnorm(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> np.ndarray:
    """Inference batch norm on axis 1 of ``x`` ``[N, C, ...]``; parameters ``[C]``.

    ``(x - mean) / sqrt(var + BN_EPS) * scale + bias`` in ``x``'s dtype (ONNX
    BatchNormalization, ``training_mode = 0``).
    """
    shp = (1, -1) + (1,) * (x.ndim - 2)
    inv = (scale / np.sqrt(var + BN_EPS)).reshape(shp)
    return ((x - mean.reshape(shp)) * inv + bias.reshape(shp)).astype(x.dtype, copy=False)


def _t(ctx: OpContext, k: int) -> TensorType:
    t = ctx.inputs[k]
    assert isinstance(t, TensorType), (ctx.op, k, t)
    return t


def _out(ctx: OpContext) -> TensorType:
    t = ctx.output
    assert isinstance(t, TensorType), (ctx.op, t)
    return t


def _n_out(ctx: OpContext) -> int:
    return prod(_out(ctx).shape)


def _act_flops(ctx: OpContext) -> int:
    return _n_out(ctx) if int(ctx.params.get("act", 0) or 0) else 0


def _emit_act(w: Any, op_type: str, ins: Sequence[str], out: str, code: int, **attrs: Any) -> None:
    """``op_type`` then the ONNX node of activation ``code`` (none for 0)."""
    code = int(code)
    if code == 0:
        w.emit(op_type, list(ins), out, **attrs)
        return
    if code not in ACT_ONNX:
        raise ValueError(f"activation {code} is not 0..3")
    mid = w.fresh(op_type.lower())
    w.emit(op_type, list(ins), mid, **attrs)
    w.emit(ACT_ONNX[code], [mid], out)


def _zero_cost(ctx: OpContext) -> tuple[float, float]:
    return 0.0, 0.0


def _copy_cost(ctx: OpContext) -> tuple[float, float]:
    """Data movement only: 0 FLOPs, operands read and output written once."""
    return 0.0, default_bytes(ctx)


def _elementwise_cost(ctx: OpContext) -> tuple[float, float]:
    """One FLOP per output element."""
    return float(_n_out(ctx)), default_bytes(ctx)


# ============================================================================ HLO forms
# ``to_hlo(writer, ctx, operand_names) -> name``: the HLO instruction(s) of each operator,
# passed to its declaration below (the writer is
# ``tensat_py.frontends.hlo.translate.HloWriter``; see ``tensat_py.ops.tensor``'s block).
# Layouts are TASO's: NCHW inputs, OIHW kernels. Sources: XLA operation semantics
# (https://openxla.org/xla/operation_semantics: Conv, ReduceWindow, Pad, Slice,
# Concatenate, Iota, Select) and TASO's operator definitions (see the module docstring).
def _hlo_act(w: Any, ctx: OpContext, name: str, code: int) -> str:
    """TASO activation ``code`` on ``name`` (of the output's type): none, ``logistic``,
    ``maximum(x, 0)``, ``tanh``."""
    out = _out(ctx)
    if code == 0:
        return name
    if code == 1:
        return w.emit("logistic", out, [name])
    if code == 3:
        return w.emit("tanh", out, [name])
    if code != 2:
        raise ValueError(f"activation {code} is not 0..3")
    zero = w.broadcast(w.constant(0.0, out.dtype), TensorType((), out.dtype), out.shape)
    return w.emit("maximum", out, [name, zero])


def _hlo_unary_act(code: int) -> Any:
    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        return _hlo_act(w, ctx, ins[0], code)

    to_hlo.__doc__ = f"HLO form of TASO activation {code} (``logistic``, ``maximum``, ``tanh``)."
    return to_hlo


def _hlo_ew2(opcode: str) -> Any:
    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        return w.emit(opcode, ctx.output, list(ins))

    to_hlo.__doc__ = f"HLO ``{opcode}`` (equal shapes)."
    return to_hlo


def _hlo_transpose(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``transpose(x), dimensions=perm``."""
    perm = "{" + ",".join(str(int(p)) for p in dims_param(ctx.params["perm"])) + "}"
    return w.emit("transpose", ctx.output, [ins[0]], [("dimensions", perm)])


def _hlo_reshape(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``reshape`` (row-major)."""
    return w.emit("reshape", ctx.output, [ins[0]])


def _hlo_matmul(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``dot`` over the last two axes, leading axes batched; then the activation."""
    r = len(_out(ctx).shape)
    batch = "{" + ",".join(str(i) for i in range(r - 2)) + "}"
    attrs = [
        ("lhs_contracting_dims", "{" + str(r - 1) + "}"),
        ("rhs_contracting_dims", "{" + str(r - 2) + "}"),
    ]
    if r > 2:
        attrs = [("lhs_batch_dims", batch), ("rhs_batch_dims", batch), *attrs]
    d = w.emit("dot", ctx.output, list(ins), attrs)
    return _hlo_act(w, ctx, d, int(ctx.params["act"]))


def _hlo_conv2d(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``convolution(x, w), window={size=khxkw stride=shxsw pad=t_bxl_r},
    dim_labels=bf01_oi01->bf01, feature_group_count=C/I`` (x ``[N, C, H, W]``, w
    ``[O, I, kh, kw]``; the pads of TASO's SAME (:func:`same_pads`) or VALID (none)),
    then the activation."""
    from tensat_py.ops.hlo import window_text

    p = ctx.params
    xs, ks = _t(ctx, 0).shape, _t(ctx, 1).shape
    sh, sw, pad = int(p["stride_h"]), int(p["stride_w"]), int(p["pad"])
    _, pt, pb = _pads(xs[2], ks[2], sh, pad)
    _, pl, pr = _pads(xs[3], ks[3], sw, pad)
    attrs = [
        ("window", window_text(ks[2:], (sh, sw), (pt, pb, pl, pr))),
        ("dim_labels", "bf01_oi01->bf01"),
    ]
    if xs[1] // ks[1] != 1:
        attrs.append(("feature_group_count", str(xs[1] // ks[1])))
    y = w.emit("convolution", ctx.output, list(ins), attrs)
    return _hlo_act(w, ctx, y, int(p["act"]))


def _hlo_pool(kind: str) -> Any:
    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        from tensat_py.ops.hlo import window_text

        p = ctx.params
        x, out = _t(ctx, 0), _out(ctx)
        kh, kw = int(p["kernel_h"]), int(p["kernel_w"])
        sh, sw, pad = int(p["stride_h"]), int(p["stride_w"]), int(p["pad"])
        _, pt, pb = _pads(x.shape[2], kh, sh, pad)
        _, pl, pr = _pads(x.shape[3], kw, sw, pad)
        win = window_text((1, 1, kh, kw), (1, 1, sh, sw), (0, 0, 0, 0, pt, pb, pl, pr))
        opcode = "maximum" if kind == "max" else "add"
        init = w.constant(-np.inf if kind == "max" else 0.0, x.dtype)
        comp = "%" + w.reducer(opcode, x.dtype)
        y = w.emit("reduce-window", out, [ins[0], init], [("window", win), ("to_apply", comp)])
        if kind == "avg":
            if pt or pb or pl or pr:  # divide by the non-padding elements of each window
                ones = TensorType(x.shape[2:], x.dtype)
                cnt_t = TensorType(out.shape[2:], x.dtype)
                one = w.broadcast(w.constant(1.0, x.dtype), TensorType((), x.dtype), ones.shape)
                zero = w.constant(0.0, x.dtype)
                win2 = window_text((kh, kw), (sh, sw), (pt, pb, pl, pr))
                cnt = w.emit(
                    "reduce-window", cnt_t, [one, zero], [("window", win2), ("to_apply", comp)]
                )
                den = w.emit("broadcast", out, [cnt], [("dimensions", "{2,3}")])
            else:
                den = w.broadcast(
                    w.constant(float(kh * kw), x.dtype), TensorType((), x.dtype), out.shape
                )
            y = w.emit("divide", out, [y, den])
        return _hlo_act(w, ctx, y, int(p["act"]))

    to_hlo.__doc__ = (
        f"HLO ``reduce-window`` ({'maximum, init -inf' if kind == 'max' else 'add, init 0'}) "
        "with window ``1x1xkhxkw``, strides ``1x1xshxsw`` and TASO's SAME/VALID pads on the "
        "spatial axes (padding reads the init value)"
        + (
            "; then ``divide`` by the count of non-padding elements per window (a "
            "``reduce-window`` of ones, or ``kh*kw`` when nothing is padded)"
            if kind == "avg"
            else ""
        )
        + "; then the activation."
    )
    return to_hlo


def _hlo_enlarge(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``pad(w, 0), padding=0_0x0_0xdh_dhxdw_dw``: the kernel ``[O, I, kh, kw]``
    centred in the reference kernel's ``kh', kw'`` (``dh = (kh' - kh) / 2``), as
    :func:`enlarge`; the reference operand is not read."""
    ws, rs = _t(ctx, 0).shape, _t(ctx, 1).shape
    dh, dw = rs[2] - ws[2], rs[3] - ws[3]
    if dh < 0 or dw < 0 or dh % 2 or dw % 2:
        raise ValueError(f"enlarge: kernel {list(ws)} cannot be centred in {rs[2]}x{rs[3]}")
    text = f"0_0x0_0x{dh // 2}_{dh // 2}x{dw // 2}_{dw // 2}"
    zero = w.constant(0.0, _t(ctx, 0).dtype)
    return w.emit("pad", ctx.output, [ins[0], zero], [("padding", text)])


def _hlo_merge(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """TASO MergeGConv, as :func:`merge`: the kernel ``[O, I, kh, kw]`` ``concatenate``d
    ``count`` times on axis 1, then ``select``ed where ``o // (O / count) == j // I``
    (``iota`` on both axes, ``divide``, ``compare EQ``, broadcast on ``{0,1}``), zero
    elsewhere: ``[O, I*count, kh, kw]``."""
    k, out = _t(ctx, 0), _out(ctx)
    o, i = k.shape[0], k.shape[1]
    count = int(ctx.params["count"])
    if count < 1 or o % count:
        raise ValueError(f"merge: weight {list(k.shape)} cannot merge {count} groups")
    tiled = w.emit("concatenate", out, [ins[0]] * count, [("dimensions", "{1}")])
    it = TensorType((o, i * count), "int32")
    slot = []
    for dim, per in ((0, o // count), (1, i)):
        idx = w.emit("iota", it, [], [("iota_dimension", str(dim))])
        div = w.broadcast(w.constant(per, "int32"), TensorType((), "int32"), it.shape)
        slot.append(w.emit("divide", it, [idx, div]))
    mask = w.emit("compare", TensorType(it.shape, "bool"), slot, [("direction", "EQ")])
    mask = w.emit("broadcast", TensorType(out.shape, "bool"), [mask], [("dimensions", "{0,1}")])
    zero = w.broadcast(w.constant(0.0, out.dtype), TensorType((), out.dtype), out.shape)
    return w.emit("select", out, [mask, tiled, zero])


def _hlo_concat(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``concatenate(x...), dimensions={axis}`` (any number of operands)."""
    return w.emit(
        "concatenate",
        ctx.output,
        list(ins),
        [("dimensions", "{" + str(int(ctx.params["axis"])) + "}")],
    )


def _hlo_split(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """A ``tuple`` of two HLO ``slice``s of x along ``axis``: ``[0, a)`` and ``[a, dim)``
    where ``a`` is the first part's size (the pair type); ``split_0``/``split_1`` take
    its parts with ``get-tuple-element``."""
    x = _t(ctx, 0)
    a, b = ctx.output  # type: ignore[misc]
    axis = int(ctx.params["axis"])
    cut = a.shape[axis]
    parts = []
    for part, (lo, hi) in ((a, (0, cut)), (b, (cut, x.shape[axis]))):
        spec = ", ".join(f"[{lo}:{hi}]" if d == axis else f"[0:{n}]" for d, n in enumerate(x.shape))
        parts.append(w.emit("slice", part, [ins[0]], [("slice", "{" + spec + "}")]))
    return w.tuple(parts, [a, b])


def _hlo_part(k: int) -> Any:
    def to_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
        return w.get_tuple_element(ins[0], ctx.inputs[0], k)

    to_hlo.__doc__ = f"HLO ``get-tuple-element(split), index={k}``."
    return to_hlo


def _hlo_batchnorm(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """``(x - mean) * (scale / sqrt(var + 1e-5)) + bias`` (as :func:`batchnorm`): the
    ``[C]`` parameters combined first, then ``broadcast`` on axis 1 of x ``[N, C, ...]``."""
    x = _t(ctx, 0)
    c = _t(ctx, 1)
    xn, scale, bias, mean, var = ins
    eps = w.broadcast(w.constant(BN_EPS, c.dtype), TensorType((), c.dtype), c.shape)
    inv = w.emit("divide", c, [scale, w.emit("sqrt", c, [w.emit("add", c, [var, eps])])])

    def wide(name: str) -> str:
        return w.emit("broadcast", x, [name], [("dimensions", "{1}")])

    d = w.emit("subtract", x, [xn, wide(mean)])
    return w.emit("add", x, [w.emit("multiply", x, [d, wide(inv)]), wide(bias)])


def _hlo_identity(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """No instruction: the operand itself (``dropout`` at inference)."""
    return ins[0]


# ============================================================================ leaves
def _leaf_evaluate(ctx: OpContext, args: Sequence[Any]) -> Any:
    raise ValueError(
        f"`{ctx.op}` {ctx.name!r} is a leaf: the executor feeds its value (it is never "
        "evaluated from operands)"
    )


register(
    OpDef(
        "input",
        _DIALECT,
        _leaf_evaluate,
        _zero_cost,
        None,
        launches_kernel=False,
        doc="A runtime input `name@d0_d1[:dtype]`; fed by the caller; an ONNX graph input "
        "(written by the exporter itself).",
    )
)
register(
    OpDef(
        "weight",
        _DIALECT,
        _leaf_evaluate,
        _zero_cost,
        None,
        launches_kernel=False,
        doc="A trained parameter (constant); fed by the caller; an ONNX initializer "
        "(written by the exporter itself).",
    )
)


# ============================================================================ elementwise
def _binary(name: str, fn: Any, onnx_type: str) -> None:
    def evaluate(ctx: OpContext, args: Sequence[Any]) -> Any:
        return fn(args[0], args[1])

    def to_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
        w.emit(onnx_type, list(ins), out)

    onnx_types = ("Add", "Gemm") if name == "ewadd" else (onnx_type,)
    register(
        OpDef(
            name,
            _DIALECT,
            evaluate,
            _elementwise_cost,
            to_onnx,
            onnx_types,
            doc=f"`a {'+' if name == 'ewadd' else '*'} b`, equal shapes and dtypes; "
            "1 FLOP per element.",
            to_hlo=_hlo_ew2("add" if name == "ewadd" else "multiply"),
            kernel="add" if name == "ewadd" else "mul",
            commutative=True,
            fusion="elementwise",
        )
    )


_binary("ewadd", np.add, "Add")
_binary("ewmul", np.multiply, "Mul")


_UNARY = {"relu": (lambda x: np.maximum(x, 0), "Relu"), "tanh": (np.tanh, "Tanh")}
_UNARY["sigmoid"] = (sigmoid, "Sigmoid")


def _unary(name: str) -> None:
    fn, onnx_type = _UNARY[name]

    def evaluate(ctx: OpContext, args: Sequence[Any]) -> Any:
        return fn(args[0])

    def to_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
        w.emit(onnx_type, list(ins), out)

    register(
        OpDef(
            name,
            _DIALECT,
            evaluate,
            _elementwise_cost,
            to_onnx,
            (onnx_type,),
            doc=f"elementwise {name}; 1 FLOP per element.",
            to_hlo=_hlo_unary_act({"sigmoid": 1, "relu": 2, "tanh": 3}[name]),
            fusion="elementwise",
        )
    )


for _name in ("relu", "tanh", "sigmoid"):
    _unary(_name)


# ============================================================================ matmul, conv
def _matmul_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return act(np.matmul(args[0], args[1]), int(ctx.params["act"]))


def _matmul_cost(ctx: OpContext) -> tuple[float, float]:
    """``2 * numel(out) * k`` (a multiply-add per term) plus the activation's."""
    k = _t(ctx, 0).shape[-1]
    return 2.0 * _n_out(ctx) * k + _act_flops(ctx), default_bytes(ctx)


def _matmul_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    _emit_act(w, "MatMul", ins, out, int(ctx.params["act"]))


register(
    OpDef(
        "matmul",
        _DIALECT,
        _matmul_eval,
        _matmul_cost,
        _matmul_onnx,
        ("MatMul", "Gemm"),
        doc="act(a @ b) over the last two axes, equal batch axes.",
        to_hlo=_hlo_matmul,
        fusion="library",
    )
)


def _conv_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    p = ctx.params
    return conv2d(
        args[0], args[1], int(p["stride_h"]), int(p["stride_w"]), int(p["pad"]), int(p["act"])
    )


def _conv_cost(ctx: OpContext) -> tuple[float, float]:
    """``2 * numel(out) * I * kh * kw`` plus the activation's."""
    w = _t(ctx, 1).shape
    return 2.0 * _n_out(ctx) * w[1] * w[2] * w[3] + _act_flops(ctx), default_bytes(ctx)


def _conv_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    p = ctx.params
    xs, ws = _t(ctx, 0).shape, _t(ctx, 1).shape
    strides = [int(p["stride_h"]), int(p["stride_w"])]
    _emit_act(
        w,
        "Conv",
        ins,
        out,
        int(p["act"]),
        kernel_shape=list(ws[2:]),
        strides=strides,
        pads=onnx_pads(xs[2:], ws[2:], strides, int(p["pad"])),
        group=xs[1] // ws[1],
    )


register(
    OpDef(
        "conv2d",
        _DIALECT,
        _conv_eval,
        _conv_cost,
        _conv_onnx,
        ("Conv",),
        doc="grouped NCHW x OIHW cross-correlation, SAME/VALID padding, then act.",
        to_hlo=_hlo_conv2d,
        fusion="library",
    )
)


# ============================================================================ pooling
def _pool(name: str, kind: str, onnx_type: str) -> None:
    def evaluate(ctx: OpContext, args: Sequence[Any]) -> Any:
        p = ctx.params
        return pool2d(
            args[0],
            int(p["kernel_h"]),
            int(p["kernel_w"]),
            int(p["stride_h"]),
            int(p["stride_w"]),
            int(p["pad"]),
            int(p["act"]),
            kind,
        )

    def cost(ctx: OpContext) -> tuple[float, float]:
        p = ctx.params
        f = _n_out(ctx) * int(p["kernel_h"]) * int(p["kernel_w"]) + _act_flops(ctx)
        return float(f), default_bytes(ctx)

    def to_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
        p = ctx.params
        xs = _t(ctx, 0).shape
        k = [int(p["kernel_h"]), int(p["kernel_w"])]
        s = [int(p["stride_h"]), int(p["stride_w"])]
        extra = {"count_include_pad": 0} if kind == "avg" else {}
        _emit_act(
            w,
            onnx_type,
            ins,
            out,
            int(p["act"]),
            kernel_shape=k,
            strides=s,
            pads=onnx_pads(xs[2:], k, s, int(p["pad"])),
            **extra,
        )

    register(
        OpDef(
            name,
            _DIALECT,
            evaluate,
            cost,
            to_onnx,
            (onnx_type,),
            doc=f"2-D {kind} pooling, SAME/VALID padding, then act; kh*kw FLOPs per output.",
            to_hlo=_hlo_pool(kind),
            fusion="reduce",
        )
    )


_pool("poolmax", "max", "MaxPool")
_pool("poolavg", "avg", "AveragePool")


# ============================================================================ layout
def _transpose_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return np.transpose(args[0], dims_param(ctx.params["perm"]))  # a view


def _transpose_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    w.emit("Transpose", list(ins), out, perm=list(dims_param(ctx.params["perm"])))


register(
    OpDef(
        "transpose",
        _DIALECT,
        _transpose_eval,
        _copy_cost,
        _transpose_onnx,
        ("Transpose", "Gemm"),
        doc="numpy.transpose(x, perm); a copy kernel (0 FLOPs).",
        to_hlo=_hlo_transpose,
        fusion="reshape",
    )
)


def _reshape_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return np.reshape(args[0], dims_param(ctx.params["shape"]))


def _reshape_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    shape = w.const(np.asarray(dims_param(ctx.params["shape"]), dtype=np.int64), "shape")
    w.emit("Reshape", [ins[0], shape], out)


register(
    OpDef(
        "reshape",
        _DIALECT,
        _reshape_eval,
        _zero_cost,
        _reshape_onnx,
        ("Reshape", "MatMul", "Flatten", "Squeeze", "Unsqueeze"),
        launches_kernel=False,
        doc="row-major reshape (a view: no kernel).",
        to_hlo=_hlo_reshape,
        fusion="reshape",
    )
)


def _enlarge_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return enlarge(args[0], args[1].shape)


def _enlarge_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    ws, rs = _t(ctx, 0).shape, _t(ctx, 1).shape
    dh, dw = (rs[2] - ws[2]) // 2, (rs[3] - ws[3]) // 2
    pads = w.const(np.asarray([0, 0, dh, dw, 0, 0, dh, dw], dtype=np.int64), "pads")
    w.emit("Pad", [ins[0], pads], out)


register(
    OpDef(
        "enlarge",
        _DIALECT,
        _enlarge_eval,
        _copy_cost,
        _enlarge_onnx,
        doc="centred zero padding of a kernel to ref's kh, kw; ONNX Pad.",
        to_hlo=_hlo_enlarge,
        fusion="reshape",
    )
)


def _merge_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return merge(args[0], int(ctx.params["count"]))


def _merge_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """``Tile`` the kernel ``count`` times along axis 1, then ``Mul`` by a 0/1 slot mask."""
    o, i, _, _ = _t(ctx, 0).shape
    count = int(ctx.params["count"])
    reps = w.const(np.asarray([1, count, 1, 1], dtype=np.int64), "reps")
    mask = np.zeros((o, i * count, 1, 1), dtype=np_dtype(_t(ctx, 0).dtype))
    per = o // count
    for oc in range(o):
        s = oc // per
        mask[oc, s * i : (s + 1) * i] = 1
    tiled = w.fresh("tile")
    w.emit("Tile", [ins[0], reps], tiled)
    w.emit("Mul", [tiled, w.const(mask, "merge_mask")], out)


register(
    OpDef(
        "merge",
        _DIALECT,
        _merge_eval,
        _copy_cost,
        _merge_onnx,
        doc="TASO MergeGConv on a kernel; ONNX Tile + Mul by a slot mask.",
        to_hlo=_hlo_merge,
        fusion="reshape",
    )
)


# ============================================================================ concat, split
def _concat_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return np.concatenate(list(args), axis=int(ctx.params["axis"]))


def _concat_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    w.emit("Concat", list(ins), out, axis=int(ctx.params["axis"]))


for _name in ("concat", "concat3", "concat4", "concat5"):
    register(
        OpDef(
            _name,
            _DIALECT,
            _concat_eval,
            _copy_cost,
            _concat_onnx,
            ("Concat",),
            doc="join along axis; a copy kernel (0 FLOPs).",
            to_hlo=_hlo_concat,
            fusion="reshape",
        )
    )


def _split_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    axis = int(ctx.params["axis"])
    first_t = ctx.output[0]  # type: ignore[index]
    first = first_t.shape[axis]
    x = args[0]
    return (
        np.take(x, range(first), axis=axis),
        np.take(x, range(first, x.shape[axis]), axis=axis),
    )


def _split_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    a, b = ctx.output  # type: ignore[misc]
    axis = int(ctx.params["axis"])
    sizes = w.const(np.asarray([a.shape[axis], b.shape[axis]], dtype=np.int64), "split")
    parts = [w.fresh("part"), w.fresh("part")]
    w.emit("Split", [ins[0], sizes], parts, axis=axis)
    w.set_pair(out, (parts[0], parts[1]))


def _part(k: int) -> Any:
    def evaluate(ctx: OpContext, args: Sequence[Any]) -> Any:
        return args[0][k]

    def to_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
        w.alias(out, w.pair(ins[0])[k])

    return evaluate, to_onnx


register(
    OpDef(
        "split",
        _DIALECT,
        _split_eval,
        _zero_cost,
        _split_onnx,
        ("Split",),
        launches_kernel=False,
        doc="a pair: x cut along axis where a concat joined it (views: no kernel).",
        to_hlo=_hlo_split,
        fusion="reshape",
    )
)
for _k in (0, 1):
    _ev, _to = _part(_k)
    register(
        OpDef(
            f"split_{_k}",
            _DIALECT,
            _ev,
            _zero_cost,
            _to,
            ("Split",),
            launches_kernel=False,
            doc=f"part {_k} of a split (no kernel; an alias of the ONNX Split's output {_k}).",
            to_hlo=_hlo_part(_k),
            fusion="reshape",
        )
    )


# ============================================================================ the rest
def _batchnorm_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return batchnorm(*args)


def _batchnorm_cost(ctx: OpContext) -> tuple[float, float]:
    """``x * a + b`` with ``a``, ``b`` folded from the constant parameters: 2 FLOPs each."""
    return 2.0 * _n_out(ctx), default_bytes(ctx)


def _batchnorm_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    w.emit("BatchNormalization", list(ins), out, epsilon=BN_EPS)


register(
    OpDef(
        "batchnorm",
        _DIALECT,
        _batchnorm_eval,
        _batchnorm_cost,
        _batchnorm_onnx,
        ("BatchNormalization",),
        doc="inference batch norm on axis 1, epsilon 1e-5.",
        to_hlo=_hlo_batchnorm,
        fusion="elementwise",
    )
)


def _dropout_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return args[0]


def _dropout_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    w.alias(out, ins[0])


register(
    OpDef(
        "dropout",
        _DIALECT,
        _dropout_eval,
        _copy_cost,
        _dropout_onnx,
        ("Dropout",),
        doc="identity at inference (priced as one copy kernel, as TASO does).",
        to_hlo=_hlo_identity,
        fusion="elementwise",
    )
)


def _noop_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    return None


register(
    OpDef(
        "noop",
        _DIALECT,
        _noop_eval,
        _zero_cost,
        None,
        launches_kernel=False,
        doc="joins several outputs under one root; computes nothing.",
    )
)


def _opaque_payload(ctx: OpContext) -> Any:
    sym = str(ctx.params["type"])
    g = ctx.graph
    return g.meta.get("opaque", {}).get(sym.rpartition("@")[0]) if g is not None else None


def _opaque_eval(ctx: OpContext, args: Sequence[Any]) -> Any:
    sym = str(ctx.params["type"])
    payload = _opaque_payload(ctx)
    if payload is None:
        raise ValueError(f"opaque operator `{sym}` has no payload to evaluate it")
    try:
        out = np.asarray(payload.evaluate(args))
    except NotImplementedError as e:
        raise ValueError(
            f"opaque operator `{sym}` ({payload.op_type}) cannot run in NumPy: {e}"
        ) from None
    want = _out(ctx).shape
    if tuple(out.shape) != want:
        raise ValueError(
            f"opaque operator `{sym}` ({payload.op_type}) gave shape {out.shape}, expected {want}"
        )
    return out


def _opaque_cost(ctx: OpContext) -> tuple[float, float]:
    """One memory-bound kernel: 1 FLOP per output element, operands read once."""
    return float(_n_out(ctx)), default_bytes(ctx)


def _opaque_onnx(w: Any, ctx: OpContext, ins: Sequence[str], out: str) -> None:
    """Delegates to the payload's ``to_onnx(w, ctx, ins, out)`` (its front end's format)."""
    payload = _opaque_payload(ctx)
    fn = getattr(payload, "to_onnx", None)
    if fn is None:
        raise ValueError(
            f"opaque node {ctx.name!r} (`{ctx.params['type']}`) has no ONNX payload; "
            "it cannot be saved"
        )
    fn(w, ctx, ins, out)


register(
    OpDef(
        "opaque",
        _DIALECT,
        _opaque_eval,
        _opaque_cost,
        _opaque_onnx,
        doc="an operator the language does not model; computed by its payload.",
    )
)


# ============================================================================ ONNX import
def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _add(imp: Any, op: str, params: Mapping[str, Any], inputs: Sequence[int]) -> int:
    """``imp.add``: the importers check every precondition first, so a type error from the
    analysis here is a translator bug (the importer reports it naming the ONNX node)."""
    return int(imp.add(op, dict(params), list(inputs)))


def _floats(imp: Any, node: Any, idx: Sequence[int]) -> list[TensorType]:
    """Types of inputs ``idx``: all present, one float dtype, else Unsupported."""
    ts = []
    for i in idx:
        if i >= len(node.input) or not node.input[i]:
            raise imp.Unsupported(f"input {i} is missing")
        ts.append(imp.type(node, i))
    dts = {t.dtype for t in ts}
    if len(dts) != 1 or not dts <= FLOAT_DTYPES:
        raise imp.Unsupported(f"dtypes {sorted(dts)} (one float dtype needed)")
    return ts


def _tensor(imp: Any, node: Any, i: int) -> int:
    nid = imp.input(node, i)
    if nid is None:
        raise imp.Unsupported(f"input {i} is missing")
    return int(nid)


def _pad_mode(
    size: Sequence[int], kernel: Sequence[int], stride: Sequence[int], attrs: Mapping[str, Any]
) -> int | None:
    """0 (SAME) or 1 (VALID) when the ONNX padding is exactly TASO's, else None.

    ONNX (Conv/MaxPool/AveragePool): ``auto_pad`` VALID, or NOTSET with zero ``pads`` and
    every kernel within its axis, is VALID; SAME_UPPER, or NOTSET with ``pads`` equal to
    SAME's (extra padding after), is SAME; SAME_LOWER is SAME when every axis pads evenly.
    With these pads ONNX's output size ``floor((h + pads - k) / s) + 1`` equals TASO's.
    """
    auto = _s(attrs.get("auto_pad", "NOTSET"))
    pads = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]
    if len(pads) != 4 or len(size) != 2 or len(kernel) != 2 or len(stride) != 2:
        return None
    fits = all(k <= h for h, k in zip(size, kernel, strict=True))
    same = same_pads(size, kernel, stride)
    if auto == "VALID":
        return 1 if fits else None
    if auto == "NOTSET":
        if pads == [0, 0, 0, 0] and fits:
            return 1
        return 0 if pads == same else None
    if auto == "SAME_UPPER":
        return 0
    if auto == "SAME_LOWER":
        return 0 if same[:2] == same[2:] else None
    return None


def _strides(imp: Any, a: Mapping[str, Any]) -> tuple[int, int]:
    s = [int(v) for v in a.get("strides", [1, 1])]
    if len(s) != 2 or min(s) < 1:
        raise imp.Unsupported(f"strides {s}")
    return s[0], s[1]


def _no_dilation(imp: Any, a: Mapping[str, Any]) -> None:
    d = [int(v) for v in a.get("dilations", [1, 1])]
    if any(v != 1 for v in d):
        raise imp.Unsupported(f"dilations {d}")


def _has_add() -> bool:
    return "add" in signatures()


@onnx_importer("Relu", "Tanh", "Sigmoid")
def import_activation(imp: Any, node: Any) -> None:
    """ONNX Relu/Tanh/Sigmoid (float tensors) -> ``relu``/``tanh``/``sigmoid``."""
    _floats(imp, node, [0])
    imp.set_output(node, 0, _add(imp, node.op_type.lower(), {}, [_tensor(imp, node, 0)]))


@onnx_importer("Identity")
def import_identity(imp: Any, node: Any) -> None:
    """ONNX Identity: the operand itself (no node)."""
    imp.set_output(node, 0, _tensor(imp, node, 0))


@onnx_importer("Dropout")
def import_dropout(imp: Any, node: Any) -> None:
    """ONNX Dropout at inference -> ``dropout``.

    ``training_mode`` (input 2) must be absent or a constant false; the ratio is unused. A
    used ``mask`` output is left unbound, so the importer makes the node opaque.
    """
    _floats(imp, node, [0])
    if len(node.input) > 2 and node.input[2]:
        tm = imp.const_value(node, 2)
        if tm is None or bool(np.asarray(tm).any()):
            raise imp.Unsupported("training_mode is not a constant false")
    x = _tensor(imp, node, 0)
    imp.set_output(node, 0, _add(imp, "dropout", {}, [x]))


def _matmul_ids(imp: Any, node: Any, x: int, w: int, xs: tuple, ws: tuple) -> int:
    if len(xs) >= 2 and len(xs) == len(ws) and xs[:-2] == ws[:-2]:
        return _add(imp, "matmul", {"act": 0}, [x, w])
    if len(xs) > 2 and len(ws) == 2:
        flat = _add(
            imp, "reshape", {"shape": list_param("reshape", "shape", (prod(xs[:-1]), xs[-1]))}, [x]
        )
        mm = _add(imp, "matmul", {"act": 0}, [flat, w])
        back = list_param("reshape", "shape", (*xs[:-1], ws[-1]))
        return _add(imp, "reshape", {"shape": back}, [mm])
    raise imp.Unsupported(f"operand shapes {list(xs)} @ {list(ws)} (broadcast or rank 1)")


@onnx_importer("MatMul")
def import_matmul(imp: Any, node: Any) -> None:
    """ONNX MatMul -> ``matmul`` for equal ranks >= 2 and equal batch axes; a rank > 2 left
    operand with a 2-D right one goes through ``reshape`` (flatten, matmul, restore)."""
    tx, tw = _floats(imp, node, [0, 1])
    if tx.shape[-1:] != tw.shape[-2:-1]:
        raise imp.Unsupported(f"inner dimensions {list(tx.shape)} @ {list(tw.shape)}")
    if len(tx.shape) >= 2 and len(tx.shape) == len(tw.shape) and tx.shape[:-2] != tw.shape[:-2]:
        raise imp.Unsupported("broadcast batch axes")
    if not (len(tx.shape) >= 2 and (len(tx.shape) == len(tw.shape) or len(tw.shape) == 2)):
        raise imp.Unsupported(f"ranks {len(tx.shape)} @ {len(tw.shape)}")
    x, w = _tensor(imp, node, 0), _tensor(imp, node, 1)
    imp.set_output(node, 0, _matmul_ids(imp, node, x, w, tx.shape, tw.shape))


@onnx_importer("Gemm")
def import_gemm(imp: Any, node: Any) -> None:
    """ONNX Gemm -> ``matmul`` (``transpose [1,0]`` for transA/transB); alpha must be 1.

    A bias C (beta must be 1) of the output's shape is an ``ewadd``; a broadcast one is the
    tensor dialect's ``add`` (unsupported while the core lacks it).
    """
    a = imp.attrs(node)
    has_c = len(node.input) > 2 and bool(node.input[2])
    ts = _floats(imp, node, [0, 1, 2] if has_c else [0, 1])
    if float(a.get("alpha", 1.0)) != 1.0:
        raise imp.Unsupported(f"alpha {a['alpha']}")
    if has_c and float(a.get("beta", 1.0)) != 1.0:
        raise imp.Unsupported(f"beta {a['beta']}")
    if len(ts[0].shape) != 2 or len(ts[1].shape) != 2:
        raise imp.Unsupported("Gemm operands are not matrices")
    ta, tb = bool(a.get("transA", 0)), bool(a.get("transB", 0))
    m = ts[0].shape[1] if ta else ts[0].shape[0]
    n = ts[1].shape[0] if tb else ts[1].shape[1]
    if has_c and ts[2].shape != (m, n) and not _has_add():
        raise imp.Unsupported("broadcast bias needs the tensor dialect's `add`")
    perm = list_param("transpose", "perm", (1, 0))
    x, w = _tensor(imp, node, 0), _tensor(imp, node, 1)
    if ta:
        x = _add(imp, "transpose", {"perm": perm}, [x])
    if tb:
        w = _add(imp, "transpose", {"perm": perm}, [w])
    mm = _add(imp, "matmul", {"act": 0}, [x, w])
    if has_c:
        c = _tensor(imp, node, 2)
        mm = _add(imp, "ewadd" if ts[2].shape == (m, n) else "add", {}, [mm, c])
    imp.set_output(node, 0, mm)


def _explicit_pads(imp: Any, a: Mapping[str, Any], rank: int) -> list[int]:
    """ONNX ``pads`` of a ``NOTSET`` Conv/pool (``[b_1.., e_1..]``, zeros when absent), or
    Unsupported for a non-negative check failure or an ``auto_pad`` that is not NOTSET."""
    auto = _s(a.get("auto_pad", "NOTSET"))
    pads = [int(p) for p in a.get("pads", [0] * (2 * rank))]
    if auto != "NOTSET" or len(pads) != 2 * rank or min(pads) < 0:
        raise imp.Unsupported(f"padding {a.get('pads')} / {auto}")
    return pads


@onnx_importer("Conv")
def import_conv(imp: Any, node: Any) -> None:
    """ONNX Conv (1-D or 2-D, dilations 1, any group) -> ``conv2d``.

    Padding: exactly SAME (TASO's: extra padding after) or VALID is the ``pad`` parameter;
    any other explicit ``pads`` (``auto_pad`` NOTSET, e.g. ``[1, 1, 1, 1]`` at stride 2) is
    the tensor dialect's ``pad`` (constant 0) followed by a VALID ``conv2d``, whose output
    size ``ceil((h + pads - k + 1) / s)`` equals ONNX's ``floor((h + pads - k) / s) + 1``.
    A 1-D Conv (x ``[N, C, L]``, w ``[O, I, k]``) runs as the 2-D one on ``[N, C, 1, L]``
    and ``[O, I, 1, k]`` (``reshape``), its result reshaped back to ``[N, O, L']``. A bias
    B ``[O]`` is ``add`` of B as ``[O, 1, 1]``. Source: ONNX Conv (opset 11+)."""
    a = imp.attrs(node)
    has_b = len(node.input) > 2 and bool(node.input[2])
    ts = _floats(imp, node, [0, 1, 2] if has_b else [0, 1])
    xs, ws = tuple(ts[0].shape), tuple(ts[1].shape)
    one_d = len(xs) == 3 and len(ws) == 3
    if not one_d and (len(xs) != 4 or len(ws) != 4):
        raise imp.Unsupported(f"not 1-D or 2-D: input {list(xs)}, weight {list(ws)}")
    if one_d:
        a = dict(a)
        for key, unit in (("strides", 1), ("dilations", 1), ("kernel_shape", 1)):
            if key in a:
                a[key] = [unit, *a[key]]
        if "pads" in a:
            p = [int(v) for v in a["pads"]]
            a["pads"] = [0, p[0], 0, p[1]] if len(p) == 2 else p
        xs, ws = (xs[0], xs[1], 1, xs[2]), (ws[0], ws[1], 1, ws[2])
    _no_dilation(imp, a)
    if [int(v) for v in a.get("kernel_shape", ws[2:])] != list(ws[2:]):
        raise imp.Unsupported("kernel_shape differs from the weight's")
    group = int(a.get("group", 1))
    if ws[1] * group != xs[1] or ws[0] % group:
        raise imp.Unsupported(f"group {group} does not fit {list(xs)} x {list(ws)}")
    strides = _strides(imp, a)
    pad = _pad_mode(xs[2:], ws[2:], strides, a)
    explicit = None
    if pad is None:
        explicit = _explicit_pads(imp, a, 2)
        padded = [xs[2] + explicit[0] + explicit[2], xs[3] + explicit[1] + explicit[3]]
        if any(k > h for h, k in zip(padded, ws[2:], strict=True)):
            raise imp.Unsupported(f"kernel {list(ws[2:])} exceeds padded input {padded}")
    if has_b and ts[2].shape != (ws[0],):
        raise imp.Unsupported(f"bias shape {list(ts[2].shape)} is not [{ws[0]}]")
    x, w = _tensor(imp, node, 0), _tensor(imp, node, 1)
    if one_d:
        x = _add(imp, "reshape", {"shape": list_param("reshape", "shape", xs)}, [x])
        w = _add(imp, "reshape", {"shape": list_param("reshape", "shape", ws)}, [w])
    if explicit is not None:
        pads = (0, 0, explicit[0], explicit[1], 0, 0, explicit[2], explicit[3])
        x = _add(imp, "pad", {"pads": pads, "mode": "constant", "value": 0.0}, [x])
        pad = 1
    p = {"stride_h": strides[0], "stride_w": strides[1], "pad": pad, "act": 0}
    conv = _add(imp, "conv2d", p, [x, w])
    if has_b:
        bv = imp.const_value(node, 2)
        if bv is not None:
            bias = imp.weight(np.asarray(bv).reshape(ws[0], 1, 1), "conv_bias")
        else:
            shape = list_param("reshape", "shape", (ws[0], 1, 1))
            bias = _add(imp, "reshape", {"shape": shape}, [_tensor(imp, node, 2)])
        conv = _add(imp, "add", {}, [conv, bias])
    if one_d:
        t = imp.graph.type_of(conv).shape
        shape = list_param("reshape", "shape", (t[0], t[1], t[3]))
        conv = _add(imp, "reshape", {"shape": shape}, [conv])
    imp.set_output(node, 0, conv)


@onnx_importer("MaxPool", "AveragePool")
def import_pool(imp: Any, node: Any) -> None:
    """ONNX MaxPool/AveragePool (2-D, ceil_mode 0, dilations 1; a used Indices output
    stays unbound, so the node becomes opaque) ->
    ``poolmax``/``poolavg`` on the Conv padding rule; AveragePool with padding needs
    ``count_include_pad`` 0."""
    a = imp.attrs(node)
    (tx,) = _floats(imp, node, [0])
    xs = tx.shape
    if len(xs) != 4:
        raise imp.Unsupported(f"not 2-D: input {list(xs)}")
    k = [int(v) for v in a.get("kernel_shape", [])]
    if len(k) != 2 or a.get("ceil_mode", 0) or a.get("storage_order", 0):
        raise imp.Unsupported("kernel_shape, ceil_mode or storage_order")
    _no_dilation(imp, a)
    strides = _strides(imp, a)
    pad = _pad_mode(xs[2:], k, strides, a)
    if pad is None:
        raise imp.Unsupported(f"padding {a.get('pads')} / {_s(a.get('auto_pad', 'NOTSET'))}")
    avg = node.op_type == "AveragePool"
    if avg and pad == 0 and a.get("count_include_pad", 0) and any(same_pads(xs[2:], k, strides)):
        raise imp.Unsupported("count_include_pad with padding")
    p = {
        "kernel_h": k[0],
        "kernel_w": k[1],
        "stride_h": strides[0],
        "stride_w": strides[1],
        "pad": pad,
        "act": 0,
    }
    imp.set_output(node, 0, _add(imp, "poolavg" if avg else "poolmax", p, [_tensor(imp, node, 0)]))


def _concat(imp: Any, axis: int, ndim: int, ids: list[int]) -> int:
    """``concat``/``concat3``..``concat5``; more than 5 operands nest to the right."""
    if len(ids) > 5:
        ids = ids[:4] + [_concat(imp, axis, ndim, ids[4:])]
    op = {2: "concat", 3: "concat3", 4: "concat4", 5: "concat5"}[len(ids)]
    return _add(imp, op, {"axis": axis, "ndim": ndim}, ids)


@onnx_importer("Concat")
def import_concat(imp: Any, node: Any) -> None:
    """ONNX Concat -> ``concat``/``concat3``... (any dtype; one operand is itself)."""
    n = len(node.input)
    if n == 0 or any(not i for i in node.input):
        raise imp.Unsupported("missing operand")
    rank = len(imp.type(node, 0).shape)
    axis = int(imp.attrs(node).get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    ids = [_tensor(imp, node, i) for i in range(n)]
    imp.set_output(node, 0, ids[0] if n == 1 else _concat(imp, axis, rank, ids))


@onnx_importer("Split")
def import_split(imp: Any, node: Any) -> None:
    """ONNX Split -> a right-nested chain of ``split``/``split_0``/``split_1`` where the
    input is a ``concat`` on the axis cut exactly where it joined its operands (TASO's
    form); any other Split -> one tensor-dialect ``slice`` per output. Sizes come from the
    ``split`` input (opset 13+), the ``split`` attribute (older), ``num_outputs``
    (opset 18: parts of ``ceil(dim / n)``, the last smaller) or equal parts.
    """
    a = imp.attrs(node)
    shape = imp.type(node, 0).shape
    axis = int(a.get("axis", 0))
    axis = axis + len(shape) if axis < 0 else axis
    outs = list(node.output)
    n = len(outs)
    dim = shape[axis]
    if len(node.input) > 1 and node.input[1]:
        v = imp.const_value(node, 1)
        if v is None:
            raise imp.Unsupported("split sizes are not constant")
        sizes = [int(s) for s in np.asarray(v).reshape(-1)]
    elif "split" in a:
        sizes = [int(s) for s in a["split"]]
    elif "num_outputs" in a:
        chunk = -(-dim // int(a["num_outputs"]))
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    else:
        if dim % n:
            raise imp.Unsupported(f"{dim} does not split into {n} equal parts")
        sizes = [dim // n] * n
    if len(sizes) != n or sum(sizes) != dim or min(sizes) < 1:
        raise imp.Unsupported(f"sizes {sizes} for {n} outputs of {dim}")
    x = _tensor(imp, node, 0)
    if _concat_parts(imp.graph, x, axis) == sizes:
        ids = _split_chain(imp, x, axis, n)
    else:
        ids = _split_slices(imp, x, axis, sizes)
    for k, (o, nid) in enumerate(zip(outs, ids, strict=True)):
        if o:
            imp.set_output(node, k, nid)


_CONCATS = ("concat", "concat3", "concat4", "concat5")


def _concat_parts(graph: Any, nid: int, axis: int) -> list[int] | None:
    """Sizes along ``axis`` of the operands of the concat that computes node ``nid`` (the
    positions where ``split`` cuts it), or None when ``nid`` is no concat on ``axis``."""
    node = graph.nodes[nid]
    if node.op not in _CONCATS or int(node.params["axis"]) != axis:
        return None
    return [graph.type_of(i).shape[axis] for i in node.inputs]


def _split_chain(imp: Any, x: int, axis: int, n: int) -> list[int]:
    """``n`` parts of concat result ``x`` as a right-nested ``split``/``split_0``/
    ``split_1`` chain (TASO's form, which its rules match)."""
    ids: list[int] = []
    cur = x
    for _ in range(n - 1):
        pair = _add(imp, "split", {"axis": axis}, [cur])
        ids.append(_add(imp, "split_0", {}, [pair]))
        cur = _add(imp, "split_1", {}, [pair])
    ids.append(cur)
    return ids


def _split_slices(imp: Any, x: int, axis: int, sizes: Sequence[int]) -> list[int]:
    """Parts of ``x`` of ``sizes`` along ``axis`` as the tensor dialect's ``slice``s."""
    if len(sizes) == 1:
        return [x]
    ids, off = [], 0
    for size in sizes:
        params = {"starts": (off,), "ends": (off + size,), "axes": (axis,), "steps": (1,)}
        ids.append(_add(imp, "slice", params, [x]))
        off += size
    return ids


@onnx_importer("Reshape")
def import_reshape(imp: Any, node: Any) -> None:
    """ONNX Reshape with a constant shape (``0`` copies a dim unless ``allowzero``, one
    ``-1`` is inferred) -> ``reshape`` (any dtype)."""
    a = imp.attrs(node)
    src = imp.type(node, 0).shape
    v = imp.const_value(node, 1) if len(node.input) > 1 and node.input[1] else None
    if v is None:
        raise imp.Unsupported("shape is not constant")
    target = [int(d) for d in np.asarray(v).reshape(-1)]
    if a.get("allowzero", 0) and 0 in target:
        raise imp.Unsupported("allowzero with a zero dimension")
    dims = [src[k] if d == 0 else d for k, d in enumerate(target)]
    if dims.count(-1) > 1:
        raise imp.Unsupported("two -1 dimensions")
    if -1 in dims:
        rest = prod(d for d in dims if d != -1)
        if rest == 0:
            raise imp.Unsupported("zero-size dimension")
        dims[dims.index(-1)] = prod(src) // rest
    if prod(dims) != prod(src) or any(d < 1 for d in dims):
        raise imp.Unsupported(f"shape {target} does not fit {list(src)}")
    if len(dims) < 2 and _symbol_lists():
        raise imp.Unsupported("rank < 2 target (this core spells shapes as symbols)")
    shape = list_param("reshape", "shape", dims)
    imp.set_output(node, 0, _add(imp, "reshape", {"shape": shape}, [_tensor(imp, node, 0)]))


@onnx_importer("Transpose")
def import_transpose(imp: Any, node: Any) -> None:
    """ONNX Transpose -> ``transpose`` (default perm reverses; identity is the operand)."""
    rank = len(imp.type(node, 0).shape)
    perm = [int(p) for p in imp.attrs(node).get("perm", list(range(rank))[::-1])]
    x = _tensor(imp, node, 0)
    if perm == list(range(rank)):
        imp.set_output(node, 0, x)
        return
    imp.set_output(
        node, 0, _add(imp, "transpose", {"perm": list_param("transpose", "perm", perm)}, [x])
    )


@onnx_importer("BatchNormalization")
def import_batchnorm(imp: Any, node: Any) -> None:
    """ONNX BatchNormalization (inference: ``training_mode`` 0, epsilon 1e-5, parameters
    ``[C]`` of x's float dtype) -> ``batchnorm``; used running-statistics outputs stay
    unbound (the node becomes opaque)."""
    a = imp.attrs(node)
    ts = _floats(imp, node, [0, 1, 2, 3, 4])
    if a.get("training_mode", 0):
        raise imp.Unsupported("training mode")
    if abs(float(a.get("epsilon", BN_EPS)) - BN_EPS) > 1e-9:
        raise imp.Unsupported(f"epsilon {a['epsilon']}")
    xs = ts[0].shape
    if len(xs) < 2 or any(t.shape != (xs[1],) for t in ts[1:]):
        raise imp.Unsupported("parameters are not [C]")
    ids = [_tensor(imp, node, i) for i in range(5)]
    imp.set_output(node, 0, _add(imp, "batchnorm", {}, ids))
