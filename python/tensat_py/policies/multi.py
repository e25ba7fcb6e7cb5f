"""Learned choice of multi-pattern matches past ``k_multi`` (Tensat section 7).

Tensat runs multi-pattern rules only in the first ``k_multi`` iterations: at
``k_multi=2`` the e-graph of BERT grows from 2,481 to 47,110 e-nodes and its ILP from
0.5 s to 13 s for a 6-point gain, and NasRNN, NasNet-A and Inception-v3 stop at the node
or time limit. :class:`LearnedMultiPolicy` searches multi-pattern rules in the iterations
``k_multi .. k_multi + extra - 1`` too, but only the rules whose matches were ever useful
in training (rule prior above 0; the others are not searched at all, which keeps the
quadratic ``relu-merge-*`` pairs out), and admits only the matches a gradient-boosted
classifier (LightGBM) scores above a threshold, at most ``max_admit`` of them per
iteration (a match and its mirror image each count); every single-pattern match is applied
as usual.

**Features** of a match (:func:`match_features`, independent of the rule's index and of
the program, as PolyGym and CompilerGym ask of actions, so that they carry over to a model
left out of training): how many of its matched e-classes and of its variables' e-classes
the current best program uses (greedy DAG extraction under the cost model), the log2
element counts of the matched tensors, how many matched e-classes are weight-only, whether
the two matched tensors have one shape, the log of the rule's match count and of the
e-graph size, the share of weight-only variables (a concat of weights is free at
inference), the e-nodes in the matched e-classes, the cost of their best e-nodes, whether
an earlier merge (a split) is among them, the operator of their best e-nodes, how many
e-nodes the match would add (0: its targets exist already; -1: they do not type-check),
how many matched e-classes read a concat (products of an earlier merge: a merge of a
merge), whether one variable's e-class is an operand of another's (merging an operator
with a merge that already holds it), and the rule's prior (its share of useful matches in
the training data, by rule name).

**Labels** (:func:`label_matches`): a match is useful when a program extracted at the end
of the exploration that admitted every match (Tensat at ``k_multi + extra``) uses an
e-class its target created: the target pattern is instantiated on the final e-graph (the
substitution's e-classes followed through later merges) and its inner e-classes that did
not exist when the match was found are looked up in the extracted program. A match and its
well-typed mirror image (:func:`mirror_key`) share the label: they build the same merged
operator with its parts in the other order, and which of the two the ILP keeps often
depends only on the order something downstream needs.

Training data come from the zoo (``bench/guidance.py`` records them and evaluates
leave-one-model-out); the shipped model ``multi_policy.json`` (:class:`MultiModel`) is
trained on all eight (``python bench/guidance.py --train-only``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "FEATURES",
    "MODEL_FEATURES",
    "LearnedMultiPolicy",
    "MODEL_PATH",
    "MultiModel",
    "RecordingPolicy",
    "label_matches",
    "likeliest",
    "match_features",
    "mirror_key",
    "offers_new",
    "rule_priors",
    "train",
]

#: The shipped classifier (LightGBM text model), trained on the eight zoo models.
MODEL_PATH = Path(__file__).with_name("multi_policy.json")

#: Operators named in the ``best_op`` features (others are -1).
_OPS = ("matmul", "conv2d", "ewadd", "ewmul", "relu", "concat", "split_0", "split_1")

#: Feature names, in column order.
FEATURES = (
    "matched_in_best",
    "vars_in_best_frac",
    "log2_numel_0",
    "log2_numel_1",
    "constant_matched",
    "same_shape",
    "log_rule_matches",
    "log_enodes",
    "const_vars_frac",
    "log_class_nodes",
    "log10_best_cost",
    "split_in_matched",
    "best_op_0",
    "best_op_1",
    "new_nodes",
    "merged_matched",
    "var_overlap",
    "rule_prior",
)

#: The columns the classifier reads: those that do not identify the program (the e-graph's
#: size, element counts, costs and match counts do, and leave-one-model-out showed the
#: classifier keying on them). ``rule_prior`` is the share of the rule's matches that were
#: useful in the training data (:class:`MultiModel`); :func:`match_features` leaves it 0.
MODEL_FEATURES = (
    "matched_in_best",
    "vars_in_best_frac",
    "constant_matched",
    "same_shape",
    "const_vars_frac",
    "log_class_nodes",
    "split_in_matched",
    "best_op_0",
    "best_op_1",
    "new_nodes",
    "merged_matched",
    "var_overlap",
    "rule_prior",
)
_COLS = [FEATURES.index(f) for f in MODEL_FEATURES]


def _numel(cls: Mapping[str, Any]) -> float:
    if cls.get("kind") == "tensor":
        return float(np.prod(cls.get("shape") or [1]))
    if cls.get("kind") == "pair":
        a, b = cls["shapes"]
        return float(np.prod(a or [1]) + np.prod(b or [1]))
    return 1.0


def match_features(
    view: Mapping[str, Any],
    costs: Sequence[float],
    multi_rules: set[int],
    new_only: bool = False,
) -> tuple[np.ndarray, list[int]]:
    """Features (rows in :data:`FEATURES` order) of the multi-pattern matches of ``view``
    (a policy view with its ``export``) and the indices of those matches in the view.
    ``costs`` prices the export's e-nodes (seconds). With ``new_only``, only the matches
    that would add e-nodes (``new_nodes`` above 0: the others' targets exist already or do
    not type-check). Vectorised over the matches."""
    from tensat_py.policies import best_choice

    export = view["export"]
    rules = np.asarray(view["rules"], dtype=np.int64)
    mask = np.isin(rules, np.fromiter(multi_rules, dtype=np.int64, count=len(multi_rules)))
    if new_only:
        mask &= np.asarray(view.get("new_nodes", [1] * len(rules)), dtype=np.int64) > 0
    idx = np.flatnonzero(mask).tolist()
    if not idx:
        return np.zeros((0, len(FEATURES))), []
    ids = np.asarray(export["class_id"], dtype=np.int64)
    dense = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    dense[ids] = np.arange(len(ids))
    _, used_set, choice_l = best_choice(export, list(costs))
    nc = len(ids)
    used = np.zeros(nc + 1, dtype=bool)  # index nc: "no class"
    used[list(used_set)] = True
    choice = np.asarray(choice_l + [-1], dtype=np.int64)
    classes = export["classes"]
    numel = np.log2(np.maximum([_numel(c) for c in classes] + [1.0], 1.0))
    const = np.asarray([bool(c.get("constant")) for c in classes] + [False])
    shape_key = np.asarray([hash(tuple(c.get("shape") or ())) for c in classes] + [0])
    ops = export["node_op"]
    node_ec = np.asarray(export["node_eclass"], dtype=np.int64)
    size = np.bincount(node_ec, minlength=nc + 1).astype(np.float64)
    is_split = np.asarray([op.startswith("split_") for op in ops])
    split = np.zeros(nc + 1, dtype=bool)
    split[node_ec[is_split]] = True
    node_cost = np.asarray(list(costs) + [0.0], dtype=np.float64)
    best_cost = node_cost[choice]  # choice -1 -> the appended 0
    # e-classes holding an e-node that reads a concat: products of an earlier merge.
    parent, child = _edges(export)
    is_concat = np.zeros(nc + 1, dtype=bool)
    is_concat[node_ec[np.asarray([op == "concat" for op in ops], dtype=bool)]] = True
    merged = np.zeros(nc + 1, dtype=bool)
    merged[parent[is_concat[child]]] = True
    op_code = np.asarray([float(_OPS.index(o)) if o in _OPS else -1.0 for o in ops] + [-1.0])
    best_op = op_code[choice]

    def to_dense(cs: np.ndarray) -> np.ndarray:
        ok = (cs >= 0) & (cs < len(dense))
        out = np.full(cs.shape, nc, dtype=np.int64)
        out[ok] = np.where(dense[cs[ok]] >= 0, dense[cs[ok]], nc)
        return out

    width = max(len(view["classes"][i]) for i in idx)
    mc = np.full((len(idx), max(width, 2)), -1, dtype=np.int64)
    vwidth = max(len(view["substs"][i]) for i in idx)
    vc = np.full((len(idx), max(vwidth, 1)), -1, dtype=np.int64)
    for row, i in enumerate(idx):
        cl = view["classes"][i]
        mc[row, : len(cl)] = cl
        sb = view["substs"][i]
        vc[row, : len(sb)] = [c for _, c in sb]
    mcd, vcd = to_dense(mc), to_dense(vc)
    nvars = np.maximum((vc >= 0).sum(axis=1), 1)
    per_rule = np.bincount(rules[idx])[rules[idx]]
    bc = best_cost[mcd].sum(axis=1)
    x = np.column_stack(
        [
            used[mcd].sum(axis=1),
            used[vcd].sum(axis=1) / nvars,
            numel[mcd[:, 0]],
            numel[mcd[:, 1]],
            const[mcd].sum(axis=1),
            (shape_key[mcd[:, 0]] == shape_key[mcd[:, 1]]) & (mcd[:, 1] < nc),
            np.log1p(per_rule),
            np.full(len(idx), math.log1p(view["enodes"])),
            const[vcd].sum(axis=1) / nvars,
            np.log1p(size[mcd].sum(axis=1)),
            np.log10(bc + 1e-9),
            split[mcd].any(axis=1),
            best_op[mcd[:, 0]],
            best_op[mcd[:, 1]],
            np.asarray(view.get("new_nodes", [0] * len(rules)), dtype=np.float64)[idx],
            merged[mcd].sum(axis=1),
            _overlap(vcd, parent, child, nc),
            np.zeros(len(idx)),
        ]
    ).astype(np.float64)
    return x, idx


def _edges(export: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(parent, child) dense e-class index pairs, one per operand of each exported e-node."""
    kids = export["node_children"]
    lens = np.fromiter((len(k) for k in kids), dtype=np.int64, count=len(kids))
    flat = np.fromiter((c for k in kids for c in k), dtype=np.int64, count=int(lens.sum()))
    parent = np.repeat(np.asarray(export["node_eclass"], dtype=np.int64), lens)
    return parent, flat


