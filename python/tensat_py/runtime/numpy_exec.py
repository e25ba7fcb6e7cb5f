"""The NumPy reference executor: every operator exactly as ``docs/language.md`` defines it.

Conventions (shared with the Rust analysis, ``rust/src/analysis.rs``):

* conv2d / pooling: NCHW input, OIHW weight, ``groups = C // I`` with contiguous
  channel groups.
* SAME padding: ``out = ceil(h / s)``, ``pad_total = max((out - 1) * s + k - h, 0)``,
  ``pad_before = pad_total // 2`` (the rest after). VALID: ``out = ceil((h - k + 1) / s)``.
* ``poolavg`` divides by the number of non-padding elements in each window; ``poolmax``
  pads with ``-inf``.
* ``batchnorm``: ``(x - mean) / sqrt(var + 1e-5) * scale + bias`` on axis 1.
* ``merge`` (TASO MergeGConv): ``[O, I, kh, kw] -> [O, I*count, kh, kw]``; output channel
  ``o`` keeps its kernel in input-channel slot ``o // (O // count)``, zeros elsewhere.
* ``enlarge``: centred zero padding of the kernel to the reference's ``kh, kw``.
* ``split``: at the position the analysis recorded (the node's pair type).
* activation codes: 0 none, 1 sigmoid, 2 relu, 3 tanh.
* ``opaque``: not computed here; the node's payload (``Graph.opaque_payload``, supplied by
  the front end that created it) is asked to ``evaluate`` its operands. A node without a
  payload, or whose payload cannot evaluate, raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tensat_py.graph import Graph, Node, TensorType, parse_dims

__all__ = ["run", "random_feeds", "eval_node", "BN_EPS"]

#: Batch-norm epsilon.
BN_EPS = 1e-5


def _act(y: np.ndarray, act: int) -> np.ndarray:
    if act == 0:
        return y
    if act == 1:
        return _sigmoid(y)
    if act == 2:
        return np.maximum(y, 0)
    if act == 3:
        return np.tanh(y)
    raise ValueError(f"activation {act} is not 0..3")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # Numerically stable for both signs.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _pads(size: int, k: int, s: int, pad: int) -> tuple[int, int, int]:
    """(out, before, after) for one spatial axis."""
    if pad == 0:
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        return out, total // 2, total - total // 2
    if pad == 1:
        if k > size:
            raise ValueError(f"VALID padding with kernel {k} > size {size}")
        return -(-(size - k + 1) // s), 0, 0
    raise ValueError(f"padding mode {pad} is not 0 (SAME) or 1 (VALID)")


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, pad: int, fill: float):
    """Padded sliding windows ``[N, C, OH, OW, kh, kw]`` (a view where possible)."""
    oh, pt, pb = _pads(x.shape[2], kh, sh, pad)
    ow, pl, pr = _pads(x.shape[3], kw, sw, pad)
    if pt or pb or pl or pr:
        x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    v = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return v[:, :, :oh, :ow], (pt, pb, pl, pr)


def conv2d(x: np.ndarray, w: np.ndarray, sh: int, sw: int, pad: int, act: int) -> np.ndarray:
    """Grouped 2-D convolution (cross-correlation), NCHW x OIHW -> NCHW."""
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
        return _act(y, act)
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
    return _act(np.ascontiguousarray(y), act)


def _pool(x: np.ndarray, kh, kw, sh, sw, pad, act, kind: str) -> np.ndarray:
    if kind == "max":
        v, _ = _windows(x, kh, kw, sh, sw, pad, -np.inf)
        y = v.max(axis=(4, 5))
    else:
        v, pads = _windows(x, kh, kw, sh, sw, pad, 0.0)
        y = v.sum(axis=(4, 5))
        if any(pads):
            ones = np.ones((1, 1) + x.shape[2:], dtype=x.dtype)
            cnt, _ = _windows(ones, kh, kw, sh, sw, pad, 0.0)
            y = y / cnt.sum(axis=(4, 5))
        else:
            y = y / (kh * kw)
    return _act(y.astype(x.dtype, copy=False), act)


def merge(w: np.ndarray, count: int) -> np.ndarray:
    """TASO MergeGConv on a weight ``[O, I, kh, kw]`` -> ``[O, I*count, kh, kw]``."""
    o, i, kh, kw = w.shape
    if count < 1 or o % count:
        raise ValueError(f"merge: weight {list(w.shape)} cannot merge {count} groups")
    out = np.zeros((o, i * count, kh, kw), dtype=w.dtype)
    per = o // count
    for oc in range(o):
        s = oc // per
        out[oc, s * i : (s + 1) * i] = w[oc]
    return out


def enlarge(w: np.ndarray, ref_shape: tuple[int, ...]) -> np.ndarray:
    """Centred zero padding of kernel ``w`` (OIHW) to ``ref_shape``'s ``kh, kw``."""
    kh, kw = ref_shape[2], ref_shape[3]
    dh, dw = kh - w.shape[2], kw - w.shape[3]
    if dh < 0 or dw < 0 or dh % 2 or dw % 2:
        raise ValueError(f"enlarge: kernel {list(w.shape)} cannot be centred in {kh}x{kw}")
    return np.pad(w, ((0, 0), (0, 0), (dh // 2, dh // 2), (dw // 2, dw // 2)))


def eval_node(node: Node, args: list, graph: Graph | None = None):
    """Evaluate one node on its tensor operands ``args`` (signature order).

    ``split`` returns a pair of arrays; ``input``/``weight`` are not evaluated here.
    """
    op, p = node.op, node.params
    if op in ("ewadd",):
        return args[0] + args[1]
    if op == "ewmul":
        return args[0] * args[1]
    if op == "matmul":
        return _act(np.matmul(args[0], args[1]), int(p["act"]))
    if op == "conv2d":
        return conv2d(args[0], args[1], p["stride_h"], p["stride_w"], p["pad"], p["act"])
    if op == "relu":
        return np.maximum(args[0], 0)
    if op == "tanh":
        return np.tanh(args[0])
    if op == "sigmoid":
        return _sigmoid(args[0])
    if op == "dropout":
        return args[0]
    if op in ("poolmax", "poolavg"):
        return _pool(
            args[0],
            p["kernel_h"],
            p["kernel_w"],
            p["stride_h"],
            p["stride_w"],
            p["pad"],
            p["act"],
            "max" if op == "poolmax" else "avg",
        )
    if op == "transpose":
        return np.transpose(args[0], parse_dims(str(p["perm"])))  # a view
    if op == "reshape":
        return args[0].reshape(parse_dims(str(p["shape"])))
    if op == "enlarge":
        return enlarge(args[0], args[1].shape)
    if op in ("concat", "concat3", "concat4", "concat5"):
        return np.concatenate(args, axis=int(p["axis"]))
    if op == "split":
        axis = int(p["axis"])
        first = node.type[0].shape[axis]  # type: ignore[index]
        x = args[0]
        return np.take(x, range(first), axis=axis), np.take(
            x, range(first, x.shape[axis]), axis=axis
        )
    if op == "split_0":
        return args[0][0]
    if op == "split_1":
        return args[0][1]
    if op == "merge":
        return merge(args[0], int(p["count"]))
    if op == "batchnorm":
        x, scale, bias, mean, var = args
        shp = (1, -1) + (1,) * (x.ndim - 2)
        inv = (scale / np.sqrt(var + BN_EPS)).reshape(shp)
        return ((x - mean.reshape(shp)) * inv + bias.reshape(shp)).astype(x.dtype, copy=False)
    if op == "opaque":
        return _opaque(node, args, graph)
    if op == "noop":
        return None
    raise ValueError(f"numpy executor: unknown operator `{op}`")


def _opaque(node: Node, args: list, graph: Graph | None) -> np.ndarray:
    sym = str(node.params["type"])
    payload = graph.meta.get("opaque", {}).get(sym.rpartition("@")[0]) if graph else None
    if payload is None:
        raise ValueError(f"opaque operator `{sym}` has no payload to evaluate it")
    try:
        out = np.asarray(payload.evaluate(args))
    except NotImplementedError as e:
        raise ValueError(
            f"opaque operator `{sym}` ({payload.op_type}) cannot run in NumPy: {e}"
        ) from None
    if tuple(out.shape) != node.shape:
        raise ValueError(
            f"opaque operator `{sym}` ({payload.op_type}) gave shape {out.shape}, "
            f"expected {node.shape}"
        )
    return out


def run(graph: Graph, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run ``graph`` on ``feeds`` (``{input/weight name: array}``); return its outputs.

    Only nodes some output depends on are computed; intermediate arrays are freed after
    their last use. Arrays keep the feeds' dtype (float32 or float64).

    Raises:
        ValueError: a feed is missing or has the wrong shape, or an operator fails.
    """
    keep = graph.live()
    last_use: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        if keep[nid]:
            for i in node.inputs:
                last_use[i] = nid
    pinned = set(graph.outputs)
    vals: dict[int, object] = {}
    for nid, node in enumerate(graph.nodes):
        if not keep[nid]:
            continue
        if node.op in ("input", "weight"):
            if node.name not in feeds:
                raise ValueError(f"no feed for {node.op} '{node.name}' {node.type.shape}")  # type: ignore[union-attr]
            a = np.asarray(feeds[node.name])
            if tuple(a.shape) != node.type.shape:  # type: ignore[union-attr]
                raise ValueError(
                    f"feed '{node.name}' has shape {a.shape}, expected {node.type.shape}"  # type: ignore[union-attr]
                )
            vals[nid] = a
        else:
            try:
                vals[nid] = eval_node(node, [vals[i] for i in node.inputs], graph)
            except ValueError as e:
                raise ValueError(f"node '{node.name}' ({node.op}): {e}") from None
        for i in set(node.inputs):
            if last_use.get(i) == nid and i not in pinned:
                vals.pop(i, None)
    return [vals[o] for o in graph.outputs]  # type: ignore[misc]


def _fan_in(t: TensorType) -> int:
    s = t.shape
    if len(s) == 4:
        return max(s[1] * s[2] * s[3], 1)
    if len(s) >= 2:
        return max(s[-2:])
    return 1


def random_feeds(graph: Graph, seed: int = 0, dtype: str = "float32") -> dict[str, np.ndarray]:
    """Random feeds for every input and weight, keyed by name.

    Inputs are standard normal. Weights are uniform in ``±sqrt(3 / fan_in)`` (unit
    variance through a layer: fan-in = ``I*kh*kw`` for 4-D kernels, the larger of the
    last two dims for matrices) so deep graphs neither vanish nor overflow; 1-D weights
    are uniform in [-1, 1], except batch-norm variances (uniform in [0.5, 1.5]) and
    scales (uniform in [0.5, 1.5]). The same names and seed give the same values.
    """
    positive: set[int] = set()
    for node in graph.nodes:
        if node.op == "batchnorm":
            positive.add(node.inputs[1])
            positive.add(node.inputs[4])
    feeds: dict[str, np.ndarray] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op not in ("input", "weight"):
            continue
        t: TensorType = node.type  # type: ignore[assignment]
        # Seed per name so two graphs with the same names get the same values.
        sub = np.random.default_rng([seed, *node.name.encode()])
        if node.op == "input":
            a = sub.standard_normal(t.shape)
        elif nid in positive:
            a = sub.uniform(0.5, 1.5, t.shape)
        elif len(t.shape) <= 1:
            a = sub.uniform(-1.0, 1.0, t.shape)
        else:
            lim = np.sqrt(3.0 / _fan_in(t))
            a = sub.uniform(-lim, lim, t.shape)
        feeds[node.name] = a.astype(dtype)
    return feeds
