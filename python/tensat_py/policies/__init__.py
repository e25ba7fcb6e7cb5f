"""Rule-choice policies: which rules, and which of their matches, exploration applies.

Tensat (Yang et al., MLSys 2021) applies every single-pattern rule in every iteration and
the multi-pattern rules only in the first ``k_multi`` iterations, because their matches
blow the e-graph up; its section 7 proposes learning which multi-pattern rules to apply.
Knossos RLO learns a value function and searches rewrite sequences with A*; PolyGym and
CompilerGym expose optimisation as an environment whose actions are independent of the
program. This package is that layer, on top of the Rust core's policy hooks
(``rust/src/saturate.rs``: ``Policy``, ``Explorer::run_with``):

* a **policy** is any object with (all optional) ``search_multi(iteration, k_multi) ->
  bool`` (are the multi-pattern rules searched in this iteration), ``multi_rules(iteration)
  -> None | list[int]`` (which of them, by index in the rule set; ``None``: all),
  ``selects(iteration) -> bool`` (does the policy choose this iteration's matches),
  ``wants_export(iteration) -> bool`` (does :meth:`select` need the e-graph) and
  ``select(view) -> None | list[bool]`` (one flag per match found: apply it or not).
  ``view`` holds ``iteration``, ``enodes``, ``eclasses``, ``rules`` (the rule index of
  each match), ``classes`` (the e-class each source matched), ``substs``
  (``[(variable, e-class)]``) and ``export`` (the e-graph as ``EGraph.export()`` gives it,
  when asked for). Pass it as ``_core.EGraph.saturate(..., policy=...)``.
* :class:`DefaultPolicy` is Tensat's schedule; ``optimize(policy="default")`` is exactly
  ``optimize()`` (the core runs without hooks).
* :class:`RuleSubset` applies the matches of some rules only (the Gymnasium environment's
  action, :mod:`tensat_py.policies.env`).
* ``"learned"`` (:mod:`tensat_py.policies.staged`) runs Tensat's schedule, then one more
  multi-pattern iteration on the extracted program, searching only the multi-pattern rules
  that paid off in training on the zoo (:class:`~tensat_py.policies.staged.StagedMultiPolicy`;
  features and model in :mod:`tensat_py.policies.multi`, whose
  :class:`~tensat_py.policies.multi.LearnedMultiPolicy` is the earlier in-window design).
* ``"astar"`` (:mod:`tensat_py.policies.astar`) searches rewrite sequences on terms, one
  rewrite at a time, guided by a learned value function (RLO's setting).

The learned parts need the optional extra ``pip install "tensat-py[learn]"`` (LightGBM,
Gymnasium); everything else here is NumPy only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DefaultPolicy",
    "Policy",
    "POLICIES",
    "RuleSubset",
    "Term",
    "best_program",
    "get_policy",
]

#: A term: flat node list, ``(op, children)`` per node, root last (``EGraph``'s input);
#: what A* (:mod:`tensat_py.policies.astar`) and RLO's moves
#: (:mod:`tensat_py.policies.binding`) search over.
Term = tuple[tuple[str, tuple[int, ...]], ...]

#: Names accepted by ``optimize(policy=...)`` and ``tensat optimize --policy``.
POLICIES = ("default", "learned", "astar")


@runtime_checkable
class Policy(Protocol):
    """What the Rust core calls each iteration (each method optional; see the module)."""

    def select(self, view: Mapping[str, Any]) -> list[bool] | None:
        """One flag per match of ``view``: apply it or not; ``None`` applies all."""
        ...


class DefaultPolicy:
    """Tensat's schedule: every single-pattern match, multi-pattern rules in the first
    ``k_multi`` iterations. Exploring with it is bit for bit exploring without a policy."""

    name = "default"

    def search_multi(self, iteration: int, k_multi: int) -> bool:
        """Multi-pattern rules in the first ``k_multi`` iterations."""
        return iteration < k_multi

    def selects(self, iteration: int) -> bool:
        """Never chooses: all matches apply."""
        return False

    def select(self, view: Mapping[str, Any]) -> list[bool] | None:
        """Applies everything."""
        return None


class RuleSubset:
    """Applies only the matches of the rules in ``rules`` (indices in the rule set); the
    multi-pattern rules are searched in every iteration when ``multi`` is true, else in the
    first ``k_multi`` ones. Records the matches found per rule in :attr:`found`."""

    def __init__(self, rules: Iterable[int], multi: bool = False) -> None:
        self.rules = set(rules)
        self.multi = multi
        self.found: dict[int, int] = {}

    def search_multi(self, iteration: int, k_multi: int) -> bool:
        return self.multi or iteration < k_multi

    def selects(self, iteration: int) -> bool:
        return True

    def select(self, view: Mapping[str, Any]) -> list[bool]:
        self.found = {}
        for r in view["rules"]:
            self.found[r] = self.found.get(r, 0) + 1
        return [r in self.rules for r in view["rules"]]


def best_program(export: Mapping[str, Any], costs: list[float]) -> tuple[float, set[int]]:
    """The current best program of an exported e-graph by greedy DAG extraction (Rust):
    its DAG cost (unit of ``costs``, seconds for the tensor cost models) and the dense
    e-classes it uses. ``costs`` has one entry per e-node (``cost_model.costs_for_export``).
    """
    cost, used, _ = best_choice(export, costs)
    return cost, used


def best_choice(export: Mapping[str, Any], costs: list[float]) -> tuple[float, set[int], list[int]]:
    """As :func:`best_program`, plus the chosen e-node of every dense e-class (-1 where
    none is reached)."""
    from tensat_py import _core

    n = len(export["node_op"])
    filtered = set(export.get("filtered", ()))
    forbidden = [i in filtered for i in range(n)]
    roots = [int(export["root"])]
    choice = _core.greedy_dag(
        export["node_eclass"],
        export["node_children"],
        costs,
        int(export["num_classes"]),
        roots,
        forbidden,
    )
    cost = _core.dag_cost(
        export["node_eclass"],
        export["node_children"],
        costs,
        int(export["num_classes"]),
        roots,
        choice,
    )
    used: set[int] = set()
    stack = list(roots)
    while stack:
        c = stack.pop()
        if c in used or choice[c] < 0:
            continue
        used.add(c)
        stack.extend(export["node_children"][choice[c]])
    return cost, used, list(choice)


def get_policy(name: str | Any, **options: Any) -> Any:
    """A policy by name (``"default"``, ``"learned"``) or the object itself.

    ``"learned"`` gives the second stage's policy
    (:class:`~tensat_py.policies.staged.StagedMultiPolicy`, the shipped model), for
    :func:`~tensat_py.policies.staged.refine` on an extracted program;
    ``optimize(policy="learned")`` runs both stages. ``"astar"`` is not an e-graph
    policy: :func:`tensat_py.optimize` routes it to
    :func:`tensat_py.policies.astar.optimize_term`.

    Raises:
        ValueError: an unknown name.
        ImportError: ``"learned"`` without the ``learn`` extra (LightGBM).
    """
    if not isinstance(name, str):
        return name
    if name == "default":
        return DefaultPolicy()
    if name == "learned":
        from tensat_py.policies.staged import StagedMultiPolicy

        return StagedMultiPolicy.load(**options)
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
