"""The hlo dialect: XLA HLO operators the tensor dialect cannot express exactly.

One :class:`~tensat_py.ops.OpDef` per operator declared in ``rust/src/lang/hlo.rs``:
NumPy semantics (``evaluate``), FLOPs and bytes (``cost``) and the HLO instruction(s) it
prints as (``to_hlo``, called by :mod:`tensat_py.frontends.hlo` with its writer). None of
them has an ONNX form (``to_onnx`` is None; ONNX export of HLO programs is not offered).

Semantics follow XLA's operation semantics (https://openxla.org/xla/operation_semantics):

* ``dot_general``: ``DotGeneral``; output axes are the batch axes (in ``lhs_batch``
  order), then the free axes of ``lhs``, then those of ``rhs``, each in their order.
  FLOPs ``2 x numel(output) x prod(contracted sizes)``.
* ``convolution``: ``Conv`` with ``ConvolutionDimensionNumbers`` written as
  ``dim_labels`` (``b01f_01io->b01f``), window strides, padding ``[lo0, hi0, lo1, ...]``
  (negative pads crop), input (``lhs``) and kernel (``rhs``) dilation, feature and batch
  group counts; a cross-correlation (no kernel reversal). FLOPs
  ``2 x numel(output) x (kernel input features) x prod(window)``.
* ``broadcast_in_dim``: ``Broadcast`` with ``dimensions=``: operand axis ``i`` is output
  axis ``dims[i]``; an operand axis of size 1 broadcasts. Data movement only.
* ``iota``: ``Iota``: the index along ``dim``; constant.
* ``reduce_window``: ``ReduceWindow`` with ``add``/``max``/``min``, the input padded with
  that reduction's identity (0, -inf, +inf; for integers their extreme values).
  FLOPs ``numel(output) x prod(window)``.
* ``concatenate``: ``ConcatInDim`` of any number of operands. Data movement only.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensat_py.ops import OpContext, OpDef, default_bytes, register

__all__ = ["dot_general", "convolution", "broadcast_in_dim", "parse_dim_labels"]

_DIALECT = "hlo"


def _p(ctx: OpContext, name: str) -> Any:
    return ctx.params[name]


def _ints(v: Any) -> tuple[int, ...]:
    return tuple(int(i) for i in v)


def _attr_list(v: Sequence[int]) -> str:
    return "{" + ",".join(str(int(i)) for i in v) + "}"


def _numel(t: Any) -> int:
    return math.prod(t.shape)


# ----------------------------------------------------------------------- dot_general
def dot_general(
    a: np.ndarray,
    b: np.ndarray,
    lb: Sequence[int],
    rb: Sequence[int],
    lc: Sequence[int],
    rc: Sequence[int],
) -> np.ndarray:
    """XLA DotGeneral with ``numpy.einsum``: ``[batch..., lhs free..., rhs free...]``."""
    letters = iter(string.ascii_letters)
    la = [""] * a.ndim
    ra = [""] * b.ndim
    out = []
    for i, j in zip(lb, rb, strict=True):
        la[i] = ra[j] = next(letters)
        out.append(la[i])
    for i, j in zip(lc, rc, strict=True):
        la[i] = ra[j] = next(letters)
    for k in range(a.ndim):
        if not la[k]:
            la[k] = next(letters)
            out.append(la[k])
    for k in range(b.ndim):
        if not ra[k]:
            ra[k] = next(letters)
            out.append(ra[k])
    spec = f"{''.join(la)},{''.join(ra)}->{''.join(out)}"
    dt = np.result_type(a, b)
    if dt.kind == "f" and dt.itemsize < 4 or dt.name == "bfloat16":
        return np.einsum(spec, a.astype(np.float32), b.astype(np.float32)).astype(dt)
    return np.asarray(np.einsum(spec, a, b)).astype(dt, copy=False)


def _dot_eval(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``dot_general(lhs, rhs, lhs_batch, rhs_batch, lhs_contract, rhs_contract)``."""
    return dot_general(
        np.asarray(args[0]),
        np.asarray(args[1]),
        _ints(_p(ctx, "lhs_batch")),
        _ints(_p(ctx, "rhs_batch")),
        _ints(_p(ctx, "lhs_contract")),
        _ints(_p(ctx, "rhs_contract")),
    )


