"""Numerical soundness check of rewrite rules (``tensat rules check``).

Every rule of a rule file is instantiated at several random valid assignments of its
variables, and both sides are evaluated with the NumPy reference executor in float64 on
the same random inputs. No operator's shape rule is written here: the Rust e-class
analysis is the only judge of what type-checks and of every output shape.

1. The source and target patterns (texts from ``RuleSet.describe()``) are parsed, and
   every ``?variable`` takes the kind of the operand it stands for (``tensor``, ``int``,
   ``float``, ``list``, ``sym``) from the operator signatures (``graph.signatures()``).
2. A randomized backtracking search assigns the variables in the order a bottom-up walk
   of the source patterns meets them (an operator's tensor operands before its
   parameters, so a parameter's domain can read the rank of the operand beside it).
   Candidates: a tensor variable gets shapes of rank 0..4 built from the shapes already
   in this instance (its variables' and its completed sub-terms' shapes, as the analysis
   computed them) and a few small fresh dimensions, so equal-dimension constraints are
   likely met; float32 unless no float32 instance exists, then other dtypes too. Integer
   parameters take small domains named after their operand (``act`` 0..3, ``pad`` 0/1,
   ``stride*`` 1/2, ``kernel*`` 1..3, ``axis`` below the operand's rank, ...), list
   parameters generated lists (permutations, sorted axis subsets, shapes of the right
   element count from factorizations of volumes present, small integer lists), float
   parameters a few values, symbol parameters the dtype / mode names.
3. Each partial assignment is checked by adding every sub-term it completes (on both
   sides) to a scratch :class:`tensat_py.graph.Graph`: ``Graph.add_node`` type-checks it
   with the Rust analysis (``_core.TypeChecker``) and a ``GraphError`` prunes the branch.
   Once the variables the rule's conditions mention are bound, the conditions are
   evaluated by the Rust core (``RuleSet.check_conditions``). The search is bounded (a
   budget of candidate values per rule, restarts, a seeded RNG).
4. Source i and target i are compared output by output: equal types (shape, dtype), then
   relative error ``max|a - b| / max(max|a|, max|b|)`` against :data:`TOLERANCE`. When the
   shapes allow it, one extra instance re-types the float32 variables to another float
   dtype (both sides must type-check there for it to count).

Outcomes per rule: ``PASS`` (every instance agreed), ``FAIL`` (an instance disagreed:
the assignment and the error are reported) or ``UNTESTABLE`` (no valid instance within
the budget, a variable kind that cannot be instantiated, or an operator the executor
cannot run; the reason is reported). A bug in the checker itself is raised, never turned
into a status.
"""

from __future__ import annotations

import inspect
import itertools
import random
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from math import prod
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tensat_py import _core
from tensat_py.graph import Graph, GraphError, TensorType, operand_kinds
from tensat_py.runtime.numpy_exec import run

__all__ = [
    "TOLERANCE",
    "RuleResult",
    "CheckReport",
    "check_rule",
    "check_ruleset",
    "check_files",
    "default_files",
    "parse_pattern",
]

#: Relative-error threshold for float64 evaluation. Rewrites only reorder exact real
#: arithmetic (re-associated sums, split/concat bookkeeping), so with the small random
#: shapes used here (reductions of at most a few hundred terms) the round-off is
#: ``~1e-15`` relative; a semantically different rule disagrees by ``O(1)``. 1e-9 leaves
#: six orders of magnitude of margin on both sides.
TOLERANCE = 1e-9

#: Default search budget: candidate values tried per rule (all samples together).
ATTEMPTS = 3000

Term = str | tuple  # an atom (``?x``, ``3``, ``[1,0]``) or ``(op, child, ...)``

_FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
_ALL_DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "bool", "uint8")
#: Candidate values tried per tensor / list variable per search node.
_TENSOR_CANDIDATES = 10
_LIST_CANDIDATES = 10
#: Steps (candidate values assigned) per restart of the backtracking search.
_RESTART_STEPS = 80
#: Candidates drawn from the shapes beside a tensor variable, before the random ones.
_SIBLING_CANDIDATES = 6
#: Ranks of a random tensor candidate and their weights.
_RANKS = (0, 1, 2, 3, 4)
_RANK_WEIGHTS = (0.05, 0.2, 0.25, 0.25, 0.25)
_FRESH_DIMS = (2, 3, 4, 5, 6)
#: Largest tensor candidate (elements), so evaluation stays cheap.
_MAX_NUMEL = 1024


# --------------------------------------------------------------------------- patterns
_TOKEN = re.compile(r"\[[^\]]*\]|\(|\)|[^\s()]+")


def parse_pattern(text: str) -> Term:
    """Parse a pattern s-expression (``(matmul 0 ?a ?b)``) into nested tuples.

    Raises:
        ValueError: unbalanced parentheses or trailing text.
    """
    toks = _TOKEN.findall(text)
    pos = 0

    def read() -> Term:
        nonlocal pos
        if pos >= len(toks):
            raise ValueError(f"unexpected end of pattern `{text}`")
        t = toks[pos]
        pos += 1
        if t == "(":
            out: list = []
            while pos < len(toks) and toks[pos] != ")":
                out.append(read())
            if pos >= len(toks):
                raise ValueError(f"unclosed `(` in pattern `{text}`")
            pos += 1
            return tuple(out)
        if t == ")":
            raise ValueError(f"unmatched `)` in pattern `{text}`")
        return t

    term = read()
    if pos != len(toks):
        raise ValueError(f"trailing text in pattern `{text}`")
    return term


