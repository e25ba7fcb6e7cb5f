"""Extraction from e-graphs with negative node costs (extraction-gym's ``maxsat`` family).

Tensat's cost models give every e-node a non-negative cost, and the ILP path of
:func:`tensat_py.extract.extract` relies on it: its simplification drops dominated nodes,
its bounds add up costs along paths, and its formulation lets a class be chosen that no
chosen node needs (harmless when that can only add cost). With a negative cost all three
can be wrong, so an e-graph with one goes through the exact formulation here instead:

* a binary ``x_i`` per allowed e-node (not forbidden, not a child of its own class) and a
  binary ``y_c`` per e-class;
* ``sum_{i in c} x_i = y_c`` (one node per chosen class), ``y_r = 1`` for each root;
* ``x_i <= y_d`` for each child class ``d`` of node ``i``;
* ``y_c <= sum_{i : c in children(i)} x_i`` for each class that is not a root: a class is
  chosen only when a chosen node needs it, so no negative node is picked for its own sake;
* the paper's topological order (Tensat, MLSys'21, section 5.1): a real ``t_c`` in
  ``[0, C]`` per class and ``t_g >= t_d + 1 - (C + 1)(1 - x_i)`` for node ``i`` of class
  ``g`` and each child class ``d``, so the chosen graph is acyclic;
* minimise ``sum_i cost_i x_i``.

With acyclicity and the "needed" rows every chosen class is reached from a root, so the
objective is the DAG cost of the extraction (:meth:`ExtractionProblem.dag_cost`).

The greedy extractors run on the costs shifted by ``-min(cost)`` (they assume non-negative
costs, and the tree extractor would otherwise never settle on a cycle of negative cost);
their answer is then a heuristic whose cost bounds nothing, and their message says so.

>>> from tensat_py.egraph import ExtractionProblem
>>> p = ExtractionProblem(
...     node_op=["a", "b", "bonus"], node_eclass=[0, 0, 1], node_children=[[], [1], []],
...     node_cost=[1.0, 1.0, -3.0], num_classes=2, roots=[0])
>>> solve_signed(p, solver="highs", time_limit=10.0).choices
{0: 1, 1: 2}
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pulp

from tensat_py.egraph import ExtractionProblem

__all__ = ["SignedOutcome", "shifted", "solve_signed"]


@dataclass
class SignedOutcome:
    """What :func:`solve_signed` found.

    Attributes:
        choices: class -> node for the chosen classes, or ``None`` when the solver found no
            extraction within the time limit.
        status: ``"optimal"`` (proved), ``"feasible"`` (time limit, with an answer) or
            ``"none"``.
        message: the solver, its status and the model's size.
        seconds: wall-clock seconds in the solver.
    """

    choices: dict[int, int] | None
    status: str
    message: str
    seconds: float


def shifted(problem: ExtractionProblem) -> tuple[ExtractionProblem, float]:
    """``problem`` with every cost raised by ``-min(cost)`` (so that the least is 0) and
    the shift; ``(problem, 0.0)`` itself when no cost is negative."""
    low = min(problem.node_cost, default=0.0)
    if low >= 0:
        return problem, 0.0
    from dataclasses import replace

    return replace(problem, node_cost=[c - low for c in problem.node_cost]), -low


def solve_signed(
    problem: ExtractionProblem, *, solver: str = "highs", time_limit: float = 60.0
) -> SignedOutcome:
    """The cheapest acyclic extraction of ``problem`` under costs of any sign (see the
    module docstring for the formulation).

    Args:
        problem: the e-graph; costs finite, of any sign.
        solver: ``"cbc"`` or ``"highs"`` (through PuLP).
        time_limit: seconds for the solver (at least 1 is given to it).

    Raises:
        ValueError: an unknown solver; a root class that no allowed node can build (the
            model is infeasible).
    """
    from tensat_py.extract.ilp import _solver

    n, nc = problem.num_nodes, problem.num_classes
    forbidden = problem.forbidden_mask()
    allowed = [
        i
        for i in range(n)
        if not forbidden[i] and problem.node_eclass[i] not in problem.node_children[i]
    ]
    lp = pulp.LpProblem("signed_extraction", pulp.LpMinimize)
    x = {i: pulp.LpVariable(f"x{i}", cat="Binary") for i in allowed}
    y = [pulp.LpVariable(f"y{c}", cat="Binary") for c in range(nc)]
    t = [pulp.LpVariable(f"t{c}", lowBound=0, upBound=nc) for c in range(nc)]
    lp += pulp.lpSum(problem.node_cost[i] * x[i] for i in allowed)
    members: list[list[int]] = [[] for _ in range(nc)]
    parents: list[list[int]] = [[] for _ in range(nc)]
    for i in allowed:
        members[problem.node_eclass[i]].append(i)
        for d in set(problem.node_children[i]):
            parents[d].append(i)
    roots = set(problem.roots)
    for c in range(nc):
        lp += pulp.lpSum(x[i] for i in members[c]) == y[c]
        if c in roots:
            lp += y[c] == 1
        else:
            lp += y[c] <= pulp.lpSum(x[i] for i in parents[c])
    for i in allowed:
        g = problem.node_eclass[i]
        for d in set(problem.node_children[i]):
            lp += x[i] <= y[d]
            lp += t[g] >= t[d] + 1 - (nc + 1) * (1 - x[i])
    start = time.perf_counter()
    lp.solve(_solver(solver, time_limit))
    seconds = time.perf_counter() - start
    size = f"{len(allowed)} e-nodes, {nc} e-classes"
    if lp.status == pulp.LpStatusInfeasible:
        raise ValueError(
            f"root class {problem.roots} cannot be built from allowed (non-forbidden) nodes"
        )
    chosen = {problem.node_eclass[i]: i for i in allowed if (x[i].value() or 0) > 0.5}
    if lp.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        why = pulp.LpStatus.get(lp.status, str(lp.status))
        return SignedOutcome(None, "none", f"{solver}: no extraction ({why}); {size}", seconds)
    status = "optimal" if lp.sol_status == pulp.LpSolutionOptimal else "feasible"
    return SignedOutcome(
        chosen, status, f"{status} ({solver}, signed-cost formulation; {size})", seconds
    )
