"""ILP extraction (Tensat, MLSys'21, section 5.1): HiGHS (highspy, the default) or CBC through PuLP.

Formulation over the pruned e-graph (see :func:`prune`): a binary ``x_i`` per node;

* a class variable ``y_c = sum_{i in c} x_i`` in [0, 1] per class: at most one node per
  class (valid: with non-negative costs some optimal acyclic extraction picks one node per
  class; and a far tighter LP relaxation than the paper's ``x_i <= sum_{j in c} x_j``: an
  e-graph of SqueezeNet at k_multi=2 solves in under 1 s instead of timing out at 60 s);
* each root class: ``y_r = 1``;
* each class ``g`` and each child class ``c`` of its nodes: ``sum_{i in g, c in children(i)}
  x_i <= y_c`` (a class with one node has no ``y`` of its own: its ``x`` stands for it);
* each class ``d`` that every acyclic derivation of ``g`` builds: ``y_g <= y_d``
  (:mod:`tensat_py.extract.needs`; CBC's preprocessing does not find these implications);
* forbidden (cycle filter list) nodes are absent (``x_i = 0``);
* minimise ``sum_i cost_i x_i``.

Acyclicity is enforced either lazily (``cycle_constraints="lazy"``: solve, find cycles in
the chosen graph, forbid each (``sum x over its nodes <= len - 1``), re-solve) or with the
paper's topological order variables (``"order"``: ``t_g(i) - t_c - eps + A (1 - x_i) >= 0``
for every node ``i`` and child class ``c`` in the same strongly connected component), or not
at all (``"none"``: a cyclic answer falls back to greedy).

The greedy DAG choice is the start (CBC's cutoff) and the floor: the result is never costlier.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import os
import re
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulp

from tensat_py import _core
from tensat_py.egraph import ExtractionProblem
from tensat_py.extract.needs import needed_pairs
from tensat_py.extract.simplify import Simplified

if TYPE_CHECKING:
    from tensat_py.extract.highs import HighsModel, HighsSolve
    from tensat_py.extract.lns import LnsOutcome

__all__ = ["IlpOutcome", "prune", "solve_ilp"]


@dataclass
class IlpOutcome:
    """What the ILP produced.

    Attributes:
        choices: class -> node (reachable from the roots), or ``None`` when no acyclic
            solution was obtained.
        status: ``"optimal"`` (proved) or ``"feasible"`` (time limit hit with a solution),
            or ``"none"`` when ``choices`` is ``None``.
        message: details (rounds, cycle cuts added, solver status, why it failed).
        rounds: number of solver calls.
        cuts: number of cycle constraints added (lazy mode).
        lower_bound: a proved lower bound on the cost of every acyclic extraction, in the
            problem's cost unit (0.0 when nothing better is known).
        build_seconds: seconds spent building solver models (wall clock).
        solve_seconds: seconds spent in the solver (wall clock).
        simplify_seconds: seconds spent simplifying the e-graph (wall clock).
        stats: counts from the simplification and the model (``kept_nodes``,
            ``dominated``, ``model_vars``, ...).
    """

    choices: dict[int, int] | None
    status: str
    message: str
    rounds: int = 0
    cuts: int = 0
    lower_bound: float = 0.0
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    simplify_seconds: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)


def prune(problem: ExtractionProblem) -> list[bool]:
    """Nodes that can appear in some acyclic extraction from the roots.

    Keeps a node when it is not forbidden, does not have its own class as a child, every
    child class is buildable (least fixpoint: a class is buildable when one of its kept nodes
    has only buildable children — this subsumes dropping nodes whose child class has no
    allowed node) and its class is reachable from the roots through kept nodes (computed in
    Rust: ``tensat_py._core.prune``, ``rust/src/prune.rs``).

    Returns:
        one bool per node: kept.

    Raises:
        ValueError: on a malformed problem (a class or child out of range), naming the node.
    """
    return _core.prune(
        problem.node_eclass,
        problem.node_children,
        problem.num_classes,
        problem.roots,
        problem.forbidden_mask(),
    )


#: Extra CBC command-line options (each passed as ``-option``).
CBC_OPTIONS = ["heur off"]

#: Relative slack of CBC's cutoff above the start's cost (the start itself must stay inside).
CUTOFF_SLACK = 1e-9


def _solver(solver: str, time_limit: float, cutoff: float | None = None) -> pulp.LpSolver:
    limit = max(1.0, time_limit)
    if solver == "cbc":
        with warnings.catch_warnings():
            # PuLP 3.3 deprecates the bundled CBC in favour of a system one (COIN_CMD); the
            # bundled binary is the one that is always there.
            warnings.simplefilter("ignore", DeprecationWarning)
            # CBC's primal heuristics off: the start's cost is CBC's cutoff (_solve_exact),
            # and without them CBC proves the zoo's k_multi=2 pieces 1.4-3.5x sooner
            # (BERT's 12,285 kept nodes: 9.1 -> 4.7 s; docs/extraction.md).
            from tensat_py.extract.highs import relative_gap

            options = [*CBC_OPTIONS, f"ratioGap {relative_gap()!r}"]
            if cutoff is not None:
                options.append(f"cutoff {cutoff!r}")
            return pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, options=options)
    if solver == "highs":
        # PuLP's highspy interface takes no initial solution: no warm start for HiGHS.
        return pulp.HiGHS(msg=False, timeLimit=limit)
    raise ValueError(f"unknown solver {solver!r} (expected 'cbc' or 'highs')")


class SolverStopped(pulp.PulpSolverError):
    """The solver process ran past the deadline and was stopped (it had no answer yet)."""


def _run(
    lp: pulp.LpProblem,
    solver: pulp.LpSolver,
    deadline: float | None = None,
    started: threading.Event | None = None,
) -> str:
    """Solves ``lp`` with ``solver`` and returns CBC's log ("" for a solver that is not a
    command). A command-line solver (CBC) writes its model, log and solution files into a
    private temporary folder that is removed whatever happens. PuLP deletes them only after
    a successful run, so a CBC that exits with an error (``pulp.PulpSolverError``, raised on)
    would leave them (13 MB for NasRNN) in /tmp.

    With a ``deadline`` (``time.perf_counter()`` seconds), a CBC process still running then
    is stopped and :class:`SolverStopped` raised: CBC's own limit does not cover PuLP's
    writing of the model (46k variables: 21 s of a 10 s budget when CBC also processed a MIP
    start, bench/extract_bench.md). ``started`` is set once the CBC process runs (PuLP has
    written the model; Linux's /proc is polled every 50 ms) or the solve has returned.

    Raises:
        SolverStopped: the process was stopped at the deadline.
        pulp.PulpSolverError: the solver failed.
    """
    if not isinstance(solver, pulp.LpSolver_CMD):
        if started is not None:
            started.set()
        lp.solve(solver)
        return ""
    with tempfile.TemporaryDirectory(prefix="tensat-cbc-") as folder:
        solver.tmpDir = folder
        log_path = os.path.join(folder, "cbc.log")
        solver.optionsDict["logPath"] = log_path
        stopped: list[int] = []
        finished = threading.Event()

        def watch() -> None:
            if started is not None:
                while not _children(folder) and not finished.wait(0.05):
                    if deadline is not None and time.perf_counter() >= deadline:
                        break
                started.set()
            if deadline is None:
                return
            # From the deadline on, until the solve returns: PuLP may still be writing the
            # model when the deadline comes, and start CBC after it.
            if finished.wait(max(0.0, deadline - time.perf_counter())):
                return
            while not stopped and not finished.wait(0.05):
                stopped.extend(_stop_processes(folder))

        watched = deadline is not None or started is not None
        watchdog = threading.Thread(target=watch, daemon=True) if watched else None
        if watchdog is not None:
            watchdog.start()
        try:
            lp.solve(solver)
            with open(log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except pulp.PulpSolverError as e:
            failure = e
        finally:
            finished.set()
            if watchdog is not None:
                watchdog.join()  # it may have killed the process and not yet said so
        if stopped:
            raise SolverStopped("the solver process was stopped at the time limit") from failure
        raise failure


def _children(folder: str) -> list[int]:
    """Ids of this process's children whose command line names ``folder`` (Linux's /proc;
    none elsewhere)."""
    found: list[int] = []
    me = str(os.getpid())
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                parent = f.read().rsplit(b")", 1)[1].split()[1].decode()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except (OSError, IndexError):
            continue
        if parent == me and folder in cmdline:
            found.append(int(pid))
    return found


def _stop_processes(folder: str) -> list[int]:
    """Kills this process's children whose command line names ``folder`` (Linux's /proc;
    nothing elsewhere). Returns their process ids."""
    killed: list[int] = []
    for pid in _children(folder):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            pass
    return killed


def _choose(
    problem: ExtractionProblem, selected: list[bool], kept: list[bool]
) -> tuple[dict[int, int] | None, list[list[int]]]:
    """Turns a 0/1 solution into a choice, or finds cycles that block one.

    Among the selected nodes, builds classes bottom-up (a class is built by a selected node
    whose children are all built, cheapest first); if every root gets built, the choice is
    acyclic and costs at most the ILP objective. Otherwise the unbuilt selected part
    reachable from the roots holds cycles; they are returned as lists of classes, each
    class's chosen node having the next class (cyclically) as a child.
    """
    n = problem.num_nodes
    nc = problem.num_classes
    sel = [selected[i] and kept[i] for i in range(n)]
    # Bottom-up tree-cost build over selected nodes (Dijkstra-like fixpoint, small sets).
    cost = [math.inf] * nc
    best: list[int | None] = [None] * nc
    changed = True
    order = [i for i in range(n) if sel[i]]
    while changed:
        changed = False
        for i in order:
            c = problem.node_cost[i] + sum(cost[d] for d in problem.node_children[i])
            k = problem.node_eclass[i]
            if c < cost[k]:
                cost[k] = c
                best[k] = i
                changed = True
    if all(best[r] is not None for r in problem.roots):
        choices = problem.reachable({c: b for c, b in enumerate(best) if b is not None})
        return choices, []
    # Cycles among unbuilt classes: every selected node of an unbuilt class has an unbuilt
    # child (or the class has no selected node: an infeasible solution, no cycle to cut).
    by_class: list[list[int]] = [[] for _ in range(nc)]
    for i in order:
        by_class[problem.node_eclass[i]].append(i)
    cycles: list[list[int]] = []
    colour = [0] * nc
    for r in problem.roots:
        if best[r] is not None or colour[r]:
            continue
        colour[r] = 1
        path: list[tuple[int, int]] = [(r, -1)]  # (class, node used to enter next)
        edges = [iter([(i, d) for i in by_class[r] for d in problem.node_children[i]])]
        while edges:
            nxt = next(edges[-1], None)
            if nxt is None:
                colour[path.pop()[0]] = 2
                edges.pop()
                continue
            i, d = nxt
            if best[d] is not None:
                continue
            if colour[d] == 1:
                # cycle of classes: from d's position on the path to here
                start = next(k for k, (c, _) in enumerate(path) if c == d)
                cycles.append([c for c, _ in path[start:]])
                if len(cycles) >= 200:
                    return None, cycles
            elif colour[d] == 0:
                colour[d] = 1
                path.append((d, i))
                edges.append(iter([(j, e) for j in by_class[d] for e in problem.node_children[j]]))
    return None, cycles


def solve_ilp(
    problem: ExtractionProblem,
    *,
    solver: str = "highs",
    time_limit: float = 60.0,
    cycle_constraints: str = "lazy",
    order_vars: str = "real",
    warm_start: dict[int, int] | None = None,
    search: bool = True,
    seed: int = 0,
    simplify_graph: bool = True,
    decompose: bool = True,
    path_bound: bool = True,
) -> IlpOutcome:
    """Solves the extraction ILP over the simplified e-graph; proves a lower bound.

    The e-graph is first simplified (:func:`tensat_py.extract.simplify.simplify`: pruning,
    dominated nodes, nodes that need their own class). With ``decompose``, it is then split
    at dominator cuts into independent pieces (:mod:`tensat_py.extract.decompose`), each
    solved as below, children first, and the pieces' bounds joined; an e-graph without a
    cut is one piece. Then

    * ``solver="highs"``: the model goes to HiGHS as arrays
      (:class:`tensat_py.extract.highs.HighsModel`). Acyclic class graph: one solve. Cyclic
      class graph, ``"lazy"`` mode: solve, cut the cycles of the answer (edge and exit
      cuts), solve again; every solve's dual bound is a lower bound on every acyclic
      extraction (the cuts are valid for them). With ``search``, a large-neighbourhood
      search (:func:`tensat_py.extract.lns.improve`) runs in a second thread beside the
      time-boxed first round (once it has run :data:`SEARCH_GRACE` seconds), hands its
      answers to the running solve and stops when it meets the round's bound. An acyclic
      problem of at least :data:`LATE_SEARCH_NODES` kept nodes gets the search beside its
      one solve once that has used :data:`LATE_SEARCH_SHARE` of its time without
      finishing, its gap is still above :data:`LATE_SEARCH_GAP` and no other piece is
      being solved (:data:`RUNNING`).
    * ``solver="cbc"``: PuLP and CBC as before (:func:`_solve_exact`), the search first on
      cyclic e-graphs; the lower bound is the optimum when CBC proves one, else the LP
      relaxation's value (HiGHS).

    Everything stops as soon as the incumbent's cost and the lower bound meet (relative
    gap at most :data:`tensat_py.extract.highs.MIP_REL_GAP`); ``"optimal"`` means exactly
    that: proved.

    Args:
        problem: the e-graph.
        solver: ``"cbc"`` or ``"highs"``.
        time_limit: wall-clock budget in seconds for everything.
        cycle_constraints: ``"lazy"``, ``"order"`` or ``"none"``.
        order_vars: as in :func:`_solve_exact`.
        warm_start: an acyclic choice to start from (the incumbent; CBC's cutoff).
        search: run the search on cyclic e-graphs (``"lazy"`` mode only): beside the first
            exact round (HiGHS) or before the exact ILP (CBC); and, with HiGHS, beside a
            slow solve of a large acyclic one (above).
        seed: the search's random seed.
        simplify_graph: apply the dominance and necessary-class simplifications (pruning is
            always applied).
        decompose: split the e-graph at dominator cuts and solve the pieces one by one
            (with CBC, cuts owning fewer than :data:`CBC_PIECE_NODES` kept nodes stay with
            their parent).
        path_bound: a piece whose warm start meets the piece's critical-path bound is
            proved without a solver call (:func:`tensat_py.extract.decompose.solve_pieces`).

    Returns:
        an :class:`IlpOutcome` with ``lower_bound`` and the seconds per phase.

    Raises:
        ValueError: on an unknown solver, mode or ``order_vars``.
    """
    if cycle_constraints not in ("lazy", "order", "none"):
        raise ValueError(
            f"unknown cycle_constraints {cycle_constraints!r} (expected 'lazy', 'order', 'none')"
        )
    if order_vars not in ("real", "int"):
        raise ValueError(f"unknown order_vars {order_vars!r} (expected 'real' or 'int')")
    _solver(solver, 1.0)  # validates the name
    from tensat_py.extract.simplify import simplify

    start = time.perf_counter()
    simp = simplify(problem, dominance=simplify_graph, necessary=simplify_graph)
    simplify_seconds = time.perf_counter() - start
    kept_classes = {problem.node_eclass[i] for i, k in enumerate(simp.keep) if k}
    missing = [r for r in problem.roots if r not in kept_classes]
    if missing:
        return IlpOutcome(
            None, "none", f"root class {missing[0]} cannot be built", stats=dict(simp.stats)
        )
    warm = simp.repair(problem, warm_start) if warm_start else None
    if warm is not None and (
        not all(simp.keep[i] for i in warm.values()) or problem.check_choice(warm) is not None
    ):
        warm = None
    if decompose and start + time_limit - time.perf_counter() > 0.05:  # else: no time left
        from tensat_py.extract.decompose import decompose as split
        from tensat_py.extract.decompose import solve_pieces

        # A CBC solve is a process of its own (tens of ms): small pieces stay with their
        # parent. A HiGHS solve costs about a millisecond: every cut is used.
        pieces = split(problem, simp.keep, min_nodes=1 if solver == "highs" else CBC_PIECE_NODES)
        simplify_seconds = time.perf_counter() - start  # the split counts as simplification
        if len(pieces.pieces) > 1:

            def solve_piece(
                sub: ExtractionProblem, limit: float, start: dict[int, int] | None
            ) -> IlpOutcome:
                return solve_ilp(
                    sub,
                    solver=solver,
                    time_limit=limit,
                    cycle_constraints=cycle_constraints,
                    order_vars=order_vars,
                    warm_start=start,
                    search=search,
                    seed=seed,
                    simplify_graph=simplify_graph,
                    decompose=False,
                )

            outcome = solve_pieces(
                problem,
                pieces,
                solve_piece,
                deadline=start + time_limit,
                warm=warm,
                path_proof=path_bound,
            )
            outcome.simplify_seconds += simplify_seconds
            outcome.stats = {**simp.stats, **outcome.stats}
            return outcome
    solve = _solve_highs if solver == "highs" else _solve_cbc
    # Extractions are counted: a late search waits until its own is the only one.
    with RUNNING:
        outcome = solve(
            problem,
            simp,
            deadline=start + time_limit,
            cycle_constraints=cycle_constraints,
            order_vars=order_vars,
            warm=warm,
            search=search,
            seed=seed,
        )
    outcome.simplify_seconds = simplify_seconds
    outcome.stats = {**simp.stats, **outcome.stats}
    return outcome


#: With CBC, cuts owning fewer kept nodes than this join the piece above them (a CBC solve
#: starts a process: on the k_multi=1 BERT e-graph 98 one-cut-each pieces took 0.55-0.66 s
#: against 0.35-0.45 s whole, 0.36 s with this floor; docs/extraction.md).
CBC_PIECE_NODES = 64


def _met(cost: float, bound: float) -> bool:
    """Whether an incumbent of ``cost`` is proved optimal by the lower bound ``bound``."""
    from tensat_py.extract.highs import relative_gap

    if not math.isfinite(cost):
        return False
    return cost <= bound + relative_gap() * max(abs(cost), 1e-300) + 1e-15


def _solve_highs(
    problem: ExtractionProblem,
    simp: Simplified,
    *,
    deadline: float,
    cycle_constraints: str,
    order_vars: str,
    warm: dict[int, int] | None,
    search: bool,
    seed: int,
) -> IlpOutcome:
    """The HiGHS path of :func:`solve_ilp` (arrays through highspy, lazy cuts, search)."""
    from tensat_py.extract.highs import HighsModel

    order = order_vars if (cycle_constraints == "order" and simp.cyclic) else None
    model = HighsModel(problem, simp, order=order)
    lazy = cycle_constraints == "lazy" and simp.cyclic
    by_class = model.members
    if lazy:
        _two_cycle_cuts(problem, model)
    best = warm
    best_cost = problem.dag_cost(warm) if warm else math.inf
    bound = 0.0
    rounds = 0
    solve_seconds = 0.0
    lns_note = ""
    searches = {"search_steps": 0, "search_improvements": 0}
    # Cyclic ("lazy"): the search beside the first round, from the start. Acyclic and
    # large: the search beside the one solve, late (docs/extraction.md).
    late = not simp.cyclic and search and best is not None and len(model.nodes) >= LATE_SEARCH_NODES
    searched = not ((lazy and search and best is not None) or late)
    last = "no solve"
    proved_by_solver = False
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0.05 or _met(best_cost, bound):
            break
        if best is not None:
            model.set_start(best)
        beside = not searched
        if beside:
            # Cyclic: the first round of lazy cuts (time-boxed, for its bound) beside the
            # search, which finds the answers, from the start and for up to 80 % of the
            # time. Acyclic: the one solve with all the time, the search late
            # (docs/extraction.md).
            searched = True
            s, lns = _solve_beside_search(
                problem,
                simp,
                model,
                best,
                limit=remaining if late else min(remaining, max(1.0, 0.4 * remaining)),
                search_limit=remaining if late else 0.8 * remaining,
                seed=seed,
                late=late,
            )
            if lns is not None:
                if lns.cost < best_cost:
                    best, best_cost = lns.choices, lns.cost
                lns_note = (
                    f"; search beside it: {lns.iterations} restricted ILP(s), "
                    f"{lns.improvements} improvement(s), {lns.seconds:.1f} s"
                )
                searches = {
                    "search_steps": lns.iterations,
                    "search_improvements": lns.improvements,
                }
        else:
            s = model.solve(remaining)
        rounds += 1
        solve_seconds += s.seconds
        last = s.status
        bound = max(bound, s.lower_bound)
        if s.selected is None:
            break
        choices, cycles = _choose(problem, s.selected, simp.keep)
        if choices is not None:
            cost = problem.dag_cost(choices)
            if cost < best_cost:
                best, best_cost = choices, cost
            if s.optimal:
                proved_by_solver = True
                bound = max(bound, min(s.objective, best_cost))
                break
            if not beside or late:
                break  # time limit with an acyclic incumbent
            continue  # the time-boxed first round: a full one follows
        if not cycles or not lazy:
            if cycles:
                last = f"solution is cyclic ({len(cycles)} cycle(s) found)"
            break
        for cyc in cycles:
            _add_cycle_cuts(problem, model, by_class, cyc)
    status = "optimal" if best is not None and _met(best_cost, bound) else "feasible"
    if best is None:
        status = "none"
    msg = (
        f"{status} after {rounds} HiGHS solve(s), {model.cuts} cycle cut(s), "
        f"bound {bound:.6g} ({last}){lns_note}"
    )
    if proved_by_solver and status != "optimal":
        msg += "; the solver's optimum was cyclic-free but costlier than the incumbent"
    return IlpOutcome(
        best,
        status,
        msg,
        rounds,
        model.cuts,
        lower_bound=min(bound, best_cost),
        build_seconds=model.build_seconds,
        solve_seconds=solve_seconds,
        stats={"model_vars": model.num_vars, "model_rows": model.num_rows, **searches},
    )


#: An exact solve that has not finished after this many seconds gets a search beside it.
SEARCH_GRACE = 0.5


class _Running:
    """How many ILP extractions (HiGHS or CBC) of this process are running now (the pieces
    of a decomposed e-graph are solved several at once, one thread each)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def __enter__(self) -> None:
        with self.lock:
            self.count += 1

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.count -= 1


RUNNING = _Running()

#: An acyclic problem of at least this many kept nodes gets the search beside its solve...
LATE_SEARCH_NODES = 1000
#: ... once the solve has used this share of its time limit without finishing. Most
#: solves of the zoo's k_multi=2 pieces prove their answer by then; Inception-v3's largest
#: piece does not, and needs 13-16 s to find its optimum alone (docs/extraction.md).
LATE_SEARCH_SHARE = 0.4
#: ... and only when its relative gap is then still above this. NasRNN's pieces are within
#: 1-6 % of their optimum by then and a search beside them only slows their proofs (on a
#: busy machine to "feasible" at 10 s); Inception-v3's is at 21-52 %.
LATE_SEARCH_GAP = 0.15
#: Seconds per kept node from the start of a CBC solve to the CBC process running: PuLP
#: builds the model and writes it to a file in Python (the zoo's BERT k_multi=2 e-graph,
#: 46,510 kept nodes: 3.2-4.2 s to build, 1.6 s to write, on the 2-core machine of
#: bench/extract_bench.md).
CBC_START_SECONDS_PER_NODE = 1e-4
#: A large acyclic problem whose CBC process would start later than this share of the time
#: left gets the search alone: CBC would have no time to answer (docs/extraction.md).
CBC_START_SHARE = 0.5


def _solve_beside_search(
    problem: ExtractionProblem,
    simp: Simplified,
    model: HighsModel,
    start: dict[int, int],
    *,
    limit: float,
    search_limit: float,
    seed: int,
    late: bool = False,
) -> tuple[HighsSolve, LnsOutcome | None]:
    """Runs one exact HiGHS solve (``limit`` seconds) in a thread and, once it has run for
    :data:`SEARCH_GRACE` seconds (a tenth of ``limit`` at most) without finishing, the
    search (:func:`tensat_py.extract.lns.improve`, from ``start``, for at most
    ``search_limit`` seconds from the start of the solve) beside it: HiGHS releases the GIL,
    so both cores work.

    With ``late`` (an acyclic problem), the search waits for :data:`LATE_SEARCH_SHARE` of
    ``limit`` and then until no other HiGHS extraction of the process (:data:`RUNNING`) is
    running, does not start when the solve's relative gap is by then
    :data:`LATE_SEARCH_GAP` or less, skips its whole-e-graph first step (the problem itself
    there) and ends with the solve (there is no later round to feed; its running step is
    interrupted).

    Every answer the search improves on is handed to the running solve
    (``HighsModel.solve(offers=...)``), which keeps it when cheaper than its own incumbent.
    The search stops (its running step interrupted) when the solve has failed, or proved its
    answer optimal or a bound the search's incumbent meets. Returns the solve and the
    search's outcome (``None`` when none was needed)."""
    from tensat_py.extract.lns import improve

    pending: dict[str, dict[int, int]] = {}
    done: dict[str, HighsSolve] = {}
    failed: list[BaseException] = []
    aborted: list[bool] = []  # the search raised: the solve is interrupted
    gap = [math.inf]  # the solve's relative gap, as last reported

    def watch(now: float) -> bool:
        gap[0] = now
        return bool(aborted)

    def exact() -> None:
        try:
            done["solve"] = model.solve(
                limit, offers=lambda: pending.pop("choice", None), interrupt=watch
            )
        except BaseException as e:  # re-raised in the calling thread
            failed.append(e)

    def stop(cost: float) -> bool:
        s = done.get("solve")
        if failed or (s is not None and late):  # a late search ends with its solve
            return True
        return s is not None and (s.optimal or _met(cost, s.lower_bound))

    def hand_over(choice: dict[int, int], cost: float) -> None:
        pending["choice"] = choice

    t0 = time.perf_counter()
    # A daemon, and interrupted when the search raises: a HiGHS solve still running in a
    # thread when the interpreter exits aborts the process.
    # (copy_context: the thread sees the caller's gap tolerance, highs.gap_tolerance)
    thread = threading.Thread(
        target=contextvars.copy_context().run,
        args=(exact,),
        name="tensat-exact-solve",
        daemon=True,
    )
    thread.start()
    thread.join(LATE_SEARCH_SHARE * limit if late else min(SEARCH_GRACE, 0.1 * limit))
    while late and thread.is_alive() and RUNNING.count > 1:
        thread.join(0.05)
    lns = None
    try:
        if thread.is_alive() and gap[0] > (LATE_SEARCH_GAP if late else 0.0):
            lns = improve(
                problem,
                start,
                simp.keep,
                time_limit=search_limit - (time.perf_counter() - t0),
                seed=seed,
                stop=stop,
                on_improve=hand_over,
                whole_first=not late,
            )
    except BaseException:
        aborted.append(True)
        raise
    finally:
        thread.join()
    if failed:
        raise failed[0]
    return done["solve"], lns


def _two_cycle_cuts(problem: ExtractionProblem, model: object) -> None:
    """Cuts every 2-cycle of classes up front (edge and exit cuts): the commonest cycles (a
    rewrite and its inverse), cheap to find; saves solver rounds."""
    members = model.members  # type: ignore[attr-defined]
    succ: dict[int, set[int]] = {}
    for c, ns in members.items():
        succ[c] = {d for i in ns for d in problem.node_children[i] if d in members}
    for a, outs in succ.items():
        for b in outs:
            if a < b and a in succ.get(b, ()):
                _add_cycle_cuts(problem, model, members, [a, b])


def _add_cycle_cuts(
    problem: ExtractionProblem, model: object, by_class: dict[int, list[int]], cycle: list[int]
) -> None:
    """The edge cut and the exit cuts of :func:`_cycle_cut` / :func:`_exit_cuts`, as rows
    of a :class:`tensat_py.extract.highs.HighsModel`."""
    k = len(cycle)
    terms: list[int] = []
    for j, c in enumerate(cycle):
        d = cycle[(j + 1) % k]
        terms.extend(i for i in by_class.get(c, []) if d in problem.node_children[i])
    model.add_cut(terms, [1.0] * len(terms), -math.inf, k - 1)  # type: ignore[attr-defined]
    members = set(cycle)
    exits = [
        i
        for c in cycle
        for i in by_class.get(c, [])
        if members.isdisjoint(problem.node_children[i])
    ]
    for a in cycle:
        own = by_class.get(a, [])
        model.add_cut(  # type: ignore[attr-defined]
            exits + own, [1.0] * len(exits) + [-1.0] * len(own), 0.0, math.inf
        )


def _solve_cbc(
    problem: ExtractionProblem,
    simp: Simplified,
    *,
    deadline: float,
    cycle_constraints: str,
    order_vars: str,
    warm: dict[int, int] | None,
    search: bool,
    seed: int,
) -> IlpOutcome:
    """The CBC path of :func:`solve_ilp`: PuLP over the simplified e-graph, the search first
    on cyclic e-graphs and late beside the solve on large acyclic ones
    (:func:`_cbc_beside_search`); lower bound from the proof or from the LP relaxation
    (HiGHS)."""
    from tensat_py.extract.greedy import greedy_dag
    from tensat_py.extract.lns import improve

    start = time.perf_counter()
    time_limit = deadline - start
    if time_limit <= 0.05:
        # Building a PuLP model and starting CBC take longer than that: no solve at all
        # (the caller keeps the greedy DAG answer; a piece, its own).
        return IlpOutcome(None, "none", "time limit reached before a CBC solve could start")
    reduced = dataclasses.replace(problem, forbidden=[not k for k in simp.keep])
    lns = None
    cyclic_search = search and cycle_constraints == "lazy" and simp.cyclic
    late = search and not simp.cyclic and sum(simp.keep) >= LATE_SEARCH_NODES
    origin = (warm or greedy_dag(reduced)) if (cyclic_search or late) else None
    if origin and not all(simp.keep[i] for i in problem.reachable(origin).values()):
        origin = None
    # Where the search runs, the LP bound runs beside it (HiGHS releases the GIL while it
    # solves): after the search and CBC there is rarely time left for it (tensat_bert: 2.5 s,
    # bound 0.586 instead of the critical path's 0.191; BERT k_multi=2, 0.7 s, 0.000784
    # against the optimum 0.000793 instead of 0.0000564). Not from the start of every large
    # problem: its model's build (Python) slowed PuLP's, and most such problems CBC proves.
    bound_beside: list[_BoundBeside] = []

    def bound_now() -> None:
        if not bound_beside:
            bound_beside.append(_BoundBeside(problem, simp, deadline))

    if cyclic_search and origin:
        bound_now()
        lns = improve(problem, origin, simp.keep, time_limit=0.95 * time_limit, seed=seed)
    exact_start = lns.choices if (lns is not None and warm) else warm
    remaining = deadline - time.perf_counter()
    cbc_start = CBC_START_SECONDS_PER_NODE * sum(simp.keep)
    if late and origin and cbc_start > CBC_START_SHARE * remaining:
        bound_now()
        lns = improve(
            problem, origin, simp.keep, time_limit=remaining, seed=seed, whole_first=False
        )
        outcome = _best_of(
            problem,
            IlpOutcome(
                None,
                "none",
                f"no CBC solve: building its model of {sum(simp.keep)} nodes takes about "
                f"{cbc_start:.1f} s of the {remaining:.1f} s left",
            ),
            lns,
        )
    elif late and origin:
        outcome, lns = _cbc_beside_search(
            problem,
            simp,
            reduced,
            origin,
            deadline=deadline,
            cycle_constraints=cycle_constraints,
            order_vars=order_vars,
            seed=seed,
            on_search=bound_now,
        )
        outcome = _best_of(problem, outcome, lns)
    elif lns is not None and remaining < 0.5 * time_limit:
        outcome = IlpOutcome(
            lns.choices,
            "feasible",
            f"feasible (search; {lns.iterations} restricted ILP(s), {lns.improvements} "
            f"improvement(s), {lns.seconds:.1f} s; no time left for the exact ILP)",
        )
    else:
        outcome = _cbc_or_stopped(
            reduced,
            # Leave room for building the model, which the solver's limit does not cover.
            time_limit=0.9 * remaining,
            cycle_constraints=cycle_constraints,
            order_vars=order_vars,
            warm_start=exact_start,
        )
        outcome = _best_of(problem, outcome, lns)
    if outcome.choices is not None and outcome.status == "optimal":
        outcome.lower_bound = problem.dag_cost(outcome.choices)
    elif outcome.choices is not None:
        # CBC's own bound (when it stopped short) or the LP relaxation's, the larger.
        relaxed = bound_beside[0].value() if bound_beside else _lp_bound(problem, simp, deadline)
        outcome.lower_bound = min(
            max(outcome.lower_bound, relaxed), problem.dag_cost(outcome.choices)
        )
        if _met(problem.dag_cost(outcome.choices), outcome.lower_bound):
            outcome.status = "optimal"
    for b in bound_beside:  # not needed after all (a proof, no answer): ended, not left running
        b.stop()
    return outcome


def _best_of(problem: ExtractionProblem, outcome: IlpOutcome, lns: LnsOutcome | None) -> IlpOutcome:
    """The exact solve's ``outcome`` or, when the search ``lns`` found a cheaper answer (or
    the solve none), the search's answer as "feasible"; either way the message and the
    stats (``search_steps``, ``search_improvements``) say what the search did."""
    if lns is None:
        return outcome
    note = (
        f"search: {lns.iterations} restricted ILP(s), {lns.improvements} "
        f"improvement(s), {lns.seconds:.1f} s"
    )
    searches = {"search_steps": lns.iterations, "search_improvements": lns.improvements}
    if outcome.choices is not None and (
        outcome.status == "optimal" or problem.dag_cost(outcome.choices) <= lns.cost
    ):
        outcome.message = f"{outcome.message}; {note}"
        outcome.stats = {**outcome.stats, **searches}
        return outcome
    return IlpOutcome(
        lns.choices,
        "feasible",
        f"feasible (best of search; exact ILP: {outcome.message}); {note}",
        outcome.rounds,
        outcome.cuts,
        lower_bound=outcome.lower_bound,
        build_seconds=outcome.build_seconds,
        solve_seconds=outcome.solve_seconds,
        stats={**outcome.stats, **searches},
    )


def _cbc_beside_search(
    problem: ExtractionProblem,
    simp: Simplified,
    reduced: ExtractionProblem,
    start: dict[int, int],
    *,
    deadline: float,
    cycle_constraints: str,
    order_vars: str,
    seed: int,
    on_search: Callable[[], None] | None = None,
) -> tuple[IlpOutcome, LnsOutcome | None]:
    """Runs the CBC solve of a large acyclic problem (``reduced``: the simplified e-graph,
    from the start ``start``, its cutoff) in a thread and, once it has used
    :data:`LATE_SEARCH_SHARE` of the time left without finishing, the CBC process runs
    (PuLP has built and written the model) and no more ILP extractions of the process
    (:data:`RUNNING`, this one included) run than it has CPUs, the search
    (:func:`tensat_py.extract.lns.improve` without its whole-e-graph first step, which would
    be the problem itself) beside it until the solve ends with a proof, else until the
    deadline; ``on_search`` is called as the search starts. CBC runs in a process of its own
    and reports nothing while it runs, so the two exchange no answers: the caller keeps the
    cheaper (:func:`_best_of`). Why: on the zoo's k_multi=2 e-graphs of BERT, NasRNN and
    NasNet-A CBC has no answer at all at 10 s (the greedy answer was kept, 5-11 % above
    their optima), while the search alone reaches within 0.7 % of their optima in 6 s
    (docs/extraction.md). Returns the solve's outcome and the search's (``None`` when the
    solve finished first)."""
    from tensat_py.extract.lns import improve

    done: dict[str, IlpOutcome] = {}
    failed: list[BaseException] = []
    built = threading.Event()
    remaining = deadline - time.perf_counter()

    def exact() -> None:
        try:
            done["outcome"] = _cbc_or_stopped(
                reduced,
                # Leave room for building the model, which the solver's limit does not cover.
                time_limit=0.9 * remaining,
                cycle_constraints=cycle_constraints,
                order_vars=order_vars,
                warm_start=start,
                started=built,
            )
        except BaseException as e:  # re-raised in the calling thread
            failed.append(e)

    # CBC is stopped at its time limit by its watchdog (ILP extractions never outlive it).
    thread = threading.Thread(
        target=contextvars.copy_context().run,
        args=(exact,),
        name="tensat-cbc-solve",
        daemon=True,
    )
    thread.start()
    thread.join(LATE_SEARCH_SHARE * remaining)
    # PuLP builds and writes the model in Python: a search beside it (Python too, between
    # its HiGHS solves) would slow that through the GIL and push CBC past the deadline.
    # Other pieces' solves count only beyond the CPUs: each CBC uses one, reports nothing,
    # and on the pieces it cannot solve in time the search is what finds the answers
    # (NasNet-A k_multi=2 at 10 s, two pieces at once on 2 CPUs: 3.4-4.8 % above the
    # optimum with the search waiting for the other piece, 0.7-2.1 % beside it).
    while thread.is_alive() and (RUNNING.count > _cpus() or not built.is_set()):
        thread.join(0.05)
    lns = None
    if thread.is_alive():
        if on_search is not None:
            on_search()
        lns = improve(
            problem,
            start,
            simp.keep,
            time_limit=deadline - time.perf_counter(),
            seed=seed,
            # CBC stops at 90 % of the time (its model's build is not in its limit): past
            # that, unless it proved its answer, the search goes on to the deadline.
            stop=lambda cost: not thread.is_alive() and _proved(done, failed),
            whole_first=False,
        )
    thread.join()
    if failed:
        raise failed[0]
    return done["outcome"], lns


def _proved(done: dict[str, IlpOutcome], failed: list[BaseException]) -> bool:
    """Whether the CBC thread of :func:`_cbc_beside_search` ended with a proof or an error."""
    return bool(failed) or ("outcome" in done and done["outcome"].status == "optimal")


def _cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


def _cbc_or_stopped(
    problem: ExtractionProblem,
    *,
    time_limit: float,
    cycle_constraints: str,
    order_vars: str,
    warm_start: dict[int, int] | None,
    started: threading.Event | None = None,
) -> IlpOutcome:
    """:func:`_solve_exact` with CBC; a CBC stopped at the deadline with no answer
    (:class:`SolverStopped`) is an outcome without choices whose message says so, not an
    error: the caller keeps what else it has (the search's answer; in a decomposed
    extraction, the other pieces' answers and this piece's greedy DAG). Other solver errors
    (a crashing binary) are raised.
    """
    try:
        return _solve_exact(
            problem,
            solver="cbc",
            time_limit=time_limit,
            cycle_constraints=cycle_constraints,
            order_vars=order_vars,
            warm_start=warm_start,
            started=started,
        )
    except SolverStopped as e:
        from tensat_py.extract import _solver_failure

        return IlpOutcome(None, "none", _solver_failure("cbc", e))


class _BoundBeside:
    """:func:`_lp_bound` computed in a thread of its own, started now. Whoever starts one
    must end it (:meth:`value` or :meth:`stop`) before returning: a daemon thread still
    inside HiGHS when the interpreter exits aborts the process ("terminate called without
    an active exception", seen after a NasRNN k_multi=2 extraction whose pieces CBC proved
    while their bounds were being computed)."""

    def __init__(self, problem: ExtractionProblem, simp: Simplified, deadline: float) -> None:
        self._bound = 0.0
        self._stop = threading.Event()
        # Not a daemon: should an error skip stop(), the interpreter waits for it at exit
        # (at most until the deadline) instead of killing it inside HiGHS.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._run, problem, simp, deadline),
            name="tensat-lp-bound",
        )
        self._thread.start()

    def _run(self, problem: ExtractionProblem, simp: Simplified, deadline: float) -> None:
        self._bound = _lp_bound(problem, simp, deadline, self._stop)

    def value(self) -> float:
        """The bound (waits for the thread; 0.0 if it did not finish by its deadline)."""
        self._thread.join()
        return self._bound

    def stop(self) -> None:
        """Interrupts the LP (HiGHS's simplex interrupt callback) and waits for the thread."""
        self._stop.set()
        self._thread.join()