def _is_var(t: Term) -> bool:
    return isinstance(t, str) and t.startswith("?")


def _kinds_of(t: tuple) -> tuple[tuple[str, str], ...]:
    """``(operand name, kind)`` per child of application ``t``."""
    op, args = t[0], t[1:]
    try:
        sig = operand_kinds(op, len(args))
    except KeyError:
        raise ValueError(f"`{op}` is not an operator of the language") from None
    if len(sig) != len(args):
        raise ValueError(f"`{op}` takes {len(sig)} operands, the pattern gives {len(args)}")
    return sig


def _literal(tok: str, kind: str) -> Any:
    """The Python parameter value of literal ``tok`` for an operand of ``kind``."""
    if kind == "int":
        return int(tok)
    if kind == "float":
        return float(tok)
    if kind == "list":
        body = tok.strip()
        if not (body.startswith("[") and body.endswith("]")):
            raise ValueError(f"`{tok}` is not a list literal")
        inner = body[1:-1].strip()
        return tuple(int(x) for x in inner.split(",")) if inner else ()
    return tok


def _vars_in(t: Term) -> frozenset[str]:
    if _is_var(t):
        return frozenset([t])  # type: ignore[list-item]
    if isinstance(t, tuple):
        return frozenset().union(*(_vars_in(a) for a in t[1:]))
    return frozenset()


# --------------------------------------------------------------------------- the rule
@dataclass
class _VarInfo:
    """Where a variable first occurs: its kind, operand name, and the application."""

    name: str
    kind: str
    operand: str
    app: tuple


@dataclass
class _Plan:
    """A rule prepared for the search."""

    sources: list[Term]
    targets: list[Term]
    order: list[str]  # variables in search order
    info: dict[str, _VarInfo]
    completes: list[list[Term]]  # sub-terms whose last variable is order[i]
    ground: list[Term]  # sub-terms without variables
    cond_step: int  # index in order after which the conditions can be evaluated; -1: none
    positive: set[str]  # tensor variables fed positive values (a variance operand)


def _plan(ruleset: _core.RuleSet, index: int, sources: list[Term], targets: list[Term]) -> _Plan:
    info: dict[str, _VarInfo] = {}
    order: list[str] = []
    subterms: list[Term] = []
    seen_terms: set[Term] = set()
    positive: set[str] = set()

    def walk(t: Term) -> None:
        if not isinstance(t, tuple):
            return
        sig = _kinds_of(t)
        args = t[1:]
        # Tensor operands first (bottom-up), then the parameters beside them.
        for (name, kind), a in zip(sig, args, strict=True):
            if kind in ("tensor", "pair"):
                if _is_var(a):
                    if a not in info:
                        info[a] = _VarInfo(a, kind, name, t)  # type: ignore[index]
                        order.append(a)  # type: ignore[arg-type]
                    if name == "var":
                        positive.add(a)  # type: ignore[arg-type]
                else:
                    walk(a)
        for (name, kind), a in zip(sig, args, strict=True):
            if kind not in ("tensor", "pair") and _is_var(a) and a not in info:
                info[a] = _VarInfo(a, kind, name, t)  # type: ignore[index]
                order.append(a)  # type: ignore[arg-type]
        if t not in seen_terms:
            seen_terms.add(t)
            subterms.append(t)

    for t in [*sources, *targets]:
        if _is_var(t):
            if t not in info:
                raise ValueError(f"pattern root {t} is a bare variable of unknown kind")
            continue
        walk(t)
    pos = {v: i for i, v in enumerate(order)}
    completes: list[list[Term]] = [[] for _ in order]
    ground: list[Term] = []
    for t in subterms:
        vs = _vars_in(t)
        if vs:
            completes[max(pos[v] for v in vs)].append(t)
        else:
            ground.append(t)
    cond_vars = set()
    for c in ruleset.conditions(index):
        cond_vars.update(re.findall(r"\?[A-Za-z0-9_]+", c))
    if ruleset.conditions(index):
        cond_step = max((pos[v] for v in cond_vars if v in pos), default=0)
        if not order:
            cond_step = -1
    else:
        cond_step = -2
    return _Plan(sources, targets, order, info, completes, ground, cond_step, positive)


