"""The extraction ILP handed to HiGHS as arrays (highspy), without a modelling layer.

The model is the one of :mod:`tensat_py.extract.ilp` (Tensat, MLSys'21, section 5.1, with
one class variable per class), built over the nodes a :class:`~tensat_py.extract.simplify.
Simplified` keeps, with two circuit-style collapses (Sun, Zhang and Ni, *E-Graphs as
Circuits*, 2024):

* a class with one node has no ``y_c``: its node's ``x_i`` stands for it;
* the child rows are aggregated per class: for class ``c`` and child class ``d``,
  ``sum_{i in c, d in children(i)} x_i <= y_d`` (at most one node of ``c`` is chosen, so
  this is valid), which is ``y_c <= y_d`` when ``d`` is a child of every node of ``c``.
  One row per (class, child class) instead of one per (node, child class), and a much
  tighter LP relaxation than the per-node ``x_i <= y_d``: two alternatives of ``c`` that
  both need ``d`` can no longer each pay half of ``d``.

Forced classes (:func:`~tensat_py.extract.simplify.simplify`) get ``y_c = 1``. The objective
is divided by the largest node cost (the costliest node costs 1), so that HiGHS's tolerances
act on relative, not absolute, differences of seconds.

:class:`HighsModel` builds once and solves repeatedly: cycle cuts (lazy mode) are appended
as rows between solves; every solve reports the incumbent, the proved lower bound (HiGHS's
dual bound, in the problem's cost unit) and the seconds spent. HiGHS stops as soon as the
relative gap between bound and incumbent is at most ``mip_rel_gap`` (default ``1e-6``).
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensat_py.egraph import ExtractionProblem
from tensat_py.extract.simplify import Simplified

__all__ = ["HighsModel", "HighsSolve", "MIP_REL_GAP", "relative_gap", "gap_tolerance"]

MIP_REL_GAP = 1e-6
"""Default relative gap at which the solvers stop and call a solution optimal
(``extract(gap=...)``, ``optimize(gap=...)``)."""

_GAP: contextvars.ContextVar[float] = contextvars.ContextVar("mip_rel_gap", default=MIP_REL_GAP)


def relative_gap() -> float:
    """The relative gap in force (:func:`gap_tolerance`; default :data:`MIP_REL_GAP`)."""
    return _GAP.get()


@contextmanager
def gap_tolerance(gap: float) -> Iterator[None]:
    """Within the block, the ILP solvers stop at a proved relative gap of ``gap`` (HiGHS's
    ``mip_rel_gap``, CBC's ``ratioGap``) and an answer within it is ``"optimal"``."""
    token = _GAP.set(float(gap))
    try:
        yield
    finally:
        _GAP.reset(token)


@dataclass
class HighsSolve:
    """One HiGHS run.

    Attributes:
        selected: one bool per problem node (selected by the solution), or ``None`` when
            HiGHS found no feasible solution.
        objective: the incumbent's objective, in the problem's cost unit (``inf`` if none).
        lower_bound: HiGHS's proved dual bound, in the problem's cost unit (``0.0`` when
            it has none).
        optimal: HiGHS proved optimality (within ``mip_rel_gap``).
        seconds: wall-clock seconds of the run.
        status: HiGHS's model status, as text.
    """

    selected: list[bool] | None
    objective: float
    lower_bound: float
    optimal: bool
    seconds: float
    status: str


class HighsModel:
    """The extraction ILP over the kept nodes, as a highspy model.

    Args:
        problem: the e-graph.
        simplified: which nodes are kept, and the forced classes.
        relax: solve the LP relaxation (continuous variables) instead of the ILP.
        order: add the paper's topological order variables (``"real"`` or ``"int"``) on
            the cyclic strongly connected components, or ``None``.
        needs: add ``y_c <= y_d`` for each class ``d`` that every derivation of ``c`` builds
            (:func:`tensat_py.extract.needs.needed_pairs`): a tighter LP relaxation. HiGHS's
            presolve finds most of them itself, so the MIP does not ask for them.

    Attributes:
        build_seconds: wall-clock seconds spent building the model.
        num_vars: number of columns; ``num_rows``: number of rows (before cuts).
    """

    def __init__(
        self,
        problem: ExtractionProblem,
        simplified: Simplified,
        *,
        relax: bool = False,
        order: str | None = None,
        needs: bool = False,
    ) -> None:
        import highspy

        t0 = time.perf_counter()
        self.problem = problem
        keep = simplified.keep
        self.nodes = [i for i, k in enumerate(keep) if k]
        self.col = {i: k for k, i in enumerate(self.nodes)}
        eclass = problem.node_eclass
        children = problem.node_children
        members: dict[int, list[int]] = {}
        for i in self.nodes:
            members.setdefault(eclass[i], []).append(i)
        self.members = members
        n_x = len(self.nodes)
        # The column standing for "class c is built": y_c, or the x of its only node.
        ycol: dict[int, int] = {}
        multi = [c for c, ns in members.items() if len(ns) > 1]
        for c, ns in members.items():
            if len(ns) == 1:
                ycol[c] = self.col[ns[0]]
        for k, c in enumerate(multi):
            ycol[c] = n_x + k
        self.ycol = ycol
        nv = n_x + len(multi)
        top = max((problem.node_cost[i] for i in self.nodes), default=0.0)
        self.scale = 1.0 / top if top > 0 else 1.0
        cost = np.zeros(nv)
        cost[:n_x] = np.asarray([problem.node_cost[i] for i in self.nodes]) * self.scale
        lower = np.zeros(nv)
        upper = np.ones(nv)
        for c in simplified.forced:
            if c in ycol:
                lower[ycol[c]] = 1.0

        starts: list[int] = []
        index: list[int] = []
        value: list[float] = []
        lo: list[float] = []
        hi: list[float] = []

        def row(cols: list[int], vals: list[float], a: float, b: float) -> None:
            starts.append(len(index))
            index.extend(cols)
            value.extend(vals)
            lo.append(a)
            hi.append(b)

        inf = highspy.kHighsInf
        for c in multi:
            ns = members[c]
            row([self.col[i] for i in ns] + [ycol[c]], [1.0] * len(ns) + [-1.0], 0.0, 0.0)
        for c, ns in members.items():
            users: dict[int, list[int]] = {}
            for i in ns:
                for d in set(children[i]):
                    users.setdefault(d, []).append(i)
            for d, us in users.items():
                if len(us) == len(ns):
                    row([ycol[c], ycol[d]], [1.0, -1.0], -inf, 0.0)
                else:
                    cols = [self.col[i] for i in us] + [ycol[d]]
                    row(cols, [1.0] * len(us) + [-1.0], -inf, 0.0)

        if needs:
            from tensat_py.extract.needs import needed_pairs

            for c, d in needed_pairs(problem, keep):
                if ycol[c] != ycol[d]:
                    row([ycol[c], ycol[d]], [1.0, -1.0], -inf, 0.0)

        self.tcol: dict[int, int] = {}
        if order is not None:
            nv = self._order_rows(simplified, order, nv, row, lower, upper, cost)

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_rel_gap", relative_gap())
        # extract() gives the model a start (the greedy DAG, set_start); HiGHS's root
        # reduced-cost heuristic then rarely finds better and costs time: off, NasRNN's
        # k_multi=1 solve goes from 0.35 s to 0.26 s, NasNet-A's k_multi=2 proof from 51
        # to 43 s (bench/extract_bench.md).
        h.setOptionValue("mip_heuristic_run_root_reduced_cost", False)
        # Feasibility jump (HiGHS >= 1.10) looks for a first solution, which the start
        # already is, and costs about 5 ms a solve whatever the model's size: a third of
        # the time of each small piece of a decomposed e-graph (SqueezeNet's k_multi=1
        # pieces: 7 ms -> 1.6 ms).
        h.setOptionValue("mip_heuristic_run_feasibility_jump", False)
        h.addVars(nv, lower, upper)
        allv = np.arange(nv, dtype=np.int32)
        h.changeColsCost(nv, allv, cost)
        if not relax:
            integ = np.full(nv, highspy.HighsVarType.kInteger)
            for k in self.tcol.values():
                if order == "real":
                    integ[k] = highspy.HighsVarType.kContinuous
            h.changeColsIntegrality(nv, allv, integ)
        if lo:
            h.addRows(
                len(lo),
                np.asarray(lo, dtype=float),
                np.asarray(hi, dtype=float),
                len(index),
                np.asarray(starts, dtype=np.int32),
                np.asarray(index, dtype=np.int32),
                np.asarray(value, dtype=float),
            )
        self.h = h
        self.num_vars = nv
        self.num_rows = len(lo)
        self.relax = relax
        self.cuts = 0
        self.build_seconds = time.perf_counter() - t0

    def _order_rows(self, simplified, order, nv, row, lower, upper, cost) -> int:  # noqa: ANN001
        """Adds ``t_c`` per class of a cyclic component and ``t_g(i) - t_c - eps + A (1 -
        x_i) >= 0`` for each node ``i`` and child class ``c`` in its component (the paper's
        constraint; ``"real"``: ``t`` in [0, 1], eps = 1/M, A = 2; ``"int"``: ``t`` in
        [0, M-1], eps = 1, A = M; M = largest cyclic component). Returns the column count."""
        from tensat_py.extract.simplify import class_sccs

        comp = class_sccs(self.problem, simplified.keep)
        sizes: dict[int, int] = {}
        for c in self.members:
            sizes[comp[c]] = sizes.get(comp[c], 0) + 1
        cyc = [c for c in self.members if sizes[comp[c]] > 1]
        if not cyc:
            return nv
        m = max(sizes[comp[c]] for c in cyc)
        self.comp, self.order_m, self.order_kind = comp, m, order
        eps, big, top = (1.0 / m, 2.0, 1.0) if order == "real" else (1.0, float(m), m - 1.0)
        extra = len(cyc)
        lower.resize(nv + extra, refcheck=False)
        upper.resize(nv + extra, refcheck=False)
        cost.resize(nv + extra, refcheck=False)
        for k, c in enumerate(cyc):
            self.tcol[c] = nv + k
            lower[nv + k] = 0.0
            upper[nv + k] = top
            cost[nv + k] = 0.0
        for c in cyc:
            for i in self.members[c]:
                for d in set(self.problem.node_children[i]):
                    if d in self.tcol and comp[d] == comp[c]:
                        # t_c - t_d - A x_i >= eps - A
                        row(
                            [self.tcol[c], self.tcol[d], self.col[i]],
                            [1.0, -1.0, -big],
                            eps - big,
                            math.inf,
                        )
        return nv + extra

    def add_cut(self, nodes: list[int], coefs: list[float], lo: float, hi: float) -> None:
        """Appends the row ``lo <= sum coefs * x_nodes <= hi`` (nodes not in the model are
        skipped: they are 0)."""
        import highspy

        pairs: dict[int, float] = {}
        for i, a in zip(nodes, coefs, strict=True):
            k = self.col.get(i)
            if k is not None:
                pairs[k] = pairs.get(k, 0.0) + a
        inf = highspy.kHighsInf
        self.h.addRow(
            -inf if lo == -math.inf else lo,
            inf if hi == math.inf else hi,
            len(pairs),
            np.asarray(list(pairs), dtype=np.int32),
            np.asarray(list(pairs.values()), dtype=float),
        )
        self.cuts += 1

    def start_vector(self, choice: dict[int, int]) -> np.ndarray | None:
        """The column values of ``choice`` (order variables from its heights), or ``None``
        when it uses a node that is not in the model or the model is a relaxation."""
        if self.relax or not all(i in self.col for i in choice.values()):
            return None
        start = np.zeros(self.num_vars)
        for c, i in choice.items():
            start[self.col[i]] = 1.0
            start[self.ycol[c]] = 1.0
        if self.tcol:
            height = _heights(self.problem, choice, self.comp)
            m = self.order_m
            for c, k in self.tcol.items():
                hgt = min(height.get(c, 0), m - 1)
                start[k] = hgt / m if self.order_kind == "real" else float(hgt)
        return start

    def set_start(self, choice: dict[int, int]) -> bool:
        """Gives HiGHS ``choice`` as its starting solution; ``False`` (and nothing set) when
        the choice uses a node that is not in the model."""
        import highspy

        start = self.start_vector(choice)
        if start is None:
            return False
        sol = highspy.HighsSolution()
        sol.col_value = list(start)
        self.h.setSolution(sol)
        return True

    def solve(
        self,
        time_limit: float,
        offers: Callable[[], dict[int, int] | None] | None = None,
        interrupt: Callable[[float], bool] | None = None,
    ) -> HighsSolve:
        """Runs HiGHS for at most ``time_limit`` seconds (wall clock).

        ``offers``, when given, is polled whenever HiGHS asks for user solutions (its
        ``kCallbackMipUserSolution``, several times a second on the models here); a choice it
        returns is handed over as a candidate incumbent, which HiGHS keeps when it is
        cheaper than its own (a search running in another thread feeds the solver so).
        ``interrupt``, when given, is called at HiGHS's interrupt points
        (``kCallbackMipInterrupt``, about ten times a second) with the solve's relative gap
        (``(incumbent - bound) / incumbent``, ``inf`` before the first bound); the solve
        stops, keeping its incumbent and bound (status "Interrupted by user", not
        optimal), once it returns ``True``.
        """
        import highspy

        def inject(event: Any) -> None:  # noqa: ANN401 (highspy's event type)
            choice = offers() if offers is not None else None
            vector = self.start_vector(choice) if choice is not None else None
            if vector is not None:
                event.data_in.setSolution(vector)

        def check(event: Any) -> None:  # noqa: ANN401
            if interrupt is not None and interrupt(float(event.data_out.mip_gap)):
                event.interrupt()

        t0 = time.perf_counter()
        self.h.setOptionValue("time_limit", max(0.05, float(time_limit)))
        if offers is not None:
            self.h.cbMipUserSolution.subscribe(inject)
        if interrupt is not None:
            self.h.cbMipInterrupt.subscribe(check)
        try:
            self.h.run()
        finally:
            if offers is not None:
                self.h.cbMipUserSolution.unsubscribe(inject)
            if interrupt is not None:
                self.h.cbMipInterrupt.unsubscribe(check)
        status = self.h.getModelStatus()
        info = self.h.getInfo()
        text = self.h.modelStatusToString(status)
        seconds = time.perf_counter() - t0
        if self.relax:
            if status != highspy.HighsModelStatus.kOptimal:
                return HighsSolve(None, math.inf, 0.0, False, seconds, text)
            obj = info.objective_function_value / self.scale
            return HighsSolve(None, obj, obj, True, seconds, text)
        bound = info.mip_dual_bound
        lb = bound / self.scale if math.isfinite(bound) else 0.0
        if status == highspy.HighsModelStatus.kInfeasible:
            return HighsSolve(None, math.inf, math.inf, True, seconds, text)
        if info.primal_solution_status != 2:  # kSolutionStatusFeasible
            return HighsSolve(None, math.inf, max(0.0, lb), False, seconds, text)
        values = self.h.getSolution().col_value
        selected = [False] * self.problem.num_nodes
        for k, i in enumerate(self.nodes):
            selected[i] = values[k] > 0.5
        obj = info.objective_function_value / self.scale
        optimal = status == highspy.HighsModelStatus.kOptimal
        return HighsSolve(selected, obj, max(0.0, lb), optimal, seconds, text)


def _heights(problem: ExtractionProblem, choice: dict[int, int], comp: list[int]) -> dict[int, int]:
    """Height of each chosen class of an acyclic choice above its descendants in the same
    strongly connected component (at most the component's size - 1)."""
    height: dict[int, int] = {}
    for root in choice:
        stack = [(root, False)]
        while stack:
            d, done = stack.pop()
            if d in height:
                continue
            kids = [
                k
                for k in set(problem.node_children[choice[d]])
                if k in choice and comp[k] == comp[d]
            ]
            if done:
                height[d] = 1 + max((height[k] for k in kids), default=-1)
            else:
                stack.append((d, True))
                stack.extend((k, False) for k in kids if k not in height)
    return height
