"""Export-time peephole fusions on the written ONNX graph: where the language's form of an
ONNX operator took several nodes, the nodes the exporter wrote through the operators'
``to_onnx`` are folded back into the single ONNX node onnxruntime's fusions expect.

Every fusion is exact under the ONNX operator specification (https://onnx.ai/onnx/operators/):
it computes the same values with the same arithmetic, only fewer nodes.

* ``Pad`` (mode ``constant``, value 0, pads on the spatial axes only) feeding the data
  input of a ``Conv`` without ``auto_pad``: the Conv reads the unpadded input with the
  pads added to its own ``pads`` (Conv pads with zeros).
* A ``Reshape`` that flattens ``x`` of rank > 2 to ``[prod(x.shape[:-1]), x.shape[-1]]``
  for a ``MatMul``: the MatMul reads ``x`` (MatMul broadcasts a rank > 2 left operand over a
  2-D right one); a ``Reshape`` to ``[M, K]`` from another shape reshapes to
  ``[*lead, K]`` instead, ``lead`` the leading axes a ``Reshape`` downstream restores;
  and so on downstream through whatever only needs the last axis to stay
  the last axis (the row-wise operators: ``MatMul`` with a 2-D right operand, unary
  elementwise operators, binary ones whose other operand has rank <= 1) up to the
  ``Reshape``\\ s that read the values (a ``Reshape`` without ``0`` in its shape depends
  only on the elements in order, which the flattening keeps). A ``Reshape`` to its input's
  shape is then dropped.

Nodes the exporter wrote as the source model had them (``protected``, named by their
outputs) are never the node a fusion starts from, so an unchanged model is written as it
was.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import prod

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["fuse"]

#: Elementwise operators of one input that keep the shape (any rank).
_UNARY = frozenset(
    {
        "Relu",
        "Sigmoid",
        "Tanh",
        "Erf",
        "Exp",
        "Log",
        "Sqrt",
        "Neg",
        "Abs",
        "Reciprocal",
        "HardSigmoid",
        "HardSwish",
        "LeakyRelu",
        "Gelu",
        "Softplus",
        "Identity",
        "Cast",
    }
)
#: Elementwise binary operators (multidirectional broadcasting).
_BINARY = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"})


class _Graph:
    def __init__(self, model: onnx.ModelProto, protected: set[str]) -> None:
        self.model = model
        self.g = model.graph
        self.protected = protected
        self.inits = {t.name: t for t in self.g.initializer}
        self.outputs = {o.name for o in self.g.output}
        self.shapes: dict[str, tuple[int, ...]] = {}
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                self.shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
        for t in self.g.initializer:
            self.shapes[t.name] = tuple(int(d) for d in t.dims)
        self.index()

    def index(self) -> None:
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for n in self.g.node:
            for o in n.output:
                if o:
                    self.producer[o] = n
            for i in n.input:
                if i:
                    self.consumers.setdefault(i, []).append(n)

    def fresh(self, stem: str) -> str:
        names = {i for n in self.g.node for i in [*n.input, *n.output]} | set(self.inits)
        name, k = stem, 0
        while name in names:
            name, k = f"{stem}_{k}", k + 1
        return name

    def const(self, name: str) -> np.ndarray | None:
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name])
        p = self.producer.get(name)
        if p is not None and p.op_type == "Constant" and p.domain in ("", "ai.onnx"):
            for a in p.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
        return None

    def attr(self, node: onnx.NodeProto, name: str, default=None):
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def is_protected(self, node: onnx.NodeProto) -> bool:
        return any(o in self.protected for o in node.output)


def _set_attr(node: onnx.NodeProto, name: str, value) -> None:
    for k, a in enumerate(node.attribute):
        if a.name == name:
            del node.attribute[k]
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))


# ---------------------------------------------------------------------------- Pad + Conv
def _pad_conv(gr: _Graph) -> int:
    done = 0
    for conv in list(gr.g.node):
        if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or gr.is_protected(conv):
            continue
        auto = gr.attr(conv, "auto_pad", b"NOTSET")
        if (auto.decode() if isinstance(auto, bytes) else str(auto)) != "NOTSET":
            continue
        pad = gr.producer.get(conv.input[0])
        if pad is None or pad.op_type != "Pad" or pad.domain not in ("", "ai.onnx"):
            continue
        mode = gr.attr(pad, "mode", b"constant")
        if (mode.decode() if isinstance(mode, bytes) else str(mode)) != "constant":
            continue
        x = pad.input[0]
        rank = len(gr.shapes.get(x, ()))
        if rank < 3 or len(pad.input) < 2:
            continue
        pads = gr.const(pad.input[1])
        if pads is None:
            continue
        if len(pad.input) > 2 and pad.input[2]:
            value = gr.const(pad.input[2])
            if value is None or np.asarray(value).size != 1 or np.asarray(value).ravel()[0] != 0:
                continue
        axes = list(range(rank))
        if len(pad.input) > 3 and pad.input[3]:
            ax = gr.const(pad.input[3])
            if ax is None:
                continue
            axes = [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(ax).ravel()]
        p = [int(v) for v in np.asarray(pads).ravel()]
        if len(p) != 2 * len(axes) or min(p, default=0) < 0:
            continue
        begin = dict.fromkeys(range(rank), 0)
        end = dict.fromkeys(range(rank), 0)
        for k, a in enumerate(axes):
            begin[a] += p[k]
            end[a] += p[k + len(axes)]
        if begin[0] or begin[1] or end[0] or end[1]:
            continue  # padding of the batch or channel axis
        spatial = rank - 2
        cp = [int(v) for v in gr.attr(conv, "pads", [0] * (2 * spatial))]
        if len(cp) != 2 * spatial:
            continue
        merged = [cp[k] + begin[k + 2] for k in range(spatial)]
        merged += [cp[spatial + k] + end[k + 2] for k in range(spatial)]
        conv.input[0] = x
        _set_attr(conv, "pads", merged)
        done += 1
    return done


# ---------------------------------------------------------------------------- flatten + MatMul
def _liftable(gr: _Graph, value: str, lead: tuple[int, ...], plan: dict[str, tuple]) -> bool:
    """Whether every reader of 2-D ``value`` ``[M, N]`` can read it as ``[*lead, N]``
    (``prod(lead) == M``); collects the values whose shape changes in ``plan``."""
    if value in gr.outputs:
        return False
    shape = gr.shapes.get(value)
    if shape is None or len(shape) != 2:
        return False
    plan[value] = (*lead, shape[1])
    for n in gr.consumers.get(value, []):
        if n.domain not in ("", "ai.onnx"):
            return False
        op = n.op_type
        if op == "Reshape" and n.input[0] == value and value not in n.input[1:]:
            target = gr.const(n.input[1]) if len(n.input) > 1 else None
            if target is None or 0 in [int(v) for v in np.asarray(target).ravel()]:
                return False
            continue
        out = n.output[0] if n.output else ""
        if op in _UNARY and len(n.input) == 1:
            pass
        elif op in _BINARY and len(n.input) == 2:
            other = n.input[1] if n.input[0] == value else n.input[0]
            if other == value or len(gr.shapes.get(other, (0, 0))) > 1:
                return False
        elif op == "MatMul" and n.input[0] == value and n.input[1] != value:
            if len(gr.shapes.get(n.input[1], ())) != 2:
                return False
        else:
            return False
        if len(n.output) != 1:
            return False
        if out in plan:  # reached through another lifted operand already
            continue
        if not _liftable(gr, out, lead, plan):
            return False
    return True


def _leads(gr: _Graph, value: str, m: int, out: list[tuple[int, ...]]) -> None:
    """Leading shapes ``lead`` (``prod(lead) == m``, rank >= 2) that the ``Reshape`` nodes
    downstream of 2-D ``value`` restore, through the row-wise operators."""
    for n in gr.consumers.get(value, []):
        o = n.output[0] if n.output else ""
        if n.op_type == "Reshape":
            t = gr.shapes.get(o)
            if t is not None and len(t) >= 3 and prod(t[:-1]) == m and tuple(t[:-1]) not in out:
                out.append(tuple(t[:-1]))
        elif n.op_type in _UNARY or n.op_type in _BINARY or n.op_type == "MatMul":
            if len(gr.shapes.get(o, ())) == 2 and len(out) < 8:
                _leads(gr, o, m, out)


def _flatten_matmul(gr: _Graph) -> int:
    done = 0
    for r in list(gr.g.node):
        if r.op_type != "Reshape" or r.domain not in ("", "ai.onnx") or gr.is_protected(r):
            continue
        x, v = r.input[0], r.output[0]
        xs, vs = gr.shapes.get(x), gr.shapes.get(v)
        if xs is None or vs is None or len(vs) != 2:
            continue
        readers = gr.consumers.get(v, [])
        if not readers or not any(n.op_type == "MatMul" for n in readers):
            continue
        leads: list[tuple[int, ...]] = []
        if len(xs) > 2 and vs == (prod(xs[:-1]), xs[-1]):
            leads.append(tuple(xs[:-1]))
        _leads(gr, v, vs[0], leads)
        for lead in leads:
            plan: dict[str, tuple] = {}
            if not _liftable(gr, v, lead, plan):
                continue
            if lead == tuple(xs[:-1]) and xs[-1] == vs[1]:
                for n in readers:  # the flattening is undone: read x itself
                    for k, i in enumerate(n.input):
                        if i == v:
                            n.input[k] = x
            else:  # reshape to [*lead, K] instead of [M, K]
                name = gr.fresh(f"{v}_shape")
                arr = np.asarray([*lead, vs[1]], dtype=np.int64)
                t = numpy_helper.from_array(arr, name)
                gr.g.initializer.append(t)
                gr.inits[name] = t
                r.input[1] = name
            for name, shape in plan.items():
                gr.shapes[name] = shape
            done += 1
            gr.index()
            break
    return done


def _noop_reshapes(gr: _Graph) -> int:
    """Drops a written ``Reshape`` whose output has its input's shape (readers read the
    input; kept where the output is a graph output)."""
    done = 0
    for r in list(gr.g.node):
        if r.op_type != "Reshape" or r.domain not in ("", "ai.onnx") or gr.is_protected(r):
            continue
        x, v = r.input[0], r.output[0]
        if v in gr.outputs or gr.shapes.get(x) is None or gr.shapes.get(x) != gr.shapes.get(v):
            continue
        for n in gr.consumers.get(v, []):
            for k, i in enumerate(n.input):
                if i == v:
                    n.input[k] = x
        done += 1
    return done


def _dead(gr: _Graph) -> None:
    """Removes nodes none of whose outputs is read (repeatedly) and unread initializers."""
    while True:
        gr.index()
        dead = [
            k
            for k, n in enumerate(gr.g.node)
            if not any(o in gr.outputs or gr.consumers.get(o) for o in n.output if o)
        ]
        if not dead:
            break
        for k in reversed(dead):
            del gr.g.node[k]
    read = {i for n in gr.g.node for i in n.input} | gr.outputs
    keep = [t for t in gr.g.initializer if t.name in read]
    if len(keep) != len(gr.g.initializer):
        del gr.g.initializer[:]
        gr.g.initializer.extend(keep)


def fuse(model: onnx.ModelProto, protected: Iterable[str] = ()) -> dict[str, int]:
    """Applies the fusions (module docstring) to ``model`` in place and removes the nodes
    and initializers nothing reads any more.

    Args:
        model: a model with static shapes (ONNX shape inference runs on it).
        protected: output names of the nodes written as the source model had them.

    Returns:
        How many times each fusion applied (``{"pad_conv": 1, ...}``).
    """
    gr = _Graph(model, set(protected))
    counts = {"pad_conv": _pad_conv(gr)}
    gr.index()
    counts["flatten_matmul"] = _flatten_matmul(gr)
    gr.index()
    counts["noop_reshape"] = _noop_reshapes(gr)
    if any(counts.values()):
        _dead(gr)
    return counts