def _overlap(vcd: np.ndarray, parent: np.ndarray, child: np.ndarray, nc: int) -> np.ndarray:
    """1 where one variable's e-class is an operand of an e-node of another variable's
    e-class (merging an operator with a merge that already holds it), else 0; ``parent``,
    ``child``: the e-graph's operand edges (:func:`_edges`)."""
    keys = np.unique(parent * (nc + 1) + child)
    out = np.zeros(len(vcd), dtype=bool)
    for a in range(vcd.shape[1]):
        for b in range(vcd.shape[1]):
            if a != b:
                k = vcd[:, a] * (nc + 1) + vcd[:, b]
                pos = np.searchsorted(keys, k)
                hit = keys[np.minimum(pos, len(keys) - 1)] == k
                out |= hit & (vcd[:, a] < nc) & (vcd[:, b] < nc)
    return out.astype(np.float64)


class RecordingPolicy:
    """Tensat's schedule at ``k_multi`` (applies everything), recording the multi-pattern
    matches found in iterations ``record_from ..`` with their features and substitutions,
    for :func:`label_matches`."""

    def __init__(self, ruleset: Any, cost_model: Any, record_from: int = 1) -> None:
        self.multi_set = _multi_rules(ruleset)
        self.cost_model = cost_model
        self.record_from = record_from
        self.rows: list[np.ndarray] = []
        self.rule_names = [d[0] for d in ruleset.describe()]
        #: The rule name of each recorded row.
        self.rules: list[str] = []
        self.matches: list[tuple[int, list[tuple[str, int]], list[int]]] = []
        self.known: list[dict[tuple[str, tuple[int, ...]], int]] = []

    def selects(self, iteration: int) -> bool:
        return iteration >= self.record_from

    def wants_export(self, iteration: int) -> bool:
        return iteration >= self.record_from

    def select(self, view: Mapping[str, Any]) -> None:
        export = view["export"]
        costs = self.cost_model.costs_for_export(export)
        x, idx = match_features(view, costs, self.multi_set)
        self.rows.append(x)
        table = _node_table(export)
        for i in idx:
            self.rules.append(self.rule_names[view["rules"][i]])
            self.matches.append((view["rules"][i], list(view["substs"][i]), view["classes"][i]))
            self.known.append(table)
        return None


