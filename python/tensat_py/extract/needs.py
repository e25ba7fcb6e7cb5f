"""Classes that every derivation of a class builds: valid inequalities for the extraction ILP.

When every acyclic derivation of class ``c`` builds class ``d`` (``d`` is in ``need(c)``,
the greatest fixpoint of ``need(c) = {c} ∪ ⋂_{i in c} ⋃_{e in children(i)} need(e)``, the
AND/OR dominator relation of :mod:`tensat_py.extract.simplify`, step 3), then every acyclic
extraction satisfies ``y_c <= y_d``. The ILP's child rows only bound the nodes of ``c`` that
read a class ``e`` by ``y_e``, so its LP relaxation may build ``c`` half through one node and
half through another and pay half of what both need. With these rows the LP pays for what every
alternative needs. (HiGHS derives such implications itself by probing in presolve; CBC's
preprocessing does not.) Measured on the largest pieces of the zoo's k_multi=2 e-graphs
with PuLP's CBC 2.10.3 (docs/extraction.md): NasNet-A's 1,922-node piece, LP 0.876 -> 3.35
(optimum 4.53), not proved in 20 s -> proved in 1.7 s; Inception-v3's 4,185-node piece, LP
1.56 -> 7.81 (optimum 11.50), not proved in 20 s -> 6.7 s.

Only the rows that the model does not already imply are returned: for a child ``e`` that
every node of ``c`` has, the aggregated child row gives ``y_c <= y_e``; and a class that
another needed class ``d`` needs follows from ``y_c <= y_d`` and the rows of ``d``, by
transitivity.
"""

from __future__ import annotations

from tensat_py.egraph import ExtractionProblem
from tensat_py.extract.decompose import _postorder
from tensat_py.extract.simplify import need_fixpoint

__all__ = ["needed_pairs"]


def needed_pairs(problem: ExtractionProblem, keep: list[bool]) -> list[tuple[int, int]]:
    """The pairs ``(c, d)``, ``c != d``, such that every acyclic derivation of class ``c``
    from the kept nodes builds class ``d``, less those implied by a child common to all of
    ``c``'s kept nodes or by another needed class (see the module docstring): ``y_c <= y_d``
    holds for every acyclic extraction.

    Args:
        problem: the e-graph.
        keep: one bool per node; the other nodes do not count. Every kept class must be
            buildable from kept nodes (as after :func:`tensat_py.extract.ilp.prune`).

    Returns:
        the pairs, each class's in increasing order of ``d``.

    Example:
        >>> from tensat_py.egraph import ExtractionProblem
        >>> # class 0 = f(class 1) or g(class 1, class 2); class 1 = h(class 3);
        >>> # class 2 = leaf; class 3 = leaf. Class 0 needs 1 (common child) and 3 (through 1).
        >>> p = ExtractionProblem(
        ...     node_op=["f", "g", "h", "a", "b"], node_eclass=[0, 0, 1, 2, 3],
        ...     node_children=[[1], [1, 2], [3], [], []], node_cost=[1.0] * 5,
        ...     num_classes=4, roots=[0])
        >>> needed_pairs(p, [True] * 5)  # (0, 1) and (0, 3) are implied: none left
        []
        >>> # class 0 = f(class 1) or g(class 2); class 1 = h(class 3); class 2 = k(class 3)
        >>> p = ExtractionProblem(
        ...     node_op=["f", "g", "h", "k", "a"], node_eclass=[0, 0, 1, 2, 3],
        ...     node_children=[[1], [2], [3], [3], []], node_cost=[1.0] * 5,
        ...     num_classes=4, roots=[0])
        >>> needed_pairs(p, [True] * 5)  # both ways build class 3
        [(0, 3)]
    """
    options: dict[int, list[list[int]]] = {}
    for i, k in enumerate(keep):
        if k:
            options.setdefault(problem.node_eclass[i], []).append(
                sorted(set(problem.node_children[i]))
            )
    # Children before parents where the class graph allows (a cycle is entered once).
    order = _postorder(list(options), lambda c: (e for kids in options[c] for e in kids))
    bit = {c: 1 << k for k, c in enumerate(order)}
    full = (1 << len(order)) - 1
    need = dict.fromkeys(order, full)
    need_fixpoint(order, options, need, full, bit)
    pairs: list[tuple[int, int]] = []
    for c in order:
        common = set.intersection(*(set(kids) for kids in options[c]))
        implied = bit[c]
        for e in common:
            implied |= need[e]
        rest = need[c] & ~implied
        # A class that another needed class needs is implied by that one's rows.
        covered = 0
        scan = rest
        while scan:
            low = scan & -scan
            covered |= need[order[low.bit_length() - 1]] & ~low
            scan ^= low
        rest &= ~covered
        while rest:
            low = rest & -rest
            pairs.append((c, order[low.bit_length() - 1]))
            rest ^= low
    pairs.sort()
    return pairs
