"""The cost-model protocol and the shared walk over graphs and exported e-graphs.

A cost model prices one operator application in **seconds** on one device. Everything the
pipeline needs follows from that one figure: the cost of a graph (the sum over the nodes
some output depends on) and the cost of every e-node of an exported e-graph (what
extraction minimises; TASO, Jia et al. SOSP 2019, and Tensat, Yang et al. MLSys 2021, use
the same additive model with per-operator times measured on the device).

* :class:`CostModel` is the typed protocol :func:`tensat_py.optimize` accepts
  (``cost_model=`` a name or any object implementing it).
* :class:`OpCostModel` is a base class that implements :meth:`~CostModel.node_cost`,
  :meth:`~CostModel.graph_cost` and :meth:`~CostModel.costs_for_export` from one method,
  :meth:`OpCostModel.cost`, so a new model only writes that (``docs/cost-models.md``,
  "Adding a cost model"). Models that measure or predict in batches override
  :meth:`OpCostModel.costs` instead.
* :class:`CostContext` is the :class:`~tensat_py.ops.OpContext` a model sees, plus whether
  each operand is constant (a weight or a weight-only sub-graph: an initializer at
  inference).

An operator a model cannot price is an error (``ValueError`` naming it), never cost 0.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tensat_py import ops
from tensat_py.graph import Graph, TensorType, operand_kinds

__all__ = [
    "GpuUnavailableError",
    "CostModel",
    "CostContext",
    "OpCostModel",
    "Operand",
    "make_context",
    "context_nodes",
    "graph_contexts",
    "export_contexts",
    "opdef",
    "operand_flags",
    "producer_label",
    "channel_bias",
    "biased_conv",
    "conv_folded",
    "SHARED",
    "Fusion",
]


def operand_flags(ctx: ops.OpContext) -> tuple[bool, ...]:
    """Whether each operand of ``ctx`` is constant (:attr:`CostContext.operand_constant`;
    all ``False`` for a plain :class:`~tensat_py.ops.OpContext` that does not say)."""
    return tuple(getattr(ctx, "operand_constant", ())) or (False,) * len(ctx.inputs)


#: Operand kinds that are operands (tensors); every other kind is a parameter.
_OPERAND_KINDS = frozenset({"tensor", "pair"})

#: An operand as :meth:`CostModel.node_cost` takes it: a shape (of the model's default
#: dtype), a :class:`TensorType`, a pair of them, or None (an operand of unknown type,
#: e.g. a split pair given by shape: skipped, as it moves no bytes).
Operand = Sequence[int] | TensorType | tuple[TensorType, TensorType] | None


@dataclass(frozen=True)
class CostContext(ops.OpContext):
    """One operator application as a cost model sees it.

    Attributes:
        operand_constant: for each entry of ``inputs``, whether that operand is constant
            (every leaf below it is a weight: an initializer at inference). Empty when
            unknown (taken as all False).
        producers: for each entry of ``inputs``, labels of the operators that may produce
            it (:func:`producer_label`; in an e-graph, every e-node of the operand's class);
            runtimes fuse some pairs (onnxruntime fuses an activation into the convolution
            before it), which measured models read here. Empty when unknown.
    """

    operand_constant: tuple[bool, ...] = ()
    producers: tuple[frozenset[str], ...] = ()


@dataclass(frozen=True)
class Fusion:
    """Nodes of a program that a runtime runs as one kernel: priced as ``op`` with
    ``params`` applied to the nodes ``operands``, at the node the fusion is keyed by in
    :func:`graph_contexts`; the nodes ``absorbed`` (node ids) cost nothing
    (:func:`tensat_py.cost.ort_fusion.ort_fusions`)."""

    op: str
    params: Mapping[str, Any]
    operands: tuple[int, ...]
    absorbed: tuple[int, ...]


def _is_sum(op: str) -> bool:
    """Whether ``op``'s labels also name what produces its operands (one level): the
    operators that run as the ``add`` kernel (``add``, TASO's ``ewadd``: their
    :attr:`~tensat_py.ops.OpDef.kernel`)."""
    return ops.kernel_of(op) == "add"


#: Producer label of an operand that other nodes (or the program's outputs) read too: a
#: runtime fuses a node into its producer only when it is that producer's sole reader
#: (onnxruntime's Conv+Add, Conv+activation and MatMul+Add fusions all require it), so a
#: measured model fuses nothing into a producer labelled so. Only a concrete program
#: (:func:`graph_contexts`) knows its readers; an e-graph's contexts never carry it.
SHARED = "shared"


def producer_label(op: str, params: Mapping[str, Any]) -> str:
    """``op``, or ``op+act`` when it carries a non-zero ``act`` parameter (an activation
    already fused in)."""
    return f"{op}+act" if params.get("act") else op


def _labels(op: str, params: Mapping[str, Any], operand_labels: Sequence[set[str]]) -> set[str]:
    """A node's labels: its own, plus ``ewadd<L`` for the labels L of an ``ewadd``/``add``
    node's operands (a sum whose operand a convolution makes; none from an operand
    labelled :data:`SHARED`, which the sum cannot fuse with)."""
    own = producer_label(op, params)
    out = {own}
    if _is_sum(op):
        for labels in operand_labels:
            if SHARED not in labels:
                out.update(f"{own}<{lab}" for lab in labels if "<" not in lab)
    return out


def _shape_of(t: Any) -> tuple[int, ...]:
    """A tensor type's shape; () for a pair."""
    return tuple(getattr(t, "shape", ()) or ())


