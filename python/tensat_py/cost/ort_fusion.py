"""onnxruntime's multi-node fusions, found in a program so that measured models price the
kernel onnxruntime runs instead of the nodes it replaces.

onnxruntime's graph optimiser (CPU, ``ORT_ENABLE_ALL``; onnxruntime/core/optimizer) turns
some chains of ONNX nodes into one kernel. A one-operator profile prices each node of the
chain on its own, so a program holding the chain looked dearer than it runs, and a rewrite
to the fused operator (the open language's ``gelu``, ``layer_norm``) looked like a gain it
is not: on rapidocr's PP-OCRv6 recogniser the profile predicted 1.074, onnxruntime measured
0.945 (``bench/onnx_real.md``). :func:`ort_fusions` finds, in a concrete program, the
chains onnxruntime fuses:

* **GeluFusion** (``gelu_fusion.cc``): ``Div(x, sqrt 2)`` -> ``Erf`` -> ``Add(1)`` ->
  ``Mul(x)`` -> ``Mul(0.5)``, the ``0.5`` also on ``x`` first (``Mul(Mul(x, 0.5), 1 +
  erf)``): one ``Gelu``, priced as ``gelu(x)``. ``Mul(x, 1/sqrt 2)`` in place of the
  ``Div`` is not fused by onnxruntime 1.32 (checked in the tests), nor here.
* **FastGeluFusion** (``fast_gelu_fusion.cc``): ``Mul(Mul(x, 0.5), Add(Tanh(arg), 1))``
  with ``arg`` = ``Mul(Mul(x, k), Add(Mul(Mul(x, c), x), 1))`` (its first formula, which
  the exporter writes for ``gelu_tanh`` before opset 20) or ``Mul(Add(x, Mul(Pow(x, 3),
  c)), k)`` (the second, PyTorch's and GPT-2's), k = sqrt(2 / pi), c = 0.044715: one
  ``FastGelu``, priced as ``gelu_tanh(x)``. Not at a program output (onnxruntime 1.32
  leaves that chain alone), nor JAX's ``x * (x * (c * x))`` form.
* **LayerNormFusion** (``layer_norm_fusion.cc``): ``ReduceMean`` over the last axes ->
  ``Sub`` -> ``Pow(2)`` -> ``ReduceMean`` -> ``Add(eps)`` -> ``Sqrt`` -> ``Div`` ->
  ``Mul(scale)`` -> ``Add(bias)``: one ``LayerNormalization``, priced as
  ``layer_norm(x, scale, bias)``.
* **MatMulScaleFusion** (``matmul_scale_fusion.cc``): a ``Mul`` or ``Div`` by a constant
  scalar on an operand or on the output of a ``MatMul``: one ``FusedMatMul`` (its
  ``alpha``), priced as the ``matmul`` (the fusion's root is the MatMul; the scales are
  absorbed).

As in onnxruntime, every node a fusion removes (all but the chain's inputs) must be read by
the chain alone and must not be a program output; the chain's constants must be scalars of
the expected value (relative tolerance 1e-4). The result feeds
:func:`tensat_py.cost.base.graph_contexts`; an e-graph's contexts have no readers to check
and are priced node by node (``docs/cost-models.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tensat_py.cost.base import Fusion
from tensat_py.graph import Graph, Node, TensorType
from tensat_py.ops import kernel_of

__all__ = ["ort_fusions"]


def _is_mul(op: str) -> bool:
    """Whether ``op`` runs as the ``mul`` kernel (``mul``, TASO's ``ewmul``: the
    operators' :attr:`~tensat_py.ops.OpDef.kernel`)."""
    return kernel_of(op) == "mul"


def _is_add(op: str) -> bool:
    """Whether ``op`` runs as the ``add`` kernel (``add``, TASO's ``ewadd``)."""
    return kernel_of(op) == "add"


_SQRT2 = math.sqrt(2.0)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_TANH_CUBE = 0.044715


class _Program:
    """A graph with the readers of each live node (a program output counts as one)."""

    def __init__(self, graph: Graph) -> None:
        self.nodes = graph.nodes
        self.live = graph.live()
        self.readers: list[list[int]] = [[] for _ in graph.nodes]
        for nid, node in enumerate(graph.nodes):
            if self.live[nid]:
                for i in dict.fromkeys(node.inputs):
                    self.readers[i].append(nid)
        self.outputs = set(graph.outputs)

    def node(self, nid: int) -> Node:
        return self.nodes[nid]

    def sole(self, nid: int, reader: int) -> bool:
        """Whether ``reader`` is the only reader of ``nid``, which no output holds."""
        return self.readers[nid] == [reader] and nid not in self.outputs

    def scalar(self, nid: int) -> float | None:
        """The value of a ``scalar`` node; None for anything else."""
        n = self.nodes[nid]
        if n.op != "scalar":
            return None
        try:
            return float(n.params["value"])
        except (KeyError, TypeError, ValueError):
            return None

    def is_value(self, nid: int, want: float) -> bool:
        v = self.scalar(nid)
        return v is not None and math.isclose(v, want, rel_tol=1e-4)

    def scalar_constant(self, nid: int) -> bool:
        """A constant of shape ``()`` or ``(1,)``: what onnxruntime takes as a scalar."""
        n = self.nodes[nid]
        return n.constant and isinstance(n.type, TensorType) and n.type.shape in ((), (1,))


def _gelu(p: _Program, root: int) -> Fusion | None:
    """The GELU chain ending at ``root`` (a Mul), as ``gelu(x)``."""
    n = p.node(root)
    if not _is_mul(n.op) or len(n.inputs) != 2:
        return None
    for left, right in (n.inputs, n.inputs[::-1]):
        # Mul(Mul(x, 1 + erf), 0.5)
        if p.is_value(right, 0.5) and _is_mul(p.node(left).op) and p.sole(left, root):
            for x, a in (p.node(left).inputs, p.node(left).inputs[::-1]):
                got = _one_plus_erf(p, a, x, left)
                if got is not None:
                    return Fusion("gelu", {}, (x,), (left, *got))
        # Mul(Mul(x, 0.5), 1 + erf)
        if _is_mul(p.node(left).op) and p.sole(left, root):
            half = p.node(left).inputs
            for x, h in (half, half[::-1]):
                if p.is_value(h, 0.5):
                    got = _one_plus_erf(p, right, x, root)
                    if got is not None:
                        return Fusion("gelu", {}, (x,), (left, *got))
    return None


def _one_plus_erf(p: _Program, a: int, x: int, reader: int) -> tuple[int, ...] | None:
    """``Add(Erf(x / sqrt 2), 1)`` at node ``a``, read by ``reader`` alone: its nodes."""
    if not _is_add(p.node(a).op) or not p.sole(a, reader):
        return None
    for e, one in (p.node(a).inputs, p.node(a).inputs[::-1]):
        if not p.is_value(one, 1.0) or p.node(e).op != "erf" or not p.sole(e, a):
            continue
        (d,) = p.node(e).inputs
        dn = p.node(d)
        if dn.op == "div" and dn.inputs[0] == x and p.is_value(dn.inputs[1], _SQRT2):
            if p.sole(d, e):
                return (a, e, d)
    return None


def _fast_gelu(p: _Program, root: int) -> Fusion | None:
    """The tanh-GELU chain ending at ``root`` (a Mul that no output holds), as
    ``gelu_tanh(x)``: ``Mul(Mul(x, 0.5), Add(Tanh(arg), 1))`` with ``arg`` one of
    FastGeluFusion's two forms (:func:`_tanh_arg`)."""
    n = p.node(root)
    if not _is_mul(n.op) or len(n.inputs) != 2 or root in p.outputs:
        return None
    for h, a in (n.inputs, n.inputs[::-1]):
        if not _is_mul(p.node(h).op) or not p.sole(h, root):
            continue
        for x, half in (p.node(h).inputs, p.node(h).inputs[::-1]):
            if p.is_value(half, 0.5):
                got = _one_plus_tanh(p, a, x, root)
                if got is not None:
                    return Fusion("gelu_tanh", {}, (x,), (h, *got))
    return None


def _one_plus_tanh(p: _Program, a: int, x: int, reader: int) -> tuple[int, ...] | None:
    """``Add(Tanh(arg), 1)`` at node ``a``, read by ``reader`` alone: its nodes."""
    if not _is_add(p.node(a).op) or not p.sole(a, reader):
        return None
    for t, one in (p.node(a).inputs, p.node(a).inputs[::-1]):
        if not p.is_value(one, 1.0) or p.node(t).op != "tanh" or not p.sole(t, a):
            continue
        (arg,) = p.node(t).inputs
        got = _tanh_arg(p, arg, x, t)
        if got is not None:
            return (a, t, *got)
    return None


def _mul_by(p: _Program, nid: int, x: int, value: float, reader: int) -> bool:
    """Whether node ``nid`` is ``Mul(x, value)`` (either order), read by ``reader`` alone."""
    n = p.node(nid)
    if not _is_mul(n.op) or len(n.inputs) != 2 or not p.sole(nid, reader):
        return False
    return any(u == x and p.is_value(c, value) for u, c in (n.inputs, n.inputs[::-1]))


def _tanh_arg(p: _Program, m: int, x: int, reader: int) -> tuple[int, ...] | None:
    """The nodes of ``m``, read by ``reader`` alone, when it is ``sqrt(2/pi) * (x + 0.044715
    * x^3)`` in one of FastGeluFusion's forms: ``Mul(Mul(x, k), Add(Mul(Mul(x, c), x), 1))``
    (first) or ``Mul(Add(x, Mul(Pow(x, 3), c)), k)`` (second), with k = 0.7978845834732056
    and c = 0.044715, any operand order."""
    n = p.node(m)
    if not _is_mul(n.op) or len(n.inputs) != 2 or not p.sole(m, reader):
        return None
    for u, v in (n.inputs, n.inputs[::-1]):
        # first form: u = Mul(x, k); v = Add(Mul(Mul(x, c), x), 1)
        vn = p.node(v)
        if _mul_by(p, u, x, _TANH_SCALE, m) and _is_add(vn.op) and p.sole(v, m):
            for w, one in (vn.inputs, vn.inputs[::-1]):
                wn = p.node(w)
                if not p.is_value(one, 1.0) or not _is_mul(wn.op) or not p.sole(w, v):
                    continue
                for c, other in (wn.inputs, wn.inputs[::-1]):
                    if other == x and _mul_by(p, c, x, _TANH_CUBE, w):
                        return (m, u, v, w, c)
        # second form: u = Add(x, Mul(Pow(x, 3), c)), v = k
        un = p.node(u)
        if p.is_value(v, _TANH_SCALE) and _is_add(un.op) and p.sole(u, m):
            for other, c in (un.inputs, un.inputs[::-1]):
                cn = p.node(c)
                if other != x or not _is_mul(cn.op) or not p.sole(c, u):
                    continue
                for q, k in (cn.inputs, cn.inputs[::-1]):
                    qn = p.node(q)
                    if (
                        p.is_value(k, _TANH_CUBE)
                        and qn.op == "pow"
                        and qn.inputs[0] == x
                        and p.is_value(qn.inputs[1], 3.0)
                        and p.sole(q, c)
                    ):
                        return (m, u, c, q)
    return None


def _last_axes(axes: Sequence[int], rank: int) -> bool:
    """Whether ``axes`` are the trailing axes of a rank-``rank`` tensor."""
    norm = sorted(a % rank for a in axes) if rank else []
    return bool(norm) and norm == list(range(rank - len(norm), rank))


def _layer_norm(p: _Program, root: int) -> Fusion | None:
    """The layer-normalisation chain ending at ``root`` (the bias Add), as
    ``layer_norm(x, scale, bias)``."""
    n = p.node(root)
    if not _is_add(n.op) or len(n.inputs) != 2:
        return None
    for s, bias in (n.inputs, n.inputs[::-1]):
        sn = p.node(s)
        if not _is_mul(sn.op) or not p.sole(s, root) or not p.node(bias).constant:
            continue
        for q, scale in (sn.inputs, sn.inputs[::-1]):
            got = _normalised(p, q, s)
            if got is not None and p.node(scale).constant:
                x, axis, eps, inner = got
                params = {"axis": axis, "epsilon": eps}
                return Fusion("layer_norm", params, (x, scale, bias), (s, *inner))
    return None


def _normalised(p: _Program, q: int, reader: int) -> tuple[int, int, float, tuple] | None:
    """``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`` at node ``q``, read by
    ``reader`` alone: ``(x, first normalised axis, eps, the chain's nodes)``."""
    qn = p.node(q)
    if qn.op != "div" or not p.sole(q, reader):
        return None
    d, sd = qn.inputs
    dn, sdn = p.node(d), p.node(sd)
    if dn.op != "sub" or sdn.op != "sqrt" or not p.sole(sd, q):
        return None
    x, mean = dn.inputs
    mn = p.node(mean)
    rank = len(p.node(x).type.shape) if isinstance(p.node(x).type, TensorType) else 0
    if mn.op != "reduce_mean" or mn.inputs != (x,) or not p.sole(mean, d):
        return None
    axes = tuple(mn.params.get("axes", ()))
    if not _last_axes(axes, rank) or not mn.params.get("keepdims", 1):
        return None
    (ve,) = sdn.inputs
    if not _is_add(p.node(ve).op) or not p.sole(ve, sd):
        return None
    for v, eps in (p.node(ve).inputs, p.node(ve).inputs[::-1]):
        e = p.scalar(eps)
        vn = p.node(v)
        if e is None or vn.op != "reduce_mean" or not p.sole(v, ve):
            continue
        if tuple(vn.params.get("axes", ())) != axes:
            continue
        (sq,) = vn.inputs
        sqn = p.node(sq)
        square = (sqn.op == "pow" and sqn.inputs[0] == d and p.is_value(sqn.inputs[1], 2.0)) or (
            _is_mul(sqn.op) and sqn.inputs == (d, d)
        )
        if square and p.sole(sq, v) and sorted(p.readers[d]) == sorted({sq, q}):
            if d in p.outputs:
                continue
            return x, min(a % rank for a in axes), e, (q, d, sd, mean, ve, v, sq)
    return None


def _matmul_scale(p: _Program, root: int) -> Fusion | None:
    """The MatMul at ``root`` with the constant scalar Mul/Div on its operands and on its
    output folded in (through the flattening reshapes the ONNX front end puts around a
    MatMul of rank > 2, which its exporter removes again), as the ``matmul``."""
    n = p.node(root)
    if n.op != "matmul" or n.params.get("act"):
        return None
    absorbed = []
    for a in dict.fromkeys(n.inputs):
        reader = root
        while p.node(a).op == "reshape" and _keeps_last_axis(p, a) and p.sole(a, reader):
            reader, a = a, p.node(a).inputs[0]
        if _scaled(p, a) is not None and p.sole(a, reader):
            absorbed.append(a)
    out = root
    while len(p.readers[out]) == 1 and out not in p.outputs:
        (k,) = p.readers[out]
        if p.node(k).op == "reshape" and _keeps_last_axis(p, k):
            out = k
            continue
        if _scaled(p, k) == out:
            absorbed.append(k)
        break
    if not absorbed:
        return None
    return Fusion("matmul", dict(n.params), tuple(n.inputs), tuple(absorbed))


def _keeps_last_axis(p: _Program, nid: int) -> bool:
    """Whether reshape ``nid`` keeps its operand's last axis as its own last axis (the
    flattening of a MatMul operand to ``[M, K]``, or of its result back)."""
    t_in, t_out = p.node(p.node(nid).inputs[0]).type, p.node(nid).type
    if not (isinstance(t_in, TensorType) and isinstance(t_out, TensorType)):
        return False
    return bool(t_in.shape and t_out.shape) and t_in.shape[-1] == t_out.shape[-1]


def _scaled(p: _Program, nid: int) -> int | None:
    """``x`` when node ``nid`` is ``x * s``, ``s * x`` or ``x / s`` with ``s`` a scalar
    constant (:meth:`_Program.scalar_constant`) and ``x`` not constant."""
    n = p.node(nid)
    if n.op not in ("mul", "div") or len(n.inputs) != 2:
        return None
    sides = (n.inputs, n.inputs[::-1]) if n.op == "mul" else (n.inputs,)
    for x, s in sides:
        if p.scalar_constant(s) and not p.node(x).constant:
            return x
    return None


def ort_fusions(graph: Graph) -> dict[int, Fusion]:
    """The chains of ``graph`` onnxruntime (CPU, ``ORT_ENABLE_ALL``) runs as one kernel,
    each as what its kernel is priced as (see the module docstring), by the id of the node
    priced: the one that ends a GELU (erf or tanh) or a layer normalisation, the MatMul of a scaled
    MatMul. A node belongs to one chain at most; constant nodes never start one (they are
    folded before inference)."""
    p = _Program(graph)
    out: dict[int, Fusion] = {}
    taken: set[int] = set()
    for nid, node in enumerate(graph.nodes):
        if not p.live[nid] or node.constant or nid in taken:
            continue
        f = _gelu(p, nid) or _fast_gelu(p, nid) or _layer_norm(p, nid) or _matmul_scale(p, nid)
        # A node already in a chain, or ending one, is not taken again: a GELU's last
        # `Mul(0.5)` feeding a MatMul stays the GELU's, as onnxruntime fuses it.
        if f is None or any(a in taken or a in out for a in f.absorbed):
            continue
        taken.update(f.absorbed)
        out[nid] = f
    return out
