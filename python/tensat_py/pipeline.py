"""The optimisation pipeline: Graph -> e-graph -> saturation -> extraction -> Graph.

This is the flow of DESIGN.md and the Tensat paper (MLSys 2021): the program is loaded into
the Rust e-graph, explored with the rules of a rule file (single-pattern rules every
iteration, multi-pattern rules in the first ``k_multi`` iterations, cycle filtering), every
e-node is priced by the cost model, and the cheapest program is extracted (greedy or ILP).
The result is never costlier than the input and, with ``verify=True``, always checked
numerically against it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tensat_py import _core
from tensat_py.cost import get_cost_model
from tensat_py.egraph import ExtractionProblem, save_json
from tensat_py.extract import extract
from tensat_py.graph import Graph
from tensat_py.verify import VerifyReport
from tensat_py.verify import verify as verify_graphs

__all__ = ["OptimizeResult", "optimize", "load_rules", "RULES_DIR"]

RULES_DIR = Path(__file__).parent / "rules"
"""Folder of the shipped rule files (``rules/`` in the repository)."""


@dataclass
class OptimizeResult:
    """What :func:`optimize` found.

    Attributes:
        graph: the optimised program (the input itself when nothing cheaper was found or
            the candidate failed verification).
        cost_before: cost-model cost of the input, seconds.
        cost_after: cost-model cost of ``graph``, seconds (``<= cost_before``).
        extraction_status: ``"optimal"``, ``"feasible"``, ``"greedy"``,
            ``"fallback-greedy"`` or ``"fallback-input"`` (the input was kept: the extracted
            program was not cheaper, or failed verification; see ``message``).
        stats: exploration statistics from the Rust core (``enodes``, ``eclasses``,
            ``iterations``, ``stop_reason``, ``filtered_enodes``, ``explore_seconds``, ...)
            plus ``extract_seconds`` and ``extraction_message``.
        verify: the numerical comparison of ``graph`` with the input, or ``None`` when
            verification is off.
        message: a human-readable note about fallbacks.
    """

    graph: Graph
    cost_before: float
    cost_after: float
    extraction_status: str
    stats: dict[str, Any] = field(default_factory=dict)
    verify: VerifyReport | None = None
    message: str = ""

    @property
    def speedup(self) -> float:
        """``cost_before / cost_after`` (1.0 when nothing changed)."""
        return self.cost_before / self.cost_after if self.cost_after > 0 else 1.0

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` object."""
        keys = (
            "enodes",
            "eclasses",
            "iterations",
            "stop_reason",
            "filtered_enodes",
            "explore_seconds",
            "extract_seconds",
        )
        return {
            "cost_before": self.cost_before,
            "cost_after": self.cost_after,
            "extraction_status": self.extraction_status,
            "stats": {k: self.stats.get(k) for k in keys},
            "verify": None
            if self.verify is None
            else {
                "max_abs_error": self.verify.max_abs_error,
                "max_rel_error": self.verify.max_rel_error,
            },
        }


@lru_cache(maxsize=16)
def _load_rules_cached(path: str, mtime: float) -> _core.RuleSet:
    return _core.RuleSet.load(path)


def load_rules(
    rules: str | Path | _core.RuleSet | Sequence[str | Path | _core.RuleSet],
) -> _core.RuleSet:
    """Resolves a rule set.

    Args:
        rules: a shipped rule file's name (``"taso"`` for ``rules/taso.rules``), a path to a
            ``.rules`` file, an already parsed ``RuleSet``, several of them joined by ``+``
            (``"taso+tensor"``) or a sequence of them (their rules in order).

    Raises:
        FileNotFoundError: when no such rule file exists (the message lists the shipped ones).
        ValueError: ``file:line:col: message`` on a syntax error; two files sharing a rule
            name.
    """
    if isinstance(rules, _core.RuleSet):
        return rules
    if isinstance(rules, str) and "+" in rules and not Path(rules).exists():
        rules = [r for r in rules.split("+") if r]
    if not isinstance(rules, str | Path):
        sets = [load_rules(r) for r in rules]
        if not sets:
            raise ValueError("no rule files given")
        return sets[0] if len(sets) == 1 else _core.RuleSet.union(sets)
    path = Path(rules)
    if not path.suffix and not path.exists():
        path = RULES_DIR / f"{rules}.rules"
    if not path.is_file():
        shipped = sorted(p.stem for p in RULES_DIR.glob("*.rules"))
        raise FileNotFoundError(f"no rule file {str(rules)!r} (shipped: {', '.join(shipped)})")
    return _load_rules_cached(str(path.resolve()), path.stat().st_mtime)


