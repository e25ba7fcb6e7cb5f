"""ONNX in: :func:`load` a model into a :class:`~tensat_py.graph.Graph`.

Loading (opset 13 and newer; older models, opset 7 to 12, are converted to 13 with ONNX's
version converter, ``onnx.version_converter.convert_version``)
runs ONNX shape inference (``onnx.shape_inference.infer_shapes`` with data propagation),
so every value must get a static shape: pass ``input_shapes={"x": (1, 3, 224, 224)}`` to
fix symbolic input dimensions. Graph inputs become ``input`` nodes; each ONNX node is
handed to the importer registered for its operator type (:func:`tensat_py.ops.onnx_importer`,
looked up in :func:`tensat_py.ops.onnx_importers` by ``op_type`` in the default domain,
``"domain:op_type"`` elsewhere), which builds language nodes through the :class:`Importer`
API (``imp`` below). There is no per-operator code here.

Element types: each value's dtype comes from its ONNX type (``float32 float16 bfloat16
float64 bool`` and the integers ``int8``-``int64``, ``uint8``-``uint64``;
:data:`~.common.ELEM_TO_DTYPE`). An importer asking for a
value of any other element type gets ``Unsupported`` (so the node becomes opaque); such a
value produced by an opaque node is computed inside the payload of its consumers.

Constants: initializers and ``Constant`` nodes are constants; so are the outputs of
*shape sub-graphs* (``Shape``/``Gather``/``Concat``/``Range``... feeding ``Reshape``,
``Pad``, ``Expand``), which :func:`fold_shapes` folds before import with onnxslim
(constant folding and dead-node elimination only, once the input shapes are fixed). An
importer reading a constant gets a ``weight`` node (its value kept, dtype unchanged), a
rank-0 constant the operator :func:`tensat_py.ops.tensor.rank0_constant` names
(``scalar``), and can read the value with ``imp.const_value``.

Compact constants: a ``ConstantOfShape`` of a constant shape whose value is more than
:data:`~.common.SPLAT_BYTES` bytes (the classic model zoo's weights) is taken out of the
model before folding (:func:`hold_splats`), and an initializer of more than that many
bytes whose elements are all equal is recognised: both become a
:class:`~.common.SplatConstant` (``OnnxSource.splats``). The graph has a ``weight`` for
each, like any initializer (the cost models and rules see a constant), whose value is a
broadcast view (one element in memory), and the exporter writes it as ``ConstantOfShape``
again, never as a full tensor.

IR versions: onnxruntime reads models up to some IR version (13 for 1.2x); a model saved
with a newer one (``onnx`` 1.18+ writes 14 by default), or with one older than its opsets
allow (IR 3 converted to opset 13), is folded and evaluated under
:func:`~.common.runnable_ir_version`, the lowest IR version its opsets need; the graph
keeps the model's own IR version, and the exporter writes that same lowest one. An
initializer an IR 3 model lists as a graph input (IR 3 requires it) is a constant here, as
it is in any IR version.

Opaque nodes: a node becomes ``opaque`` only when no importer is registered for its type,
when its importer raised ``imp.Unsupported(reason)``, or when it returned without
producing an output the model uses. Its output types come from shape inference and its
payload (:class:`~.payload.OnnxOpaque`) keeps the ``NodeProto`` (sub-graphs included) and
the reason; :func:`opaque_reasons` lists the reasons. Any other exception from an
importer, a ``GraphError`` from the Rust type checker on a node an importer built, and an
output whose shape or dtype disagrees with shape inference raise
:class:`~.common.OnnxImportError` naming the ONNX node (name, op type) and the model.

The importer API (the contract for ``ops/*.py``; an importer is ``fn(imp, node)``):

* ``imp.attrs(node) -> dict``: ``onnx.helper.get_attribute_value`` for each attribute
  (strings stay ``bytes``).
* ``imp.input(node, i) -> int | None``: graph node id of input ``i`` (None when absent or
  empty); constants become ``weight`` nodes.
* ``imp.const_value(node, i) -> np.ndarray | None``: the value when input ``i`` is a
  constant.
* ``imp.type(node, i) -> TensorType``: static shape and dtype of input ``i``.
* ``imp.add(op, params, inputs) -> int``: append a language node (type-checked by Rust).
* ``imp.weight(array, stem) -> int``: a new ``weight`` node holding ``array`` (its dtype
  kept; equal small arrays are shared).
* ``imp.set_output(node, k, nid)``: bind output ``k`` of the ONNX node to node ``nid``.
* ``raise imp.Unsupported(reason)``: this node (with these attributes/inputs) is not
  modelled; it becomes opaque with ``reason``.

Additions beyond the contract (documented here for importer authors):

* ``imp.output_type(node, k) -> TensorType | None``: the type shape inference gives output
  ``k`` (None when its shape is not static); ``Unsupported`` for an element type without a
  dtype.
* ``imp.used(node, k) -> bool``: whether the model reads output ``k`` (e.g. Dropout's mask,
  BatchNormalization's running statistics).
* ``imp.opset -> int``: the model's default-domain opset (>= 13).
* ``imp.graph -> Graph``: the graph being built (read-only use: ``imp.graph.type_of(nid)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensat_py.frontends.onnx.common import (
    MIN_OPSET,
    SPLAT_BYTES,
    OnnxError,
    OnnxImportError,
    SplatConstant,
    constant_of_shape_allows,
    dtype_of_array,
    dtype_of_elem,
    elem_name,
    elem_of_dtype,
    hold_out,
    runnable_ir_version,
    splat_value,
    tensor_bytes,
)
from tensat_py.frontends.onnx.payload import OnnxOpaque, outer_inputs, subgraphs
from tensat_py.frontends.onnx.regions import KeyTable, SourceNode, record, structural_keys
from tensat_py.graph import Graph, GraphError, TensorType
from tensat_py.options import spell

__all__ = [
    "Unsupported",
    "Importer",
    "OnnxSource",
    "load",
    "opaque_ops",
    "opaque_reasons",
    "fold_shapes",
    "hold_splats",
    "FIXED_DIMS",
]

#: ``graph.meta`` key of the symbolic input dimensions that ``input_shapes`` fixed:
#: ``{"x[0]": "N=8"}`` (input ``x``, dimension 0, named ``N`` in the model, now 8). The
#: written model carries the static sizes; ``tensat optimize`` says so.
FIXED_DIMS = "fixed_dims"

_BAD_LEAF_CHARS = set(" \t\n()@;:\"'[],")
_DEFAULT_DOMAINS = ("", "ai.onnx")
#: onnxslim passes run before import: constant folding (shape sub-graphs) and dead-node
#: elimination only; its fusions would do the optimiser's work outside the e-graph.
_SLIM_SKIP = ["graph_fusion", "subexpression_elimination", "weight_tying"]
#: Largest folded constant (bytes): larger weight-only values stay computed in the model.
#: (``ConstantOfShape`` weights never reach the folding: :func:`hold_splats`.)
_SLIM_SIZE_THRESHOLD = 1 << 24


class Unsupported(Exception):  # noqa: N818  (the contract's name)
    """Raised by an importer (``raise imp.Unsupported("reason")``) when the ONNX node, with
    these attributes and inputs, is not modelled by the language: the node becomes opaque
    and ``reason`` is recorded in its payload."""


# ---------------------------------------------------------------------------- source
@dataclass(eq=False)
class OnnxSource:
    """What :func:`load` keeps of the model (``Graph.meta["onnx"]``) for the exporter.

    Attributes:
        initializers: every initializer (``Constant`` node values and folded shape
            sub-graphs included) by name.
        inputs: runtime inputs (not initializers) in order: ONNX name and element type.
        outputs: graph output names in order.
        leaf_names: graph ``input``/``weight`` name -> ONNX value name.
        opset_imports: the model's opset imports (default domain >= 13).
        ir_version: the model's IR version.
        functions: local functions the model defines.
        names: every value name in the model, sub-graphs included (new names avoid them).
        arrays: values of the weights importers created with ``imp.weight``, by graph
            name (exported as initializers of that name).
        key_table: the structural keys of the imported graph
            (:func:`~.regions.structural_keys`); the exporter keys the optimised graph
            against it.
        source_nodes: every ONNX node an importer translated, in model order, with the
            keys of the values it reads and writes (:class:`~.regions.SourceNode`).
        constant_nodes: the ``Constant`` nodes whose values became initializers, by output
            name (written back as they were).
        splats: the constants all of whose elements are equal (the model's
            ``ConstantOfShape`` weights, initializers of one repeated value), by ONNX name:
            not in :attr:`initializers`; their weights' values are broadcast views and the
            exporter writes them as ``ConstantOfShape`` (:class:`~.common.SplatConstant`).
        graph_name, producer_name, producer_version: the model's (written back).
        original: the model as :func:`load` was given it (before ``input_shapes`` and
            shape folding), written back as it is when the program is unchanged.
        output_keys: the structural keys of the imported graph's outputs: a graph whose
            outputs have these keys computes the same values (:func:`~.regions.lookup_keys`).
    """

    initializers: dict[str, TensorProto]
    inputs: list[tuple[str, int]]
    outputs: list[str]
    leaf_names: dict[str, str]
    opset_imports: tuple[onnx.OperatorSetIdProto, ...]
    ir_version: int
    functions: tuple[onnx.FunctionProto, ...]
    names: frozenset[str]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    key_table: KeyTable = field(default_factory=dict, repr=False)
    source_nodes: tuple[SourceNode, ...] = field(default=(), repr=False)
    constant_nodes: dict[str, onnx.NodeProto] = field(default_factory=dict, repr=False)
    splats: dict[str, SplatConstant] = field(default_factory=dict, repr=False)
    graph_name: str = ""
    producer_name: str = ""
    producer_version: str = ""
    original: onnx.ModelProto | None = field(default=None, repr=False)
    output_keys: tuple[int, ...] = ()
    _arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def opset(self) -> int:
        """The default-domain opset."""
        return _default_opset_of(self.opset_imports)

    def array(self, onnx_name: str) -> np.ndarray:
        """The initializer ``onnx_name`` as a NumPy array (cached; dtype as stored)."""
        if onnx_name not in self._arrays:
            self._arrays[onnx_name] = numpy_helper.to_array(self.initializers[onnx_name])
        return self._arrays[onnx_name]

    def weight_value(self, name: str) -> np.ndarray | None:
        """The value of graph weight ``name``, or None when the model does not hold it (a
        read-only broadcast view for a splat constant: one element in memory)."""
        if name in self.arrays:
            return self.arrays[name]
        onnx_name = self.leaf_names.get(name, name)
        if onnx_name in self.initializers:
            return self.array(onnx_name)
        if onnx_name in self.splats:
            return self.splats[onnx_name].array()
        return None

    def weight_values(self, graph: Graph) -> dict[str, np.ndarray]:
        """``{weight name: array}`` for every weight of ``graph`` this model holds."""
        out = {}
        for nid in graph.weights():
            name = graph.nodes[nid].name
            v = self.weight_value(name)
            if v is not None:
                out[name] = v
        return out


def opaque_ops(graph: Graph) -> dict[str, int]:
    """``{operator type: count}`` of the opaque nodes some output depends on (an ONNX node
    with several used outputs counts once)."""
    counts: dict[str, int] = {}
    for label, _ in _opaque_groups(graph):
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


def opaque_reasons(graph: Graph) -> dict[str, dict[str, int]]:
    """``{operator type: {reason: count}}``: why each opaque node some output depends on
    is opaque (``"no importer for ONNX operator `X`"`` or the importer's ``Unsupported``
    message). Payloads from other front ends give the reason ``""``."""
    out: dict[str, dict[str, int]] = {}
    for label, reason in _opaque_groups(graph):
        per = out.setdefault(label, {})
        per[reason] = per.get(reason, 0) + 1
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def _opaque_groups(graph: Graph) -> list[tuple[str, str]]:
    seen: set[str] = set()
    out = []
    for nid in graph.opaque_nodes():
        p = graph.opaque_payload(nid)
        label = p.op_type if p is not None else graph.opaque_key(nid)
        group = getattr(p, "group", "") or graph.opaque_key(nid)
        if group in seen:
            continue
        seen.add(group)
        out.append((label, str(getattr(p, "reason", ""))))
    return out


# ---------------------------------------------------------------------------- helpers
def _default_opset_of(opsets: Sequence[onnx.OperatorSetIdProto]) -> int:
    for o in opsets:
        if o.domain in _DEFAULT_DOMAINS:
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


def _all_names(g: onnx.GraphProto, out: set[str]) -> None:
    out.update(i.name for i in g.input)
    out.update(o.name for o in g.output)
    out.update(v.name for v in g.value_info)
    out.update(t.name for t in g.initializer)
    for n in g.node:
        out.update(i for i in n.input if i)
        out.update(o for o in n.output if o)
        for sg in subgraphs(n):
            _all_names(sg, out)


def _op_key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}:{node.op_type}"


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value of a default-domain ``Constant`` node (dense forms only), else None."""
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.name == "value":
            return numpy_helper.to_array(v)
        if a.name == "value_float":
            return np.asarray(v, dtype=np.float32)
        if a.name == "value_floats":
            return np.asarray(list(v), dtype=np.float32)
        if a.name == "value_int":
            return np.asarray(v, dtype=np.int64)
        if a.name == "value_ints":
            return np.asarray(list(v), dtype=np.int64)
    return None


