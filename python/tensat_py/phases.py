"""The phases of :func:`tensat_py.optimize`, each a function of one run's state.

An optimisation is a sequence of phases that read one wall-clock budget
(:class:`tensat_py.budget.Budget`) and one :class:`Run` (which :func:`tensat_py.optimize`
sets up: rules, cost model, the input's cost): :func:`reference_run` (the input's outputs
for verification, whose time predicts the candidate's check), :func:`partition_for`
(regions, :mod:`tensat_py.regions`), :func:`explore_extract_whole` or
:func:`explore_extract_regions` (saturation and extraction, and refinement where the cost
model prices whole programs), :func:`verify_candidate`, :func:`decide` (keep the candidate
or the input, and why), :func:`confirm` (timed on the input's runtime: onnxruntime, or XLA
for HLO) and :func:`result`.

Time (``docs/exploration.md``): the reference run comes first and an estimate of the
candidate's check (:data:`VERIFY_RESERVE_FACTOR` times it) is kept back; exploration gets at
most half of what remains and extraction the rest (less :data:`REFINE_SHARE` for
refinement where the cost model prices whole programs). Before the ILP the estimate is
raised to what the greedy DAG program of the explored e-graph would take to check, where
that is more (:func:`_check_estimate`): a candidate can compute weight-only sub-graphs the
input does not. Region by region, each class of regions gets a share of that time in
proportion to its operators.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tensat_py import _core
from tensat_py.budget import Budget
from tensat_py.egraph import ExtractionProblem, save_json
from tensat_py.extract import ExtractionResult, extract
from tensat_py.extract.refine import Refinement, input_choices, refine
from tensat_py.graph import Graph
from tensat_py.progress import PhaseDisplay
from tensat_py.regions import Partition, partition, stitch
from tensat_py.result import OptimizeResult, model_name
from tensat_py.verify import Reference, VerificationError, VerifyReport, reference
from tensat_py.verify import verify as verify_graphs

if TYPE_CHECKING:
    from tensat_py.runtime.protocol import Runtime

__all__ = [
    "CONFIRM_MARGIN",
    "MIN_PHASE_SECONDS",
    "NODES_PER_OPERATOR",
    "NODE_LIMIT",
    "REFINE_SHARE",
    "REGION_VERIFY_SHARE",
    "ROUNDING",
    "SOURCE_MARGIN",
    "VERIFY_RESERVE_FACTOR",
    "Limits",
    "Run",
    "confirm",
    "decide",
    "explore_extract_regions",
    "explore_extract_whole",
    "partition_for",
    "reference_run",
    "result",
    "verify_candidate",
]

#: Relative cost difference taken as float rounding: a candidate that differs from the
#: input and is cheaper by less than this share is not cheaper (``fallback-not-cheaper``).
ROUNDING = 1e-9

#: Measured speedup (input / candidate latency on the runtime: onnxruntime, or XLA for HLO)
#: a confirmed candidate must reach: above onnxruntime's run-to-run noise on a quiet
#: machine (A/A ratios within 1 %); each confirmation reports its own A/A beside it.
CONFIRM_MARGIN = 0.01

#: Measured gain (input-as-exported / source-model latency) above which a kept ONNX input
#: is written as the source model rather than re-exported: the export is the default (it
#: is usually the faster: folded shapes), so the source needs a clear win, beyond the A/A
#: spread of short confirmation runs (up to 2.3 % in ``bench/onnx_real.md``).
SOURCE_MARGIN = 0.03

#: Seconds reserved for the candidate's verification run per second of the reference run.
VERIFY_RESERVE_FACTOR = 1.5

#: Share of the time left after exploration kept for refining the extracted program
#: against a cost model that prices whole programs (``prices_programs``; see
#: :func:`tensat_py.extract.refine.refine`).
REFINE_SHARE = 0.2

#: Smallest budget handed to a phase (seconds): a phase always gets to start.
MIN_PHASE_SECONDS = 1e-6

#: Default e-node limit per operator of the program explored (``optimize(node_limit=None)``):
#: the limit grows with the input, not with the rules' appetite. A one-layer GPT-2 block
#: from JAX (130 operators) reaches its best program at 3,600 e-nodes; its seventh
#: iteration went from 17,000 to 44,000 e-nodes and made the ILP take 21 s instead of
#: 1.3 s for the same program. 150 keeps the zoo's k_multi=2 e-graphs whole (BERT needs
#: 12,348 e-nodes for 113 operators, NasRNN 33,285 for 230).
NODES_PER_OPERATOR = 150
#: Largest default e-node limit (and the limit of the command line's examples).
NODE_LIMIT = 50_000
#: Default ``k_multi`` (``optimize(k_multi=None)``): multi-pattern rules run in the first
#: two iterations for a program (or region) of at most this many operators, in the first
#: only for a larger one, unless the cost model gives its own (``default_k_multi``: the
#: ``xla`` model's 1). Tensat's experiments run k_multi 0, 1 and 2 (its Table 1 at 1). A
#: second iteration merges what the first iteration's rewrites made mergeable, and merged
#: operators again: under the roofline model (T4) BERT's predicted speedup is 1.298x at 2
#: and 1.243x at 1, NasNet-A's, InceptionV3's and SqueezeNet's 1.082x, 1.044x, 1.560x
#: against 1.079x, 1.024x, 1.532x (merge trees on). Merge trees (``merge_trees=True``)
#: merge whole groups within the first iteration, so the ``xla`` model, whose whole-program
#: prices the ILP's per-e-node sums do not follow, explores NasRNN at 1 (2,340 e-nodes,
#: its eight matmuls per side and step merged into one) rather than 2 (34,500, where the
#: ILP kept 26 matmuls). The e-graph grows with k_multi (BERT 1,721 -> 14,936 e-nodes with
#: merge trees), within :data:`NODES_PER_OPERATOR`.
AUTO_K_MULTI_OPERATORS = 256

#: Region by region, the share of the time left that is kept for verification: each
#: changed class against its region in float64, then one end-to-end run in float32.
REGION_VERIFY_SHARE = 0.25


def k_multi_for(k_multi: int | None, operators: int, model: Any = None) -> int:
    """The ``k_multi`` a program of ``operators`` operators is explored with under the cost
    model ``model``: ``k_multi`` itself when given, else the model's ``default_k_multi``
    when it has one, else 2 up to :data:`AUTO_K_MULTI_OPERATORS` operators and 1 above.

    >>> k_multi_for(None, 230), k_multi_for(None, 1406), k_multi_for(0, 230)
    (2, 1, 0)
    """
    if k_multi is not None:
        return k_multi
    own = getattr(model, "default_k_multi", None)
    if own is not None:
        return int(own)
    return 2 if operators <= AUTO_K_MULTI_OPERATORS else 1


@dataclass(frozen=True)
class Limits:
    """The exploration and extraction options of one run (see :func:`tensat_py.optimize`)."""

    k_multi: int | None
    node_limit: int | None
    iter_limit: int
    cycle_filter: str
    extractor: str
    solver: str
    order_vars: str
    gap: float = 1e-6


@dataclass
class Run:
    """One optimisation's state, filled in phase by phase.

    Attributes:
        graph: the input program.
        budget: the wall-clock budget every phase draws on.
        display: the progress display.
        limits: exploration and extraction options.
        ruleset: the rules.
        model: the cost model.
        gain_floor: the ``min_gain`` in force (fraction of the input's cost).
        cost_before: the input's cost, seconds.
        policy: a rule-choice policy object, or None (every rule).
        mirror_once, merge_trees: see :func:`tensat_py.optimize`.
        device: the device the cost model prices for.
        rules_spec, cost_model_spec: the rules and the cost model by name, when they were
            given by name (regions then may be solved in other processes); else None.
        jobs, ray: region classes solved on this many local processes, or as tasks of the
            Ray cluster at this address (:mod:`tensat_py.region_workers`).
        ref: the input's reference outputs (None without verification, and region by
            region, where each changed class is checked alone).
        verify: whether the candidate is checked numerically.
        class_reports: region by region, the check of each changed class's program
            against its region (float64), in class order.
        reserve: seconds kept back for the candidate's check.
        stats: the statistics the result carries.
        candidate: the extracted (and refined) program.
        candidate_cost: its cost, seconds.
        extraction: the extractor's result (for the regions: a summary of theirs).
        report: the candidate's verification report.
        status, message: the outcome so far.
        best, cost_after: the program kept and its cost.
    """

    graph: Graph
    budget: Budget
    display: PhaseDisplay
    limits: Limits
    ruleset: _core.RuleSet
    model: Any
    gain_floor: float
    cost_before: float
    policy: Any = None
    mirror_once: bool = True
    merge_trees: bool = True
    device: str = ""
    rules_spec: Any = None
    cost_model_spec: str | None = None
    jobs: int = 1
    ray: str | None = None
    ref: Reference | None = None
    verify: bool = True
    class_reports: list[VerifyReport] = field(default_factory=list)
    reserve: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    candidate: Graph | None = None
    candidate_cost: float = math.nan
    extraction: ExtractionResult | None = None
    report: VerifyReport | None = None
    status: str = ""
    message: str = ""
    best: Graph | None = None
    cost_after: float = math.nan


# ----------------------------------------------------------------------------- phases
def reference_run(run: Run) -> None:
    """Verification's first half: the input's outputs (float64 on the NumPy executor, or
    the front end's runner), whose time predicts the candidate's check; keeps
    :data:`VERIFY_RESERVE_FACTOR` times it back for that check."""
    t = time.perf_counter()
    with run.budget.phase("verification"), run.display.phase("verification (reference run)"):
        run.ref = reference(run.graph, seed=0, dtype="float64")
    run.reserve = VERIFY_RESERVE_FACTOR * (time.perf_counter() - t)


def partition_for(run: Run, regions: bool | None, dump_egraph: Any) -> Partition | None:
    """The regions to optimise one by one, or None to optimise the program whole:
    ``regions=False``, an e-graph to dump (one e-graph), or a program that does not cut
    into several regions (with ``regions=None``: under
    :data:`tensat_py.regions.PARTITION_OPERATORS` operators, unless a block repeats
    :data:`tensat_py.regions.REPEAT_COPIES` times, :func:`tensat_py.regions.partition`)."""
    if regions is False or dump_egraph is not None:
        return None
    with run.budget.phase("setup"):
        if regions is None:
            part = partition(run.graph)
        else:
            part = partition(run.graph, min_operators=2, repeat_operators=2)
    return part if len(part.regions) > 1 else None


@dataclass
class _Piece:
    """What exploring and extracting one program (the whole input, or a region) gave."""

    candidate: Graph
    cost: float
    stats: dict[str, Any]
    extraction: ExtractionResult
    explore_limit: float
    extract_limit: float


def _explore_extract(
    run: Run,
    graph: Graph,
    deadline: float,
    dump_egraph: Any = None,
    check_estimate: bool = False,
    keep_below: float | None = None,
) -> _Piece:
    """Saturates ``graph``'s e-graph (at most half the time to ``deadline``), extracts the
    cheapest program (the rest, less :data:`REFINE_SHARE` for refinement) and refines it
    where the cost model prices whole programs. Phases ``exploration``, ``extraction`` and
    ``refinement`` of the budget."""
    lim = run.limits
    node_limit = lim.node_limit
    if node_limit is None:
        node_limit = min(NODE_LIMIT, NODES_PER_OPERATOR * max(1, graph.num_operators()))
    k_multi = k_multi_for(lim.k_multi, graph.num_operators(), run.model)
    t0 = time.perf_counter()
    explore_limit = max(MIN_PHASE_SECONDS, (deadline - t0) / 2)
    with run.budget.phase("exploration"), run.display.phase("exploration"):
        egraph = _core.EGraph(graph.to_flat())
        stats: dict[str, Any] = dict(
            egraph.saturate(
                run.ruleset,
                k_multi=k_multi,
                node_limit=node_limit,
                iter_limit=lim.iter_limit,
                time_limit=explore_limit,
                cycle_filter=lim.cycle_filter,
                policy=run.policy,
                mirror_once=run.mirror_once,
                merge_trees=run.merge_trees,
            )
        )
        stats["k_multi"] = k_multi
    t = time.perf_counter()
    with run.budget.phase("extraction"), run.display.phase("extraction"):
        export = egraph.export()
        costs = run.model.costs_for_export(export)
        problem = ExtractionProblem.from_export(export, costs)
        if dump_egraph is not None:
            save_json(problem, dump_egraph)
        if check_estimate and run.ref is not None and lim.extractor == "ilp":
            # The candidate may compute weight-only sub-graphs the input does not (a
            # product of two weights after matmul re-association): keep what its check
            # would take, judged from the greedy DAG program of this e-graph.
            run.reserve = max(run.reserve, _check_estimate(run.ref, graph, export, problem))
            deadline = min(deadline, run.budget.deadline - run.reserve)
        programs = bool(getattr(run.model, "prices_programs", False))
        stop_above = None
        if keep_below is not None and lim.extractor == "ilp":
            # In the extraction's own terms (node costs summed): the input's own e-nodes.
            try:
                own = problem.dag_cost(input_choices(export, graph.to_flat()))
                stop_above = own * keep_below
            except ValueError:
                stop_above = None
        left = deadline - time.perf_counter()
        extract_limit = max(MIN_PHASE_SECONDS, left * (1 - REFINE_SHARE) if programs else left)
        found = extract(
            problem,
            extractor=lim.extractor,
            solver=lim.solver,
            time_limit=extract_limit,
            cycle_constraints=(
                "order" if lim.cycle_filter == "none" and lim.extractor == "ilp" else None
            ),
            order_vars=lim.order_vars,
            gap=lim.gap,
            stop_above=stop_above,
        )
        candidate = Graph.from_choices(export, found.choices)
        candidate.meta = dict(graph.meta)  # front-end data (opaque payloads, source model)
        cost = run.model.graph_cost(candidate)
    stats["extract_seconds"] = time.perf_counter() - t
    stats["node_limit"] = node_limit
    if programs and time.perf_counter() < deadline:
        with run.budget.phase("refinement"), run.display.phase("refinement"):
            refined = _refine(graph, export, found.choices, run.model, deadline, (candidate, cost))
        if refined is not None:
            stats["refinement"] = refined.stats()
            if refined.switched:
                candidate, cost = refined.graph, refined.cost
    with run.budget.phase("extraction"):
        del egraph, export, problem  # freeing a large e-graph takes time too: count it
    return _Piece(candidate, cost, stats, found, explore_limit, extract_limit)


def _extraction_stats(found: ExtractionResult) -> dict[str, Any]:
    """The extraction figures the result's statistics carry (``docs/extraction.md``)."""
    return {
        "extraction_message": found.message,
        "extraction_cost": found.cost,
        "extraction_lower_bound": found.lower_bound,
        "extraction_gap": found.gap,
        "extraction_build_seconds": found.build_seconds,
        "extraction_solve_seconds": found.solve_seconds,
        "extraction_simplify_seconds": found.simplify_seconds,
        "extraction_stats": dict(found.stats),
    }


def explore_extract_whole(run: Run, dump_egraph: Any = None) -> None:
    """Explores and extracts the whole program as one e-graph."""
    # Only an answer cheaper than the input by min_gain can be kept: a lower bound above
    # that share of the input's own extraction cost stops the ILP.
    piece = _explore_extract(
        run,
        run.graph,
        run.budget.deadline - run.reserve,
        dump_egraph,
        check_estimate=True,
        keep_below=1 - max(run.gain_floor, ROUNDING),
    )
    run.candidate, run.candidate_cost, run.extraction = (
        piece.candidate,
        piece.cost,
        piece.extraction,
    )
    run.stats = {
        **piece.stats,
        **_extraction_stats(piece.extraction),
        "explore_time_limit": piece.explore_limit,
        "extract_time_limit": piece.extract_limit,
    }


def _solved_elsewhere(
    run: Run, subs: list[Graph], sizes: list[int], total: float
) -> list[_Piece] | None:
    """The region classes solved by :mod:`tensat_py.region_workers` (local processes or
    Ray), or None to solve them here: one process asked for, one class, or rules, cost
    model or policy given as Python objects. The wall time counts as exploration and
    extraction in the proportion the workers spent on each."""
    parallel = run.ray is not None or (run.jobs > 1 and len(subs) > 1)
    if not parallel or run.rules_spec is None or run.cost_model_spec is None or run.policy:
        return None
    from tensat_py.region_workers import RegionJob, solve_all

    width = max(1, min(run.jobs, len(subs)))
    jobs = [
        RegionJob.of(
            sub,
            rules=run.rules_spec,
            cost_model=run.cost_model_spec,
            device=run.device,
            limits=run.limits,
            seconds=max(MIN_PHASE_SECONDS, min(total, total * width * size / sum(sizes))),
            mirror_once=run.mirror_once,
            merge_trees=run.merge_trees,
        )
        for sub, size in zip(subs, sizes, strict=True)
    ]
    t = time.perf_counter()
    with run.display.phase(f"regions ({len(jobs)} classes on {run.ray or f'{width} processes'})"):
        results = solve_all(jobs, workers=width, ray=run.ray)
    wall = time.perf_counter() - t
    explore = sum(r.stats.get("explore_seconds", 0.0) for r in results)
    extract = sum(r.stats.get("extract_seconds", 0.0) for r in results)
    share = explore / (explore + extract) if explore + extract > 0 else 0.5
    run.budget.add("exploration", wall * share)
    run.budget.add("extraction", wall * (1 - share))
    return [
        _Piece(
            r.candidate(sub.meta), r.cost, r.stats, r.extraction, r.explore_limit, r.extract_limit
        )
        for r, sub in zip(results, subs, strict=True)
    ]


#: Statistics of the regions' e-graphs that add up (the others are taken from the largest).
_SUMMED = ("enodes", "eclasses", "filtered_enodes", "explore_seconds", "extract_seconds")


def explore_extract_regions(run: Run, part: Partition) -> None:
    """Explores and extracts one region of each class (its share of the time in proportion
    to its operators) and writes each class's program into every copy
    (:func:`tensat_py.regions.stitch`)."""
    graph = run.graph
    reps = [part.regions[c[0]] for c in part.classes]
    sizes = [max(1, r.operators(graph)) for r in reps]
    programs: list[Graph] = []
    pieces: list[_Piece] = []
    start = time.perf_counter()
    total = run.budget.deadline - run.reserve - start
    subs = [rep.subgraph(graph) for rep in reps]
    elsewhere = _solved_elsewhere(run, subs, sizes, total)
    done = 0
    for k, (sub, size) in enumerate(zip(subs, sizes, strict=True)):
        done += size
        deadline = start + total * done / sum(sizes)
        piece = elsewhere[k] if elsewhere else _explore_extract(run, sub, deadline)
        # A region's candidate never costs more than the region itself.
        if piece.cost > run.model.graph_cost(sub):
            piece.candidate, piece.cost = sub, run.model.graph_cost(sub)
        if run.verify and not _same_program(sub, piece.candidate):
            with run.budget.phase("verification"), run.display.phase("verification"):
                try:
                    report = verify_graphs(sub, piece.candidate, seed=0, dtype="float64")
                except VerificationError as e:
                    # The runner cannot run the region alone (an HLO region whose opaque
                    # instructions call computations of the source module): not verified,
                    # so not kept.
                    report = VerifyReport(math.inf, math.inf, False, 0.0, f"not checked: {e}")
            if not report.passed:  # that class keeps its region as it was
                piece.candidate, piece.cost = sub, run.model.graph_cost(sub)
                first = part.classes[k][0]
                names = [graph.nodes[i].name for i in part.regions[first].nodes[:1]]
                report = dataclasses.replace(
                    report,
                    message=f"region class {k} (regions {part.classes[k]}, from node "
                    f"{names[0] if names else '?'}): {report.message}",
                )
            run.class_reports.append(report)
        programs.append(piece.candidate)
        pieces.append(piece)
    with run.budget.phase("extraction"):
        run.candidate = stitch(graph, part, programs)
        run.candidate_cost = run.model.graph_cost(run.candidate)
    copies = [len(c) for c in part.classes]
    stats: dict[str, Any] = {k: sum(p.stats.get(k, 0) for p in pieces) for k in _SUMMED}
    largest = max(range(len(pieces)), key=lambda k: pieces[k].stats.get("enodes", 0))
    for k, v in pieces[largest].stats.items():
        stats.setdefault(k, v)
    stats["iterations"] = max(p.stats.get("iterations", 0) for p in pieces)
    stats["k_multi"] = max(p.stats.get("k_multi", 0) for p in pieces)
    reasons = sorted({str(p.stats.get("stop_reason")) for p in pieces})
    stats["stop_reason"] = reasons[0] if len(reasons) == 1 else "+".join(reasons)
    statuses = [p.extraction.status for p in pieces]
    status = next(
        (s for s in ("fallback-greedy", "greedy", "feasible") if s in statuses), "optimal"
    )
    bounds = [p.extraction.lower_bound for p in pieces]
    lower = None
    if all(b is not None for b in bounds):
        lower = sum(b * n for b, n in zip(bounds, copies, strict=True))  # type: ignore[operator]
    cost = sum(p.extraction.cost * n for p, n in zip(pieces, copies, strict=True))
    message = (
        f"{len(part.regions)} regions in {part.num_classes} classes, each explored and "
        f"extracted once: {', '.join(f'{statuses.count(s)} {s}' for s in sorted(set(statuses)))}"
    )
    run.extraction = ExtractionResult(
        choices={},
        cost=cost,
        status=status,
        seconds=sum(p.extraction.seconds for p in pieces),
        message=message,
        lower_bound=lower,
        gap=(cost - lower) / cost if lower is not None and cost > 0 else None,
        build_seconds=sum(p.extraction.build_seconds for p in pieces),
        solve_seconds=sum(p.extraction.solve_seconds for p in pieces),
        simplify_seconds=sum(p.extraction.simplify_seconds for p in pieces),
    )
    explored = part.stats(graph)
    run.stats = {
        **stats,
        **_extraction_stats(run.extraction),
        "explore_time_limit": max(p.explore_limit for p in pieces),
        "extract_time_limit": max(p.extract_limit for p in pieces),
        "regions": {
            **explored,
            "enodes_explored": stats["enodes"],
            "enodes_all_copies": sum(
                p.stats.get("enodes", 0) * n for p, n in zip(pieces, copies, strict=True)
            ),
            "copies": copies,
        },
    }


def verify_candidate(run: Run) -> None:
    """Verification's second half: the candidate against the reference outputs. Region
    by region (no reference run): when the candidate differs from the input and costs
    less, one end-to-end run of both at the program's own dtype (float32), after the
    changed classes' float64 checks; a candidate that is not cheaper is not run."""
    assert run.candidate is not None
    if run.ref is not None:
        with run.budget.phase("verification"), run.display.phase("verification"):
            run.report = _check_candidate(run.ref, run.graph, run.candidate)
        return
    graph, candidate = run.graph, run.candidate
    checked = run.class_reports
    failed = [r for r in checked if not r.passed]
    worst = max((r.max_rel_error for r in checked if r.passed), default=0.0)
    tol = checked[0].tolerance if checked else 0.0
    notes = [f"{len(checked)} changed region classes checked in float64 (max rel {worst:.2g})"]
    if failed:
        notes.append(f"{len(failed)} failed ({failed[0].message}) and were kept as they were")
    floor = max(ROUNDING, run.gain_floor)
    cheaper = run.candidate_cost < run.cost_before * (1 - ROUNDING)
    if floor > ROUNDING:
        cheaper = run.candidate_cost <= run.cost_before * (1 - floor)
    if not cheaper or _same_program(graph, candidate):  # decide() keeps the input
        run.report = VerifyReport(0.0, worst, True, tol, "; ".join(notes), "numpy")
        return
    with run.budget.phase("verification"), run.display.phase("verification"):
        whole = verify_graphs(graph, candidate, seed=0, dtype="float32")
    notes.append(f"end to end in float32 on {whole.runner}: {whole.message}")
    run.report = VerifyReport(
        whole.max_abs_error,
        whole.max_rel_error,
        whole.passed,
        whole.tolerance,
        "; ".join(notes),
        whole.runner,
    )


def decide(run: Run) -> None:
    """Keeps the candidate when it verified (or verification is off) and is cheaper, by
    at least ``min_gain``; else the input, with the status and message saying why."""
    assert run.candidate is not None and run.extraction is not None
    with run.budget.phase("verification"):  # comparing the programs is part of checking
        _decide(run)


def _pricing(run: Run) -> Any:
    """How a measured cost model (``xla``) made this run's prices
    (:class:`tensat_py.cost.provenance.Pricing`), or None for a model that does not say."""
    pricing = getattr(run.model, "pricing", None)
    return pricing() if callable(pricing) else None


def _same_pricing(run: Run) -> None:
    """Prices the input and the candidate again when the cost model priced one of them
    whole and then fell back to operator-by-operator prices (a later program could not be
    priced whole): the two prices compared are then made the same way."""
    made = _pricing(run)
    if made is not None and made.whole and made.by_operator:
        assert run.candidate is not None
        run.cost_before = run.model.graph_cost(run.graph)
        run.candidate_cost = run.model.graph_cost(run.candidate)


def _unexplored(run: Run) -> str:
    """A clause for the "kept the input" message when exploration ran no iteration
    because its time was gone, kept back for the candidate's check (estimated from
    verification's reference run, :data:`VERIFY_RESERVE_FACTOR`); ``""`` otherwise.

    >>> from types import SimpleNamespace
    >>> run = SimpleNamespace(stats={"iterations": 0, "stop_reason": "time_limit"},
    ...                       reserve=19.5, budget=SimpleNamespace(limit=20.0))
    >>> import textwrap
    >>> print(textwrap.fill(_unexplored(run), 80))
    ; exploration had no time: the candidate's check was given 19.5 s of the 20 s
    time limit (estimated from the reference run); a larger time_limit gives
    exploration time
    >>> run.stats["iterations"] = 3
    >>> _unexplored(run)
    ''
    """
    starved = run.stats.get("iterations") == 0 and run.stats.get("stop_reason") == "time_limit"
    if not starved or run.reserve <= 0:  # no check kept time back: the limit was too short
        return ""
    return (
        f"; exploration had no time: the candidate's check was given {run.reserve:.3g} s "
        f"of the {run.budget.limit:g} s time limit (estimated from the reference run); "
        "a larger time_limit gives exploration time"
    )


def _decide(run: Run) -> None:
    assert run.candidate is not None and run.extraction is not None
    _same_pricing(run)
    found, graph, cost = run.extraction, run.graph, run.candidate_cost
    run.status, run.message = found.status, found.message
    run.best, run.cost_after = run.candidate, cost
    before = run.cost_before
    if run.report is not None and not run.report.passed:
        run.status = "fallback-unverified"
        run.message = (
            f"the extracted program ({found.status}, cost {cost:.6g} s) failed "
            f"verification on {run.report.runner}: {run.report.message}; kept the input"
        )
        run.best, run.cost_after = graph, before
    elif found.status == "bound-stop":
        run.status = "fallback-not-cheaper"
        run.message = f"{found.message}; kept the input"
        run.best, run.cost_after = graph, before
    elif cost > before or (
        cost > before * (1 - ROUNDING) and not _same_program(graph, run.candidate)
    ):
        # A different program whose gain is float rounding (the same operators summed in
        # another order) gains nothing, and would cost a confirmation run.
        run.status = "fallback-not-cheaper"
        than = "as much as (to rounding)" if f"{cost:.6g}" == f"{before:.6g}" else "more than"
        run.message = (
            f"the extracted program ({found.status}) costs {cost:.6g} s, {than} "
            f"the input's {before:.6g} s; kept the input"
        )
        run.best, run.cost_after = graph, before
    elif run.gain_floor > 0 and cost > before * (1 - run.gain_floor):
        # Equal cost included: a different program of the same cost gains nothing.
        run.status = "fallback-not-cheaper"
        run.message = (
            f"the extracted program ({found.status}) is {1 - cost / before:.2%} "
            f"cheaper, below min_gain {run.gain_floor:.2%}; kept the input"
        )
        run.best, run.cost_after = graph, before
    run.message += _unexplored(run)


def confirm(run: Run, confirm: bool | Runtime | None) -> None:
    """With ``confirm`` (default: for a cost model measured on the CPU), times the input
    and the candidate side by side on the input's runtime (XLA on the CPU for HLO or for
    the ``xla`` cost model's predictions, onnxruntime otherwise; or the
    :class:`~tensat_py.runtime.protocol.Runtime` given) and
    keeps the candidate only when it is measurably faster: its median per-round speedup
    at least ``1 +`` :data:`CONFIRM_MARGIN` and the lower end of that median's 95 %
    interval (:func:`~tensat_py.runtime.timing.median_interval`) above 1; an ONNX
    input kept is written as its source model when that ran more than
    :data:`SOURCE_MARGIN` faster than its export.

    Confirmation by default (``confirm`` None) steps aside when the runtime cannot run
    the input at all (an HLO module that calls back into Python): the candidate stands
    on the cost model's prediction, ``stats["confirm_skipped"]`` and the message say why.

    Raises:
        ValueError: the runtime cannot run a program when confirmation was asked for
            (``confirm`` True or a runtime), or it runs the input but not the candidate.
    """
    graph, candidate = run.graph, run.candidate
    assert candidate is not None
    if not _confirms(confirm, run.model) or not (run.best is candidate or _has_source_model(graph)):
        return
    from tensat_py.runtime.confirm import measured_speedup
    from tensat_py.runtime.protocol import Runtime, runtime_for

    runtime = confirm if isinstance(confirm, Runtime) else runtime_for(graph, run.model)
    budget = max(0.5, min(10.0, run.budget.left()))
    with run.budget.phase("confirmation"), run.display.phase("confirmation"):
        try:
            c = measured_speedup(
                graph, candidate if run.best is candidate else None, runtime=runtime, budget=budget
            )
        except ValueError as e:
            # Confirmation by default steps aside for a program its runtime cannot run at
            # all (an HLO module that calls back into Python); asked for, or when only
            # the candidate fails to run, it is an error.
            if confirm is not None or _runs(runtime, graph):
                raise
            run.stats.update(confirm_skipped=str(e))
            note = f"not confirmed: {e}; the speedup is the cost model's prediction"
            run.message = f"{run.message}; {note}" if run.message else note
            return
    run.stats.update(confirm_rounds=c.rounds)
    if run.best is candidate:
        run.stats.update(
            measured_speedup=c.speedup,
            measured_on=_FAMILY.get(c.runtime, c.runtime),
            measured_runtime=c.runtime,
            measured_runtime_version=c.runtime_version,
            measured_speedup_interval=list(c.speedup_interval),
            measured_aa=c.aa,
            measured_aa_interval=list(c.aa_interval),
            measured_input_ms=c.input_ms,
            measured_candidate_ms=c.candidate_ms,
        )
        low = c.speedup_interval[0]
        if c.speedup < 1.0 + CONFIRM_MARGIN or low <= 1.0:  # NaN: no interval
            status = run.extraction.status if run.extraction is not None else ""
            aa = ""
            if not math.isnan(c.aa):
                lo, hi = c.aa_interval
                aa = f", A/A {c.aa:.3f}x [{lo:.3f}, {hi:.3f}]"
            run.status = "fallback-not-faster"
            run.message = (
                f"the extracted program ({status}) is predicted {_predicted(run)} but measured "
                f"{c.speedup:.3f}x [{low:.3f}, {c.speedup_interval[1]:.3f}] on "
                f"{_FAMILY.get(c.runtime, c.runtime)} ({c.rounds} rounds{aa}; {c.label}), "
                f"not measurably faster (at least {1 + CONFIRM_MARGIN:g}x, the interval "
                "above 1); kept the input"
            )
            run.best, run.cost_after = graph, run.cost_before
    if not math.isnan(c.source_gain):  # timed
        run.stats.update(source_gain=c.source_gain)
    if run.best is graph and c.source_gain > 1.0 + SOURCE_MARGIN:
        run.best = _written_as_source(graph)
        run.message += (
            f"; written as the source model, which onnxruntime ran {c.source_gain:.3f}x "
            "faster than the input's export"
        )


def _predicted(run: Run) -> str:
    """The candidate's predicted gain for messages: ``"1.234x faster"``, or ``"to take
    0 s"`` when the cost model priced it at nothing (the ``xla`` model can, where the
    figures of a small module fall under XLA's call overhead, which it subtracts), where
    a ratio has no value."""
    if run.candidate_cost > 0:
        return f"{run.cost_before / run.candidate_cost:.3f}x faster"
    return f"to take {run.candidate_cost:g} s"


#: Short names of the runtimes confirmation times on (``stats["measured_on"]``, labels),
#: as the verification runners name them.
_FAMILY = {"onnxruntime-cpu": "onnxruntime", "xla-cpu": "xla"}


#: The phases ``stats["phase_seconds"]`` always lists (others, such as the command's
#: ``load`` and ``save``, when they took time).
PHASES = ("setup", "exploration", "extraction", "refinement", "verification", "confirmation")


def result(run: Run, time_limit: float) -> OptimizeResult:
    """The :class:`OptimizeResult` of a finished run, with the time of every phase."""
    assert run.best is not None and run.extraction is not None and run.candidate is not None
    total = run.budget.elapsed()
    phases = {k: run.budget.seconds.get(k, 0.0) for k in PHASES}
    phases.update(run.budget.seconds)
    stats = run.stats
    message = run.message
    made = _pricing(run)
    if made is not None:
        stats["pricing"] = made.to_json()
        if made.note():
            message = f"{message}; {made.note()}" if message else made.note()
    stats.update(
        verify_seconds=phases["verification"],
        total_seconds=total,
        time_limit=float(time_limit),
        verify_reserve_seconds=run.reserve,
        phase_seconds=phases,
        phase_share={k: (v / total if total > 0 else 0.0) for k, v in phases.items()},
    )
    return OptimizeResult(
        graph=run.best,
        cost_before=run.cost_before,
        cost_after=run.cost_after,
        extraction_status=run.status,
        stats=stats,
        verify=run.report,
        message=message,
        candidate=run.candidate,
        candidate_cost=run.candidate_cost,
        candidate_status=run.extraction.status,
        cost_model=model_name(run.model),
        device=run.device,
    )


# ----------------------------------------------------------------------------- helpers
def _refine(
    graph: Graph,
    export: Mapping[str, Any],
    choices: Mapping[int, int],
    model: Any,
    deadline: float,
    start: tuple[Graph, float],
) -> Refinement | None:
    """The extraction refined against ``model.graph_cost`` toward the input program
    (:func:`tensat_py.extract.refine.refine`), or None when an input node is not in
    ``export`` (never for the e-graph built from ``graph``)."""
    try:
        toward = input_choices(export, graph.to_flat())
    except ValueError:
        return None
    return refine(export, choices, toward, model.graph_cost, deadline, meta=graph.meta, start=start)


def _confirms(confirm: bool | Runtime | None, model: Any) -> bool:
    """Whether to time the candidate on its runtime (see ``optimize(confirm=...)``)."""
    if confirm is not None:
        return bool(confirm)
    return (
        getattr(model, "name", "") in ("profile", "learned", "xla")
        and getattr(model, "device", "") == "cpu"
    )


def _runs(runtime: Runtime, graph: Graph) -> bool:
    """Whether ``runtime`` can run the program ``graph`` (it prepares it on seed-0
    inputs without raising ``ValueError``)."""
    try:
        runtime.prepare(graph, runtime.inputs(graph, 0), source=graph)
    except ValueError:
        return False
    return True


def _has_source_model(graph: Graph) -> bool:
    """Whether ``graph`` was loaded from an ONNX model that :func:`optimize` can write back
    as it was given when it keeps the input."""
    src = graph.meta.get("onnx")
    return getattr(src, "original", None) is not None


def _written_as_source(graph: Graph) -> Graph:
    """``graph`` (shared nodes) marked to be written as its source ONNX model
    (:func:`tensat_py.frontends.onnx.exporter.source_model`)."""
    from tensat_py.frontends.onnx.exporter import WRITE_SOURCE

    kept = copy.copy(graph)
    kept.meta = {**graph.meta, WRITE_SOURCE: True}
    return kept


def _same_program(graph: Graph, candidate: Graph) -> bool:
    """Whether ``candidate`` is ``graph`` again: the same flat program, and no opaque nodes
    whose payloads the flat form leaves out."""
    return not graph.opaque_nodes() and candidate.to_flat() == graph.to_flat()


def _check_estimate(
    ref: Reference, graph: Graph, export: Mapping[str, Any], problem: ExtractionProblem
) -> float:
    """Seconds a check of a program extracted from ``problem`` may take: the reference's
    run seconds scaled by the work (:func:`~tensat_py.verify.run_work`) of the e-graph's
    greedy DAG program over the input's. The greedy program stands in for the candidate
    and tends to overstate its weight-only work (BERT at k_multi=2: 26 times the input's
    work against the ILP answer's 21); 0.0 when it cannot be built or priced."""
    from tensat_py.extract.greedy import greedy_dag
    from tensat_py.verify import run_work

    choice = greedy_dag(problem)
    base = run_work(graph)
    if not choice or base <= 0:
        return 0.0
    return ref.run_seconds * run_work(Graph.from_choices(export, choice)) / base


def _check_candidate(ref: Reference, graph: Graph, candidate: Graph) -> VerifyReport:
    """The candidate's verification: a program identical to the input
    (:func:`_same_program`) passes without running."""
    if _same_program(graph, candidate):
        return VerifyReport(0.0, 0.0, True, ref.tolerance, "identical to the input", ref.runner)
    return ref.check(candidate)
