"""The critical-path lower bound on an e-graph's extraction cost.

The DAG cost of an acyclic extraction is at least the cost of its costliest path from a
root down to a leaf: the chosen node ``n`` of a class is paid once, on top of the union of
its children's derivations, which costs at least the costliest of them (costs are
non-negative, and ``n`` is not among them since the extraction is acyclic). So every
class ``c`` has

    ``bound(c) = min over allowed nodes n of c of (cost(n) + max over children e of bound(e))``

(a leaf node's max is 0), the least fixpoint of these equations from ``+inf`` down: the
cheapest "longest path" of any finite derivation, an AND/OR shortest path with ``max`` in
place of the sum (Knuth, "A generalization of Dijkstra's algorithm", IPL 1977). The whole
extraction costs at least ``max`` over the roots. It ignores what parallel branches add, so
it is tight where the optimal program is a chain: on Tensat's VGG e-graph it equals the
optimum, which no LP relaxation of the cyclic e-graph comes near (docs/extraction.md).
"""

from __future__ import annotations

import math

import numpy as np

from tensat_py.egraph import ExtractionProblem

__all__ = ["PROOF_SLACK", "class_path_bounds", "critical_path_bound", "meets"]

#: Relative slack within which an answer's cost meets a lower bound (the same node costs
#: summed along a path and over a DAG differ by rounding).
PROOF_SLACK = 1e-9


def class_path_bounds(problem: ExtractionProblem) -> np.ndarray:
    """Per class, the least critical-path cost of deriving it from allowed (non-forbidden)
    nodes (``inf`` where none derives it), in the problem's cost unit.

    Example:
        >>> from tensat_py.egraph import ExtractionProblem
        >>> p = ExtractionProblem(  # a(x), b(x) read by r(a, b): paths 1+2+4 and 1+3+4
        ...     node_op=["x", "a", "b", "r"], node_eclass=[0, 1, 2, 3],
        ...     node_children=[[], [0], [0], [1, 2]], node_cost=[1.0, 2.0, 3.0, 4.0],
        ...     num_classes=4, roots=[3])
        >>> class_path_bounds(p).tolist()
        [1.0, 3.0, 4.0, 8.0]
    """
    n = problem.num_nodes
    kids = problem.node_children
    lengths = np.fromiter((len(k) for k in kids), dtype=np.int64, count=n)
    parents = np.flatnonzero(lengths > 0)
    flat = np.fromiter((e for k in kids for e in k), dtype=np.int64, count=int(lengths.sum()))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[parents]
    cost = np.asarray(problem.node_cost, dtype=float)
    cost[np.asarray(problem.forbidden_mask(), dtype=bool)] = math.inf
    eclass = np.asarray(problem.node_eclass, dtype=np.int64)
    bound = np.full(problem.num_classes, math.inf)
    for _ in range(problem.num_classes + 1):  # a least fixpoint needs at most that many
        value = cost.copy()
        if parents.size:
            value[parents] += np.maximum.reduceat(bound[flat], starts)
        new = np.full(problem.num_classes, math.inf)
        np.minimum.at(new, eclass, value)
        if np.array_equal(new, bound):
            break
        bound = new
    return bound


def critical_path_bound(problem: ExtractionProblem) -> float:
    """A lower bound on the DAG cost of every acyclic extraction: the costliest root's
    :func:`class_path_bounds` (``inf`` when a root cannot be derived).

    Example:
        >>> from tensat_py.egraph import ExtractionProblem
        >>> chain = ExtractionProblem(
        ...     node_op=["x", "f", "g"], node_eclass=[0, 1, 2], node_children=[[], [0], [1]],
        ...     node_cost=[1.0, 2.0, 3.0], num_classes=3, roots=[2])
        >>> critical_path_bound(chain)  # a chain: the bound is its cost
        6.0
    """
    bounds = class_path_bounds(problem)
    return float(max((bounds[r] for r in problem.roots), default=0.0))


def meets(cost: float, bound: float) -> bool:
    """Whether an acyclic answer of DAG cost ``cost`` is proved optimal by the lower bound
    ``bound`` (same unit), within the relative :data:`PROOF_SLACK`.

    Example:
        >>> meets(6.0, 6.0 * (1 - 1e-12)), meets(6.1, 6.0)
        (True, False)
    """
    return cost <= bound * (1 + PROOF_SLACK)
