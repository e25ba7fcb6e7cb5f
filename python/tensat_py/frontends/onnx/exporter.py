"""ONNX out: :func:`to_model` (and :func:`save`) write a :class:`~tensat_py.graph.Graph`
as an ONNX model.

Region-preserving: where the graph came from an ONNX model (``meta["onnx"]``), every
graph node that a node of the source model computes (:class:`~.regions.Matcher`: the
node's translation, with its inputs as holes, matches there) is written as that source
``NodeProto``, its inputs renamed to the values they bind, its constants the source's
initializers (or ``Constant`` nodes) of the same names; only what the optimiser changed
goes through the operators' ``to_onnx``. An unchanged graph is therefore written as the
source model's nodes and initializers (equal initializers once), with the source's graph
name and producer, never larger; and one marked ``meta[WRITE_SOURCE]`` (an input
:func:`tensat_py.optimize` kept because onnxruntime ran its source model faster than this
export) as the source model itself (:func:`source_model`). What ``to_onnx`` wrote then
goes through the export-time fusions of :mod:`.peephole` (``Pad`` + ``Conv``, flattened
``MatMul``), which leave the source's nodes alone.

The model has the original inputs and outputs (names, element types, the static shapes
the graph was loaded with), the source model's opset imports and local functions, its IR
version set to the lowest its opsets need (:func:`~.common.runnable_ir_version`): lowered,
so that onnxruntime reads a model saved under a newer IR version than it knows; raised
where the source model's is older than its opsets allow. A model of IR version < 4 (the
classic model zoo: IR 3, opset 9) is converted to opset 13 on import and written under
IR 7, the IR version of opset 13: from IR 4 on initializers need not be graph inputs (ONNX
IR spec, https://onnx.ai/onnx/repo-docs/IR.html: before IR 4 "initializers ... must also
be graph inputs"), and that is how the importer read them: constants, not inputs. Listing
them as inputs under IR 3 instead would make them inputs with default values, which
onnxruntime does not constant-fold (no Conv + BatchNormalization fusion). A model that
stays below IR 4 (the source model of an opset 7 or 8 input, written as it was) lists
every initializer as an input. The model holds every
initializer the program still reads, the opaque nodes as they were (their
``NodeProto``\\ s, sub-graphs included), and for each language operator the nodes its
:attr:`tensat_py.ops.OpDef.to_onnx` emits through the :class:`Writer` (``w`` below); there is
no per-operator code here. Weight-only sub-graphs of the program (for example the
concatenated weights of merged matmuls) are computed at export with the operators'
NumPy semantics (:attr:`~tensat_py.ops.OpDef.evaluate`) and stored as initializers named
``tensat_const_<k>`` (or the graph output's name); weights keep their dtypes. The model
passes ``onnx.checker.check_model(model, full_check=True)``.

Compact constants stay compact: a weight that was ``ConstantOfShape(shape, value)`` in the
source model (:attr:`~.importer.OnnxSource.splats`) is written as that node and its shape,
and any other constant of more than :data:`~.common.SPLAT_BYTES` bytes whose elements are
all equal (a folded constant, a weight given in ``weights=``, an initializer the source
held in full, ``w.const``) as a new ``ConstantOfShape``: never as a full tensor, so the
written model is no larger than the source model for them. A folded constant that is
constant along some axes (a convolution weight folded from a constant one and a
per-channel scale) is written as ``Expand`` of the smaller tensor
(:meth:`Writer.add_initializer`). onnxruntime folds both forms back into initializers when
it loads the model.

Names: ``w.alias`` renames instead of emitting ``Identity``; a graph output takes its
original name by renaming the value that computes it, so an ``Identity`` remains only
where the output's value is a graph input or is also another output.

The writer API (the contract for ``to_onnx(w, ctx, ins, out)`` in ``ops/*.py``):

* ``w.emit(op_type, inputs, outputs, **attrs)``: append a ``NodeProto``
  (``onnx.helper.make_node``; ``outputs`` a name or a list; ``domain=``/``name=`` pass
  through).
* ``w.fresh(stem) -> str``: a new unique value name.
* ``w.const(array, stem="c") -> str``: an initializer holding ``array`` (any dtype); equal
  small arrays share one initializer.
* ``w.alias(out, name)``: value ``out`` is the existing value ``name`` (no node).
* ``w.set_pair(out, (name0, name1))`` / ``w.pair(name)``: the two parts of a ``split``.
* ``w.opset: int``: the default-domain opset being written (>= 13).
* ``w.elem_type(dtype) -> int``: the ONNX element type of a dtype name.

Additions beyond the contract (used by opaque payloads, :meth:`~.payload.OnnxOpaque.to_onnx`,
which the ``opaque`` operator's ``to_onnx`` delegates to):

* ``w.add_initializer(name, array_or_tensorproto)``: an initializer of a given name (the
  source model's initializers that opaque nodes read keep their names).
* ``w.append(node_proto) -> bool``: append a ready ``NodeProto``; a node whose outputs are
  all produced already is skipped (a producer taken into several payloads).
* ``w.once(key) -> bool``: True the first time ``key`` is seen (a multi-output ONNX node's
  payload is written once).
* ``w.resolve(name) -> str``: follow aliases.

The exporter itself writes ``input`` (graph inputs) and ``weight`` (initializers) nodes
and folded constants; every other operator goes through the registry, and one whose
``to_onnx`` is None raises :class:`~.common.OnnxError`. A failure inside ``to_onnx`` is an
:class:`~.common.OnnxError` naming the graph node and operator.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensat_py.frontends.onnx import peephole
from tensat_py.frontends.onnx.common import (
    DEFAULT_IR_VERSION,
    DEFAULT_OPSET,
    OnnxError,
    broadcast_base,
    constant_of_shape_allows,
    elem_of_dtype,
    hold_out,
    runnable_ir_version,
    splat_value,
    tensor_bytes,
    write_model,
)
from tensat_py.frontends.onnx.importer import OnnxSource, _default_opset_of
from tensat_py.frontends.onnx.payload import OnnxOpaque, rename_values
from tensat_py.frontends.onnx.regions import Match, Matcher, lookup_keys
from tensat_py.graph import OPAQUE, Graph, TensorType

__all__ = ["WRITE_SOURCE", "Writer", "source_model", "to_model", "save"]

#: ``Graph.meta`` key: write the source model itself for this (unchanged) program
#: (:func:`source_model`).
WRITE_SOURCE = "onnx_write_source"

#: Constants up to this many bytes are shared between equal ``w.const`` calls.
_SHARE_BYTES = 1 << 12


def _content_key(t: TensorProto) -> tuple:
    """A key equal for two initializers that may hold the same tensor (element type, dims,
    data size, and a hash of a sample of the data: its first and last 4 KiB and 64 bytes
    at each of 64 strided places); :func:`_same_content` decides. Hashing every byte of
    every weight took a second per 680 MB written."""
    if t.HasField("raw_data"):
        raw = t.raw_data
        n = len(raw)
        step = max(1, n // 64)
        sample = raw[:4096] + raw[-4096:] + b"".join(raw[k : k + 64] for k in range(0, n, step))
        return (
            int(t.data_type),
            tuple(t.dims),
            n,
            hashlib.blake2b(sample, digest_size=16).digest(),
        )
    if t.external_data:  # external data: never shared
        return (int(t.data_type), tuple(t.dims), t.name)
    return (int(t.data_type), tuple(t.dims), _bare(t))


def _bare(t: TensorProto) -> bytes:
    """``t`` serialised without its name and doc string (the tensor's content)."""
    bare = TensorProto()
    bare.CopyFrom(t)
    bare.name = ""
    bare.ClearField("doc_string")
    return bare.SerializeToString(deterministic=True)


def _same_content(a: TensorProto, b: TensorProto) -> bool:
    """Whether initializers ``a`` and ``b`` hold the same tensor (their names aside)."""
    if a.HasField("raw_data") and b.HasField("raw_data"):
        return (a.data_type, list(a.dims)) == (
            b.data_type,
            list(b.dims),
        ) and a.raw_data == b.raw_data
    return _bare(a) == _bare(b)


def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_of_dtype(dtype)))