def channel_bias(shape: Sequence[int], out: Sequence[int]) -> bool:
    """Whether an operand of ``shape`` added to a 4-D ``out`` (NCHW) is a per-channel bias:
    ``(C, 1, 1)`` or ``(1, C, 1, 1)`` with ``C = out[1]``, what onnxruntime folds into a
    convolution's bias input (ConvAddFusion)."""
    shape, out = tuple(shape), tuple(out)
    return len(out) == 4 and shape in ((out[1], 1, 1), (1, out[1], 1, 1))


def biased_conv(
    operands: Sequence[tuple[set[str], bool, Sequence[int]]], out: Sequence[int]
) -> bool:
    """Whether a sum of ``operands`` (labels, constant, shape) into shape ``out`` is a
    convolution plus a constant per-channel bias: onnxruntime runs it as the convolution
    (the bias folded into its bias input)."""
    if len(operands) != 2:
        return False
    for (labels, _, _), (_, const, shape) in (operands, operands[::-1]):
        if "conv2d" in labels and SHARED not in labels and const and channel_bias(shape, out):
            return True
    return False


def conv_folded(
    op: str, operands: Sequence[tuple[set[str], bool, Sequence[int]]], out: Sequence[int]
) -> bool:
    """Whether onnxruntime folds an ``op`` node of ``operands`` (labels, constant, shape)
    into shape ``out`` into the convolution before it, which then stands for it: a sum
    with a constant per-channel bias (:func:`biased_conv`, ConvAddFusion), or a
    ``batchnorm`` of constant parameters over a convolution's output that nothing else
    reads (ConvBNFusion).

    Example:
        >>> conv_folded("batchnorm", [({"conv2d"}, False, (1, 8, 4, 4))]
        ...             + [(set(), True, (8,))] * 4, (1, 8, 4, 4))
        True
        >>> conv_folded("batchnorm", [({"conv2d", SHARED}, False, (1, 8, 4, 4))]
        ...             + [(set(), True, (8,))] * 4, (1, 8, 4, 4))
        False
    """
    if _is_sum(op):
        return biased_conv(operands, out)
    if op != "batchnorm" or not operands:
        return False
    labels = operands[0][0]
    return "conv2d" in labels and SHARED not in labels and all(c for _, c, _ in operands[1:])


class GpuUnavailableError(ValueError):
    """A measured cost model was asked for a GPU device and CuPy or a CUDA GPU is missing
    (the message says which; :func:`tensat_py.cost.get_cost_model` adds the cost model's
    name and how to measure on the CPU instead)."""


@runtime_checkable
class CostModel(Protocol):
    """What :func:`tensat_py.optimize` needs of a cost model. All costs are seconds.

    Attributes:
        name: the model's name (``"roofline"``, ``"profile"``, ``"learned"``, ...).
        device: the device it prices for (a preset name, ``"cpu"``, a GPU's name).
    """

    name: str
    device: str

    def cost(self, ctx: ops.OpContext) -> float:
        """Seconds for one operator application (0 for constant nodes and operators that
        launch no kernel).

        Raises:
            ValueError: the model cannot price the operator (the message names it).
        """
        ...

    def node_cost(
        self,
        op: str,
        params: Mapping[str, Any],
        input_shapes: Sequence[Operand],
        output_shape: Operand,
        constant: bool = False,
    ) -> float:
        """Seconds for one operator given by name, parameters and operand/output shapes
        (float32) or :class:`TensorType` values."""
        ...

    def graph_cost(self, graph: Graph) -> float:
        """Sum of the costs of the nodes some output of ``graph`` depends on (seconds)."""
        ...

    def costs_for_export(self, export: Mapping[str, Any]) -> list[float]:
        """One cost (seconds) per e-node of an exported e-graph, indexed like
        ``export["node_op"]``; leaves cost 0."""
        ...


