"""HLO module <-> :class:`~tensat_py.graph.Graph`.

**Import** (:func:`to_graph`): the entry computation becomes one graph; each instruction
goes through the importer its opcode registered (:data:`HLO_IMPORTERS`,
:func:`hlo_importer`, as ONNX operator types register theirs). Tuples are flattened
at the boundary: a tuple parameter becomes one ``input`` per array leaf
(``param.0``, ``param.1.0`` ...), a tuple root one graph output per leaf, and
``tuple``/``get-tuple-element`` inside the entry are resolved while translating (the
language needs no tuple type). ``call`` is inlined. Instructions translate into the
tensor dialect where the semantics match exactly (``add subtract multiply divide power
maximum minimum``, ``compare`` EQ/LT/LE/GT/GE, ``select``, ``clamp`` as max/min,
``convert``, ``reshape``, ``bitcast`` (transpose/reshape/transpose between its operand's
and its result's layouts), ``copy``, ``transpose``,
``slice``, ``pad`` without interior padding and a constant scalar value, ``exponential log
sqrt rsqrt negate abs tanh logistic erf``, ``reduce`` whose computation is add, maximum,
minimum or multiply with that operation's identity as init value, scalar ``constant``)
and into the hlo dialect (``dot``, ``convolution``, ``broadcast``, ``iota``,
``reduce-window``, ``concatenate``); array constants become ``weight`` nodes whose literal
is kept in ``Graph.meta["hlo"]``; integer scalars a float cannot hold exactly (beyond
2**53) stay literals too. Everything else (``while``, ``conditional``, ``custom-call``,
``sort``, ``scatter``, ``gather``, ``rng``, other reductions, a ``dot``/``convolution``
whose result type differs from its operands', ...) becomes an ``opaque`` node per array
leaf of its result, whose payload (:class:`HloOpaque`) keeps the instruction and every
computation it calls, and evaluates it through XLA.

A result the graph cannot hold (an element type the language lacks: ``c64``, ``f8e4m3fn``,
``s4``, ``token``...; a zero-sized array) stays HLO: its instruction waits until a consumer
computes something the graph holds, and then that consumer and every such instruction it
reads become one *region*, a computation of their own (``<name>.region``, parameters: the
graph values they read) that one opaque ``call`` runs. Only the entry's parameters and
results must be of types the language has (else :class:`HloTranslateError`).

**Export** (:func:`to_module`): every node prints through its operator's ``to_hlo``
(:class:`HloWriter` is the writer they get); inputs become the original entry parameters
(the signature is kept, so the original and the optimised module take the same
arguments), weights their constants (a literal with every value: an HLO source's text, or
the values the front end holds, up to :data:`LITERAL_LIMIT` elements; else, and for
weights without values, entry parameters after the inputs, sorted by name:
:func:`entry_leaves`), opaque nodes their original instruction (less
``control-predecessors``, which name instructions of the source computation) with the
computations it calls, and the outputs the original root structure. Integer constants
print as integers (XLA's parser refuses ``u64[] constant(16.0)``). A graph whose program
equals the one the import made (:meth:`~tensat_py.graph.Graph.to_flat`: nothing rewritten,
e.g. when the optimiser kept its input) exports as the source module itself, so it prints
as the input did.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensat_py import ops
from tensat_py.frontends.hlo.ir import (
    COMPUTATION_ATTRS,
    ELEMENT_TYPES,
    ArrayShape,
    Computation,
    Instruction,
    Module,
    Shape,
    TupleShape,
    leaf_shapes,
    print_module,
)
from tensat_py.graph import OPAQUE, Graph, GraphError, TensorType
from tensat_py.runtime.numpy_exec import node_context

__all__ = [
    "HloTranslateError",
    "HloOpaque",
    "HloSource",
    "HloWriter",
    "to_graph",
    "to_module",
    "hlo_importer",
    "HLO_IMPORTERS",
    "entry_leaves",
    "weight_values",
    "literal_text",
    "LITERAL_LIMIT",
    "ETYPE",
]

#: The language's dtype -> HLO element type.
ETYPE = {d: e for e, d in ELEMENT_TYPES.items() if d is not None}
#: The language's integer dtypes (their HLO literals are written without a fraction).
_INT_DTYPES = frozenset(d for d in ETYPE if d.startswith(("int", "uint")))

Tree = Any  # int (a node id) | list[Tree] (a tuple) | _Leaf (not held by the graph)

#: Weights with values of at most this many elements are written as ``constant`` literals
#: holding every value; larger ones, and weights without values (the zoo's TASO models
#: are built from shapes alone), become entry parameters after the source's (or the
#: graph inputs'), sorted by weight name (:func:`entry_leaves`). 4096 float32 elements
#: print as about 50 KiB of text. Array constants of an HLO source keep their literal.
LITERAL_LIMIT = 4096

#: Characters an HLO instruction name cannot hold.
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.\-]")


def _as_dtype(value: Any, dtype: str) -> np.ndarray:
    from tensat_py.ops.tensor import np_dtype

    with np.errstate(all="ignore"):
        return np.asarray(value).astype(np_dtype(dtype))


def _float_text(v: float) -> str:
    if v != v:
        return "nan"
    if v in (np.inf, -np.inf):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def literal_text(value: Any, dtype: str) -> str:
    """The HLO literal of array ``value`` in ``dtype`` (what ``constant(...)`` holds): a
    scalar alone, else ``{...}`` nested once per axis, outermost first (``{{1, 2}, {3,
    4}}`` for ``[2, 2]``). Booleans print ``true``/``false``, integers without a fraction
    (XLA's parser refuses ``16.0`` for an integer type), floats as the shortest decimal of
    their value widened to float64 (``repr``), which XLA's parser reads back to the very
    same float32/float16/bfloat16 value; ``nan``, ``inf``, ``-inf`` as such. Source: XLA's
    literal syntax (``xla/hlo/parser/hlo_parser.cc``, ``ParseDenseLiteral``)."""
    arr = _as_dtype(value, dtype)
    if dtype == "bool":
        items: Any = np.where(arr, "true", "false").tolist()
    elif dtype in _INT_DTYPES:
        items = [str(v) for v in arr.reshape(-1).tolist()]
        items = np.asarray(items, dtype=object).reshape(arr.shape).tolist()
    else:
        flat = arr.astype(np.float64).reshape(-1).tolist()
        items = np.asarray([_float_text(v) for v in flat], dtype=object).reshape(arr.shape)
        items = items.tolist()

    def nest(x: Any) -> str:
        return "{" + ", ".join(nest(y) for y in x) + "}" if isinstance(x, list) else str(x)

    return nest(items)


class HloTranslateError(ValueError):
    """An HLO module the translator cannot represent; ``file:line:col: message``."""


@dataclass
class HloSource:
    """What export needs of the module a graph came from (``Graph.meta["hlo"]``).

    Attributes:
        name: module name.
        entry: entry computation name.
        params: per entry parameter: its name, shape, and the input node names of its
            array leaves by path.
        root: the output structure: an output index, or a list of them (a tuple root,
            nested for nested tuples).
        constants: weight name -> (literal text, shape) of array constants.
        computations: every computation of the module by name (opaque nodes call some).
        order: computation names in text order (callees first).
        module: the parsed source module; ``program``: the imported graph's
            :meth:`~tensat_py.graph.Graph.to_flat` program (an equal graph exports as
            ``module``).
        effects: side-effecting instructions whose results nothing reads (a custom-call
            with ``custom_call_has_side_effect=true``, ``outfeed``, ``send``...), each with
            its operands' structure of output indices (graph outputs after the root's).
    """

    name: str
    entry: str
    params: list[tuple[str, Shape, dict[tuple[int, ...], str]]]
    root: Any
    constants: dict[str, tuple[str, ArrayShape]] = field(default_factory=dict)
    computations: dict[str, Computation] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    module: Module | None = field(default=None, repr=False)
    program: list[tuple[str, list[int]]] | None = field(default=None, repr=False)
    effects: list[tuple[Instruction, list[Any]]] = field(default_factory=list)


def _called(value: str) -> list[str]:
    return [s.strip().lstrip("%") for s in value.strip("{}").split(",") if s.strip()]


#: Attributes an instruction loses when it is re-emitted among other instructions: they
#: name instructions of its source computation (a scheduling order, not a value).
_LOCAL_ATTRS = frozenset({"control-predecessors"})


def _portable(attrs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``attrs`` without those naming instructions of the source computation."""
    return [(k, v) for k, v in attrs if k not in _LOCAL_ATTRS]