# --------------------------------------------------------------------------- values
class _Tensor(NamedTuple):
    """The value of a tensor variable: a leaf of this shape and dtype (an input, or a
    weight when ``weight``)."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    weight: bool = False


def _dtypes_supported() -> bool:
    """Whether :class:`Graph` leaves can have a dtype other than float32."""
    return "dtype" in inspect.signature(Graph.add_input).parameters


def _add_leaf(g: Graph, name: str, val: _Tensor) -> int:
    add = g.add_weight if val.weight else g.add_input
    if val.dtype == "float32":
        return add(name, val.shape)
    return add(name, val.shape, dtype=val.dtype)  # type: ignore[call-arg]


class _Builder:
    """Adds pattern terms under an assignment to a graph; every node is type-checked by
    the Rust analysis (through ``Graph.add_node``). Results, failures included, are
    cached by (term, values of its variables)."""

    def __init__(self, graph: Graph, leaf_name: Any = None) -> None:
        self.g = graph
        self.memo: dict[tuple, int | GraphError] = {}
        self.leaves: dict[tuple[str, _Tensor], int] = {}
        self.vars: dict[Term, tuple[str, ...]] = {}
        self._leaf_name = leaf_name

    def _leaf(self, var: str, val: _Tensor) -> int:
        key = (var, val)
        if key not in self.leaves:
            name = self._leaf_name(var) if self._leaf_name else f"v{len(self.leaves)}"
            self.leaves[key] = _add_leaf(self.g, name, val)
        return self.leaves[key]

    def build(self, t: Term, assign: dict[str, Any]) -> int:
        """Node id of ``t``; raises :class:`GraphError` when it does not type-check."""
        if _is_var(t):
            return self._leaf(t, assign[t])  # type: ignore[arg-type,index]
        vs = self.vars.get(t)
        if vs is None:
            vs = self.vars[t] = tuple(sorted(_vars_in(t)))
        key = (t, tuple(assign[v] for v in vs))
        hit = self.memo.get(key)
        if hit is None:
            try:
                hit = self._add(t, assign)  # type: ignore[arg-type]
            except GraphError as e:
                hit = e
            self.memo[key] = hit
        if isinstance(hit, GraphError):
            raise hit
        return hit

    def _add(self, t: tuple, assign: dict[str, Any]) -> int:
        params: dict[str, Any] = {}
        inputs: list[int] = []
        for (name, kind), a in zip(_kinds_of(t), t[1:], strict=True):
            if kind in ("tensor", "pair"):
                inputs.append(self.build(a, assign))
            elif _is_var(a):
                params[name] = assign[a]  # type: ignore[index]
            else:
                params[name] = _literal(a, kind)  # type: ignore[arg-type]
        return self.g.add_node(t[0], params, inputs)


def _short(msg: str) -> str:
    """A rejection message without the node name, so equal causes group together."""
    if msg.startswith("node '") and "': " in msg:
        return msg.split("': ", 1)[1]
    return msg


class _OutOfBudget(Exception):
    """The search spent its budget."""


class _Search:
    """Randomized backtracking search for valid instances of one rule."""

    def __init__(
        self,
        plan: _Plan,
        ruleset: _core.RuleSet,
        index: int,
        rng: np.random.Generator,
        budget: int,
    ) -> None:
        self.plan = plan
        self.ruleset = ruleset
        self.index = index
        self.r = random.Random(int(rng.integers(2**63)))
        self.budget = budget
        self.steps = 0
        self.builder = _Builder(Graph())
        self.rejections: Counter[str] = Counter()
        self.learned: dict[str, Any] = {}  # var -> value of the last valid instance
        self.mixed_dtypes = False
        self.dtypes_ok = _dtypes_supported()
        # Per-instance state.
        self.assign: dict[str, Any] = {}
        self.shapes: list[tuple[int, ...]] = []  # shapes seen in this instance
        self.fresh: tuple[int, ...] = ()
        self.restart_left = 0
        self.base_rank = 2
        self.replay: dict[str, _Tensor] = {}
        self.seen: set[tuple] = set()  # signatures of the instances found
        self.p_copy = 0.3
        self.p_edit = 0.4
        self.use_siblings = False

    # ---------------------------------------------------------------- driving
    def find(self) -> dict[str, Any] | None:
        """One valid assignment (a new random one each call), or None when the budget is
        spent."""
        if self.plan.ground:
            try:
                for t in self.plan.ground:
                    self.builder.build(t, {})
            except GraphError as e:
                self.rejections[_short(str(e))] += 1
                return None
        while self.steps < self.budget:
            # Float32 first; after half the budget without any instance, other dtypes too.
            self.mixed_dtypes = (
                self.dtypes_ok and not self.learned and self.steps >= self.budget // 2
            )
            self.assign = {}
            self.shapes = []
            self.fresh = tuple(self.r.sample(_FRESH_DIMS, 3))
            self.restart_left = _RESTART_STEPS
            # Most random candidates of one restart share a rank (rules are often
            # rank-homogeneous); the rank a variable had in the last instance is preferred.
            self.base_rank = self.r.choices(_RANKS, _RANK_WEIGHTS)[0]
            self.replay = self._replay() if self.r.random() < 0.5 else {}
            # Each restart mixes copies, edits and random shapes in its own proportions,
            # so instances differ in which dimensions relate, not only in their sizes.
            self.use_siblings = self.r.random() < 0.5
            self.p_copy = self.r.uniform(0.1, 0.5)
            self.p_edit = self.r.uniform(0.3, 0.9 - self.p_copy)
            try:
                if self._dfs(0):
                    found = dict(self.assign)
                    self.learned = found
                    return found
            except _OutOfBudget:
                continue
            if not self.plan.order:
                return None  # nothing to vary: the one candidate failed
        return None

    def _replay(self) -> dict[str, _Tensor]:
        """The last instance's tensors with their dimensions renamed at random (equal
        dimensions stay equal): tried first, so later instances are cheap to find while
        still varying in size."""
        dims = sorted({d for v in self.learned.values() if isinstance(v, _Tensor) for d in v.shape})
        rename = {d: d if self.r.random() < 0.3 else self.r.choice(_FRESH_DIMS) for d in dims}
        return {
            var: _Tensor(tuple(rename[d] for d in v.shape), v.dtype, self.r.random() < 0.3)
            for var, v in self.learned.items()
            if isinstance(v, _Tensor)
        }

    def _dfs(self, i: int) -> bool:
        plan = self.plan
        if i == len(plan.order):
            if plan.cond_step == -1 and not self._conditions_hold():
                self.rejections["the rule's conditions do not hold"] += 1
                return False
            # Prefer instances whose pattern of equal dimensions is new: a repeat is
            # accepted with probability 0.5 only, so the search moves on to neighbours.
            sig = _signature(self.assign)
            if sig in self.seen and self.r.random() < 0.5:
                return False
            self.seen.add(sig)
            return True
        var = plan.order[i]
        for cand in self._candidates(var):
            if self.steps >= self.budget or self.restart_left <= 0:
                raise _OutOfBudget
            self.steps += 1
            self.restart_left -= 1
            self.assign[var] = cand
            mark = len(self.shapes)
            if self._complete(i) and self._dfs(i + 1):
                return True
            del self.assign[var]
            del self.shapes[mark:]
        return False

    def _complete(self, i: int) -> bool:
        """Type-check the sub-terms variable ``i`` completes; conditions when due."""
        val = self.assign[self.plan.order[i]]
        if isinstance(val, _Tensor):
            self.shapes.append(val.shape)
        for t in self.plan.completes[i]:
            try:
                nid = self.builder.build(t, self.assign)
            except GraphError as e:
                self.rejections[_short(str(e))] += 1
                return False
            ty = self.builder.g.nodes[nid].type
            for part in ty if isinstance(ty, tuple) else (ty,):
                self.shapes.append(part.shape)
        if i == self.plan.cond_step and not self._conditions_hold():
            self.rejections["the rule's conditions do not hold"] += 1
            return False
        return True

    def _conditions_hold(self) -> bool:
        return bool(self.ruleset.check_conditions(self.index, _bindings(self.assign)))

    # ---------------------------------------------------------------- candidates
    def _candidates(self, var: str) -> Iterator[Any]:
        info = self.plan.info[var]
        if info.kind == "tensor":
            return self._tensor_candidates(var)
        if info.kind == "int":
            return iter(self._int_candidates(info))
        if info.kind == "float":
            return iter(self._shuffled(_float_domain(info.operand)))
        if info.kind == "list":
            return iter(self._list_candidates(info))
        if info.kind == "sym":
            return iter(self._sym_candidates(info))
        raise AssertionError(f"unplanned kind {info.kind}")  # pragma: no cover

    def _shuffled(self, xs: Iterable[Any]) -> list[Any]:
        out = list(xs)
        self.r.shuffle(out)
        return out

    def _dims(self) -> list[int]:
        ds = set(self.fresh)
        for s in self.shapes:
            ds.update(s)
        return sorted(ds)

    def _tensor_candidates(self, var: str) -> Iterator[_Tensor]:
        """Up to :data:`_TENSOR_CANDIDATES` distinct shapes, drawn lazily: a shape
        already in the instance, an edit of one, or a random shape over the instance's
        dimensions (rank: the variable's last one, this restart's, or random)."""
        r = self.r
        dims = self._dims()
        pool = list(dict.fromkeys(self.shapes))
        prev = self.learned.get(var)
        prev_rank = len(prev.shape) if isinstance(prev, _Tensor) else None
        seen: set[tuple[int, ...]] = set()
        first = self.replay.get(var)
        if first is not None:
            seen.add(first.shape)
            yield first
        # Shapes beside the variable in its application: its sibling operands' own shapes
        # (elementwise operands) and vectors along one of their axes (per-channel
        # parameters); a few of them, in random order, before the random draws.
        # (In addition to the random candidates.)
        extra = 0
        near = self._sibling_shapes(var) if self.use_siblings else []
        for s in near[:_SIBLING_CANDIDATES]:
            if s not in seen and prod(s) <= _MAX_NUMEL:
                seen.add(s)
                extra += 1
                yield _Tensor(s, self._dtype_for(var), r.random() < 0.3)
        for _ in range(6 * _TENSOR_CANDIDATES):
            if len(seen) >= _TENSOR_CANDIDATES + extra:
                return
            u = r.random()
            if pool and u < self.p_copy:
                s = r.choice(pool)
            elif pool and u < self.p_copy + self.p_edit:
                s = self._mutate(r.choice(pool), dims)
            else:
                v = r.random()
                if prev_rank is not None and v < 0.6:
                    k = prev_rank
                elif v < 0.7:
                    k = self.base_rank
                else:
                    k = r.choices(_RANKS, _RANK_WEIGHTS)[0]
                s = tuple(r.choice(dims) for _ in range(k))
            if s in seen or prod(s) > _MAX_NUMEL:
                continue
            seen.add(s)
            yield _Tensor(s, self._dtype_for(var), r.random() < 0.3)

    def _sibling_shapes(self, var: str) -> list[tuple[int, ...]]:
        """Shapes of the tensor operands beside ``var`` in its application that are
        complete (those of tensor variables first), and vectors along each one's axes
        (``(d,)`` and the broadcasting ``(d, 1, ..., 1)``); shuffled within the two
        groups."""
        info = self.plan.info[var]
        peers: list[tuple[int, ...]] = []  # tensor variables beside it: tried first
        own: list[tuple[int, ...]] = []
        for (_, kind), a in zip(_kinds_of(info.app), info.app[1:], strict=True):
            if kind != "tensor" or a == var or not _vars_in(a) <= set(self.assign):
                continue
            try:
                ty = self.builder.g.nodes[self.builder.build(a, self.assign)].type
            except GraphError:
                continue
            if isinstance(ty, TensorType):
                (peers if _is_var(a) else own).append(ty.shape)
        # Per-axis vectors: (d,), and (d, 1, ..., 1) as it broadcasts along that axis.
        axes = [
            v
            for s in [*peers, *own]
            for k, d in enumerate(s)
            for v in ((d,), (d, *([1] * (len(s) - 1 - k))))
        ]
        rest = [*own, *axes]
        return list(dict.fromkeys([*self._shuffled(peers), *self._shuffled(rest)]))

    def _dtype_for(self, var: str) -> str:
        """float32, unless the last instance gave ``var`` another dtype or the search
        has found nothing in float32 for half its budget."""
        prev = self.learned.get(var)
        if isinstance(prev, _Tensor):
            return prev.dtype
        if self.mixed_dtypes and self.r.random() < 0.5:
            return self.r.choice(_ALL_DTYPES)
        return "float32"

    def _mutate(self, shape: tuple[int, ...], dims: list[int]) -> tuple[int, ...]:
        """``shape`` with a random edit: a dimension changed, divided by one of its
        divisors or multiplied by 2, dropped or inserted, or two swapped."""
        r = self.r
        s = list(shape)
        u = r.random()
        if s and u < 0.25:
            s[r.randrange(len(s))] = r.choice(dims)
        elif s and u < 0.6:
            k = r.randrange(len(s))
            divisors = [q for q in range(2, s[k] + 1) if s[k] % q == 0]
            s[k] = s[k] // r.choice(divisors) if divisors and r.random() < 0.6 else 2 * s[k]
        elif s and u < 0.7:
            del s[r.randrange(len(s))]
        elif len(s) < 4 and u < 0.8:
            s.insert(r.randrange(len(s) + 1), r.choice(dims))
        elif len(s) > 1 and u < 0.9:
            a, b = r.sample(range(len(s)), 2)
            s[a], s[b] = s[b], s[a]
        elif s:
            return self._mutate(self._mutate(shape, dims), dims)
        return tuple(s)

    def _operand_shape(self, info: _VarInfo) -> tuple[int, ...] | None:
        """Shape of the first tensor operand beside ``info``'s parameter (complete by
        the search order), or None."""
        for (_, kind), a in zip(_kinds_of(info.app), info.app[1:], strict=True):
            if kind == "tensor":
                try:
                    ty = self.builder.g.nodes[self.builder.build(a, self.assign)].type
                except GraphError:
                    return None
                return ty.shape if isinstance(ty, TensorType) else None
        return None

    def _int_candidates(self, info: _VarInfo) -> list[int]:
        name = info.operand.lower()
        fixed = {"act": (0, 1, 2, 3), "pad": (0, 1), "count": (1, 2), "keepdims": (0, 1)}
        if name in fixed:
            return self._shuffled(fixed[name])
        if name.startswith("stride"):
            return self._shuffled((1, 2))
        if name.startswith("kernel"):
            return self._shuffled((1, 2, 3))
        shape = self._operand_shape(info)
        rank = len(shape) if shape is not None else 4
        if name.startswith("axis") or name == "dim":
            return self._shuffled(range(max(rank, 1)))
        if name == "ndim":
            return [rank, *self._shuffled([r for r in range(5) if r != rank])]
        return self._shuffled((0, 1, 2, 3, -1))

    def _list_candidates(self, info: _VarInfo) -> list[tuple[int, ...]]:
        r = self.r
        name = info.operand.lower()
        shape = self._operand_shape(info) or ()
        rank = len(shape)
        out: list[tuple[int, ...]] = []
        if name == "perm":
            out = self._shuffled(itertools.permutations(range(rank)))
        elif name == "axes" and rank:
            out = self._shuffled(
                c for k in range(1, rank + 1) for c in itertools.combinations(range(rank), k)
            )
        elif name in ("shape", "sizes"):
            # Shapes of the operand's element count: those already in the instance, and
            # random factorizations of the count; then edits of the operand's shape.
            vol = prod(shape)
            out = self._shuffled(s for s in dict.fromkeys(self.shapes) if prod(s) == vol)
            out += [_factorize(vol, r.randint(1, 4), r) for _ in range(4)]
            out += [self._mutate(shape, self._dims()) for _ in range(3)]
            # The operand's own shape (identity reshapes), and shapes it broadcasts to: a
            # new leading axis, size-1 axes stretched.
            own = tuple(shape)
            out.insert(r.randrange(len(out) + 1), own)
            dims = self._dims()
            out.append((r.choice(dims), *own))
            out.append(tuple(r.choice(dims) if d == 1 else d for d in own))
        elif name == "pads":
            out = [tuple(r.randrange(3) for _ in range(2 * rank)) for _ in range(6)]
        if name not in ("perm", "axes"):
            # Small integer lists, as long as a list already chosen beside this one.
            lens = [
                len(self.assign[a])
                for a in info.app[1:]
                if _is_var(a) and _is_list(self.assign.get(a))
            ]
            for _ in range(_LIST_CANDIDATES):
                n = r.choice(lens) if lens else r.randint(1, max(rank, 1))
                out.append(tuple(r.randint(-1, 3) for _ in range(n)))
        return list(dict.fromkeys(out))[: 2 * _LIST_CANDIDATES]

    def _sym_candidates(self, info: _VarInfo) -> list[str]:
        name = info.operand.lower()
        if name in ("perm", "shape"):  # dimension-list symbols (d0_d1_...)
            lists = self._list_candidates(info)
            return [
                "_".join(str(d) for d in s) for s in lists if len(s) != 1 and min(s, default=0) >= 0
            ]
        return self._shuffled(_sym_domain(name))


def _sym_domain(name: str) -> tuple[str, ...]:
    if "dtype" in name:
        return _ALL_DTYPES
    if name == "mode":
        return ("constant", "reflect", "edge", "nearest", "linear")
    return ()


def _float_domain(name: str) -> tuple[float, ...]:
    if "eps" in name:
        return (1e-5, 1e-3)
    return (-1.0, -0.5, 0.0, 0.5, 1.0, 2.0)


def _factorize(vol: int, k: int, r: random.Random) -> tuple[int, ...]:
    """A random ordered factorization of ``vol`` into ``k`` positive factors."""
    out = [1] * k
    n = vol
    p = 2
    while n > 1:
        while n % p:
            p += 1
        out[r.randrange(k)] *= p
        n //= p
    return tuple(out)


def _signature(assign: dict[str, Any]) -> tuple:
    """The pattern of an assignment up to renaming dimensions: each tensor's dimensions
    numbered by first occurrence (with the other values as they are)."""
    ids: dict[int, int] = {}
    out = []
    for v in sorted(assign):
        val = assign[v]
        if isinstance(val, _Tensor):
            out.append((tuple(ids.setdefault(d, len(ids)) for d in val.shape), val.dtype))
        else:
            out.append(val)
    return tuple(out)


def _is_list(val: Any) -> bool:
    return isinstance(val, tuple) and not isinstance(val, _Tensor)


def _bindings(assign: dict[str, Any]) -> dict[str, Any]:
    """What ``RuleSet.check_conditions`` reads: tensors as (shape, constant, dtype), ints,
    floats, and lists of ints (Python lists)."""
    out: dict[str, Any] = {}
    for v, val in assign.items():
        if isinstance(val, _Tensor):
            out[v] = (list(val.shape), val.weight, val.dtype)
        elif isinstance(val, int | float) and not isinstance(val, bool):
            out[v] = val
        elif _is_list(val):
            out[v] = [int(i) for i in val]
    return out


def _unsupported(plan: _Plan) -> str | None:
    """Why some variable cannot be instantiated, or None."""
    for v in plan.order:
        info = plan.info[v]
        if info.kind == "pair":
            return (
                f"variable {v} stands for a split pair (operand `{info.operand}` of "
                f"{info.app[0]}): pairs cannot be drawn"
            )
        if info.kind == "sym" and info.operand.lower() not in ("perm", "shape"):
            if not _sym_domain(info.operand.lower()):
                return (
                    f"no values to try for symbol parameter `{info.operand}` of {info.app[0]} ({v})"
                )
        if info.kind not in ("tensor", "int", "float", "list", "sym"):
            return f"variable {v} has operand kind `{info.kind}`, which the checker cannot draw"
    return None


# --------------------------------------------------------------------------- evaluation
def _build(terms: Sequence[Term], assign: dict[str, Any]) -> Graph:
    """A graph whose outputs are ``terms`` under ``assign`` (leaves named after the vars)."""
    b = _Builder(Graph(), leaf_name=lambda v: v[1:])
    b.g.outputs = [b.build(t, assign) for t in terms]
    return b.g


def _feeds(
    g: Graph, positive: set[str], rng: np.random.Generator, all_positive: bool = False
) -> dict[str, np.ndarray]:
    """Feeds for every leaf: float leaves standard normal in float64 (uniform in [0.5, 1.5]
    for variances, or for all when ``all_positive``), integers small and non-zero,
    booleans random."""
    feeds: dict[str, np.ndarray] = {}
    for n in g.nodes:
        if n.op not in ("input", "weight"):
            continue
        t: TensorType = n.type  # type: ignore[assignment]
        dtype = getattr(t, "dtype", "float32")
        if dtype == "bool":
            feeds[n.name] = rng.random(t.shape) < 0.5
        elif dtype.startswith("int"):
            a = rng.integers(1, 4, t.shape) * rng.choice([-1, 1], t.shape)
            feeds[n.name] = a.astype(dtype)
        elif all_positive or "?" + n.name in positive:
            feeds[n.name] = rng.uniform(0.5, 1.5, t.shape)
        else:
            feeds[n.name] = rng.standard_normal(t.shape)
    return feeds


def _rel_error(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not (np.array_equal(fa, fb) and np.array_equal(a[~fa], b[~fb])):
        return float("inf")
    diff = float(np.max(np.abs(a[fa] - b[fb]), initial=0.0))
    scale = max(
        float(np.max(np.abs(a[fa]), initial=0.0)), float(np.max(np.abs(b[fb]), initial=0.0))
    )
    if diff == 0.0:
        return 0.0
    return diff / scale if scale > 0 else float("inf")


def _types(g: Graph) -> list[tuple[tuple[int, ...], str]]:
    return [(t.shape, getattr(t, "dtype", "float32")) for t in g.output_types()]


def _retyped(assign: dict[str, Any], dtype: str) -> dict[str, Any] | None:
    """``assign`` with every float32 tensor re-typed to ``dtype`` (None if none is)."""
    out = dict(assign)
    changed = False
    for v, val in assign.items():
        if isinstance(val, _Tensor) and val.dtype == "float32":
            out[v] = _Tensor(val.shape, dtype, val.weight)
            changed = True
    return out if changed else None


# --------------------------------------------------------------------------- results
@dataclass
class RuleResult:
    """The verdict on one rule.

    Attributes:
        name: the rule's name (``name-rev`` for the reverse of a ``<=>`` rule).
        file: the rule file.
        line: 1-based line where the rule starts.
        status: ``"PASS"``, ``"FAIL"`` or ``"UNTESTABLE"``.
        instances: number of valid instances evaluated.
        max_rel_error: largest relative error seen over all instances and output pairs.
        reason: for FAIL, what disagreed; for UNTESTABLE, why no instance was found.
        shapes: for FAIL, the failing instance: variable -> shape (float32 tensors; a
            ``{"shape", "dtype"}`` object for other dtypes) or value (parameters).
        weights: tensor variables fed as ``weight`` in the failing instance.
    """

    name: str
    file: str
    line: int
    status: str
    instances: int = 0
    max_rel_error: float = 0.0
    reason: str = ""
    shapes: dict[str, Any] = field(default_factory=dict)
    weights: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    """All verdicts of one run; ``counts`` by status, ``ok`` when nothing failed."""

    results: list[RuleResult]
    tolerance: float = TOLERANCE

    @property
    def counts(self) -> dict[str, int]:
        """``{"PASS": n, "FAIL": n, "UNTESTABLE": n}``."""
        c = Counter(r.status for r in self.results)
        return {k: c.get(k, 0) for k in ("PASS", "FAIL", "UNTESTABLE")}

    @property
    def ok(self) -> bool:
        """True when no rule failed."""
        return self.counts["FAIL"] == 0

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object: ``tolerance``, ``counts`` and one entry per rule."""
        rules = []
        for r in self.results:
            d = asdict(r)
            if not np.isfinite(d["max_rel_error"]):
                d["max_rel_error"] = None
            rules.append(d)
        return {"tolerance": self.tolerance, "counts": self.counts, "rules": rules}