_DTYPE_OF_ITEMSIZE = {4: "float32", 2: "float16", 8: "float64", 1: "bool"}


def _as_type(x: Any, dtype: str) -> TensorType | tuple[TensorType, TensorType] | None:
    if x is None or isinstance(x, TensorType):
        return x
    if isinstance(x, tuple) and len(x) == 2 and all(isinstance(p, TensorType) for p in x):
        return (x[0], x[1])
    return TensorType(tuple(int(d) for d in x), dtype)


def make_context(
    op: str,
    params: Mapping[str, Any],
    inputs: Sequence[Operand],
    output: Operand,
    constant: bool = False,
    dtype: str = "float32",
    operand_constant: Sequence[bool] = (),
) -> CostContext:
    """A :class:`CostContext` from shapes or types.

    Args:
        op: operator name.
        params: its parameters by operand name.
        inputs: its tensor operands in signature order (see :data:`Operand`; None entries
            are dropped).
        output: its output shape or type; None means a scalar (shape ``()``).
        constant: whether every leaf below is a weight.
        dtype: the dtype of operands given as bare shapes.
        operand_constant: per operand of ``inputs``, whether it is constant.
    """
    pairs = [(_as_type(x, dtype), i) for i, x in enumerate(inputs)]
    ins = [t for t, _ in pairs if t is not None]
    oc = tuple(bool(operand_constant[i]) for t, i in pairs if t is not None and operand_constant)
    out = _as_type(output, dtype)
    if out is None:
        out = TensorType((), dtype)
    return CostContext(
        op=op, params=dict(params), inputs=ins, output=out, constant=constant, operand_constant=oc
    )


def opdef(op: str, model: str = "cost model") -> ops.OpDef:
    """The declaration of ``op``.

    Raises:
        ValueError: ``op`` has no Python declaration or declares no cost (names it).
    """
    try:
        d = ops.get(op)
    except KeyError:
        raise ValueError(
            f"{model}: operator `{op}` has no cost (no Python declaration in tensat_py.ops)"
        ) from None
    if d.cost is None:
        raise ValueError(f"{model}: operator `{op}` ({d.dialect} dialect) declares no cost")
    return d


def context_nodes(graph: Graph, fusions: Mapping[int, Fusion] | None = None) -> list[int]:
    """The ids of the nodes :func:`graph_contexts` gives a context, in its order: the
    nodes some output depends on, less those a chain of ``fusions`` absorbs."""
    absorbed = {a for f in (fusions or {}).values() for a in f.absorbed}
    keep = graph.live()
    return [nid for nid in range(len(graph.nodes)) if keep[nid] and nid not in absorbed]


def graph_contexts(graph: Graph, fusions: Mapping[int, Fusion] | None = None) -> list[CostContext]:
    """The contexts of the nodes some output of ``graph`` depends on, in node order. An
    operand that more than one live node reads, or that is also a program output, carries
    the :data:`SHARED` label: nothing fuses into its producer.

    ``fusions`` (by node id) replace that node's context by the fused kernel's (its
    operator, parameters and operands) and drop the nodes each absorbs."""
    fusions = fusions or {}
    keep = graph.live()
    readers = [0] * len(graph.nodes)
    for nid, node in enumerate(graph.nodes):
        if keep[nid]:
            for i in set(node.inputs):
                readers[i] += 1
    for o in set(graph.outputs):
        readers[o] += 1
    out: list[CostContext] = []
    labels: list[set[str]] = []
    for nid, node in enumerate(graph.nodes):
        labels.append(_labels(node.op, node.params, [labels[i] for i in node.inputs]))
        if readers[nid] > 1:
            labels[-1].add(SHARED)
        if conv_folded(
            node.op,
            [
                (labels[i], graph.nodes[i].constant, _shape_of(graph.nodes[i].type))
                for i in node.inputs
            ],
            _shape_of(node.type),
        ):
            labels[-1].add("conv2d")
    for nid in context_nodes(graph, fusions):
        node = graph.nodes[nid]
        op, params, ins = node.op, node.params, node.inputs
        f = fusions.get(nid)
        if f is not None:
            op, params, ins = f.op, f.params, f.operands
        out.append(
            CostContext(
                op=op,
                params=dict(params),
                inputs=[graph.nodes[i].type for i in ins],
                output=node.type,
                constant=node.constant,
                graph=graph,
                name=node.name,
                operand_constant=tuple(graph.nodes[i].constant for i in ins),
                producers=tuple(frozenset(labels[i]) for i in ins),
            )
        )
    return out


