"""Numerical soundness check of rewrite rules (``tensat rules check``).

Every rule of a rule file is instantiated at several random shape assignments and both
sides are evaluated with the NumPy reference executor in float64 on the same random
inputs:

1. The source and target patterns are parsed (texts from ``RuleSet.describe()``) and
   every ``?variable`` gets the kind of the operand it stands for (tensor, integer
   parameter, symbol parameter) from the operator signatures.
2. Ranks, then dimensions, are drawn: a small unifier collects what the operators
   require (equal shapes for ``ewadd``, equal inner dimensions for ``matmul``, equal
   off-axis dimensions for ``concat``, source i and target i of equal shape, ...) and
   random sizes are drawn for what is left free. Integer-parameter variables take values
   from their allowed sets (activation 0..3, padding 0/1, strides 1/2, pooling kernels
   1..3, merge counts 1/2, axes below the rank). This only proposes shapes: the Rust
   analysis (through :class:`tensat_py.graph.Graph`) decides whether both sides
   type-check, and the rule's own conditions are evaluated by the Rust core
   (``RuleSet.check_conditions``); proposals that fail either are discarded.
3. Source i and target i are compared output by output: relative error
   ``max|a - b| / max(max|a|, max|b|)`` against :data:`TOLERANCE`.

Outcomes per rule: ``PASS`` (every instance agreed), ``FAIL`` (an instance disagreed:
the shapes, the parameters and the error are reported) or ``UNTESTABLE`` (no valid
instance was found in the attempt budget, or the executor cannot run an operator; the
reason is reported).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensat_py import _core
from tensat_py.graph import Graph, GraphError, parse_dims, signatures
from tensat_py.runtime.numpy_exec import run

__all__ = [
    "TOLERANCE",
    "RuleResult",
    "CheckReport",
    "check_rule",
    "check_ruleset",
    "check_files",
    "parse_pattern",
]

#: Relative-error threshold for float64 evaluation. Rewrites only reorder exact real
#: arithmetic (re-associated sums, split/concat bookkeeping), so with the small random
#: shapes used here (reductions of at most a few hundred terms) the round-off is
#: ``~1e-15`` relative; a semantically different rule disagrees by ``O(1)``. 1e-9 leaves
#: six orders of magnitude of margin on both sides.
TOLERANCE = 1e-9

Term = str | list  # an atom (``?x``, ``3``, ``1_0``) or ``[op, child, ...]``

_KERNEL = (1, 3)
_SPATIAL = (3, 4, 5, 6)
_DEFAULT = (2, 3, 4, 5)


# --------------------------------------------------------------------------- patterns
def parse_pattern(text: str) -> Term:
    """Parse a pattern s-expression (``(matmul 0 ?a ?b)``) into nested lists.

    Raises:
        ValueError: unbalanced parentheses or trailing text.
    """
    toks = text.replace("(", " ( ").replace(")", " ) ").split()
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
            return out
        if t == ")":
            raise ValueError(f"unmatched `)` in pattern `{text}`")
        return t

    term = read()
    if pos != len(toks):
        raise ValueError(f"trailing text in pattern `{text}`")
    return term


def _is_var(t: Term) -> bool:
    return isinstance(t, str) and t.startswith("?")


def _var_kinds(terms: Iterable[Term]) -> dict[str, tuple[str, str]]:
    """``{?var: (kind, operand name)}`` from the operand positions the variables fill."""
    sigs = signatures()
    kinds: dict[str, tuple[str, str]] = {}

    def walk(t: Term) -> None:
        if not isinstance(t, list):
            return
        op, args = t[0], t[1:]
        sig = sigs.get(op)
        if sig is None or len(sig) != len(args):
            raise ValueError(f"`{op}` is not an operator with {len(args)} operands")
        for (name, kind), a in zip(sig, args, strict=True):
            if _is_var(a):
                kinds.setdefault(a, (kind, name))  # type: ignore[arg-type]
            walk(a)

    for t in terms:
        walk(t)
    return kinds


# --------------------------------------------------------------------------- unifiers
class _Ranks:
    """Union-find over tensor terms' ranks with fixed values and lower bounds."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.fixed: list[int | None] = []
        self.low: list[int] = []

    def new(self, fixed: int | None = None, low: int = 1) -> int:
        self.parent.append(len(self.parent))
        self.fixed.append(fixed)
        self.low.append(low)
        return len(self.parent) - 1

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        fa, fb = self.fixed[a], self.fixed[b]
        if fa is not None and fb is not None and fa != fb:
            raise _NoInstance(f"rank {fa} and rank {fb} required of one tensor")
        self.parent[b] = a
        self.fixed[a] = fa if fa is not None else fb
        self.low[a] = max(self.low[a], self.low[b])

    def fix(self, a: int, r: int) -> None:
        self.union(a, self.new(fixed=r))

    def at_least(self, a: int, r: int) -> None:
        a = self.find(a)
        self.low[a] = max(self.low[a], r)