def _dot_cost(ctx: OpContext) -> tuple[float, float]:
    """FLOPs = 2 x numel(output) x prod(contracted sizes); bytes = default_bytes."""
    k = math.prod(ctx.inputs[0].shape[i] for i in _ints(_p(ctx, "lhs_contract")))
    return 2.0 * _numel(ctx.output) * k, default_bytes(ctx)


def _dot_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``dot`` with its dimension numbers."""
    attrs = []
    for key, p in (
        ("lhs_batch_dims", "lhs_batch"),
        ("lhs_contracting_dims", "lhs_contract"),
        ("rhs_batch_dims", "rhs_batch"),
        ("rhs_contracting_dims", "rhs_contract"),
    ):
        if _p(ctx, p):
            attrs.append((key, _attr_list(_p(ctx, p))))
    return w.emit("dot", ctx.output, ins, attrs)


# ----------------------------------------------------------------------- convolution
def parse_dim_labels(text: str) -> tuple[list[int], list[int], list[int]]:
    """``"b01f_01io->b01f"`` -> axes of (batch, feature, spatial...) of the input,
    (input feature, output feature, spatial...) of the kernel, (batch, feature,
    spatial...) of the output. Raises ``ValueError`` when malformed."""
    try:
        ins, out = text.split("->")
        inp, ker = ins.split("_")
        n = len(inp) - 2

        def find(t: str, a: str, b: str) -> list[int]:
            idx = [t.index(a), t.index(b)] + [t.index(str(d)) for d in range(n)]
            if len(t) != n + 2 or len(set(idx)) != n + 2:
                raise ValueError
            return idx

        return find(inp, "b", "f"), find(ker, "i", "o"), find(out, "b", "f")
    except ValueError:
        raise ValueError(f"dim_labels `{text}` is not like b01f_01io->b01f") from None


def convolution(
    x: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    padding: Sequence[int],
    lhs_dilation: Sequence[int],
    rhs_dilation: Sequence[int],
    dim_labels: str,
    feature_groups: int = 1,
    batch_groups: int = 1,
) -> np.ndarray:
    """XLA Conv (cross-correlation) in NumPy; see the module docstring."""
    il, kl, ol = parse_dim_labels(dim_labels)
    n = len(il) - 2
    dt = np.result_type(x, w)
    if dt == np.float64:
        work: Any = np.float64
    elif dt.kind == "f" or dt.name == "bfloat16":
        work = np.float32
    else:
        work = np.int64
    xc = np.transpose(x, il).astype(work)  # [B, F, s...]
    wc = np.transpose(w, [kl[1], kl[0], *kl[2:]]).astype(work)  # [O, I, k...]
    for d in range(n):  # input dilation: zeros between elements
        if lhs_dilation[d] > 1:
            size = xc.shape[2 + d]
            shape = list(xc.shape)
            shape[2 + d] = (size - 1) * lhs_dilation[d] + 1
            z = np.zeros(shape, work)
            idx = [slice(None)] * xc.ndim
            idx[2 + d] = slice(None, None, lhs_dilation[d])
            z[tuple(idx)] = xc
            xc = z
    pads = [(0, 0), (0, 0)]
    for d in range(n):
        lo, hi = int(padding[2 * d]), int(padding[2 * d + 1])
        pads.append((max(lo, 0), max(hi, 0)))
    xc = np.pad(xc, pads)
    # negative padding crops (after the positive pads were applied on the other side)
    sl = [slice(None), slice(None)]
    for d in range(n):
        lo, hi = int(padding[2 * d]), int(padding[2 * d + 1])
        start = max(-lo, 0)
        stop = xc.shape[2 + d] - max(-hi, 0)
        sl.append(slice(start, stop))
    xc = xc[tuple(sl)]
    b, f = xc.shape[:2]
    o, i = wc.shape[:2]
    ksz = wc.shape[2:]
    dk = [(ksz[d] - 1) * rhs_dilation[d] + 1 for d in range(n)]
    osp = [(xc.shape[2 + d] - dk[d]) // strides[d] + 1 for d in range(n)]
    fg, bg = int(feature_groups), int(batch_groups)
    out = np.zeros((b // bg, o, *osp), work)
    og = o // (fg * bg)
    for g in range(fg * bg):
        if bg > 1:
            xg = xc[g * (b // bg) : (g + 1) * (b // bg)]
        else:
            xg = xc[:, g * i : (g + 1) * i]
        wg = wc[g * og : (g + 1) * og]
        acc = np.zeros((xg.shape[0], og, *osp), work)
        for kpos in np.ndindex(*ksz):
            idx = [slice(None), slice(None)]
            for d in range(n):
                s0 = kpos[d] * rhs_dilation[d]
                idx.append(slice(s0, s0 + (osp[d] - 1) * strides[d] + 1, strides[d]))
            patch = xg[tuple(idx)]  # [B, I, o...]
            acc += np.einsum("bi...,oi->bo...", patch, wg[(slice(None), slice(None), *kpos)])
        out[:, g * og : (g + 1) * og] = acc
    # to the output layout
    perm = [0] * (n + 2)
    for canon, axis in enumerate(ol):
        perm[axis] = canon
    return np.transpose(out, perm).astype(dt)


def _conv_eval(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``convolution(x, w, strides, padding, lhs_dilation, rhs_dilation, dim_labels,
    feature_groups, batch_groups)``: XLA Conv."""
    return convolution(
        np.asarray(args[0]),
        np.asarray(args[1]),
        _ints(_p(ctx, "strides")),
        _ints(_p(ctx, "padding")),
        _ints(_p(ctx, "lhs_dilation")),
        _ints(_p(ctx, "rhs_dilation")),
        str(_p(ctx, "dim_labels")),
        int(_p(ctx, "feature_groups")),
        int(_p(ctx, "batch_groups")),
    )


