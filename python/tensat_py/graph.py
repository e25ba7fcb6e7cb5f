"""The front-end-neutral program form: :class:`Graph`, :class:`Node`, :class:`TensorType`.

A :class:`Graph` is a DAG of typed nodes in topological order. Every operator is one of
the unified language's operators (``docs/language.md``); parameters are named as in
``tensat_py._core.signatures()``. Types are never computed in Python: each node is
type-checked by the Rust e-class analysis through ``_core.TypeChecker`` as it is added,
so the shapes seen here are exactly those the e-graph will compute.

Conversions:

* :meth:`Graph.to_flat` gives the flat node list that ``_core.EGraph`` takes.
* :meth:`Graph.from_choices` rebuilds a graph from an exported e-graph and a chosen
  e-node per e-class (the result of extraction).

Opaque operators: a front end that meets an operator the language does not model adds it
with :meth:`Graph.add_opaque`: an ``opaque`` node whose ``type`` symbol
``name@d0_d1...`` names it (unique in the process) and gives its output shape, and whose
operands are any number of tensors. The rules cannot look inside it. What it computes is
known only to its *payload*, an :class:`OpaqueOp` object the front end supplies (the ONNX
front end keeps the ``NodeProto``); payloads live in ``Graph.meta["opaque"]`` by name, and
``meta`` travels with a program through :func:`tensat_py.optimize`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol, runtime_checkable

from tensat_py import _core

__all__ = [
    "GraphError",
    "Graph",
    "Node",
    "TensorType",
    "signatures",
    "LEAF_OPS",
    "ZERO_INPUT_OPS",
    "OPAQUE",
    "OpaqueOp",
    "operand_kinds",
    "operators",
    "param_text",
    "PARAM_KINDS",
    "DTYPE_BYTES",
    "split_typed_symbol",
    "typed_symbol",
]

#: Operators whose only operand is a ``name@d0_d1`` symbol.
ZERO_INPUT_OPS = frozenset({"input", "weight"})
#: Alias kept for readers: nodes that are leaves of the tensor DAG.
LEAF_OPS = ZERO_INPUT_OPS
#: The variadic operator for everything the language does not model.
OPAQUE = "opaque"


@runtime_checkable
class OpaqueOp(Protocol):
    """What a front end attaches to an ``opaque`` node (its *payload*).

    Attributes:
        op_type: the operator's name in the front end's format (``"Softmax"``), for
            listings and error messages.

    ``evaluate(args)`` computes the output from the tensor operands (NumPy arrays in the
    node's operand order, float32 or float64) and returns one array of the node's shape;
    it may raise ``NotImplementedError`` when the payload cannot run outside its own
    runtime. The NumPy executor calls it for ``opaque`` nodes.
    """

    op_type: str

    def evaluate(self, args: Sequence[Any]) -> Any:
        """The output array for operand arrays ``args``."""
        ...


class GraphError(ValueError):
    """A node could not be added (unknown operator, bad parameters, or a type error).

    The message names the node and carries the Rust analysis' message, e.g.
    ``node 'conv_3': conv2d: weight [8, 3, 3, 3] does not fit input [1, 4, 8, 8] ...``.
    """


#: Parameter kinds (the rest, ``"tensor"`` and ``"pair"``, are operands).
PARAM_KINDS = frozenset({"int", "float", "list", "sym"})
#: The dtypes of the language and their sizes in bytes.
DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
}


@cache
def signatures() -> dict[str, tuple[tuple[str, str], ...]]:
    """Operator signatures from the Rust core: ``{op: ((operand, kind), ...)}``.

    ``kind`` is ``"int"``, ``"float"``, ``"list"``, ``"sym"`` (parameters), ``"tensor"``
    or ``"pair"``; the order is the order of the e-node's children. A variadic operator
    (``opaque``) lists its fixed operands (see :func:`operators`).
    """
    return {op: tuple((str(n), str(k)) for n, k in args) for op, args in _core.signatures().items()}


@cache
def operators() -> dict[str, dict[str, Any]]:
    """Every operator the Rust core declares: ``{op: {"dialect", "operands", "variadic",
    "output", "summary"}}`` (``_core.operators()``)."""
    return dict(_core.operators())


def operand_kinds(op: str, n_children: int) -> tuple[tuple[str, str], ...]:
    """``(operand name, kind)`` for each of an e-node's ``n_children`` children.

    The signature, followed for a variadic operator (``opaque``) by its variadic operand
    repeated (named ``x0``, ``x1``, ...) up to ``n_children``.

    Raises:
        KeyError: unknown operator.
    """
    sig = signatures()[op]
    var = operators()[op]["variadic"]
    if var is not None and n_children > len(sig):
        return sig + tuple((f"x{i}", str(var[1])) for i in range(n_children - len(sig)))
    return sig


def param_text(kind: str, value: Any) -> str:
    """The flat-form text of a parameter leaf (``3``, ``0.5``, ``[1,0]``, ``x@2_3``).

    Raises:
        GraphError: the value does not fit the kind (a symbol that would read as a number
            or list, a non-integer list item, ...).
    """
    if kind == "int":
        return str(int(value))
    if kind == "float":
        return repr(float(value))
    if kind == "list":
        return "[" + ",".join(str(int(v)) for v in value) + "]"
    text = str(value)
    if not text or _NUMERIC_TEXT.fullmatch(text) or text.startswith("[") or " " in text:
        raise GraphError(f"symbol `{text}` would read as a number or list in the flat form")
    return text


@dataclass(frozen=True)
class TensorType:
    """The type of a tensor value.

    Attributes:
        shape: dimensions, outermost first (NCHW for images, OIHW for kernels).
        dtype: one of :data:`DTYPE_BYTES` (NumPy names: ``"float32"``, ``"bfloat16"``,
            ``"int64"``, ``"bool"``, ...).

    Raises:
        ValueError: an unknown dtype.
    """

    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown dtype `{self.dtype}`; known: {', '.join(DTYPE_BYTES)}")

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def numel(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return DTYPE_BYTES[self.dtype]

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return self.numel * self.itemsize


#: The type of a ``split`` node: the two parts.
PairType = tuple[TensorType, TensorType]


@dataclass(frozen=True)
class Node:
    """One operator application.

    Attributes:
        op: operator name in the language (``"conv2d"``, ``"matmul"``, ...).
        params: parameters by operand name (see :func:`signatures`): ``int``, ``float``,
            ``tuple[int, ...]`` for list parameters, ``str`` for symbols; ``input`` and
            ``weight`` carry ``{"name@shape": "x@2_3"}`` (``"x@2_3:float16"``).
        inputs: ids of earlier nodes, the tensor (or pair) operands in signature order.
        type: output type: a :class:`TensorType`, or a pair of them for ``split``.
        name: a readable name, unique in the graph for ``input``/``weight`` nodes.
        constant: True when every leaf below is a ``weight`` (pre-computed at inference).
    """

    op: str
    params: dict[str, Any]
    inputs: tuple[int, ...]
    type: TensorType | PairType
    name: str
    constant: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        """Output shape; raises ``TypeError`` for a split (which yields a pair)."""
        if isinstance(self.type, TensorType):
            return self.type.shape
        raise TypeError(f"node '{self.name}' ({self.op}) yields a pair, not a tensor")

    def symbol(self) -> str:
        """``name@d0_d1[:dtype]`` for input/weight nodes."""
        return str(self.params["name@shape"])

    @property
    def dtype(self) -> str:
        """Output dtype (of the first part, for a split)."""
        t = self.type
        return t.dtype if isinstance(t, TensorType) else t[0].dtype


def dims_text(shape: Iterable[int]) -> str:
    """``(2, 3)`` -> ``"2_3"`` (the language's dimension-list symbol)."""
    return "_".join(str(int(d)) for d in shape)


def parse_dims(text: str) -> tuple[int, ...]:
    """``"2_3"`` -> ``(2, 3)``; ``""`` -> ``()``. Raises ``ValueError`` when malformed."""
    if text == "":
        return ()
    try:
        return tuple(int(d) for d in text.split("_"))
    except ValueError:
        raise ValueError(f"`{text}` is not a dimension list d0_d1_...") from None


def split_symbol(sym: str) -> tuple[str, tuple[int, ...]]:
    """``"x@2_3"`` (or ``"x@2_3:float16"``) -> ``("x", (2, 3))``."""
    return split_typed_symbol(sym)[:2]


def split_typed_symbol(sym: str) -> tuple[str, tuple[int, ...], str]:
    """``"x@2_3:float16"`` -> ``("x", (2, 3), "float16")``; dtype float32 when absent.

    Raises:
        ValueError: not ``name@d0_d1[:dtype]``, or an unknown dtype.
    """
    name, sep, ty = sym.rpartition("@")
    if not sep:
        raise ValueError(f"`{sym}` is not name@d0_d1_...[:dtype]")
    dims, _, dtype = ty.partition(":")
    dtype = dtype or "float32"
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"`{sym}`: unknown dtype `{dtype}`")
    return name, parse_dims(dims), dtype


def typed_symbol(name: str, shape: Iterable[int], dtype: str = "float32") -> str:
    """``("x", (2, 3), "float16")`` -> ``"x@2_3:float16"`` (no suffix for float32)."""
    text = f"{name}@{dims_text(shape)}"
    return text if dtype == "float32" else f"{text}:{dtype}"


_BAD_NAME_CHARS = set(" \t\n()@;\"'[]:")
_NUMERIC_TEXT = re.compile(
    r"[+-]?([0-9]+|[0-9]*\.[0-9]*([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|inf)"
)


class Graph:
    """A typed tensor program: nodes in topological order plus its outputs.

    Build one with :class:`tensat_py.builder.GraphBuilder`, a front end, or directly with
    :meth:`add_input`, :meth:`add_weight` and :meth:`add_node`. Node ids are indices into
    :attr:`nodes`.
    """

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.outputs: list[int] = []
        #: Front-end data that travels with the program (copied by ``optimize``):
        #: ``"opaque"`` maps opaque names to :class:`OpaqueOp` payloads; a front end may keep
        #: its source model under its own key (``"onnx"``).
        self.meta: dict[str, Any] = {}
        self._tc = _core.TypeChecker()
        self._leaf_names: dict[str, int] = {}
        self._names: set[str] = set()

    # ------------------------------------------------------------------ building
    def add_node(
        self,
        op: str,
        params: Mapping[str, int | str] | None = None,
        inputs: Sequence[int] = (),
        name: str | None = None,
    ) -> int:
        """Append a node and return its id.

        Args:
            op: an operator of the language (``noop`` is not allowed: use :attr:`outputs`).
            params: parameters by operand name, as in :func:`signatures` (``int``, ``float``,
                a sequence of ints for ``list``, ``str`` for ``sym``).
            inputs: ids of earlier nodes for the tensor operands, in signature order.
            name: readable name; defaults to ``"{op}_{id}"``.

        Raises:
            GraphError: unknown operator, missing/extra parameters, a bad operand id, or a
                type error reported by the Rust analysis (message names node, op, shapes).
        """
        nid = len(self.nodes)
        name = name if name is not None else f"{op}_{nid}"
        sigs = signatures()
        if op not in sigs:
            raise GraphError(f"node '{name}': unknown operator `{op}`")
        if op == "noop":
            raise GraphError(f"node '{name}': noop is implicit; list outputs in Graph.outputs")
        if op == OPAQUE:
            return self._add_opaque_node(dict(params or {}), inputs, name)
        params = dict(params or {})
        wanted = {n for n, k in sigs[op] if k in PARAM_KINDS}
        extra = set(params) - wanted
        if extra:
            raise GraphError(
                f"node '{name}': {op} has no parameter(s) {sorted(extra)}; takes {sorted(wanted)}"
            )
        for n, k in sigs[op]:
            if n in params:
                params[n] = _check_param(name, op, n, k, params[n])
        inputs = tuple(int(i) for i in inputs)
        for i in inputs:
            if not 0 <= i < nid:
                raise GraphError(f"node '{name}': {op}: operand id {i} is not an earlier node")
        if op in ZERO_INPUT_OPS:
            sym = str(params.get("name@shape", ""))
            if sym in self._leaf_names:
                raise GraphError(f"node '{name}': duplicate {op} `{sym}`")
        try:
            tid = self._tc.add(op, params, list(inputs))
        except ValueError as e:
            raise GraphError(f"node '{name}': {e}") from None
        assert tid == nid, (tid, nid)
        kind = self._tc.kind(tid)
        dtype = self._tc.dtype(tid)
        ty: TensorType | PairType
        if kind == "pair":
            a, b = self._tc.pair_shapes(tid)
            ty = (TensorType(tuple(a), dtype), TensorType(tuple(b), dtype))
        else:
            ty = TensorType(tuple(self._tc.shape(tid)), dtype)
        node = Node(op, params, inputs, ty, name, bool(self._tc.constant(tid)))
        self.nodes.append(node)
        if op in ZERO_INPUT_OPS:
            self._leaf_names[str(params["name@shape"])] = nid
            self._names.add(name)
        return nid

    def _add_opaque_node(
        self, params: dict[str, int | str], inputs: Sequence[int], name: str
    ) -> int:
        nid = len(self.nodes)
        if set(params) != {"type"} or not isinstance(params["type"], str):
            raise GraphError(f"node '{name}': opaque takes one str parameter `type`, got {params}")
        ins = tuple(int(i) for i in inputs)
        for i in ins:
            if not 0 <= i < nid:
                raise GraphError(f"node '{name}': opaque: operand id {i} is not an earlier node")
            if not isinstance(self.nodes[i].type, TensorType):
                raise GraphError(f"node '{name}': opaque: operand {i} is a split pair")
        try:
            tid = self._tc.add(OPAQUE, params, list(ins))
        except ValueError as e:
            raise GraphError(f"node '{name}': {e}") from None
        assert tid == nid, (tid, nid)
        ty = TensorType(tuple(self._tc.shape(tid)), self._tc.dtype(tid))
        self.nodes.append(Node(OPAQUE, params, ins, ty, name, False))
        return nid

    def add_opaque(
        self,
        label: str,
        shape: Sequence[int],
        inputs: Sequence[int] = (),
        payload: OpaqueOp | None = None,
        name: str | None = None,
        dtype: str = "float32",
    ) -> int:
        """Append an operator the language does not model; returns its id.

        Args:
            label: readable stem of its unique symbol (e.g. the ONNX op type); characters
                other than letters, digits, ``_``, ``.`` and ``-`` become ``_``.
            shape: its output shape.
            inputs: ids of earlier nodes, its tensor operands in order (any number).
            payload: what computes it (see :class:`OpaqueOp`), stored in
                ``meta["opaque"]`` under the node's unique name.
            name: readable node name; defaults to ``"{label}_{id}"``.
            dtype: its output dtype.

        The symbol is ``{label}_{id}@{d0_d1...}``: unique in this graph (so two opaque
        operators on the same operands are never merged by the e-graph).

        Raises:
            GraphError: a bad operand id, or an operand that is a split pair.
        """
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", label) or "opaque"
        nid = len(self.nodes)
        key = f"{stem}_{nid}"
        table = self.meta.setdefault("opaque", {})
        while key in table:
            key += "_"
        sym = typed_symbol(key, shape, dtype)
        out = self.add_node(OPAQUE, {"type": sym}, inputs, name if name is not None else key)
        if payload is not None:
            table[key] = payload
        return out

    def opaque_key(self, nid: int) -> str:
        """The unique name of opaque node ``nid`` (its symbol before ``@``)."""
        node = self.nodes[nid]
        if node.op != OPAQUE:
            raise GraphError(f"node {nid} ({node.op}) is not opaque")
        return str(node.params["type"]).rpartition("@")[0]

    def opaque_payload(self, nid: int) -> OpaqueOp | None:
        """The payload of opaque node ``nid``, or None when its front end left none."""
        return self.meta.get("opaque", {}).get(self.opaque_key(nid))

    def opaque_nodes(self) -> list[int]:
        """Ids of the opaque nodes some output depends on, in order."""
        keep = self.live()
        return [i for i, n in enumerate(self.nodes) if n.op == OPAQUE and keep[i]]

    def _add_leaf(self, op: str, name: str, shape: Sequence[int], dtype: str = "float32") -> int:
        if not name or any(c in _BAD_NAME_CHARS for c in name):
            raise GraphError(
                f"{op} name `{name}` must be non-empty without spaces, parens, brackets, @ or :"
            )
        if dtype not in DTYPE_BYTES:
            raise GraphError(f"node '{name}': unknown dtype `{dtype}`; known: {list(DTYPE_BYTES)}")
        if name in self._names:
            raise GraphError(f"node '{name}': duplicate input/weight name")
        shape = tuple(int(d) for d in shape)
        if any(d < 1 for d in shape):
            raise GraphError(f"node '{name}': {op} dimensions must be positive, got {shape}")
        return self.add_node(op, {"name@shape": typed_symbol(name, shape, dtype)}, (), name)

    def add_input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> int:
        """Add a runtime input ``name`` of ``shape`` and ``dtype``; returns its id."""
        return self._add_leaf("input", name, shape, dtype)

    def add_weight(self, name: str, shape: Sequence[int], dtype: str = "float32") -> int:
        """Add a trained parameter ``name`` of ``shape`` and ``dtype``; returns its id."""
        return self._add_leaf("weight", name, shape, dtype)

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __getitem__(self, nid: int) -> Node:
        return self.nodes[nid]

    def inputs(self) -> list[int]:
        """Ids of ``input`` nodes, in order."""
        return [i for i, n in enumerate(self.nodes) if n.op == "input"]

    def weights(self) -> list[int]:
        """Ids of ``weight`` nodes, in order."""
        return [i for i, n in enumerate(self.nodes) if n.op == "weight"]

    def leaf_types(self) -> dict[str, TensorType]:
        """``{name: type}`` of every input and weight (the feeds a runner needs)."""
        return {n.name: n.type for n in self.nodes if n.op in ZERO_INPUT_OPS}  # type: ignore[misc]

    def op_counts(self) -> dict[str, int]:
        """``{op: count}`` over all nodes (inputs and weights included)."""
        return dict(Counter(n.op for n in self.nodes))

    def operator_counts(self, *, weight_only: bool | None = None) -> dict[str, int]:
        """``{op: count}`` over the program's operators: the nodes some output depends on,
        less leaves (``input``, ``weight``) and literals (operators declared with no
        operands that launch no kernel, such as ``scalar``). This is the count
        ``tensat optimize`` and ``tensat bench hlo`` report as "operators".

        Args:
            weight_only: ``True`` counts only weight-only operators (every leaf below is a
                weight: pre-computed at inference, cost 0), ``False`` only the others,
                ``None`` (default) both.

        >>> from tensat_py.builder import GraphBuilder
        >>> b = GraphBuilder()
        >>> x = b.input((2, 4), name="x")
        >>> _ = b.relu(x)  # not an output: not counted
        >>> b.finish([b.matmul(x, b.weight((4, 3), name="w"))]).operator_counts()
        {'matmul': 1}
        """
        live = self.live()
        return dict(
            Counter(
                n.op
                for i, n in enumerate(self.nodes)
                if live[i]
                and n.op not in LEAF_OPS
                and not _is_literal(n)
                and (weight_only is None or n.constant == weight_only)
            )
        )

    def num_operators(self) -> int:
        """How many operators the program has (:meth:`operator_counts`, summed)."""
        return sum(self.operator_counts().values())

    def type_of(self, nid: int) -> TensorType:
        """The tensor type of node ``nid`` (``TypeError`` for a split pair)."""
        t = self.nodes[nid].type
        if not isinstance(t, TensorType):
            raise TypeError(f"node {nid} is a split pair")
        return t

    def output_types(self) -> list[TensorType]:
        """Types of the outputs, in order."""
        return [self.type_of(o) for o in self.outputs]

    def live(self) -> list[bool]:
        """Per node, whether some output depends on it."""
        keep = [False] * len(self.nodes)
        stack = list(self.outputs)
        while stack:
            i = stack.pop()
            if keep[i]:
                continue
            keep[i] = True
            stack.extend(self.nodes[i].inputs)
        return keep

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(self.op_counts().items()))
        return f"Graph({len(self.nodes)} nodes, {len(self.outputs)} outputs: {counts})"

    # ------------------------------------------------------------------ conversions
    def _operands(self, node: Node) -> list[tuple[str, Any]]:
        """Signature-ordered operands: ('leaf', text) or ('node', id)."""
        out: list[tuple[str, Any]] = []
        it = iter(node.inputs)
        n_params = sum(1 for _, k in signatures()[node.op] if k in PARAM_KINDS)
        for n, k in operand_kinds(node.op, len(node.inputs) + n_params):
            if k in PARAM_KINDS:
                try:
                    out.append(("leaf", param_text(k, node.params[n])))
                except GraphError as e:
                    raise GraphError(f"node '{node.name}': {node.op}: {e}") from None
            else:
                out.append(("node", next(it)))
        return out

    def to_flat(self) -> list[tuple[str, list[int]]]:
        """The flat program ``_core.EGraph`` takes: ``[(op, [child index, ...]), ...]``.

        Parameters become leaf nodes (integer literal or symbol text) shared where equal
        and placed before first use; several outputs are joined by a left-nested chain of
        ``noop`` so the last node is the root. Only nodes some output depends on appear.

        Raises:
            GraphError: the graph has no outputs.
        """
        if not self.outputs:
            raise GraphError("graph has no outputs")
        keep = self.live()
        flat: list[tuple[str, list[int]]] = []
        leaves: dict[str, int] = {}
        index: dict[int, int] = {}

        def leaf(text: str) -> int:
            if text not in leaves:
                leaves[text] = len(flat)
                flat.append((text, []))
            return leaves[text]

        for nid, node in enumerate(self.nodes):
            if not keep[nid]:
                continue
            children = [leaf(v) if kind == "leaf" else index[v] for kind, v in self._operands(node)]
            index[nid] = len(flat)
            flat.append((node.op, children))
        root = index[self.outputs[0]]
        for o in self.outputs[1:]:
            flat.append(("noop", [root, index[o]]))
            root = len(flat) - 1
        if root != len(flat) - 1:  # single output that is not last: cannot happen (topo order)
            raise GraphError("internal: root is not the last node")
        return flat

    def to_sexpr(self, max_chars: int = 1_000_000) -> str:
        """The program as one s-expression (outputs joined by ``noop``); for debugging.

        Shared sub-terms are written out at every use, so the text can grow exponentially
        with the depth of a DAG; use :meth:`to_flat` to identify or hash programs.

        Raises:
            ValueError: when the text would exceed ``max_chars`` characters.
        """
        flat = self.to_flat()
        memo: list[str] = []
        for op, ch in flat:
            text = op if not ch else f"({op} {' '.join(memo[c] for c in ch)})"
            if len(text) > max_chars:
                raise ValueError(
                    f"s-expression longer than {max_chars} characters (shared sub-terms are "
                    "repeated); use to_flat()"
                )
            memo.append(text)
        return memo[-1]

    @classmethod
    def from_choices(
        cls, export: Mapping[str, Any], choices: Mapping[int, int] | Sequence[int]
    ) -> Graph:
        """Rebuild a graph from an exported e-graph and a chosen e-node per e-class.

        Args:
            export: ``EGraph.export()``: ``root``, ``node_op``, ``node_eclass``,
                ``node_children`` (child e-classes), ``classes`` (kind/value/shape/...).
            choices: e-class -> chosen e-node id (a dict, or a list with -1 for
                unreached classes).

        Walks from the root; parameters come from leaf classes' values, input/weight
        names, shapes and dtypes from their symbols, and the outputs from the ``noop`` chain at the
        root (noop nodes never appear in the result). Shared classes become shared nodes.

        Raises:
            GraphError: a reached class has no choice, the choice belongs to another class,
                the choices form a cycle, or the rebuilt program does not type-check.
        """
        node_op: Sequence[str] = export["node_op"]
        node_eclass: Sequence[int] = export["node_eclass"]
        node_children: Sequence[Sequence[int]] = export["node_children"]
        classes: Sequence[Mapping[str, Any]] = export["classes"]
        sigs = signatures()

        def choice(c: int) -> int:
            try:
                n = choices[c]  # type: ignore[index]
            except (KeyError, IndexError):
                n = -1
            if n is None or n < 0:
                raise GraphError(f"e-class {c} is reached but has no chosen e-node")
            if node_eclass[n] != c:
                raise GraphError(f"chosen e-node {n} belongs to class {node_eclass[n]}, not {c}")
            return int(n)

        # Outputs from the noop chain.
        outs: list[int] = []
        stack = [int(export["root"])]
        while stack:
            c = stack.pop()
            n = choice(c)
            if node_op[n] == "noop":
                a, b = node_children[n]
                stack.append(b)
                stack.append(a)
            else:
                outs.append(c)

        g = cls()
        built: dict[int, int] = {}
        state: dict[int, int] = {}  # 1 = on stack, 2 = done

        def leaf_value(c: int, kind: str) -> Any:
            v = classes[c].get("value")
            if kind == "int" and isinstance(v, int) and not isinstance(v, bool):
                return v
            if kind == "float" and isinstance(v, int | float) and not isinstance(v, bool):
                return float(v)
            if kind == "list" and isinstance(v, list | tuple):
                return tuple(int(i) for i in v)
            if kind == "sym" and isinstance(v, str):
                return v
            raise GraphError(f"e-class {c} should hold a {kind} parameter, holds {v!r}")

        for out in outs:
            work: list[int] = [out]
            while work:
                c = work[-1]
                if state.get(c) == 2:
                    work.pop()
                    continue
                n = choice(c)
                op = node_op[n]
                if op not in sigs or op == "noop":
                    raise GraphError(f"e-class {c}: chosen e-node {n} `{op}` is not an operator")
                ch = node_children[n]
                sig = operand_kinds(op, len(ch))
                if len(ch) != len(sig):
                    raise GraphError(f"e-node {n} `{op}` has {len(ch)} children, wants {len(sig)}")
                pending = [
                    cc
                    for (_, k), cc in zip(sig, ch, strict=True)
                    if k not in PARAM_KINDS and state.get(cc) != 2
                ]
                if pending:
                    if state.get(c) == 1:
                        raise GraphError(f"chosen e-nodes form a cycle through e-class {c} ({op})")
                    state[c] = 1
                    for cc in reversed(pending):  # first operand built first
                        if state.get(cc) == 1:
                            raise GraphError(
                                f"chosen e-nodes form a cycle through e-class {cc} (via {op})"
                            )
                        work.append(cc)
                    continue
                params: dict[str, Any] = {}
                inputs: list[int] = []
                for (pname, k), cc in zip(sig, ch, strict=True):
                    if k in PARAM_KINDS:
                        params[pname] = leaf_value(cc, k)
                    else:
                        inputs.append(built[cc])
                if op in ZERO_INPUT_OPS:
                    name, shape, dtype = split_typed_symbol(str(params["name@shape"]))
                    nid = g._add_leaf(op, name, shape, dtype)
                else:
                    nid = g.add_node(op, params, inputs, name=f"{op}_{len(g.nodes)}")
                built[c] = nid
                state[c] = 2
                work.pop()
        g.outputs = [built[c] for c in outs]
        return g

    @classmethod
    def from_nodes(
        cls,
        nodes: Iterable[Node],
        outputs: Sequence[int],
        meta: Mapping[str, Any] | None = None,
    ) -> Graph:
        """Rebuild (and re-type-check) a graph from nodes, e.g. after editing them.

        ``meta`` (e.g. the source graph's) is copied shallowly into the new graph.
        """
        g = cls()
        g.meta = dict(meta or {})
        for n in nodes:
            if n.op in ZERO_INPUT_OPS:
                name, shape, dtype = split_typed_symbol(n.symbol())
                g._add_leaf(n.op, name, shape, dtype)
            else:
                g.add_node(n.op, n.params, n.inputs, n.name)
        g.outputs = list(outputs)
        return g