class Writer:
    """Collects the nodes and initializers of the model being written; the ``w`` of the
    writer API (see the module docstring).

    Args:
        opset: default-domain opset of the model.
        reserved: names the writer must not hand out (the source model's, the outputs').
    """

    def __init__(self, opset: int, reserved: set[str] | frozenset[str] = frozenset()) -> None:
        self.opset = int(opset)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, TensorProto] = {}
        self.reserved: set[str] = set(reserved)
        self.produced: set[str] = set()
        self.aliases: dict[str, str] = {}
        self._pairs: dict[str, tuple[str, str]] = {}
        self._shared: dict[tuple, str] = {}
        self._once: set[Any] = set()
        self._counter = 0
        #: initializers written as ``ConstantOfShape`` (:meth:`add_initializer`)
        self.compact: set[str] = set()

    # ------------------------------------------------------------------ the API
    def emit(
        self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | str, **attrs: Any
    ) -> onnx.NodeProto:
        """Appends ``helper.make_node(op_type, inputs, outputs, **attrs)``; returns it.

        Raises:
            OnnxError: an output name already produced or aliased.
        """
        outs = [outputs] if isinstance(outputs, str) else list(outputs)
        for o in outs:
            if o and (o in self.produced or o in self.aliases or o in self.initializers):
                raise OnnxError(f"{op_type}: value '{o}' is produced twice")
        name = attrs.pop("name", None) or next((o for o in outs if o), None)
        node = helper.make_node(op_type, list(inputs), outs, name=name, **attrs)
        self.nodes.append(node)
        self.produced.update(o for o in outs if o)
        return node

    def fresh(self, stem: str = "v") -> str:
        """A new unique value name ``tensat_<stem>_<k>``."""
        stem = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "v"
        while True:
            name = f"tensat_{stem}_{self._counter}"
            self._counter += 1
            if name not in self.reserved:
                self.reserved.add(name)
                return name

    def const(self, array: Any, stem: str = "c") -> str:
        """An initializer holding ``array`` (dtype kept); returns its name."""
        a = np.ascontiguousarray(array)
        key = (a.dtype.str, a.shape, a.tobytes()) if a.nbytes <= _SHARE_BYTES else None
        if key is not None and key in self._shared:
            return self._shared[key]
        name = self.fresh(stem)
        self.add_initializer(name, a)
        if key is not None:
            self._shared[key] = name
        return name

    def alias(self, out: str, name: str) -> None:
        """Value ``out`` is the existing value ``name``: uses of ``out`` read ``name``.

        Raises:
            OnnxError: ``out`` is already produced or aliased.
        """
        if out in self.produced or out in self.aliases or out in self.initializers:
            raise OnnxError(f"alias: value '{out}' is already defined")
        if self.resolve(name) == out:
            raise OnnxError(f"alias: '{out}' -> '{name}' is a cycle")
        self.aliases[out] = name

    def set_pair(self, out: str, names: tuple[str, str]) -> None:
        """Registers the two part values of the pair value ``out`` (a ``split``)."""
        a, b = names
        self._pairs[out] = (str(a), str(b))

    def pair(self, name: str) -> tuple[str, str]:
        """The two part values of pair value ``name``.

        Raises:
            OnnxError: ``name`` is not a registered pair.
        """
        try:
            return self._pairs[self.resolve(name)]
        except KeyError:
            raise OnnxError(f"value '{name}' is not a split pair") from None

    def elem_type(self, dtype: str) -> int:
        """The ONNX element type of dtype name ``dtype`` (``"float16"`` -> ``FLOAT16``)."""
        return elem_of_dtype(dtype)

    # ------------------------------------------------------------------ additions
    def add_initializer(self, name: str, value: np.ndarray | TensorProto) -> None:
        """Adds initializer ``name`` holding ``value`` (an array or a ``TensorProto``, copied
        and renamed); a second one of the same name is ignored (opaque payloads add the
        source model's initializers under their own names).

        Compact forms, for an array of more than :data:`~.common.SPLAT_BYTES` bytes (the
        value is the same bit for bit, the file smaller):

        * all elements equal (:func:`~.common.splat_value`): ``ConstantOfShape(shape,
          value=[v])`` producing ``name`` (ONNX operator spec,
          https://onnx.ai/onnx/operators/onnx__ConstantOfShape.html; where the opset's
          ``ConstantOfShape`` has the element type), the shape an int64 initializer;
        * constant along some axes (:func:`~.common.broadcast_base` at most half its
          size): ``Expand(base, shape)`` (https://onnx.ai/onnx/operators/onnx__Expand.html),
          the base an initializer (a folded convolution weight: one value per channel).

        A ``TensorProto`` is written as given.
        """
        if name in self.initializers or name in self.compact:
            return
        if isinstance(value, TensorProto):
            if value.name == name:
                t = value  # by reference: finish() copies it once, into the model
            else:
                t = TensorProto()
                t.CopyFrom(value)
                t.name = name
        else:
            a = np.asarray(value)
            v = splat_value(a)
            elem = helper.np_dtype_to_tensor_dtype(a.dtype) if v is not None else 0
            if v is not None and constant_of_shape_allows(elem, self.opset):
                self.reserved.add(name)
                self.compact.add(name)
                shape = self.const(np.asarray(a.shape, dtype=np.int64), "shape")
                self.emit("ConstantOfShape", [shape], [name], value=numpy_helper.from_array(v))
                return
            # a splat ConstantOfShape cannot make (bfloat16 before opset 20): Expand it
            base = v.reshape((1,) * a.ndim) if v is not None else broadcast_base(a)
            if (
                base is not None
                and 2 * base.nbytes <= a.nbytes
                and (self.opset >= 13 or (self.opset >= 8 and a.dtype.name != "bfloat16"))
            ):
                self.reserved.add(name)
                self.compact.add(name)
                small = self.const(base, "base")
                shape = self.const(np.asarray(a.shape, dtype=np.int64), "shape")
                self.emit("Expand", [small, shape], [name])
                return
            t = numpy_helper.from_array(np.ascontiguousarray(a), name)
        self.reserved.add(name)
        self.initializers[name] = t

    def append(self, node: onnx.NodeProto) -> bool:
        """Appends a ready ``NodeProto`` (an opaque payload's). A node whose outputs are all
        produced already (the same producer taken into several payloads) is skipped:
        returns False.

        Raises:
            OnnxError: some but not all of its outputs are produced already.
        """
        outs = [o for o in node.output if o]
        done = [o in self.produced for o in outs]
        if outs and all(done):
            return False
        if any(done) or any(o in self.aliases or o in self.initializers for o in outs):
            raise OnnxError(f"{node.op_type} node '{node.name}': an output is produced twice")
        self.nodes.append(node)
        self.produced.update(outs)
        return True

    def once(self, key: Any) -> bool:
        """True the first time ``key`` is seen: a payload with several graph nodes (one per
        used output of a multi-output ONNX node) writes its nodes once."""
        if key in self._once:
            return False
        self._once.add(key)
        return True

    # ------------------------------------------------------------------ helpers
    def resolve(self, name: str) -> str:
        """Follows aliases to the value that is actually produced."""
        seen = 0
        while name in self.aliases:
            name = self.aliases[name]
            seen += 1
            if seen > len(self.aliases):
                raise OnnxError(f"alias cycle through '{name}'")
        return name


