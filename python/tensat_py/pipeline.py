"""The optimisation pipeline: Graph -> e-graph -> saturation -> extraction -> Graph.

This is the flow of DESIGN.md and the Tensat paper (MLSys 2021): the program is loaded into
the Rust e-graph, explored with the rules of a rule file (single-pattern rules every
iteration, multi-pattern rules in the first ``k_multi`` iterations, cycle filtering), every
e-node is priced by the cost model, and the cheapest program is extracted (greedy or ILP).
For a cost model that prices whole programs beyond their nodes (``prices_programs``), the
extracted program is then refined toward the input under that price
(:mod:`tensat_py.extract.refine`). The resulting program (the *candidate*) is checked
numerically against the input; the
result is the candidate when it is cheaper and verified, and otherwise the input, with an
``extraction_status`` that says why (``"fallback-unverified"``, ``"fallback-not-cheaper"``)
and the candidate's own cost and verification report kept in the result.

One time limit bounds the whole optimisation (``docs/exploration.md``): the reference run
of the input (the first half of verification) comes first and its time is measured; an
estimate of the candidate's run is reserved; exploration gets at most half of what remains,
extraction the rest (less :data:`REFINE_SHARE` of it for refinement). Before the ILP the
estimate is raised to what the greedy DAG program of the explored e-graph would take to
check, where that is more (:func:`_check_estimate`): a candidate can compute weight-only
sub-graphs the input does not.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tensat_py import _core
from tensat_py.cost import get_cost_model
from tensat_py.egraph import ExtractionProblem, save_json
from tensat_py.extract import extract
from tensat_py.extract.refine import Refinement, input_choices, refine
from tensat_py.graph import Graph
from tensat_py.options import (
    CycleFilter,
    Device,
    Extractor,
    OrderVars,
    Solver,
    suggest,
    validate_optimize_options,
)
from tensat_py.progress import PhaseDisplay
from tensat_py.verify import Reference, VerifyReport, reference

__all__ = [
    "CONFIRM_MARGIN",
    "SOURCE_MARGIN",
    "FALLBACKS",
    "OptimizeResult",
    "ROUNDING",
    "RULES_DIR",
    "load_rules",
    "model_name",
    "optimize",
    "prediction_basis",
]

RULES_DIR = Path(__file__).parent / "rules"
"""Folder of the shipped rule files (``rules/`` in the repository)."""
#: The name of the built-in constant-folding rule set in :func:`load_rules`.
FOLD = "fold"
#: The name of the built-in layout rule set in :func:`load_rules` (the squeeze-excite gate
#: upsampled to the gated tensor's shape, ``_core.RuleSet.layout()``).
LAYOUT = "layout"

#: Relative cost difference taken as float rounding: a candidate that differs from the
#: input and is cheaper by less than this share is not cheaper (``fallback-not-cheaper``).
ROUNDING = 1e-9

#: Statuses that mean the input was kept instead of the candidate.
FALLBACKS = ("fallback-unverified", "fallback-not-cheaper", "fallback-not-faster")

#: Measured speedup (input / candidate latency on onnxruntime) a confirmed candidate must
#: reach: above onnxruntime's run-to-run noise on a quiet machine (A/A ratios within 1 %).
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


def _finite(x: Any) -> Any:
    """``x`` for JSON: non-finite floats become ``None``; dicts recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    return x


def report_json(report: VerifyReport | None) -> dict[str, Any] | None:
    """A :class:`VerifyReport` as a JSON object (infinite errors become ``null``)."""
    if report is None:
        return None
    return _finite(
        {
            "passed": report.passed,
            "runner": report.runner,
            "max_abs_error": float(report.max_abs_error),
            "max_rel_error": float(report.max_rel_error),
            "tolerance": report.tolerance,
            "message": report.message,
        }
    )


