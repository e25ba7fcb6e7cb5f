"""The payload of an opaque node that came from ONNX: :class:`OnnxOpaque`.

An ONNX node the language does not model (no importer is registered for its type, or
the importer raised ``Unsupported``) becomes one ``opaque`` graph node per used output.
The payload keeps the ``NodeProto`` (its sub-graphs, attributes of type ``GRAPH`` /
``GRAPHS``, included: the nodes of ``If``/``Loop``/``Scan`` bodies travel unchanged, and
the outer-scope values their bodies read are operands of the opaque node), the
initializers it reads, the source model's opsets, IR version and local functions. So it
can be written back unchanged (:mod:`.exporter`) and evaluated on its own
(:meth:`OnnxOpaque.evaluate`, by onnxruntime).

ONNX semantics of what the payload runs: the ONNX operator specification
(https://onnx.ai/onnx/operators/) at the source model's opset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensat_py.frontends.onnx.common import DEFAULT_IR_VERSION, elem_name, runnable_ir_version

__all__ = ["OnnxOpaque", "subgraphs", "outer_inputs", "rename_values"]


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The sub-graphs held by ``node``'s ``GRAPH``/``GRAPHS`` attributes (not nested)."""
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def outer_inputs(node: onnx.NodeProto) -> list[str]:
    """Values of the enclosing scope that ``node``'s sub-graphs read, in first-use order.

    A name used by a sub-graph node (at any depth) that the sub-graph neither defines
    (inputs, initializers, node outputs) nor receives from a nested scope of its own is an
    outer-scope reference (ONNX IR: "names ... in a subgraph ... may refer to names in an
    outer scope").
    """
    seen: dict[str, None] = {}

    def walk(g: onnx.GraphProto, bound: frozenset[str]) -> None:
        local = set(bound)
        local.update(i.name for i in g.input)
        local.update(t.name for t in g.initializer)
        local.update(t.name for t in g.sparse_initializer)
        for n in g.node:
            for i in n.input:
                if i and i not in local:
                    seen.setdefault(i)
            for sg in subgraphs(n):
                walk(sg, frozenset(local))
            local.update(o for o in n.output if o)

    for sg in subgraphs(node):
        walk(sg, frozenset())
    return list(seen)


def rename_values(
    nodes: Iterable[onnx.NodeProto], mapping: Mapping[str, str], *, outputs: bool = True
) -> None:
    """Renames values in place: node inputs (sub-graph references included) and, when
    ``outputs``, node outputs. Names absent from ``mapping`` stay.

    ONNX graphs are in SSA form across scopes, so a sub-graph never redefines an outer
    name; renaming every use is therefore exact.
    """
    if not mapping:
        return
    for n in nodes:
        for k, i in enumerate(n.input):
            if i in mapping:
                n.input[k] = mapping[i]
        if outputs:
            for k, o in enumerate(n.output):
                if o in mapping:
                    n.output[k] = mapping[o]
        for sg in subgraphs(n):
            rename_values(sg.node, mapping, outputs=False)
            for o in sg.output:  # a sub-graph may output an outer value directly
                if o.name in mapping:
                    o.name = mapping[o.name]