# ---------------------------------------------------------------------------- exporter
class _Exporter:
    def __init__(
        self,
        graph: Graph,
        weights: Mapping[str, np.ndarray],
        src: OnnxSource | None,
        opset: int,
    ) -> None:
        self.g = graph
        self.weights = weights
        self.src = src
        reserved = set(src.names) if src else set()
        self.w = Writer(opset, reserved)
        self.names: dict[int, str] = {}
        #: ``id()`` of the nodes written as the source model had them.
        self.original: set[int] = set()
        self.written: set[int] = set()  # source nodes written once already
        self.canonical: dict[str, str] = {}  # source constant -> the name it is read by
        self.by_content: dict[tuple, str] = {}
        self.leaf_ids = {n.name: i for i, n in enumerate(graph.nodes) if n.op == "weight"}
        self.leaf_of = {self.onnx_leaf(n): n for n in self.leaf_ids}

    def onnx_leaf(self, name: str) -> str:
        return self.src.leaf_names.get(name, name) if self.src else name

    def ctx(self, nid: int):
        from tensat_py.ops import OpContext

        node = self.g.nodes[nid]
        return OpContext(
            op=node.op,
            params=node.params,
            inputs=tuple(self.g.nodes[i].type for i in node.inputs),
            output=node.type,
            constant=node.constant,
            graph=self.g,
            name=node.name,
        )

    def weight_array(self, nid: int) -> np.ndarray:
        node = self.g.nodes[nid]
        dt = _np_dtype(node.type.dtype)  # type: ignore[union-attr]
        if node.name in self.weights:
            a = np.asarray(self.weights[node.name])
        elif self.src is not None and (v := self.src.weight_value(node.name)) is not None:
            a = v
        else:
            raise OnnxError(f"no value for weight '{node.name}' {node.shape}; pass weights=")
        if tuple(a.shape) != node.shape:
            raise OnnxError(f"weight '{node.name}': value of shape {a.shape}, node {node.shape}")
        if a.size and all(st == 0 for st in a.strides):  # a splat: kept one element big
            return np.broadcast_to(a.reshape(-1)[:1].astype(dt).reshape(()), a.shape)
        return np.ascontiguousarray(a.astype(dt, copy=False))

    def constants(self, needed: set[int]) -> dict[int, np.ndarray]:
        """Values of the constant non-weight nodes ``needed`` (read by a node that is
        written, or an output), computed with the operators' NumPy semantics."""
        from tensat_py import ops

        g = self.g
        if not needed:
            return {}
        closure: set[int] = set()
        stack = list(needed)
        while stack:
            i = stack.pop()
            if i not in closure:
                closure.add(i)
                stack.extend(g.nodes[i].inputs)
        vals: dict[int, Any] = {}
        for nid in sorted(closure):
            node = g.nodes[nid]
            if node.op == "weight":
                vals[nid] = self.weight_array(nid)
                continue
            try:
                vals[nid] = ops.get(node.op).evaluate(self.ctx(nid), [vals[i] for i in node.inputs])
            except Exception as e:
                raise OnnxError(
                    f"node '{node.name}' ({node.op}): folding the constant failed: "
                    f"{type(e).__name__}: {e}"
                ) from e
        out = {}
        for i in needed:
            t = g.nodes[i].type
            if not isinstance(t, TensorType):  # a constant split pair read by its parts
                continue
            out[i] = np.ascontiguousarray(np.asarray(vals[i]).astype(_np_dtype(t.dtype)))
        return out

    def plan(self) -> tuple[list[int], dict[int, Match], set[int]]:
        """What to write, reached from the outputs: graph nodes (in order), the nodes a
        source ONNX node computes (written as that node, its inputs reached instead of
        the translation's), and the constant nodes folded into initializers."""
        g = self.g
        matcher = None
        if self.src is not None and self.src.source_nodes:
            matcher = Matcher(g, self.src.key_table, self.src.source_nodes)
        mark = [False] * len(g.nodes)
        macros: dict[int, Match] = {}
        folded: set[int] = set()
        stack = list(g.outputs)
        while stack:
            i = stack.pop()
            if mark[i]:
                continue
            mark[i] = True
            node = g.nodes[i]
            if node.op in ("input", "weight"):
                continue
            m = matcher.match(i) if matcher is not None and node.op != OPAQUE else None
            if m is not None:
                macros[i] = m
                stack.extend(n for _, n in m.bindings)
            elif node.constant:
                folded.add(i)
            else:
                stack.extend(node.inputs)
        return [i for i, m in enumerate(mark) if m], macros, folded

    def elem(self, nid: int) -> int:
        node = self.g.nodes[nid]
        if node.op == OPAQUE and isinstance(p := self.g.opaque_payload(nid), OnnxOpaque):
            return int(p.elem_type)
        if node.op == "input" and self.src is not None:
            src_elem = dict(self.src.inputs).get(self.onnx_leaf(node.name))
            if src_elem is not None:
                return int(src_elem)
        return elem_of_dtype(node.type.dtype)  # type: ignore[union-attr]

    def run(self, opsets, ir_version: int, functions) -> onnx.ModelProto:
        g, w = self.g, self.w
        order, macros, folded = self.plan()
        consts = self.constants(folded)
        out_names = list(self.src.outputs) if self.src else []
        if len(out_names) != len(g.outputs):
            out_names = [f"output_{k}" for k in range(len(g.outputs))]
        w.reserved.update(out_names)
        output_of: dict[str, int] = {}
        for k, o in enumerate(g.outputs):
            output_of.setdefault(out_names[k], o)
        # Leaves and opaque values keep their ONNX names; other outputs take the output's.
        for nid in order:
            node = g.nodes[nid]
            if node.op in ("input", "weight"):
                self.names[nid] = self.onnx_leaf(node.name)
            elif node.op == OPAQUE and (p := g.opaque_payload(nid)) is not None:
                # An opaque value keeps the name its payload gives it (ONNX: the original).
                want = getattr(p, "output", None)
                if isinstance(want, str) and output_of.get(want, nid) == nid:
                    self.names[nid] = want
        # Source ONNX nodes written as they were: one instance per (node, inputs); the
        # first keeps the node's value names (unless one is an output computed elsewhere).
        # Several graph nodes can stand for one output of one instance (a model that
        # computed the same value twice): they all read the one ONNX value.
        instances: dict[tuple, dict[int, list[int]]] = {}
        at: dict[int, tuple] = {}  # written where its first output comes in the order
        for nid in order:
            if nid in macros:
                m = macros[nid]
                inst = (m.source, m.bindings)
                if inst not in instances:
                    at[nid] = inst
                instances.setdefault(inst, {}).setdefault(m.output, []).append(nid)
        self.instance_outputs: dict[tuple, list[str]] = {}
        first: set[int] = set()
        for inst, outs in instances.items():
            proto = self.src.source_nodes[inst[0]].proto  # type: ignore[union-attr]
            names = []
            for j, o in enumerate(proto.output):
                nids = outs.get(j, [])
                fresh = inst[0] in first or (o in output_of and output_of[o] not in nids)
                names.append((w.fresh(o) if fresh else o) if o else "")
                for nid in nids:
                    self.names[nid] = names[-1]
            first.add(inst[0])
            self.instance_outputs[inst] = names
        for k, o in enumerate(g.outputs):
            if o not in self.names:
                self.names[o] = out_names[k]
        for nid in order:
            node = g.nodes[nid]
            if nid in macros:
                if nid in at:
                    self.source_node(at[nid])
                continue
            if nid not in self.names:
                self.names[nid] = w.fresh("const" if nid in consts else node.op)
            name = self.names[nid]
            if nid in consts:
                w.add_initializer(name, consts[nid])
            elif node.op == "input":
                pass
            elif node.op == "weight":
                if (
                    node.name not in self.weights
                    and self.src is not None
                    and (name in self.src.initializers or name in self.src.splats)
                ):
                    self.names[nid] = self.source_constant(name)
                else:
                    w.add_initializer(name, self.weight_array(nid))
            else:
                self.operator(nid, name)
        return self.finish(order, out_names, opsets, ir_version, functions)

    def source_constant(self, name: str) -> str:
        """Writes the source model's constant ``name`` once and returns the name to read it
        by: its ``Constant`` node where it had one, its ``ConstantOfShape`` node (and
        shape) for a splat constant (:attr:`~.importer.OnnxSource.splats`), else its
        initializer (a weight override in ``weights=`` wins); an initializer equal to one
        written already (the shape folding before import copies a shared weight once per
        ``Identity``) is read from that one instead."""
        w, src = self.w, self.src
        assert src is not None
        if name in self.canonical:
            return self.canonical[name]
        leaf = self.leaf_of.get(name)
        if leaf is not None and leaf in self.weights:
            w.add_initializer(name, self.weight_array(self.leaf_ids[leaf]))
        elif name in src.constant_nodes:
            node = onnx.NodeProto()
            node.CopyFrom(src.constant_nodes[name])
            w.append(node)
            self.original.add(id(node))
        elif name in src.splats:  # its ConstantOfShape node and shape, never a full tensor
            sp = src.splats[name]
            w.add_initializer(sp.shape.name, sp.shape)
            node = onnx.NodeProto()
            node.CopyFrom(sp.node)
            if w.append(node):
                self.original.add(id(node))
        else:
            t = src.initializers[name]
            digest = _content_key(t)
            same = self.by_content.get(digest)
            if same is not None and not _same_content(t, src.initializers[same]):
                same = None  # the sample matched, the data does not
            if same is not None:
                self.canonical[name] = same
                return same
            self.by_content[digest] = name
            w.add_initializer(name, t)
        self.canonical[name] = name
        return name

    def source_node(self, inst: tuple) -> None:
        """Writes source ONNX node ``inst[0]`` as it was, its inputs renamed to the values
        ``inst[1]`` binds and its outputs to the instance's names."""
        w, src = self.w, self.src
        assert src is not None
        proto = onnx.NodeProto()
        proto.CopyFrom(src.source_nodes[inst[0]].proto)
        bind = dict(inst[1])
        for pos, name in enumerate(proto.input):
            if not name:
                continue
            if pos in bind:
                proto.input[pos] = self.names[bind[pos]]
            else:
                proto.input[pos] = self.source_constant(name)
        for j, name in enumerate(self.instance_outputs[inst]):
            proto.output[j] = name
        if proto.name and inst[0] in self.written:
            proto.name = w.fresh(proto.name)  # node names are unique too
        self.written.add(inst[0])
        w.append(proto)
        self.original.add(id(proto))

    def operator(self, nid: int, out: str) -> None:
        from tensat_py import ops

        w, node = self.w, self.g.nodes[nid]
        ins = [self.names[i] for i in node.inputs]
        try:
            d = ops.get(node.op)
        except KeyError as e:
            raise OnnxError(f"node '{node.name}': {e.args[0]}") from None
        if d.to_onnx is None:
            raise OnnxError(f"node '{node.name}': `{node.op}` has no ONNX form")
        try:
            d.to_onnx(w, self.ctx(nid), ins, out)
        except OnnxError:
            raise
        except ValueError as e:  # e.g. an opaque node without a payload that can be saved
            raise OnnxError(f"node '{node.name}' ({node.op}): {e}") from e
        except Exception as e:
            raise OnnxError(
                f"node '{node.name}' ({node.op}): to_onnx failed: {type(e).__name__}: {e}"
            ) from e
        if out not in w.produced and out not in w.aliases and out not in w._pairs:
            if out not in w.initializers:
                raise OnnxError(f"node '{node.name}' ({node.op}): to_onnx did not produce '{out}'")

    def finish(self, order, out_names, opsets, ir_version, functions) -> onnx.ModelProto:
        g, w = self.g, self.w
        graph_inputs = {self.names[i] for i in order if g.nodes[i].op == "input"}
        final = [w.resolve(self.names[o]) for o in g.outputs]
        # Rename the value computing an output to the output's name where possible.
        rename: dict[str, str] = {}
        claimed: set[str] = set()
        for k, v in enumerate(final):
            want = out_names[k]
            if v == want or v in graph_inputs or v in claimed:
                continue
            if v in out_names:
                continue  # v is itself an output's name
            if want in w.produced or want in w.initializers:
                continue
            rename[v] = want
            claimed.add(v)
        mapping = {a: rename.get(w.resolve(a), w.resolve(a)) for a in w.aliases}
        mapping.update(rename)
        rename_values(w.nodes, mapping)
        inits = {name: rename.get(name, name) for name in w.initializers}
        outputs = []
        for k, o in enumerate(g.outputs):
            v = mapping.get(final[k], final[k])
            if v != out_names[k]:
                w.nodes.append(helper.make_node("Identity", [v], [out_names[k]], name=out_names[k]))
            t = g.type_of(o)
            outputs.append(helper.make_tensor_value_info(out_names[k], self.elem(o), list(t.shape)))
        by_onnx = {self.onnx_leaf(g.nodes[i].name): i for i in g.inputs() if i in set(order)}
        input_order = [n for n, _ in self.src.inputs] if self.src else list(by_onnx)
        inputs = [
            helper.make_tensor_value_info(
                n, self.elem(by_onnx[n]), list(g.type_of(by_onnx[n]).shape)
            )
            for n in input_order
            if n in by_onnx
        ]
        src = self.src
        name = src.graph_name if src is not None and src.graph_name else "tensat"
        gp = helper.make_graph(w.nodes, name, inputs, outputs, [])
        model = helper.make_model(gp, opset_imports=list(opsets), functions=list(functions))
        # Each initializer is copied once, into the model (a source model's by reference
        # until here): a graph built with them would hold them three times over.
        for old, new in inits.items():
            dst = model.graph.initializer.add()
            dst.CopyFrom(w.initializers.pop(old))
            dst.name = new
        if src is not None:  # the source model, rewritten: its producer fields, if any
            if src.producer_name:
                model.producer_name = src.producer_name
            if src.producer_version:
                model.producer_version = src.producer_version
        else:
            model.producer_name = "tensat-py"
        model.ir_version = ir_version
        if len(self.original) < len(w.nodes):  # something was written through to_onnx
            protected = {o for n in w.nodes if id(n) in self.original for o in n.output if o}
            try:
                peephole.fuse(model, protected)
            except Exception as e:  # shape inference rejects the model: the checker says why
                raise OnnxError(f"export-time fusions failed: {type(e).__name__}: {e}") from e
        return model


