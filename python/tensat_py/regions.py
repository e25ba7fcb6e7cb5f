"""Regions of a large program: repeated blocks found once, large graphs cut where one value
flows.

Real models repeat one block many times (transformer layers, ResNet stages) and grow to
thousands of operators, where one e-graph over the whole program hits its node limit after a
few iterations and its ILP grows with depth. Here a program is cut into *regions* that are
explored and extracted one at a time, and a region that repeats is optimised once:

1. **Cut points.** Walk the operators that compute at run time (weight-only ones aside) in
   topological order; after an operator that is then the only value still to be read
   later (graph inputs and weights aside), the program can be cut: what comes after reads
   what came before only through that value. The operators between two cuts form a
   *segment* (a transformer layer gives two: attention up to the first residual sum, and
   the MLP up to the second).
2. **Structural keys.** Each segment is keyed by its canonical form: operators, parameters
   and the shapes and dtypes of what it reads, with the names of inputs and weights
   replaced by their first-use positions (so two layers with different weights, of the
   same shapes, get one key; a graph input and a value from an earlier region are
   alike). The weight-only operators a segment reads are part of it (copied into each
   segment that reads them). Opaque operators carry their own payload, so a segment
   holding one keeps a key of its own.
3. **Blocks.** The smallest period ``p`` at which the segment keys repeat groups them into
   blocks of ``p`` segments (a layer); each block is a region, and the segments before and
   after the repeated run are regions of their own (split into chunks of at most
   :data:`MAX_REGION_OPERATORS` operators). Regions with equal keys form a *class*.
4. **Optimise once, apply to every copy.** The pipeline (:mod:`tensat_py.pipeline`) builds
   each class's representative as a program of its own (:meth:`Region.subgraph`: the value
   it reads from the region before becomes an ``input``), explores and extracts it, and
   :func:`stitch` writes the extracted program into every copy of the class, its weights
   renamed to the copy's.

So the e-graph and the ILP grow with the number of *distinct* blocks, not with depth.
Structural hashing of program graphs is HloEnv's idea (Bai et al., "HloEnv", 2022) for
deduplicating modules; cut points at single-value frontiers are the "articulation
points" along a DAG's topological order.

>>> from tensat_py.builder import GraphBuilder
>>> b = GraphBuilder()
>>> x = b.input((4, 8), name="x")
>>> for i in range(3):
...     x = b.relu(b.matmul(x, b.weight((8, 8), name=f"w{i}")))
>>> p = partition(b.finish([x]), min_operators=0)
>>> [len(r.nodes) for r in p.regions], p.num_classes
([2, 2, 2], 1)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensat_py.graph import LEAF_OPS, OPAQUE, Graph, TensorType

__all__ = [
    "MAX_REGION_OPERATORS",
    "PARTITION_OPERATORS",
    "REPEAT_COPIES",
    "REPEAT_OPERATORS",
    "Partition",
    "Region",
    "partition",
    "stitch",
]

#: Programs with fewer operators are optimised whole (``optimize(regions=None)``): above
#: the Tensat zoo's largest model (NasNet-A, 383 operators), whose cross-cell rewrites
#: (NasRNN's matmuls merged across time steps) a cut would lose ...
PARTITION_OPERATORS = 400
#: ... unless they have at least this many operators and one block repeats at least
#: :data:`REPEAT_COPIES` times, so that exploring one copy of each class sees at most a
#: quarter of the program (a 6-layer transformer stack: 198 operators, 33 explored; no zoo
#: model: NasRNN's cell repeats 4 times).
REPEAT_OPERATORS = 150
#: See :data:`REPEAT_OPERATORS`.
REPEAT_COPIES = 5
#: A span of segments that does not repeat is cut into regions of at most this many
#: operators (a segment larger than this stays whole).
MAX_REGION_OPERATORS = 400
#: Prefix of the ``input`` leaves that stand for the value a region reads from the one
#: before (:meth:`Region.subgraph`).
BOUNDARY = "tensat_region_in"


@dataclass
class Region:
    """Consecutive segments of a program (ids into the program's ``nodes``).

    Attributes:
        nodes: the region's operators in a topological order: the run-time ones of its
            segments, each weight-only operator they read just before its first reader.
        reads: what the region reads from outside, in first-use order: ids of ``input``
            and ``weight`` leaves and of run-time operators of earlier regions.
        writes: ids of the region's operators read later or returned by the program.
        key: the structural key (equal keys: the same program up to leaf names).
        cls: index of the region's class (regions with one key) in :attr:`Partition.classes`.
    """

    nodes: list[int]
    reads: list[int]
    writes: list[int]
    key: str = ""
    cls: int = -1

    def operators(self, graph: Graph) -> int:
        """Run-time operators of the region (weight-only ones not counted)."""
        return sum(1 for i in self.nodes if not graph.nodes[i].constant)

    def subgraph(self, graph: Graph) -> Graph:
        """The region as a program of its own: each run-time value it reads from an
        earlier region becomes an ``input`` leaf ``tensat_region_in{k}`` (``k``: its
        position in :attr:`reads`), leaves keep their names, its outputs are
        :attr:`writes` in order. Opaque payloads are shared with ``graph``.

        Raises:
            GraphError: a value read from before is a ``split`` pair (never a cut).
        """
        sub = Graph()
        sub.meta = dict(graph.meta)
        ids: dict[int, int] = {}
        for k, i in enumerate(self.reads):
            node = graph.nodes[i]
            if node.op in LEAF_OPS:
                ids[i] = sub.add_node(node.op, node.params, (), node.name)
            else:
                t = graph.type_of(i)
                ids[i] = sub.add_input(f"{BOUNDARY}{k}", t.shape, t.dtype)
        for i in self.nodes:
            node = graph.nodes[i]
            ids[i] = sub.add_node(node.op, node.params, [ids[j] for j in node.inputs], node.name)
        sub.outputs = [ids[i] for i in self.writes]
        return sub


@dataclass
class Partition:
    """A program's regions and their classes (see the module docstring).

    Attributes:
        regions: the regions in program order.
        classes: per class, the indices of its regions (the first is the representative).
        segments: how many segments the cut points gave.
    """

    regions: list[Region]
    classes: list[list[int]] = field(default_factory=list)
    segments: int = 0

    @property
    def num_classes(self) -> int:
        """How many distinct regions there are."""
        return len(self.classes)

    def stats(self, graph: Graph) -> dict[str, int]:
        """Figures for the result's statistics: ``segments``, ``regions``, ``classes``,
        ``operators`` (run-time, all regions) and ``explored_operators`` (run-time, one
        region per class: what exploration and extraction see)."""
        return {
            "segments": self.segments,
            "regions": len(self.regions),
            "classes": self.num_classes,
            "operators": sum(r.operators(graph) for r in self.regions),
            "explored_operators": sum(self.regions[c[0]].operators(graph) for c in self.classes),
        }


def partition(
    graph: Graph,
    *,
    min_operators: int = PARTITION_OPERATORS,
    max_region_operators: int = MAX_REGION_OPERATORS,
    repeat_operators: int = REPEAT_OPERATORS,
) -> Partition:
    """Cuts ``graph`` into regions (see the module docstring).

    Args:
        graph: the program.
        min_operators: a program with fewer run-time operators stays one region, unless
            it has at least ``repeat_operators`` and a block repeats
            :data:`REPEAT_COPIES` times covering three quarters of it.
        max_region_operators: the largest region cut from a span that does not repeat.
        repeat_operators: see ``min_operators``.

    Returns:
        the :class:`Partition`; one region (the whole program) when it is small, has no
        cut point, or neither repeats nor exceeds ``max_region_operators``.
    """
    live = graph.live()
    flow = [
        i for i, n in enumerate(graph.nodes) if live[i] and n.op not in LEAF_OPS and not n.constant
    ]
    if len(flow) < max(min(min_operators, repeat_operators), 2):
        return _whole(graph, flow, live)
    part = _cut(graph, flow, max_region_operators)
    if len(flow) >= min_operators or len(part.regions) < 2:
        return part if len(part.regions) > 1 else _whole(graph, flow, live)
    st = part.stats(graph)
    copies = max(len(c) for c in part.classes)
    if copies >= REPEAT_COPIES and 4 * st["explored_operators"] <= st["operators"]:
        return part
    return _whole(graph, flow, live)


def _cut(graph: Graph, flow: list[int], max_region_operators: int) -> Partition:
    """The regions of ``graph`` (run-time operators ``flow``), whatever its size."""
    live = graph.live()
    segments = _segments(graph, flow)
    keys = [_key(graph, _members(graph, seg)) for seg in segments]
    sizes = [len(seg) for seg in segments]
    spans = _blocks(keys, sizes, max_region_operators)
    if len(spans) < 2:
        return _whole(graph, flow, live)
    regions = [_region(graph, [i for s in range(a, b) for i in segments[s]]) for a, b in spans]
    _mark_writes(graph, regions)
    by_key: dict[str, int] = {}
    classes: list[list[int]] = []
    for r, region in enumerate(regions):
        region.key = _key(graph, region.nodes, region.writes)
        c = by_key.setdefault(region.key, len(classes))
        if c == len(classes):
            classes.append([])
        classes[c].append(r)
        region.cls = c
    return Partition(regions, classes, len(segments))


def stitch(graph: Graph, part: Partition, programs: Sequence[Graph]) -> Graph:
    """The program ``graph`` with every region replaced by its class's optimised program.

    Args:
        graph: the input program.
        part: its partition.
        programs: per class, the optimised program of the class's representative (same
            leaves and outputs as ``part.regions[c[0]].subgraph(graph)``).

    Returns:
        a new program: for each region, the class's program with the representative's
        leaves renamed to the region's own (matched by position in :attr:`Region.reads`)
        and its ``tensat_region_in{k}`` inputs bound to the values the region reads. Equal
        operators on equal operands are built once (weight-only operators that several
        regions copied, for one).

    Raises:
        GraphError: a program does not fit its regions (a bug).
    """
    out = Graph()
    out.meta = dict(graph.meta)
    built: dict[int, int] = {}  # graph node id -> out id
    memo: dict[tuple[Any, ...], int] = {}

    def leaf(i: int) -> int:
        if i not in built:
            n = graph.nodes[i]
            built[i] = out.add_node(n.op, n.params, (), n.name)
        return built[i]

    for region in part.regions:
        rep = part.regions[part.classes[region.cls][0]]
        prog = programs[region.cls]
        names = {}  # representative's leaf symbol -> this region's read id
        bound = {}  # boundary position -> this region's read id
        for k, (mine, theirs) in enumerate(zip(region.reads, rep.reads, strict=True)):
            node = graph.nodes[theirs]
            if node.op in LEAF_OPS:
                names[node.symbol()] = mine
            else:
                bound[f"{BOUNDARY}{k}"] = mine
        ids: dict[int, int] = {}
        for j, node in enumerate(prog.nodes):
            if node.op in LEAF_OPS:
                sym = node.symbol()
                src = names.get(sym)
                if src is None:
                    src = bound[sym.partition("@")[0]]
                # A graph input of one copy can be a run-time value of another.
                ids[j] = leaf(src) if graph.nodes[src].op in LEAF_OPS else built[src]
                continue
            operands = tuple(ids[k] for k in node.inputs)
            key = (node.op, _frozen(node.params), operands)
            if key not in memo:
                memo[key] = out.add_node(node.op, node.params, operands, node.name)
            ids[j] = memo[key]
        for mine, o in zip(region.writes, prog.outputs, strict=True):
            built[mine] = ids[o]
    for i in graph.outputs:
        if i not in built:  # an output that is a leaf
            leaf(i)
    out.outputs = [built[i] for i in graph.outputs]
    return out


# ----------------------------------------------------------------------------- internals
def _whole(graph: Graph, flow: list[int], live: list[bool]) -> Partition:
    nodes = [i for i, n in enumerate(graph.nodes) if live[i] and n.op not in LEAF_OPS]
    region = _region(graph, flow, nodes)
    region.writes = list(dict.fromkeys(graph.outputs))
    region.key = "whole"
    region.cls = 0
    return Partition([region], [[0]], 1)


def _segments(graph: Graph, flow: list[int]) -> list[list[int]]:
    """Run-time operators split after each cut point (see the module docstring). A graph
    input counts as a value open from its first reader to its last, as a value of an
    earlier region would be: the first layer of a stack is cut as the others are, and the
    weights of a module that takes them as inputs (JAX's HLO) block no cut."""
    pos = {i: k for k, i in enumerate(flow)}
    end = len(flow)
    first: dict[int, int] = {}
    last = dict.fromkeys(flow, -1)
    for k, i in enumerate(flow):
        for j in graph.nodes[i].inputs:
            if j in pos:
                last[j] = max(last[j], k)
            elif graph.nodes[j].op == "input":
                first.setdefault(j, k)
                last[j] = k
    for o in graph.outputs:
        if o in last:
            last[o] = end
    # opened[k] - closed[k]: how many values are open after position k (defined or first
    # read at or before k, read after k).
    delta = [0] * (end + 1)
    for i, k in [*pos.items(), *first.items()]:
        if last[i] > k:
            delta[k] += 1
            delta[last[i]] -= 1
    segments: list[list[int]] = []
    current: list[int] = []
    open_now = 0
    for k, i in enumerate(flow):
        open_now += delta[k]
        current.append(i)
        only_me = open_now == 1 and last[i] > k
        if only_me and isinstance(graph.nodes[i].type, TensorType) and k < end - 1:
            segments.append(current)
            current = []
    if current:
        segments.append(current)
    return segments


def _blocks(keys: Sequence[str], sizes: Sequence[int], max_ops: int) -> list[tuple[int, int]]:
    """Spans ``[a, b)`` of segments that become regions: the longest stretch that repeats
    with the smallest period ``p`` (most segments covered; ties to the smaller ``p``) as
    blocks of ``p`` segments, the rest in chunks of at most ``max_ops`` operators."""
    n = len(keys)
    best = (0, 0, 0, 0)  # (covered, -p, start, copies)
    for p in range(1, n // 2 + 1):
        i = 0
        while i + p < n:
            if keys[i] != keys[i + p]:
                i += 1
                continue
            j = i
            while j + p < n and keys[j] == keys[j + p]:
                j += 1
            copies = (j - i + p) // p
            if copies >= 2 and (copies * p, -p) > best[:2]:
                best = (copies * p, -p, i, copies)
            i = j
    covered, neg_p, start, copies = best
    if not covered:
        return _chunks(sizes, 0, n, max_ops)
    p = -neg_p
    stop = start + copies * p
    blocks = [(start + m * p, start + (m + 1) * p) for m in range(copies)]
    return _chunks(sizes, 0, start, max_ops) + blocks + _chunks(sizes, stop, n, max_ops)


def _chunks(sizes: Sequence[int], a: int, b: int, max_ops: int) -> list[tuple[int, int]]:
    """``[a, b)`` cut into consecutive spans of at most ``max_ops`` operators each (a
    larger segment alone)."""
    spans: list[tuple[int, int]] = []
    lo, total = a, 0
    for s in range(a, b):
        if s > lo and total + sizes[s] > max_ops:
            spans.append((lo, s))
            lo, total = s, 0
        total += sizes[s]
    if lo < b:
        spans.append((lo, b))
    return spans


def _members(graph: Graph, flow_nodes: Iterable[int]) -> list[int]:
    """``flow_nodes`` with the weight-only operators they read (transitively), each of
    those placed just before its first reader: an order that does not depend on where in
    the program a shared weight-only operator was built, so that copies of one block list
    their operators alike."""
    out: list[int] = []
    seen: set[int] = set()

    def emit(i: int) -> None:
        stack = [(i, False)]
        while stack:
            j, ready = stack.pop()
            if ready:
                out.append(j)
                continue
            if j in seen:
                continue
            seen.add(j)
            stack.append((j, True))
            for k in reversed(graph.nodes[j].inputs):
                n = graph.nodes[k]
                if k not in seen and n.constant and n.op not in LEAF_OPS:
                    stack.append((k, False))

    for i in flow_nodes:
        emit(i)
    return out


def _region(graph: Graph, flow_nodes: list[int], nodes: list[int] | None = None) -> Region:
    members = nodes if nodes is not None else _members(graph, flow_nodes)
    inside = set(members)
    reads: dict[int, None] = {}
    for i in members:
        for j in graph.nodes[i].inputs:
            if j not in inside:
                reads[j] = None
    return Region(members, list(reads), [])


def _mark_writes(graph: Graph, regions: list[Region]) -> None:
    """Sets each region's :attr:`Region.writes`: its operators read by a later region or
    returned by the program, in node order."""
    # A weight-only operator copied into several regions is owned by the last of them.
    owner = {i: r for r, region in enumerate(regions) for i in region.nodes}
    wanted: set[int] = set(graph.outputs)
    for r, region in enumerate(regions):
        for j in region.reads:
            if owner.get(j, r) != r:
                wanted.add(j)
    for r, region in enumerate(regions):
        region.writes = [i for i in region.nodes if i in wanted and owner[i] == r]


def _frozen(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(_frozen(x) for x in v)
    return v


def _key(graph: Graph, nodes: Sequence[int], writes: Sequence[int] = ()) -> str:
    """The structural key of the operators ``nodes`` (see the module docstring)."""
    local = {i: k for k, i in enumerate(nodes)}
    outside: dict[int, int] = {}
    parts: list[str] = []
    for i in nodes:
        n = graph.nodes[i]
        params = dict(n.params)
        refs = []
        for j in n.inputs:
            if j in local:
                refs.append(f"n{local[j]}")
                continue
            k = outside.setdefault(j, len(outside))
            src = graph.nodes[j]
            # A graph input and a value of an earlier region are alike (run-time values
            # read from outside); a weight is not (the analysis folds weight-only terms).
            kind = "weight" if src.op == "weight" else "value"
            refs.append(f"{kind}{k}:{src.type}")
        label = params.pop("type", "") if n.op == OPAQUE else ""
        parts.append(f"{n.op}|{label}|{_frozen(params)}|{','.join(refs)}|{n.type}")
    parts.append("out:" + ",".join(str(local.get(i, -1)) for i in writes))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
