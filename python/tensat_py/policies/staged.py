"""Staged learned multi-pattern rule choice: one learned multi-pattern iteration on the
program that Tensat at ``k_multi`` extracted (issue 16; Tensat section 7).

Tensat runs multi-pattern rules only in the first ``k_multi`` iterations, because at
``k_multi=2`` the e-graph and its ILP blow up. The gain of a second multi-pattern
iteration mostly comes from merging a third operator into a pair that the first iteration
merged (BERT's three projections, SqueezeNet's expand convolutions after enlarging the
1x1 kernel). In the saturated e-graph, the matches that do this are hidden among hundreds
of look-alikes over equivalent forms (``bench/guidance.md`` counts them); in the program
that the ILP extracted, only the merges it chose are left. So the learned policy works in
two stages:

1. Tensat's schedule at ``k_multi`` (the default pipeline), which gives the program ``P1``;
2. a new e-graph of ``P1`` and one more multi-pattern iteration in it, in which
   :class:`StagedMultiPolicy` searches only the multi-pattern rules whose matches were
   useful in training (the rule prior above 0: the learned choice of multi-pattern rules
   that Tensat's section 7 proposes) and admits their matches that add e-nodes, the
   ``max_admit`` that a LightGBM classifier scores likeliest (single-pattern matches are
   not applied in that iteration); when it admitted any, the e-graph is extracted again
   (:func:`refine`).

The second stage replaces ``P1`` only when it is cheaper, so the result is never worse than
the default policy's. Features, labels and the model file format are those of
:mod:`tensat_py.policies.multi` (:func:`~tensat_py.policies.multi.match_features`,
:func:`~tensat_py.policies.multi.label_matches`,
:class:`~tensat_py.policies.multi.MultiModel`); the labels come from the second stage
with every candidate match admitted (:class:`StagedRecorder`). The shipped model
``staged_policy.json`` is trained on the eight zoo models (``python bench/guidance.py
--train-only``); ``bench/guidance.py`` evaluates it leave-one-model-out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensat_py.graph import Graph
from tensat_py.policies.multi import (
    MultiModel,
    RecordingPolicy,
    _multi_rules,
    likeliest,
    match_features,
    offers_new,
)

__all__ = [
    "STAGED_MODEL_PATH",
    "Refinement",
    "StagedMultiPolicy",
    "StagedRecorder",
    "refine",
]

#: The shipped second-stage model (rule priors and LightGBM classifier), trained on the
#: eight zoo models.
STAGED_MODEL_PATH = Path(__file__).with_name("staged_policy.json")


class _FirstIteration:
    """The second stage's schedule: multi-pattern rules searched, and matches chosen with
    the e-graph at hand, in the first iteration only."""

    def search_multi(self, iteration: int, k_multi: int) -> bool:
        return iteration == 0

    def selects(self, iteration: int) -> bool:
        return iteration == 0

    def wants_export(self, iteration: int) -> bool:
        return iteration == 0


class StagedMultiPolicy(_FirstIteration):
    """The second stage's policy: in the first iteration of the e-graph of an extracted
    program, searches the multi-pattern rules with a rule prior above 0 and admits their
    matches that add e-nodes and that the classifier scores at least ``threshold``, the
    ``max_admit`` likeliest (a match and its mirror image each count); applies no
    single-pattern match.

    Args:
        model: the learned :class:`~tensat_py.policies.multi.MultiModel`; ``None`` admits
            every multi-pattern match that adds e-nodes (what the training labels see).
        ruleset: the rule set explored.
        cost_model: prices the e-graph for the features.
        threshold: least predicted probability admitted (default 0: every match of a rule
            with a prior; held out, the classifier did not score the useful second-stage
            matches above the others, and at 0.5 it loses NasRNN's and SqueezeNet's
            gain; see ``bench/guidance.md``).
        max_admit: most matches admitted, the likeliest first (default 256).
    """

    name = "learned"

    def __init__(
        self,
        model: MultiModel | None,
        ruleset: Any = None,
        cost_model: Any = None,
        threshold: float = 0.0,
        max_admit: int = 256,
    ) -> None:
        self.model = model
        self.threshold = threshold
        self.max_admit = max_admit
        self.bind(ruleset, cost_model)

    @classmethod
    def load(cls, path: str | Path | None = None, **options: Any) -> StagedMultiPolicy:
        """The policy with the model at ``path`` (default :data:`STAGED_MODEL_PATH`).

        Raises:
            What :meth:`~tensat_py.policies.multi.MultiModel.load` raises: ImportError
            without LightGBM, FileNotFoundError, ValueError for a file that is no model.
        """
        return cls(MultiModel.load(path if path is not None else STAGED_MODEL_PATH), **options)

    def bind(self, ruleset: Any, cost_model: Any) -> StagedMultiPolicy:
        """Sets the rule set and cost model of the run and clears the counts; returns self."""
        self.ruleset, self.cost_model = ruleset, cost_model
        self._names = [d[0] for d in ruleset.describe()] if ruleset is not None else []
        self._multi = _multi_rules(ruleset) if ruleset is not None else set()
        self.admitted = self.offered = 0
        return self

    def multi_rules(self, iteration: int) -> list[int] | None:
        """The multi-pattern rules with a prior above 0 (all of them without a model)."""
        if self.model is None:
            return None
        prior = self.model.rule_prior
        return [i for i in sorted(self._multi) if prior.get(self._names[i], 0.0) > 0]

    def select(self, view: Mapping[str, Any]) -> list[bool]:
        keep = [False] * len(view["rules"])
        if not offers_new(view, self._multi):
            return keep
        costs = self.cost_model.costs_for_export(view["export"])
        x, idx = match_features(view, costs, self._multi, new_only=True)
        if not idx:
            return keep
        if self.model is None:
            chosen = list(range(len(idx)))
        else:
            p = self.model.scores(x, [self._names[view["rules"][i]] for i in idx])
            chosen = likeliest(p, self.threshold, self.max_admit)
        for j in chosen:
            keep[idx[j]] = True
        self.admitted += len(chosen)
        self.offered += len(idx)
        return keep


class StagedRecorder(_FirstIteration, RecordingPolicy):
    """Records the features of every multi-pattern match in the second stage (for
    :func:`~tensat_py.policies.multi.label_matches`) and applies exactly those matches, as
    :class:`StagedMultiPolicy` with every match admitted does."""

    def __init__(self, ruleset: Any, cost_model: Any) -> None:
        super().__init__(ruleset, cost_model, record_from=0)
        self.admitted = self.offered = 0

    def select(self, view: Mapping[str, Any]) -> list[bool]:  # type: ignore[override]
        super().select(view)
        keep = [r in self.multi_set for r in view["rules"]]
        self.admitted += sum(keep)
        self.offered += sum(keep)
        return keep


@dataclass
class Refinement:
    """What the second stage found.

    Attributes:
        graph: the extracted program of the second stage, or the input program when
            nothing was admitted.
        cost: cost-model cost of ``graph``, seconds.
        improved: ``graph`` is cheaper than the input program.
        admitted: multi-pattern matches admitted.
        offered: multi-pattern matches offered (those that add e-nodes).
        status: the extractor's status, or ``"nothing admitted"`` (no extraction run).
        seconds: wall-clock seconds of the whole stage.
        egraph: the second stage's e-graph (for labelling).
        export: its export (``None`` when nothing was extracted).
        choices: the extracted e-node of each e-class (empty when nothing was extracted).
    """

    graph: Graph
    cost: float
    improved: bool
    admitted: int
    offered: int
    status: str
    seconds: float
    egraph: Any = None
    export: Mapping[str, Any] | None = None
    choices: Any = None


def refine(
    program: Graph,
    ruleset: Any,
    cost_model: Any,
    policy: Any,
    *,
    extractor: str = "ilp",
    solver: str = "highs",
    time_limit: float = 60.0,
    program_cost: float | None = None,
) -> Refinement:
    """The second stage on ``program`` (an extracted program): its e-graph, one iteration
    in which ``policy`` (a :class:`StagedMultiPolicy` or :class:`StagedRecorder`, bound to
    ``ruleset`` and ``cost_model``) chooses the matches, and, when any was applied, an
    extraction with ``extractor`` / ``solver`` within ``time_limit`` seconds.
    ``program_cost`` is ``program``'s cost under ``cost_model`` where the caller knows it
    (it is priced otherwise).

    Example:
        >>> from tensat_py import models, optimize
        >>> from tensat_py.cost import get_cost_model
        >>> from tensat_py.rule_files import load_rules
        >>> rules, model = load_rules("taso"), get_cost_model("roofline", "t4")
        >>> p1 = optimize(models.get("squeezenet"), k_multi=1, verify=False).graph
        >>> pol = StagedMultiPolicy(None).bind(rules, model)  # admit every merge
        >>> ref = refine(p1, rules, model, pol)
        >>> ref.improved, ref.cost < model.graph_cost(p1)
        (True, True)
    """
    from tensat_py import _core
    from tensat_py.egraph import ExtractionProblem
    from tensat_py.extract import extract

    start = time.perf_counter()
    before = cost_model.graph_cost(program) if program_cost is None else program_cost
    egraph = _core.EGraph(program.to_flat())
    egraph.saturate(ruleset, k_multi=0, iter_limit=1, time_limit=time_limit, policy=policy)
    admitted, offered = int(policy.admitted), int(policy.offered)
    if admitted == 0:
        return Refinement(
            program,
            before,
            False,
            0,
            offered,
            "nothing admitted",
            time.perf_counter() - start,
            egraph,
        )
    export = egraph.export()
    costs = cost_model.costs_for_export(export)
    left = max(0.1, time_limit - (time.perf_counter() - start))
    # The e-graph is one program plus the admitted merges: splitting it into pieces
    # (decompose) costs more than it saves here (SqueezeNet's 10.8 -> 5.3 ms,
    # Inception-v3's 23.8 -> 16.8 ms, the same optimal programs).
    res = extract(
        ExtractionProblem.from_export(export, costs),
        extractor=extractor,
        solver=solver,
        time_limit=left,
        decompose=False,
    )
    cand = Graph.from_choices(export, res.choices)
    cand.meta = dict(program.meta)
    after = cost_model.graph_cost(cand)
    improved = after < before
    return Refinement(
        cand if improved else program,
        after if improved else before,
        improved,
        admitted,
        offered,
        res.status,
        time.perf_counter() - start,
        egraph,
        export,
        res.choices,
    )