def _multi_rules(ruleset: Any) -> set[int]:
    return {i for i, (_, srcs, _, _) in enumerate(ruleset.describe()) if len(srcs) > 1}


def _node_table(export: Mapping[str, Any]) -> dict[tuple[str, tuple[int, ...]], int]:
    """(op text, child e-class ids) -> e-class id, over the export's e-nodes."""
    ids = export["class_id"]
    return {
        (op, tuple(ids[c] for c in ch)): ids[cl]
        for op, ch, cl in zip(
            export["node_op"], export["node_children"], export["node_eclass"], strict=True
        )
    }


def _parse_pattern(text: str) -> Any:
    toks = re.findall(r"\(|\)|[^\s()]+", text)
    pos = 0

    def rd() -> Any:
        nonlocal pos
        t = toks[pos]
        pos += 1
        if t != "(":
            return t
        items = []
        while toks[pos] != ")":
            items.append(rd())
        pos += 1
        return items

    return rd()


def _inner_classes(
    pattern: Any,
    subst: Mapping[str, int],
    table: Mapping[tuple[str, tuple[int, ...]], int],
    out: list[int],
    depth: int = 0,
) -> int | None:
    """The e-class of ``pattern`` under ``subst`` in the e-graph of ``table`` (None when
    some node is absent); appends the e-classes of inner operator nodes to ``out``."""
    if isinstance(pattern, str):
        if pattern.startswith("?"):
            return subst.get(pattern)
        return table.get((pattern, ()))
    kids = [_inner_classes(p, subst, table, out, depth + 1) for p in pattern[1:]]
    if any(k is None for k in kids):
        return None
    cls = table.get((pattern[0], tuple(kids)))  # type: ignore[arg-type]
    if cls is not None and depth > 0 and pattern[1:]:
        out.append(cls)
    return cls