#: A constant of up to this many elements is never held as a splat: it may be a shape
#: that ONNX shape inference and onnxslim read (``Reshape``, ``Expand``...).
_SPLAT_MIN_ELEMENTS = 16


def _tensor_splat(t: TensorProto) -> np.ndarray | None:
    """The one value (a 1-element array) of initializer ``t`` when all its elements are
    equal and it holds more than :data:`~.common.SPLAT_BYTES` bytes and
    ``_SPLAT_MIN_ELEMENTS`` elements; else None. Raw data is read in place (no copy); a
    tensor stored outside the model, or of an element type without a dtype, is None."""
    if t.data_location == TensorProto.EXTERNAL or dtype_of_elem(t.data_type) is None:
        return None
    n = int(np.prod([int(d) for d in t.dims], dtype=np.int64)) if len(t.dims) else 1
    if n <= _SPLAT_MIN_ELEMENTS:
        return None
    np_dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
    if n * np_dtype.itemsize <= SPLAT_BYTES:
        return None
    if t.HasField("raw_data") and np_dtype.isnative and len(t.raw_data) == n * np_dtype.itemsize:
        return splat_value(np.frombuffer(t.raw_data, dtype=np_dtype))
    return splat_value(numpy_helper.to_array(t))


@dataclass
class _Pending:
    """A value of an element type the language has no dtype for, produced by an opaque
    node: its consumers take the producing nodes into their own payloads."""

    nodes: tuple[onnx.NodeProto, ...]
    operands: tuple[tuple[str, int], ...]
    constants: dict[str, TensorProto]
    elem: int