def _lp_bound(
    problem: ExtractionProblem,
    simp: Simplified,
    deadline: float,
    stop: threading.Event | None = None,
) -> float:
    """The LP relaxation's optimum (need rows, no acyclicity constraints): a lower bound on
    every extraction, in the problem's cost unit; 0.0 when HiGHS does not finish by
    ``deadline`` or ``stop`` is set first, or when less than half a second is left (building
    the relaxation of a 50,000-node e-graph takes 0.25-0.3 s, solving it 6-10 s: the bound
    must not extend the extraction past its time limit)."""
    from tensat_py.extract.highs import HighsModel

    if deadline - time.perf_counter() < 0.5:
        return 0.0
    model = HighsModel(problem, simp, relax=True, needs=True)
    left = deadline - time.perf_counter()
    if left <= 0.0 or (stop is not None and stop.is_set()):
        return 0.0
    if stop is not None:

        def check(event: object) -> None:
            if stop.is_set():
                event.interrupt()  # type: ignore[attr-defined]

        model.h.cbSimplexInterrupt.subscribe(check)
    s = model.solve(left)
    return s.lower_bound if s.optimal and math.isfinite(s.lower_bound) else 0.0


def _solve_exact(
    problem: ExtractionProblem,
    *,
    solver: str,
    time_limit: float,
    cycle_constraints: str,
    order_vars: str,
    warm_start: dict[int, int] | None,
    started: threading.Event | None = None,
) -> IlpOutcome:
    """Solves the extraction ILP exactly (lazy cycle cuts, order variables or neither).

    Args:
        problem: the e-graph.
        solver: ``"cbc"`` or ``"highs"``.
        time_limit: wall-clock budget in seconds for all solver calls together.
        cycle_constraints: ``"lazy"``, ``"order"`` or ``"none"``.
        order_vars: ``"real"`` (``t`` in [0, 1], eps = 1/M, A = 2) or ``"int"`` (integer
            ``t`` in [0, M-1], eps = 1, A = M), M = size of the largest cyclic component.
        warm_start: an acyclic choice whose cost is CBC's cutoff (CBC only; the answer
            when CBC finds nothing cheaper), e.g. the greedy DAG.
        started: set once the first solver process runs (CBC; see :func:`_run`).

    Returns:
        an :class:`IlpOutcome`; ``choices`` is ``None`` when no acyclic solution was found
        in time (the caller falls back to greedy).
    """
    start = time.perf_counter()
    kept = prune(problem)
    n = problem.num_nodes
    by_class: dict[int, list[int]] = {}
    for i in range(n):
        if kept[i]:
            by_class.setdefault(problem.node_eclass[i], []).append(i)
    missing_roots = [r for r in problem.roots if r not in by_class]
    if missing_roots:
        return IlpOutcome(None, "none", f"root class {missing_roots[0]} cannot be built")

    lp = pulp.LpProblem("tensat_extraction", pulp.LpMinimize)
    x = {i: lp.add_variable(f"x{i}", 0, 1, cat=pulp.LpBinary) for i in range(n) if kept[i]}
    # Objective scaled so the costliest node costs 1: with costs in seconds (1e-6..1e-3)
    # CBC's absolute tolerances swallow the differences; it then took a MIP start for
    # optimal when a 40% cheaper answer existed, and never closed its gap on NasRNN (a
    # cutoff at the start's cost has the same tolerances).
    top = max((problem.node_cost[i] for i in x), default=0.0)
    scale = 1.0 / top if top > 0 else 1.0
    lp.setObjective(
        pulp.LpAffineExpression([(v, problem.node_cost[i] * scale) for i, v in x.items()])
    )
    # y_c = sum of the class's x (at most one node per class; see the module docstring); a
    # class with one node has no y_c of its own: its x stands for it (fewer columns and
    # rows, as in HighsModel).
    y = {
        c: x[nodes[0]] if len(nodes) == 1 else lp.add_variable(f"y{c}", 0, 1)
        for c, nodes in by_class.items()
    }
    for c, nodes in by_class.items():
        if len(nodes) > 1:
            _row(lp, [(x[i], 1.0) for i in nodes] + [(y[c], -1.0)], _EQ, 0.0, f"class_{c}")
    for r in set(problem.roots):
        _row(lp, [(y[r], 1.0)], _EQ, 1.0, f"root_{r}")
    # Child rows aggregated per class: the nodes of class g that read class c, together, at
    # most y_c (valid: at most one node per class), so y_g <= y_c for a child every node of
    # g has.
    readers: dict[tuple[int, int], list[int]] = {}
    for i in x:
        for c in set(problem.node_children[i]):
            readers.setdefault((problem.node_eclass[i], c), []).append(i)
    for (g, c), nodes in sorted(readers.items()):
        _row(lp, [(x[i], 1.0) for i in nodes] + [(y[c], -1.0)], _LE, 0.0, f"child_{g}_{c}")
    # What every derivation of a class needs (tensat_py.extract.needs): CBC's preprocessing
    # does not find these implications, HiGHS's probing does.
    for g, c in needed_pairs(problem, kept):
        _row(lp, [(y[g], 1.0), (y[c], -1.0)], _LE, 0.0, f"need_{g}_{c}")

    # Class graph of kept nodes, its strongly connected components.
    classes = sorted(by_class)
    cidx = {c: k for k, c in enumerate(classes)}
    edges: list[list[int]] = [[] for _ in classes]
    for i in x:
        edges[cidx[problem.node_eclass[i]]].extend(cidx[c] for c in problem.node_children[i])
    comp = _core.sccs(edges)
    sizes: dict[int, int] = {}
    for k in comp:
        sizes[k] = sizes.get(k, 0) + 1
    cyclic = any(s > 1 for s in sizes.values())

    rounds = 0
    cuts = 0
    if cycle_constraints == "lazy" and cyclic:
        # Cut every 2-cycle of classes up front: the commonest cycles (a rewrite and its
        # inverse), cheap to find, saves solver rounds.
        succ = [set(e) for e in edges]
        for a in range(len(classes)):
            for b in succ[a]:
                if a < b and a in succ[b]:
                    lp += (
                        _cycle_cut(problem, by_class, x, [classes[a], classes[b]]),
                        f"cycle_{cuts}",
                    )
                    cuts += 1

    if cycle_constraints == "order" and cyclic:
        m = max(sizes.values())
        in_cycle = [k for k in range(len(classes)) if sizes[comp[k]] > 1]
        if order_vars == "real":
            t = {k: lp.add_variable(f"t{classes[k]}", 0, 1) for k in in_cycle}
            eps, big = 1.0 / m, 2.0
        else:
            t = {
                k: lp.add_variable(f"t{classes[k]}", 0, m - 1, cat=pulp.LpInteger) for k in in_cycle
            }
            eps, big = 1.0, float(m)
        for i, v in x.items():
            g = cidx[problem.node_eclass[i]]
            for c in sorted(set(problem.node_children[i])):
                k = cidx[c]
                if comp[k] == comp[g] and sizes[comp[g]] > 1:
                    lp += t[g] - t[k] - eps + big * (1 - v) >= 0, f"order_{i}_{c}"

    # CBC gets the start's cost as its cutoff, not the start itself: only answers cheaper
    # than the start are searched for, its preprocessing drops what cannot be in one (BERT
    # k_multi=2: 4,770 rows left instead of 12,559), and the 2.4 s it spent completing a
    # MIP start there ("Reduced search") are saved (docs/extraction.md). When CBC proves
    # that no cheaper answer exists, the start is optimal.
    start_choice = problem.reachable(warm_start) if warm_start and solver == "cbc" else {}
    cutoff = None
    if start_choice and all(i in x for i in start_choice.values()):
        start_cost = problem.dag_cost(start_choice)
        if math.isfinite(start_cost):
            # The relative slack keeps the start's own value inside the cutoff.
            cutoff = start_cost * scale * (1 + CUTOFF_SLACK)

    last_status = "no solve"
    build = time.perf_counter() - start
    solve_s = 0.0
    while True:
        remaining = time_limit - (time.perf_counter() - start)
        if remaining <= 0:
            return IlpOutcome(
                None,
                "none",
                f"time limit reached after {rounds} solves ({last_status})",
                rounds,
                cuts,
                build_seconds=build,
                solve_seconds=solve_s,
            )
        t_solve = time.perf_counter()
        log = _run(
            lp,
            _solver(solver, remaining, cutoff),
            deadline=start + time_limit,
            started=started if rounds == 0 else None,
        )
        solve_s += time.perf_counter() - t_solve
        rounds += 1
        sol = lp.sol_status
        last_status = pulp.LpSolution.get(sol, str(sol))
        # CBC's own bound when it stopped short (in the model's scaled unit): every answer
        # of this round's model, so every acyclic extraction, costs at least that.
        found = _best_possible(log)
        bound = 0.0 if found is None else max(0.0, found / scale)
        answered = sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
        if cutoff is not None and not answered:
            proved = _proved_infeasible(log)
            how = "none cheaper exists" if proved else f"none cheaper found: {last_status}"
            return IlpOutcome(
                dict(start_choice),
                "optimal" if proved else "feasible",
                f"{'optimal' if proved else 'feasible'} after {rounds} solve(s), {cuts} cycle "
                f"cut(s), {solver} (the start; {how})",
                rounds,
                cuts,
                # Nothing cheaper than the start was found: its cost caps the bound.
                lower_bound=start_cost if proved else min(bound, start_cost),
                build_seconds=build,
                solve_seconds=solve_s,
            )
        if not answered:
            return IlpOutcome(None, "none", f"solver: {last_status}", rounds, cuts)
        values = {i: v.value() for i, v in x.items()}
        if any(val is None for val in values.values()):
            return IlpOutcome(
                None, "none", f"solver returned no values ({last_status})", rounds, cuts
            )
        selected = [False] * n
        for i, val in values.items():
            selected[i] = val > 0.5
        choices, cycles = _choose(problem, selected, kept)
        status = "optimal" if sol == pulp.LpSolutionOptimal else "feasible"
        if choices is not None:
            cost = problem.dag_cost(choices)
            msg = f"{status} after {rounds} solve(s), {cuts} cycle cut(s), {solver}"
            return IlpOutcome(
                choices,
                status,
                msg,
                rounds,
                cuts,
                lower_bound=cost if status == "optimal" else min(bound, cost),
                build_seconds=build,
                solve_seconds=solve_s,
            )
        if not cycles:
            return IlpOutcome(None, "none", "solver solution is infeasible", rounds, cuts)
        if cycle_constraints != "lazy":
            return IlpOutcome(
                None, "none", f"solution is cyclic ({len(cycles)} cycle(s) found)", rounds, cuts
            )
        for cyc in cycles:
            lp += _cycle_cut(problem, by_class, x, cyc), f"cycle_{cuts}"
            cuts += 1
            for k, con in enumerate(_exit_cuts(problem, by_class, x, cyc)):
                lp += con, f"exit_{cuts}_{k}"
        # The start (acyclic) satisfies every cut: its cutoff stays valid for the next round.