class _Stop(Exception):
    """The rule's verdict is decided (FAIL or UNTESTABLE already written)."""


def check_rule(
    ruleset: _core.RuleSet,
    index: int,
    *,
    file: str = "",
    samples: int = 10,
    attempts: int = ATTEMPTS,
    seed: int = 0,
) -> RuleResult:
    """Check rule ``index`` of ``ruleset`` numerically.

    Args:
        ruleset: the parsed rules.
        index: position of the rule in ``ruleset.describe()``.
        file: the file name to report.
        samples: valid instances (assignments, each with fresh random inputs) to
            evaluate; PASS needs at least one and every one to agree.
        attempts: search budget: candidate values assigned to variables, all samples
            together, before giving up (UNTESTABLE when no instance was found).
        seed: base random seed (combined with the rule name, so results do not depend
            on the rule's position).

    Returns:
        the :class:`RuleResult`: a bad rule is FAIL or UNTESTABLE with a reason.

    Raises:
        ValueError: the checker cannot read a pattern the core printed (a checker bug).
    """
    return _check_rule(
        ruleset,
        index,
        ruleset.describe()[index],
        file,
        samples=samples,
        attempts=attempts,
        seed=seed,
    )


def _check_rule(
    ruleset: _core.RuleSet,
    index: int,
    described: tuple,
    file: str,
    *,
    samples: int,
    attempts: int,
    seed: int,
) -> RuleResult:
    name, src_txt, tgt_txt, line = described
    res = RuleResult(name=name, file=file, line=int(line), status="UNTESTABLE")
    sources = [parse_pattern(s) for s in src_txt]
    targets = [parse_pattern(t) for t in tgt_txt]
    if len(sources) != len(targets):
        res.reason = f"{len(sources)} sources but {len(targets)} targets"
        return res
    from tensat_py.rules_check_ks import check_ks_rule, is_knossos_rule

    # A rule of a Knossos rule file is a Knossos rule, its scalar arithmetic included.
    if is_knossos_rule(sources, targets) or file.rsplit("/", 1)[-1].startswith("knossos_"):
        return check_ks_rule(
            ruleset, index, described, sources, targets, res,
            samples=samples, attempts=attempts, seed=seed,
        )  # fmt: skip
    plan = _plan(ruleset, index, sources, targets)
    why = _unsupported(plan)
    if why:
        res.reason = why
        return res
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    search = _Search(plan, ruleset, index, rng, attempts)
    done = 0
    try:
        while done < samples:
            assign = search.find()
            if assign is None:
                break
            done += _evaluate(res, plan, assign, rng)
            res.instances = done
            if done == 1:  # one instance in another float dtype, where it type-checks
                alt = _other_dtype_instance(search, plan, assign)
                if alt is not None:
                    done += _evaluate(res, plan, alt, rng)
                    res.instances = done
    except _Stop:
        return res
    if done:
        res.status = "PASS"
        return res
    common = ", ".join(f"{msg} (x{n})" for msg, n in search.rejections.most_common(2))
    res.reason = f"no valid instance in {search.steps} attempts: {common or 'nothing type-checks'}"
    return res


