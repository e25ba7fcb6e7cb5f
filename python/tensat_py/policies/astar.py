"""A* over rewrite sequences on terms, with a learned value function (Knossos RLO's setting).

RLO (knossos-ksc ``rlo/``, "Reinforcement-learned optimisation of functional programs")
does not build an e-graph: it rewrites one term one rule application at a time and
searches the sequences with A*, guided by a value function ``V(e, t)`` that estimates the
best cost reduction reachable from ``e`` within ``t`` more rewrites. Here:

* **moves**: :func:`successors` lists every single rewrite of a term by the single-pattern
  rules of a rule file (``_core.rewrites``, ``rust/src/term.rs``): RLO's actions
  ``(node index, rule)``, with the rule DSL's conditions and type rules; and RLO's
  ``inline_let`` (one occurrence of a ``let``-bound variable replaced by its value,
  :mod:`tensat_py.policies.binding`), which a rule file states only as several rewrites;
* **cost**: any function of a flat term; for Knossos terms RLO's cost model
  (``_core.rlo_cost``: add/sub 1, mul/div 2, exp/log 4, let 0.1, unitless);
* **A\\***: :func:`astar` expands the open term of least ``cost(e) - V(e, T - depth)``,
  never more than ``T`` rewrites deep, until ``budget`` value-function evaluations (one per
  term generated, batched per expansion) are spent; it reports the best cost and the
  evaluations spent when it was first reached;
* **value function**: :class:`ZeroValue` (untrained: A* is then best-first on the cost)
  or :class:`LearnedValue`, gradient-boosted trees (LightGBM) on fixed-size term features
  (:func:`term_features`: hashed counts of operators and of parent/child operator pairs,
  size, depth, cost, repeated operands, unused lets, ``t``), trained on RLO's own value
  data set (``value_dataset.json``: ``[t, expression, best reduction within t steps]``,
  6,519 points, ``binding_simplify`` rules, RLO costs) and on search traces
  (:func:`trace_targets`: exact values on the bounded neighbourhood of training terms).

``bench/guidance.py`` trains it, reports its held-out error and compares A* (learned and
untrained) with equality saturation on held-out RLO expressions and on the functions of
``blas_train.kso``.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensat_py.policies import Term

__all__ = [
    "AStarResult",
    "LearnedValue",
    "Term",
    "ZeroValue",
    "astar",
    "load_value_dataset",
    "parse_rlo",
    "successors",
    "term_features",
    "term_text",
    "trace_targets",
    "VALUE_MODEL_PATH",
]


#: The shipped value function (LightGBM text model, gzip) for Knossos terms.
VALUE_MODEL_PATH = Path(__file__).with_name("value_function.txt.gz")

_OPS = 32  # hashed operator buckets
_PAIRS = 64  # hashed (parent, child) operator buckets


def as_term(nodes: Sequence[tuple[str, Sequence[int]]]) -> Term:
    """A flat node list as a hashable :data:`Term`."""
    return tuple((op, tuple(ch)) for op, ch in nodes)


def term_text(t: Term, i: int | None = None) -> str:
    """The s-expression of node ``i`` (default: the root): a canonical key of the term."""
    memo: dict[int, str] = {}

    def go(j: int) -> str:
        if j in memo:
            return memo[j]
        op, ch = t[j]
        s = op if not ch else "(" + " ".join([op, *(go(c) for c in ch)]) + ")"
        memo[j] = s
        return s

    return go(len(t) - 1 if i is None else i)


def successors(term: Term, ruleset: Any, inline_let: bool = True) -> list[tuple[int, int, Term]]:
    """Every single rewrite of ``term``: ``(rule index, pre-order position, new term)``.

    With ``inline_let`` (default), RLO's ``inline_let`` moves of
    :mod:`tensat_py.policies.binding` follow the rule file's rewrites, with rule index
    :data:`~tensat_py.policies.binding.INLINE_LET` (-1).
    """
    from tensat_py import _core
    from tensat_py.policies.binding import INLINE_LET, inline_let_moves

    out = [(r, p, as_term(n)) for r, p, n in _core.rewrites(list(term), ruleset)]
    if inline_let:
        out += [(INLINE_LET, p, t) for p, t in inline_let_moves(term)]
    return out


def _bucket(s: str, n: int) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=4).digest(), "little") % n


def _token(op: str, has_children: bool) -> str:
    if has_children:
        return op
    try:
        v = float(op)
    except ValueError:
        return "sym"
    return op if v in (0.0, 1.0, -1.0, 2.0) else "num"


#: Names of the columns of :func:`term_features`.
FEATURE_NAMES = (
    ["t", "cost", "size", "depth", "repeated_operands", "unused_lets", "distinct_frac"]
    + [f"op{i}" for i in range(_OPS)]
    + [f"pair{i}" for i in range(_PAIRS)]
)


def term_features(term: Term, t: int, cost: float) -> np.ndarray:
    """Fixed-size features of ``term`` with ``t`` rewrites left and cost ``cost``."""
    n = len(term)
    tok = [_token(op, bool(ch)) for op, ch in term]
    texts: list[str] = []
    depth = [0] * n
    free: list[set[str]] = []
    f = np.zeros(len(FEATURE_NAMES), dtype=np.float64)
    base = 7
    repeated = unused = 0
    for i, (op, ch) in enumerate(term):
        texts.append(op if not ch else "(" + " ".join([op, *(texts[c] for c in ch)]) + ")")
        depth[i] = 1 + max((depth[c] for c in ch), default=0)
        fv: set[str] = set()
        for c in ch:
            fv |= free[c]
        if op == "var" and ch:
            fv = {term[ch[0]][0]}
        if op == "let" and len(ch) == 3:
            name = term[ch[0]][0]
            if name not in free[ch[2]]:
                unused += 1
            fv = free[ch[1]] | (free[ch[2]] - {name})
        free.append(fv)
        tensor_ch = [c for c in ch if term[c][1]]
        if len(tensor_ch) >= 2 and len({texts[c] for c in tensor_ch}) < len(tensor_ch):
            repeated += 1
        f[base + _bucket(tok[i], _OPS)] += 1
        for c in ch:
            f[base + _OPS + _bucket(tok[i] + ">" + tok[c], _PAIRS)] += 1
    f[0] = t
    f[1] = cost
    f[2] = n
    f[3] = depth[-1] if n else 0
    f[4] = repeated
    f[5] = unused
    f[6] = len(set(texts)) / max(n, 1)
    return f


class ZeroValue:
    """The untrained value function: no reduction expected (A* is best-first on cost)."""

    name = "untrained"

    def predict(self, terms: Sequence[Term], ts: Sequence[int], costs: Sequence[float]) -> Any:
        """Zeros, one per term."""
        return np.zeros(len(terms))


class LearnedValue:
    """Gradient-boosted trees on :func:`term_features` (a LightGBM Booster).

    The trees predict the reduction itself (RLO cost units), clipped to ``[0, cost]``;
    with ``relative`` (:func:`fit_value`'s option) they predict the share of the term's
    cost that ``t`` rewrites remove, and the value is that share (in [0, 1]) times the
    cost, so that reductions of RLO's scalar expressions (a few units) and of blas
    functions (up to thousands) share one scale. The shipped model is absolute: relative
    targets, with or without blas traces, made A* spend more evaluations on the held-out
    RLO expressions (``docs/guidance.md``).

    :meth:`predict`, which A* calls, discounts the estimate by ``discount`` (weighted A*
    with a weight below 1 on the heuristic): a too-large estimate on a few terms sends the
    search down a wrong branch, and a discounted one still orders the open terms.
    :meth:`predict_features` (the held-out error) is not discounted. The default, 0.25,
    gave the fewest evaluations to the best cost on 24 training expressions (the 25th to
    48th costliest of value_dataset's training split): mean 46.9 at 0.25, 47.6 at 0.5
    and 0.75, 59.8 at 1, 73.5 untrained (``docs/guidance.md``).
    """

    name = "learned"
    _HEADER = "# tensat value function: relative\n"

    def __init__(self, booster: Any, relative: bool = False, discount: float = 0.25) -> None:
        self.booster = booster
        self.relative = relative
        self.discount = discount

    @classmethod
    def load(cls, path: str | Path | None = None) -> LearnedValue:
        """The value function stored at ``path`` (default: the shipped one).

        Raises:
            ImportError: LightGBM (the ``learn`` extra) is not installed.
            FileNotFoundError: no model file.
        """
        import lightgbm as lgb

        p = Path(path) if path is not None else VALUE_MODEL_PATH
        if not p.is_file():
            raise FileNotFoundError(
                f"no value function at {p}; train one with `python bench/guidance.py --train-only`"
            )
        text = gzip.decompress(p.read_bytes()).decode()
        relative = text.startswith(cls._HEADER)
        return cls(lgb.Booster(model_str=text.removeprefix(cls._HEADER)), relative)

    def save(self, path: str | Path | None = None) -> Path:
        """Writes the model (LightGBM text, gzip; a header line marks a relative one) to
        ``path`` (default: the shipped one)."""
        p = Path(path) if path is not None else VALUE_MODEL_PATH
        text = (self._HEADER if self.relative else "") + self.booster.model_to_string()
        p.write_bytes(gzip.compress(text.encode(), mtime=0))
        return p

    def predict_features(self, x: np.ndarray) -> np.ndarray:
        """Values for rows of :func:`term_features` (column 1 is the cost)."""
        y = np.asarray(self.booster.predict(x), dtype=np.float64)
        cost = x[:, 1]
        if self.relative:
            return np.clip(y, 0.0, 1.0) * cost
        return np.clip(y, 0.0, cost)

    def predict(self, terms: Sequence[Term], ts: Sequence[int], costs: Sequence[float]) -> Any:
        """``discount`` times the estimated best reduction within ``t`` steps (RLO cost
        units, in ``[0, discount * cost]``)."""
        if not terms:
            return np.zeros(0)
        x = np.stack([term_features(e, t, c) for e, t, c in zip(terms, ts, costs, strict=True)])
        return self.discount * self.predict_features(x)


def fit_value(
    x: np.ndarray,
    y: np.ndarray,
    seed: int = 0,
    rounds: int = 300,
    weight: Any = None,
    leaves: int = 31,
    relative: bool = False,
) -> Any:
    """A LightGBM regressor (L2) on features ``x`` and targets ``y`` (reductions, RLO
    cost units; optional weights); with ``relative`` it fits ``y / cost`` (see
    :class:`LearnedValue`)."""
    import lightgbm as lgb

    params = {
        "objective": "regression",
        "learning_rate": 0.05,
        "num_leaves": leaves,
        "min_data_in_leaf": 10,
        "verbose": -1,
        "seed": seed,
        "deterministic": True,
        "num_threads": 1,
    }
    label = y / np.maximum(x[:, 1], 1e-9) if relative else y
    return lgb.train(
        params, lgb.Dataset(x, label=label, weight=weight, feature_name=FEATURE_NAMES), rounds
    )


@dataclass
class AStarResult:
    """What :func:`astar` found.

    Attributes:
        start_cost: cost of the input term.
        best_cost: least cost found.
        best: the term of ``best_cost``.
        evaluations: value-function evaluations spent in all.
        evaluations_to_best: evaluations spent when ``best_cost`` was first reached.
        expanded: terms expanded.
        steps: rewrites from the input to ``best``.
    """

    start_cost: float
    best_cost: float
    best: Term
    evaluations: int
    evaluations_to_best: int
    expanded: int
    steps: int
    trace: list[tuple[Term, int, float]] = field(default_factory=list, repr=False)


def astar(
    start: Term,
    ruleset: Any,
    cost: Callable[[Term], float],
    value: Any,
    depth: int = 10,
    budget: int = 2000,
    target: float | None = None,
) -> AStarResult:
    """A* over rewrite sequences of at most ``depth`` rewrites from ``start``.

    Priority of a term at depth ``d``: ``cost(e) - V(e, depth - d)`` (least first); each
    term generated is evaluated once (``budget`` caps the evaluations); a term met again
    at a depth not smaller than before is skipped. Stops early when ``target`` (a cost) is
    reached.
    """
    c0 = cost(start)
    v0 = float(value.predict([start], [depth], [c0])[0])
    evals = 1
    best, best_cost, at_best, best_steps = start, c0, 1, 0
    seen: dict[str, int] = {term_text(start): 0}
    heap: list[tuple[float, int, int, Term]] = [(c0 - v0, 0, 0, start)]
    tie = 1
    expanded = 0
    while heap and evals < budget:
        if target is not None and best_cost <= target + 1e-9:
            break
        _, _, d, e = heapq.heappop(heap)
        if d >= depth:
            continue
        expanded += 1
        fresh: list[Term] = []
        for _, _, s in successors(e, ruleset):
            k = term_text(s)
            if seen.get(k, depth + 1) <= d + 1:
                continue
            seen[k] = d + 1
            fresh.append(s)
        fresh = fresh[: max(budget - evals, 0)]
        if not fresh:
            continue
        costs = [cost(s) for s in fresh]
        vals = value.predict(fresh, [depth - d - 1] * len(fresh), costs)
        for s, c, v in zip(fresh, costs, vals, strict=True):
            evals += 1
            if c < best_cost - 1e-9:
                best, best_cost, at_best, best_steps = s, c, evals, d + 1
            heapq.heappush(heap, (c - float(v), tie, d + 1, s))
            tie += 1
    return AStarResult(c0, best_cost, best, evals, at_best, expanded, best_steps)


def trace_targets(
    start: Term, ruleset: Any, cost: Callable[[Term], float], depth: int = 4, cap: int = 400
) -> list[tuple[Term, int, float]]:
    """Search traces: the terms within ``depth`` rewrites of ``start`` (breadth first, at
    most ``cap`` of them) with, for ``t = 1..depth``, the best cost reduction reachable
    within ``t`` rewrites inside that neighbourhood (a lower bound of the true value)."""
    layer = [start]
    key = {term_text(start): 0}
    terms = [start]
    edges: list[list[int]] = [[]]
    for _ in range(depth):
        nxt = []
        for e in layer:
            i = key[term_text(e)]
            for _, _, s in successors(e, ruleset):
                k = term_text(s)
                if k not in key:
                    if len(terms) >= cap:
                        continue
                    key[k] = len(terms)
                    terms.append(s)
                    edges.append([])
                    nxt.append(s)
                edges[i].append(key[k])
        layer = nxt
    cs = [cost(e) for e in terms]
    out: list[tuple[Term, int, float]] = []
    v = [0.0] * len(terms)
    for t in range(1, depth + 1):
        v = [max([0.0] + [cs[i] - cs[j] + v[j] for j in edges[i]]) for i in range(len(terms))]
        out.extend((terms[i], t, v[i]) for i in range(len(terms)) if edges[i] or t == 1)
    return out


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_RLO_OPS = {"add", "sub", "mul", "div", "exp", "log", "let"}


def parse_rlo(expr: str) -> Term:
    """An RLO scalar expression (``value_dataset.json``'s, e.g. ``(let (v (mul x x)) (add
    v 1.0))``) as a Knossos term: its free variables become ``Float`` parameters of a def,
    lowered by the Knossos front end.

    Raises:
        ValueError: the expression does not parse or type-check.
    """
    from tensat_py.frontends.knossos.lower import lower, signatures
    from tensat_py.frontends.knossos.syntax import parse_text

    bound = set(re.findall(r"\(let \(([A-Za-z_][A-Za-z0-9_$]*)", expr))
    free = sorted(set(_IDENT.findall(expr)) - _RLO_OPS - bound)
    params = " ".join(f"({v} : Float)" for v in free)
    prog = parse_text(f"(def f Float ({params}) {expr})")
    nodes, _ = lower(prog.defs[0], signatures(prog))
    return as_term(nodes)


def load_value_dataset(path: str | Path) -> list[tuple[int, str, float]]:
    """RLO's ``value_dataset.json``: ``[(time_left, expression, target)]``."""
    data = json.loads(Path(path).read_text())
    return [(int(t), str(e), float(y)) for t, e, y in data["data_points"]]