def export_contexts(
    export: Mapping[str, Any], model: str = "cost model", producers: bool = True
) -> list[CostContext | None]:
    """One context per exported e-node (None for leaves: e-nodes without children).

    Parameters (children of any kind but ``tensor``/``pair``: ``int``, ``float``,
    ``list``, ``sym``) come from leaf classes' values; operand types and constant flags
    from child classes' ``shape``/``dtype`` (``shapes`` for a pair) and ``constant``; the
    output type and constant flag from the node's own class; with ``producers``, the
    labels of each operand class's e-nodes (an extra pass; models that do not read them
    skip it).

    Raises:
        ValueError: an operator that is unknown, or a node whose class or operand class is
            not a well-typed tensor/pair (names both).
    """
    classes = export["classes"]
    rows = list(zip(export["node_op"], export["node_eclass"], export["node_children"], strict=True))
    parsed: list[tuple[dict[str, Any], list[int]] | None] = []
    for op, cls, children in rows:
        if not children:
            parsed.append(None)  # a parameter leaf
            continue
        try:
            kinds = operand_kinds(op, len(children))
        except KeyError:
            opdef(op, model)  # raises naming the operator
            raise
        if len(kinds) != len(children):
            raise ValueError(
                f"{model}: e-node `{op}` in class {cls} has {len(children)} children, "
                f"its signature {len(kinds)}"
            )
        params: dict[str, Any] = {}
        operands: list[int] = []
        for (pname, kind), cc in zip(kinds, children, strict=True):
            if kind in _OPERAND_KINDS:
                operands.append(cc)
            else:
                params[pname] = _param_value(classes[cc].get("value"), kind)
        parsed.append((params, operands))
    labels: dict[int, set[str]] = {}
    if producers:
        own: dict[int, set[str]] = {}  # class -> labels of its e-nodes
        for (op, cls, _), p in zip(rows, parsed, strict=True):
            if p is not None:
                own.setdefault(cls, set()).add(producer_label(op, p[0]))
        for (op, cls, _), p in zip(rows, parsed, strict=True):
            if p is not None and (_is_sum(op) or op == "batchnorm"):
                operands = [
                    (
                        own.get(cc, set()),
                        bool(classes[cc].get("constant")),
                        tuple(classes[cc].get("shape") or ()),
                    )
                    for cc in p[1]
                ]
                if conv_folded(op, operands, tuple(classes[cls].get("shape") or ())):
                    own[cls].add("conv2d")
        labels = {c: set(v) for c, v in own.items()}
        for (op, cls, _), p in zip(rows, parsed, strict=True):
            if p is not None and _is_sum(op):
                labels[cls] |= _labels(op, p[0], [own.get(cc, set()) for cc in p[1]])
    types: dict[int, Any] = {}  # class -> its type (shared by every reader)

    def class_type(cc: int, op: str) -> Any:
        if cc not in types:
            types[cc] = _class_type(classes[cc], cc, op, model)
        return types[cc]

    out: list[CostContext | None] = []
    gc_was_on = gc.isenabled()
    gc.disable()  # tens of thousands of small objects kept alive: no collection passes
    try:
        _contexts(rows, parsed, classes, class_type, producers, labels, out)
    finally:
        if gc_was_on:
            gc.enable()
    return out