def _is_literal(node: Node) -> bool:
    """Whether ``node`` is a literal: no tensor operands and an operator that launches no
    kernel (``scalar``); not counted as an operator (:meth:`Graph.operator_counts`)."""
    if node.inputs or node.op == OPAQUE:
        return False
    from tensat_py import ops

    try:
        return not ops.get(node.op).launches_kernel
    except KeyError:
        return False


def _check_param(node: str, op: str, pname: str, kind: str, v: Any) -> Any:
    """Validate parameter ``pname`` of kind ``kind`` and return it in its canonical form
    (``tuple`` for lists, ``float`` for floats)."""

    def bad(what: str) -> GraphError:
        return GraphError(f"node '{node}': {op}: parameter `{pname}` must be {what}, got {v!r}")

    if kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise bad("an int")
        return v
    if kind == "float":
        if isinstance(v, bool) or not isinstance(v, int | float) or v != v:
            raise bad("a float (not NaN)")
        return float(v)
    if kind == "list":
        if isinstance(v, str | bytes) or not isinstance(v, Sequence):
            raise bad("a sequence of ints")
        if any(isinstance(i, bool) or not isinstance(i, int) for i in v):
            raise bad("a sequence of ints")
        return tuple(v)
    if not isinstance(v, str):
        raise bad("a str")
    return v