# ---------------------------------------------------------------------------- importer
class Importer:
    """Translates one ONNX model into a :class:`Graph`; the ``imp`` of the importer API
    (see the module docstring). Use :func:`load`; an importer function receives the
    instance as its first argument.

    Args:
        model: a model after version conversion and shape inference.
        where: the model file (or ``"model"``), for messages.
        importers: ONNX op type -> importer; defaults to
            :func:`tensat_py.ops.onnx_importers`.
        splats: the constants :func:`hold_splats` took out of the model (graph inputs of
            ``model`` now), by name; they are constants, not inputs. Initializers of more
            than :data:`~.common.SPLAT_BYTES` bytes (and 16 elements) whose values are all
            equal join them.
    """

    Unsupported = Unsupported

    def __init__(
        self,
        model: onnx.ModelProto,
        where: str = "model",
        importers: Mapping[str, Callable[..., Any]] | None = None,
        splats: Mapping[str, SplatConstant] | None = None,
        held: Sequence[TensorProto] = (),
    ) -> None:
        if importers is None:
            from tensat_py import ops

            importers = ops.onnx_importers()
        self.importers = dict(importers)
        self.model = model
        self.where = where
        self.graph = Graph()
        self.opset = _default_opset_of(model.opset_import)
        gr = model.graph
        self.inits: dict[str, TensorProto] = {t.name: t for t in gr.initializer}
        # Initializers held out of folding (:func:`without_idle_weights`), by reference:
        # the model lists them as typed inputs, which the initializers shadow.
        self.inits.update((t.name, t) for t in held)
        self.nodes: list[onnx.NodeProto] = []
        self.constant_nodes: dict[str, onnx.NodeProto] = {}
        for n in gr.node:
            if (
                n.op_type == "Constant"
                and n.domain in _DEFAULT_DOMAINS
                and len(n.output) == 1
                and (v := _constant_value(n)) is not None
            ):
                self.inits[n.output[0]] = numpy_helper.from_array(v, n.output[0])
                self.constant_nodes[n.output[0]] = n
                continue
            self.nodes.append(n)
        self.types: dict[str, tuple[int, tuple[int, ...] | None]] = {}
        for vi in [*gr.input, *gr.value_info, *gr.output]:
            self.types[vi.name] = _static_type(vi)
        for name, t in self.inits.items():
            self.types[name] = (int(t.data_type), tuple(int(d) for d in t.dims))
        self.splats: dict[str, SplatConstant] = dict(splats or {})
        for name, sp in self.splats.items():
            self.types[name] = (sp.elem, sp.dims)
        self.consumers: dict[str, int] = {}
        for n in self.nodes:
            for i in [*n.input, *outer_inputs(n)]:
                if i:
                    self.consumers[i] = self.consumers.get(i, 0) + 1
        for o in gr.output:
            self.consumers[o.name] = self.consumers.get(o.name, 0) + 1
        names: set[str] = set()
        _all_names(gr, names)
        names.update(self.inits)
        for sp in self.splats.values():
            names.update((sp.name, sp.shape.name))
        for name, t in list(self.inits.items()):
            if name in self.constant_nodes or name not in self.consumers:
                continue
            v = _tensor_splat(t)
            if v is None or not constant_of_shape_allows(t.data_type, self.opset):
                continue
            shape_name, k = f"{name}__shape", 1
            while shape_name in names:
                shape_name, k = f"{name}__shape_{k}", k + 1
            names.add(shape_name)
            dims = tuple(int(d) for d in t.dims)
            self.splats[name] = SplatConstant.make(name, v, dims, shape_name)
            del self.inits[name]
        self.model_names = names
        self.env: dict[str, int] = {}  # ONNX value -> graph node id
        self.pending: dict[str, _Pending] = {}
        self.taken: set[str] = set()  # graph leaf names
        self.leaf_names: dict[str, str] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self._shared: dict[tuple, int] = {}
        self._const_cache: dict[str, np.ndarray] = {}
        self._node: onnx.NodeProto | None = None
        self._bound: dict[int, int] = {}
        #: translated nodes: (proto, input node ids, output node ids); None = constant,
        #: absent or unread.
        self._translated: list[tuple[onnx.NodeProto, list[int | None], list[int | None]]] = []

    # ------------------------------------------------------------------ the API
    def attrs(self, node: onnx.NodeProto) -> dict[str, Any]:
        """``{attribute name: helper.get_attribute_value(attribute)}``."""
        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def input(self, node: onnx.NodeProto, i: int) -> int | None:
        """Graph node id of input ``i`` (None when absent or empty); a constant becomes a
        ``weight`` node (created once per value).

        Raises:
            Unsupported: the value's element type has no dtype, or it is a constant with a
                zero-size dimension.
        """
        name = node.input[i] if 0 <= i < len(node.input) else ""
        return self._value(name, node) if name else None

    def const_value(self, node: onnx.NodeProto, i: int) -> np.ndarray | None:
        """The value of input ``i`` when it is a constant (initializer, ``Constant``
        node, folded shape sub-graph), else None."""
        name = node.input[i] if 0 <= i < len(node.input) else ""
        if not name or (name not in self.inits and name not in self.splats):
            return None
        if name not in self._const_cache:
            if name in self.splats:
                v = self.splats[name].array()  # a broadcast view; small ones materialised
                self._const_cache[name] = np.array(v) if v.nbytes <= 1 << 16 else v
            else:
                self._const_cache[name] = numpy_helper.to_array(self.inits[name])
        return self._const_cache[name]

    def type(self, node: onnx.NodeProto, i: int) -> TensorType:
        """Static shape and dtype of input ``i``.

        Raises:
            Unsupported: an element type without a dtype, or no static shape.
            ValueError: input ``i`` is absent.
        """
        name = node.input[i] if 0 <= i < len(node.input) else ""
        if not name:
            raise ValueError(f"input {i} of the node is absent")
        if name in self.env:
            return self.graph.type_of(self.env[name])
        elem, shape = self.types.get(name, (0, None))
        return self._tensor_type(name, elem, shape)

    def output_type(self, node: onnx.NodeProto, k: int) -> TensorType | None:
        """The type shape inference gives output ``k`` (None: no static shape).

        Raises:
            Unsupported: an element type without a dtype.
        """
        name = node.output[k] if 0 <= k < len(node.output) else ""
        elem, shape = self.types.get(name, (0, None)) if name else (0, None)
        if shape is None:
            return None
        return self._tensor_type(name, elem, shape)

    def used(self, node: onnx.NodeProto, k: int) -> bool:
        """Whether the model reads output ``k`` of ``node``."""
        return 0 <= k < len(node.output) and bool(self.consumers.get(node.output[k], 0))

    def add(self, op: str, params: Mapping[str, Any], inputs: Sequence[int]) -> int:
        """Append language node ``op`` and return its id.

        Raises:
            OnnxImportError: the Rust type checker rejects it (names the ONNX node).
        """
        try:
            return self.graph.add_node(op, dict(params), list(inputs))
        except GraphError as e:
            raise self._error(f"the type checker rejects `{op}` built by the importer: {e}") from e

    def weight(self, array: Any, stem: str = "c") -> int:
        """A new ``weight`` node holding ``array`` (dtype kept); equal arrays up to 64 KiB
        share one node.

        Raises:
            ValueError: an array of a dtype the language lacks, or with a zero-size
                dimension.
        """
        a = np.ascontiguousarray(array)
        dtype = dtype_of_array(a)
        if dtype is None:
            raise ValueError(f"imp.weight: dtype {a.dtype} is not a dtype of the language")
        if any(d < 1 for d in a.shape):
            raise ValueError(f"imp.weight: shape {a.shape} has a zero-size dimension")
        key = (a.dtype.str, a.shape, a.tobytes()) if a.nbytes <= 1 << 16 else None
        if key is not None and key in self._shared:
            return self._shared[key]
        leaf = self._leaf(stem, avoid_model=True)
        nid = self._add_leaf("weight", leaf, a.shape, dtype)
        self.arrays[leaf] = a
        if key is not None:
            self._shared[key] = nid
        return nid

    def set_output(self, node: onnx.NodeProto, k: int, nid: int) -> None:
        """Bind output ``k`` of ``node`` (the node being imported) to graph node ``nid``.

        Raises:
            ValueError: another node than the one being imported, a bad ``k`` or ``nid``.
        """
        if node is not self._node:
            raise ValueError("imp.set_output: not the node being imported")
        if not 0 <= k < len(node.output):
            raise ValueError(f"imp.set_output: node has {len(node.output)} outputs, not {k + 1}")
        if not isinstance(nid, int | np.integer) or not 0 <= int(nid) < len(self.graph.nodes):
            raise ValueError(f"imp.set_output: {nid!r} is not a node id")
        self._bound[k] = int(nid)

    # ------------------------------------------------------------------ internals
    def _error(self, msg: str, node: onnx.NodeProto | None = None) -> OnnxImportError:
        node = node if node is not None else self._node
        assert node is not None
        label = node.name or (node.output[0] if node.output else "?")
        return OnnxImportError(
            f"{self.where}: ONNX node '{label}' ({_op_key(node)}): {msg}",
            model=self.where,
            node_name=node.name,
            op_type=_op_key(node),
        )

    def _tensor_type(self, name: str, elem: int, shape: tuple[int, ...] | None) -> TensorType:
        dtype = dtype_of_elem(elem)
        if dtype is None:
            raise Unsupported(f"value '{name}' has element type {elem_name(elem)}")
        if shape is None:
            raise Unsupported(f"value '{name}' has no static shape")
        return TensorType(tuple(shape), dtype)

    def _leaf(self, onnx_name: str, avoid_model: bool = False) -> str:
        base = "".join("_" if c in _BAD_LEAF_CHARS else c for c in onnx_name) or "v"
        name, k = base, 1
        while name in self.taken or (avoid_model and name in self.model_names):
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def _add_leaf(self, op: str, leaf: str, shape: Sequence[int], dtype: str) -> int:
        add = self.graph.add_input if op == "input" else self.graph.add_weight
        return add(leaf, tuple(shape), dtype=dtype)

    def _value(self, name: str, node: onnx.NodeProto | None) -> int:
        if name in self.env:
            return self.env[name]
        if name in self.pending:
            p = self.pending[name]
            raise Unsupported(f"value '{name}' has element type {elem_name(p.elem)}")
        t = self.inits.get(name)
        sp = self.splats.get(name)
        if t is None and sp is None:
            where = f"node '{node.name}' ({_op_key(node)})" if node is not None else "the model"
            raise OnnxError(f"{self.where}: {where} reads unknown value '{name}'")
        elem = int(t.data_type) if t is not None else sp.elem  # type: ignore[union-attr]
        dtype = dtype_of_elem(elem)
        if dtype is None:
            raise Unsupported(f"constant '{name}' has element type {elem_name(elem)}")
        dims = tuple(int(d) for d in t.dims) if t is not None else sp.dims  # type: ignore[union-attr]
        if any(d < 1 for d in dims):
            raise Unsupported(f"constant '{name}' has a zero-size dimension {dims}")
        if not dims:
            nid = self._scalar(name, dtype)
            if nid is not None:
                self.env[name] = nid
                return nid
        leaf = self._leaf(name)
        nid = self._add_leaf("weight", leaf, dims, dtype)
        self.leaf_names[leaf] = name
        self.env[name] = nid
        return nid

    def _scalar(self, name: str, dtype: str) -> int | None:
        """A rank-0 constant as the node :func:`tensat_py.ops.tensor.rank0_constant` names
        (so that rules such as ``mul-one`` see its value), or None (then a weight)."""
        from tensat_py.ops.tensor import rank0_constant

        if name in self.splats:
            value = self.splats[name].value.reshape(())
        else:
            value = numpy_helper.to_array(self.inits[name])
        spec = rank0_constant(value, dtype)
        if spec is None:
            return None
        return self.graph.add_node(spec[0], spec[1], [])

    def _import(self, k: int, node: onnx.NodeProto) -> None:
        key = _op_key(node)
        fn = self.importers.get(key)
        if fn is None:
            self._opaque(k, node, f"no importer for ONNX operator `{key}`")
            return
        self._node, self._bound = node, {}
        try:
            fn(self, node)
        except Unsupported as e:
            self._opaque(k, node, str(e) or "unsupported")
            return
        except OnnxError:
            raise
        except Exception as e:
            name = getattr(fn, "__qualname__", repr(fn))
            raise self._error(
                f"importer {getattr(fn, '__module__', '?')}.{name} failed: {type(e).__name__}: {e}"
            ) from e
        finally:
            bound, self._node = self._bound, None
        missing = [
            o for j, o in enumerate(node.output) if o and self.used(node, j) and j not in bound
        ]
        if missing:
            self._opaque(k, node, f"the importer gives no value for used output(s) {missing}")
            return
        for j, nid in bound.items():
            o = node.output[j]
            if not o:
                continue
            t = self.graph.nodes[nid].type
            if not isinstance(t, TensorType):
                raise self._error(f"output '{o}' is bound to a split pair (node {nid})", node)
            elem, shape = self.types.get(o, (0, None))
            if shape is not None and tuple(t.shape) != shape:
                raise self._error(
                    f"output '{o}': the importer built shape {list(t.shape)}, ONNX shape "
                    f"inference gives {list(shape)}",
                    node,
                )
            if elem and dtype_of_elem(elem) != t.dtype:
                raise self._error(
                    f"output '{o}': the importer built dtype {t.dtype}, the model says "
                    f"{elem_name(elem)}",
                    node,
                )
            self.env[o] = nid
        ins = [
            None if (not i or i in self.inits or i in self.splats) else self.env.get(i)
            for i in node.input
        ]
        outs = [bound.get(j) if o else None for j, o in enumerate(node.output)]
        self._translated.append((node, ins, outs))

    def _opaque(self, k: int, node: onnx.NodeProto, reason: str) -> None:
        operands: list[tuple[str, int]] = []
        nodes: list[onnx.NodeProto] = []
        consts: dict[str, TensorProto] = {}
        seen: set[str] = set()
        for name in [*node.input, *outer_inputs(node)]:
            if not name or name in seen:
                continue
            seen.add(name)
            if name in self.env:
                operands.append((name, self.env[name]))
            elif name in self.pending:
                p = self.pending[name]
                for n in p.nodes:
                    if all(n is not m for m in nodes):
                        nodes.append(n)
                for oname, nid in p.operands:
                    if oname not in seen:
                        seen.add(oname)
                        operands.append((oname, nid))
                consts.update(p.constants)
            elif name in self.inits:
                consts[name] = self.inits[name]
            elif name in self.splats:  # its ConstantOfShape node goes into the payload
                sp = self.splats[name]
                nodes.append(sp.node)
                consts[sp.shape.name] = sp.shape
            else:
                raise OnnxError(
                    f"{self.where}: node '{node.name}' ({_op_key(node)}) reads unknown value "
                    f"'{name}'"
                )
        nodes.append(node)
        key = _op_key(node)
        group = f"n{k}:{node.name}"
        operand_elems = tuple(elem_of_dtype(self.graph.type_of(nid).dtype) for _, nid in operands)
        for o in node.output:
            if not o or not self.consumers.get(o, 0):
                continue
            elem, shape = self.types.get(o, (0, None))
            dtype = dtype_of_elem(elem)
            if dtype is None:
                self.pending[o] = _Pending(tuple(nodes), tuple(operands), dict(consts), elem)
                continue
            if shape is None:
                raise OnnxError(
                    f"{self.where}: shape inference gives no static shape for '{o}' (output "
                    f"of {key} node '{node.name}'); pass {spell('input_shapes')} to fix "
                    "symbolic input dimensions"
                )
            payload = OnnxOpaque(
                op_type=key,
                nodes=tuple(nodes),
                operands=tuple(n for n, _ in operands),
                output=o,
                elem_type=elem,
                operand_elems=operand_elems,
                constants=dict(consts),
                group=group,
                reason=reason,
                opset_imports=tuple(self.model.opset_import),
                ir_version=int(self.model.ir_version),
                functions=tuple(self.model.functions),
            )
            ids = [nid for _, nid in operands]
            nid = self.graph.add_opaque(key, shape, ids, payload, dtype=dtype)
            self.env[o] = nid

    # ------------------------------------------------------------------ driver
    def run(self) -> Graph:
        """Imports the whole model; returns the graph (``meta["onnx"]`` set).

        Raises:
            OnnxError: an input without a static shape or of an element type without a
                dtype, an output that is not computed, or a translator failure
                (:class:`~.common.OnnxImportError`).
        """
        gr = self.model.graph
        inputs: list[tuple[str, int]] = []
        for vi in gr.input:
            if vi.name in self.inits or vi.name in self.splats:
                continue
            elem, shape = self.types[vi.name]
            dtype = dtype_of_elem(elem)
            if dtype is None:
                raise OnnxError(
                    f"{self.where}: input '{vi.name}' has element type {elem_name(elem)}, "
                    "which the language has no dtype for"
                )
            if shape is None:
                raise OnnxError(
                    f"{self.where}: input '{vi.name}' has no static shape; pass "
                    f"{spell('input_shapes')}"
                )
            if any(d < 1 for d in shape):
                raise OnnxError(
                    f"{self.where}: input '{vi.name}' has a zero-size dimension {shape}"
                )
            leaf = self._leaf(vi.name)
            self.env[vi.name] = self._add_leaf("input", leaf, shape, dtype)
            self.leaf_names[leaf] = vi.name
            inputs.append((vi.name, elem))
        for k, node in enumerate(self.nodes):
            if not any(self.consumers.get(o, 0) for o in node.output if o):
                continue  # nothing reads it
            self._import(k, node)
        outs = []
        for o in gr.output:
            if o.name in self.pending:
                raise OnnxError(
                    f"{self.where}: graph output '{o.name}' has element type "
                    f"{elem_name(self.pending[o.name].elem)}, which the language has no dtype for"
                )
            if o.name in self.env or o.name in self.inits or o.name in self.splats:
                outs.append(self._value(o.name, None))
            else:
                raise OnnxError(
                    f"{self.where}: graph output '{o.name}' is neither computed nor a tensor"
                )
        if not outs:
            raise OnnxError(f"{self.where}: the model has no outputs")
        self.graph.outputs = outs
        table: KeyTable = {}
        keys = structural_keys(self.graph, table)
        # The same defaults (rules, cost model, min_gain) as through tensat_py.load.
        self.graph.meta["frontend"] = "onnx"
        self.graph.meta["onnx"] = OnnxSource(
            initializers=self.inits,
            inputs=inputs,
            outputs=[o.name for o in gr.output],
            leaf_names=self.leaf_names,
            opset_imports=tuple(self.model.opset_import),
            ir_version=int(self.model.ir_version),
            functions=tuple(self.model.functions),
            names=frozenset([*self.model_names, *self.inits, *self.arrays]),
            splats=self.splats,
            arrays=self.arrays,
            key_table=table,
            source_nodes=tuple(record(self.graph, self._translated, keys)),
            constant_nodes=self.constant_nodes,
            graph_name=gr.name,
            producer_name=self.model.producer_name,
            producer_version=self.model.producer_version,
            output_keys=tuple(keys[o] for o in outs),
        )
        return self.graph


