"""Large-neighbourhood search for cyclic e-graphs: exact ILPs over acyclic restrictions.

On e-graphs whose class graph has cycles (Tensat's unfiltered e-graphs), the ILP without
acyclicity constraints is a very weak relaxation: a cycle lets a class "exist" without being
computed from the inputs, so the cycle-free optimum skips most of the network (1.4 ms
against 4.85 ms on VGG) and cycle cuts or order variables close that gap far too slowly.

This module searches instead. Any ranking of the classes defines an *acyclic restriction*:
keep a node only when every child class ranks strictly below the node's class. Over a
restriction the plain ILP (no cycle constraints) is exact, and HiGHS solves it in seconds
on 20k-node e-graphs. The search keeps an incumbent acyclic choice ``S`` (initially the
greedy DAG) and repeats:

1. offer the nodes of a neighbourhood of ``S`` (:func:`neighbourhood`: released classes of
   ``S`` any node, the rest of ``S`` its chosen node, new classes within a radius of the
   released ones any node); the first step releases all of ``S`` with no radius limit;
2. draw a ranking from a randomised depth-first search over the offered nodes that always
   contains ``S`` (:func:`_ranks`) and keep the nodes consistent with it; drop what can then
   no longer be built or reached (:func:`tensat_py.extract.ilp.prune`), and solve the ILP
   on what is left with ``S`` as the MIP start (:func:`solve_restricted`);
3. take the answer when it is cheaper.

Every restriction holds ``S``, so the incumbent never gets worse, and every answer is
acyclic by construction. The search cannot prove optimality: its results are "feasible".
The random source is seeded, so runs are reproducible for a given machine speed.

The same search, without its whole-e-graph first step (``improve(whole_first=False)``), also
runs beside a slow exact solve of a large acyclic problem, whose own heuristics find good
answers late on set-cover-like merges (Inception-v3's convolutions;
:func:`tensat_py.extract.ilp.solve_ilp`).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from tensat_py.egraph import ExtractionProblem

__all__ = [
    "FIRST_SHARE",
    "LnsOutcome",
    "RADIUS",
    "improve",
    "neighbourhood",
    "solve_restricted",
]

RADIUS = 2
"""Neighbourhood radius of the first step of :func:`improve` (operand steps; it adapts)."""

FIRST_SHARE = 0.9
"""Share of the search's time the whole-e-graph first step of :func:`improve` may use (at
least ``per_solve``). That step holds most of the gain on Tensat's BERT e-graphs; capped at
half, a busy machine cut it short: the two BERT files at 10 s reached their best known cost
in 1 of 4 runs, against 4 of 4 with 0.9 (docs/extraction.md)."""


@dataclass
class LnsOutcome:
    """What the search produced.

    Attributes:
        choices: the best acyclic choice found (the start when nothing better was found).
        cost: its DAG cost.
        iterations: restricted ILPs solved.
        improvements: how many of them improved the incumbent.
        seconds: wall-clock time spent.
    """

    choices: dict[int, int]
    cost: float
    iterations: int
    improvements: int
    seconds: float


def solve_restricted(
    problem: ExtractionProblem,
    keep: list[bool],
    warm: dict[int, int] | None,
    time_limit: float,
    interrupt: Callable[[float], bool] | None = None,
) -> tuple[dict[int, int] | None, bool]:
    """Solves the extraction ILP over the nodes in ``keep`` with HiGHS (highspy).

    ``keep`` must describe an acyclic class graph in which every kept node's child classes
    have a kept node and the roots have one (as after :func:`~tensat_py.extract.ilp.prune`);
    then every integer solution is an acyclic extraction.

    The model is :class:`~tensat_py.extract.highs.HighsModel`'s over ``keep`` (``x_i`` per
    kept node, ``y_c`` per class with several, child rows aggregated per class, the roots
    forced, costs scaled), with no cycle rows: none are needed.

    Args:
        problem: the e-graph.
        keep: one bool per node.
        warm: a choice inside ``keep`` to start from, or ``None``.
        time_limit: seconds for building the model and running HiGHS together (HiGHS
            gets at least 0.05 s).
        interrupt: polled while HiGHS runs; the solve stops (not proved) once it returns
            ``True`` (:meth:`~tensat_py.extract.highs.HighsModel.solve`).

    Returns:
        ``(choices, proved_optimal)``; ``choices`` is ``None`` when HiGHS found no solution.
    """
    from tensat_py.extract.highs import HighsModel
    from tensat_py.extract.ilp import _choose
    from tensat_py.extract.simplify import Simplified

    deadline = time.perf_counter() + time_limit
    model = HighsModel(problem, Simplified(keep=keep, forced=set(problem.roots)))
    if warm:
        model.set_start(warm)
    # Building the model (0.1-0.3 s on a 50,000-node e-graph) comes out of the budget.
    solve = model.solve(deadline - time.perf_counter(), interrupt=interrupt)
    if solve.selected is None:
        return None, False
    choices, _ = _choose(problem, solve.selected, keep)
    return choices, solve.optimal


def neighbourhood(
    problem: ExtractionProblem,
    by_class: list[list[int]],
    current: dict[int, int],
    release: set[int],
    radius: int,
) -> list[list[int]]:
    """The nodes each class may use in one step of the search.

    A released class of ``current`` may use any of its kept nodes; a class of ``current``
    that is not released keeps its chosen node; a class outside ``current`` may use any of
    its kept nodes when it lies within ``radius`` operand steps of a released class (through
    released classes and classes outside ``current``); every other class has none.

    Args:
        problem: the e-graph.
        by_class: the kept nodes of each class.
        current: the incumbent (an acyclic choice).
        release: classes of ``current`` that may change.
        radius: how many operand steps from a released class new classes are offered.

    Returns:
        one list of node ids per class (empty: the class is not offered).

    Example:
        >>> from tensat_py.egraph import ExtractionProblem
        >>> p = ExtractionProblem(["x", "f", "g", "h"], [0, 1, 1, 2], [[], [0], [2], []],
        ...                       [1.0, 1.0, 1.0, 1.0], 3, [1])
        >>> neighbourhood(p, [[0], [1, 2], [3]], {1: 1, 0: 0}, {1}, 1)
        [[0], [1, 2], [3]]
        >>> neighbourhood(p, [[0], [1, 2], [3]], {1: 1, 0: 0}, set(), 1)
        [[0], [1], []]
    """
    children = problem.node_children
    allowed: list[list[int]] = [[] for _ in range(problem.num_classes)]
    for c, i in current.items():
        allowed[c] = [i]
    for c in release:
        allowed[c] = list(by_class[c])
    frontier = list(release)
    for _ in range(radius):
        if not frontier:
            break
        reached: list[int] = []
        for c in frontier:
            for i in allowed[c]:
                for d in children[i]:
                    if d not in current and not allowed[d] and by_class[d]:
                        allowed[d] = list(by_class[d])
                        reached.append(d)
        frontier = reached
    return allowed


def _ranks(
    problem: ExtractionProblem,
    allowed: list[list[int]],
    current: dict[int, int],
    rng: random.Random,
) -> list[int]:
    """Post-order ranks of a randomised DFS over the offered nodes; ``current`` stays valid.

    Each class explores its ``allowed`` nodes (from :func:`neighbourhood`): the node
    ``current`` chose first, the others cheapest first, in random order among equals
    (zero-cost projections such as ``split0(split(M))`` before ``concat(A, B)``: that is what
    exposes merged operators). A class is not entered while a class on the DFS path is
    reachable from it through ``current``'s edges, so ``current``'s edges are never back
    edges and every one of them goes from a higher to a lower rank. A class of ``current``
    that may change is not entered from a new class: it is left to be reached through its
    own parents, so that it ranks above the new class and may switch to read it (a merged
    matmul ``M`` holds ``concat(A, B)``; entered through it, ``B`` would rank below ``M``
    and could not become ``split1(split(M))``). Classes offered nothing keep rank -1.
    """
    num = problem.num_classes
    children = problem.node_children
    cost = problem.node_cost
    sid = {c: k for k, c in enumerate(current)}
    # sreach[c]: bitset of current's classes reachable from c through current's nodes.
    sreach: dict[int, int] = {}
    for c0 in current:
        stack = [(c0, False)]
        while stack:
            d, done = stack.pop()
            if d in sreach:
                continue
            kids = set(children[current[d]])
            if done:
                mask = 1 << sid[d]
                for k in kids:
                    mask |= sreach[k]
                sreach[d] = mask
            else:
                stack.append((d, True))
                stack.extend((k, False) for k in kids if k not in sreach)

    def edges(c: int) -> list[int]:
        ns = allowed[c]
        if len(ns) > 1:
            ns = list(ns)
            rng.shuffle(ns)
            ns.sort(key=lambda i: cost[i])
            chosen = current.get(c)
            if chosen is not None:
                ns.remove(chosen)
                ns.insert(0, chosen)
        out: list[int] = []
        for i in ns:
            out.extend(children[i])
        return list(dict.fromkeys(out))

    rank = [-1] * num
    state = [0] * num
    counter = 0
    gray = 0
    for s in list(problem.roots) + list(range(num)):
        if state[s] or not allowed[s]:
            continue
        state[s] = 1
        if s in sid:
            gray |= 1 << sid[s]
        work = [(s, iter(edges(s)))]
        while work:
            c, it = work[-1]
            d = next(it, None)
            if d is None:
                work.pop()
                state[c] = 2
                rank[c] = counter
                counter += 1
                if c in sid:
                    gray &= ~(1 << sid[c])
                continue
            if c not in sid and d in sid and len(allowed[d]) > 1:
                continue  # left to its own parents: it may come to read c
            if state[d] == 0 and allowed[d] and not (sreach.get(d, 0) & gray):
                state[d] = 1
                if d in sid:
                    gray |= 1 << sid[d]
                work.append((d, iter(edges(d))))
    return rank


def _postorder(problem: ExtractionProblem, choice: dict[int, int]) -> list[int]:
    """The classes of an acyclic choice, children before parents (from the roots)."""
    out: list[int] = []
    seen: set[int] = set()
    for r in problem.roots:
        stack = [(r, False)]
        while stack:
            c, done = stack.pop()
            if done:
                out.append(c)
                continue
            if c in seen or c not in choice:
                continue
            seen.add(c)
            stack.append((c, True))
            stack.extend((d, False) for d in problem.node_children[choice[c]] if d not in seen)
    return out


def improve(
    problem: ExtractionProblem,
    start: dict[int, int],
    kept: list[bool],
    *,
    time_limit: float,
    stall: int = 12,
    per_solve: float = 4.0,
    seed: int = 0,
    lower_bound: float = 0.0,
    stop: Callable[[float], bool] | None = None,
    on_improve: Callable[[dict[int, int], float], None] | None = None,
    radius: int = RADIUS,
    whole_first: bool = True,
) -> LnsOutcome:
    """Improves an acyclic choice by solving ILPs over random acyclic restrictions.

    Each step releases a share of the incumbent's classes and offers the nodes of
    :func:`neighbourhood` (released classes: all their nodes; other classes of the
    incumbent: their chosen node; new classes within ``radius`` operand steps of a released
    class: all their nodes), keeps those consistent with a ranking from :func:`_ranks`, and
    solves the ILP over what can still be built (:func:`solve_restricted`). Share and radius
    adapt: a step that hits its time limit shrinks both; a step proved quickly (in under a
    quarter of ``per_solve``) grows the share and, when it found nothing better, the radius.

    Args:
        problem: the e-graph.
        start: an acyclic choice using only nodes in ``kept`` (e.g. the greedy DAG).
        kept: nodes allowed at all (``tensat_py.extract.ilp.prune``).
        time_limit: wall-clock budget in seconds.
        stall: stop after this many restricted solves in a row without improvement.
        per_solve: time limit of one restricted solve, seconds.
        seed: random seed.
        lower_bound: a proved lower bound (the problem's cost unit); the search stops as
            soon as the incumbent reaches it (relative tolerance 1e-6).
        stop: called with the incumbent's cost before every step and while a step's solve
            runs; the search ends (the running solve interrupted) when it returns ``True``
            (e.g. an exact solve running in another thread has proved a bound the incumbent
            meets).
        on_improve: called with every new incumbent and its cost (e.g. to hand it to an
            exact solve running in another thread).
        radius: the neighbourhood radius of the first step (operand steps, at least 1).
        whole_first: make the first step one restriction of the whole e-graph (every class
            of the incumbent released, no radius limit). Pass ``False`` on an acyclic
            e-graph, where that restriction is the whole ILP again.

    Returns:
        an :class:`LnsOutcome` (never costlier than ``start``).

    Raises:
        ValueError: when ``radius`` is below 1.
    """
    from tensat_py.extract.ilp import prune

    if radius < 1:
        raise ValueError(f"radius must be at least 1, got {radius}")
    t0 = time.perf_counter()
    rng = random.Random(seed)
    by_class: list[list[int]] = [[] for _ in range(problem.num_classes)]
    for i, k in enumerate(kept):
        if k:
            by_class[problem.node_eclass[i]].append(i)
    best = problem.reachable(start)
    best_cost = problem.dag_cost(best)
    iterations = improvements = 0
    idle = 0
    share = 0.5
    children = problem.node_children
    while idle < stall:
        if best_cost <= lower_bound * (1 + 1e-6) or (stop is not None and stop(best_cost)):
            break
        remaining = time_limit - (time.perf_counter() - t0)
        if remaining <= 0.2:
            break
        if iterations == 0 and whole_first:
            # The first step releases every class and offers every node: one acyclic
            # restriction of the whole e-graph, which often holds the optimum already.
            release, reach = set(best), problem.num_classes
            cap = max(per_solve, FIRST_SHARE * remaining)
        else:
            # Release a share of the incumbent's classes. Half the time they form a window
            # of the incumbent's topological order, so that operators of one layer (which
            # merge together) are released together; otherwise the share is scattered.
            topo = _postorder(problem, best)
            width = max(1, round(share * len(topo)))
            first = rng.randrange(0, max(1, len(topo) - width + 1))
            release = set(topo[first : first + width])
            if rng.random() < 0.5:
                release = {c for c in best if rng.random() < share}
            reach, cap = radius, per_solve
        allowed = neighbourhood(problem, by_class, best, release, reach)
        rank = _ranks(problem, allowed, best, rng)
        offered = [False] * problem.num_nodes
        for c, ns in enumerate(allowed):
            for i in ns:
                offered[i] = all(rank[d] < rank[c] for d in children[i])
        keep = prune(dataclasses.replace(problem, forbidden=[not m for m in offered]))
        if not all(keep[i] for i in best.values()):  # cannot happen; be safe
            idle += 1
            continue
        remaining = time_limit - (time.perf_counter() - t0)
        t1 = time.perf_counter()
        told = None if stop is None else (lambda gap, cost=best_cost: stop(cost))
        choices, proved = solve_restricted(problem, keep, best, min(cap, remaining), told)
        iterations += 1
        cost = problem.dag_cost(choices) if choices else math.inf
        better = choices is not None and cost < best_cost - 1e-12 * max(1.0, best_cost)
        if not proved:
            share = max(0.1, share * 0.7)
            radius = max(1, radius - 1)
        elif time.perf_counter() - t1 < 0.25 * per_solve:
            share = min(0.8, share * 1.2)
            if not better:
                radius += 1
        if better and choices is not None and problem.check_choice(choices) is None:
            best, best_cost = choices, cost
            improvements += 1
            if on_improve is not None:
                on_improve(best, best_cost)
            idle = 0
            continue
        idle += 1
    return LnsOutcome(best, best_cost, iterations, improvements, time.perf_counter() - t0)