def _other_dtype_instance(
    search: _Search, plan: _Plan, assign: dict[str, Any]
) -> dict[str, Any] | None:
    """``assign`` re-typed from float32 to float16, when both sides type-check there."""
    if not search.dtypes_ok:
        return None
    alt = _retyped(assign, "float16")
    if alt is None:
        return None
    try:
        for t in [*plan.sources, *plan.targets]:
            search.builder.build(t, alt)
    except GraphError:
        return None
    return alt


def _evaluate(
    res: RuleResult, plan: _Plan, assign: dict[str, Any], rng: np.random.Generator
) -> int:
    """Evaluate one valid instance; 1 when it counts, 0 when discarded. Raises
    :class:`_Stop` after writing a FAIL / UNTESTABLE verdict into ``res``."""
    src = _build(plan.sources, assign)
    tgt = _build(plan.targets, assign)
    st, tt = _types(src), _types(tgt)
    if st != tt:
        _fail_with(res, assign, f"source and target types differ: {_fmt(st)} vs {_fmt(tt)}")
        raise _Stop
    a_out = None
    for all_positive in (False, True):
        feeds = _feeds(src, plan.positive, rng, all_positive)
        try:
            with np.errstate(all="ignore"):
                a_out = run(src, feeds)
        except ValueError as e:
            res.reason = f"executor cannot run the source: {e}"
            raise _Stop from None
        if all(np.all(np.isfinite(np.asarray(a, dtype=np.float64))) for a in a_out):
            break
        a_out = None
    if a_out is None:
        return 0  # the source is not finite on random inputs: no instance
    try:
        with np.errstate(all="ignore"):
            b_out = run(tgt, feeds)
    except ValueError as e:
        if "unknown operator" in str(e):
            res.reason = f"executor cannot run the target: {e}"
        else:
            _fail_with(res, assign, f"the target does not evaluate: {e}")
        raise _Stop from None
    for k, (a, b) in enumerate(zip(a_out, b_out, strict=True)):
        err = _rel_error(a, b)
        res.max_rel_error = max(res.max_rel_error, err)
        if not err <= TOLERANCE:
            what = f"output {k}: " if len(a_out) > 1 else ""
            _fail_with(
                res,
                assign,
                f"{what}relative error {err:.3g} > {TOLERANCE:g} "
                f"(max |source| {float(np.max(np.abs(a), initial=0)):.3g}, "
                f"max |target| {float(np.max(np.abs(b), initial=0)):.3g}) "
                f"at output shape {list(np.shape(a))}",
            )
            raise _Stop
    return 1