_EQ, _LE = pulp.LpConstraintEQ, pulp.LpConstraintLE


def _row(
    lp: pulp.LpProblem,
    terms: list[tuple[pulp.LpVariable, float]],
    sense: int,
    rhs: float,
    name: str,
) -> None:
    """Adds ``sum(coef * var) <sense> rhs`` to ``lp``, built from its terms directly (PuLP's
    operators build and copy an expression per step: BERT's k_multi=2 model took 1.3-1.4 s
    to build that way, 0.9-1.2 s so)."""
    lp.addConstraint(
        pulp.LpConstraint(pulp.LpAffineExpression(terms), sense=sense, rhs=rhs, name=name)
    )


def _cycle_cut(
    problem: ExtractionProblem,
    by_class: dict[int, list[int]],
    x: dict[int, pulp.LpVariable],
    cycle: list[int],
) -> pulp.LpConstraint:
    """Forbids a cycle of classes ``c0 -> c1 -> ... -> c0``: at most ``k - 1`` of its ``k``
    edges may be used, an edge ``c -> d`` being used by any selected node of ``c`` with
    child ``d``. Valid because some optimal solution selects one node per class."""
    k = len(cycle)
    terms = []
    for j, c in enumerate(cycle):
        d = cycle[(j + 1) % k]
        terms.extend(x[i] for i in by_class[c] if d in problem.node_children[i])
    return pulp.lpSum(terms) <= k - 1