def _contexts(
    rows: Any,
    parsed: Any,
    classes: Any,
    class_type: Any,
    producers: bool,
    labels: Any,
    out: list[CostContext | None],
) -> None:
    """Fill ``out`` with one context per exported e-node (see :func:`export_contexts`)."""
    for (op, cls, _), p in zip(rows, parsed, strict=True):
        if p is None:
            out.append(None)
            continue
        params, operands = p
        inputs: list[TensorType | tuple[TensorType, TensorType]] = []
        oconst: list[bool] = []
        prods: list[frozenset[str]] = []
        for cc in operands:
            t = class_type(cc, op)
            if t is not None:
                inputs.append(t)
                oconst.append(bool(classes[cc].get("constant")))
                if producers:
                    prods.append(frozenset(labels.get(cc, set())))
        c = classes[cls]
        out.append(
            CostContext(
                op=op,
                params=params,
                inputs=inputs,
                output=class_type(cls, op) or TensorType(()),
                constant=bool(c.get("constant")),
                operand_constant=tuple(oconst),
                producers=tuple(prods),
            )
        )


class OpCostModel:
    """Base class: a cost model defined by :meth:`cost` (seconds per operator).

    Subclasses set :attr:`name` and :attr:`device` and implement :meth:`cost`; models that
    work in batches (measuring or predicting many operators at once) override
    :meth:`costs`, which every other method goes through.
    """

    name: str = "cost model"
    device: str = ""
    #: Whether :meth:`cost` reads :attr:`CostContext.producers` (computing them for an
    #: exported e-graph takes an extra pass).
    needs_producers: bool = False

    def cost(self, ctx: ops.OpContext) -> float:
        """Seconds for one operator application.

        Raises:
            ValueError: the operator cannot be priced (names it).
        """
        raise NotImplementedError

    def costs(self, ctxs: Sequence[ops.OpContext]) -> list[float]:
        """Seconds for each of ``ctxs`` (default: :meth:`cost` one by one)."""
        return [self.cost(c) for c in ctxs]

    def node_cost(
        self,
        op: str,
        params: Mapping[str, Any],
        input_shapes: Sequence[Operand],
        output_shape: Operand,
        constant: bool = False,
    ) -> float:
        """Seconds for one operator (see :meth:`cost`); operands and output are shapes
        (float32) or :class:`TensorType` values.

        Raises:
            ValueError: the operator cannot be priced.
        """
        return self.costs([make_context(op, params, input_shapes, output_shape, constant)])[0]

    def program_contexts(self, graph: Graph) -> list[CostContext]:
        """The contexts :meth:`graph_cost` prices: :func:`graph_contexts` (a model of a
        runtime that fuses chains of nodes passes them as ``fusions``)."""
        return graph_contexts(graph)

    def graph_cost(self, graph: Graph) -> float:
        """Sum of :meth:`cost` over the contexts of :meth:`program_contexts`: the nodes
        some output depends on (seconds).

        Raises:
            ValueError: a node's operator cannot be priced.
        """
        total = 0.0
        for c in self.costs(self.program_contexts(graph)):
            total += c
        return total

    def costs_for_export(self, export: Mapping[str, Any]) -> list[float]:
        """Each exported e-node's cost (seconds), indexed like ``export["node_op"]``
        (see :func:`export_contexts`); leaves cost 0.

        Raises:
            ValueError: an operator that cannot be priced, or a node whose class or operand
                class is not a well-typed tensor/pair (names both).
        """
        ctxs = export_contexts(export, self.name, self.needs_producers)
        live = [c for c in ctxs if c is not None]
        priced = iter(self.costs(live))
        return [0.0 if c is None else next(priced) for c in ctxs]


def _param_value(v: Any, kind: str) -> Any:
    """A leaf class's value as a Python parameter (lists become tuples)."""
    if kind == "list" and isinstance(v, list | tuple):
        return tuple(int(x) for x in v)
    return v


def _class_type(
    c: Mapping[str, Any], cid: int, op: str, model: str = "cost model"
) -> TensorType | tuple[TensorType, TensorType] | None:
    """The type an exported class's analysis data gives."""
    kind = c.get("kind")
    if kind == "tensor":
        return TensorType(tuple(int(d) for d in c["shape"]), str(c.get("dtype") or "float32"))
    if kind == "pair":
        if c.get("shapes") is None:
            return None  # an export without part shapes (only split's parts read it: free)
        dts = c.get("dtypes") or (c.get("dtype") or "float32",) * 2
        a, b = c["shapes"]
        return (
            TensorType(tuple(int(d) for d in a), str(dts[0])),
            TensorType(tuple(int(d) for d in b), str(dts[1])),
        )
    raise ValueError(
        f"{model}: e-node `{op}` touches e-class {cid} of kind {kind!r} "
        f"({c.get('value', '')}), not a well-typed tensor or pair"
    )