@dataclass(eq=False)
class OnnxOpaque:
    """The payload of an opaque node that came from ONNX.

    Attributes:
        op_type: ONNX operator type (``"Softmax"``), ``domain:Op`` for other domains.
        nodes: the ONNX node(s) computing it, in order: the node itself, preceded by the
            producers it had to take in (an operand of an element type the language has
            no dtype for, e.g. a ``uint8`` tensor, is computed inside the payload).
        operands: ONNX value names the nodes read for the graph node's tensor operands, in
            operand order (sub-graph outer-scope references included); renamed to the
            exported values at export.
        output: the ONNX value name of the graph node's value (an output of ``nodes``).
        elem_type: ONNX element type of that value.
        operand_elems: ONNX element types of the operands as the model declares them.
        constants: initializers (``Constant`` values included) the nodes read that are not
            operands, by name; exported as initializers of the same name.
        group: nodes with several used outputs give one opaque node per output; they share
            ``group`` and the nodes are exported once.
        reason: why the node is opaque (no importer, or the importer's ``Unsupported``
            message).
        opset_imports, ir_version, functions: the source model's (for evaluation).
    """

    op_type: str
    nodes: tuple[onnx.NodeProto, ...]
    operands: tuple[str, ...]
    output: str
    elem_type: int
    operand_elems: tuple[int, ...] = ()
    constants: dict[str, TensorProto] = field(default_factory=dict)
    group: str = ""
    reason: str = ""
    opset_imports: tuple[onnx.OperatorSetIdProto, ...] = ()
    ir_version: int = DEFAULT_IR_VERSION
    functions: tuple[onnx.FunctionProto, ...] = ()
    _runners: dict[tuple, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, args: Sequence[Any]) -> np.ndarray:
        """The output for operand arrays ``args`` (in :attr:`operands` order).

        Runs the nodes with onnxruntime (CPU). Operands keep their dtype: float64 operands
        (the verifier runs float graphs in float64) run in float64 where onnxruntime has
        float64 kernels; otherwise ONNX's reference evaluator runs them in float64; if
        neither can, the operands are cast to the element types the model declares, run
        by onnxruntime, and the output cast back to float64. The strategy that worked is
        cached per operand dtypes and shapes.

        Returns:
            One array of the node's value (shape as ONNX shape inference gave it).

        Raises:
            NotImplementedError: no runtime can evaluate the nodes (e.g. a custom domain
                operator without a kernel); the message carries each runtime's error.
            ValueError: ``args`` has the wrong number of operands.
        """
        arrays = [np.asarray(a) for a in args]
        if len(arrays) != len(self.operands):
            raise ValueError(
                f"{self.op_type}: {len(arrays)} operands given, {len(self.operands)} expected"
            )
        key = tuple((a.dtype.str, a.shape) for a in arrays)
        runner = self._runners.get(key)
        if runner is not None:
            return runner(arrays)
        errors = []
        for make in (self._ort_as_given, self._reference, self._ort_declared):
            try:
                runner = make(arrays)
                out = runner(arrays)
            except NotImplementedError as e:
                errors.append(str(e))
                continue
            except Exception as e:  # onnxruntime / the reference evaluator raise many types
                errors.append(f"{make.__name__.strip('_')}: {type(e).__name__}: {e}")
                continue
            self._runners[key] = runner
            return out
        raise NotImplementedError(f"{self.op_type}: cannot evaluate: " + "; ".join(errors))

    def _model(self, in_elems: Sequence[int], shapes, promote: bool) -> onnx.ModelProto:
        inputs = [
            helper.make_tensor_value_info(n, e, list(s))
            for n, e, s in zip(self.operands, in_elems, shapes, strict=True)
        ]
        out_elem = self.elem_type
        consts = list(self.constants.values())
        if promote:
            if out_elem == TensorProto.FLOAT:
                out_elem = TensorProto.DOUBLE
            consts = [
                numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)
                if t.data_type == TensorProto.FLOAT
                else t
                for t in consts
            ]
        out = helper.make_tensor_value_info(self.output, out_elem, None)
        g = helper.make_graph(list(self.nodes), "opaque", inputs, [out], consts)
        opsets = list(self.opset_imports) or [helper.make_opsetid("", 17)]
        m = helper.make_model(g, opset_imports=opsets, functions=list(self.functions))
        m.ir_version = self.ir_version
        m.ir_version = runnable_ir_version(m)
        return m

    def _ort_runner(self, model: onnx.ModelProto, cast_in=None, cast_out=None):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        names = [i.name for i in sess.get_inputs()]

        def run(arrays: Sequence[np.ndarray]) -> np.ndarray:
            feeds = dict(zip(self.operands, arrays, strict=True))
            if cast_in is not None:
                feeds = {k: v.astype(cast_in[k], copy=False) for k, v in feeds.items()}
            out = np.asarray(sess.run([self.output], {n: feeds[n] for n in names})[0])
            return out.astype(cast_out) if cast_out is not None else out

        return run

    def _ort_as_given(self, arrays: Sequence[np.ndarray]):
        elems = [helper.np_dtype_to_tensor_dtype(a.dtype) for a in arrays]
        promote = any(a.dtype == np.float64 for a in arrays)
        return self._ort_runner(self._model(elems, [a.shape for a in arrays], promote))

    def _reference(self, arrays: Sequence[np.ndarray]):
        from onnx.reference import ReferenceEvaluator

        elems = [helper.np_dtype_to_tensor_dtype(a.dtype) for a in arrays]
        promote = any(a.dtype == np.float64 for a in arrays)
        ev = ReferenceEvaluator(self._model(elems, [a.shape for a in arrays], promote))

        def run(arrays: Sequence[np.ndarray]) -> np.ndarray:
            feeds = dict(zip(self.operands, arrays, strict=True))
            return np.asarray(ev.run([self.output], feeds)[0])

        return run

    def _ort_declared(self, arrays: Sequence[np.ndarray]):
        if len(self.operand_elems) != len(arrays):
            raise NotImplementedError("ort_declared: operand element types unknown")
        cast_in = {
            n: helper.tensor_dtype_to_np_dtype(e)
            for n, e in zip(self.operands, self.operand_elems, strict=True)
        }
        promote = any(a.dtype == np.float64 for a in arrays)
        cast_out = np.float64 if promote and self.elem_type == TensorProto.FLOAT else None
        model = self._model(self.operand_elems, [a.shape for a in arrays], False)
        return self._ort_runner(model, cast_in, cast_out)

    # ------------------------------------------------------------------ export
    def to_onnx(self, w: Any, ctx: Any, ins: Sequence[str], out: str) -> None:
        """Writes the nodes through the exporter's writer ``w`` (the ``opaque`` operator's
        ``to_onnx`` delegates here): operands renamed to ``ins``, the output to ``out``,
        the constants as initializers of their own names. The nodes of a group are written
        once; the group's other graph nodes alias their output.
        """
        for name, t in self.constants.items():
            w.add_initializer(name, t)
        if not w.once(("onnx-opaque", self.group or id(self))):
            if out != self.output:
                w.alias(out, self.output)
            return
        rename = dict(zip(self.operands, ins, strict=True))
        if out != self.output:
            rename[self.output] = out
        for n in self.nodes:
            m = onnx.NodeProto()
            m.CopyFrom(n)
            rename_values([m], rename)
            w.append(m)

    def __repr__(self) -> str:
        return (
            f"OnnxOpaque({self.op_type}, output={self.output!r} {elem_name(self.elem_type)}, "
            f"operands={list(self.operands)}, reason={self.reason!r})"
        )