def label_matches(
    recorder: RecordingPolicy, ruleset: Any, egraph: Any, export: Mapping[str, Any], used: set[int]
) -> np.ndarray:
    """1 for each recorded match whose target's new inner e-classes the final program
    (dense e-classes ``used`` of ``export``) uses, or whose well-typed mirror image's do
    (see :func:`mirror_key`), else 0. An inner e-class is new when it existed neither
    before the match nor as one of the match's operands."""
    targets = [[_parse_pattern(t) for t in tgts] for _, _, tgts, _ in ruleset.describe()]
    final = _node_table(export)
    used_ids = {export["class_id"][c] for c in used}
    labels = []
    for (rule, subst, _), known in zip(recorder.matches, recorder.known, strict=True):
        canon = dict(zip([v for v, _ in subst], egraph.find([c for _, c in subst]), strict=True))
        before = {v: c for v, c in subst}
        hit = 0
        for t in targets[rule]:
            inner: list[int] = []
            _inner_classes(t, canon, final, inner)
            old: list[int] = []
            _inner_classes(t, before, known, old)
            # An inner e-class that is one of the match's operands (an identity such as
            # `enlarge-same-size` joined them) was not built by the match.
            old_canon = set(egraph.find(old)) if old else set()
            old_canon.update(canon.values())
            if any(c in used_ids and c not in old_canon for c in inner):
                hit = 1
        labels.append(hit)
    # A match and its mirror image share a label: they build the same merged operator,
    # concat(b, c) or concat(c, b), and the ILP's pick follows what reads the parts.
    # A mirror image whose target does not type-check (new_nodes -1: e.g. enlarging the
    # larger kernel to the smaller) cannot be applied and stays 0.
    rows = np.concatenate(recorder.rows) if recorder.rows else np.zeros((0, len(FEATURES)))
    typed = rows[:, FEATURES.index("new_nodes")] >= 0
    best: dict[tuple, int] = {}
    for (rule, subst, classes), hit in zip(recorder.matches, labels, strict=True):
        key = mirror_key(rule, classes, subst)
        best[key] = max(best.get(key, 0), hit)
    return np.asarray(
        [
            best[mirror_key(r, c, s)] if ok else hit
            for (r, s, c), ok, hit in zip(recorder.matches, typed, labels, strict=True)
        ],
        dtype=np.int64,
    )


def mirror_key(rule: int, classes: Sequence[int], subst: Sequence[tuple[str, int]]) -> tuple:
    """What a match and its mirror image (the same rule, its sources matched in the other
    order) have in common: the rule, the matched e-classes and the variables' e-classes,
    each as a sorted tuple."""
    return (rule, tuple(sorted(classes)), tuple(sorted(c for _, c in subst)))


def rule_priors(rules: Sequence[str], y: np.ndarray, smoothing: float = 1.0) -> dict[str, float]:
    """The share of each rule's matches labelled useful, ``useful / (matches + smoothing)``
    (0 for a rule with no useful match)."""
    out: dict[str, float] = {}
    r = np.asarray(rules)
    for name in sorted(set(rules)):
        m = r == name
        out[name] = float(y[m].sum()) / (float(m.sum()) + smoothing)
    return out


