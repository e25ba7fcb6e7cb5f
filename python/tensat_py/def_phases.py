"""The pipeline's function stage: a program made of functions (a Knossos ``.ks`` program),
optimised function by function through the pipeline's phases.

:func:`tensat_py.optimize` comes here when the input's front end reads it as functions
(:class:`tensat_py.frontends.knossos.functions.KsFunctions`). The program-level steps are
stages of this one driver, not a second pipeline inside the front end:

1. **call-graph order**: functions are optimised callees first (the condensation of the
   call graph, :mod:`networkx`, in reverse topological order; a recursive group in file
   order), so a caller's ``inline_call`` rules inline its callees as already optimised;
2. per function, **exploration** (the shared rule set plus the program's own rules,
   :meth:`~tensat_py.frontends.knossos.functions.KsFunctions.rules`), **extraction** under
   the cost model (``model.extract``: RLO's tree cost with the program's function costs as
   data, :class:`tensat_py.cost.rlo.RloCostModel`) and, where the front end offers it
   (``fs.shared``), a second extraction that counts a sub-term shared by several parts of
   the term once and binds it with a ``let``; exploration starts from the function as
   written and, where the front end offers it (``fs.normalised``), from the function with
   its ``let`` bindings substituted and its calls inlined (the binding rules' e-nodes otherwise
   fill the node limit before the arithmetic is reached);
3. the **hoisting policy** (``hoist=True``): the extracted and the original function with
   loop invariants hoisted; then two chains of at most ``rounds`` explorations, one from
   the cheapest candidate so far (until it finds nothing cheaper), one from the tree
   extraction's terms alone;
4. **verification**: the cheapest candidate that the front end's checker accepts (the
   Knossos evaluator on random arguments) is kept, never one costlier than the input;
5. the **time limit** is the pipeline's: each function's exploration gets at most
   :data:`DEF_TIME_LIMIT` seconds and its share of what is left.

The result is the usual :class:`tensat_py.result.OptimizeResult` (costs summed over the
functions, in the cost model's unit) with one :class:`DefResult` per function in ``defs``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from tensat_py.budget import Budget
from tensat_py.result import OptimizeResult, model_name
from tensat_py.verify import VerifyReport

__all__ = [
    "DEF_TIME_LIMIT",
    "DEF_NODE_LIMIT",
    "DefResult",
    "call_graph_order",
    "optimize_functions",
]

#: At most this many seconds of exploration per function (RLO-sized defs saturate in far
#: less; a function that does not gives the time to the others).
DEF_TIME_LIMIT = 8.0
#: Default e-node limit per function.
DEF_NODE_LIMIT = 20_000
#: A candidate must be at least this much cheaper than the input (cost units) to count.
EPS = 1e-9
#: Exceptions a front end raises for a function it cannot translate or check.
_SKIP = (ValueError,)


@dataclass
class DefResult:
    """What optimisation did to one function.

    Attributes:
        name: the function's name as written.
        cost_before: the cost model's cost of the original body (its unit: RLO units).
        cost_after: cost of the kept body (``<= cost_before``).
        status: ``"optimised"``, ``"unchanged"`` (nothing cheaper), ``"untranslatable"``
            (kept as is; ``message`` says why), ``"unpriced"`` (an operator the cost model
            does not price, such as ``tanh`` for RLO's; kept as is) or
            ``"failed-verification"`` (every cheaper candidate differed; kept as is).
        seconds: exploration, extraction and checking time.
        stats: the Rust core's exploration statistics.
        message: a note (``"verified"``, why not verified, why untranslatable).
    """

    name: str
    cost_before: float
    cost_after: float
    status: str
    seconds: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``tensat optimize --json`` lists under ``defs``."""
        return {
            "name": self.name,
            "cost_before": self.cost_before,
            "cost_after": self.cost_after,
            "status": self.status,
            "seconds": self.seconds,
            "message": self.message,
        }


def call_graph_order(fs: Any) -> list[int]:
    """``fs``'s functions, callees before callers (``fs.functions()``, ``fs.callees(i)``);
    the functions of one recursive group (a strongly connected component) in file order.

    >>> class Fs:
    ...     def functions(self): return [0, 1, 2]
    ...     def callees(self, i): return {0: {2}, 1: {1}, 2: set()}[i]
    >>> call_graph_order(Fs())
    [1, 2, 0]
    """
    import networkx as nx

    funcs = fs.functions()
    g = nx.DiGraph()
    g.add_nodes_from(funcs)
    for i in funcs:
        g.add_edges_from((i, j) for j in fs.callees(i) if j in g and j != i)
    cond = nx.condensation(g)
    # Kahn's order over the condensation with the smallest file position first, reversed
    # edges (callee -> caller), so that the order is deterministic and stable.
    members = cond.graph["mapping"]
    groups: dict[int, list[int]] = {}
    for i, c in members.items():
        groups.setdefault(c, []).append(i)
    rev = cond.reverse(copy=True)
    order = nx.lexicographical_topological_sort(rev, key=lambda c: min(groups[c]))
    return [i for c in order for i in sorted(groups[c])]


def optimize_functions(
    fs: Any,
    *,
    ruleset: Any,
    model: Any,
    budget: Budget,
    node_limit: int | None = None,
    iter_limit: int = 12,
    verify: bool = True,
    hoist: bool = True,
    rounds: int = 3,
    only: set[str] | None = None,
    time_limit: float | None = None,
) -> OptimizeResult:
    """Optimise every function of ``fs`` (or those named in ``only``) in call-graph order.

    Args:
        fs: the program's functions
            (:class:`tensat_py.frontends.knossos.functions.KsFunctions`).
        ruleset: the shared rules (the front end's default, or the user's), a ``RuleSet``.
        model: a cost model for terms: ``with_functions(costs)``, ``term_cost(nodes)`` and
            ``extract(egraph)`` (:class:`tensat_py.cost.rlo.RloCostModel`).
        budget: the wall-clock budget (the pipeline's ``time_limit``).
        node_limit: e-nodes per function (default :data:`DEF_NODE_LIMIT`).
        iter_limit: exploration iterations per function.
        verify: check candidates with the front end's checker; a candidate it rejects is
            not kept, one it cannot run is kept and reported as not verified.
        hoist: add the hoisting policy's candidates (see the module's docstring).
        rounds: most explorations of each of the two chains of restarts (with
            ``hoist``; see the module's docstring).
        only: optimise just these function names (the others are kept, not reported).
        time_limit: the ``time_limit`` to report (default the budget's limit).

    Returns:
        an :class:`OptimizeResult` whose ``graph`` is the optimised program, ``defs`` the
        functions' results and ``stats`` their summed exploration statistics.
    """
    from tensat_py import _core

    nodes_cap = node_limit if node_limit is not None else DEF_NODE_LIMIT
    with budget.phase("setup"):
        costs = fs.function_costs()
        model = model.with_functions(costs)
        order = [i for i in call_graph_order(fs) if only is None or fs.name(i) in only]
    results: dict[int, DefResult] = {}
    totals: dict[str, float] = {"enodes": 0, "eclasses": 0, "iterations": 0}
    explore_seconds = 0.0

    shared = getattr(fs, "shared", None)
    normalised = getattr(fs, "normalised", None)

    def saturate(
        i: int, nodes: list[Any], rules: Any, seconds: float
    ) -> tuple[dict[str, Any], list[tuple[float, Any]], list[tuple[float, Any]]]:
        """Explore from ``nodes``; the extracted terms as ``(cost, def)``: the cost model's
        extraction and the front end's shared-sub-term ones."""
        nonlocal explore_seconds
        eg = _core.EGraph(nodes)
        with budget.phase("exploration"):
            st = dict(
                eg.saturate(
                    rules,
                    k_multi=0,
                    node_limit=nodes_cap,
                    iter_limit=iter_limit,
                    time_limit=max(seconds, 0.01),
                    cycle_filter="none",
                )
            )
        explore_seconds += float(st.get("explore_seconds", 0.0))
        with budget.phase("extraction"):
            cost, term = model.extract(eg)
            found = [(cost, fs.raise_term(i, term))]
            ends = []
            for d in shared(i, eg, costs) if shared is not None else []:
                try:
                    ends.append((model.term_cost(fs.lower(d)), d))
                except _SKIP:
                    continue
        return st, found, ends

    def _rounds(
        i: int,
        cands: list[tuple[float, Any]],
        ends: list[tuple[float, Any]],
        rules: Any,
        seconds: float,
        start: float,
        before: float,
    ) -> None:
        """Explore again from the candidates so far, adding what each exploration finds
        (and its hoisted variants) to ``cands`` (the shared extraction's terms to
        ``ends``), within :data:`DEF_TIME_LIMIT` seconds of ``start``, along two chains of
        at most ``rounds`` starts each. The first starts each time from the cheapest
        candidate of any kind (a shared term's lets let the rules work on a sub-term once)
        and ends when an exploration finds nothing cheaper. The second starts from the
        cheapest tree-extracted term of its own chain not explored from yet (a tree term
        shows the rules every sub-term; the first chain can settle in a shared term's
        local minimum that this one walks around)."""
        tree = list(cands)
        tried: set[str] = set()
        for chain in ("any", "tree"):
            for _ in range(rounds):
                if _free(cands + ends) or budget.left() <= 0:
                    return
                if time.perf_counter() - start > DEF_TIME_LIMIT:
                    return
                pool = cands + ends if chain == "any" else tree
                fresh = [(c, d) for c, d in pool if repr(d.body) not in tried]
                if not fresh:
                    break
                low, best = min(fresh, key=lambda c: c[0])
                tried.add(repr(best.body))
                try:
                    _, found, more = saturate(i, fs.lower(best), rules, seconds)
                except _SKIP:
                    break
                for c2, d2 in found:
                    new = [(c2, d2)] if c2 < before - EPS else []
                    new += _hoisted(fs, model, [d2], before)
                    cands += new
                    if chain == "tree":
                        tree += new
                for c2, d2 in more:
                    if c2 < before - EPS:
                        ends.append((c2, d2))
                    ends += _hoisted(fs, model, [d2], before)
                if chain == "any" and min(c for c, _ in cands + ends) >= low - EPS:
                    break

    for k, i in enumerate(order):
        start = time.perf_counter()
        name = fs.name(i)
        orig = fs.current(i)
        try:
            nodes = fs.lower(orig)
        except _SKIP as e:
            results[i] = DefResult(name, 0.0, 0.0, "untranslatable", message=str(e))
            continue
        before = model.term_cost(nodes)
        if not math.isfinite(before):
            results[i] = DefResult(
                name, 0.0, 0.0, "unpriced", message="uses an operator the cost model does not price"
            )
            continue
        share = max(budget.left(), 0.0) / max(len(order) - k, 1)
        seconds = min(DEF_TIME_LIMIT, share)
        own = fs.rules()
        rules = _core.RuleSet.union([ruleset, own]) if own is not None else ruleset
        stats, found, more = saturate(i, nodes, rules, seconds)
        for key in totals:
            totals[key] += float(stats.get(key, 0))
        cands: list[tuple[float, Any]] = [(c, d) for c, d in found if c < before - EPS]
        ends: list[tuple[float, Any]] = [(c, d) for c, d in more if c < before - EPS]
        # A second start: the def with its lets substituted and its calls inlined (the
        # front end's `normalised`), where exploration reaches the arithmetic at once.
        flat = normalised(orig) if normalised is not None and not _free(cands + ends) else None
        if flat is not None and budget.left() > 0:
            try:
                _, found, more = saturate(i, fs.lower(flat), rules, seconds / 2)
                cands += [(c, d) for c, d in found if c < before - EPS]
                ends += [(c, d) for c, d in more if c < before - EPS]
            except _SKIP:
                pass
        if hoist:
            ends += _hoisted(fs, model, [d for _, d in ends], before)
            cands += _hoisted(fs, model, [orig] + [d for _, d in cands], before)
            _rounds(i, cands, ends, rules, seconds / 2, start, before)
        cands += ends
        cands.sort(key=lambda c: c[0])
        if not cands:
            results[i] = DefResult(
                name, before, before, "unchanged", time.perf_counter() - start, stats
            )
            continue
        chosen, message, failed = None, "not verified: verification off", ""
        with budget.phase("verification"):
            for cost_c, cand in cands:
                if verify:
                    ok, message = fs.check(i, cand)
                    if not ok:
                        failed = failed or message
                        continue
                chosen = (cost_c, cand)
                break
        seconds_used = time.perf_counter() - start
        if chosen is None:
            results[i] = DefResult(
                name, before, before, "failed-verification", seconds_used, stats, failed
            )
            continue
        fs.replace(i, chosen[1])
        results[i] = DefResult(name, before, chosen[0], "optimised", seconds_used, stats, message)
    defs = [results[i] for i in fs.functions() if i in results]
    return _result(fs, defs, model, budget, totals, explore_seconds, verify, time_limit)


def _free(cands: list[tuple[float, Any]]) -> bool:
    """Whether a candidate costs nothing (no exploration can find a cheaper one)."""
    return any(c <= EPS for c, _ in cands)


def _hoisted(fs: Any, model: Any, bases: list[Any], before: float) -> list[tuple[float, Any]]:
    """The hoisting policy's variants of ``bases`` cheaper than ``before``, priced."""
    out: list[tuple[float, Any]] = []
    for b in bases:
        for h in fs.variants(b):
            try:
                c = model.term_cost(fs.lower(h))
            except _SKIP:
                continue
            if c < before - EPS:
                out.append((c, h))
    return out


def _result(
    fs: Any,
    defs: list[DefResult],
    model: Any,
    budget: Budget,
    totals: dict[str, float],
    explore_seconds: float,
    verify: bool,
    time_limit: float | None,
) -> OptimizeResult:
    """The usual result of the function stage (see :func:`optimize_functions`)."""
    changed = [d for d in defs if d.status == "optimised"]
    failed = [d.name for d in defs if d.status == "failed-verification"]
    unverified = [d.name for d in changed if d.message != "verified"]
    before = sum(d.cost_before for d in defs)
    after = sum(d.cost_after for d in defs)
    if changed:
        status, message = "greedy", f"{len(changed)} of {len(defs)} functions optimised"
    elif failed:
        status = "fallback-unverified"
        message = f"every cheaper candidate of {', '.join(failed)} failed verification"
    else:
        status, message = "fallback-not-cheaper", "no function has a cheaper body"
    report = None
    if verify and (changed or failed):
        report = VerifyReport(
            max_abs_error=math.nan,
            max_rel_error=math.nan,
            passed=not failed and not unverified,
            message=(
                "ok"
                if not failed and not unverified
                else "; ".join(
                    [f"failed: {', '.join(failed)}"] * bool(failed)
                    + [f"not verified: {', '.join(unverified)}"] * bool(unverified)
                )
            ),
            runner=fs.runner,
        )
    total = budget.elapsed()
    phases = dict(budget.seconds)
    counts: dict[str, int] = {}
    for d in defs:
        counts[d.status] = counts.get(d.status, 0) + 1
    stats: dict[str, Any] = {
        "enodes": int(totals["enodes"]),
        "eclasses": int(totals["eclasses"]),
        "iterations": int(totals["iterations"]),
        "stop_reason": "per function",
        "filtered_enodes": 0,
        "explore_seconds": explore_seconds,
        "extract_seconds": phases.get("extraction", 0.0),
        "verify_seconds": phases.get("verification", 0.0),
        "total_seconds": total,
        "time_limit": float(time_limit if time_limit is not None else budget.limit),
        "phase_seconds": phases,
        "phase_share": {k: (v / total if total > 0 else 0.0) for k, v in phases.items()},
        "extractor": "tree cost (the cost model's own extraction)",
        "functions": counts,
        "verified": [d.name for d in changed if d.message == "verified"],
        "unverified": unverified,
        "failed": failed,
    }
    return OptimizeResult(
        graph=fs.program(),
        cost_before=before,
        cost_after=after,
        extraction_status=status,
        stats=stats,
        verify=report,
        message=message,
        candidate=fs.program(),
        candidate_cost=after,
        candidate_status="greedy",
        cost_model=model_name(model),
        device=str(getattr(model, "device", "")),
        unit=str(getattr(model, "unit", "seconds")),
        defs=defs,
    )
