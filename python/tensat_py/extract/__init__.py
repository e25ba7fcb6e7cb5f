"""Extraction: pick one e-node per needed e-class so that the program's cost is least.

``extract(problem, extractor=...)`` runs one of

* ``"greedy"``: tree-cost greedy (egg's extractor; Rust),
* ``"greedy-dag"``: DAG-cost greedy (extraction-gym's greedy-dag; Rust),
* ``"beam"``: DAG-cost beam search keeping the ``beam_width`` best partial solutions per
  class (extraction-gym's beam extractor idea; Rust), never worse than greedy-dag,
* ``"ilp"``: Tensat's ILP (MLSys'21, section 5.1) with PuLP, warm-started from and never
  worse than the greedy DAG (see :mod:`tensat_py.extract.ilp`).

E-graphs with negative costs (extraction-gym's ``maxsat`` family) go through
:mod:`tensat_py.extract.signed`: an exact ILP without the simplifications that assume
non-negative costs, and the greedy extractors on shifted costs (a heuristic answer).

See ``docs/extraction.md``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from tensat_py.egraph import ExtractionProblem
from tensat_py.extract.greedy import beam_dag, greedy_dag, greedy_tree

__all__ = ["ExtractionResult", "extract", "EXTRACTORS"]

EXTRACTORS = ("greedy", "greedy-dag", "beam", "ilp")


@dataclass
class ExtractionResult:
    """An extraction.

    Attributes:
        choices: class -> node, exactly for the classes reachable from the roots.
        cost: DAG cost of ``choices`` (each chosen node once; the problem's cost unit,
            seconds for Tensat's cost models).
        status: ``"optimal"`` (ILP proved optimal), ``"feasible"`` (ILP stopped at the time
            limit with a solution better than greedy), ``"fallback-greedy"`` (the ILP failed
            or was not better; this is the greedy DAG result), ``"bound-stop"`` (the
            critical-path lower bound exceeds ``stop_above``: greedy DAG, no ILP) or
            ``"greedy"``.
        seconds: wall-clock time of the extraction, in seconds.
        message: a human-readable note (solver rounds, why it fell back, ...).
        lower_bound: a proved lower bound on the cost of every valid extraction (same unit
            as ``cost``), or ``None`` when the extractor proves none (the heuristics).
        gap: ``(cost - lower_bound) / cost`` (0.0 when ``cost`` is 0), or ``None``.
            ``status == "optimal"`` exactly when the ILP proved ``gap <= 1e-6``.
        build_seconds: seconds spent building solver models.
        solve_seconds: seconds spent inside the ILP solver.
        simplify_seconds: seconds spent simplifying the e-graph before the ILP.
        stats: counts from the simplification and the model (``kept_nodes``,
            ``dominated``, ``necessary``, ``model_vars``, ``model_rows``, ``search_steps``,
            ``search_improvements``, ...).
    """

    choices: dict[int, int]
    cost: float
    status: str
    seconds: float
    message: str = ""
    lower_bound: float | None = None
    gap: float | None = None
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    simplify_seconds: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The figures as a JSON-ready dictionary (no choices): ``cost``, ``lower_bound``,
        ``gap``, ``status``, ``seconds``, ``build_seconds``, ``solve_seconds``,
        ``simplify_seconds``, ``message`` and ``stats``."""
        return {
            "cost": self.cost,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "status": self.status,
            "seconds": self.seconds,
            "build_seconds": self.build_seconds,
            "solve_seconds": self.solve_seconds,
            "simplify_seconds": self.simplify_seconds,
            "message": self.message,
            "stats": dict(self.stats),
        }


#: Seconds per e-node kept back from the ILP's time limit for what follows the solve:
#: reading its answer back, the pieces' answers joined, the choice checked and costed (0.16 s
#: on the zoo's 46,756-node BERT k_multi=2 e-graph, which ended 0.2-0.5 s past a 4-6 s
#: limit without it).
FINISH_SECONDS_PER_NODE = 4e-6


def extract(
    problem: ExtractionProblem,
    *,
    extractor: str = "ilp",
    solver: str = "highs",
    time_limit: float = 60.0,
    cycle_constraints: str | None = None,
    order_vars: str = "real",
    warm_start: bool = True,
    search: bool = True,
    beam_width: int = 4,
    simplify: bool = True,
    decompose: bool = True,
    path_bound: bool = True,
    gap: float = 1e-6,
    stop_above: float | None = None,
) -> ExtractionResult:
    """Extracts the cheapest program from an e-graph.

    Args:
        problem: the e-graph.
        extractor: ``"greedy"``, ``"greedy-dag"``, ``"beam"`` or ``"ilp"``.
        solver: ILP solver, ``"highs"`` (default) or ``"cbc"``.
        time_limit: wall-clock budget of the ILP extraction in seconds: the greedy start,
            the bounds, simplification, every solver call and reading the answer back
            together (:data:`FINISH_SECONDS_PER_NODE` per e-node is kept for the last).
        cycle_constraints: ``"lazy"`` (default when ``None``: add a constraint per cycle
            found and re-solve), ``"order"`` (the paper's topological order variables) or
            ``"none"`` (cyclic answers fall back to greedy).
        order_vars: ``"real"`` or ``"int"`` order variables for ``"order"``.
        warm_start: give CBC the greedy DAG answer as its start: its cost is the cutoff, and
            the answer when CBC finds nothing cheaper (docs/extraction.md).
        search: on e-graphs with class cycles (``"lazy"`` mode), improve the start by
            exact ILPs over acyclic restrictions (HiGHS; see :mod:`tensat_py.extract.lns`),
            beside the first exact round (``solver="highs"``) or before the exact ILP
            (``"cbc"``); its answers are ``"feasible"`` unless a lower bound proves them
            optimal. An acyclic problem (or piece) of at least ``ilp.LATE_SEARCH_NODES``
            nodes whose solve has not finished after ``ilp.LATE_SEARCH_SHARE`` of its time
            gets the search beside it too: with ``"highs"`` once no other piece is being
            solved and when its gap is still above ``ilp.LATE_SEARCH_GAP`` (the two
            exchange answers), with ``"cbc"`` once no more pieces are being solved than
            the process has CPUs (CBC reports nothing while it runs; the cheaper answer
            is kept).
        beam_width: partial solutions kept per class by ``"beam"`` (and by the ILP's warm
            start on cyclic e-graphs).
        simplify: simplify the e-graph before the ILP (dominated nodes, nodes needing their
            own class; :mod:`tensat_py.extract.simplify`); pruning always happens.
        decompose: split the ILP at dominator cuts into independent pieces, solved several
            at once and proved one by one (:mod:`tensat_py.extract.decompose`).
        path_bound: use the critical-path lower bound
            (:func:`tensat_py.extract.bounds.critical_path_bound`): a greedy DAG answer
            that meets it is optimal without an ILP, and it joins the ILP's own bound; so
            does each piece's own bound in a decomposed ILP. ``False`` runs the ILP alone
            (to measure it).
        gap: the relative gap between the answer and the proved lower bound at which the
            ILP stops (default ``1e-6``; HiGHS's ``mip_rel_gap``, CBC's ``ratioGap``): an
            answer within it is ``"optimal"``. A larger gap trades a proof for time.
        stop_above: a cost only answers below which matter (``optimize`` passes the
            input's cost less ``min_gain``): when the critical-path lower bound already
            exceeds it, no ILP runs and the greedy DAG answer is returned with status
            ``"bound-stop"`` (no extraction could pay).

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
    if min(problem.node_cost, default=0.0) < 0:
        return _extract_signed(problem, extractor, solver, time_limit, beam_width, start)
    if extractor == "greedy":
        choices = greedy_tree(problem)
        return _result(problem, choices, "greedy", start, "greedy tree cost")
    if beam_width < 1:
        raise ValueError(f"beam_width must be at least 1, got {beam_width}")
    dag = greedy_dag(problem)
    if extractor == "greedy-dag":
        return _result(problem, dag, "greedy", start, "greedy DAG cost")
    if extractor == "beam":
        beam = beam_dag(problem, beam_width)
        return _result(problem, beam, "greedy", start, f"beam search, width {beam_width}")

    if not 0.0 <= gap < 1.0:
        raise ValueError(f"gap: must be in [0, 1), got {gap!r}")
    from tensat_py.extract.highs import gap_tolerance

    with gap_tolerance(max(gap, 1e-9)):
        return _extract_ilp(
            problem,
            dag,
            start,
            solver=solver,
            time_limit=time_limit,
            cycle_constraints=cycle_constraints,
            order_vars=order_vars,
            warm_start=warm_start,
            search=search,
            simplify=simplify,
            decompose=decompose,
            path_bound=path_bound,
            stop_above=stop_above,
        )


def _extract_ilp(
    problem: ExtractionProblem,
    dag: dict[int, int],
    start: float,
    *,
    solver: str,
    time_limit: float,
    cycle_constraints: str | None,
    order_vars: str,
    warm_start: bool,
    search: bool,
    simplify: bool,
    decompose: bool,
    path_bound: bool,
    stop_above: float | None,
) -> ExtractionResult:
    """:func:`extract` with ``extractor="ilp"`` after the greedy DAG answer ``dag``."""
    import pulp

    from tensat_py.extract.bounds import critical_path_bound, meets
    from tensat_py.extract.ilp import solve_ilp

    bound = critical_path_bound(problem) if path_bound or stop_above is not None else None
    path = bound if path_bound else None
    greedy_cost = problem.dag_cost(dag) if dag else math.inf
    if path is not None and dag and meets(greedy_cost, path):
        # The greedy DAG answer already meets the critical-path bound: proved, no ILP.
        return _result(
            problem,
            dag,
            "optimal",
            start,
            f"greedy DAG cost {greedy_cost:.6g} meets the critical-path lower bound; no ILP",
            lower_bound=path,
            stats={"path_bound": path},
        )
    if stop_above is not None and bound is not None and bound > stop_above and dag:
        return _result(
            problem,
            dag,
            "bound-stop",
            start,
            f"the critical-path lower bound {bound:.6g} exceeds {stop_above:.6g}: no "
            "extraction can cost less; no ILP",
            lower_bound=bound,
            stats={"path_bound": bound},
        )

    mode = cycle_constraints or "lazy"
    try:
        outcome = solve_ilp(
            problem,
            solver=solver,
            # What the greedy start and the bound took comes out of the budget, and what
            # reading the answer back and checking it will take is kept from it.
            time_limit=max(
                1e-6,
                time_limit
                - (time.perf_counter() - start)
                - FINISH_SECONDS_PER_NODE * problem.num_nodes,
            ),
            cycle_constraints=mode,
            order_vars=order_vars,
            warm_start=dag if (warm_start and dag) else None,
            search=search,
            simplify_graph=simplify,
            decompose=decompose,
            path_bound=path_bound,
        )
    except (pulp.PulpSolverError, OSError) as e:
        # A missing or crashing solver binary: the greedy DAG answer stands.
        return _result(problem, dag, "fallback-greedy", start, _solver_failure(solver, e))
    lower = outcome.lower_bound
    if path is not None and math.isfinite(path):
        lower = max(lower or 0.0, path)
    extra = {
        "lower_bound": lower,
        "build_seconds": outcome.build_seconds,
        "solve_seconds": outcome.solve_seconds,
        "simplify_seconds": outcome.simplify_seconds,
        "stats": outcome.stats if path is None else {**outcome.stats, "path_bound": path},
    }
    if outcome.choices is None:
        return _result(
            problem, dag, "fallback-greedy", start, f"ILP failed: {outcome.message}", **extra
        )
    why = problem.check_choice(outcome.choices)
    if why is not None:
        return _result(
            problem,
            dag,
            "fallback-greedy",
            start,
            f"ILP answer invalid ({why}); greedy DAG",
            **extra,
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
            **extra,
        )
    status, message = outcome.status, outcome.message
    if path is not None and status != "optimal" and meets(ilp_cost, path):
        status, message = "optimal", f"{message}; proved by the critical-path lower bound"
    return _result(problem, outcome.choices, status, start, message, **extra)


def _extract_signed(
    problem: ExtractionProblem,
    extractor: str,
    solver: str,
    time_limit: float,
    beam_width: int,
    start: float,
) -> ExtractionResult:
    """:func:`extract` on an e-graph with negative costs (:mod:`tensat_py.extract.signed`):
    the greedy extractors on shifted costs, saying that their answer bounds nothing; the
    ILP through the signed-cost formulation, falling back to greedy DAG without an answer."""
    from tensat_py.extract.signed import shifted, solve_signed

    if beam_width < 1:
        raise ValueError(f"beam_width must be at least 1, got {beam_width}")
    positive, shift = shifted(problem)
    note = (
        f"costs include negative values: ran on costs shifted by +{shift:.6g}, so this is a "
        "heuristic answer and its cost is no bound on the optimum"
    )
    if extractor == "greedy":
        return _result(problem, greedy_tree(positive), "greedy", start, f"greedy tree; {note}")
    dag = greedy_dag(positive)
    if extractor == "greedy-dag":
        return _result(problem, dag, "greedy", start, f"greedy DAG; {note}")
    if extractor == "beam":
        beam = beam_dag(positive, beam_width)
        return _result(problem, beam, "greedy", start, f"beam search, width {beam_width}; {note}")
    outcome = solve_signed(
        problem, solver=solver, time_limit=max(1e-6, time_limit - (time.perf_counter() - start))
    )
    extra = {"solve_seconds": outcome.seconds}
    if outcome.choices is None or problem.check_choice(outcome.choices) is not None:
        why = outcome.message if outcome.choices is None else problem.check_choice(outcome.choices)
        return _result(
            problem,
            dag,
            "fallback-greedy",
            start,
            f"ILP failed: {why}; greedy DAG, {note}",
            **extra,
        )
    cost = problem.dag_cost(outcome.choices)
    if dag and problem.dag_cost(dag) < cost:
        return _result(
            problem,
            dag,
            "fallback-greedy",
            start,
            f"ILP ({outcome.status}) {cost:.6g} > greedy DAG",
            **extra,
        )
    lower = cost if outcome.status == "optimal" else None
    return _result(
        problem, outcome.choices, outcome.status, start, outcome.message, lower_bound=lower, **extra
    )


def _result(
    problem: ExtractionProblem,
    choices: dict[int, int],
    status: str,
    start: float,
    msg: str,
    *,
    lower_bound: float | None = None,
    **figures: Any,
) -> ExtractionResult:
    if not choices:
        raise ValueError(
            f"root class {problem.roots} cannot be built from allowed (non-forbidden) nodes"
        )
    choices = problem.reachable(choices)
    cost = problem.dag_cost(choices)
    gap = None
    if lower_bound is not None:
        lower_bound = min(lower_bound, cost)
        gap = (cost - lower_bound) / abs(cost) if cost != 0 else 0.0
    return ExtractionResult(
        choices=choices,
        cost=cost,
        status=status,
        seconds=time.perf_counter() - start,
        message=msg,
        lower_bound=lower_bound,
        gap=gap,
        **figures,
    )


def _solver_failure(solver: str, error: BaseException) -> str:
    """One line saying the ILP solver failed and why, without PuLP's advice to its own
    users (``use msg=True``) and the binary's path: PuLP says only that the CBC process
    exited with an error (CBC 2.10 segfaulted, for one, when its time limit fell inside
    the processing of a MIP start on a large model), or that it was stopped at the time limit."""
    from tensat_py.extract.ilp import SolverStopped

    hint = "; solver='highs' may solve it" if solver == "cbc" else ""
    if isinstance(error, SolverStopped):
        return (
            f"ILP solver {solver} had no answer at the time limit and was stopped; kept the "
            f"greedy DAG answer{hint}"
        )
    text = str(error)
    if "Error while trying to execute" in text:
        text = "the CBC process exited with an error"
    return f"ILP solver {solver} failed: {text}; kept the greedy DAG answer{hint}"