def _fmt(types: list[tuple[tuple[int, ...], str]]) -> str:
    return ", ".join(f"{list(s)}" + ("" if d == "float32" else f":{d}") for s, d in types)


def _fail_with(res: RuleResult, assign: dict[str, Any], reason: str) -> None:
    res.status = "FAIL"
    res.reason = reason
    shapes: dict[str, Any] = {}
    for v, val in assign.items():
        if isinstance(val, _Tensor):
            shapes[v] = (
                list(val.shape)
                if val.dtype == "float32"
                else {"shape": list(val.shape), "dtype": val.dtype}
            )
        elif _is_list(val):
            shapes[v] = list(val)
        else:
            shapes[v] = val
    res.shapes = dict(sorted(shapes.items()))
    res.weights = sorted(v for v, val in assign.items() if isinstance(val, _Tensor) and val.weight)


def check_ruleset(
    ruleset: _core.RuleSet,
    *,
    file: str = "",
    samples: int = 10,
    attempts: int = ATTEMPTS,
    seed: int = 0,
) -> list[RuleResult]:
    """:func:`check_rule` for every rule of ``ruleset``, in file order."""
    return [
        _check_rule(ruleset, i, d, file, samples=samples, attempts=attempts, seed=seed)
        for i, d in enumerate(ruleset.describe())
    ]