class _Dims:
    """Union-find over dimension sizes; a class is free (drawn from a hint set) or
    derived from others (a sum, a multiple, a convolution output size, a constant)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.parent: list[int] = []
        self.hint: list[tuple[int, ...]] = []
        self.derive: list[tuple | None] = []
        self.value: dict[int, int] = {}

    def new(self, hint: tuple[int, ...] = _DEFAULT, derive: tuple | None = None) -> int:
        self.parent.append(len(self.parent))
        self.hint.append(hint)
        self.derive.append(derive)
        return len(self.parent) - 1

    def find(self, a: int) -> int:
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a == b:
            return
        self.parent[b] = a
        if self.derive[a] is None:
            self.derive[a] = self.derive[b]
        # Kernel sizes are the most constrained hint, then spatial sizes.
        rank = {_KERNEL: 2, _SPATIAL: 1}
        if rank.get(self.hint[b], 0) > rank.get(self.hint[a], 0):
            self.hint[a] = self.hint[b]

    def set_hint(self, a: int, hint: tuple[int, ...]) -> None:
        self.hint[self.find(a)] = hint

    def get(self, a: int, depth: int = 0) -> int:
        a = self.find(a)
        if a in self.value:
            return self.value[a]
        if depth > 64:
            raise _NoInstance("dimension constraints are cyclic")
        d = self.derive[a]
        if d is None:
            v = int(self.rng.choice(self.hint[a]))
        elif d[0] == "const":
            v = d[1]
        elif d[0] == "sum":
            v = sum(self.get(c, depth + 1) for c in d[1])
        elif d[0] == "mul":
            v = self.get(d[1], depth + 1) * d[2]
        elif d[0] == "window":  # conv / pool output size
            _, size, kernel, stride, pad = d
            h = self.get(size, depth + 1)
            k = kernel if isinstance(kernel, int) else self.get(kernel, depth + 1)
            v = -(-h // stride) if pad == 0 else -(-(h - k + 1) // stride)
        else:  # pragma: no cover - internal
            raise AssertionError(d)
        if v < 1:
            raise _NoInstance(f"a dimension would be {v}")
        self.value[a] = v
        return v


class _NoInstance(Exception):
    """This attempt produced no valid instance (the message says why)."""


# --------------------------------------------------------------------------- instances
@dataclass
class _Instance:
    ints: dict[str, int]
    syms: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    weights: set[str]


_ELEMENTWISE_UNARY = {"relu", "tanh", "sigmoid", "dropout"}
_CONCATS = {"concat": 2, "concat3": 3, "concat4": 4, "concat5": 5}


def _int_choices(name: str) -> tuple[int, ...] | None:
    if name == "act":
        return (0, 1, 2, 3)
    if name == "pad":
        return (0, 1)
    if name.startswith("stride"):
        return (1, 2)
    if name.startswith("kernel"):
        return (1, 2, 3)
    if name == "count":
        return (1, 2)
    return None  # axis / ndim: depend on ranks


def _propose(
    pairs: Sequence[tuple[Term, Term]],
    kinds: dict[str, tuple[str, str]],
    rng: np.random.Generator,
) -> _Instance:
    """Draw one candidate assignment of every variable (may still fail to type-check)."""
    sigs = signatures()
    ints: dict[str, int] = {}
    syms: dict[str, str] = {}
    for v, (kind, name) in kinds.items():
        if kind == "pair":
            raise _NoInstance(f"variable {v} stands for a split pair")
        if kind == "int":
            ch = _int_choices(name)
            if ch is not None:
                ints[v] = int(rng.choice(ch))
        if kind == "sym" and name not in ("perm", "shape"):
            raise _NoInstance(f"variable {v} stands for a `{name}` symbol")

    def int_of(t: Term) -> int | None:
        if _is_var(t):
            return ints.get(t)  # type: ignore[arg-type]
        try:
            return int(t)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None

    # ---- pass 1: ranks
    ranks = _Ranks()
    rank_of: dict[int, int] = {}  # id(term) -> rank node
    var_rank: dict[str, int] = {}
    ndim_links: list[tuple[str, int]] = []  # (ndim var, rank node)
    axis_links: list[tuple[str, int]] = []
    perm_links: list[tuple[str, int]] = []

    def rk(t: Term) -> int:
        if _is_var(t):
            if t not in var_rank:
                var_rank[t] = ranks.new()  # type: ignore[index]
            return var_rank[t]  # type: ignore[index]
        key = id(t)
        if key in rank_of:
            return rank_of[key]
        op, args = t[0], t[1:]
        sig = sigs[op]
        ten = [a for (_, k), a in zip(sig, args, strict=True) if k in ("tensor", "pair")]
        par = {n: a for (n, k), a in zip(sig, args, strict=True) if k in ("int", "sym")}
        sub = [rk(a) for a in ten]
        if op in ("ewadd", "ewmul") or op in _ELEMENTWISE_UNARY:
            out = sub[0]
            for s in sub[1:]:
                ranks.union(out, s)
        elif op == "matmul":
            out = sub[0]
            ranks.union(out, sub[1])
            ranks.at_least(out, 2)
        elif op in ("conv2d", "enlarge"):
            out = sub[0]
            ranks.union(out, sub[1])
            ranks.fix(out, 4)
        elif op in ("poolmax", "poolavg", "merge"):
            out = sub[0]
            ranks.fix(out, 4)
        elif op == "transpose":
            out = sub[0]
            p = par["perm"]
            if _is_var(p):
                perm_links.append((p, out))  # type: ignore[arg-type]
            else:
                ranks.fix(out, len(parse_dims(str(p))))
        elif op == "reshape":
            s = par["shape"]
            out = ranks.new(fixed=None if _is_var(s) else len(parse_dims(str(s))))
        elif op in _CONCATS:
            out = sub[0]
            for s in sub[1:]:
                ranks.union(out, s)
            nd, ax = par["ndim"], par["axis"]
            if _is_var(nd):
                ndim_links.append((nd, out))  # type: ignore[arg-type]
            else:
                ranks.fix(out, int(nd))  # type: ignore[arg-type]
            if _is_var(ax):
                axis_links.append((ax, out))  # type: ignore[arg-type]
            else:
                ranks.at_least(out, int(ax) + 1)  # type: ignore[arg-type]
        elif op in ("split", "split_0", "split_1"):
            out = sub[0]
            if op == "split":
                ax = par["axis"]
                if _is_var(ax):
                    axis_links.append((ax, out))  # type: ignore[arg-type]
                else:
                    ranks.at_least(out, int(ax) + 1)  # type: ignore[arg-type]
        elif op == "batchnorm":
            out = sub[0]
            ranks.at_least(out, 2)
            for s in sub[1:]:
                ranks.fix(s, 1)
        else:  # operators without a rank rule: the analysis will judge
            out = ranks.new()
        rank_of[key] = out
        return out

    for s, t in pairs:
        ranks.union(rk(s), rk(t))

    rank_val: dict[int, int] = {}

    def rank(node: int) -> int:
        r = ranks.find(node)
        if r not in rank_val:
            f = ranks.fixed[r]
            rank_val[r] = f if f is not None else int(rng.integers(max(ranks.low[r], 1), 4))
        return rank_val[r]

    for v, node in ndim_links:
        ints[v] = rank(node)
    for v, node in axis_links:
        ints[v] = int(rng.integers(0, rank(node)))
    for v, node in perm_links:
        syms[v] = "_".join(str(int(i)) for i in rng.permutation(rank(node)))
    for v, (kind, _) in kinds.items():
        if kind == "int" and v not in ints:
            ints[v] = int(rng.integers(0, 3))

    # ---- pass 2: dimensions
    dims = _Dims(rng)
    # Half of the attempts make every convolution grouped (two groups), half ungrouped.
    grouped = bool(rng.random() < 0.5)
    var_dims: dict[str, list[int]] = {}
    memo: dict[int, Any] = {}

    def fresh(n: int) -> list[int]:
        return [dims.new() for _ in range(n)]

    def unify(a: Sequence[int], b: Sequence[int]) -> None:
        if len(a) != len(b):
            raise _NoInstance(f"rank {len(a)} vs {len(b)}")
        for x, y in zip(a, b, strict=True):
            dims.union(x, y)

    def window(size: int, kernel: int | None, kclass: int | None, s: int | None, p: int | None):
        if s is None or p is None:
            return dims.new()
        if s == 1 and p == 0:
            return size
        return dims.new(derive=("window", size, kernel if kclass is None else kclass, s, p))

    def sh(t: Term) -> Any:
        if _is_var(t):
            if t not in var_dims:
                var_dims[t] = fresh(rank(var_rank[t]))  # type: ignore[index]
            return var_dims[t]  # type: ignore[index]
        key = id(t)
        if key in memo:
            return memo[key]
        op, args = t[0], t[1:]
        sig = sigs[op]
        ten = [a for (_, k), a in zip(sig, args, strict=True) if k in ("tensor", "pair")]
        par = {n: a for (n, k), a in zip(sig, args, strict=True) if k in ("int", "sym")}
        sub = [sh(a) for a in ten]
        r = rank(rk(t)) if op not in ("split",) else None
        if op in ("ewadd", "ewmul") or op in _ELEMENTWISE_UNARY:
            for s in sub[1:]:
                unify(sub[0], s)
            out = sub[0]
        elif op == "matmul":
            a, b = sub
            unify(a[:-2], b[:-2])
            dims.union(a[-1], b[-2])
            out = [*a[:-1], b[-1]]
        elif op == "conv2d":
            x, w = sub
            sh_, sw_, pad = (int_of(par[k]) for k in ("stride_h", "stride_w", "pad"))
            dims.set_hint(w[2], _KERNEL)
            dims.set_hint(w[3], _KERNEL)
            dims.set_hint(x[2], _SPATIAL)
            dims.set_hint(x[3], _SPATIAL)
            if not grouped:
                dims.union(x[1], w[1])
            else:  # a grouped convolution (two groups; O must be even)
                dims.union(x[1], dims.new(derive=("mul", w[1], 2)))
                dims.set_hint(w[0], (2, 4, 6))
            out = [
                x[0],
                w[0],
                window(x[2], None, w[2], sh_, pad),
                window(x[3], None, w[3], sw_, pad),
            ]
        elif op in ("poolmax", "poolavg"):
            (x,) = sub
            kh, kw, sh_, sw_, pad = (
                int_of(par[k]) for k in ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad")
            )
            dims.set_hint(x[2], _SPATIAL)
            dims.set_hint(x[3], _SPATIAL)
            out = [x[0], x[1], window(x[2], kh, None, sh_, pad), window(x[3], kw, None, sw_, pad)]
            if kh is not None and kh > 1 and sh_ == 1 and pad == 0:
                pass  # SAME, stride 1: the size is kept (window() returned it)
        elif op == "transpose":
            (x,) = sub
            p = syms.get(par["perm"], par["perm"])  # type: ignore[arg-type]
            perm = parse_dims(str(p))
            if sorted(perm) != list(range(len(x))):
                raise _NoInstance(f"`{p}` is not a permutation of rank {len(x)}")
            out = [x[i] for i in perm]
        elif op == "reshape":
            s = par["shape"]
            if _is_var(s):
                raise _NoInstance(f"reshape target {s} is a variable")
            out = [dims.new(derive=("const", d)) for d in parse_dims(str(s))]
        elif op == "enlarge":
            w, ref = sub
            for d in (w[2], w[3], ref[2], ref[3]):
                dims.set_hint(d, _KERNEL)
            out = [w[0], w[1], ref[2], ref[3]]
        elif op in _CONCATS:
            ax = int_of(par["axis"])
            if ax is None or not 0 <= ax < len(sub[0]):
                raise _NoInstance(f"concat axis {par['axis']} out of range")
            for s in sub[1:]:
                unify(
                    [d for i, d in enumerate(sub[0]) if i != ax],
                    [d for i, d in enumerate(s) if i != ax],
                )
            out = list(sub[0])
            out[ax] = dims.new(derive=("sum", [s[ax] for s in sub]))
        elif op == "split":
            (x,) = sub
            ax = int_of(par["axis"])
            if ax is None or not 0 <= ax < len(x):
                raise _NoInstance(f"split axis {par['axis']} out of range")
            left, right = list(x), list(x)
            inner = ten[0]
            if isinstance(inner, list) and inner[0] in _CONCATS and int_of(inner[1]) == ax:
                parts = [sh(a) for a in inner[3:]]
                left[ax] = parts[0][ax]
                right[ax] = (
                    parts[1][ax]
                    if len(parts) == 2
                    else dims.new(derive=("sum", [p[ax] for p in parts[1:]]))
                )
            else:
                left[ax], right[ax] = dims.new(), dims.new()
            out = (left, right)
        elif op in ("split_0", "split_1"):
            pair = sub[0]
            if not isinstance(pair, tuple):
                raise _NoInstance(f"{op} of a non-split")
            out = pair[0] if op == "split_0" else pair[1]
        elif op == "merge":
            (w,) = sub
            c = int_of(par["count"]) or 1
            out = [w[0], dims.new(derive=("mul", w[1], c)), w[2], w[3]]
        elif op == "batchnorm":
            x = sub[0]
            for s in sub[1:]:
                unify(s, [x[1]])
            out = x
        else:
            out = fresh(r or 0)
        memo[key] = out
        return out

    for s, t in pairs:
        a, b = sh(s), sh(t)
        if isinstance(a, tuple) or isinstance(b, tuple):
            raise _NoInstance("a pattern root is a split pair")
        unify(a, b)

    shapes = {v: tuple(dims.get(d) for d in ds) for v, ds in var_dims.items()}
    weights = {v for v in shapes if rng.random() < 0.3}
    return _Instance(ints, syms, shapes, weights)


def _build(terms: Sequence[Term], inst: _Instance) -> Graph:
    """A graph whose outputs are ``terms`` under ``inst`` (leaves named after the vars)."""
    sigs = signatures()
    g = Graph()
    leaf: dict[str, int] = {}
    memo: dict[int, int] = {}

    for v in sorted(inst.shapes):
        name = v[1:]
        if v in inst.weights:
            leaf[v] = g.add_weight(name, inst.shapes[v])
        else:
            leaf[v] = g.add_input(name, inst.shapes[v])

    def param(t: Term, kind: str) -> int | str:
        if _is_var(t):
            return inst.ints[t] if kind == "int" else inst.syms[t]  # type: ignore[index]
        return int(t) if kind == "int" else str(t)  # type: ignore[arg-type]

    def node(t: Term) -> int:
        if _is_var(t):
            return leaf[t]  # type: ignore[index]
        key = id(t)
        if key not in memo:
            op, args = t[0], t[1:]
            params: dict[str, int | str] = {}
            inputs: list[int] = []
            for (n, k), a in zip(sigs[op], args, strict=True):
                if k in ("int", "sym"):
                    params[n] = param(a, k)
                else:
                    inputs.append(node(a))
            memo[key] = g.add_node(op, params, inputs)
        return memo[key]

    g.outputs = [node(t) for t in terms]
    return g


def _positive_vars(terms: Iterable[Term]) -> set[str]:
    """Variables fed straight into a ``batchnorm`` variance (which must be positive)."""
    out: set[str] = set()

    def walk(t: Term) -> None:
        if isinstance(t, list):
            if t[0] == "batchnorm" and len(t) == 6 and _is_var(t[5]):
                out.add(t[5])  # type: ignore[arg-type]
            for a in t[1:]:
                walk(a)

    for t in terms:
        walk(t)
    return out


def _feeds(g: Graph, positive: set[str], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """float64 feeds for every leaf: standard normal, uniform in [0.5, 1.5] for
    batch-norm variances."""
    feeds: dict[str, np.ndarray] = {}
    for n in g.nodes:
        if n.op in ("input", "weight"):
            shape = n.type.shape  # type: ignore[union-attr]
            if "?" + n.name in positive:
                feeds[n.name] = rng.uniform(0.5, 1.5, shape)
            else:
                feeds[n.name] = rng.standard_normal(shape)
    return feeds


def _rel_error(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
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
        shapes: for FAIL, the failing instance: variable -> shape (tensors) or value
            (integer and symbol parameters), weights marked in ``weights``.
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


def check_rule(
    ruleset: _core.RuleSet,
    index: int,
    *,
    file: str = "",
    samples: int = 10,
    attempts: int = 300,
    seed: int = 0,
) -> RuleResult:
    """Check rule ``index`` of ``ruleset`` numerically.

    Args:
        ruleset: the parsed rules.
        index: position of the rule in ``ruleset.describe()``.
        file: the file name to report.
        samples: valid instances (shape assignments, each with fresh random inputs) to
            evaluate; PASS needs at least one and every one to agree.
        attempts: proposals tried before giving up (UNTESTABLE).
        seed: base random seed (combined with the rule name, so results do not depend
            on the rule's position).

    Returns:
        the :class:`RuleResult`. Never raises for a bad rule: problems become FAIL or
        UNTESTABLE with a reason.
    """
    name, src_txt, tgt_txt, line = ruleset.describe()[index]
    res = RuleResult(name=name, file=file, line=int(line), status="UNTESTABLE")
    try:
        sources = [parse_pattern(s) for s in src_txt]
        targets = [parse_pattern(t) for t in tgt_txt]
        kinds = _var_kinds([*sources, *targets])
    except ValueError as e:
        res.reason = f"cannot read the patterns: {e}"
        return res
    if len(sources) != len(targets):
        res.reason = f"{len(sources)} sources but {len(targets)} targets"
        return res
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    positive = _positive_vars([*sources, *targets])
    pairs = list(zip(sources, targets, strict=True))
    rejections: Counter[str] = Counter()
    done = 0
    for _ in range(attempts):
        if done >= samples:
            break
        try:
            inst = _propose(pairs, kinds, rng)
        except _NoInstance as e:
            rejections[str(e)] += 1
            continue
        try:
            src = _build(sources, inst)
            tgt = _build(targets, inst)
        except (GraphError, KeyError) as e:
            rejections[_short(str(e))] += 1
            continue
        bind: dict[str, Any] = {v: (list(s), v in inst.weights) for v, s in inst.shapes.items()}
        bind.update({v: val for v, val in inst.ints.items()})
        if not ruleset.check_conditions(index, bind):
            rejections["the rule's conditions do not hold"] += 1
            continue
        src_types = [src.type_of(o).shape for o in src.outputs]
        tgt_types = [tgt.type_of(o).shape for o in tgt.outputs]
        if src_types != tgt_types:
            rejections[f"source and target shapes differ ({src_types} vs {tgt_types})"] += 1
            continue
        feeds = _feeds(src, positive, rng)
        try:
            with np.errstate(all="ignore"):
                a_out = run(src, feeds)
        except ValueError as e:
            res.reason = f"executor cannot run the source: {e}"
            return res
        if not all(np.all(np.isfinite(a)) for a in a_out):
            rejections["the source is not finite on random inputs"] += 1
            continue
        try:
            with np.errstate(all="ignore"):
                b_out = run(tgt, feeds)
        except ValueError as e:
            if "unknown operator" in str(e):
                res.reason = f"executor cannot run the target: {e}"
                return res
            _fail_with(res, inst, f"the target does not evaluate: {e}")
            return res
        done += 1
        res.instances = done
        for k, (a, b) in enumerate(zip(a_out, b_out, strict=True)):
            err = _rel_error(a, b)
            res.max_rel_error = max(res.max_rel_error, err)
            if not err <= TOLERANCE:
                what = f"output {k}: " if len(a_out) > 1 else ""
                _fail_with(
                    res,
                    inst,
                    f"{what}relative error {err:.3g} > {TOLERANCE:g} "
                    f"(max |source| {float(np.max(np.abs(a), initial=0)):.3g}, "
                    f"max |target| {float(np.max(np.abs(b), initial=0)):.3g}) "
                    f"at output shape {list(np.shape(a))}",
                )
                return res
    if done:
        res.status = "PASS"
        return res
    common = ", ".join(f"{msg} (x{n})" for msg, n in rejections.most_common(2))
    res.reason = f"no valid instance in {attempts} attempts: {common or 'nothing proposed'}"
    return res


def _short(msg: str) -> str:
    """A rejection message without the node name, so equal causes group together."""
    if msg.startswith("node '") and "': " in msg:
        return msg.split("': ", 1)[1]
    return msg


def _fail_with(res: RuleResult, inst: _Instance, reason: str) -> None:
    res.status = "FAIL"
    res.reason = reason
    shapes: dict[str, Any] = {v: list(s) for v, s in inst.shapes.items()}
    shapes.update(inst.ints)
    shapes.update(inst.syms)
    res.shapes = dict(sorted(shapes.items()))
    res.weights = sorted(inst.weights)


def check_ruleset(
    ruleset: _core.RuleSet,
    *,
    file: str = "",
    samples: int = 10,
    attempts: int = 300,
    seed: int = 0,
) -> list[RuleResult]:
    """:func:`check_rule` for every rule of ``ruleset``, in file order."""
    return [
        check_rule(ruleset, i, file=file, samples=samples, attempts=attempts, seed=seed)
        for i in range(len(ruleset))
    ]


def default_files() -> list[Path]:
    """The shipped rule files (``rules/*.rules``), sorted."""
    from tensat_py.pipeline import RULES_DIR

    return sorted(RULES_DIR.glob("*.rules"))


def check_files(
    files: Sequence[str | Path] = (),
    *,
    samples: int = 10,
    attempts: int = 300,
    seed: int = 0,
) -> CheckReport:
    """Check every rule of ``files`` (default: every shipped rule file).

    A file may be a shipped name (``"taso"``) or a path.

    Raises:
        FileNotFoundError: a file does not exist.
        ValueError: a file does not parse (``file:line:col: message``).
    """
    from tensat_py.pipeline import load_rules

    paths = list(files) or default_files()
    results: list[RuleResult] = []
    for f in paths:
        rs = load_rules(f)
        label = str(f)
        if not Path(f).exists():  # a shipped name such as "taso"
            from tensat_py.pipeline import RULES_DIR

            label = str(RULES_DIR / f"{f}.rules")
        results.extend(check_ruleset(rs, file=label, samples=samples, attempts=attempts, seed=seed))
    return CheckReport(results)