#: Opcodes whose execution has an effect beyond their result.
_EFFECT_OPCODES = frozenset({"outfeed", "infeed", "send", "send-done", "recv", "recv-done"})


def _side_effect(ins: Instruction) -> bool:
    """True for an instruction XLA keeps even when nothing reads its result."""
    if ins.opcode == "custom-call":
        return (ins.attr("custom_call_has_side_effect") or "").strip() == "true"
    return ins.opcode in _EFFECT_OPCODES


def _reachable(comp: Computation) -> set[str]:
    """Names of the instructions ``comp``'s root reads, transitively (the root too)."""
    by = comp.by_name()
    seen: set[str] = set()
    stack = [comp.root.name]
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(by[n].operands)
    return seen


def _closure(comps: dict[str, Computation], names: list[str]) -> list[str]:
    """``names`` and every computation they call, transitively."""
    seen: list[str] = []
    stack = list(names)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.append(n)
        for ins in comps[n].instructions:
            for k, v in ins.attrs:
                if k in COMPUTATION_ATTRS:
                    stack.extend(_called(v))
    return seen


@dataclass
class HloOpaque:
    """Payload of an ``opaque`` node made from an HLO instruction.

    Attributes:
        op_type: the HLO opcode.
        instruction: the original instruction (operand names as in the source).
        operand_shapes: the HLO shape of each operand.
        path: which array leaf of the instruction's result this node is (``()`` for an
            array result).
        group: identifies the instruction: nodes of one group are one instruction.
        computations: the computations it calls, transitively, in text order.
    """

    op_type: str
    instruction: Instruction
    operand_shapes: list[Shape]
    path: tuple[int, ...]
    group: str
    computations: list[Computation]

    def module(self) -> Module:
        """A module whose entry takes the operand leaves as parameters and returns leaf
        ``path`` of the instruction (what :meth:`evaluate` runs)."""
        w = HloWriter(set())
        leaves = []
        for sh in self.operand_shapes:
            for _, s in leaf_shapes(sh):
                leaves.append(w.emit("parameter", s, [], payload=str(len(leaves))))
        it = iter(leaves)
        operand_names = [_rebuild_w(w, sh, it) for sh in self.operand_shapes]
        ins = self.instruction
        cur = w.emit(ins.opcode, ins.shape, operand_names, _portable(ins.attrs))
        sub: Shape = ins.shape
        for i in self.path:
            assert isinstance(sub, TupleShape)
            sub = sub.parts[i]
            cur = w.emit("get-tuple-element", sub, [cur], [("index", str(i))])
        w.instructions[-1].root = True
        entry = "main"
        while any(c.name == entry for c in self.computations):
            entry += "_"
        return Module("opaque_eval", [*self.computations, Computation(entry, w.instructions, True)])

    def evaluate(self, args: Any) -> Any:
        """Run the instruction through XLA (:mod:`tensat_py.runtime.xla_exec`) on
        ``args`` (the array leaves of its operands, in order) and return leaf ``path``;
        float64 operands (verification) give a float64 result computed in the declared
        precision."""
        from tensat_py.runtime import xla_exec

        shapes = [s for sh in self.operand_shapes for _, s in leaf_shapes(sh)]
        feeds = [
            np.asarray(a).astype(xla_exec.np_dtype(s.etype))
            for a, s in zip(args, shapes, strict=True)
        ]
        out = xla_exec.run_text(print_module(self.module()), feeds)[0]
        wide = any(np.asarray(a).dtype == np.float64 for a in args)
        return out.astype(np.float64) if wide and out.dtype.kind == "f" else out


# ======================================================================== import
_BINARY = {
    "add": "add",
    "subtract": "sub",
    "multiply": "mul",
    "divide": "div",
    "power": "pow",
    "maximum": "max",
    "minimum": "min",
}
_UNARY = {
    "exponential": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "negate": "neg",
    "abs": "abs",
    "tanh": "tanh",
    "logistic": "sigmoid",
    "erf": "erf",
}
_COMPARE = {
    "EQ": "equal",
    "LT": "less",
    "LE": "less_equal",
    "GT": "greater",
    "GE": "greater_equal",
}
#: Reduction computation root opcode -> (reduce_* operator, reduce_window kind).
_REDUCERS = {
    "add": ("reduce_sum", "add"),
    "maximum": ("reduce_max", "max"),
    "minimum": ("reduce_min", "min"),
    "multiply": ("reduce_prod", "mul"),
}


class _Opaque(Exception):
    """Raised by a handler: translate this instruction as an opaque node."""


def _major_to_minor(shape: ArrayShape) -> list[int] | None:
    """The axes of ``shape`` from the slowest varying to the fastest in memory (reversed
    ``minor_to_major`` of its layout; row-major when it has none); None for a tiled or
    otherwise annotated layout (``{1,0:T(8,128)}``)."""
    n = len(shape.dims)
    if shape.layout is None:
        return list(range(n))
    text = shape.layout.replace(" ", "")
    if ":" in text:
        return None
    try:
        minor = [int(v) for v in text.split(",") if v]
    except ValueError:
        return None
    if sorted(minor) != list(range(n)):
        return None
    return minor[::-1]


def _holdable(shape: Shape) -> bool:
    """True when every array leaf of ``shape`` can be a graph value: an element type the
    language has and no zero-sized dimension."""
    return all(s.dtype is not None and all(s.dims) for _, s in leaf_shapes(shape))


@dataclass(eq=False)
class _Pending:
    """An instruction whose result the graph cannot hold (``c64``, ``token``, ``f8``..., a
    zero-sized array): it stays HLO text until a consumer computes something the graph
    can hold, and then it is part of that consumer's opaque region (:meth:`_Importer.region`).

    Attributes:
        ins: the instruction; ``operands``: its operand trees (node ids, lists for tuples,
            :class:`_Leaf` for the results of other pending instructions).
        nodes: once a region made it: the node id of each array leaf the graph can hold.
    """

    ins: Instruction
    operands: list[Any]
    nodes: dict[tuple[int, ...], int] | None = None