@dataclass
class OptimizeResult:
    """What :func:`optimize` found.

    Attributes:
        graph: the optimised program: the candidate when it is cheaper and (with
            verification on) verified, else the input itself.
        cost_before: cost-model cost of the input, seconds.
        cost_after: cost-model cost of ``graph``, seconds (``<= cost_before``).
        extraction_status: the extractor's status when the candidate was kept
            (``"optimal"``, ``"feasible"``, ``"greedy"``, ``"fallback-greedy"``; see
            :class:`tensat_py.extract.ExtractionResult`), else ``"fallback-unverified"``
            (the candidate failed verification), ``"fallback-not-cheaper"`` (a different
            program that costs at least the input's cost less :data:`ROUNDING`, or gains
            less than ``min_gain``) or ``"fallback-not-faster"`` (confirmation measured it
            no faster); ``message`` says more.
        stats: exploration statistics from the Rust core (``enodes``, ``eclasses``,
            ``iterations``, ``stop_reason``, ``filtered_enodes``, ``explore_seconds``, ...)
            plus ``extract_seconds``, ``verify_seconds``, ``total_seconds``, the budgets
            ``time_limit``, ``explore_time_limit`` and ``extract_time_limit``,
            ``verify_reserve_seconds`` (kept for the candidate's check), ``phase_seconds``
            and ``phase_share`` (each phase's seconds and fraction of ``total_seconds``:
            setup, exploration, extraction, refinement, verification, confirmation),
            ``extraction_message`` and, for a cost model that prices whole programs,
            ``refinement`` (:meth:`tensat_py.extract.refine.Refinement.stats`: trials,
            e-classes switched back to the input's e-node, seconds, costs).
        verify: the candidate's own verification report (float64, against the input), or
            ``None`` when verification is off. ``verify.passed`` is false exactly when the
            status is ``"fallback-unverified"``.
        message: a human-readable note about fallbacks.
        candidate: the extracted program (refined, when ``stats["refinement"]`` says it
            switched e-classes), kept or not.
        candidate_cost: its cost-model cost, seconds.
        candidate_status: the extractor's own status for it.
        cost_model: the name of the cost model that priced both programs (``"roofline"``,
            ``"profile"``, ...; a user object's ``name`` attribute or class name).
        device: the device it priced for (a roofline preset such as ``"t4"``, ``"cpu"``).
        unit: the unit of ``cost_before``, ``cost_after`` and ``candidate_cost``
            (``"seconds"``).

    ``speedup`` is the cost model's *prediction* for ``device``; a measured speedup, when
    confirmation timed the programs, is ``stats["measured_speedup"]`` with its runtime in
    ``stats["measured_on"]``.
    """

    graph: Graph
    cost_before: float
    cost_after: float
    extraction_status: str
    stats: dict[str, Any] = field(default_factory=dict)
    verify: VerifyReport | None = None
    message: str = ""
    candidate: Graph | None = None
    candidate_cost: float = math.nan
    candidate_status: str = ""
    cost_model: str = ""
    device: str = ""
    unit: str = "seconds"

    @property
    def speedup(self) -> float:
        """``cost_before / cost_after`` (1.0 when nothing changed): the speedup the cost
        model predicts on ``device``, not a measurement."""
        return self.cost_before / self.cost_after if self.cost_after > 0 else 1.0

    @property
    def basis(self) -> str:
        """What ``speedup`` is predicted by, for labels: ``"roofline cost model, device
        t4 (NVIDIA T4 GPU)"``."""
        return prediction_basis(self.cost_model, self.device)

    @property
    def fell_back(self) -> bool:
        """Whether the input was kept instead of the candidate."""
        return self.extraction_status in FALLBACKS

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` object: costs with their ``unit``, ``cost_model`` and
        ``device``; ``speedup`` (predicted by that cost model, ``speedup_kind``
        ``"predicted"``) and, when confirmation timed the programs, ``measured`` (runtime,
        speedup, rounds); status, message, the candidate's cost, status and verification
        report (``verify``: ``passed``, ``runner``, errors, ``message``) and every statistic
        (non-finite numbers as ``null``)."""
        measured = None
        if "measured_speedup" in self.stats:
            measured = {
                "runtime": self.stats.get("measured_on", ""),
                "speedup": self.stats["measured_speedup"],
                "rounds": self.stats.get("confirm_rounds"),
            }
        return _finite(
            {
                "cost_model": self.cost_model,
                "device": self.device,
                "unit": self.unit,
                "speedup": self.speedup,
                "speedup_kind": "predicted",
                "speedup_basis": self.basis,
                "measured": measured,
                "cost_before": self.cost_before,
                "cost_after": self.cost_after,
                "extraction_status": self.extraction_status,
                "message": self.message,
                "candidate": {"cost": self.candidate_cost, "status": self.candidate_status},
                "stats": dict(self.stats),
                "verify": report_json(self.verify),
            }
        )


@lru_cache(maxsize=16)
def _load_rules_cached(path: str, mtime: float) -> _core.RuleSet:
    rs = _core.RuleSet.load(path)
    if len(rs) == 0:
        raise ValueError(
            f"{path}: no rules in this file (a rule reads `name: source => target`; "
            "see docs/rules.md)"
        )
    return rs


def load_rules(
    rules: str | Path | _core.RuleSet | Sequence[str | Path | _core.RuleSet],
) -> _core.RuleSet:
    """Resolves a rule set.

    Args:
        rules: a shipped rule file's name (``"taso"`` for ``rules/taso.rules``), a
            built-in set of the Rust core whose targets no rule file can write: ``"fold"``
            (constant folding of scalar literals, ``_core.RuleSet.constant_folding()``) or
            ``"layout"`` (a squeeze-excite gate upsampled to the gated tensor's shape,
            ``_core.RuleSet.layout()``), a path to a ``.rules`` file, an already parsed
            ``RuleSet``, several of them joined by ``+`` (``"taso+tensor+fold"``) or a
            sequence of them (their rules in order). A file of the same name in the
            current folder shadows a built-in set.

    Raises:
        FileNotFoundError: when no such rule file exists (the message lists the shipped and
            built-in ones).
        ValueError: ``file:line:col: message`` on a syntax error; a file that holds no
            rule (empty, comments only); two files sharing a rule name.
    """
    if isinstance(rules, _core.RuleSet):
        return rules
    if isinstance(rules, str) and "+" in rules and not Path(rules).exists():
        rules = [r for r in rules.split("+") if r]
    if not isinstance(rules, str | Path):
        if not isinstance(rules, Sequence):
            raise TypeError(
                f"rules: expected a rule file name, a path, a RuleSet or a list of them, "
                f"got {type(rules).__name__}"
            )
        sets = [load_rules(r) for r in rules]
        if not sets:
            raise ValueError("no rule files given")
        return sets[0] if len(sets) == 1 else _core.RuleSet.union(sets)
    built_in = {FOLD: _core.RuleSet.constant_folding, LAYOUT: _core.RuleSet.layout}
    if isinstance(rules, str) and rules in built_in and not Path(rules).exists():
        return built_in[rules]()
    path = Path(rules)
    if not path.suffix and not path.exists():
        path = RULES_DIR / f"{rules}.rules"
    if not path.is_file():
        shipped = sorted(p.stem for p in RULES_DIR.glob("*.rules"))
        raise FileNotFoundError(
            f"no rule file {str(rules)!r}{suggest(str(rules), [*shipped, *built_in])} "
            f"(shipped: {', '.join(shipped)}; built in: {', '.join(built_in)})"
        )
    return _load_rules_cached(str(path.resolve()), path.stat().st_mtime)


def _as_graph(graph: Any) -> Graph:
    """``graph`` itself, or the program a zoo name or file path names (``tensat_py.load``).

    Raises:
        TypeError: anything else (names the type and says to call ``tensat_py.load``).
    """
    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, str | Path):
        from tensat_py import load

        graph = load(str(graph))
        if isinstance(graph, Graph):
            return graph
    if type(graph).__name__ == "KsProgram":
        raise TypeError(
            "optimize() takes tensor programs; a Knossos program is optimised def by def "
            "with tensat_py.frontends.knossos.optimize_program(prog) or `tensat optimize "
            "prog.ks`"
        )
    raise TypeError(
        f"optimize() takes a Graph, a zoo model name or a file path, got "
        f"{type(graph).__name__}; build one with tensat_py.builder or tensat_py.load(...)"
    )


