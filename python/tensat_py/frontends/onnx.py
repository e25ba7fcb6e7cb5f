"""ONNX in, ONNX out: :func:`load` a model into a :class:`~tensat_py.graph.Graph`,
:func:`save` (or :func:`to_model`) a graph back.

Loading (opset 13 and newer; older models are converted with ONNX's version converter)
runs ONNX shape inference, so every value must get a static shape: pass
``input_shapes={"x": (1, 3, 224, 224)}`` to fix symbolic input dimensions. Graph inputs
become ``input`` nodes, float32 initializers that a translated operator reads become
``weight`` nodes (``Constant`` nodes count as initializers). The translation is exact or
not at all:

==================== =================================================================
ONNX                 language
==================== =================================================================
MatMul               ``matmul`` (equal ranks and batch axes; a rank > 2 left operand
                     with a 2-D right one goes through ``reshape``)
Gemm                 ``matmul`` (``transpose`` for transA / transB); needs alpha = 1 and
                     beta = 1; a bias C of the output's shape is an ``ewadd``, a
                     broadcast bias an opaque ``Add`` after the ``matmul``
Conv                 ``conv2d`` (2-D, dilations 1, any group) when the padding is
                     exactly SAME (TASO's: extra padding after) or VALID; a bias B is an
                     opaque ``Add`` of B reshaped to ``[O, 1, 1]``
MaxPool/AveragePool  ``poolmax``/``poolavg`` on the same padding rule (ceil_mode 0,
                     dilations 1; AveragePool with padding needs count_include_pad 0)
Relu, Tanh, Sigmoid  ``relu``, ``tanh``, ``sigmoid``
Add, Mul             ``ewadd``, ``ewmul`` when both shapes are equal
Concat               ``concat``/``concat3``... (more than 5 operands nest to the right)
Split                ``split`` / ``split_0`` / ``split_1`` when the input is a concat
                     result cut where the concat joined it
Reshape              ``reshape`` (constant shape, rank >= 2)
Transpose            ``transpose``
BatchNormalization   ``batchnorm`` (epsilon 1e-5, inference mode)
Dropout, Identity    ``dropout`` / the operand itself
==================== =================================================================

Anything else, any of these with attributes outside that table, and any operator on
non-float32 tensors becomes an ``opaque`` node: its output type comes from shape
inference and its payload (:class:`OnnxOpaque`) keeps the ``NodeProto``, so it is exported
unchanged and evaluated by onnxruntime (or, in the NumPy executor, by ONNX's reference
evaluator). Initializers only opaque nodes read stay inside their payloads, unchanged.

Saving writes the original inputs and outputs (names, element types, the static shapes
the graph was loaded with), every original initializer the program still reads, the
opaque nodes as they were, and one node (plus an activation node for fused activations)
per language operator. Weight-only subgraphs of the optimised program (for example the
concatenated weights of merged matmuls) are computed at export with the NumPy executor
and stored as new initializers named ``tensat_const_<k>``. The model passes
``onnx.checker.check_model(model, full_check=True)``.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensat_py.graph import OPAQUE, Graph, GraphError, dims_text, parse_dims
from tensat_py.runtime.numpy_exec import BN_EPS, eval_node, random_feeds

__all__ = [
    "MIN_OPSET",
    "OnnxError",
    "OnnxOpaque",
    "OnnxSource",
    "load",
    "save",
    "to_model",
    "opaque_ops",
]

#: Oldest default-domain opset read without conversion.
MIN_OPSET = 13
#: Opset of models written for graphs that did not come from ONNX.
DEFAULT_OPSET = 17

_F32 = TensorProto.FLOAT
_BAD_LEAF_CHARS = set(" \t\n()@;\"'")
_ACT_OPS = {1: "Sigmoid", 2: "Relu", 3: "Tanh"}


class OnnxError(ValueError):
    """A model that cannot be read or written; the message names the node or value."""


# ---------------------------------------------------------------------------- payloads
@dataclass(eq=False)
class OnnxOpaque:
    """The payload of an opaque node that came from ONNX.

    Attributes:
        op_type: ONNX operator type (``"Softmax"``), with ``domain:`` for other domains.
        nodes: the ONNX node(s) computing it, in order (one, or a few the front end
            synthesised, e.g. a bias ``Add``).
        operands: ONNX value names the nodes read for the graph node's tensor operands,
            in operand order (renamed to the exported values at export).
        output: the ONNX value name of the graph node's value (an output of ``nodes``).
        elem_type: ONNX element type of that value (``TensorProto.FLOAT``, ...).
        constants: initializers the nodes read that are not operands, by name.
        group: nodes with several used outputs give one opaque node per output; they
            share ``group`` and the nodes are exported once.
        opset_imports: the source model's opset imports (for evaluation).
        functions: the source model's local functions (for evaluation and export).
    """

    op_type: str
    nodes: tuple[onnx.NodeProto, ...]
    operands: tuple[str, ...]
    output: str
    elem_type: int
    constants: dict[str, TensorProto] = field(default_factory=dict)
    group: str = ""
    opset_imports: tuple[onnx.OperatorSetIdProto, ...] = ()
    functions: tuple[onnx.FunctionProto, ...] = ()
    _evaluators: dict[tuple, Any] = field(default_factory=dict, repr=False)

    def evaluate(self, args: Sequence[Any]) -> np.ndarray:
        """Runs the nodes with ONNX's reference evaluator on operand arrays ``args``.

        Float operands keep their dtype (float64 runs in float64 where the operator
        allows). Raises ``NotImplementedError`` when the reference evaluator lacks the
        operator.
        """
        from onnx.reference import ReferenceEvaluator

        arrays = [np.asarray(a) for a in args]
        key = tuple((a.dtype.str, a.shape) for a in arrays)
        ev = self._evaluators.get(key)
        if ev is None:
            inputs = [
                helper.make_tensor_value_info(
                    n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)
                )
                for n, a in zip(self.operands, arrays, strict=True)
            ]
            out = helper.make_tensor_value_info(self.output, self.elem_type, None)
            consts = list(self.constants.values())
            if any(a.dtype == np.float64 for a in arrays):
                # Run in float64 throughout: the evaluator wants equal operand dtypes.
                consts = [
                    numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)
                    if t.data_type == _F32
                    else t
                    for t in consts
                ]
            g = helper.make_graph(list(self.nodes), "opaque", inputs, [out], consts)
            m = helper.make_model(
                g, opset_imports=list(self.opset_imports), functions=list(self.functions)
            )
            try:
                ev = ReferenceEvaluator(m)
            except Exception as e:  # the reference evaluator raises many types
                raise NotImplementedError(f"reference evaluator: {e}") from None
            self._evaluators[key] = ev
        feeds = dict(zip(self.operands, arrays, strict=True))
        try:
            return np.asarray(ev.run(None, feeds)[0])
        except Exception as e:  # the reference evaluator raises many types
            raise ValueError(f"{self.op_type}: reference evaluator: {e}") from None


@dataclass(eq=False)
class OnnxSource:
    """What :func:`load` keeps of the model (``Graph.meta["onnx"]``) for :func:`save`.

    Attributes:
        initializers: every initializer (``Constant`` node values included) by name.
        inputs: runtime inputs (not initializers) in order: ONNX name and element type.
        outputs: graph output names in order.
        leaf_names: graph ``input``/``weight`` name -> ONNX value name.
        opset_imports: the model's opset imports (default domain >= 13).
        ir_version: the model's IR version.
        functions: local functions the model defines.
        names: every value name in the model (new names avoid them).
    """

    initializers: dict[str, TensorProto]
    inputs: list[tuple[str, int]]
    outputs: list[str]
    leaf_names: dict[str, str]
    opset_imports: tuple[onnx.OperatorSetIdProto, ...]
    ir_version: int
    functions: tuple[onnx.FunctionProto, ...]
    names: frozenset[str]
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def array(self, onnx_name: str) -> np.ndarray:
        """The initializer ``onnx_name`` as a NumPy array (cached)."""
        if onnx_name not in self._arrays:
            self._arrays[onnx_name] = numpy_helper.to_array(self.initializers[onnx_name])
        return self._arrays[onnx_name]

    def weight_values(self, graph: Graph) -> dict[str, np.ndarray]:
        """``{weight name: array}`` for every weight of ``graph`` this model holds."""
        out = {}
        for nid in graph.weights():
            name = graph.nodes[nid].name
            onnx_name = self.leaf_names.get(name, name)
            if onnx_name in self.initializers:
                out[name] = self.array(onnx_name)
        return out


def opaque_ops(graph: Graph) -> dict[str, int]:
    """``{operator type: count}`` of the opaque nodes some output depends on."""
    counts: dict[str, int] = {}
    seen: set[str] = set()
    for nid in graph.opaque_nodes():
        p = graph.opaque_payload(nid)
        label = p.op_type if p is not None else graph.opaque_key(nid)
        group = getattr(p, "group", "") or graph.opaque_key(nid)
        if group in seen:
            continue
        seen.add(group)
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


# ---------------------------------------------------------------------------- loading
def _default_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 1


def _static_type(vi: onnx.ValueInfoProto) -> tuple[int, tuple[int, ...] | None]:
    t = vi.type
    if not t.HasField("tensor_type"):
        return 0, None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return int(tt.elem_type), None
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        else:
            return int(tt.elem_type), None
    return int(tt.elem_type), tuple(dims)


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _pad_mode(
    size: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    attrs: Mapping[str, Any],
    out_hw: tuple[int, int],
) -> int | None:
    """0 (SAME) or 1 (VALID) when the ONNX padding is exactly that, else None."""
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if len(pads) != 4:
        return None
    same_pads: list[int] = [0, 0, 0, 0]
    same_out = []
    valid_out = []
    for ax in range(2):
        h, k, s = size[ax], kernel[ax], stride[ax]
        o = -(-h // s)
        total = max((o - 1) * s + k - h, 0)
        same_pads[ax], same_pads[ax + 2] = total // 2, total - total // 2
        same_out.append(o)
        valid_out.append(-(-(h - k + 1) // s) if k <= h else -1)
    if auto == "VALID" or (auto == "NOTSET" and pads == [0, 0, 0, 0]):
        if tuple(valid_out) == out_hw:
            return 1
        if auto == "VALID":
            return None
    if auto == "SAME_UPPER" or (auto == "NOTSET" and pads == same_pads):
        return 0 if tuple(same_out) == out_hw else None
    if auto == "SAME_LOWER":
        even = all(same_pads[a] == same_pads[a + 2] for a in range(2))
        return 0 if even and tuple(same_out) == out_hw else None
    return None


def _leaf_name(onnx_name: str, taken: set[str]) -> str:
    base = "".join("_" if c in _BAD_LEAF_CHARS else c for c in onnx_name) or "v"
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


class _Loader:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.g = Graph()
        gr = model.graph
        self.inits: dict[str, TensorProto] = {t.name: t for t in gr.initializer}
        # Constant nodes become initializers (value attributes only).
        self.nodes: list[onnx.NodeProto] = []
        for n in gr.node:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
                a = _attrs(n)
                if "value" in a:
                    t = TensorProto()
                    t.CopyFrom(a["value"])
                    t.name = n.output[0]
                    self.inits[t.name] = t
                    continue
            self.nodes.append(n)
        self.types: dict[str, tuple[int, tuple[int, ...] | None]] = {}
        for vi in [*gr.input, *gr.value_info, *gr.output]:
            self.types[vi.name] = _static_type(vi)
        for name, t in self.inits.items():
            self.types[name] = (int(t.data_type), tuple(int(d) for d in t.dims))
        self.env: dict[str, int] = {}  # ONNX value -> graph node id
        self.taken: set[str] = set()
        self.leaf_names: dict[str, str] = {}
        self.consumers: dict[str, int] = {}
        for n in self.nodes:
            for i in n.input:
                self.consumers[i] = self.consumers.get(i, 0) + 1
        for o in gr.output:
            self.consumers[o.name] = self.consumers.get(o.name, 0) + 1
        self.opsets = tuple(model.opset_import)
        self.functions = tuple(model.functions)
        self.opset = _default_opset(model)

    # -- values
    def shape(self, name: str) -> tuple[int, ...] | None:
        return self.types.get(name, (0, None))[1]

    def is_f32(self, name: str) -> bool:
        return self.types.get(name, (0, None))[0] == _F32

    def value(self, name: str) -> int | None:
        """Graph id of a float32 value (weights created on demand), else None."""
        if name in self.env:
            return self.env[name]
        t = self.inits.get(name)
        if t is None or t.data_type != _F32 or any(d < 1 for d in t.dims):
            return None
        leaf = _leaf_name(name, self.taken)
        nid = self.g.add_weight(leaf, tuple(int(d) for d in t.dims))
        self.leaf_names[leaf] = name
        self.env[name] = nid
        return nid

    def const_ints(self, name: str) -> list[int] | None:
        t = self.inits.get(name)
        if t is None or t.data_type not in (TensorProto.INT64, TensorProto.INT32):
            return None
        return [int(v) for v in numpy_helper.to_array(t).reshape(-1)]

    # -- building
    def add(self, op: str, params: Mapping[str, int | str], inputs: Sequence[int]) -> int:
        return self.g.add_node(op, params, inputs)

    def concat(self, axis: int, ids: list[int]) -> int:
        if len(ids) > 5:
            ids = ids[:4] + [self.concat(axis, ids[4:])]
        op = {2: "concat", 3: "concat3", 4: "concat4", 5: "concat5"}[len(ids)]
        ndim = len(self.g.type_of(ids[0]).shape)
        return self.add(op, {"axis": axis, "ndim": ndim}, ids)

    def run(self) -> Graph:
        gr = self.model.graph
        inputs: list[tuple[str, int]] = []
        for vi in gr.input:
            if vi.name in self.inits:
                continue
            elem, shape = self.types[vi.name]
            if shape is None:
                raise OnnxError(f"input '{vi.name}' has no static shape; pass input_shapes={{...}}")
            if any(d < 1 for d in shape):
                raise OnnxError(f"input '{vi.name}' has a zero-size dimension {shape}")
            leaf = _leaf_name(vi.name, self.taken)
            self.env[vi.name] = self.g.add_input(leaf, shape)
            self.leaf_names[leaf] = vi.name
            inputs.append((vi.name, elem))
        for k, node in enumerate(self.nodes):
            if not any(self.consumers.get(o, 0) for o in node.output if o):
                continue  # nothing reads it
            done = False
            if node.domain in ("", "ai.onnx") and self._all_f32(node):
                try:
                    done = self.translate(node)
                except GraphError:
                    done = False
            if not done:
                self.opaque(node, k)
        outs = []
        for o in gr.output:
            if o.name in self.env:
                outs.append(self.env[o.name])
            elif (v := self.value(o.name)) is not None:
                outs.append(v)
            else:
                raise OnnxError(f"graph output '{o.name}' is neither computed nor a tensor")
        if not outs:
            raise OnnxError("the model has no outputs")
        self.g.outputs = outs
        self.g.meta["onnx"] = OnnxSource(
            initializers=self.inits,
            inputs=inputs,
            outputs=[o.name for o in gr.output],
            leaf_names=self.leaf_names,
            opset_imports=self.opsets,
            ir_version=int(self.model.ir_version),
            functions=self.functions,
            names=frozenset([*self.types, *(o for n in self.nodes for o in n.output), *self.inits]),
        )
        return self.g

    def _all_f32(self, node: onnx.NodeProto) -> bool:
        ins = [i for i in node.input if i]
        optional_ok = {"Reshape": {1}, "Split": {1}, "Dropout": {1, 2}}
        for k, i in enumerate(node.input):
            if not i or k in optional_ok.get(node.op_type, set()):
                continue
            if not self.is_f32(i):
                return False
        return bool(ins) and all(self.is_f32(o) for o in node.output[:1] if o)

    # -- exact translations; False means "make it opaque"
    def translate(self, node: onnx.NodeProto) -> bool:
        op = node.op_type
        a = _attrs(node)
        out = node.output[0]
        ins = list(node.input)
        used = [o for o in node.output if o and self.consumers.get(o, 0)]

        def val(i: int) -> int | None:
            return self.value(ins[i]) if i < len(ins) and ins[i] else None

        def finish(nid: int) -> bool:
            want = self.shape(out)
            if want is not None and self.g.type_of(nid).shape != want:
                return False
            self.env[out] = nid
            return True

        if op in ("Identity", "Dropout"):
            x = val(0)
            if x is None or any(o != out for o in used):
                return False
            if op == "Dropout":
                # Inference only: training_mode absent or a constant false.
                if len(ins) > 2 and ins[2] and not self._bool_false(ins[2]):
                    return False
                return finish(self.add("dropout", {}, [x]))
            self.env[out] = x
            return True
        if op in ("Relu", "Tanh", "Sigmoid"):
            x = val(0)
            return x is not None and finish(self.add(op.lower(), {}, [x]))
        if op in ("Add", "Mul"):
            x, y = val(0), val(1)
            if x is None or y is None:
                return False
            if self.g.type_of(x).shape != self.g.type_of(y).shape:
                return False  # broadcasting: opaque
            return finish(self.add("ewadd" if op == "Add" else "ewmul", {}, [x, y]))
        if op == "MatMul":
            return self._matmul(val(0), val(1), out)
        if op == "Gemm":
            return self._gemm(node, a, val(0), val(1), out)
        if op == "Conv":
            return self._conv(node, a, val(0), val(1), out)
        if op in ("MaxPool", "AveragePool"):
            return self._pool(op, a, val(0), out, used)
        if op == "Concat":
            xs = [self.value(i) for i in ins]
            if not xs or any(x is None for x in xs):
                return False
            ids = [int(x) for x in xs if x is not None]
            rank = len(self.g.type_of(ids[0]).shape)
            axis = int(a.get("axis", 0))
            axis = axis + rank if axis < 0 else axis
            if len(ids) == 1:
                self.env[out] = ids[0]
                return True
            return finish(self.concat(axis, ids))
        if op == "Split":
            return self._split(node, a, val(0))
        if op == "Reshape":
            x = val(0)
            target = self.const_ints(ins[1]) if len(ins) > 1 else None
            if x is None or target is None:
                return False
            src = self.g.type_of(x).shape
            if a.get("allowzero", 0) and 0 in target:
                return False
            dims = [src[k] if d == 0 else d for k, d in enumerate(target)]
            if dims.count(-1) > 1:
                return False
            if -1 in dims:
                rest = math.prod(d for d in dims if d != -1)
                if rest == 0:
                    return False
                dims[dims.index(-1)] = math.prod(src) // rest
            if len(dims) < 2:
                return False  # a rank-1 shape symbol would read as an integer
            return finish(self.add("reshape", {"shape": dims_text(dims)}, [x]))
        if op == "Transpose":
            x = val(0)
            if x is None:
                return False
            rank = len(self.g.type_of(x).shape)
            perm = list(a.get("perm", list(range(rank))[::-1]))
            if perm == list(range(rank)):
                self.env[out] = x
                return True
            return finish(self.add("transpose", {"perm": dims_text(perm)}, [x]))
        if op == "BatchNormalization":
            if len(used) != 1 or used[0] != out or a.get("training_mode", 0):
                return False
            if abs(float(a.get("epsilon", 1e-5)) - BN_EPS) > 1e-9:
                return False
            xs = [val(i) for i in range(5)]
            if any(x is None for x in xs):
                return False
            return finish(self.add("batchnorm", {}, [int(x) for x in xs if x is not None]))
        return False

    def _bool_false(self, name: str) -> bool:
        t = self.inits.get(name)
        return t is not None and not bool(numpy_helper.to_array(t).reshape(-1).any())

    def _matmul(self, x: int | None, w: int | None, out: str) -> bool:
        if x is None or w is None:
            return False
        xs, ws = self.g.type_of(x).shape, self.g.type_of(w).shape
        if len(xs) >= 2 and len(xs) == len(ws) and xs[:-2] == ws[:-2]:
            return self._finish(out, self.add("matmul", {"act": 0}, [x, w]))
        if len(xs) > 2 and len(ws) == 2:
            flat = self.add("reshape", {"shape": dims_text((math.prod(xs[:-1]), xs[-1]))}, [x])
            mm = self.add("matmul", {"act": 0}, [flat, w])
            back = self.add("reshape", {"shape": dims_text((*xs[:-1], ws[-1]))}, [mm])
            return self._finish(out, back)
        return False

    def _finish(self, out: str, nid: int) -> bool:
        want = self.shape(out)
        if want is not None and self.g.type_of(nid).shape != want:
            return False
        self.env[out] = nid
        return True

    def _gemm(self, node, a, x, w, out) -> bool:
        if x is None or w is None:
            return False
        if float(a.get("alpha", 1.0)) != 1.0:
            return False
        if a.get("transA", 0):
            x = self.add("transpose", {"perm": "1_0"}, [x])
        if a.get("transB", 0):
            w = self.add("transpose", {"perm": "1_0"}, [w])
        mm = self.add("matmul", {"act": 0}, [x, w])
        c = node.input[2] if len(node.input) > 2 else ""
        if not c:
            return self._finish(out, mm)
        if float(a.get("beta", 1.0)) != 1.0:
            return False
        shape = self.g.type_of(mm).shape
        if self.shape(c) == shape and (cid := self.value(c)) is not None:
            return self._finish(out, self.add("ewadd", {}, [mm, cid]))
        # Broadcast bias: the matmul is translated, the Add stays opaque.
        if self.shape(out) != shape:
            return False
        if c not in self.inits and c not in self.env:
            return False
        tmp = f"{out}__tensat_mm"
        add = helper.make_node("Add", [tmp, c], [out], name=f"{node.name or out}_bias")
        self._make_opaque("Add", (add,), [(tmp, mm)], out, _F32, f"g:{out}")
        return True

    def _conv(self, node, a, x, w, out) -> bool:
        if x is None or w is None:
            return False
        xs, ws = self.g.type_of(x).shape, self.g.type_of(w).shape
        oshape = self.shape(out)
        if len(xs) != 4 or len(ws) != 4 or oshape is None or len(oshape) != 4:
            return False
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            return False
        if list(a.get("kernel_shape", ws[2:])) != list(ws[2:]):
            return False
        group = int(a.get("group", 1))
        if ws[1] * group != xs[1]:
            return False
        strides = tuple(a.get("strides", [1, 1]))
        if len(strides) != 2:
            return False
        pad = _pad_mode(xs[2:], ws[2:], strides, a, oshape[2:])  # type: ignore[arg-type]
        if pad is None:
            return False
        p = {"stride_h": strides[0], "stride_w": strides[1], "pad": pad, "act": 0}
        b = node.input[2] if len(node.input) > 2 else ""
        if b and (b not in self.inits or self.shape(b) != (ws[0],)):
            return False
        conv = self.add("conv2d", p, [x, w])
        if not b:
            return self._finish(out, conv)
        if self.g.type_of(conv).shape != oshape:
            return False
        # Bias: an opaque Add of B as [O, 1, 1] after the translated convolution.
        bias = numpy_helper.to_array(self.inits[b]).reshape(ws[0], 1, 1)
        bname = f"{b}__tensat_o11"
        tmp = f"{out}__tensat_conv"
        add = helper.make_node("Add", [tmp, bname], [out], name=f"{node.name or out}_bias")
        self._make_opaque(
            "Add",
            (add,),
            [(tmp, conv)],
            out,
            _F32,
            f"g:{out}",
            {bname: numpy_helper.from_array(bias, bname)},
        )
        return True

    def _pool(self, op, a, x, out, used) -> bool:
        if x is None or used != [out]:
            return False
        xs, oshape = self.g.type_of(x).shape, self.shape(out)
        if len(xs) != 4 or oshape is None or len(oshape) != 4:
            return False
        k = tuple(a.get("kernel_shape", []))
        if len(k) != 2 or a.get("ceil_mode", 0) or a.get("storage_order", 0):
            return False
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            return False
        strides = tuple(a.get("strides", [1, 1]))
        pad = _pad_mode(xs[2:], k, strides, a, oshape[2:])  # type: ignore[arg-type]
        if pad is None:
            return False
        if op == "AveragePool" and pad == 0 and a.get("count_include_pad", 0):
            kh, kw = k
            sh, sw = strides
            no_pad = all(
                max((-(-h // s) - 1) * s + kk - h, 0) == 0
                for h, kk, s in ((xs[2], kh, sh), (xs[3], kw, sw))
            )
            if not no_pad:
                return False
        p = {
            "kernel_h": k[0],
            "kernel_w": k[1],
            "stride_h": strides[0],
            "stride_w": strides[1],
            "pad": pad,
            "act": 0,
        }
        return self._finish(out, self.add("poolmax" if op == "MaxPool" else "poolavg", p, [x]))

    def _split(self, node, a, x) -> bool:
        if x is None:
            return False
        shape = self.g.type_of(x).shape
        axis = int(a.get("axis", 0))
        axis = axis + len(shape) if axis < 0 else axis
        outs = list(node.output)
        sizes = None
        if len(node.input) > 1 and node.input[1]:
            sizes = self.const_ints(node.input[1])
        elif "split" in a:
            sizes = [int(v) for v in a["split"]]
        else:
            sizes = [self.shape(o)[axis] if self.shape(o) else -1 for o in outs]  # type: ignore[index]
        if sizes is None or len(sizes) != len(outs) or len(outs) < 2:
            return False
        cur = x
        ids: list[int] = []
        for k in range(len(outs) - 1):
            pair = self.add("split", {"axis": axis}, [cur])
            first = self.add("split_0", {}, [pair])
            rest = self.add("split_1", {}, [pair])
            if self.g.type_of(first).shape[axis] != sizes[k]:
                return False
            ids.append(first)
            cur = rest
        ids.append(cur)
        if self.g.type_of(cur).shape[axis] != sizes[-1]:
            return False
        for o, nid in zip(outs, ids, strict=True):
            want = self.shape(o)
            if o and want is not None and self.g.type_of(nid).shape != want:
                return False
        for o, nid in zip(outs, ids, strict=True):
            if o:
                self.env[o] = nid
        return True

    # -- opaque nodes
    def _make_opaque(
        self,
        op_type: str,
        nodes: tuple[onnx.NodeProto, ...],
        operands: list[tuple[str, int]],
        output: str,
        elem: int,
        group: str,
        extra_constants: Mapping[str, TensorProto] | None = None,
    ) -> int:
        operand_names = {n for n, _ in operands}
        consts = dict(extra_constants or {})
        for n in nodes:
            for i in n.input:
                if i and i not in operand_names and i in self.inits:
                    consts[i] = self.inits[i]
        shape = self.shape(output)
        if shape is None:
            raise OnnxError(
                f"shape inference gives no static shape for '{output}' (output of "
                f"{op_type} node '{nodes[0].name}'); pass input_shapes={{...}} to fix "
                "symbolic input dimensions"
            )
        payload = OnnxOpaque(
            op_type=op_type,
            nodes=nodes,
            operands=tuple(n for n, _ in operands),
            output=output,
            elem_type=elem,
            constants=consts,
            group=group,
            opset_imports=self.opsets,
            functions=self.functions,
        )
        nid = self.g.add_opaque(op_type, shape, [i for _, i in operands], payload)
        self.env[output] = nid
        return nid

    def opaque(self, node: onnx.NodeProto, k: int) -> None:
        operands: list[tuple[str, int]] = []
        for i in node.input:
            if not i or i in (n for n, _ in operands):
                continue
            if i in self.env:
                operands.append((i, self.env[i]))
            elif i not in self.inits:
                raise OnnxError(f"node '{node.name}' ({node.op_type}) reads unknown value '{i}'")
        op_type = (
            node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        )
        group = f"n{k}:{node.name}"
        for o in node.output:
            if o and self.consumers.get(o, 0):
                elem = self.types.get(o, (0, None))[0]
                self._make_opaque(op_type, (node,), operands, o, elem, group)


def load(
    source: str | PathLike[str] | onnx.ModelProto,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> Graph:
    """Reads an ONNX model into a :class:`~tensat_py.graph.Graph`.

    Args:
        source: a path to a ``.onnx`` file or a ``ModelProto``.
        input_shapes: static shapes for inputs whose dimensions are symbolic, by input
            name (other inputs keep theirs).

    Returns:
        The graph; ``graph.meta["onnx"]`` is an :class:`OnnxSource` and
        ``graph.meta["opaque"]`` holds an :class:`OnnxOpaque` per opaque node.

    Raises:
        OnnxError: an unreadable model, a default-domain opset older than 13 that ONNX
            cannot convert, or a value without a static shape that an opaque node needs.
        FileNotFoundError: no such file.
    """
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        where = "model"
    else:
        where = str(source)
        if not Path(source).is_file():
            raise FileNotFoundError(f"{where}: no such file")
        try:
            model = onnx.load(str(source))
        except Exception as e:
            raise OnnxError(f"{where}: not a readable ONNX model ({e})") from None
    if _default_opset(model) < MIN_OPSET:
        try:
            from onnx import version_converter

            model = version_converter.convert_version(model, MIN_OPSET)
        except Exception as e:
            raise OnnxError(
                f"{where}: opset {_default_opset(model)} is older than {MIN_OPSET} and "
                f"could not be converted ({e})"
            ) from None
    if input_shapes:
        names = {vi.name for vi in model.graph.input}
        for name in input_shapes:
            if name not in names:
                raise OnnxError(f"{where}: input_shapes names unknown input '{name}'")
        for vi in model.graph.input:
            if vi.name in input_shapes:
                shape = [int(d) for d in input_shapes[vi.name]]
                tt = vi.type.tensor_type
                tt.shape.Clear()
                for d in shape:
                    tt.shape.dim.add().dim_value = d
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as e:
        raise OnnxError(f"{where}: ONNX shape inference failed: {e}") from None
    try:
        return _Loader(model).run()
    except GraphError as e:
        raise OnnxError(f"{where}: {e}") from None


# ---------------------------------------------------------------------------- saving
class _Exporter:
    def __init__(self, graph: Graph, weights: Mapping[str, np.ndarray], src: OnnxSource | None):
        self.g = graph
        self.weights = weights
        self.src = src
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, TensorProto] = {}
        self.names: dict[int, str] = {}
        self.reserved: set[str] = set(src.names) if src else set()
        self.counter = 0
        self.emitted_groups: set[str] = set()
        self.split_parts: dict[int, list[str]] = {}

    def fresh(self, stem: str) -> str:
        while True:
            name = f"tensat_{stem}_{self.counter}"
            self.counter += 1
            if name not in self.reserved:
                self.reserved.add(name)
                return name

    def onnx_leaf(self, name: str) -> str:
        return self.src.leaf_names.get(name, name) if self.src else name

    def add_init(self, name: str, array: np.ndarray | TensorProto) -> None:
        if name in self.inits:
            return
        if isinstance(array, TensorProto):
            self.inits[name] = array
        else:
            self.inits[name] = numpy_helper.from_array(np.asarray(array), name)

    def weight_array(self, nid: int) -> np.ndarray:
        node = self.g.nodes[nid]
        if node.name in self.weights:
            return np.asarray(self.weights[node.name], dtype=np.float32)
        onnx_name = self.onnx_leaf(node.name)
        if self.src is not None and onnx_name in self.src.initializers:
            return self.src.array(onnx_name).astype(np.float32, copy=False)
        raise OnnxError(f"no value for weight '{node.name}' {node.shape}; pass weights=")

    def constants(self, keep: list[bool]) -> dict[int, np.ndarray]:
        """Values of the constant non-weight nodes a non-constant node or output reads."""
        g = self.g
        needed: set[int] = set()
        for nid, node in enumerate(g.nodes):
            if keep[nid] and not node.constant:
                needed.update(i for i in node.inputs if g.nodes[i].constant)
        needed.update(o for o in g.outputs if g.nodes[o].constant)
        needed = {i for i in needed if g.nodes[i].op != "weight"}
        if not needed:
            return {}
        vals: dict[int, Any] = {}
        closure: set[int] = set()
        stack = list(needed)
        while stack:
            i = stack.pop()
            if i in closure:
                continue
            closure.add(i)
            stack.extend(g.nodes[i].inputs)
        for nid in sorted(closure):
            node = g.nodes[nid]
            if node.op == "weight":
                vals[nid] = self.weight_array(nid)
            else:
                vals[nid] = eval_node(node, [vals[i] for i in node.inputs], g)
        return {i: np.ascontiguousarray(vals[i], dtype=np.float32) for i in needed}

    def emit(self, op: str, inputs: list[str], out: str, **attrs: Any) -> None:
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))

    def emit_act(self, op: str, inputs: list[str], out: str, act: int, **attrs: Any) -> None:
        if act == 0:
            self.emit(op, inputs, out, **attrs)
            return
        mid = self.fresh(op.lower())
        self.emit(op, inputs, mid, **attrs)
        self.emit(_ACT_OPS[act], [mid], out)

    def shape_init(self, dims: Sequence[int]) -> str:
        name = f"tensat_shape_{dims_text(dims) or 'scalar'}"
        self.reserved.add(name)
        self.add_init(name, np.asarray(list(dims), dtype=np.int64))
        return name

    def run(self, opset: int, opsets, ir_version: int, functions) -> onnx.ModelProto:
        g = self.g
        keep = g.live()
        consts = self.constants(keep)
        out_names = list(self.src.outputs) if self.src else []
        if len(out_names) != len(g.outputs):
            out_names = [f"output_{k}" for k in range(len(g.outputs))]
        self.reserved.update(out_names)
        # Name the values: leaves and opaque values keep their ONNX names; an output
        # computed by a plain node takes the output's name.
        for nid, node in enumerate(g.nodes):
            if not keep[nid]:
                continue
            if node.op in ("input", "weight"):
                self.names[nid] = self.onnx_leaf(node.name)
            elif node.op == OPAQUE and (p := g.opaque_payload(nid)) is not None:
                self.names[nid] = getattr(p, "output", node.name)
        for k, o in enumerate(g.outputs):
            if o not in self.names and o not in consts:
                self.names[o] = out_names[k]
        for nid, node in enumerate(g.nodes):
            if not keep[nid]:
                continue
            if nid not in self.names:
                self.names[nid] = self.fresh("const" if nid in consts else node.op)
            name = self.names[nid]
            if nid in consts:
                self.add_init(name, consts[nid])
                continue
            self.node(nid, name)
        final_outputs = []
        for k, o in enumerate(g.outputs):
            name = self.names[o]
            if name != out_names[k]:
                self.emit("Identity", [name], out_names[k])
            t = g.type_of(o)
            elem = self.elem_type(o)
            final_outputs.append(helper.make_tensor_value_info(out_names[k], elem, list(t.shape)))
        graph_inputs = []
        input_order = (
            [n for n, _ in self.src.inputs] if self.src else [g.nodes[i].name for i in g.inputs()]
        )
        by_onnx = {self.onnx_leaf(g.nodes[i].name): i for i in g.inputs()}
        src_types = dict(self.src.inputs) if self.src else {}
        for name in input_order:
            if name not in by_onnx:
                continue
            shape = g.type_of(by_onnx[name]).shape
            elem = src_types.get(name, _F32)
            graph_inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
        gp = helper.make_graph(
            self.nodes, "tensat", graph_inputs, final_outputs, list(self.inits.values())
        )
        model = helper.make_model(
            gp, opset_imports=list(opsets), functions=list(functions), producer_name="tensat-py"
        )
        model.ir_version = ir_version
        return model

    def elem_type(self, nid: int) -> int:
        node = self.g.nodes[nid]
        if node.op == OPAQUE:
            p = self.g.opaque_payload(nid)
            return int(getattr(p, "elem_type", _F32) or _F32)
        if node.op == "input" and self.src:
            return dict(self.src.inputs).get(self.onnx_leaf(node.name), _F32)
        return _F32

    def node(self, nid: int, name: str) -> None:
        g = self.g
        node = g.nodes[nid]
        op, p = node.op, node.params
        ins = [self.names[i] for i in node.inputs]
        if op == "input":
            return
        if op == "weight":
            self.add_init(name, self.weight_array(nid))
            return
        if op in ("ewadd", "ewmul"):
            self.emit("Add" if op == "ewadd" else "Mul", ins, name)
        elif op in ("relu", "tanh", "sigmoid"):
            self.emit({"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid"}[op], ins, name)
        elif op == "dropout":
            self.emit("Identity", ins, name)
        elif op == "matmul":
            self.emit_act("MatMul", ins, name, int(p["act"]))
        elif op == "conv2d":
            xs, ws = g.type_of(node.inputs[0]).shape, g.type_of(node.inputs[1]).shape
            pads = self._pads(xs, ws[2:], (int(p["stride_h"]), int(p["stride_w"])), int(p["pad"]))
            self.emit_act(
                "Conv",
                ins,
                name,
                int(p["act"]),
                kernel_shape=list(ws[2:]),
                strides=[int(p["stride_h"]), int(p["stride_w"])],
                pads=pads,
                group=xs[1] // ws[1],
            )
        elif op in ("poolmax", "poolavg"):
            xs = g.type_of(node.inputs[0]).shape
            k = (int(p["kernel_h"]), int(p["kernel_w"]))
            s = (int(p["stride_h"]), int(p["stride_w"]))
            extra = {"count_include_pad": 0} if op == "poolavg" else {}
            self.emit_act(
                "MaxPool" if op == "poolmax" else "AveragePool",
                ins,
                name,
                int(p["act"]),
                kernel_shape=list(k),
                strides=list(s),
                pads=self._pads(xs, k, s, int(p["pad"])),
                **extra,
            )
        elif op == "transpose":
            self.emit("Transpose", ins, name, perm=list(parse_dims(str(p["perm"]))))
        elif op == "reshape":
            self.emit("Reshape", [ins[0], self.shape_init(parse_dims(str(p["shape"])))], name)
        elif op in ("concat", "concat3", "concat4", "concat5"):
            self.emit("Concat", ins, name, axis=int(p["axis"]))
        elif op == "split":
            a, b = node.type  # type: ignore[misc]
            axis = int(p["axis"])
            sizes = self.shape_init((a.shape[axis], b.shape[axis]))
            parts = [self.fresh("part"), self.fresh("part")]
            self.split_parts[nid] = parts
            self.nodes.append(
                helper.make_node("Split", [ins[0], sizes], parts, name=name, axis=axis)
            )
        elif op in ("split_0", "split_1"):
            part = self.split_parts[node.inputs[0]][int(op[-1])]
            self.emit("Identity", [part], name)
        elif op == "batchnorm":
            self.emit("BatchNormalization", ins, name, epsilon=BN_EPS)
        elif op == "enlarge":
            ws, rs = g.type_of(node.inputs[0]).shape, g.type_of(node.inputs[1]).shape
            dh, dw = (rs[2] - ws[2]) // 2, (rs[3] - ws[3]) // 2
            pads = self.shape_init((0, 0, dh, dw, 0, 0, dh, dw))
            self.emit("Pad", [ins[0], pads], name)
        elif op == OPAQUE:
            self.opaque(nid, ins)
        else:
            raise OnnxError(
                f"node '{node.name}': `{op}` on a non-constant operand has no ONNX form"
            )

    def _pads(self, xs, k, s, pad: int) -> list[int]:
        if pad == 1:
            return [0, 0, 0, 0]
        before, after = [], []
        for h, kk, ss in zip(xs[2:], k, s, strict=True):
            o = -(-h // ss)
            total = max((o - 1) * ss + kk - h, 0)
            before.append(total // 2)
            after.append(total - total // 2)
        return before + after

    def opaque(self, nid: int, ins: list[str]) -> None:
        p = self.g.opaque_payload(nid)
        if not isinstance(p, OnnxOpaque):
            raise OnnxError(
                f"opaque node '{self.g.nodes[nid].name}' has no ONNX payload; it cannot be saved"
            )
        for cname, t in p.constants.items():
            self.add_init(cname, t)
        if p.group in self.emitted_groups:
            return
        self.emitted_groups.add(p.group)
        rename = dict(zip(p.operands, ins, strict=True))
        for n in p.nodes:
            m = onnx.NodeProto()
            m.CopyFrom(n)
            for k, i in enumerate(m.input):
                if i in rename:
                    m.input[k] = rename[i]
            self.nodes.append(m)


def to_model(
    graph: Graph,
    *,
    weights: Mapping[str, np.ndarray] | str | None = None,
    source: Graph | OnnxSource | None = None,
    opset: int | None = None,
    check: bool = True,
) -> onnx.ModelProto:
    """The ONNX model of ``graph`` (see the module docstring).

    Args:
        graph: the program, typically the result of :func:`tensat_py.optimize` on a graph
            from :func:`load` (its ``meta["onnx"]`` says which model it came from).
        weights: values for weights by graph name, overriding the source model's
            initializers; ``"random"`` draws every weight the source does not hold with
            :func:`~tensat_py.runtime.numpy_exec.random_feeds` (seed 0).
        source: the graph (or :class:`OnnxSource`) the program came from, when
            ``graph.meta`` does not carry it.
        opset: default-domain opset for a graph without a source model (17).
        check: run ``onnx.checker.check_model(model, full_check=True)``.

    Raises:
        OnnxError: a weight without a value, an opaque node without an ONNX payload, or
            a model the checker rejects.
    """
    src = source.meta.get("onnx") if isinstance(source, Graph) else source
    if src is None:
        src = graph.meta.get("onnx")
    if isinstance(source, Graph) and "opaque" in source.meta:
        merged = dict(source.meta["opaque"])
        merged.update(graph.meta.get("opaque", {}))
        graph.meta["opaque"] = merged
    if isinstance(weights, str):
        if weights != "random":
            raise OnnxError(f"weights={weights!r}: expected a mapping or 'random'")
        drawn = random_feeds(graph, seed=0)
        known = src.weight_values(graph) if src else {}
        values: dict[str, np.ndarray] = {
            n: drawn[n] for n in (graph.nodes[i].name for i in graph.weights()) if n not in known
        }
    else:
        values = dict(weights or {})
    if src is not None:
        opsets = list(src.opset_imports)
        ir_version = src.ir_version
        functions = src.functions
    else:
        opsets = [helper.make_opsetid("", opset or DEFAULT_OPSET)]
        ir_version = 8
        functions = ()
    model = _Exporter(graph, values, src).run(opset or 0, opsets, ir_version, functions)
    if check:
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:
            raise OnnxError(f"the exported model fails the ONNX checker: {e}") from None
    return model


def save(
    graph: Graph,
    path: str | PathLike[str],
    *,
    weights: Mapping[str, np.ndarray] | str | None = None,
    source: Graph | OnnxSource | None = None,
    opset: int | None = None,
) -> Path:
    """Writes ``graph`` as an ONNX model to ``path`` atomically (temp file + rename).

    Arguments as for :func:`to_model`. Returns the path written.

    Raises:
        OnnxError: as :func:`to_model`.
        OSError: the file cannot be written.
    """
    model = to_model(graph, weights=weights, source=source, opset=opset)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