def default_files() -> list[Path]:
    """The shipped rule files (``rules/*.rules``), sorted."""
    from tensat_py.rule_files import RULES_DIR

    return sorted(RULES_DIR.glob("*.rules"))


def check_files(
    files: Sequence[str | Path] = (),
    *,
    samples: int = 10,
    attempts: int = ATTEMPTS,
    seed: int = 0,
) -> CheckReport:
    """Check every rule of ``files`` (default: every shipped rule file).

    A file may be a shipped name (``"taso"``) or a path.

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: a file does not parse (``file:line:col: message``); a built-in rule set
            (``fold``, ``layout``), whose computed targets no rule file can write and
            which the Rust tests check, is named.
    """
    from tensat_py.rule_files import FOLD, LAYOUT, load_rules

    paths = list(files) or default_files()
    results: list[RuleResult] = []
    for f in paths:
        if str(f) in (FOLD, LAYOUT) and not Path(f).exists():
            raise ValueError(
                f"'{f}' is a built-in rule set with computed targets, not a rule file; "
                "the Rust tests check it (rust/src/saturate.rs, docs/rules.md)"
            )
        rs = load_rules(f)
        label = str(f)
        if not Path(f).exists():  # a shipped name such as "taso"
            from tensat_py.rule_files import RULES_DIR

            label = str(RULES_DIR / f"{f}.rules")
        results.extend(check_ruleset(rs, file=label, samples=samples, attempts=attempts, seed=seed))
    return CheckReport(results)