def optimize(
    graph: Graph,
    *,
    rules: str | Path | _core.RuleSet | Sequence[str | Path | _core.RuleSet] | None = None,
    k_multi: int = 1,
    node_limit: int = 50_000,
    iter_limit: int = 15,
    time_limit: float = 60.0,
    cycle_filter: str = "efficient",
    extractor: str = "ilp",
    solver: str = "cbc",
    order_vars: str = "real",
    cost_model: str | None = None,
    device: str = "t4",
    verify: bool = True,
    dump_egraph: str | Path | None = None,
    policy: str | Any = "default",
) -> OptimizeResult:
    """Optimises a tensor program by equality saturation and extraction.

    Args:
        graph: the program.
        rules: rule file name (``"taso"``), path, parsed ``RuleSet``, or several
            (``"taso+tensor"``, a list); see :func:`load_rules`. Default: the rules of
            the front end that loaded ``graph`` (``Graph.meta["frontend"]``,
            :mod:`tensat_py.frontends`), else ``"taso"``.
        k_multi: iterations in which multi-pattern rules run (Tensat's k_multi; default 1).
        node_limit: stop exploring at this many e-nodes (default 50,000).
        iter_limit: maximum exploration iterations (default 15).
        time_limit: exploration limit in seconds; the ILP gets the same budget.
        cycle_filter: ``"efficient"`` (default), ``"vanilla"`` or ``"none"`` (the ILP then
            carries the cycle constraints).
        extractor: ``"ilp"`` (default), ``"greedy"`` (tree cost) or ``"greedy-dag"``.
        solver: ILP solver, ``"cbc"`` (default) or ``"highs"``.
        order_vars: with ``cycle_filter="none"``, the ILP's topological order variables:
            ``"real"`` (default) or ``"int"`` (the paper's Table 4 compares both).
        cost_model: ``"roofline"``; default: the front end's (``"roofline"`` for tensor
            programs).
        device: cost-model device preset: ``"t4"`` (default), ``"a100"``, ``"h100"``, ``"cpu"``.
        verify: run both programs in float64 on the same random inputs and weights and keep
            the optimised one only if its outputs agree (``tensat_py.verify``'s float64
            tolerance, far tighter than the 1e-4 float32 bound).
        dump_egraph: write the saturated e-graph as egraph-serialize JSON to this path.
        policy: rule choice (:mod:`tensat_py.policies`): ``"default"`` (Tensat's schedule),
            ``"learned"`` (learned multi-pattern matches past ``k_multi``; never worse than
            the default, which it also runs and falls back to, saying so), ``"astar"``
            (A* over rewrite sequences with the learned value function), or a policy object.

    Returns:
        an :class:`OptimizeResult`; ``cost_after <= cost_before`` always.

    Raises:
        ValueError: on an ill-typed graph, a bad option, or a rule file syntax error.
        FileNotFoundError: when the rule file does not exist.
    """
    if isinstance(policy, str) and policy != "default":
        kw = {k: v for k, v in locals().items() if k not in ("graph", "policy")}
        from tensat_py.policies.run import optimize_with_policy

        return optimize_with_policy(graph, policy, kw)
    from tensat_py.frontends import defaults_for

    fe = defaults_for(graph)
    if rules is None:
        rules = fe.default_rules if fe is not None else "taso"
    if cost_model is None:
        cost_model = fe.default_cost_model if fe is not None else "roofline"
    model = get_cost_model(cost_model, device)
    ruleset = load_rules(rules)
    cost_before = model.graph_cost(graph)

    egraph = _core.EGraph(graph.to_flat())
    stats: dict[str, Any] = dict(
        egraph.saturate(
            ruleset,
            k_multi=k_multi,
            node_limit=node_limit,
            iter_limit=iter_limit,
            time_limit=time_limit,
            cycle_filter=cycle_filter,
            policy=None if isinstance(policy, str) else policy,
        )
    )
    start = time.perf_counter()
    export = egraph.export()
    costs = model.costs_for_export(export)
    problem = ExtractionProblem.from_export(export, costs)
    if dump_egraph is not None:
        save_json(problem, dump_egraph)
    result = extract(
        problem,
        extractor=extractor,
        solver=solver,
        time_limit=time_limit,
        cycle_constraints="order" if cycle_filter == "none" and extractor == "ilp" else None,
        order_vars=order_vars,
    )
    candidate = Graph.from_choices(export, result.choices)
    candidate.meta = dict(graph.meta)  # front-end data (opaque payloads, source model)
    stats["extract_seconds"] = time.perf_counter() - start
    stats["extraction_message"] = result.message

    status, message = result.status, result.message
    best = candidate
    cost_after = model.graph_cost(candidate)
    if cost_after > cost_before:
        best, cost_after = graph, cost_before
        status = "fallback-input"
        message = f"extracted program ({result.status}) is not cheaper than the input; kept input"
    report = None
    if verify:
        report = verify_graphs(graph, best, seed=0, dtype="float64")
        if not report.passed and best is not graph:
            message = (
                f"optimised program failed verification (max relative error "
                f"{report.max_rel_error:.3g}); kept input"
            )
            best, cost_after, status = graph, cost_before, "fallback-input"
            report = verify_graphs(graph, best, seed=0, dtype="float64")
    return OptimizeResult(
        graph=best,
        cost_before=cost_before,
        cost_after=cost_after,
        extraction_status=status,
        stats=stats,
        verify=report,
        message=message,
    )
