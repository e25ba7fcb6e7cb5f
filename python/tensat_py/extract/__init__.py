"""Extraction: pick one e-node per needed e-class so that the program's cost is least.

``extract(problem, extractor=...)`` runs one of

* ``"greedy"``: tree-cost greedy (egg's extractor; Rust),
* ``"greedy-dag"``: DAG-cost greedy (extraction-gym's greedy-dag; Rust),
* ``"ilp"``: Tensat's ILP (MLSys'21, section 5.1) with PuLP, warm-started from and never
  worse than the greedy DAG (see :mod:`tensat_py.extract.ilp`).

See ``docs/extraction.md``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from tensat_py.egraph import ExtractionProblem
from tensat_py.extract.greedy import greedy_dag, greedy_tree

__all__ = ["ExtractionResult", "extract", "EXTRACTORS"]

EXTRACTORS = ("greedy", "greedy-dag", "ilp")


@dataclass
class ExtractionResult:
    """An extraction.

    Attributes:
        choices: class -> node, exactly for the classes reachable from the roots.
        cost: DAG cost of ``choices`` (each chosen node once; the problem's cost unit,
            seconds for Tensat's cost models).
        status: ``"optimal"`` (ILP proved optimal), ``"feasible"`` (ILP stopped at the time
            limit with a solution better than greedy), ``"fallback-greedy"`` (the ILP failed
            or was not better; this is the greedy DAG result) or ``"greedy"``.
        seconds: wall-clock time of the extraction, in seconds.
        message: a human-readable note (solver rounds, why it fell back, ...).
    """

    choices: dict[int, int]
    cost: float
    status: str
    seconds: float
    message: str = ""


def extract(
    problem: ExtractionProblem,
    *,
    extractor: str = "ilp",
    solver: str = "cbc",
    time_limit: float = 60.0,
    cycle_constraints: str | None = None,
    order_vars: str = "real",
    warm_start: bool = True,
    search: bool = True,
) -> ExtractionResult:
    """Extracts the cheapest program from an e-graph.

    Args:
        problem: the e-graph.
        extractor: ``"greedy"``, ``"greedy-dag"`` or ``"ilp"``.
        solver: ILP solver, ``"cbc"`` or ``"highs"``.
        time_limit: ILP wall-clock budget in seconds (all solver calls together).
        cycle_constraints: ``"lazy"`` (default when ``None``: add a constraint per cycle
            found and re-solve), ``"order"`` (the paper's topological order variables) or
            ``"none"`` (cyclic answers fall back to greedy).
        order_vars: ``"real"`` or ``"int"`` order variables for ``"order"``.
        warm_start: start CBC from the greedy DAG solution.
        search: on e-graphs with class cycles (``"lazy"`` mode), first improve the greedy
            DAG by exact ILPs over random acyclic restrictions (HiGHS; see
            :mod:`tensat_py.extract.lns`); its answers are ``"feasible"``, not proved.

    Returns:
        an :class:`ExtractionResult`; its choice is acyclic and never costlier than the
        greedy DAG choice when ``extractor="ilp"``.

    Raises:
        ValueError: on a malformed problem, an unknown option, or when a root class cannot
            be built from allowed (non-forbidden) nodes.
    """
    if extractor not in EXTRACTORS:
        raise ValueError(f"unknown extractor {extractor!r} (expected one of {EXTRACTORS})")
    start = time.perf_counter()
    problem.validate()
    if extractor == "greedy":
        choices = greedy_tree(problem)
        return _result(problem, choices, "greedy", start, "greedy tree cost")
    dag = greedy_dag(problem)
    if extractor == "greedy-dag":
        return _result(problem, dag, "greedy", start, "greedy DAG cost")

    import pulp

    from tensat_py.extract.ilp import solve_ilp

    mode = cycle_constraints or "lazy"
    try:
        outcome = solve_ilp(
            problem,
            solver=solver,
            time_limit=time_limit,
            cycle_constraints=mode,
            order_vars=order_vars,
            warm_start=dag if (warm_start and dag) else None,
            search=search,
        )
    except (pulp.PulpSolverError, OSError) as e:
        # A missing or crashing solver binary: the greedy DAG answer stands.
        return _result(problem, dag, "fallback-greedy", start, f"ILP solver {solver} failed: {e}")
    greedy_cost = problem.dag_cost(dag) if dag else math.inf
    if outcome.choices is None:
        return _result(problem, dag, "fallback-greedy", start, f"ILP failed: {outcome.message}")
    why = problem.check_choice(outcome.choices)
    if why is not None:
        return _result(
            problem, dag, "fallback-greedy", start, f"ILP answer invalid ({why}); greedy DAG"
        )
    ilp_cost = problem.dag_cost(outcome.choices)
    # Relative slack: solver round-off must not turn an equal-cost answer into a fallback.
    if ilp_cost > greedy_cost * (1 + 1e-9):
        return _result(
            problem,
            dag,
            "fallback-greedy",
            start,
            f"ILP ({outcome.status}) cost {ilp_cost:.6g} > greedy DAG {greedy_cost:.6g}",
        )
    return _result(problem, outcome.choices, outcome.status, start, outcome.message)


def _result(
    problem: ExtractionProblem, choices: dict[int, int], status: str, start: float, msg: str
) -> ExtractionResult:
    if not choices:
        raise ValueError(
            f"root class {problem.roots} cannot be built from allowed (non-forbidden) nodes"
        )
    choices = problem.reachable(choices)
    return ExtractionResult(
        choices=choices,
        cost=problem.dag_cost(choices),
        status=status,
        seconds=time.perf_counter() - start,
        message=msg,
    )