def rlo_cost(term: Term) -> float:
    """RLO's cost of a Knossos term (unitless)."""
    from tensat_py import _core

    return float(_core.rlo_cost(list(term), {}))


def split_of(expr: str, test_fraction: float = 0.2) -> str:
    """``"test"`` or ``"train"`` for an expression, by a hash of its text (stable)."""
    h = int.from_bytes(hashlib.blake2b(expr.encode(), digest_size=4).digest(), "little")
    return "test" if (h % 1000) < test_fraction * 1000 else "train"


def eqsat_cost(
    term: Term,
    ruleset: Any,
    iter_limit: int = 12,
    node_limit: int = 20_000,
    time_limit: float = 8.0,
) -> float:
    """Equality saturation's answer for a Knossos term, with the Knossos front end's
    settings (``optimize_program``: no multi-pattern rules, no cycle filtering, 12
    iterations, 20,000 e-nodes, 8 s): saturate, extract under RLO's cost."""
    from tensat_py import _core

    eg = _core.EGraph(list(term))
    eg.saturate(
        ruleset,
        k_multi=0,
        iter_limit=iter_limit,
        node_limit=node_limit,
        time_limit=time_limit,
        cycle_filter="none",
    )
    return float(eg.extract_rlo({})[0])


def improve_ks_program(
    prog: Any,
    res: Any,
    value: Any = None,
    budget: int = 2000,
    depth: int = 10,
    verify: bool = True,
    rules: Any = None,
) -> Any:
    """``tensat optimize prog.ks --policy astar``: after the pipeline's function stage
    (every def by equality saturation, its result ``res``), A* over rewrite sequences of
    each def with ``value`` (default: the shipped learned value function, else the
    untrained one) and the rules ``rules`` (default: the front end's) plus the program's
    ``inline_call`` rules; a def keeps A*'s body only when it is cheaper than the stage's
    and, with ``verify``, evaluates like the original. Never worse than equality
    saturation alone.

    Returns:
        the pipeline's :class:`tensat_py.result.OptimizeResult`, with the defs A* improved
        marked ``"astar"`` in ``defs`` and ``cost_after`` summed again.
    """
    from dataclasses import replace

    from tensat_py import _core
    from tensat_py.frontends.knossos import (
        DEFAULT_RULES,
        KsProgram,
        _inline_rules,
        evaluate,
        function_costs,
    )
    from tensat_py.frontends.knossos.lower import Untranslatable, lower, raise_term, signatures
    from tensat_py.frontends.knossos.syntax import Def, Program
    from tensat_py.rule_files import load_rules

    if value is None:
        try:
            value = LearnedValue.load()
        except (ImportError, FileNotFoundError):
            value = ZeroValue()
    p = res.graph.program
    orig = prog.program
    sigs = signatures(orig)
    costs = function_costs(orig)
    base = load_rules(rules or DEFAULT_RULES)
    inline_text = _inline_rules(orig, sigs)
    ruleset = (
        _core.RuleSet.union([base, _core.RuleSet.parse(inline_text, "<inline_call>")])
        if inline_text.strip()
        else base
    )
    items = list(p.items)
    defs = [i for i, d in enumerate(orig.items) if isinstance(d, Def)]
    for k, r in enumerate(res.defs):
        i = defs[k]
        if r.status in ("untranslatable", "unpriced"):
            continue
        item = orig.items[i]
        try:
            nodes, _ = lower(item, sigs)
        except Untranslatable:
            continue

        def cost(t: Term) -> float:
            return float(_core.rlo_cost(list(t), costs))

        found = astar(as_term(nodes), ruleset, cost, value, depth=depth, budget=budget)
        if found.best_cost >= r.cost_after - 1e-9:
            continue
        new_def = Def(
            item.name, item.ret, item.params, raise_term(term_text(found.best)), item.line
        )
        if verify and not evaluate.compare_defs(orig, item, new_def)[0]:
            continue
        items[i] = new_def
        res.defs[k] = replace(r, cost_after=found.best_cost, status="astar")
    res.graph = KsProgram(Program(items, p.file), dict(res.graph.meta))
    res.cost_after = sum(d.cost_after for d in res.defs)
    return res