def _conv_cost(ctx: OpContext) -> tuple[float, float]:
    """FLOPs = 2 x numel(output) x kernel input features x prod(window)."""
    _, kl, _ = parse_dim_labels(str(_p(ctx, "dim_labels")))
    wshape = ctx.inputs[1].shape
    k = wshape[kl[0]] * math.prod(wshape[a] for a in kl[2:])
    return 2.0 * _numel(ctx.output) * k, default_bytes(ctx)


def window_text(
    size: Sequence[int],
    strides: Sequence[int],
    padding: Sequence[int],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
) -> str:
    """HLO ``window={size=3x3 stride=2x2 pad=0_1x0_1 ...}`` (defaults left out)."""
    n = len(size)
    parts = ["size=" + "x".join(str(s) for s in size)]
    if any(s != 1 for s in strides):
        parts.append("stride=" + "x".join(str(s) for s in strides))
    if any(p != 0 for p in padding):
        parts.append("pad=" + "x".join(f"{padding[2 * d]}_{padding[2 * d + 1]}" for d in range(n)))
    if lhs_dilation and any(s != 1 for s in lhs_dilation):
        parts.append("lhs_dilate=" + "x".join(str(s) for s in lhs_dilation))
    if rhs_dilation and any(s != 1 for s in rhs_dilation):
        parts.append("rhs_dilate=" + "x".join(str(s) for s in rhs_dilation))
    return "{" + " ".join(parts) + "}"


