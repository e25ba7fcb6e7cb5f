"""The optimisation pipeline: Graph -> e-graph -> saturation -> extraction -> Graph.

This is the flow of DESIGN.md and the Tensat paper (MLSys 2021): the program is loaded into
the Rust e-graph, explored with the rules of a rule file (single-pattern rules every
iteration, multi-pattern rules in the first ``k_multi`` iterations, cycle filtering), every
e-node is priced by the cost model, and the cheapest program is extracted (greedy or ILP).
For a cost model that prices whole programs beyond their nodes (``prices_programs``), the
extracted program is then refined toward the input under that price
(:mod:`tensat_py.extract.refine`). The resulting program (the *candidate*) is checked
numerically against the input; the result is the candidate when it is cheaper and verified,
and otherwise the input, with an ``extraction_status`` that says why
(``"fallback-unverified"``, ``"fallback-not-cheaper"``, ``"fallback-not-faster"``) and the
candidate's own cost and verification report kept in the result.

:func:`optimize` checks the options and hands one wall-clock budget
(:class:`tensat_py.budget.Budget`) to the phases of :mod:`tensat_py.phases`, which say how
the time is shared. A large program is optimised region by region
(:mod:`tensat_py.regions`). This module keeps the public face: :func:`optimize` and,
re-exported, the result (:mod:`tensat_py.result`) and
:func:`~tensat_py.rule_files.load_rules`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensat_py import _core, phases
from tensat_py.budget import Budget
from tensat_py.cost import get_cost_model
from tensat_py.graph import Graph
from tensat_py.options import (
    CycleFilter,
    Device,
    Extractor,
    OrderVars,
    Solver,
    check_fraction,
    validate_optimize_options,
)
from tensat_py.phases import CONFIRM_MARGIN, ROUNDING, SOURCE_MARGIN
from tensat_py.progress import PhaseDisplay
from tensat_py.result import FALLBACKS, OptimizeResult, model_name, prediction_basis, report_json
from tensat_py.result import finite as _finite
from tensat_py.rule_files import FOLD, LAYOUT, RULES_DIR, load_rules

if TYPE_CHECKING:
    from tensat_py.runtime.protocol import Runtime

__all__ = [
    "CONFIRM_MARGIN",
    "SOURCE_MARGIN",
    "FALLBACKS",
    "OptimizeResult",
    "FOLD",
    "LAYOUT",
    "ROUNDING",
    "RULES_DIR",
    "load_rules",
    "model_name",
    "optimize",
    "prediction_basis",
    "report_json",
]

_finite = _finite  # re-exported for the CLI and older callers

#: Share of the time left at setup during which a cost model that measures on demand
#: (``xla``: :meth:`tensat_py.cost.xla.XlaCostModel.measure_until`) may measure the
#: signatures the cache lacks; past it, it estimates them.
MEASURE_SHARE = 0.4


def _as_graph(graph: Any) -> Any:
    """``graph`` itself, or the program a zoo name or file path names (``tensat_py.load``):
    a :class:`Graph`, or a program made of functions (a Knossos ``KsProgram``) whose front
    end has a function stage (:mod:`tensat_py.def_phases`).

    Raises:
        TypeError: anything else (names the type and says to call ``tensat_py.load``).
    """
    from tensat_py.frontends import defaults_for

    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, str | Path):
        from tensat_py import load

        graph = load(str(graph))
        if isinstance(graph, Graph):
            return graph
    fe = defaults_for(graph)
    if fe is not None and fe.functions is not None:
        return graph
    raise TypeError(
        f"optimize() takes a Graph, a zoo model name or a file path, got "
        f"{type(graph).__name__}; build one with tensat_py.builder or tensat_py.load(...)"
    )


def _by_name(spec: Any) -> bool:
    """Whether a rules or cost-model argument names what it means (None: the front end's
    default; a string or path; a list of them), so another process can load it."""
    if spec is None or isinstance(spec, str | Path):
        return True
    return isinstance(spec, list | tuple) and all(isinstance(s, str | Path) for s in spec)


def _resolve_device(graph: Graph, device: Device | None) -> Device:
    from tensat_py.frontends import device_for

    return device_for(graph, device)  # type: ignore[return-value]


def _resolve_cost_model(graph: Graph, cost_model: Any, device: str) -> Any:
    from tensat_py.frontends import defaults_for

    if cost_model is None:
        fe = defaults_for(graph)
        cost_model = fe.cost_model_for(device) if fe is not None else "roofline"
    if isinstance(cost_model, str):
        return get_cost_model(cost_model, device)
    return cost_model  # an object implementing the protocol (checked by the options)


def optimize(
    graph: Graph | str | Path,
    *,
    rules: str | Path | _core.RuleSet | Sequence[str | Path | _core.RuleSet] | None = None,
    k_multi: int | None = None,
    node_limit: int | None = None,
    iter_limit: int = 15,
    time_limit: float = 60.0,
    cycle_filter: CycleFilter = "efficient",
    extractor: Extractor = "ilp",
    solver: Solver = "highs",
    order_vars: OrderVars = "real",
    cost_model: str | Any | None = None,
    device: Device | None = None,
    verify: bool = True,
    dump_egraph: str | Path | None = None,
    progress: bool | PhaseDisplay = False,
    policy: str | Any = "default",
    min_gain: float | None = None,
    confirm: bool | Runtime | None = None,
    mirror_once: bool = True,
    merge_trees: bool = True,
    regions: bool | None = None,
    gap: float = 1e-6,
    jobs: int = 1,
    ray: str | None = None,
    budget: Budget | None = None,
) -> OptimizeResult:
    """Optimises a tensor program by equality saturation and extraction.

    Args:
        graph: the program; a zoo model name (``"bert"``) or a file path is loaded with
            :func:`tensat_py.load` first. A program made of functions (a Knossos ``.ks``
            program, ``KsProgram``) goes through the function stage
            (:mod:`tensat_py.def_phases`: call-graph order, per function exploration,
            extraction under RLO's cost model, hoisting, verification by the Knossos
            evaluator, within ``time_limit``); ``result.defs`` then lists the functions.
        rules: rule file name (``"taso"``), path, parsed ``RuleSet``, or several
            (``"taso+tensor"``, a list); see :func:`load_rules`. Default: the rules of
            the front end that loaded ``graph`` (``Graph.meta["frontend"]``,
            :mod:`tensat_py.frontends`), else ``"taso"``.
        k_multi: iterations in which multi-pattern rules run (Tensat's k_multi). Default
            (``None``): the cost model's ``default_k_multi`` if it has one (``xla``: 1),
            else 2 for a program (or region) of at most
            :data:`tensat_py.phases.AUTO_K_MULTI_OPERATORS` (256) operators, 1 above;
            ``stats["k_multi"]`` says which ran.
        node_limit: stop exploring at this many e-nodes. Default (``None``):
            :data:`tensat_py.phases.NODES_PER_OPERATOR` (150) per operator of the program
            explored (the whole input, or one region), at most
            :data:`tensat_py.phases.NODE_LIMIT` (50,000); a number is the limit itself.
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
            sooner: a one-layer GPT-2 block's cyclic e-graph in 1.8 s, where CBC took 23.5 s
            (``docs/extraction.md``).
        order_vars: with ``cycle_filter="none"``, the ILP's topological order variables:
            ``"real"`` (default) or ``"int"`` (the paper's Table 4 compares both).
        cost_model: a name (``"roofline"``, ...) or an object with ``graph_cost(graph)`` and
            ``costs_for_export(export)`` (seconds); default: the front end's
            (``"roofline"`` for tensor programs).
        device: the device the cost model prices for: a roofline preset, ``"t4"``,
            ``"a100"``, ``"h100"``, ``"cpu"``; for the measured models (``profile``,
            ``learned``, ``xla``) ``"cpu"`` (this machine), or ``"gpu"``/``"cuda"`` (or a
            GPU preset's name) through CuPy. Default: the front end's
            (:func:`tensat_py.frontends.device_for`): ``"cpu"`` for HLO, the runtime here
            that runs it (so the ``xla`` cost model prices it and confirmation measures
            the candidate on XLA's CPU client); ``"t4"``, Tensat's GPU, otherwise.
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
        confirm: time the input and the candidate side by side, with a second copy of
            the input as an A/A control, on the input's runtime (XLA's CPU client for HLO
            input; onnxruntime on the CPU, ``ORT_ENABLE_ALL``, otherwise; or the
            :class:`tensat_py.runtime.protocol.Runtime` given here instead of True;
            :func:`tensat_py.runtime.confirm.measured_speedup`, 5 to 200 rotating rounds
            within the time left, at most 10 s) and keep the candidate only if it measures
            at least :data:`CONFIRM_MARGIN` (1 %) faster. The result names the runtime
            and the A/A (``stats["measured_on"]``, ``stats["measured_aa"]``,
            ``to_json()["measured"]``).
            For an input loaded from ONNX the source model as given is timed too: the
            candidate must beat it as well, and a kept input is written as that model
            (``meta[WRITE_SOURCE]``, :func:`tensat_py.frontends.onnx.exporter.source_model`)
            when it ran more than :data:`SOURCE_MARGIN` (3 %) faster than the input's
            export (``stats["source_gain"]``). Default: on for a cost model measured on the CPU
            (``profile``, ``learned``, ``xla`` with ``device="cpu"``), whose figures may
            miss the runtime's fusions across operators; off otherwise.
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
        merge_trees: in the e-graph's first iteration, also apply each such merge rule as a
            merge tree over every group of three or more operators it can merge (the
            matmuls reading one input: pairs, then pairs of pairs, ..., ``n - 1``
            applications for ``n``), so that ``k_multi=1`` merges NasRNN's eight matmuls per
            side and step into one (default); ``False``: pairwise only, as Tensat does.
            ``stats["merge_tree_applied"]`` counts the applications
            (``docs/exploration.md``).
        regions: optimise the program region by region (:mod:`tensat_py.regions`: cut
            where one value flows, repeated blocks explored and extracted once and applied
            to every copy): ``None`` (default) does so for programs of at least
            :data:`tensat_py.regions.PARTITION_OPERATORS` operators that cut into several
            regions, ``True`` whenever they cut, ``False`` never. ``stats["regions"]``
            shows the regions, their classes and what exploring once saved.
        gap: the ILP stops at this proved relative gap between its answer and its lower
            bound (default ``1e-6``: proved optimal; ``0.01`` stops within 1 %). Extraction
            also stops, keeping the input, when the critical-path lower bound shows that no
            program can be ``min_gain`` cheaper than the input.
        jobs: region classes explored and extracted at once on this many local processes
            (default 1: one after the other, here; :mod:`tensat_py.region_workers`). Only
            when the rules and the cost model are given by name.
        ray: the address of a Ray cluster (``"local"``: start one on this machine) whose
            tasks explore and extract the region classes; needs the ``ray`` extra.
        budget: the wall-clock budget to draw on (:class:`tensat_py.budget.Budget`): the
            ``tensat`` command starts one before loading the program so that loading and
            writing come out of ``time_limit`` too; default a new one of ``time_limit``
            seconds. Its phases' seconds are ``stats["phase_seconds"]``.

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
    budget = budget if budget is not None else Budget(time_limit)
    with budget.phase("setup"):
        validate_optimize_options(
            k_multi=k_multi,
            node_limit=node_limit if node_limit is not None else phases.NODE_LIMIT,
            iter_limit=iter_limit,
            time_limit=time_limit,
            cycle_filter=cycle_filter,
            extractor=extractor,
            solver=solver,
            order_vars=order_vars,
            device=device,
            cost_model=cost_model,
        )
    check_fraction("gap", gap)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: must be a positive integer, got {jobs!r}")
    if isinstance(graph, Graph):
        graph = _as_graph(graph)
    else:
        with budget.phase("load"):
            graph = _as_graph(graph)
    device = _resolve_device(graph, device)  # no new local: ``kw`` below takes them all
    if not isinstance(graph, Graph):  # a program of functions (Knossos)
        return _optimize_functions(
            graph,
            rules=rules,
            node_limit=node_limit,
            iter_limit=iter_limit,
            time_limit=time_limit,
            cost_model=cost_model,
            device=device,
            verify=verify,
            policy=policy,
            confirm=confirm,
            dump_egraph=dump_egraph,
            budget=budget,
        )
    if isinstance(policy, str) and policy != "default":
        kw = {k: v for k, v in locals().items() if k not in ("graph", "policy", "budget")}
        from tensat_py.policies.run import optimize_with_policy

        return optimize_with_policy(graph, policy, kw, optimize)
    display = progress if isinstance(progress, PhaseDisplay) else PhaseDisplay(bool(progress))
    from tensat_py.frontends import defaults_for

    with budget.phase("setup"):
        fe = defaults_for(graph)
        if rules is None:
            rules = fe.default_rules if fe is not None else "taso"
        floor = min_gain if min_gain is not None else (fe.min_gain if fe is not None else 0.0)
        if not 0.0 <= floor < 1.0:
            raise ValueError(f"min_gain must be in [0, 1), got {floor}")
        model = _resolve_cost_model(graph, cost_model, device)
        if callable(getattr(model, "measure_until", None)):  # measured on demand (xla)
            model.measure_until(time.monotonic() + MEASURE_SHARE * budget.left())
        run = phases.Run(
            graph=graph,
            budget=budget,
            display=display,
            limits=phases.Limits(
                k_multi, node_limit, iter_limit, cycle_filter, extractor, solver, order_vars, gap
            ),
            ruleset=load_rules(rules),
            model=model,
            gain_floor=floor,
            cost_before=model.graph_cost(graph),
            policy=None if isinstance(policy, str) else policy,
            mirror_once=mirror_once,
            merge_trees=merge_trees,
            device=str(getattr(model, "device", device)),
            verify=verify,
            rules_spec=rules if _by_name(rules) else None,
            cost_model_spec=model_name(model) if _by_name(cost_model) else None,
            jobs=jobs,
            ray=ray,
        )
    part = phases.partition_for(run, regions, dump_egraph)
    if verify and part is None:
        phases.reference_run(run)
    elif verify:
        run.reserve = phases.REGION_VERIFY_SHARE * budget.left()
    if part is None:
        phases.explore_extract_whole(run, dump_egraph)
    else:
        phases.explore_extract_regions(run, part)
    if verify:
        phases.verify_candidate(run)
    phases.decide(run)
    phases.confirm(run, confirm)
    return phases.result(run, time_limit)


def _optimize_functions(
    program: Any,
    *,
    rules: Any,
    node_limit: int | None,
    iter_limit: int,
    time_limit: float,
    cost_model: Any,
    device: str,
    verify: bool,
    policy: str | Any,
    confirm: Any,
    dump_egraph: Any,
    budget: Budget,
) -> OptimizeResult:
    """:func:`optimize` for a program made of functions: the function stage
    (:func:`tensat_py.def_phases.optimize_functions`) with the front end's rules and cost
    model; ``policy="astar"`` then searches each function's rewrites with A*
    (:func:`tensat_py.policies.astar.improve_ks_program`).

    Raises:
        ValueError: an option that does not apply to a program of functions (``confirm``:
            no runtime runs them; ``dump_egraph``: one e-graph per function; a cost model
            that prices tensor graphs, not terms).
    """
    from tensat_py.def_phases import optimize_functions
    from tensat_py.frontends import defaults_for

    fe = defaults_for(program)
    assert fe is not None and fe.functions is not None
    if confirm:
        raise ValueError(
            f"confirm: no runtime runs {fe.name} programs here; their speedups are predicted "
            f"by the {fe.default_cost_model} cost model (leave confirm off)"
        )
    if dump_egraph:
        raise ValueError(
            f"dump_egraph: a {fe.name} program is explored one function at a time, in one "
            "e-graph each; there is no single e-graph to write"
        )
    if isinstance(policy, str) and policy not in ("default", "astar"):
        raise ValueError(f"policy: {fe.name} programs take 'default' or 'astar', got {policy!r}")
    with budget.phase("setup"):
        model = _resolve_cost_model(program, cost_model, device)
        if not callable(getattr(model, "term_cost", None)):
            raise ValueError(
                f"cost_model: {model_name(model)!r} prices tensor graphs; {fe.name} programs "
                f"are priced term by term ({fe.default_cost_model!r})"
            )
        ruleset = load_rules(rules if rules is not None else fe.default_rules)
        fs = fe.functions(program)
    res = optimize_functions(
        fs,
        ruleset=ruleset,
        model=model,
        budget=budget,
        node_limit=node_limit,
        iter_limit=iter_limit,
        verify=verify,
        time_limit=time_limit,
    )
    if isinstance(policy, str) and policy == "astar":
        from tensat_py.policies.astar import improve_ks_program

        return improve_ks_program(program, res, verify=verify, rules=rules)
    return res