def _exit_cuts(
    problem: ExtractionProblem,
    by_class: dict[int, list[int]],
    x: dict[int, pulp.LpVariable],
    cycle: list[int],
) -> list[pulp.LpConstraint]:
    """For the class set ``S`` of a cycle: if a class of ``S`` is built, some selected node
    of ``S`` has no child in ``S`` (the walk through ``S`` must leave it). One constraint per
    class of ``S``; valid for every acyclic one-node-per-class solution."""
    members = set(cycle)
    exits = [
        x[i] for c in cycle for i in by_class[c] if members.isdisjoint(problem.node_children[i])
    ]
    return [pulp.lpSum(exits) >= pulp.lpSum(x[i] for i in by_class[a]) for a in cycle]


def _best_possible(log: str) -> float | None:
    """CBC's proved bound from its ``log`` ("Partial search - best objective ... (best
    possible B)", printed when it stops short of a proof), in the model's objective unit;
    ``None`` when the log has none (a proof, or a run stopped before its search)."""
    found = re.findall(r"best possible ([-+0-9.eE]+)\)", log)
    if not found:
        return None
    value = float(found[-1])
    return value if math.isfinite(value) and abs(value) < 1e49 else None


def _proved_infeasible(log: str) -> bool:
    """Whether CBC's ``log`` says that the model has no solution (under the cutoff: no answer
    cheaper than the start) and proves it: "Problem is infeasible" (the LP relaxation),
    "Result - Problem proven infeasible" (the search), or "Pre-processing says infeasible"
    in a run that ended before its time limit. CBC 2.10.3 says the last also when its time
    limit strikes during preprocessing (BERT k_multi=2 with ``-sec 1`` and a cutoff above
    the optimum: "Cut generators found to be infeasible!" after 1.33 s), and that is no
    proof."""
    if "Result - Problem proven infeasible" in log or re.search(
        r"^Problem is infeasible", log, re.M
    ):
        return True
    if "Pre-processing says infeasible" not in log:
        return False
    limit = re.findall(r"seconds was changed from \S+ to ([0-9.eE+-]+)", log)
    took = re.findall(r"Wallclock seconds\):\s*([0-9.eE+-]+)", log)
    return bool(limit and took) and float(took[-1]) < 0.9 * float(limit[-1])