@dataclass(frozen=True, eq=False)
class _Leaf:
    """Array leaf ``path`` (of shape ``shape``) of a pending instruction's result."""

    pending: _Pending
    path: tuple[int, ...]
    shape: ArrayShape


def _list(text: str | None) -> tuple[int, ...]:
    if text is None:
        return ()
    inner = text.strip().strip("{}").strip()
    return tuple(int(v) for v in inner.split(",") if v.strip()) if inner else ()


def _window(text: str, rank: int) -> dict[str, list[int]]:
    """``{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}``."""
    out: dict[str, list[int]] = {
        "size": [1] * rank,
        "stride": [1] * rank,
        "pad": [0] * (2 * rank),
        "lhs_dilate": [1] * rank,
        "rhs_dilate": [1] * rank,
        "rhs_reversal": [0] * rank,
    }
    for part in text.strip().strip("{}").split():
        key, _, val = part.partition("=")
        if key not in out:
            raise _Opaque
        items = val.split("x")
        if key == "pad":
            vals = []
            for it in items:
                lo, _, hi = it.partition("_")
                vals += [int(lo), int(hi)]
            out[key] = vals
        else:
            out[key] = [int(v) for v in items]
        want = 2 * rank if key == "pad" else rank
        if len(out[key]) != want:
            raise ValueError(f"window `{key}` has {len(out[key])} values, expected {want}")
    return out


def _exact_int(literal: str, value: float) -> bool:
    """True when the integer ``literal`` equals ``value`` exactly (not so for integers
    beyond 2**53, which a scalar's float value rounds)."""
    try:
        return value.is_integer() and int(literal) == int(value)
    except ValueError:
        return False