def _resolve_cost_model(graph: Graph, cost_model: Any, device: str) -> Any:
    from tensat_py.frontends import defaults_for

    if cost_model is None:
        fe = defaults_for(graph)
        cost_model = fe.default_cost_model if fe is not None else "roofline"
    if isinstance(cost_model, str):
        return get_cost_model(cost_model, device)
    return cost_model  # an object implementing the protocol (checked by the options)


def optimize(
    graph: Graph | str | Path,
    *,
    rules: str | Path | _core.RuleSet | Sequence[str | Path | _core.RuleSet] | None = None,
    k_multi: int = 1,
    node_limit: int = 50_000,
    iter_limit: int = 15,
    time_limit: float = 60.0,
    cycle_filter: CycleFilter = "efficient",
    extractor: Extractor = "ilp",
    solver: Solver = "highs",
    order_vars: OrderVars = "real",
    cost_model: str | Any | None = None,
    device: Device = "t4",
    verify: bool = True,
    dump_egraph: str | Path | None = None,
    progress: bool | PhaseDisplay = False,
    policy: str | Any = "default",
    min_gain: float | None = None,
    confirm: bool | None = None,
    mirror_once: bool = True,
) -> OptimizeResult:
    """Optimises a tensor program by equality saturation and extraction.

    Args:
        graph: the program; a zoo model name (``"bert"``) or a file path is loaded with
            :func:`tensat_py.load` first.
        rules: rule file name (``"taso"``), path, parsed ``RuleSet``, or several
            (``"taso+tensor"``, a list); see :func:`load_rules`. Default: the rules of
            the front end that loaded ``graph`` (``Graph.meta["frontend"]``,
            :mod:`tensat_py.frontends`), else ``"taso"``.
        k_multi: iterations in which multi-pattern rules run (Tensat's k_multi; default 1).
        node_limit: stop exploring at this many e-nodes (default 50,000).
        iter_limit: maximum exploration iterations (default 15).
        time_limit: seconds for the whole optimisation (default 60): verification's
            reference run, exploration (at most half of what remains after reserving the
            candidate's verification), extraction (the rest, less :data:`REFINE_SHARE` for
            refinement where the cost model prices whole programs) and the candidate's
            verification (estimated from the reference run). ``stats`` shows each phase's
            seconds and share.
        cycle_filter: ``"efficient"`` (default), ``"vanilla"`` or ``"none"`` (the ILP then
            carries the cycle constraints).
        extractor: ``"ilp"`` (default), ``"greedy"`` (tree cost) or ``"greedy-dag"``.
        solver: ILP solver, ``"highs"`` (default; HiGHS through highspy) or ``"cbc"``
            (CBC through PuLP, the paper's). HiGHS proves the e-graphs of real programs far
            sooner: a one-layer GPT-2 block's cyclic e-graph in 1.5 s, where CBC took 34 s
            (``docs/extraction.md``).
        order_vars: with ``cycle_filter="none"``, the ILP's topological order variables:
            ``"real"`` (default) or ``"int"`` (the paper's Table 4 compares both).
        cost_model: a name (``"roofline"``, ...) or an object with ``graph_cost(graph)`` and
            ``costs_for_export(export)`` (seconds); default: the front end's
            (``"roofline"`` for tensor programs).
        device: the device the cost model prices for: a roofline preset, ``"t4"``
            (default), ``"a100"``, ``"h100"``, ``"cpu"``; for the measured models
            (``profile``, ``learned``) ``"cpu"`` (this machine), or ``"gpu"``/``"cuda"`` (or
            a GPU preset's name) through CuPy.
        verify: run both programs in float64 on the same random inputs and weights and keep
            the candidate only if its outputs agree (``tensat_py.verify``'s float64
            tolerance, far tighter than the 1e-4 float32 bound).
        dump_egraph: write the saturated e-graph as egraph-serialize JSON to this path.
        progress: show a spinner on stderr for phases longer than a second (``True``, or a
            :class:`tensat_py.progress.PhaseDisplay`); default off.
        min_gain: keep the input unless the candidate is at least this fraction cheaper
            under the cost model (``0.02``: 2 %). A predicted gain within a cost model's
            error is not worth a program the runtime may fuse worse. Default: the front
            end's (``0.02`` for ONNX, whose runtime fuses operators the models do not
            price), else 0.
        confirm: time the input and the candidate side by side on onnxruntime (CPU,
            ``ORT_ENABLE_ALL``; :func:`tensat_py.runtime.confirm.measured_speedup`, at
            least 5 rotating rounds within the time left, at most 10 s) and keep the
            candidate only if it measures at least :data:`CONFIRM_MARGIN` (1 %) faster.
            For an input loaded from ONNX the source model as given is timed too: the
            candidate must beat it as well, and a kept input is written as that model
            (``meta[WRITE_SOURCE]``, :func:`tensat_py.frontends.onnx.exporter.source_model`)
            when it ran more than :data:`SOURCE_MARGIN` (3 %) faster than the input's
            export (``stats["source_gain"]``). Default: on for a cost model measured on the CPU
            (``profile``, ``learned`` with ``device="cpu"``), whose per-operator figures
            cannot see onnxruntime's fusions across operators; off otherwise.
        policy: rule choice (:mod:`tensat_py.policies`): ``"default"`` (Tensat's schedule),
            ``"learned"`` (the default, then one learned multi-pattern iteration on its
            program, :mod:`tensat_py.policies.staged`; kept only where cheaper and
            verified, else the default's program, saying so), ``"astar"``
            (A* over rewrite sequences with the learned value function), or a policy object.
        mirror_once: apply a mirror-symmetric multi-pattern rule (a merge of two operators
            that share an input, ``tensat rules list`` marks them) once per pair of
            e-classes (default); ``False`` applies it to both orders, as Tensat does. The
            mirrored application builds the same merged operator with its concatenation
            order reversed, at the same cost (``docs/exploration.md``).

    Returns:
        an :class:`OptimizeResult`; ``cost_after <= cost_before`` always, and the
        candidate's own cost and verification are in ``candidate_cost`` and ``verify``.

    Raises:
        TypeError: ``graph`` is not a program, name or path.
        ValueError: on an ill-typed graph, a bad option (one line naming it, with a
            suggestion for misspelt names), a rule file syntax error, or an operator the
            cost model cannot price.
        FileNotFoundError: when the rule file or the named program does not exist.
    """
    start = time.perf_counter()
    validate_optimize_options(
        k_multi=k_multi,
        node_limit=node_limit,
        iter_limit=iter_limit,
        time_limit=time_limit,
        cycle_filter=cycle_filter,
        extractor=extractor,
        solver=solver,
        order_vars=order_vars,
        device=device,
        cost_model=cost_model,
    )
    graph = _as_graph(graph)
    if isinstance(policy, str) and policy != "default":
        kw = {k: v for k, v in locals().items() if k not in ("graph", "policy", "start")}
        from tensat_py.policies.run import optimize_with_policy

        return optimize_with_policy(graph, policy, kw)
    display = progress if isinstance(progress, PhaseDisplay) else PhaseDisplay(bool(progress))
    deadline = start + time_limit
    from tensat_py.frontends import defaults_for

    fe = defaults_for(graph)
    if rules is None:
        rules = fe.default_rules if fe is not None else "taso"
    gain_floor = min_gain if min_gain is not None else (fe.min_gain if fe is not None else 0.0)
    if not 0.0 <= gain_floor < 1.0:
        raise ValueError(f"min_gain must be in [0, 1), got {gain_floor}")
    model = _resolve_cost_model(graph, cost_model, device)
    ruleset = load_rules(rules)
    cost_before = model.graph_cost(graph)

    # Verification, first half: the input's outputs, whose time predicts the candidate's.
    ref: Reference | None = None
    verify_seconds = 0.0
    reserve = 0.0
    if verify:
        t = time.perf_counter()
        with display.phase("verification (reference run)"):
            ref = reference(graph, seed=0, dtype="float64")
        verify_seconds = time.perf_counter() - t
        reserve = VERIFY_RESERVE_FACTOR * verify_seconds
    setup_seconds = time.perf_counter() - start - verify_seconds

    explore_limit = max(MIN_PHASE_SECONDS, (deadline - time.perf_counter() - reserve) / 2)
    egraph = _core.EGraph(graph.to_flat())
    with display.phase("exploration"):
        stats: dict[str, Any] = dict(
            egraph.saturate(
                ruleset,
                k_multi=k_multi,
                node_limit=node_limit,
                iter_limit=iter_limit,
                time_limit=explore_limit,
                cycle_filter=cycle_filter,
                policy=None if isinstance(policy, str) else policy,
                mirror_once=mirror_once,
            )
        )
    t = time.perf_counter()
    explore_wall = t - start - setup_seconds - verify_seconds
    with display.phase("extraction"):
        export = egraph.export()
        costs = model.costs_for_export(export)
        problem = ExtractionProblem.from_export(export, costs)
        if dump_egraph is not None:
            save_json(problem, dump_egraph)
        if ref is not None and extractor == "ilp":
            # The candidate may compute weight-only sub-graphs the input does not (a
            # product of two weights after matmul re-association): keep what its check
            # would take, judged from the greedy DAG program of this e-graph.
            reserve = max(reserve, _check_estimate(ref, graph, export, problem))
        programs = bool(getattr(model, "prices_programs", False))
        left = deadline - time.perf_counter() - reserve
        extract_limit = max(MIN_PHASE_SECONDS, left * (1 - REFINE_SHARE) if programs else left)
        result = extract(
            problem,
            extractor=extractor,
            solver=solver,
            time_limit=extract_limit,
            cycle_constraints="order" if cycle_filter == "none" and extractor == "ilp" else None,
            order_vars=order_vars,
        )
        candidate = Graph.from_choices(export, result.choices)
        candidate.meta = dict(graph.meta)  # front-end data (opaque payloads, source model)
        candidate_cost = model.graph_cost(candidate)
    stats["extract_seconds"] = time.perf_counter() - t
    if programs and time.perf_counter() < deadline - reserve:
        with display.phase("refinement"):
            extracted = (candidate, candidate_cost)
            refined = _refine(graph, export, result.choices, model, deadline - reserve, extracted)
        if refined is not None:
            stats["refinement"] = refined.stats()
            if refined.switched:
                candidate, candidate_cost = refined.graph, refined.cost
    stats["extraction_message"] = result.message
    # Extraction figures (docs/extraction.md): proved lower bound, relative gap, phases.
    stats.update(
        extraction_cost=result.cost,
        extraction_lower_bound=result.lower_bound,
        extraction_gap=result.gap,
        extraction_build_seconds=result.build_seconds,
        extraction_solve_seconds=result.solve_seconds,
        extraction_simplify_seconds=result.simplify_seconds,
        extraction_stats=dict(result.stats),
    )

    report: VerifyReport | None = None
    if ref is not None:
        t = time.perf_counter()
        with display.phase("verification"):
            report = _check_candidate(ref, graph, candidate)
        verify_seconds += time.perf_counter() - t

    status, message = result.status, result.message
    best, cost_after = candidate, candidate_cost
    if report is not None and not report.passed:
        status = "fallback-unverified"
        message = (
            f"the extracted program ({result.status}, cost {candidate_cost:.6g} s) failed "
            f"verification on {report.runner}: {report.message}; kept the input"
        )
        best, cost_after = graph, cost_before
    elif candidate_cost > cost_before or (
        candidate_cost > cost_before * (1 - ROUNDING) and not _same_program(graph, candidate)
    ):
        # A different program whose gain is float rounding (the same operators summed in
        # another order) gains nothing, and would cost a confirmation run.
        status = "fallback-not-cheaper"
        than = (
            "as much as (to rounding)"
            if f"{candidate_cost:.6g}" == f"{cost_before:.6g}"
            else "more than"
        )
        message = (
            f"the extracted program ({result.status}) costs {candidate_cost:.6g} s, {than} "
            f"the input's {cost_before:.6g} s; kept the input"
        )
        best, cost_after = graph, cost_before
    elif gain_floor > 0 and candidate_cost > cost_before * (1 - gain_floor):
        # Equal cost included: a different program of the same cost gains nothing.
        status = "fallback-not-cheaper"
        message = (
            f"the extracted program ({result.status}) is {1 - candidate_cost / cost_before:.2%} "
            f"cheaper, below min_gain {gain_floor:.2%}; kept the input"
        )
        best, cost_after = graph, cost_before

    confirm_seconds = 0.0
    if _confirms(confirm, model) and (best is candidate or _has_source_model(graph)):
        from tensat_py.runtime.confirm import measured_speedup

        t = time.perf_counter()
        budget = max(0.5, min(10.0, deadline - t))
        with display.phase("confirmation"):
            c = measured_speedup(graph, candidate if best is candidate else None, budget=budget)
        confirm_seconds = time.perf_counter() - t
        stats.update(confirm_rounds=c.rounds)
        if best is candidate:
            stats.update(measured_speedup=c.speedup, measured_on="onnxruntime (CPU)")
            if c.speedup < 1.0 + CONFIRM_MARGIN:
                status = "fallback-not-faster"
                message = (
                    f"the extracted program ({result.status}) is predicted "
                    f"{cost_before / candidate_cost:.3f}x faster but measured "
                    f"{c.speedup:.3f}x on onnxruntime ({c.rounds} rounds), below "
                    f"{1 + CONFIRM_MARGIN:g}x; kept the input"
                )
                best, cost_after = graph, cost_before
        if not math.isnan(c.source_gain):  # timed
            stats.update(source_gain=c.source_gain)
        if best is graph and c.source_gain > 1.0 + SOURCE_MARGIN:
            best = _written_as_source(graph)
            message += (
                f"; written as the source model, which onnxruntime ran {c.source_gain:.3f}x "
                "faster than the input's export"
            )

    total = time.perf_counter() - start
    phases = {
        "setup": setup_seconds,
        "exploration": explore_wall,
        "extraction": stats["extract_seconds"],
        "refinement": stats.get("refinement", {}).get("seconds", 0.0),
        "verification": verify_seconds,
        "confirmation": confirm_seconds,
    }
    stats.update(
        verify_seconds=verify_seconds,
        total_seconds=total,
        time_limit=float(time_limit),
        explore_time_limit=explore_limit,
        extract_time_limit=extract_limit,
        verify_reserve_seconds=reserve,
        phase_seconds=phases,
        phase_share={k: (v / total if total > 0 else 0.0) for k, v in phases.items()},
    )
    return OptimizeResult(
        graph=best,
        cost_before=cost_before,
        cost_after=cost_after,
        extraction_status=status,
        stats=stats,
        verify=report,
        message=message,
        candidate=candidate,
        candidate_cost=candidate_cost,
        candidate_status=result.status,
        cost_model=model_name(model),
        device=str(getattr(model, "device", device)),
    )


def model_name(model: Any) -> str:
    """A cost model's name for labels: its ``name`` attribute, else its class name."""
    return str(getattr(model, "name", "") or type(model).__name__)


def prediction_basis(cost_model: str, device: str) -> str:
    """``"roofline cost model, device t4 (NVIDIA T4 GPU)"``: what a predicted figure
    comes from, for tables and messages (for the roofline model, the preset's description
    from :data:`tensat_py.cost.roofline.PRESETS`).

    >>> prediction_basis("profile", "cpu")
    'profile cost model, device cpu'
    """
    from tensat_py.cost.roofline import PRESETS

    preset = PRESETS.get(device) if cost_model == "roofline" else None
    where = f"{device} ({preset.title})" if preset is not None else device
    return f"{cost_model} cost model, device {where}"


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


def _confirms(confirm: bool | None, model: Any) -> bool:
    """Whether to time the candidate on onnxruntime (see ``optimize(confirm=...)``)."""
    if confirm is not None:
        return bool(confirm)
    return (
        getattr(model, "name", "") in ("profile", "learned")
        and getattr(model, "device", "") == "cpu"
    )


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
