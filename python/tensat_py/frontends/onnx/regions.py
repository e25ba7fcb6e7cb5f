"""Which parts of an optimised graph still compute what the source model's nodes computed,
so that the exporter writes those nodes back as they were.

*Structural keys*: a graph node's key is a Merkle key, an integer interned from its
operator, its parameters and the keys of its operands (leaves are keyed by their
parameters, which carry their name, shape and dtype; an opaque node by its unique
symbol). Two nodes, in one graph or in two graphs keyed against one table, have equal
keys exactly when they are the same term up to the order of a commutative operator's
operands (``add``, ``mul``, ``max``, ``min``) and TASO's ``ewadd``/``ewmul`` read as
``add``/``mul``; so they compute the same value, bit for bit.

*Templates*: :func:`tensat_py.frontends.onnx.load` keys the graph it builds and records,
per ONNX node an importer translated, a :class:`SourceNode`: the ``NodeProto``, the types
of the values it read, and per output its key and its *template*, the translation with
the node's inputs as holes (constants stay terms, compared by key).

At export (:mod:`.exporter`) a :class:`Matcher` finds, for a node of the optimised graph,
a source node whose template it instantiates, holes bound to graph nodes of the types the
source node read: the source node's own term first (an unchanged part), else the largest
matching template (the same operator applied to rewritten inputs). Since an importer's
translation is exact for inputs of those types, the source ``NodeProto`` with its inputs
renamed to the bound values computes the graph node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx

from tensat_py.graph import Graph, TensorType

__all__ = [
    "KeyTable",
    "Template",
    "SourceNode",
    "Match",
    "Matcher",
    "structural_keys",
    "lookup_keys",
    "record",
]

#: ``(op, frozen params, operand keys) -> key``.
KeyTable = dict[tuple[Any, ...], int]


#: Operators whose two operands commute exactly (IEEE addition, multiplication, max and
#: min are commutative): their keys sort the operand keys, and templates match either
#: order, since extraction may pick either order of an e-class that ``add-comm`` filled.
_COMMUTATIVE = frozenset({"add", "mul", "max", "min"})
#: TASO's equal-shape operators are the broadcasting ones on equal shapes (the rules
#: ``ewadd-is-add``/``add-is-ewadd``): one key for both.
_SAME_AS = {"ewadd": "add", "ewmul": "mul"}


def _freeze(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, float):
        return ("f", v.hex())  # 1.0 and 1, 0.0 and -0.0 are different parameters
    return v


def _signature(node: Any, kids: tuple[int | None, ...]) -> tuple[Any, ...]:
    params = tuple(sorted((k, _freeze(v)) for k, v in node.params.items()))
    op = _SAME_AS.get(node.op, node.op)
    if op in _COMMUTATIVE and None not in kids:
        kids = tuple(sorted(kids))  # type: ignore[type-var]
    return (op, params, kids)


def structural_keys(graph: Graph, table: KeyTable) -> list[int]:
    """The structural key of every node of ``graph``, interning new terms in ``table``.

    Args:
        graph: any graph (nodes in topological order, as :class:`Graph` keeps them).
        table: the interning table, extended in place.

    Returns:
        One key per node, by node id.
    """
    keys: list[int] = []
    for node in graph.nodes:
        sig = _signature(node, tuple(keys[i] for i in node.inputs))
        k = table.get(sig)
        if k is None:
            k = len(table)
            table[sig] = k
        keys.append(k)
    return keys


def lookup_keys(graph: Graph, table: Mapping[tuple[Any, ...], int]) -> list[int | None]:
    """The structural keys of ``graph``'s nodes in ``table`` (not modified): None for a
    node whose term ``table`` does not hold (then every node above it has none either).

    Args:
        graph: the graph to key, typically an optimised one.
        table: a table filled by :func:`structural_keys` on the source graph.

    Returns:
        One key or None per node, by node id.
    """
    keys: list[int | None] = []
    for node in graph.nodes:
        kids = tuple(keys[i] for i in node.inputs)
        if any(k is None for k in kids):
            keys.append(None)
            continue
        keys.append(table.get(_signature(node, kids)))
    return keys


# ---------------------------------------------------------------------------- templates
#: A template: ``("h", position)`` the value of the ONNX node's input ``position``;
#: ``("k", key)`` a term without holes (weights, constants), by structural key;
#: ``("n", op, params, children)`` an operator applied to sub-templates.
Template = tuple[Any, ...]

#: Largest template (operator nodes) recorded per ONNX output.
_MAX_TEMPLATE = 64


@dataclass(frozen=True)
class SourceNode:
    """One ONNX node of the source model that an importer translated.

    Attributes:
        proto: the node as the (folded, shape-inferred) source model holds it.
        holes: the input positions read as graph values (not constants, not absent),
            with the type each had.
        outputs: per output, ``(ONNX value name, structural key, template)``: the key and
            the template are None for an output the model never reads; the template
            (the translation with the inputs as holes) is None where it reads no input
            or is too large.
    """

    proto: onnx.NodeProto
    holes: tuple[tuple[int, TensorType], ...]
    outputs: tuple[tuple[str, int | None, Template | None], ...]


def _template(
    graph: Graph, keys: Sequence[int], holes: Mapping[int, int], root: int
) -> Template | None:
    memo: dict[int, Template] = {}
    closed: dict[int, bool] = {}
    count = 0

    def has_hole(nid: int) -> bool:
        if nid not in closed:
            stack, order = [nid], set()
            while stack:
                i = stack.pop()
                if i in closed or i in order:
                    continue
                order.add(i)
                if i not in holes:
                    stack.extend(graph.nodes[i].inputs)
            for i in sorted(order):
                closed[i] = i not in holes and all(closed[c] for c in graph.nodes[i].inputs)
        return not closed[nid]

    def build(nid: int) -> Template | None:
        nonlocal count
        if nid in holes:
            return ("h", holes[nid])
        if not has_hole(nid):
            return ("k", keys[nid])
        if nid in memo:
            return memo[nid]
        count += 1
        if count > _MAX_TEMPLATE:
            return None
        node = graph.nodes[nid]
        kids = []
        for c in node.inputs:
            t = build(c)
            if t is None:
                return None
            kids.append(t)
        op, params, _ = _signature(node, ())
        memo[nid] = ("n", op, params, tuple(kids))
        return memo[nid]

    return build(root)


def record(
    graph: Graph,
    translated: Sequence[tuple[onnx.NodeProto, Sequence[int | None], Sequence[int | None]]],
    keys: Sequence[int],
) -> list[SourceNode]:
    """:class:`SourceNode` records of the translated ONNX nodes.

    Args:
        graph: the imported graph.
        translated: per ONNX node, ``(proto, input node ids, output node ids)``; an input
            id is None for a constant or absent input, an output id None for an unread
            output.
        keys: :func:`structural_keys` of ``graph``.
    """
    out = []
    for proto, ins, outs in translated:
        holes: dict[int, int] = {}
        hole_types: list[tuple[int, TensorType]] = []
        for pos, nid in enumerate(ins):
            if nid is None:
                continue
            holes.setdefault(nid, pos)
            hole_types.append((pos, graph.type_of(nid)))
        outputs = []
        for name, nid in zip(proto.output, outs, strict=True):
            if nid is None:
                outputs.append((name, None, None))
                continue
            t = _template(graph, keys, holes, nid)
            if t is not None and t[0] != "n":
                t = None  # an alias of an input (Identity) or a constant: nothing to write
            outputs.append((name, keys[nid], t))
        out.append(SourceNode(proto, tuple(hole_types), tuple(outputs)))
    return out


def _size(t: Template) -> int:
    return 1 + sum(_size(c) for c in t[3]) if t[0] == "n" else 0


def _positions(t: Template, out: set[int]) -> set[int]:
    if t[0] == "h":
        out.add(t[1])
    elif t[0] == "n":
        for c in t[3]:
            _positions(c, out)
    return out


@dataclass(frozen=True)
class Match:
    """A source node found in the optimised graph.

    Attributes:
        source: index into ``OnnxSource.source_nodes``.
        output: which output of the ONNX node the matched graph node computes.
        bindings: ``(input position, graph node id)`` for every non-constant input.
    """

    source: int
    output: int
    bindings: tuple[tuple[int, int], ...]


class Matcher:
    """Finds, for nodes of an optimised graph, a source ONNX node that computes them
    (its translation, with the inputs as holes, equals the node's term; the holes bind
    to nodes of the types the source node read).

    Args:
        graph: the optimised graph.
        table: the source graph's key table (read only).
        sources: the source nodes (:func:`record`).
    """

    def __init__(self, graph: Graph, table: Mapping[tuple[Any, ...], int], sources) -> None:
        self.graph = graph
        self.sources = sources
        self.keys = lookup_keys(graph, table)
        self.by_key: dict[int, tuple[int, int]] = {}
        self.by_root: dict[tuple[Any, ...], list[tuple[Template, int, int]]] = {}
        seen: set[tuple[Template, tuple]] = set()
        for s, src in enumerate(sources):
            need = {pos for pos, _ in src.holes}
            for j, (_, key, t) in enumerate(src.outputs):
                if t is None or _positions(t, set()) != need:
                    continue
                self.by_key.setdefault(key, (s, j))
                if (t, src.holes) in seen:  # the same translation of the same types
                    continue
                seen.add((t, src.holes))
                self.by_root.setdefault((t[1], t[2]), []).append((t, s, j))
        for cands in self.by_root.values():
            cands.sort(key=lambda c: -_size(c[0]))

    def match(self, nid: int) -> Match | None:
        """A source node computing graph node ``nid``: the one whose output had this very
        term when there is one, else the one with the largest translation; None when no
        source node computes it."""
        node = self.graph.nodes[nid]
        cands: list[tuple[Template, int, int]] = []
        key = self.keys[nid]
        if key is not None and key in self.by_key:
            s, j = self.by_key[key]
            cands.append((self.sources[s].outputs[j][2], s, j))
        op, params, _ = _signature(node, ())
        cands.extend(self.by_root.get((op, params), ()))
        for t, s, j in cands:
            types = dict(self.sources[s].holes)
            bind: dict[int, int] = {}
            if self._match(t, nid, bind, types):
                return Match(s, j, tuple(sorted(bind.items())))
        return None

    def _match(self, t: Template, nid: int, bind: dict[int, int], types) -> bool:
        g = self.graph
        if t[0] == "h":
            pos = t[1]
            if pos in bind:
                return bind[pos] == nid
            if g.nodes[nid].type != types[pos]:
                return False
            bind[pos] = nid
            return True
        if t[0] == "k":
            return self.keys[nid] == t[1]
        node = g.nodes[nid]
        op, params, _ = _signature(node, ())
        if (op, params) != (t[1], t[2]) or len(node.inputs) != len(t[3]):
            return False
        orders = [node.inputs]
        if op in _COMMUTATIVE and len(node.inputs) == 2:
            orders.append(node.inputs[::-1])
        for ins in orders:
            trial = dict(bind)
            if all(self._match(c, i, trial, types) for c, i in zip(t[3], ins, strict=True)):
                bind.clear()
                bind.update(trial)
                return True
        return False
