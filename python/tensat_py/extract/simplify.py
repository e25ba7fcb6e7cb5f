"""E-graph simplification before the ILP: fewer nodes, fewer classes, fewer constraints.

Every step keeps at least one optimal acyclic extraction (costs are non-negative), so the
ILP over what is left has the same optimum:

1. **Pruning** (:func:`tensat_py.extract.ilp.prune`, extraction-gym's pruning): forbidden
   nodes, nodes with their own class as a child, nodes with a child class that cannot be
   built (least fixpoint) and classes unreachable from the roots go.
2. **Dominated nodes** (extraction-gym's ``faster-ilp`` simplification): in one class, node
   ``j`` dominates node ``i`` when ``cost_j <= cost_i`` and ``children(j)`` is a subset of
   ``children(i)`` (as sets). Replacing ``i`` by ``j`` in any extraction keeps it valid and
   acyclic (``j``'s edges are a subset of ``i``'s) and does not raise its cost, so ``i``
   goes (ties are broken by node id, so exactly one of two equal nodes stays).
3. **Necessary classes** (the dominator relation of the AND/OR graph; Sun, Zhang and Ni,
   *E-Graphs as Circuits, and Optimal Extraction via Treewidth*, 2024, simplify the circuit
   with the same kind of reasoning): ``nec(d)``, the classes that *every* acyclic
   derivation of class ``d`` uses, is the greatest fixpoint of
   ``nec(d) = {d} ∪ ⋂_{i in d} ⋃_{e in children(i)} nec(e)``. A node of class ``c`` with a
   child ``e`` such that ``c ∈ nec(e)`` can never be in an acyclic extraction (its child
   would need its own class below it) and goes. Only classes inside one cyclic strongly
   connected component can need each other, so the bitsets are per component.
4. **Forced classes** (constant propagation in the circuit): a root class is forced, and so
   is every class that is a child of all remaining nodes of a forced class. The ILP fixes
   their ``y_c = 1``; a forced class with one node fixes that node.

Steps 1-3 repeat until nothing changes (removing a node can make more nodes unbuildable
or dominated). Classes with one node and children common to all nodes of a class are
collapsed when the model is built (:mod:`tensat_py.extract.highs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tensat_py import _core
from tensat_py.egraph import ExtractionProblem

__all__ = ["Simplified", "simplify", "class_sccs", "need_fixpoint"]


@dataclass
class Simplified:
    """The outcome of :func:`simplify`.

    Attributes:
        keep: one bool per node: still a candidate.
        dominator: for each removed-as-dominated node, the node that replaces it (same
            class, no costlier, a subset of its children); used to repair warm starts.
        forced: classes that every extraction must build (roots and their consequences).
        cyclic: whether the class graph of the kept nodes has a cycle.
        stats: counts: ``nodes``/``classes`` before, ``pruned``, ``dominated``,
            ``necessary`` (removed by step 3), ``kept_nodes``, ``kept_classes``,
            ``forced_classes``, ``rounds``.
    """

    keep: list[bool]
    dominator: dict[int, int] = field(default_factory=dict)
    forced: set[int] = field(default_factory=set)
    cyclic: bool = False
    stats: dict[str, int] = field(default_factory=dict)

    def repair(self, problem: ExtractionProblem, choice: dict[int, int]) -> dict[int, int]:
        """``choice`` with every dominated node replaced by its (kept) dominator.

        The result is again a valid choice when ``choice`` is one (a dominator's children
        are a subset of the node's, all of them already chosen) and costs no more.
        """
        out = {}
        for c, i in choice.items():
            seen = 0
            while i in self.dominator and seen < len(self.dominator):
                i = self.dominator[i]
                seen += 1
            out[c] = i
        return problem.reachable(out)


def class_sccs(problem: ExtractionProblem, keep: list[bool]) -> list[int]:
    """Strongly connected component id per class of the kept nodes' class graph (Tarjan, in
    Rust: ``tensat_py._core.class_sccs``); a component's id comes after those it reaches."""
    return _core.class_sccs(problem.node_eclass, problem.node_children, problem.num_classes, keep)