class _Importer:
    def __init__(self, module: Module, file: str) -> None:
        self.m = module
        self.file = file
        self.g = Graph()
        self.comps = {c.name: c for c in module.computations}
        self.src = HloSource(
            module.name,
            module.entry.name,
            [],
            None,
            computations=self.comps,
            order=[c.name for c in module.computations],
            module=module,
        )
        self.names: set[str] = set()
        self.groups = itertools.count()
        self.effects: list[tuple[Instruction, list[Tree]]] = []

    def effect(self, ins: Instruction, operands: list[Tree]) -> None:
        """Keep a side effect whose result nothing reads (``jax.debug.print``'s
        custom-call, an outfeed) with its operands for export."""
        self.effects.append((ins, [self.settle(v) for v in operands]))

    def err(self, ins: Instruction, msg: str) -> HloTranslateError:
        return HloTranslateError(f"{self.file}:{ins.line}:{ins.col}: `{ins.name}`: {msg}")

    def unique(self, name: str) -> str:
        base = name
        k = 1
        while name in self.names:
            name = f"{base}_{k}"
            k += 1
        self.names.add(name)
        return name

    def dtype(self, ins: Instruction, s: ArrayShape) -> str:
        dt = s.dtype
        if dt is None:
            raise self.err(ins, f"element type `{s.etype}` has no counterpart in the language")
        if any(d == 0 for d in s.dims):
            raise self.err(ins, f"zero-sized shape {list(s.dims)} is not supported")
        return dt

    def run(self) -> Graph:
        entry = self.m.entry
        args: dict[int, Tree] = {}
        for p in entry.parameters():
            leaves: dict[tuple[int, ...], str] = {}

            def make(
                shape: Shape, path: tuple[int, ...], p: Instruction = p, leaves: dict = leaves
            ) -> Tree:
                if isinstance(shape, TupleShape):
                    return [make(s, (*path, i)) for i, s in enumerate(shape.parts)]
                name = self.unique(p.name + "".join(f".{i}" for i in path))
                nid = self.g.add_input(name, shape.dims, self.dtype(p, shape))
                leaves[path] = name
                return nid

            args[int(p.payload or 0)] = make(p.shape, ())
            self.src.params.append((p.name, p.shape, leaves))
        root = self.computation(entry, args)
        outs: list[int] = []

        def structure(v: Tree) -> Any:
            if isinstance(v, list):
                return [structure(x) for x in v]
            if isinstance(v, _Leaf):
                if not _holdable(v.shape):
                    self.dtype(v.pending.ins, v.shape)  # raises: the language cannot hold it
                v = self.settle(v)
            outs.append(v)
            return len(outs) - 1

        self.src.root = structure(root)
        if not outs:
            raise self.err(entry.root, "the entry computation returns no array")
        # Operands of side effects nothing reads are outputs too (beyond the root's), so
        # that export can print the effect again.
        for ins, operands in self.effects:
            if any(self.has_pending(v) for v in operands):
                raise self.err(ins, "a side effect on values the language cannot hold")
            self.src.effects.append((ins, [structure(v) for v in operands]))
        self.g.outputs = outs
        self.src.program = self.g.to_flat()
        self.g.meta["hlo"] = self.src
        self.g.meta["verify_runner"] = "xla"
        self.g.meta["frontend"] = "hlo"
        return self.g

    def computation(self, comp: Computation, args: dict[int, Tree]) -> Tree:
        by_name = comp.by_name()
        env: dict[str, Tree] = {}
        # Post-order from the root and from side effects whose results nothing reads;
        # other dead instructions are left out.
        live = _reachable(comp)
        read = {o for i in comp.instructions for o in i.operands}
        effects = [
            i
            for i in comp.instructions
            if i.name not in live and i.name not in read and _side_effect(i)
        ]
        order: list[Instruction] = []
        state: dict[str, int] = {}
        stack: list[tuple[Instruction, bool]] = [(comp.root, False)]
        stack += [(i, False) for i in reversed(effects)]
        while stack:
            ins, done = stack.pop()
            if done:
                state[ins.name] = 2
                order.append(ins)
                continue
            if state.get(ins.name):
                if state[ins.name] == 1:
                    raise self.err(ins, "operands form a cycle")
                continue
            state[ins.name] = 1
            stack.append((ins, True))
            for o in reversed(ins.operands):
                if state.get(o) != 2:
                    if state.get(o) == 1:
                        raise self.err(ins, f"operand `{o}` forms a cycle")
                    stack.append((by_name[o], False))
        dead_effects = {i.name for i in effects}
        for ins in order:
            if ins.name in env:
                continue
            ops_ = [env[o] for o in ins.operands]
            if ins.name in dead_effects:
                self.effect(ins, ops_)
                env[ins.name] = []
                continue
            try:
                env[ins.name] = self.instruction(ins, ops_, args, by_name)
            except _Opaque:
                env[ins.name] = self.opaque(ins, ops_, comp)
            except GraphError as e:
                raise self.err(ins, str(e)) from None
            except (ValueError, KeyError, IndexError) as e:
                if isinstance(e, HloTranslateError):
                    raise
                raise self.err(ins, f"cannot read {ins.opcode}: {e}") from None
        return env[comp.root.name]

    # ------------------------------------------------------------------ helpers
    def add(self, op: str, params: dict[str, Any], inputs: list[int], ins: Instruction) -> int:
        nid = self.g.add_node(op, params, inputs, name=ins.name)
        t = self.g.type_of(nid)
        s = ins.shape
        if isinstance(s, ArrayShape) and (t.shape != s.dims or t.dtype != s.dtype):
            raise self.err(
                ins,
                f"declared {s.etype}{list(s.dims)} but {op} computes {t.dtype} {list(t.shape)}",
            )
        return nid

    def scalar_value(self, nid: int) -> float | None:
        n = self.g.nodes[nid]
        if n.op == "scalar":
            return float(n.params["value"])
        if n.op == "broadcast_in_dim":
            return self.scalar_value(n.inputs[0])
        return None

    def reducer(self, ins: Instruction) -> str | None:
        """The root opcode of a two-parameter reduction computation (add, maximum, ...)."""
        name = ins.attr("to_apply")
        if name is None:
            return None
        comp = self.comps[_called(name)[0]]
        params = comp.parameters()
        r = comp.root
        if len(params) != 2 or r.opcode not in _REDUCERS:
            return None
        if sorted(r.operands) != sorted(p.name for p in params):
            return None
        return r.opcode

    def identity_init(self, kind: str, init: int) -> bool:
        v = self.scalar_value(init)
        if v is None:
            return False
        dt = self.g.nodes[init].dtype
        if kind == "add":
            return v == 0.0
        if kind == "multiply":
            return v == 1.0
        if dt in _INT_DTYPES:
            info = np.iinfo(dt)
            return v == float(info.min if kind == "maximum" else info.max)
        return v == (-np.inf if kind == "maximum" else np.inf)

    def bitcast(self, x: int, src: ArrayShape, out: ArrayShape, ins: Instruction) -> int:
        """``bitcast``: the operand's elements in its layout's physical order, read back in
        the result's layout (transpose, reshape, transpose; one reshape between row-major
        layouts). Tiled layouts are opaque."""
        a, b = _major_to_minor(src), _major_to_minor(out)
        if a is None or b is None:
            raise _Opaque
        if a != sorted(a):
            x = self.g.add_node("transpose", {"perm": tuple(a)}, [x], name=ins.name)
        physical = tuple(out.dims[d] for d in b)
        if self.g.nodes[x].shape != physical:
            x = self.g.add_node("reshape", {"shape": physical}, [x], name=ins.name)
        if b != sorted(b):
            perm = tuple(b.index(i) for i in range(len(b)))
            x = self.g.add_node("transpose", {"perm": perm}, [x], name=ins.name)
        t = self.g.type_of(x)
        if t.shape != out.dims:
            raise self.err(ins, f"bitcast of {list(src.dims)} gives {list(t.shape)}")
        return x

    def array(self, v: Tree, ins: Instruction) -> int:
        if isinstance(v, list):
            raise _Opaque
        return v

    # --------------------------------------------------------------- handlers
    def instruction(
        self,
        ins: Instruction,
        a: list[Tree],
        args: dict[int, Tree],
        by_name: dict[str, Instruction],
    ) -> Tree:
        op = ins.opcode
        s = ins.shape
        if op == "parameter":
            return args[int(ins.payload or 0)]
        if op == "tuple":
            return list(a)
        if op == "get-tuple-element":
            return a[0][int(ins.attr("index") or 0)]
        if op == "call":
            callee = self.comps[_called(ins.attr("to_apply") or "")[0]]
            return self.computation(callee, dict(enumerate(a)))
        if any(self.has_pending(v) for v in a):
            a = [self.settle(v) for v in a]
        if not _holdable(s) or any(self.has_pending(v) for v in a):
            pending = _Pending(ins, list(a))
            if _holdable(s):  # a result the graph holds: the region ends here
                return self.leaves(pending, self.region(pending))
            return self.leaves(pending)
        if isinstance(s, TupleShape) or any(isinstance(x, list) for x in a):
            raise _Opaque
        dt = self.dtype(ins, s)
        x = [self.array(v, ins) for v in a]
        handler = HLO_IMPORTERS.get(op)
        if handler is None:
            raise _Opaque
        return handler(self, ins, x, dt, by_name)

    def constant(self, ins: Instruction, s: ArrayShape, dt: str) -> int:
        text = (ins.payload or "").strip()
        if not s.dims:
            lit = text.strip("{} ")
            low = lit.lower()
            v: float | None
            if low in ("true", "false"):
                v = 1.0 if low == "true" else 0.0
            else:
                try:
                    v = float(low)
                except ValueError:
                    v = None
            if v is not None and dt in _INT_DTYPES and not _exact_int(lit, v):
                v = None  # a float value cannot hold it exactly: kept as its literal
            if v is not None and not np.isnan(v):
                return self.add("scalar", {"value": v, "dtype": dt}, [], ins)
        name = self.unique(ins.name)
        nid = self.g.add_weight(name, s.dims, dt)
        self.src.constants[name] = (text, s)
        return nid

    # ------------------------------------------------------- pending instructions
    def has_pending(self, v: Tree) -> bool:
        """True when tree ``v`` has a leaf the graph does not hold yet."""
        if isinstance(v, list):
            return any(self.has_pending(x) for x in v)
        return isinstance(v, _Leaf)

    def settle(self, v: Tree) -> Tree:
        """``v`` with every pending leaf the graph can hold made a node (the region of its
        instruction); leaves it cannot hold stay pending."""
        if isinstance(v, list):
            return [self.settle(x) for x in v]
        if isinstance(v, _Leaf) and _holdable(v.shape):
            p = v.pending
            if p.nodes is None:
                p.nodes = self.region(p)
            return p.nodes[v.path]
        return v

    def leaves(self, p: _Pending, nodes: dict[tuple[int, ...], int] | None = None) -> Tree:
        """The result tree of pending instruction ``p``: node ids where ``nodes`` has them,
        :class:`_Leaf` elsewhere."""
        p.nodes = nodes if nodes is not None else p.nodes

        def make(shape: Shape, path: tuple[int, ...]) -> Tree:
            if isinstance(shape, TupleShape):
                return [make(x, (*path, i)) for i, x in enumerate(shape.parts)]
            if p.nodes is not None and path in p.nodes:
                return p.nodes[path]
            return _Leaf(p, path, shape)

        return make(p.ins.shape, ())

    def region(self, p: _Pending) -> dict[tuple[int, ...], int]:
        """Opaque nodes for the array leaves of ``p``'s result that the graph can hold:
        ``p`` and the pending instructions it reads become a computation of their own
        (``<name>.region``, parameters: the node values they read), called by one ``call``
        instruction, which the nodes' :class:`HloOpaque` payload keeps."""
        w = HloWriter(set())
        flat: list[int] = []
        params: dict[int, str] = {}
        emitted: dict[int, str] = {}
        called: list[str] = []

        def shape_of(v: Tree) -> Shape:
            if isinstance(v, list):
                return TupleShape(tuple(shape_of(x) for x in v))
            if isinstance(v, _Leaf):
                return v.shape
            return w.shape(self.g.type_of(v))

        def operand(v: Tree) -> str:
            if isinstance(v, list):
                return w.emit("tuple", shape_of(v), [operand(x) for x in v])
            if isinstance(v, _Leaf):
                cur = emit(v.pending)
                sub: Shape = v.pending.ins.shape
                for i in v.path:
                    assert isinstance(sub, TupleShape)
                    sub = sub.parts[i]
                    cur = w.emit("get-tuple-element", sub, [cur], [("index", str(i))])
                return cur
            if v not in params:
                params[v] = w.emit(
                    "parameter", shape_of(v), [], payload=str(len(flat)), name=w.fresh("arg")
                )
                flat.append(v)
            return params[v]

        def emit(q: _Pending) -> str:
            if id(q) not in emitted:
                names = [operand(x) for x in q.operands]
                ins = q.ins
                called.extend(c for k, v in ins.attrs if k in COMPUTATION_ATTRS for c in _called(v))
                emitted[id(q)] = w.emit(
                    ins.opcode,
                    ins.shape,
                    names,
                    _portable(ins.attrs),
                    ins.payload,
                    w.fresh(ins.name),
                )
            return emitted[id(q)]

        root = emit(p)
        w.instructions[-1].root = True
        assert w.instructions[-1].name == root
        name = p.ins.name + ".region"
        k = 1
        while name in self.comps:
            name = f"{p.ins.name}.region{k}"
            k += 1
        comp = Computation(name, w.instructions)
        names = set(_closure(self.comps, called)) if called else set()
        comps = [c for c in self.m.computations if c.name in names] + [comp]
        self.comps[name] = comp
        self.src.order.append(name)
        shapes: list[Shape] = [shape_of(v) for v in flat]
        call = Instruction(
            p.ins.name,
            p.ins.shape,
            "call",
            [params[v] for v in flat],
            [("to_apply", f"%{name}")],
            line=p.ins.line,
            col=p.ins.col,
        )
        group = f"{name}#{next(self.groups)}"
        nodes: dict[tuple[int, ...], int] = {}
        for path, leaf in leaf_shapes(p.ins.shape):
            if not _holdable(leaf):
                continue
            payload = HloOpaque(p.ins.opcode, call, shapes, path, group, comps)
            nodes[path] = self.g.add_opaque(
                p.ins.opcode, leaf.dims, flat, payload, name=None, dtype=self.dtype(p.ins, leaf)
            )
        return nodes

    def opaque(self, ins: Instruction, a: list[Tree], comp: Computation) -> Tree:
        a = [self.settle(v) for v in a]  # made by instruction() already (memoised)
        flat: list[int] = []
        shapes: list[Shape] = []
        by_name = comp.by_name()

        def walk(v: Tree) -> None:
            if isinstance(v, list):
                for x in v:
                    walk(x)
            else:
                flat.append(v)

        for o, v in zip(ins.operands, a, strict=True):
            walk(v)
            shapes.append(_graph_shape(self.g, v, by_name[o].shape))
        called = [c for k, v in ins.attrs if k in COMPUTATION_ATTRS for c in _called(v)]
        names = _closure(self.comps, called)
        comps = [c for c in self.m.computations if c.name in names]
        group = f"{ins.name}#{next(self.groups)}"

        def make(shape: Shape, path: tuple[int, ...]) -> Tree:
            if isinstance(shape, TupleShape):
                return [make(p, (*path, i)) for i, p in enumerate(shape.parts)]
            dt = self.dtype(ins, shape)
            payload = HloOpaque(ins.opcode, ins, shapes, path, group, comps)
            return self.g.add_opaque(ins.opcode, shape.dims, flat, payload, name=None, dtype=dt)

        return make(ins.shape, ())