class MultiModel:
    """The learned part of :class:`LearnedMultiPolicy`: a LightGBM Booster over
    :data:`MODEL_FEATURES` and the rule priors (share of useful matches per rule name in the
    training data; a rule with prior 0 is not searched at all).

    Stored as one JSON file: ``{"format": 1, "rule_prior": {name: share}, "booster":
    LightGBM model text}``.
    """

    def __init__(self, booster: Any, rule_prior: Mapping[str, float]) -> None:
        self.booster = booster
        self.rule_prior = dict(rule_prior)

    def save(self, path: str | Path) -> None:
        """Writes the model to ``path`` (JSON)."""
        doc = {
            "format": 1,
            "rule_prior": self.rule_prior,
            "booster": self.booster.model_to_string(),
        }
        Path(path).write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> MultiModel:
        """The model stored at ``path``.

        Raises:
            ImportError: LightGBM (the ``learn`` extra) is not installed.
            FileNotFoundError: no file at ``path``.
            ValueError: the file is not a model written by :meth:`save` (names the file).
        """
        import lightgbm as lgb

        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(
                f"no learned multi-pattern policy at {p}; train one with "
                "`python bench/guidance.py --train-only`"
            )
        try:
            doc = json.loads(p.read_text())
            booster = lgb.Booster(model_str=doc["booster"])
            prior = {str(k): float(v) for k, v in doc["rule_prior"].items()}
        except (ValueError, KeyError, TypeError, lgb.basic.LightGBMError) as e:
            raise ValueError(f"{p}: not a multi-pattern policy model ({e})") from None
        return cls(booster, prior)

    def with_prior(self, x: np.ndarray, rules: Sequence[str]) -> np.ndarray:
        """``x`` with its ``rule_prior`` column set from each row's rule name."""
        x = np.array(x, dtype=np.float64, copy=True)
        x[:, FEATURES.index("rule_prior")] = [self.rule_prior.get(r, 0.0) for r in rules]
        return x

    def scores(self, x: np.ndarray, rules: Sequence[str]) -> np.ndarray:
        """:meth:`predict`, with -1 where the match is never admitted: its rule's prior is
        0 (not searched), or it adds no e-node (``new_nodes`` 0: its targets exist already;
        -1: they do not type-check)."""
        p = self.predict(x, rules)
        if len(p):
            p[[self.rule_prior.get(r, 0.0) <= 0 for r in rules]] = -1.0
            p[x[:, FEATURES.index("new_nodes")] <= 0] = -1.0
        return p

    def predict(self, x: np.ndarray, rules: Sequence[str]) -> np.ndarray:
        """Probabilities that matches with features ``x`` (all :data:`FEATURES`) of the
        rules named ``rules`` are useful."""
        if len(x) == 0:
            return np.zeros(0)
        return np.asarray(self.booster.predict(self.with_prior(x, rules)[:, _COLS]))


def train(x: np.ndarray, y: np.ndarray, rules: Sequence[str], seed: int = 0) -> MultiModel:
    """A :class:`MultiModel` from match features ``x`` (all :data:`FEATURES`), labels ``y``
    and the rule name of each row: the rule priors, then a LightGBM binary classifier
    (4 leaves, 60 rounds, positives weighted 10 to 1) on :data:`MODEL_FEATURES`."""
    import lightgbm as lgb

    params = {
        "objective": "binary",
        "learning_rate": 0.1,
        "num_leaves": 4,
        "min_data_in_leaf": 20,
        "feature_fraction": 1.0,
        "scale_pos_weight": 10.0,
        "verbose": -1,
        "seed": seed,
        "deterministic": True,
        "num_threads": 1,
    }
    prior = rule_priors(rules, y)
    model = MultiModel(None, prior)
    xp = model.with_prior(x, rules)
    ds = lgb.Dataset(xp[:, _COLS], label=y, feature_name=list(MODEL_FEATURES))
    model.booster = lgb.train(params, ds, num_boost_round=60)
    return model


def offers_new(view: Mapping[str, Any], multi: set[int]) -> bool:
    """Whether ``view`` has a match of a rule in ``multi`` that would add e-nodes. A match
    adding none (its targets exist already, or do not type-check) is never offered: no
    training label marks one useful (labels count e-classes a target created), and a
    view without an offer is not priced at all."""
    new = view.get("new_nodes")
    return any(r in multi and (new is None or new[i] > 0) for i, r in enumerate(view["rules"]))


