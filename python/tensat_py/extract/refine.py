"""Refinement of an extracted program against the whole-program cost.

Extraction minimises a sum of per-e-node prices. A cost model may price a program as more
than that sum (:meth:`tensat_py.cost.base.CostModel.graph_cost`): onnxruntime folds a
convolution's bias add into it only while the convolution has no other reader, and puts
a reorder at each boundary of its NCHWc layout (:mod:`tensat_py.cost.ort_program`). No
per-e-node price sees either, so an extraction can choose rewrites that look cheaper
node by node and cost more as a program (on MobileNetV3: biases re-associated across a
residual sum, each leaving a convolution read twice and out of NCHWc).

:func:`refine` is a local search from the extracted choice toward the input program
(:func:`input_choices`): e-class by e-class, from the root down, it switches the class
back to the input's e-node (with the input's sub-program where the new choice reaches
e-classes the extraction did not) and keeps the switch when the program it builds is
cheaper under ``price``. The result is never costlier than the extraction's program, and
every program it prices is rebuilt and type-checked by
:meth:`tensat_py.graph.Graph.from_choices`. See ``docs/extraction.md``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tensat_py.graph import Graph, GraphError

__all__ = ["Refinement", "input_choices", "refine"]


@dataclass
class Refinement:
    """What :func:`refine` did.

    Attributes:
        graph: the refined program (the extraction's own when no switch paid).
        choices: its e-class -> e-node choice.
        cost: ``price(graph)``, seconds.
        start_cost: the price of the extraction's program, seconds.
        trials: programs built and priced (the extraction's own included).
        switched: e-classes switched back to the input's e-node.
        seconds: wall-clock time, seconds.
        complete: False when the deadline stopped the search early.
    """

    graph: Graph
    choices: dict[int, int]
    cost: float
    start_cost: float
    trials: int
    switched: int
    seconds: float
    complete: bool

    def stats(self) -> dict[str, Any]:
        """The figures for ``OptimizeResult.stats["refinement"]``."""
        return {
            "trials": self.trials,
            "switched": self.switched,
            "seconds": self.seconds,
            "start_cost": self.start_cost,
            "cost": self.cost,
            "complete": self.complete,
        }


def input_choices(
    export: Mapping[str, Any], flat: Sequence[tuple[str, Sequence[int]]]
) -> dict[int, int]:
    """For each e-class that holds a node of the input program ``flat``
    (:meth:`tensat_py.graph.Graph.to_flat`, the program the e-graph was built from), the
    e-node that is that node: found bottom-up by operator and child e-classes, which
    saturation keeps (congruence). An e-class that two input nodes share (merged by a
    rule: ``x`` and ``x * 1``) keeps the first. An input e-node on the filter list
    (``export["filtered"]``: the cycle filter took it out) is never chosen; its e-class
    has no entry.

    Raises:
        ValueError: a node of ``flat`` is not in ``export`` (an export of another e-graph).

    Example:
        >>> from tensat_py import _core
        >>> flat = [("x@2_2", []), ("input", [0]), ("relu", [1])]
        >>> export = _core.EGraph(flat).export()
        >>> ch = input_choices(export, flat)
        >>> sorted(export["node_op"][n] for n in ch.values())
        ['input', 'relu', 'x@2_2']
    """
    ops: Sequence[str] = export["node_op"]
    children: Sequence[Sequence[int]] = export["node_children"]
    eclass: Sequence[int] = export["node_eclass"]
    filtered = set(export.get("filtered", ()))
    index: dict[tuple[str, tuple[int, ...]], int] = {}
    for n, (op, ch) in enumerate(zip(ops, children, strict=True)):
        index.setdefault((_leaf_key(op), tuple(ch)), n)
    class_of: list[int] = []
    out: dict[int, int] = {}
    for k, (op, args) in enumerate(flat):
        n = index.get((_leaf_key(op), tuple(class_of[a] for a in args)))
        if n is None:
            raise ValueError(f"input node {k} ({op}) is not in the exported e-graph")
        class_of.append(eclass[n])
        if n not in filtered:
            out.setdefault(eclass[n], n)
    return out


def _leaf_key(op: str) -> Any:
    """An e-node's operator as compared between the input's flat form and the export: a
    number by value (Python writes ``1e-05`` where the Rust core writes ``1e-5``), a list
    without spaces, anything else as written."""
    for kind, parse in (("int", int), ("float", float)):
        try:
            return kind, parse(op)
        except ValueError:
            pass
    return op.replace(" ", "") if op.startswith("[") else op


def _reach(
    root: int,
    children: Sequence[Sequence[int]],
    choose: Callable[[int], int | None],
) -> dict[int, int] | None:
    """The choice of every e-class reachable from ``root`` through ``choose`` (None when a
    reached e-class has no choice)."""
    out: dict[int, int] = {}
    todo = [root]
    while todo:
        c = todo.pop()
        if c in out:
            continue
        n = choose(c)
        if n is None:
            return None
        out[c] = n
        todo.extend(ch for ch in children[n] if ch not in out)
    return out


def _top_down(
    root: int, choices: Mapping[int, int], children: Sequence[Sequence[int]]
) -> list[int]:
    """The e-classes reachable from ``root`` under ``choices``, breadth first."""
    order, seen = [root], {root}
    for c in order:
        for ch in children[choices[c]]:
            if ch not in seen:
                seen.add(ch)
                order.append(ch)
    return order


def refine(
    export: Mapping[str, Any],
    choices: Mapping[int, int],
    toward: Mapping[int, int],
    price: Callable[[Graph], float],
    deadline: float = float("inf"),
    meta: Mapping[str, Any] | None = None,
    start: tuple[Graph, float] | None = None,
) -> Refinement:
    """Local search from ``choices`` (an extraction of ``export``) toward ``toward`` (the
    input program's e-nodes, :func:`input_choices`), under the whole-program ``price``
    (seconds; ``graph_cost``). See the module docstring.

    Each e-class reachable under the current choice where it differs from ``toward`` is
    tried once, from the root down (a switch near the root replaces a whole region): the
    class takes ``toward``'s e-node, every e-class it newly reaches takes ``toward``'s
    too, and the switch is kept when the rebuilt program is cheaper (by more than 1e-9
    relative). A switch whose program does not rebuild (a cycle through the e-graph's
    equalities) is skipped. Stops at ``deadline`` (``time.perf_counter()`` seconds).

    Args:
        export: ``EGraph.export()``.
        choices: e-class -> e-node, at least for the e-classes reachable from the root.
        toward: e-class -> e-node to switch back to.
        price: the whole-program cost of a rebuilt program, seconds.
        deadline: when to stop trying, ``time.perf_counter()`` seconds.
        meta: front-end data (``Graph.meta``) each rebuilt program carries while priced
            (opaque payloads).
        start: the program ``choices`` builds and its ``price``, when the caller has them
            already (not built and priced again).

    Raises:
        GraphError: ``choices`` itself does not rebuild.
    """
    t0 = time.perf_counter()
    root = int(export["root"])
    children: Sequence[Sequence[int]] = export["node_children"]

    def build(ch: Mapping[int, int]) -> Graph:
        g = Graph.from_choices(export, ch)
        if meta is not None:
            g.meta = dict(meta)
        return g

    best = _reach(root, children, choices.get)
    if best is None:
        raise GraphError("the extraction's choice leaves a reachable e-class without a node")
    if start is None:
        graph = build(best)
        cost = price(graph)
    else:
        graph, cost = start
    start_cost = cost
    trials, switched, complete = 1, 0, True
    for c in _top_down(root, best, children):
        if time.perf_counter() >= deadline:
            complete = False
            break
        if c not in best or c not in toward or best[c] == toward[c]:
            continue
        current = best

        def choose(k: int, c: int = c, current: dict[int, int] = current) -> int | None:
            if k == c:
                return toward[c]
            return current.get(k, toward.get(k))

        trial = _reach(root, children, choose)
        if trial is None:
            continue
        try:
            g = build(trial)
        except GraphError:
            continue
        trials += 1
        t_cost = price(g)
        if t_cost < cost * (1 - 1e-9):
            best, graph, cost = trial, g, t_cost
            switched += 1
    return Refinement(
        graph=graph,
        choices=best,
        cost=cost,
        start_cost=start_cost,
        trials=trials,
        switched=switched,
        seconds=time.perf_counter() - t0,
        complete=complete,
    )