# ------------------------------------------------------------------ opcode importers
#: HLO opcode -> its importer ``fn(importer, ins, operands, dtype, by_name) -> node id``,
#: registered with :func:`hlo_importer` (as ONNX operator types register theirs with
#: :func:`tensat_py.ops.onnx_importer`). ``operands`` are the node ids of the array
#: operands, ``dtype`` the result's; an importer raises ``_Opaque`` for a form the
#: language does not hold exactly (the instruction then becomes an ``opaque`` node).
#: Opcodes without an importer are opaque. ``parameter``, ``tuple``,
#: ``get-tuple-element`` and ``call`` are the computation's structure, resolved by the
#: importer itself.
HLO_IMPORTERS: dict[str, Callable[..., int]] = {}


def hlo_importer(*opcodes: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Decorator: register ``fn`` as the importer of HLO ``opcodes``.

    Raises:
        ValueError: an opcode already has an importer.
    """

    def deco(fn: Callable[..., int]) -> Callable[..., int]:
        for op in opcodes:
            if op in HLO_IMPORTERS:
                raise ValueError(f"HLO opcode `{op}` has two importers")
            HLO_IMPORTERS[op] = fn
        return fn

    return deco


@hlo_importer("constant")
def _import_constant(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """A scalar ``scalar`` node; an array constant a ``weight`` keeping its literal."""
    assert isinstance(ins.shape, ArrayShape)
    return imp.constant(ins, ins.shape, dt)


@hlo_importer(*_BINARY)
def _import_binary(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``add subtract multiply divide power maximum minimum``: the tensor dialect's."""
    return imp.add(_BINARY[ins.opcode], {}, x, ins)


@hlo_importer(*_UNARY)
def _import_unary(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``exponential log sqrt rsqrt negate abs tanh logistic erf``."""
    return imp.add(_UNARY[ins.opcode], {}, x, ins)


@hlo_importer("compare")
def _import_compare(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``compare`` EQ/LT/LE/GT/GE of FLOAT or SIGNED type (others opaque)."""
    d = ins.attr("direction")
    if d not in _COMPARE or ins.attr("type") not in (None, "FLOAT", "SIGNED"):
        raise _Opaque
    return imp.add(_COMPARE[d], {}, x, ins)


@hlo_importer("select")
def _import_select(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    return imp.add("select", {}, x, ins)


@hlo_importer("clamp")
def _import_clamp(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``clamp(lo, x, hi)`` as ``min(max(x, lo), hi)``."""
    lo = imp.g.add_node("max", {}, [x[1], x[0]], name=ins.name)
    return imp.add("min", {}, [lo, x[2]], ins)


@hlo_importer("convert")
def _import_convert(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    return imp.add("cast", {"dtype": dt}, x, ins)


@hlo_importer("copy")
def _import_copy(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    return x[0]


@hlo_importer("bitcast")
def _import_bitcast(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """Between layouts of one element type (:meth:`_Importer.bitcast`); else opaque."""
    s = ins.shape
    declared = by_name[ins.operands[0]].shape
    if not isinstance(declared, ArrayShape) or not isinstance(s, ArrayShape):
        raise _Opaque
    if declared.etype != s.etype:
        raise _Opaque
    return imp.bitcast(x[0], declared, s, ins)


@hlo_importer("reshape")
def _import_reshape(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    assert isinstance(ins.shape, ArrayShape)
    if imp.g.nodes[x[0]].shape == ins.shape.dims:
        return x[0]
    return imp.add("reshape", {"shape": ins.shape.dims}, x, ins)


@hlo_importer("transpose")
def _import_transpose(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    return imp.add("transpose", {"perm": _list(ins.attr("dimensions"))}, x, ins)


@hlo_importer("broadcast")
def _import_broadcast(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``broadcast`` with increasing ``dimensions``: ``broadcast_in_dim``."""
    assert isinstance(ins.shape, ArrayShape)
    dims = _list(ins.attr("dimensions"))
    if any(b <= c for c, b in itertools.pairwise(dims)):
        raise _Opaque
    return imp.add("broadcast_in_dim", {"shape": ins.shape.dims, "dims": dims}, x, ins)


@hlo_importer("slice")
def _import_slice(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``slice={[start:limit:stride], ...}``: the tensor dialect's ``slice`` on every axis."""
    text = (ins.attr("slice") or "").strip().strip("{}")
    starts, ends, steps = [], [], []
    for part in [p.strip().strip("[]") for p in text.split(",") if p.strip()]:
        v = [int(t) for t in part.split(":")]
        starts.append(v[0])
        ends.append(v[1])
        steps.append(v[2] if len(v) > 2 else 1)
    axes = tuple(range(len(starts)))
    p = {"starts": starts, "ends": ends, "axes": axes, "steps": steps}
    return imp.add("slice", p, x, ins)


@hlo_importer("pad")
def _import_pad(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``pad`` with non-negative edges, no interior padding and a constant scalar value."""
    value = imp.scalar_value(x[1])
    parts = (ins.attr("padding") or "").split("x")
    lo, hi = [], []
    for part in parts:
        v = [int(t) for t in part.split("_")]
        if len(v) > 2 and v[2] != 0:
            raise _Opaque
        lo.append(v[0])
        hi.append(v[1])
    if value is None or min(lo + hi, default=0) < 0 or np.isnan(value):
        raise _Opaque
    pads = (*lo, *hi)
    return imp.add("pad", {"pads": pads, "mode": "constant", "value": value}, x[:1], ins)


@hlo_importer("concatenate")
def _import_concatenate(
    imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any
) -> int:
    return imp.add("concatenate", {"dim": _list(ins.attr("dimensions"))[0]}, x, ins)


@hlo_importer("dot")
def _import_dot(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``dot`` of two operands of the result's type: ``dot_general``."""
    if any(imp.g.type_of(v).dtype != dt for v in x):
        raise _Opaque  # mixed precision (preferred_element_type): not the language's
    if len(x) != 2:
        raise _Opaque
    p = {
        "lhs_batch": _list(ins.attr("lhs_batch_dims")),
        "rhs_batch": _list(ins.attr("rhs_batch_dims")),
        "lhs_contract": _list(ins.attr("lhs_contracting_dims")),
        "rhs_contract": _list(ins.attr("rhs_contracting_dims")),
    }
    return imp.add("dot_general", p, x, ins)


@hlo_importer("convolution")
def _import_convolution(
    imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any
) -> int:
    """``convolution`` with ``dim_labels``, no kernel reversal, operands of the result's
    type: the hlo dialect's ``convolution``."""
    if any(imp.g.type_of(v).dtype != dt for v in x):
        raise _Opaque  # mixed precision (preferred_element_type): not the language's
    labels = ins.attr("dim_labels")
    if labels is None or len(x) != 2:
        raise _Opaque
    assert isinstance(ins.shape, ArrayShape)
    n = len(ins.shape.dims) - 2
    w = _window(ins.attr("window") or "{}", n)
    if any(w["rhs_reversal"]):
        raise _Opaque
    p = {
        "strides": w["stride"],
        "padding": w["pad"],
        "lhs_dilation": w["lhs_dilate"],
        "rhs_dilation": w["rhs_dilate"],
        "dim_labels": labels,
        "feature_groups": int(ins.attr("feature_group_count") or 1),
        "batch_groups": int(ins.attr("batch_group_count") or 1),
    }
    return imp.add("convolution", p, x, ins)


@hlo_importer("iota")
def _import_iota(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    assert isinstance(ins.shape, ArrayShape)
    dim = int(ins.attr("iota_dimension") or 0)
    return imp.add("iota", {"shape": ins.shape.dims, "dtype": dt, "dim": dim}, [], ins)


@hlo_importer("reduce")
def _import_reduce(imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any) -> int:
    """``reduce`` by add/maximum/minimum/multiply from that operation's identity."""
    kind = imp.reducer(ins)
    if kind is None or len(x) != 2 or not imp.identity_init(kind, x[1]):
        raise _Opaque
    axes = tuple(sorted(_list(ins.attr("dimensions"))))
    if not axes:
        return x[0]
    return imp.add(_REDUCERS[kind][0], {"axes": axes, "keepdims": 0}, x[:1], ins)


@hlo_importer("reduce-window")
def _import_reduce_window(
    imp: _Importer, ins: Instruction, x: list[int], dt: str, by_name: Any
) -> int:
    """``reduce-window`` by add/maximum/minimum from the identity, without dilation,
    reversal or negative padding: ``reduce_window``."""
    kind = imp.reducer(ins)
    if kind not in ("add", "maximum", "minimum") or len(x) != 2:
        raise _Opaque
    if not imp.identity_init(kind, x[1]):
        raise _Opaque
    assert isinstance(ins.shape, ArrayShape)
    w = _window(ins.attr("window") or "{}", len(ins.shape.dims))
    if any(v != 1 for v in w["lhs_dilate"] + w["rhs_dilate"]) or any(w["rhs_reversal"]):
        raise _Opaque
    if min(w["pad"], default=0) < 0:
        raise _Opaque
    p = {
        "kind": _REDUCERS[kind][1],
        "window": w["size"],
        "strides": w["stride"],
        "padding": w["pad"],
    }
    return imp.add("reduce_window", p, x[:1], ins)


def _graph_shape(g: Graph, v: Tree, declared: Shape) -> Shape:
    """The HLO shape of a translated operand (layouts dropped)."""
    if isinstance(v, list):
        assert isinstance(declared, TupleShape)
        return TupleShape(
            tuple(_graph_shape(g, x, d) for x, d in zip(v, declared.parts, strict=True))
        )
    t = g.type_of(v)
    return ArrayShape(ETYPE[t.dtype], t.shape)


def to_graph(module: Module, file: str = "<hlo>") -> Graph:
    """Translate a parsed module into a graph (see the module docstring).

    Raises:
        HloTranslateError: an entry parameter or result of an element type or shape the
            language cannot hold (inside the entry such values become opaque regions), a
            malformed attribute, or an ill-typed instruction (``file:line:col: message``).
    """
    return _Importer(module, file).run()


# ======================================================================== export
class HloWriter:
    """Collects the instructions of one entry computation; ``to_hlo`` functions call it.

    Every method returns the name of the instruction holding its result.
    """

    def __init__(self, reserved: set[str]) -> None:
        self.instructions: list[Instruction] = []
        self.reserved = set(reserved)
        self.counter = itertools.count(1)
        self.reducers: dict[tuple[str, str], Computation] = {}
        self._consts: dict[tuple[str, str], str] = {}

    def fresh(self, stem: str) -> str:
        """A new instruction name ``stem.N`` (characters HLO names lack in ``stem``, as
        in ONNX names like ``a/b:0``, become ``_``)."""
        stem = _NAME_BAD.sub("_", stem)
        if not stem or not (stem[0].isalpha() or stem[0] == "_"):
            stem = "_" + stem
        while True:
            name = f"{stem}.{next(self.counter)}"
            if name not in self.reserved:
                self.reserved.add(name)
                return name

    def name_for(self, stem: str) -> str:
        """``stem`` itself when it is a valid HLO name not taken yet, else :meth:`fresh`."""
        if _NAME_BAD.search(stem) or not stem or not (stem[0].isalpha() or stem[0] == "_"):
            return self.fresh(stem)
        if stem in self.reserved:
            return self.fresh(stem)
        self.reserved.add(stem)
        return stem

    def shape(self, ty: TensorType) -> ArrayShape:
        """The HLO array shape of ``ty``."""
        return ArrayShape(ETYPE[ty.dtype], tuple(ty.shape))

    def emit(
        self,
        opcode: str,
        ty: TensorType | Shape,
        operands: list[str] | tuple[str, ...] | Any,
        attrs: Any = (),
        payload: str | None = None,
        name: str | None = None,
    ) -> str:
        """Append ``name = shape opcode(operands), attrs``; returns the name."""
        shape = self.shape(ty) if isinstance(ty, TensorType) else ty
        name = name or self.fresh(opcode.replace("-", "_"))
        self.instructions.append(
            Instruction(name, shape, opcode, list(operands), list(attrs), payload)
        )
        return name

    def constant(self, value: Any, dtype: str) -> str:
        """A scalar ``constant`` of ``dtype`` (shared between uses): ``true``/``false``,
        an integer without a fraction for integer dtypes, ``repr`` of the float (``inf``,
        ``nan``) otherwise, as XLA's literal parser reads them.

        Raises:
            HloExportError: a non-integral value for an integer dtype.
        """
        if dtype == "bool":
            text = "true" if bool(value) else "false"
        elif dtype in _INT_DTYPES:
            # XLA's parser reads integer literals only ("expects integer" for `16.0`).
            v = float(value)
            if not v.is_integer():
                raise HloExportError(f"constant {value!r} is not an integer of type {dtype}")
            text = str(int(v))
        else:
            v = float(value)
            if np.isnan(v):
                text = "nan"
            elif np.isinf(v):
                text = "inf" if v > 0 else "-inf"
            else:
                text = repr(v)
        key = (text, dtype)
        if key not in self._consts:
            self._consts[key] = self.emit(
                "constant", TensorType((), dtype), [], payload=text, name=self.fresh("constant")
            )
        return self._consts[key]

    def literal(self, value: Any, dtype: str, name: str | None = None) -> str:
        """An array ``constant`` holding every element of ``value`` (converted to
        ``dtype``), written by :func:`literal_text`; returns its name."""
        arr = _as_dtype(value, dtype)
        return self.emit(
            "constant",
            TensorType(tuple(arr.shape), dtype),
            [],
            payload=literal_text(arr, dtype),
            name=name or self.fresh("constant"),
        )

    def tuple(self, names: Sequence[str], types: Sequence[TensorType]) -> str:
        """A ``tuple`` of ``names`` (of ``types``); returns its name."""
        shape = TupleShape(tuple(self.shape(t) for t in types))
        return self.emit("tuple", shape, list(names))

    def get_tuple_element(self, name: str, types: Sequence[TensorType], k: int) -> str:
        """Element ``k`` of the tuple ``name`` (of element ``types``)."""
        return self.emit("get-tuple-element", self.shape(types[k]), [name], [("index", str(k))])

    def reducer(self, opcode: str, dtype: str) -> str:
        """Name of a computation ``(a, b) -> opcode(a, b)`` on ``dtype`` scalars."""
        key = (opcode, dtype)
        if key not in self.reducers:
            name = self.fresh(f"tensat_{opcode}_{ETYPE[dtype]}")
            s = ArrayShape(ETYPE[dtype], ())
            body = [
                Instruction("a", s, "parameter", [], [], "0"),
                Instruction("b", s, "parameter", [], [], "1"),
                Instruction("r", s, opcode, ["a", "b"], [], None, True),
            ]
            self.reducers[key] = Computation(name, body)
        return self.reducers[key].name

    def reshape(self, name: str, ty: TensorType, shape: tuple[int, ...]) -> str:
        """``reshape`` of ``name`` (of type ``ty``) to ``shape`` (none when equal)."""
        if tuple(ty.shape) == tuple(shape):
            return name
        return self.emit("reshape", TensorType(tuple(shape), ty.dtype), [name])

    def broadcast(self, name: str, ty: TensorType, shape: tuple[int, ...]) -> str:
        """``name`` (of type ``ty``) broadcast to ``shape`` by NumPy's rule."""
        shape = tuple(shape)
        if tuple(ty.shape) == shape:
            return name
        r, n = len(ty.shape), len(shape)
        keep = [i for i in range(r) if ty.shape[i] == shape[n - r + i]]
        if len(keep) != r:
            name = self.reshape(name, ty, tuple(ty.shape[i] for i in keep))
        dims = "{" + ",".join(str(n - r + i) for i in keep) + "}"
        return self.emit("broadcast", TensorType(shape, ty.dtype), [name], [("dimensions", dims)])

    def elementwise(self, opcode: str, ctx: ops.OpContext, ins: Any, attrs: Any = ()) -> str:
        """``opcode`` on the operands broadcast to the output shape."""
        out = ctx.output
        assert isinstance(out, TensorType)
        names = [
            self.broadcast(n, t, out.shape)  # type: ignore[arg-type]
            for n, t in zip(ins, ctx.inputs, strict=True)
        ]
        return self.emit(opcode, out, names, attrs)


class HloExportError(ValueError):
    """A graph that cannot be written as HLO (an operator without ``to_hlo``)."""


def weight_values(graph: Graph) -> dict[str, np.ndarray]:
    """The values the graph's front end holds for its weights (an ONNX model's
    initializers: ``graph.meta["onnx"]``), by weight name; empty when none."""
    src = graph.meta.get("onnx")
    fn = getattr(src, "weight_values", None)
    return dict(fn(graph)) if fn is not None else {}


def _weight_plan(
    graph: Graph,
    values: Mapping[str, Any],
    literal_limit: int | None,
    *,
    texts: bool = True,
) -> tuple[dict[int, str], list[int]]:
    """``({weight id: literal text}, [weight ids written as parameters])`` for the live
    weights of ``graph`` (see :data:`LITERAL_LIMIT`); the parameters sorted by name.
    ``texts=False``: the literals are left empty (only the parameters are wanted)."""
    src: HloSource | None = graph.meta.get("hlo")
    live = graph.live()
    literals: dict[int, str] = {}
    params: list[int] = []
    for nid in graph.weights():
        if not live[nid]:
            continue
        node = graph.nodes[nid]
        known = src.constants.get(node.name) if src is not None else None
        if known is not None:
            literals[nid] = known[0]
            continue
        t = graph.type_of(nid)
        v = values.get(node.name)
        size = int(np.prod(t.shape)) if t.shape else 1
        if v is not None and (literal_limit is None or size <= literal_limit):
            arr = np.asarray(v)
            if tuple(arr.shape) != tuple(t.shape):
                raise HloExportError(
                    f"weight `{node.name}`: its value has shape {list(arr.shape)}, "
                    f"the graph says {list(t.shape)}"
                )
            literals[nid] = literal_text(arr, t.dtype) if texts else ""
        else:
            params.append(nid)
    params.sort(key=lambda i: graph.nodes[i].name)
    return literals, params


def entry_leaves(
    graph: Graph,
    *,
    weights: Mapping[str, Any] | None = None,
    literal_limit: int | None = LITERAL_LIMIT,
) -> list[str]:
    """The graph leaf each array parameter leaf of ``graph``'s module holds, in order
    (tuple parameters flattened, as :func:`~tensat_py.frontends.hlo.random_args` and
    XLA's runner take them): input names (``param.0`` ... for an HLO source's tuple
    parameters), then the weights written as parameters (:data:`LITERAL_LIMIT`).
    Arguments as for :func:`to_module`."""
    src: HloSource | None = graph.meta.get("hlo")
    names: list[str] = []
    if src is not None:
        for pname, shape, leaves in src.params:
            for path, _ in leaf_shapes(shape):
                names.append(leaves.get(path, pname + "".join(f".{i}" for i in path)))
    else:
        names = [graph.nodes[i].name for i in graph.inputs()]
    values = weight_values(graph) if weights is None else weights
    _, params = _weight_plan(graph, values, literal_limit, texts=False)
    return names + [graph.nodes[i].name for i in params]


def to_module(
    graph: Graph,
    *,
    weights: Mapping[str, Any] | None = None,
    literal_limit: int | None = LITERAL_LIMIT,
) -> Module:
    """The HLO module computing ``graph`` (see the module docstring).

    Weights print as ``constant`` literals holding their values (an HLO source's array
    constants as they were; ``weights``, else :func:`weight_values`, for the others) when
    they have at most ``literal_limit`` elements (None: any size), else, and when their
    values are unknown, as entry parameters after the inputs, sorted by name
    (:data:`LITERAL_LIMIT`, :func:`entry_leaves`).

    Raises:
        HloExportError: an operator whose HLO form cannot write its parameters (one
            line naming the operator and node), an input that is no parameter of the
            source module.
    """
    src: HloSource | None = graph.meta.get("hlo")
    if src is not None and src.module is not None and graph.to_flat() == src.program:
        return src.module
    values = weight_values(graph) if weights is None else weights
    literals, weight_params = _weight_plan(graph, values, literal_limit)
    comps = src.computations if src is not None else {}
    w = HloWriter(set(comps) | {p[0] for p in (src.params if src else [])})
    live = graph.live()
    names: dict[int, str] = {}
    by_input = {n.name: i for i, n in enumerate(graph.nodes) if n.op == "input"}
    # Parameters, in the source's order and shapes.
    if src is not None:
        for k, (pname, shape, leaves) in enumerate(src.params):
            w.emit("parameter", shape, [], payload=str(k), name=pname)
            for path, leaf in leaves.items():
                if leaf not in by_input:
                    continue
                cur, sub = pname, shape
                for j, idx in enumerate(path):
                    assert isinstance(sub, TupleShape)
                    sub = sub.parts[idx]
                    cur = w.emit(
                        "get-tuple-element",
                        sub,
                        [cur],
                        [("index", str(idx))],
                        name=w.fresh(f"{pname}.{''.join(map(str, path[: j + 1]))}"),
                    )
                names[by_input[leaf]] = cur
    else:
        for k, nid in enumerate(graph.inputs()):
            names[nid] = w.emit(
                "parameter",
                graph.type_of(nid),
                [],
                payload=str(k),
                name=w.fresh(graph.nodes[nid].name),
            )
    first = len(src.params) if src is not None else len(graph.inputs())
    for k, nid in enumerate(weight_params):
        names[nid] = w.emit(
            "parameter",
            graph.type_of(nid),
            [],
            payload=str(first + k),
            name=w.name_for(graph.nodes[nid].name),
        )
    groups: dict[str, str] = {}
    used_comps: list[str] = []
    for nid, node in enumerate(graph.nodes):
        if not live[nid] or nid in names:
            continue
        ins_names = [names[i] for i in node.inputs]
        if node.op == "input":
            raise HloExportError(f"input `{node.name}` is not a parameter of the source module")
        if node.op == "weight":
            names[nid] = w.emit(
                "constant", graph.type_of(nid), [], payload=literals[nid], name=w.fresh(node.name)
            )
            continue
        if node.op == OPAQUE:
            payload = graph.opaque_payload(nid)
            if not isinstance(payload, HloOpaque):
                raise HloExportError(f"opaque node `{node.name}` has no HLO payload")
            if payload.group not in groups:
                ins = payload.instruction
                k = iter(ins_names)
                operand_names = []
                for sh in payload.operand_shapes:
                    operand_names.append(_rebuild_w(w, sh, k))
                base = w.emit(
                    ins.opcode,
                    ins.shape,
                    operand_names,
                    _portable(ins.attrs),
                    name=w.fresh(ins.name.split(".")[0]),
                )
                groups[payload.group] = base
                for c in payload.computations:
                    if c.name not in used_comps:
                        used_comps.append(c.name)
            cur = groups[payload.group]
            sub: Shape = payload.instruction.shape
            for idx in payload.path:
                assert isinstance(sub, TupleShape)
                sub = sub.parts[idx]
                cur = w.emit("get-tuple-element", sub, [cur], [("index", str(idx))])
            names[nid] = cur
            continue
        opdef = ops.get(node.op)
        if opdef.to_hlo is None:
            raise HloExportError(f"operator `{node.op}` (node `{node.name}`) has no HLO form")
        ctx = node_context(node, graph)
        try:
            names[nid] = opdef.to_hlo(w, ctx, ins_names)
        except HloExportError:
            raise
        except (ValueError, KeyError, TypeError) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise HloExportError(
                f"operator `{node.op}` (node `{node.name}`) has no HLO form here: {msg}"
            ) from None
    # Root.
    structure = (
        src.root
        if src is not None
        else (list(range(len(graph.outputs))) if len(graph.outputs) > 1 else 0)
    )

    def build(s: Any) -> tuple[str, Shape]:
        if isinstance(s, list):
            parts = [build(x) for x in s]
            shape = TupleShape(tuple(p[1] for p in parts))
            return w.emit("tuple", shape, [p[0] for p in parts]), shape
        nid = graph.outputs[s]
        return names[nid], w.shape(graph.type_of(nid))

    root_name, _ = build(structure)
    for ins, operands in src.effects if src is not None else []:
        w.emit(
            ins.opcode,
            ins.shape,
            [build(v)[0] for v in operands],
            _portable(ins.attrs),
            name=w.fresh(ins.name.split(".")[0]),
        )
        used_comps.extend(c for k, v in ins.attrs if k in COMPUTATION_ATTRS for c in _called(v))
    for ins in w.instructions:
        if ins.name == root_name:
            ins.root = True
    # Computations: the called ones in source order (callees first), the writer's, entry.
    order = src.order if src is not None else []
    needed = _closure(comps, used_comps) if used_comps else []
    out_comps = [comps[n] for n in order if n in needed]
    out_comps += list(w.reducers.values())
    entry_name = src.entry if src is not None else "main"
    out_comps.append(Computation(entry_name, w.instructions, True))
    return Module(src.name if src is not None else "tensat", out_comps)


def _rebuild_w(w: HloWriter, shape: Shape, leaves: Any) -> str:
    if isinstance(shape, ArrayShape):
        return next(leaves)
    parts = [_rebuild_w(w, p, leaves) for p in shape.parts]
    return w.emit("tuple", shape, parts)
