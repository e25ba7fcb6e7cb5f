"""``optimize(policy="learned" | "astar")``: the named policies inside the pipeline.

``"learned"`` explores with :class:`~tensat_py.policies.multi.LearnedMultiPolicy` (the
shipped classifier) and extracts as usual; then, so that a learned policy never makes the
result worse than the default policy at the same budget, it also runs the default
pipeline and keeps the cheaper program, saying so in ``message`` and
``stats["policy_fallback"]`` (``stats["policy_seconds"]`` is the learned run alone,
``stats["default_seconds"]`` the guard's).

``"astar"`` searches rewrite sequences of the program's term
(:func:`tensat_py.policies.astar.astar`, one rewrite at a time, no e-graph) under the cost
model; for tensor programs the value function is the untrained one (the learned one is
trained on Knossos terms), a budget of 300 evaluations and 8 rewrites. It too falls back to
the default pipeline when that is cheaper.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tensat_py.graph import Graph

__all__ = ["optimize_with_policy", "astar_graph"]


def _resolve(graph: Graph, kw: Mapping[str, Any]) -> tuple[Any, Any]:
    from tensat_py.cost import get_cost_model
    from tensat_py.frontends import defaults_for
    from tensat_py.pipeline import load_rules

    fe = defaults_for(graph)
    rules = kw.get("rules") or (fe.default_rules if fe is not None else "taso")
    cm = kw.get("cost_model") or (fe.default_cost_model if fe is not None else "roofline")
    return load_rules(rules), get_cost_model(cm, kw.get("device", "t4"))


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


def optimize_with_policy(graph: Graph, policy: str, kw: dict[str, Any]) -> Any:
    """``optimize(graph, policy=policy, **kw)`` for ``"learned"`` and ``"astar"``.

    Raises:
        ValueError: an unknown policy name.
        ImportError: the ``learn`` extra is missing (``"learned"``).
    """
    from tensat_py.pipeline import optimize
    from tensat_py.policies import POLICIES

    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    ruleset, model = _resolve(graph, kw)
    start = time.perf_counter()
    if policy == "learned":
        from tensat_py.policies.multi import LearnedMultiPolicy

        pol = LearnedMultiPolicy.load().bind(ruleset, model, kw.get("k_multi", 1))
        res = optimize(graph, policy=pol, **kw)
        res.stats["policy_admitted"] = pol.admitted
        res.stats["policy_offered"] = pol.offered
    else:
        from tensat_py.verify import verify as verify_graphs

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