# ---------------------------------------------------------------------------- load
def load(
    source: str | PathLike[str] | onnx.ModelProto,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    importers: Mapping[str, Callable[..., Any]] | None = None,
) -> Graph:
    """Reads an ONNX model into a :class:`~tensat_py.graph.Graph` (see the module
    docstring).

    Args:
        source: a path to a ``.onnx`` file or a ``ModelProto`` (not modified).
        input_shapes: static shapes for inputs whose dimensions are symbolic, by input
            name (other inputs keep theirs).
        importers: ONNX op type -> importer, replacing the registry
            (:func:`tensat_py.ops.onnx_importers`); for tests and experiments.

    Returns:
        The graph; ``graph.meta["onnx"]`` is an :class:`OnnxSource` and
        ``graph.meta["opaque"]`` holds an :class:`~.payload.OnnxOpaque` per opaque node.

    Raises:
        OnnxError: an unreadable model, a default-domain opset older than 13 that ONNX
            cannot convert, an input without a static shape or of an element type the
            language lacks, a value without a static shape that an opaque node needs.
        OnnxImportError: an importer failed on a node (a bug; names the node and model).
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
        if Path(source).stat().st_size == 0:
            raise OnnxError(f"{where}: the file is empty, not an ONNX model")
        try:
            model = onnx.load(str(source))
        except Exception as e:
            raise OnnxError(f"{where}: not a readable ONNX model ({e})") from None
    if model.ir_version == 0 or not model.HasField("graph"):
        raise OnnxError(
            f"{where}: not an ONNX model (no IR version or no graph: "
            "a protobuf message of another kind, or not a model file)"
        )
    original = model
    opset = _default_opset_of(model.opset_import)
    if opset < MIN_OPSET:
        try:
            from onnx import version_converter

            model = version_converter.convert_version(model, MIN_OPSET)
        except Exception as e:
            raise OnnxError(
                f"{where}: opset {opset} is older than {MIN_OPSET} and could not be converted ({e})"
            ) from None
    fixed: dict[str, str] = {}
    if input_shapes:
        if model is original:
            model = onnx.ModelProto()
            model.CopyFrom(original)
        names = {vi.name for vi in model.graph.input}
        for name, dims in input_shapes.items():
            if name not in names:
                raise OnnxError(f"{where}: input_shapes names unknown input '{name}'")
            if not all(isinstance(d, int | np.integer) and d >= 1 for d in dims):
                raise OnnxError(f"{where}: input_shapes['{name}'] = {list(dims)}: positive ints")
        for vi in model.graph.input:
            if vi.name in input_shapes:
                tt = vi.type.tensor_type
                fixed.update(_fixed_dims(vi, input_shapes[vi.name]))
                tt.shape.Clear()
                for d in input_shapes[vi.name]:
                    tt.shape.dim.add().dim_value = int(d)
    model, splats = hold_splats(model, in_place=model is not original)
    light, held = without_idle_weights(model)
    light = fold_shapes(light, where)
    try:
        light = onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except Exception as e:
        raise OnnxError(f"{where}: ONNX shape inference failed: {e}") from None
    graph = Importer(light, where, importers, splats=splats, held=held).run()
    graph.meta["onnx"].original = original
    if fixed:
        graph.meta[FIXED_DIMS] = fixed
    return graph


def _fixed_dims(vi: onnx.ValueInfoProto, dims: Sequence[int]) -> dict[str, str]:
    """``{"x[0]": "N=8"}``: the dimensions of input ``vi`` that were symbolic (or unknown)
    in the model and that ``dims`` (its ``input_shapes`` entry) fixes."""
    out = {}
    given = vi.type.tensor_type.shape.dim if vi.type.tensor_type.HasField("shape") else []
    for k, d in enumerate(dims):
        old = given[k] if k < len(given) else None
        if old is None or not old.HasField("dim_value"):
            name = old.dim_param if old is not None and old.dim_param else "?"
            out[f"{vi.name}[{k}]"] = f"{name}={int(d)}"
    return out


def hold_splats(
    model: onnx.ModelProto, *, in_place: bool = False
) -> tuple[onnx.ModelProto, dict[str, SplatConstant]]:
    """Takes the ``ConstantOfShape`` weights out of ``model`` before shape folding, so
    that they stay compact: each default-domain ``ConstantOfShape`` node of
    the main graph whose shape is a constant (an initializer or a ``Constant`` node's
    value) and whose value has more than :data:`~.common.SPLAT_BYTES` bytes and 16
    elements becomes a graph input of its output's name, type and static shape, and a
    :class:`~.common.SplatConstant` that :class:`Importer` reads as a constant (a
    ``weight``).

    Without this, :func:`fold_shapes` (onnxslim's constant folding) would write each one
    out as a full initializer (the classic model zoo's weights: up to 570 times the file)
    or, past ``_SLIM_SIZE_THRESHOLD``, leave it an opaque node the optimiser cannot see
    is a weight. Smaller ones (shapes, masks) are left to folding: shape inference reads
    their values. A ``ConstantOfShape`` that is a graph output, or whose shape has a zero
    or negative dimension, stays.

    Args:
        model: a model; not modified unless ``in_place``.
        in_place: take the nodes out of ``model`` itself rather than out of a copy.

    Returns:
        The model without the held nodes (``model`` itself when none is held or
        ``in_place``) and the held constants by output name.

    Raises:
        Nothing for a node it cannot read: such a node stays in the model.
    """
    gr = model.graph
    consts: dict[str, TensorProto] = {t.name: t for t in gr.initializer}
    from_nodes: set[str] = set()
    for n in gr.node:
        if n.op_type == "Constant" and n.domain in _DEFAULT_DOMAINS and len(n.output) == 1:
            v = _constant_value(n)
            if v is not None:
                consts[n.output[0]] = numpy_helper.from_array(v, n.output[0])
                from_nodes.add(n.output[0])
    outputs = {o.name for o in gr.output}
    held: dict[str, SplatConstant] = {}
    names: set[str] | None = None
    for n in gr.node:
        sp = _held_splat(n, consts, outputs)
        if sp is None:
            continue
        if sp.shape.name in from_nodes:
            # A Constant node's value: the shape gets a name of its own (the exporter may
            # write the Constant node too, for another reader).
            if names is None:
                names = set()
                _all_names(gr, names)
            name, k = f"{sp.name}__shape", 1
            while name in names:
                name, k = f"{sp.name}__shape_{k}", k + 1
            names.add(name)
            sp.shape.name = name
            sp.node.input[0] = name
        held[sp.name] = sp
    if not held:
        return model, held
    if not in_place:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        model, gr = copy, copy.graph
    keep = [n for n in gr.node if not (len(n.output) == 1 and n.output[0] in held)]
    del gr.node[:]
    gr.node.extend(keep)
    stale = [vi for vi in gr.value_info if vi.name in held]
    for vi in stale:
        gr.value_info.remove(vi)
    for sp in held.values():
        gr.input.append(helper.make_tensor_value_info(sp.name, sp.elem, list(sp.dims)))
    return model, held


def _held_splat(
    n: onnx.NodeProto, consts: Mapping[str, TensorProto], outputs: set[str]
) -> SplatConstant | None:
    """The :class:`~.common.SplatConstant` that :func:`hold_splats` makes of node ``n``,
    or None when it leaves ``n`` in the model."""
    if n.op_type != "ConstantOfShape" or n.domain not in _DEFAULT_DOMAINS:
        return None
    if len(n.input) != 1 or len(n.output) != 1 or n.output[0] in outputs:
        return None
    shape_t = consts.get(n.input[0])
    if shape_t is None or not n.output[0]:
        return None
    try:
        dims = tuple(int(d) for d in numpy_helper.to_array(shape_t).reshape(-1))
        value = np.zeros(1, np.float32)
        for a in n.attribute:
            if a.name == "value":
                value = numpy_helper.to_array(a.t).reshape(-1)
    except Exception:  # a malformed tensor: the checker's business, not ours
        return None
    if value.size != 1 or dtype_of_array(value) is None or any(d < 1 for d in dims):
        return None
    size = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if size <= _SPLAT_MIN_ELEMENTS or size * value.dtype.itemsize <= SPLAT_BYTES:
        return None
    node = onnx.NodeProto()
    node.CopyFrom(n)
    shape = TensorProto()
    shape.CopyFrom(shape_t)
    shape.name = n.input[0]
    return SplatConstant(node=node, shape=shape, value=value.copy())


#: Initializers at least this large (bytes) that no constant sub-graph reads are held out
#: of folding and shape inference (:func:`without_idle_weights`).
IDLE_WEIGHT_BYTES = 1 << 12
#: Operators whose output is never folded (random values).
_NOT_FOLDED = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial"}
)


def without_idle_weights(
    model: onnx.ModelProto,
) -> tuple[onnx.ModelProto, list[onnx.TensorProto]]:
    """``model`` without its large initializers that no constant sub-graph reads, and
    those initializers (which :class:`Importer` takes beside the light model).

    Folding (:func:`fold_shapes`, onnxslim) and ONNX shape inference serialise the whole
    model several times and need only the *types* of weights that nothing folds: on a
    24-layer GPT-2-small stack (680 MB of weights) they took 10 of 13 s of loading. A
    held-out weight becomes a graph input of its type for those passes. A weight is kept
    when a node all of whose inputs are constant (initializers, ``Constant`` outputs,
    ``Shape``/``Size`` of anything, or outputs of such nodes) reads it, or when it is
    smaller than :data:`IDLE_WEIGHT_BYTES`.

    Returns:
        ``(light, held)`` as :func:`~.common.hold_out` gives them.
    """
    g = model.graph
    const = {t.name for t in g.initializer}
    for n in g.node:
        ins = [i for i in n.input if i]
        shape_op = n.op_type in ("Shape", "Size")
        if (
            n.op_type == "Constant"
            or shape_op
            or (n.op_type not in _NOT_FOLDED and ins and all(i in const for i in ins))
        ):
            const.update(o for o in n.output if o)
    read = set()
    for n in g.node:
        ins = [i for i in n.input if i]
        if ins and n.op_type not in _NOT_FOLDED and all(i in const for i in ins):
            read.update(ins)
    names = {vi.name for vi in g.input}
    held = {
        t.name
        for t in g.initializer
        if t.name not in read and t.name not in names and tensor_bytes(t) >= IDLE_WEIGHT_BYTES
    }
    return hold_out(model, held)


def fold_shapes(model: onnx.ModelProto, where: str = "model") -> onnx.ModelProto:
    """Folds the constant sub-graphs of ``model`` (shape arithmetic on static input shapes:
    ``Shape``, ``Gather``, ``Concat``, ``Range``, ``ConstantOfShape``... and weight-only
    values up to 16 MiB) into initializers and drops dead nodes, with onnxslim
    (``onnxslim.slim`` with constant folding and dead-node elimination, no fusion).
    :func:`load` takes the ``ConstantOfShape`` weights out first (:func:`hold_splats`):
    folded, they would be full tensors.

    Args:
        model: a model whose graph inputs carry the static shapes to fold with (not
            modified); stale ``value_info`` is dropped and re-inferred.
        where: the model file, for messages.

    Returns:
        The folded model, with the input model's IR version; the input model itself when
        onnxslim cannot process it (a warning says why; values left unfolded make the
        operators reading them opaque or fail shape inference later).
    """
    import warnings

    work = onnx.ModelProto()
    work.CopyFrom(model)
    del work.graph.value_info[:]
    ir = int(model.ir_version)
    work.ir_version = runnable_ir_version(work)
    try:
        import onnxslim

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = onnxslim.slim(
                work, skip_optimizations=_SLIM_SKIP, size_threshold=_SLIM_SIZE_THRESHOLD
            )
    except Exception as e:  # onnxslim raises many types (onnxruntime, graph surgeon)
        warnings.warn(
            f"{where}: onnxslim could not fold shape sub-graphs ({type(e).__name__}: {e})",
            stacklevel=2,
        )
        return model
    if not isinstance(out, onnx.ModelProto):
        warnings.warn(f"{where}: onnxslim returned no model; shapes not folded", stacklevel=2)
        return model
    out.ir_version = ir
    return out
