"""The Python side of every operator of the language, one module per dialect.

Each operator the Rust core declares (``rust/src/lang/``, listed by
``tensat_py._core.signatures()``) has exactly one :class:`OpDef` here, registered by its
dialect module (:mod:`tensat_py.ops.taso`, :mod:`tensat_py.ops.tensor`) with
:func:`register`. An :class:`OpDef` carries what every Python layer needs of the operator:

* ``evaluate``: reference semantics for the NumPy executor
  (:mod:`tensat_py.runtime.numpy_exec`);
* ``cost``: FLOPs and bytes moved, for the roofline cost model
  (:mod:`tensat_py.cost.roofline`);
* ``to_onnx``: its ONNX form, for the exporter (:mod:`tensat_py.frontends.onnx`);
* ``to_hlo``: its XLA HLO form, for the HLO writer (:mod:`tensat_py.frontends.hlo`);
* ``onnx_types``: the ONNX operator types whose importer (registered with
  :func:`onnx_importer`) can produce it.

The executor, the cost model and the ONNX exporter look operators up here with
:func:`get`; none of them holds a per-operator ``if`` chain. ``tests/test_language.py``
fails when a declared operator lacks an :class:`OpDef` (or a field of one) or when
``docs/language.md`` disagrees with the declarations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensat_py.graph import Graph, PairType, TensorType

__all__ = [
    "OpContext",
    "OpDef",
    "register",
    "get",
    "all_ops",
    "onnx_importer",
    "onnx_importers",
    "default_bytes",
    "kernel_of",
    "FUSION_KINDS",
]


@dataclass(frozen=True)
class OpContext:
    """One application of an operator, as its Python side sees it.

    Attributes:
        op: operator name.
        params: parameters by operand name (``int``, ``float``, ``str``, or
            ``tuple[int, ...]`` for list parameters).
        inputs: types of the tensor (or pair) operands, in signature order.
        output: the output type (a pair of types for ``split``).
        constant: True when every leaf below is a weight (pre-computed at inference).
        graph: the graph the node belongs to, when there is one (``opaque`` payloads live
            in ``graph.meta``); None when costing an exported e-graph.
        name: the node's name (for error messages and opaque payload lookup).
        float_dtype: the NumPy float dtype this run computes floats in, when the executor
            runs a float graph wider than declared (``"float64"`` in verification); None
            to compute each tensor in its own dtype. Operators without float operands
            that make floats (``scalar``, ``cast``) produce this dtype when it is set.
        scope: for the knossos dialect's constructs, the variables and functions in
            scope where the node runs (a :class:`tensat_py.ops.knossos.KsScope`); None
            elsewhere.
    """

    op: str
    params: Mapping[str, Any]
    inputs: Sequence[TensorType | PairType]
    output: TensorType | PairType
    constant: bool = False
    graph: Graph | None = None
    name: str = ""
    float_dtype: str | None = None
    scope: Any = None


#: ``evaluate(ctx, args) -> array`` (or a pair of arrays for ``split``).
Evaluate = Callable[[OpContext, Sequence[Any]], Any]
#: ``cost(ctx) -> (flops, bytes moved)``.
Cost = Callable[[OpContext], tuple[float, float]]
#: ``to_onnx(writer, ctx, input_names, output_name)``: append the ONNX node(s).
ToOnnx = Callable[[Any, OpContext, Sequence[str], str], None]
#: ``to_hlo(writer, ctx, operand_names) -> result name``: append the HLO instruction(s)
#: (the writer is :class:`tensat_py.frontends.hlo.translate.HloWriter`).
ToHlo = Callable[[Any, OpContext, Sequence[str]], str]


@dataclass(frozen=True)
class OpDef:
    """The Python declaration of one operator (see the module docstring).

    Attributes:
        name: the operator's name in the language (the Rust declaration's name).
        dialect: ``"taso"``, ``"tensor"``, ...
        evaluate: NumPy semantics.
        cost: FLOPs and bytes moved (see ``docs/cost-models.md``).
        to_onnx: ONNX export, or None for operators that never reach it: ``noop``, and
            ``input``/``weight``, which the exporter writes itself (graph inputs and
            initializers). ``split_0``/``split_1`` alias the outputs of their ``split``.
        onnx_types: ONNX operator types that import into this operator.
        launches_kernel: False for operators that compute nothing at run time (``input``,
            ``reshape``, ``split_0``...): the roofline model charges them nothing.
        to_hlo: HLO export (:mod:`tensat_py.frontends.hlo`), declared with the operator
            as ``to_onnx`` is: ``to_hlo(writer, ctx, operand_names) -> name`` appends the
            XLA HLO instruction(s) computing the operator (what ``evaluate`` computes, to
            the declared dtype's rounding) through
            :class:`~tensat_py.frontends.hlo.translate.HloWriter` and returns the name of
            the instruction holding the result; it raises ``ValueError`` for parameters
            HLO cannot write (the writer reports an ``HloExportError`` naming the
            operator and node). None only for ``input``/``weight``/``opaque`` (the writer
            writes them itself: parameters, literals, the original instruction), for
            ``noop``, which computes nothing, and for the knossos dialect's binders.
        kernel: the operator whose kernel this one runs as, when it is another's (TASO's
            ``ewadd`` is ``add``, ``ewmul`` is ``mul``: the same computation on the same
            operands), else None. Measured cost models measure and price both under one
            signature (:func:`kernel_of`).
        commutative: whether the operator's two operands may be swapped without changing
            the kernel's work (``add``, ``mul``, ``max``, ``min``, ``equal``): measured
            cost models put them in a fixed order before measuring.
        fusion: how a fusing compiler (XLA, https://openxla.org/xla/) runs it, one of
            :data:`FUSION_KINDS`: ``"elementwise"`` (one loop over the output, fused
            into its neighbours), ``"broadcast"`` (index arithmetic inside a fusion),
            ``"reshape"`` (data movement fused as index arithmetic: reshape, transpose,
            slice, pad, concatenation), ``"reduce"`` (a loop fusion root: its producers
            fuse into it, its output is written), ``"library"`` (a library call: dot,
            convolution; operands and output in memory) or ``"none"`` (a kernel of its
            own, or nothing at run time). Read by the ``xla`` cost model
            (:mod:`tensat_py.cost.xla`). Like the other fields, the last three are
            given in the operator's declaration.
    """

    name: str
    dialect: str
    evaluate: Evaluate
    cost: Cost
    to_onnx: ToOnnx | None
    onnx_types: tuple[str, ...] = ()
    launches_kernel: bool = True
    doc: str = field(default="", compare=False)
    to_hlo: ToHlo | None = None
    kernel: str | None = None
    commutative: bool = False
    fusion: str = "none"


_REGISTRY: dict[str, OpDef] = {}
_ONNX_IMPORTERS: dict[str, Callable[..., Any]] = {}


def register(op: OpDef) -> OpDef:
    """Add ``op`` to the registry.

    Raises:
        ValueError: the name is taken, or ``op.fusion`` is not one of
            :data:`FUSION_KINDS`.
    """
    if op.name in _REGISTRY:
        raise ValueError(f"operator `{op.name}` is registered twice")
    if op.fusion not in FUSION_KINDS:
        raise ValueError(f"operator `{op.name}`: fusion {op.fusion!r} is not one of {FUSION_KINDS}")
    _REGISTRY[op.name] = op
    return op


#: The values of :attr:`OpDef.fusion`.
FUSION_KINDS = ("elementwise", "broadcast", "reshape", "reduce", "library", "none")


def kernel_of(name: str) -> str:
    """The kernel operator ``name`` runs as: its :attr:`OpDef.kernel`, else ``name``
    itself (also for a name without a declaration).

    >>> kernel_of("ewadd"), kernel_of("add"), kernel_of("conv2d")
    ('add', 'add', 'conv2d')
    """
    _load()
    d = _REGISTRY.get(name)
    return (d.kernel or name) if d is not None else name


def get(name: str) -> OpDef:
    """The :class:`OpDef` of operator ``name``.

    Raises:
        KeyError: ``name`` is not an operator of the language (message names it).
    """
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"operator `{name}` has no Python declaration in tensat_py.ops") from None


def all_ops() -> dict[str, OpDef]:
    """Every registered operator by name."""
    _load()
    return dict(_REGISTRY)


def onnx_importer(*onnx_types: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register a function as the importer of ONNX operator types ``onnx_types``.

    The ONNX front end calls ``fn(importer, node_proto)``; see
    :mod:`tensat_py.frontends.onnx` for the importer's helper methods.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for t in onnx_types:
            if t in _ONNX_IMPORTERS:
                raise ValueError(f"ONNX operator `{t}` has two importers")
            _ONNX_IMPORTERS[t] = fn
        return fn

    return deco


def onnx_importers() -> dict[str, Callable[..., Any]]:
    """ONNX operator type -> importer function."""
    _load()
    return dict(_ONNX_IMPORTERS)


def default_bytes(ctx: OpContext) -> float:
    """Bytes moved when every tensor operand is read once and the output written once."""
    from tensat_py.graph import TensorType

    total = 0
    for t in (*ctx.inputs, ctx.output):
        parts = (t,) if isinstance(t, TensorType) else tuple(t)
        total += sum(prod(p.shape) * p.itemsize for p in parts)
    return float(total)


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from tensat_py.ops import hlo, knossos, taso, tensor  # noqa: F401  (registers the dialects)
