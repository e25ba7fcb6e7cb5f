"""``optimize(policy="learned" | "astar")``: the named policies inside the pipeline.

``"learned"`` is the staged policy (:mod:`tensat_py.policies.staged`): the default pipeline
first (Tensat's schedule at ``k_multi``), then one learned multi-pattern iteration on the
program it extracted (:class:`~tensat_py.policies.staged.StagedMultiPolicy`, the shipped
classifier) and, where that admitted matches, an extraction again. The second stage's
program replaces the first's only when it is cheaper, passes the pipeline's gates (the
pipeline runs again on the first stage's program with the second stage's policy:
``min_gain``, measured confirmation) and, with verification on, is verified against the
input (float64, as the pipeline verifies), so the result is never worse than the default
policy's; otherwise
``message`` says that the default's program was kept and ``stats["policy_fallback"]`` is
true. ``stats["policy_admitted"]`` / ``["policy_offered"]`` count the second stage's
matches, ``stats["policy_seconds"]`` is the second stage's time and
``stats["default_seconds"]`` the first's.

``"astar"`` searches rewrite sequences of the program's term
(:func:`tensat_py.policies.astar.astar`, one rewrite at a time, no e-graph) under the cost
model; for tensor programs the value function is the untrained one (the learned one is
trained on Knossos terms), a budget of 300 evaluations and 8 rewrites. It falls back to
the default pipeline (run as well) when that is cheaper.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from tensat_py.graph import Graph

__all__ = ["optimize_with_policy", "astar_graph"]


def _resolve(graph: Graph, kw: Mapping[str, Any]) -> tuple[Any, Any]:
    """The rules and the cost model the policy searches with: those the pipeline resolves
    for ``graph`` (the front end's, on the front end's device: ``xla`` for HLO on the
    CPU), so that the policy's costs and the default pipeline's compare."""
    from tensat_py.frontends import defaults_for
    from tensat_py.pipeline import _resolve_cost_model, _resolve_device
    from tensat_py.rule_files import load_rules

    fe = defaults_for(graph)
    rules = kw.get("rules") or (fe.default_rules if fe is not None else "taso")
    device = _resolve_device(graph, kw.get("device"))
    return load_rules(rules), _resolve_cost_model(graph, kw.get("cost_model"), device)


def astar_graph(
    graph: Graph, ruleset: Any, model: Any, budget: int = 300, depth: int = 8
) -> tuple[Graph, float, Any]:
    """A* (untrained value function) on a tensor program's term: the best program found,
    its cost (seconds) and the :class:`~tensat_py.policies.astar.AStarResult`."""
    from tensat_py import _core
    from tensat_py.policies.astar import ZeroValue, as_term, astar

    def to_graph(term: Any) -> Graph:
        eg = _core.EGraph(list(term))
        ex = eg.export()
        choice = [-1] * int(ex["num_classes"])
        for i, c in enumerate(ex["node_eclass"]):
            if choice[c] < 0:
                choice[c] = i
        g = Graph.from_choices(ex, choice)
        g.meta = dict(graph.meta)
        return g

    cache: dict[Any, float] = {}

    def cost(term: Any) -> float:
        if term not in cache:
            cache[term] = model.graph_cost(to_graph(term))
        return cache[term]

    res = astar(as_term(graph.to_flat()), ruleset, cost, ZeroValue(), depth=depth, budget=budget)
    return to_graph(res.best), res.best_cost, res


def optimize_with_policy(
    graph: Graph, policy: str, kw: dict[str, Any], optimize: Callable[..., Any]
) -> Any:
    """``optimize(graph, policy=policy, **kw)`` for ``"learned"`` and ``"astar"``;
    ``optimize`` is the pipeline's default policy (:func:`tensat_py.optimize`), which the
    policy runs beside its own search and falls back to.

    Raises:
        ValueError: an unknown policy name.
        ImportError: the ``learn`` extra is missing (``"learned"``).
    """
    from tensat_py.policies import POLICIES

    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    ruleset, model = _resolve(graph, kw)
    if policy == "learned":
        return _staged(graph, ruleset, model, kw, optimize)
    from tensat_py.verify import verify as verify_graphs

    start = time.perf_counter()
    g, c, found = astar_graph(graph, ruleset, model)
    res = optimize(graph, **{**kw, "iter_limit": 0, "verify": False})
    if c < res.cost_after:
        res.graph, res.cost_after, res.extraction_status = g, c, "astar"
        res.stats["astar_evaluations"] = found.evaluations
        if kw.get("verify", True):
            res.verify = verify_graphs(graph, g, seed=0, dtype="float64")
    policy_seconds = time.perf_counter() - start
    start = time.perf_counter()
    base = optimize(graph, **kw)
    default_seconds = time.perf_counter() - start
    fallback = base.cost_after < res.cost_after - 1e-15 * max(base.cost_after, 1.0)
    if fallback:
        base.message = (
            f"policy {policy!r} found cost {res.cost_after:.6g}, the default policy "
            f"{base.cost_after:.6g}: kept the default's program"
            + (f"; {base.message}" if base.message else "")
        )
        res = base
    res.stats["policy"] = policy
    res.stats["policy_fallback"] = fallback
    res.stats["policy_seconds"] = policy_seconds
    res.stats["default_seconds"] = default_seconds
    return res


def _staged(
    graph: Graph, ruleset: Any, model: Any, kw: dict[str, Any], optimize: Callable[..., Any]
) -> Any:
    """``optimize(graph, policy="learned", **kw)``: the default pipeline, then the learned
    second stage on its program (see the module)."""
    from tensat_py.policies.staged import StagedMultiPolicy, refine
    from tensat_py.verify import verify as verify_graphs

    pol = StagedMultiPolicy.load().bind(ruleset, model)  # fails before any work without LightGBM
    # The learned second stage is the multi-pattern iteration past the first: the first
    # stage runs Tensat's schedule at k_multi=1 unless k_multi is given.
    kw = {**kw, "k_multi": 1 if kw.get("k_multi") is None else kw["k_multi"]}
    start = time.perf_counter()
    res = optimize(graph, **kw)
    default_seconds = time.perf_counter() - start
    left = float(kw.get("time_limit", 60.0)) - default_seconds
    start = time.perf_counter()
    ref = refine(
        res.graph,
        ruleset,
        model,
        pol,
        extractor=kw.get("extractor", "ilp"),
        solver=kw.get("solver", "cbc"),
        time_limit=max(left, 1.0),
        program_cost=res.cost_after,
    )
    kept, why = False, "found no cheaper program"
    if ref.improved:
        # The same gates as any candidate (min_gain, measured confirmation): the pipeline
        # again, on the first stage's program, with the second stage's policy; then one
        # verification, against the input (the gated run's own, against the first stage's
        # program, would run both programs once more: NasNet-A's 2.7 s).
        second = optimize(
            res.graph,
            **{
                **kw,
                "policy": StagedMultiPolicy(pol.model).bind(ruleset, model),
                "k_multi": 0,
                "iter_limit": 1,
                "time_limit": max(left - ref.seconds, 1.0),
                "verify": False,
            },
        )
        kept = second.cost_after < res.cost_after and not second.extraction_status.startswith(
            "fallback"
        )
        why = f"its program was not kept ({second.message or second.extraction_status})"
        if kept and kw.get("verify", True):
            report = verify_graphs(graph, second.graph, seed=0, dtype="float64")
            kept, why = report.passed, "its program failed verification against the input"
            second.verify = report
        if kept:
            res.graph, res.candidate, res.cost_after = second.graph, second.graph, second.cost_after
            res.candidate_cost, res.candidate_status = second.cost_after, second.extraction_status
            res.extraction_status, res.message, res.verify = (
                second.extraction_status,
                "",
                second.verify,
            )
    if not kept:
        res.message = (
            f"policy 'learned': the second stage admitted {ref.admitted} of {ref.offered} "
            f"multi-pattern matches and {why}; kept the default's program"
            + (f"; {res.message}" if res.message else "")
        )
    res.stats["policy"] = "learned"
    res.stats["policy_fallback"] = not kept
    res.stats["policy_admitted"] = ref.admitted
    res.stats["policy_offered"] = ref.offered
    res.stats["policy_seconds"] = time.perf_counter() - start
    res.stats["default_seconds"] = default_seconds
    if "total_seconds" in res.stats:
        res.stats["total_seconds"] += res.stats["policy_seconds"]
    return res