def _conv_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``convolution`` with ``window``, ``dim_labels`` and group counts."""
    _, kl, _ = parse_dim_labels(str(_p(ctx, "dim_labels")))
    wshape = ctx.inputs[1].shape
    attrs = []
    if len(kl) > 2:
        attrs.append(
            (
                "window",
                window_text(
                    [wshape[a] for a in kl[2:]],
                    _ints(_p(ctx, "strides")),
                    _ints(_p(ctx, "padding")),
                    _ints(_p(ctx, "lhs_dilation")),
                    _ints(_p(ctx, "rhs_dilation")),
                ),
            )
        )
    attrs.append(("dim_labels", str(_p(ctx, "dim_labels"))))
    if int(_p(ctx, "feature_groups")) != 1:
        attrs.append(("feature_group_count", str(int(_p(ctx, "feature_groups")))))
    if int(_p(ctx, "batch_groups")) != 1:
        attrs.append(("batch_group_count", str(int(_p(ctx, "batch_groups")))))
    return w.emit("convolution", ctx.output, ins, attrs)


# ------------------------------------------------------------------ broadcast_in_dim
def broadcast_in_dim(x: np.ndarray, shape: Sequence[int], dims: Sequence[int]) -> np.ndarray:
    """XLA Broadcast(InDim): operand axis ``i`` becomes output axis ``dims[i]``."""
    view = [1] * len(shape)
    for i, d in enumerate(dims):
        view[d] = x.shape[i]
    return np.array(np.broadcast_to(np.reshape(x, view), tuple(shape)))


def _bid_eval(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``broadcast_in_dim(x, shape, dims)``: XLA Broadcast with ``dimensions=dims``."""
    return broadcast_in_dim(np.asarray(args[0]), _ints(_p(ctx, "shape")), _ints(_p(ctx, "dims")))


def _move_cost(ctx: OpContext) -> tuple[float, float]:
    """Data movement only: FLOPs = 0; bytes = default_bytes."""
    return 0.0, default_bytes(ctx)


def _bid_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``broadcast(x), dimensions={...}`` (size-1 axes that expand are reshaped
    away first, as HLO broadcast needs equal sizes)."""
    x = ctx.inputs[0]
    dims = _ints(_p(ctx, "dims"))
    shape = _ints(_p(ctx, "shape"))
    keep = [i for i in range(len(dims)) if x.shape[i] == shape[dims[i]]]
    name = ins[0]
    if len(keep) != len(dims):
        name = w.reshape(name, x, tuple(x.shape[i] for i in keep))
    return w.emit(
        "broadcast", ctx.output, [name], [("dimensions", _attr_list([dims[i] for i in keep]))]
    )


# ------------------------------------------------------------------------------ iota
def _iota_eval(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``iota(shape, dtype, dim)``: the index along axis ``dim`` (XLA Iota)."""
    from tensat_py.ops.tensor import np_dtype

    shape = _ints(_p(ctx, "shape"))
    d = int(_p(ctx, "dim"))
    dt = np_dtype(str(_p(ctx, "dtype")))
    if ctx.float_dtype is not None and dt.kind == "f":
        dt = np_dtype(ctx.float_dtype)
    view = [1] * len(shape)
    view[d] = shape[d]
    return np.array(np.broadcast_to(np.arange(shape[d]).reshape(view), shape)).astype(dt)


def _const_cost(ctx: OpContext) -> tuple[float, float]:
    """A constant: FLOPs = numel(output) (charged only when not pre-computed)."""
    return float(_numel(ctx.output)), default_bytes(ctx)