def simplify(
    problem: ExtractionProblem, *, dominance: bool = True, necessary: bool = True
) -> Simplified:
    """Simplifies the e-graph for the ILP (see the module docstring).

    Args:
        problem: the e-graph.
        dominance: remove dominated nodes (step 2).
        necessary: remove nodes that need their own class (step 3).

    Returns:
        a :class:`Simplified`; ``keep`` is all ``False`` when a root cannot be built.
    """
    from tensat_py.extract.ilp import prune

    n = problem.num_nodes
    stats = {"nodes": n, "classes": problem.num_classes}
    keep = prune(problem)
    stats["pruned"] = n - sum(keep)
    dominator: dict[int, int] = {}
    dominated = removed_nec = 0
    rounds = 0
    while True:
        rounds += 1
        changed = 0
        if dominance:
            d = _dominated(problem, keep, dominator)
            dominated += d
            changed += d
        comp = class_sccs(problem, keep)
        if necessary:
            r = _necessary(problem, keep, comp)
            removed_nec += r
            changed += r
        if not changed or rounds >= 5:
            break
        before = sum(keep)
        keep = prune(dataclasses.replace(problem, forbidden=[not k for k in keep]))
        stats["pruned"] += before - sum(keep)
    comp = class_sccs(problem, keep)
    sizes: dict[int, int] = {}
    for k in comp:
        sizes[k] = sizes.get(k, 0) + 1
    kept_classes = {problem.node_eclass[i] for i in range(n) if keep[i]}
    cyclic = any(sizes[comp[c]] > 1 for c in kept_classes)
    forced = _forced(problem, keep) if all(r in kept_classes for r in problem.roots) else set()
    stats.update(
        dominated=dominated,
        necessary=removed_nec,
        kept_nodes=sum(keep),
        kept_classes=len(kept_classes),
        forced_classes=len(forced),
        rounds=rounds,
    )
    return Simplified(keep=keep, dominator=dominator, forced=forced, cyclic=cyclic, stats=stats)


def _dominated(problem: ExtractionProblem, keep: list[bool], dominator: dict[int, int]) -> int:
    """Removes dominated nodes from ``keep`` (in place); returns how many. The comparison runs
    in Rust (``tensat_py._core.dominated``, ``rust/src/prune.rs``): a class's nodes cheapest
    first (then fewest distinct children, then id), each compared with the first 64 survivors
    before it."""
    found = _core.dominated(
        problem.node_eclass,
        problem.node_children,
        [float(c) for c in problem.node_cost],
        problem.num_classes,
        keep,
    )
    removed = 0
    for i, j in enumerate(found):
        if j >= 0:
            keep[i] = False
            dominator[i] = j
            removed += 1
    return removed


def _necessary(problem: ExtractionProblem, keep: list[bool], comp: list[int]) -> int:
    """Removes nodes whose child needs the node's own class (step 3); returns how many."""
    if len(set(comp)) == len(comp):  # an acyclic class graph: no class needs another's
        return 0
    members: dict[int, list[int]] = {}
    for c, k in enumerate(comp):
        members.setdefault(k, []).append(c)
    by_class: dict[int, list[int]] = {}
    for i, k in enumerate(keep):
        if k:
            by_class.setdefault(problem.node_eclass[i], []).append(i)
    removed = 0
    for classes in members.values():
        if len(classes) < 2:
            continue
        bit = {c: 1 << k for k, c in enumerate(classes)}
        full = (1 << len(classes)) - 1
        nec = dict.fromkeys(classes, full)
        # Children inside the component, per node (outside ones never need a class in it).
        inner = {
            c: [[e for e in set(problem.node_children[i]) if e in bit] for i in by_class.get(c, [])]
            for c in classes
        }
        need_fixpoint(classes, inner, nec, full, bit)
        for c in classes:
            for i in by_class.get(c, []):
                if any(e in bit and nec[e] & bit[c] for e in problem.node_children[i]):
                    keep[i] = False
                    removed += 1
    return removed


def need_fixpoint(
    order: Sequence[int],
    options: Mapping[int, Sequence[Sequence[int]]],
    need: dict[int, int],
    full: int,
    own: Mapping[int, int],
) -> None:
    """Greatest fixpoint of ``need(c) = own(c) | ⋂_{option} ⋃_{e in option} need(e)``, in
    place, for the classes of ``order`` (bitsets as ints).

    Args:
        order: the classes to update, swept in this order until nothing changes (children
            first converges in one sweep on an acyclic graph).
        options: per class of ``order``, each node's child classes (only those with a
            ``need`` entry matter to the caller; every one must have an entry).
        need: the start (``full`` for the classes of ``order``, fixed values for the
            others); updated.
        full: the all-ones bitset.
        own: bits a class always has (itself, where it is one of the tracked classes).
    """
    changed = True
    while changed:
        changed = False
        for c in order:
            acc = full
            for kids in options[c]:
                u = 0
                for e in kids:
                    u |= need[e]
                acc &= u
                if not acc:
                    break
            v = acc | own.get(c, 0)
            if v != need[c]:
                need[c] = v
                changed = True


def _forced(problem: ExtractionProblem, keep: list[bool]) -> set[int]:
    """Classes every extraction builds: roots, and children common to all kept nodes of a
    forced class (least fixpoint)."""
    by_class: dict[int, list[int]] = {}
    for i, k in enumerate(keep):
        if k:
            by_class.setdefault(problem.node_eclass[i], []).append(i)
    forced = set(problem.roots)
    stack = list(forced)
    while stack:
        c = stack.pop()
        nodes = by_class.get(c, [])
        if not nodes:
            continue
        common = set(problem.node_children[nodes[0]])
        for i in nodes[1:]:
            common &= set(problem.node_children[i])
            if not common:
                break
        for d in common:
            if d not in forced:
                forced.add(d)
                stack.append(d)
    return forced