def _payloads(graph: Graph) -> list[OnnxOpaque]:
    return [p for p in graph.meta.get("opaque", {}).values() if isinstance(p, OnnxOpaque)]


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
            from :func:`~.importer.load` (its ``meta["onnx"]`` says which model it came
            from).
        weights: values for weights by graph name, overriding the source model's
            initializers (cast to each weight's dtype); ``"random"`` draws every weight the
            source does not hold with :func:`~tensat_py.runtime.numpy_exec.random_feeds`
            (seed 0).
        source: the graph (or :class:`~.importer.OnnxSource`) the program came from, when
            ``graph.meta`` does not carry it.
        opset: default-domain opset for a graph without a source model (17); a graph from
            ONNX keeps its model's opsets, IR version and functions.
        check: run ``onnx.checker.check_model(model, full_check=True)`` (a source model
            written for ``meta[WRITE_SOURCE]`` that fails it is not written: the graph is
            exported instead).

    Raises:
        OnnxError: a weight without a value, an operator without an ONNX form, an opaque
            node without an ONNX payload, or a model the checker rejects.
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
        from tensat_py.runtime.numpy_exec import random_feeds

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
        functions = tuple(src.functions)
        default = _default_opset_of(opsets)
    else:
        default = int(opset or DEFAULT_OPSET)
        opsets = [helper.make_opsetid("", default)]
        ir_version = max(DEFAULT_IR_VERSION, int(helper.find_min_ir_version_for(opsets)))
        fns: dict[tuple[str, str], onnx.FunctionProto] = {}
        for p in _payloads(graph):
            for o in p.opset_imports:
                if o.domain not in ("", "ai.onnx") and all(q.domain != o.domain for q in opsets):
                    opsets.append(o)
            for f in p.functions:
                fns.setdefault((f.domain, f.name), f)
            ir_version = max(ir_version, p.ir_version)
        functions = tuple(fns.values())
    if graph.meta.get(WRITE_SOURCE) and not values:
        kept = source_model(graph, source=source)
        if kept is not None and (not check or _passes_checker(kept)):
            return kept
    model = _lowered(_Exporter(graph, values, src, default).run(opsets, ir_version, functions))
    if check:
        try:
            _check_model(model)
        except Exception as e:
            raise OnnxError(f"the exported model fails the ONNX checker: {e}") from None
    return model


#: Initializers at least this large (bytes) are checked by type only (:func:`_check_model`).
CHECK_WEIGHT_BYTES = 1 << 12


def _check_model(model: onnx.ModelProto, full: bool = True) -> None:
    """``onnx.checker.check_model(model, full_check=full)`` on the model with its large
    initializers held out as typed graph inputs (:func:`~.common.hold_out`): the checker
    and its shape inference serialise the model, and a 24-layer GPT-2-small stack's 680 MB
    of weights made that the peak of the whole command (4.1 GB). The held weights were
    built from arrays of their declared type and shape (``numpy_helper.from_array``).

    Raises:
        onnx.checker.ValidationError: as the checker does.
    """
    big = {t.name for t in model.graph.initializer if tensor_bytes(t) >= CHECK_WEIGHT_BYTES}
    light, _ = hold_out(model, big)
    onnx.checker.check_model(light, full_check=full)


def source_model(
    graph: Graph, *, source: Graph | OnnxSource | None = None
) -> onnx.ModelProto | None:
    """The model ``graph`` was loaded from, as :func:`~.importer.load` was given it
    (symbolic dimensions, shape sub-graphs, ``Identity`` nodes and all; under the lowest IR
    version onnxruntime needs), when ``graph`` still computes what it computes term for
    term (its outputs have the imported graph's structural keys, up to the order of a
    commutative operator's operands); else None.

    :func:`tensat_py.optimize` marks an input it keeps with ``meta[WRITE_SOURCE]`` when
    onnxruntime ran this model faster than the input's export (confirmation), and
    :func:`to_model` then writes it instead of re-exporting the program.

    Args:
        graph: a program, typically one :func:`~.importer.load` returned.
        source: as for :func:`to_model`, when ``graph.meta`` lacks the ONNX source.
    """
    src = source.meta.get("onnx") if isinstance(source, Graph) else source
    if src is None:
        src = graph.meta.get("onnx")
    if src is None or src.original is None or not src.output_keys:
        return None
    keys = lookup_keys(graph, src.key_table)
    if tuple(keys[o] for o in graph.outputs) != src.output_keys:
        return None
    model = onnx.ModelProto()
    model.CopyFrom(src.original)
    return _lowered(model)


def _passes_checker(model: onnx.ModelProto) -> bool:
    try:
        _check_model(model)
    except Exception:  # the checker's ValidationError, shape inference errors
        return False
    return True


def _lowered(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model``, set in place to the lowest IR version its opsets need
    (:func:`~.common.runnable_ir_version`) unless the checker rejects it there: lowered
    from a newer one (onnxruntime refuses IR versions it does not know; a model that uses
    a newer IR's features keeps its own), raised from an older one (an IR 3 model the
    importer converted to opset 13 is written under IR 7, where initializers need not be
    graph inputs). A model left below IR 4 (ONNX IR spec: "initializers ... must also be
    graph inputs") gets every initializer it does not list as an input listed, with its
    type and shape."""
    own, want = model.ir_version, runnable_ir_version(model)
    if want != own:
        model.ir_version = want
        try:
            _check_model(model, full=False)
        except Exception:  # the checker's ValidationError (and friends): keep the own one
            model.ir_version = own
    if model.ir_version < _INITIALIZERS_NOT_INPUTS_IR:
        listed = {i.name for i in model.graph.input}
        for t in model.graph.initializer:
            if t.name not in listed:
                vi = helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                model.graph.input.append(vi)
    return model


#: The first IR version whose initializers need not be graph inputs (ONNX IR spec).
_INITIALIZERS_NOT_INPUTS_IR = 4


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
            write_model(model, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