def _iota_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``iota(), iota_dimension=dim``."""
    return w.emit("iota", ctx.output, [], [("iota_dimension", str(int(_p(ctx, "dim"))))])


# --------------------------------------------------------------------- reduce_window
def identity(kind: str, dtype: np.dtype) -> Any:
    """The identity of reduction ``kind`` (``add``, ``max``, ``min``, ``mul``) in ``dtype``."""
    dtype = np.dtype(dtype)
    if kind == "add":
        return dtype.type(0)
    if kind == "mul":
        return dtype.type(1)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if kind == "max" else info.max
    return dtype.type(-np.inf if kind == "max" else np.inf)


def _rw_eval(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``reduce_window(x, kind, window, strides, padding)``: XLA ReduceWindow padded with
    the identity of ``kind``."""
    x = np.asarray(args[0])
    kind = str(_p(ctx, "kind"))
    win = _ints(_p(ctx, "window"))
    strides = _ints(_p(ctx, "strides"))
    pad = _ints(_p(ctx, "padding"))
    r = x.ndim
    xp = np.pad(
        x, [(pad[2 * d], pad[2 * d + 1]) for d in range(r)], constant_values=identity(kind, x.dtype)
    )
    osz = [(xp.shape[d] - win[d]) // strides[d] + 1 for d in range(r)]
    fn = {"add": np.add, "max": np.maximum, "min": np.minimum}[kind]
    out = None
    for kpos in np.ndindex(*win):
        idx = tuple(
            slice(kpos[d], kpos[d] + (osz[d] - 1) * strides[d] + 1, strides[d]) for d in range(r)
        )
        out = xp[idx].copy() if out is None else fn(out, xp[idx])
    assert out is not None
    return out.astype(x.dtype, copy=False)


def _rw_cost(ctx: OpContext) -> tuple[float, float]:
    """FLOPs = numel(output) x prod(window); bytes = default_bytes."""
    return float(_numel(ctx.output) * math.prod(_ints(_p(ctx, "window")))), default_bytes(ctx)


#: reduce_window kind -> HLO opcode of its computation.
KIND_OPCODE = {"add": "add", "max": "maximum", "min": "minimum", "mul": "multiply"}


def _rw_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``reduce-window(x, init), window={...}, to_apply=%<add|max|min>``."""
    kind = str(_p(ctx, "kind"))
    x = ctx.inputs[0]
    init = w.constant(identity(kind, np.dtype(_np_name(x.dtype))), x.dtype)
    comp = w.reducer(KIND_OPCODE[kind], x.dtype)
    win = window_text(
        _ints(_p(ctx, "window")), _ints(_p(ctx, "strides")), _ints(_p(ctx, "padding"))
    )
    return w.emit(
        "reduce-window", ctx.output, [ins[0], init], [("window", win), ("to_apply", f"%{comp}")]
    )


def _np_name(dtype: str) -> str:
    return "float32" if dtype == "bfloat16" else dtype


# ----------------------------------------------------------------------- concatenate
def _concat_eval(ctx: OpContext, args: Sequence[Any]) -> np.ndarray:
    """``concatenate(dim, x...)``: ``numpy.concatenate`` along ``dim`` (XLA ConcatInDim)."""
    return np.concatenate([np.asarray(a) for a in args], axis=int(_p(ctx, "dim")))


def _concat_hlo(w: Any, ctx: OpContext, ins: Sequence[str]) -> str:
    """HLO ``concatenate(x...), dimensions={dim}``."""
    return w.emit(
        "concatenate", ctx.output, ins, [("dimensions", "{" + str(int(_p(ctx, "dim"))) + "}")]
    )


def _reg(
    name: str,
    evaluate: Any,
    cost: Any,
    to_hlo: Any,
    fusion: str,
    launches_kernel: bool = True,
) -> None:
    register(
        OpDef(
            name=name,
            dialect=_DIALECT,
            evaluate=evaluate,
            cost=cost,
            to_onnx=None,
            launches_kernel=launches_kernel,
            doc=evaluate.__doc__ or "",
            to_hlo=to_hlo,
            fusion=fusion,
        )
    )


_reg("dot_general", _dot_eval, _dot_cost, _dot_hlo, "library")
_reg("convolution", _conv_eval, _conv_cost, _conv_hlo, "library")
_reg("broadcast_in_dim", _bid_eval, _move_cost, _bid_hlo, "broadcast")
_reg("iota", _iota_eval, _const_cost, _iota_hlo, "broadcast")
_reg("reduce_window", _rw_eval, _rw_cost, _rw_hlo, "reduce")
_reg("concatenate", _concat_eval, _move_cost, _concat_hlo, "reshape")