def likeliest(p: np.ndarray, threshold: float, cap: int) -> list[int]:
    """Indices of the scores ``p`` at least ``threshold``, likeliest first (ties in order),
    at most ``cap`` of them."""
    return [j for j in np.argsort(-p, kind="stable") if p[j] >= threshold][:cap]


class LearnedMultiPolicy:
    """Applies every single-pattern match; in iterations ``k_multi .. k_multi + extra - 1``
    searches the multi-pattern rules the training data found useful (rule prior above 0)
    and admits the matches whose predicted probability of being useful is at least
    ``threshold``, the ``max_admit`` most likely per iteration.

    Args:
        model: the learned :class:`MultiModel`.
        ruleset: the rule set explored (its multi-pattern rules are the candidates).
        cost_model: prices the e-graph for the best-program features.
        extra: iterations past ``k_multi`` in which matches may be admitted (default 1).
        threshold: least predicted probability admitted (default 0.5).
        max_admit: most matches admitted per iteration (default 64).
    """

    name = "learned-in-window"

    def __init__(
        self,
        model: MultiModel | None,
        ruleset: Any = None,
        cost_model: Any = None,
        extra: int = 1,
        threshold: float = 0.5,
        max_admit: int = 64,
    ) -> None:
        self.model = model
        self._use_rules(ruleset)
        self.cost_model = cost_model
        self.extra = extra
        self.threshold = threshold
        self.max_admit = max_admit
        self.k_multi = 1
        self.admitted = 0
        self.offered = 0

    @classmethod
    def load(cls, path: str | Path | None = None, **options: Any) -> LearnedMultiPolicy:
        """The policy with the model stored at ``path`` (default: the shipped one).

        Raises:
            ImportError: LightGBM (the ``learn`` extra) is not installed.
            FileNotFoundError: no model file at ``path``.
            ValueError: the file is not a model (names it).
        """
        return cls(MultiModel.load(path if path is not None else MODEL_PATH), **options)

    def bind(self, ruleset: Any, cost_model: Any, k_multi: int) -> LearnedMultiPolicy:
        """Sets the rule set, cost model and ``k_multi`` of the run; returns self."""
        self._use_rules(ruleset)
        self.cost_model, self.k_multi = cost_model, k_multi
        self.admitted = self.offered = 0
        return self

    def _use_rules(self, ruleset: Any) -> None:
        """Sets the rule set with its rule names and multi-pattern rule indices."""
        self.ruleset = ruleset
        self._names = [d[0] for d in ruleset.describe()] if ruleset is not None else []
        self._multi = _multi_rules(ruleset) if ruleset is not None else set()

    def _window(self, iteration: int) -> bool:
        return self.k_multi <= iteration < self.k_multi + self.extra

    def search_multi(self, iteration: int, k_multi: int) -> bool:
        self.k_multi = k_multi
        return iteration < k_multi or self._window(iteration)

    def multi_rules(self, iteration: int) -> list[int] | None:
        """All multi-pattern rules in the first ``k_multi`` iterations (Tensat's schedule);
        in the window those with a rule prior above 0."""
        if not self._window(iteration) or self.model is None:
            return None
        return [
            i for i in sorted(self._multi) if self.model.rule_prior.get(self._names[i], 0.0) > 0
        ]

    def selects(self, iteration: int) -> bool:
        return self._window(iteration)

    def wants_export(self, iteration: int) -> bool:
        return self._window(iteration)

    def select(self, view: Mapping[str, Any]) -> list[bool]:
        multi = self._multi
        keep = [r not in multi for r in view["rules"]]
        if not offers_new(view, multi):
            return keep
        costs = self.cost_model.costs_for_export(view["export"])
        x, idx = match_features(view, costs, multi, new_only=True)
        if len(idx) and self.model is not None:
            p = self.model.scores(x, [self._names[view["rules"][i]] for i in idx])
            # A match and its mirror image are both admitted: the merged operator is the
            # same, but the order of its parts is not, and what follows may need one order
            # (SqueezeNet's fire modules concatenate expand1x1 before expand3x3: with one
            # image of each useful conv-relu-enlarge-merge admitted, k_multi=1 plus the
            # k_multi=2 labels reach 55.51 %, with both 56.0 %, Tensat's k_multi=2 result).
            admitted = likeliest(p, self.threshold, self.max_admit)
            for j in admitted:
                keep[idx[j]] = True
            self.admitted += len(admitted)
            self.offered += len(idx)
        return keep
