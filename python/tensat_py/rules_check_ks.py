"""``tensat rules check`` for rules over the knossos dialect.

A rule that mentions a knossos operator (or, in a Knossos rule file, scalar arithmetic) is
instantiated with Knossos terms: each term variable is drawn from typed variables and
small terms (``(var v0 Float)``, ``(var v1 Vec<Float>)``, a lambda over Integer, ...),
each symbol variable from what its position holds: variable names, types, the names of a
few ``Float`` functions of one to four arguments that the instances' program defines (for
``call``), ``float64`` (for ``cast``). An instance counts when the Rust core
applies the rule to it (its conditions, free variables included, are the core's), both
sides type-check and the evaluator runs them; both sides are then evaluated
(:mod:`tensat_py.frontends.knossos.evaluate`) on the same random values of the free
variables and compared.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np

from tensat_py import _core

__all__ = ["is_knossos_rule", "check_ks_rule"]

_KS_OPS = {
    "var", "let", "lam", "build", "sumbuild", "index", "size", "sum", "tuple", "get",
    "if", "assert", "call",
}  # fmt: skip

# Term candidates: (text, {free variable: type}).
_TERMS = [
    ("(var v0 Float)", {"v0": "Float"}),
    ("(var v1 Float)", {"v1": "Float"}),
    ("(mul (var v0 Float) (var v2 Float))", {"v0": "Float", "v2": "Float"}),
    ("(var n0 Integer)", {"n0": "Integer"}),
    ("(var x Float)", {"x": "Float"}),
    ("(var x Integer)", {"x": "Integer"}),
    ("(add (var y Float) (var v0 Float))", {"y": "Float", "v0": "Float"}),
    ("(var p0 Bool)", {"p0": "Bool"}),
    ("(var u0 Vec<Float>)", {"u0": "Vec<Float>"}),
    ("(scalar 0.0 float64)", {}),
    ("(scalar 1.0 float64)", {}),
    ("(scalar 2.0 int64)", {}),
    ("(lam i Integer (mul (cast (var i Integer) float64) (var v0 Float)))", {"v0": "Float"}),
    ("(lam x Integer (cast (var x Integer) float64))", {}),
    ("(tuple (var v0 Float) (var v1 Float))", {"v0": "Float", "v1": "Float"}),
]
_NAMES = ["x", "y", "i"]
_TYPES = ["Float", "Integer"]
#: Functions a ``call`` in an instance may name, by arity: ``Float -> Float`` sums and
#: products of their arguments (defined in the program the instances are evaluated in).
_FUNCTIONS = {
    "f1": ("(a0)", "(mul (var a0 Float) (var a0 Float))"),
    "f2": ("(a0 a1)", "(sub (var a0 Float) (mul (var a1 Float) (var a1 Float)))"),
    "f3": ("(a0 a1 a2)", "(add (mul (var a0 Float) (var a1 Float)) (var a2 Float))"),
    "f4": (
        "(a0 a1 a2 a3)",
        "(add (mul (var a0 Float) (var a1 Float)) (mul (var a2 Float) (var a3 Float)))",
    ),
}
#: What a symbol variable stands for, by its operator and operand position: a variable's
#: name or type (``var``, ``let``, ``lam``), a called function and its return type
#: (``call``), a dtype (``cast``: the evaluator casts to float, so ``float64``), a
#: ``get``'s element and tuple size.
_SYM_KINDS = {
    "var": {1: "name", 2: "type"},
    "let": {1: "name"},
    "lam": {1: "name", 2: "type"},
    "call": {1: "function", 2: "return"},
    "cast": {2: "dtype"},
    "get": {1: "position", 2: "position"},
}
_SYMBOLS = {
    "name": _NAMES,
    "type": _TYPES,
    "return": [*_TYPES, "Vec<Float>"],  # prelude calls such as deltaVec return vectors
    "function": list(_FUNCTIONS),
    "dtype": ["float64"],
    "position": ["1", "2"],  # get's element and tuple size (the terms' tuples are pairs)
}


def _ops(term: Any) -> set[str]:
    if isinstance(term, tuple):
        out = {term[0]}
        for t in term[1:]:
            out |= _ops(t)
        return out
    return set()


def is_knossos_rule(sources: list[Any], targets: list[Any]) -> bool:
    """Whether a rule's patterns mention a knossos operator."""
    return any(_ops(t) & _KS_OPS for t in [*sources, *targets]) or any(
        "float64" in str(t) for t in [*sources, *targets]
    )


def _subst(term: Any, assign: dict[str, str]) -> str:
    if isinstance(term, tuple):
        return "(" + " ".join(_subst(t, assign) for t in term) + ")"
    return assign.get(term, term)


def _flat(text: str) -> list[tuple[str, list[int]]]:
    from tensat_py.frontends.knossos.lower import _sexp, _tokens

    tree, _ = _sexp(_tokens(text), 0)
    nodes: list[tuple[str, list[int]]] = []

    def go(t: Any) -> int:
        if isinstance(t, str):
            nodes.append((t, []))
        else:
            ch = [go(c) for c in t[1:]]
            nodes.append((t[0], ch))
        return len(nodes) - 1

    go(tree)
    return nodes


def check_ks_rule(
    ruleset: _core.RuleSet, index: int, described: tuple, sources: list, targets: list, res: Any,
    *, samples: int, attempts: int, seed: int,
) -> Any:  # fmt: skip
    """Fill ``res`` (a ``RuleResult``) for a knossos rule; see the module docstring."""
    from tensat_py.frontends.knossos import evaluate as ev
    from tensat_py.frontends.knossos.lower import parse_type_text, raise_term
    from tensat_py.frontends.knossos.syntax import Def

    name = described[0]
    conds = ruleset.conditions(index)
    text = f"{name}: {' , '.join(described[1])} => {' , '.join(described[2])}"
    if conds:
        text += " if " + " and ".join(conds)
    one = _core.RuleSet.parse(text, "<check>")
    prog = _program()
    variables = sorted({v for t in sources for v in _vars(t)})
    kinds: dict[str, list[str]] = {}
    for t in sources:
        for v, kind in _sym_vars(t):
            kinds.setdefault(v, [])
            kinds[v] += [x for x in _SYMBOLS[kind] if x not in kinds[v]]
    rnd = random.Random(seed)
    done = tried = 0
    choices = []
    expected: dict[str, frozenset[str]] = {}
    for t in sources:
        _expected(t, None, expected)
    for v in variables:
        if v in kinds:
            choices.append(kinds[v])
            continue
        every = [t for t, _ in _TERMS] + ["1", "2"]
        # Only terms of the kind the variable's position demands (the others never type).
        fit = [t for t in every if _TERM_KINDS.get(t) in expected.get(v, frozenset())]
        choices.append(fit if v in expected and fit else every)
    total = 1
    for c in choices:
        total *= len(c)
    if total <= attempts:
        combos = list(itertools.product(*choices))
        rnd.shuffle(combos)
    else:  # a random sample of the combinations
        combos = [tuple(rnd.choice(c) for c in choices) for _ in range(attempts)]
    rng = np.random.default_rng(seed)
    for combo in combos[:attempts]:
        tried += 1
        assign = dict(zip(variables, combo, strict=True))
        src = _subst(sources[0], assign)
        tgt = _subst(targets[0], assign)
        try:
            eg = _core.EGraph(_flat(src))
            eg.saturate(one, iter_limit=1, cycle_filter="none")
            if not eg.equivalent(_flat(src), _flat(tgt)):
                continue  # a condition refused it, or the target does not type-check
            a, b = raise_term(src), raise_term(tgt)
        except ValueError:
            continue
        free = {}
        for t, fv in _TERMS:
            if t in combo:
                free.update(fv)
        params = tuple((n, parse_type_text(ty)) for n, ty in sorted(free.items()))
        try:
            args = [ev.random_value(t, rng) for _, t in params]
            want = ev.evaluate(prog, Def("s", params[0][1] if params else None, params, a), args)  # type: ignore[arg-type]
            got = ev.evaluate(prog, Def("t", params[0][1] if params else None, params, b), args)  # type: ignore[arg-type]
            if callable(want) and callable(got):  # lambdas: compare on 0, 1, 2
                want, got = [want(k) for k in range(3)], [got(k) for k in range(3)]
        except (ev.EvalError, ArithmeticError, TypeError, ValueError, IndexError):
            continue
        if _has_function(want) or _has_function(got):  # not comparable here
            continue
        try:
            same = ev.close(want, got, rtol=1e-7, atol=1e-9)
        except TypeError:
            continue
        if not same:
            res.status = "FAIL"
            res.reason = f"{src} = {want!r} but {tgt} = {got!r}"
            res.instances = done + 1
            return res
        done += 1
        res.instances = done
        if done >= samples:
            break
    if done:
        res.status = "PASS"
    else:
        res.reason = f"no valid Knossos instance in {tried} attempts"
    return res


#: The Knossos type of each term candidate, by kind (what :func:`_expected` asks for).
_TERM_KINDS = {
    t: "Bool" if "Bool" in t and t.startswith("(var")
    else "Vec" if t.startswith("(var u0")
    else "Lam" if t.startswith("(lam")
    else "Tuple" if t.startswith("(tuple")
    else "Integer" if t in ("(var n0 Integer)", "(var x Integer)", "(scalar 2.0 int64)")
    else "Float"
    for t, _ in _TERMS
}  # fmt: skip
_SCALAR = frozenset({"Float", "Integer"})
_ARITH = {
    "add", "sub", "mul", "div", "max", "min", "exp", "log", "neg", "abs", "sqrt", "erf",
    "equal", "greater", "less", "greater_equal", "less_equal",
}  # fmt: skip


def _expected(t: Any, want: frozenset[str] | None, out: dict[str, frozenset[str]]) -> None:
    """The kinds each variable of pattern ``t`` may take where the operators it sits under
    demand one (an ``if``'s condition is Bool, an ``index`` takes an Integer and a Vec,
    arithmetic takes scalars), intersected over its occurrences: ``out`` gains them."""
    if isinstance(t, str):
        if t.startswith("?") and want is not None:
            out[t] = out[t] & want if t in out else want
        return
    op, kids = t[0], list(t[1:])
    bool_ = frozenset({"Bool"})
    wants: list[frozenset[str] | None] = [None] * len(kids)
    if op == "if" and len(kids) == 3:
        wants = [bool_, want, want]
    elif op == "assert" and len(kids) == 2:
        wants = [bool_, want]
    elif op == "index" and len(kids) == 2:
        wants = [frozenset({"Integer"}), frozenset({"Vec"})]
    elif op in ("size", "sum") and len(kids) == 1:
        wants = [frozenset({"Vec"})]
    elif op in ("build", "sumbuild") and len(kids) == 2:
        wants = [frozenset({"Integer"}), frozenset({"Lam"})]
    elif op in _ARITH:
        wants = [_SCALAR] * len(kids)
    elif op == "let" and len(kids) == 3:
        wants = [None, None, want]
    for k, w in zip(kids, wants, strict=True):
        _expected(k, w, out)


def _has_function(v: Any) -> bool:
    """Whether a value holds a function (a lambda inside a tuple or a list)."""
    if callable(v):
        return True
    return isinstance(v, tuple | list) and any(_has_function(x) for x in v)


def _vars(t: Any) -> list[str]:
    if isinstance(t, tuple):
        return [v for c in t[1:] for v in _vars(c)]
    return [t] if isinstance(t, str) and t.startswith("?") else []


def _sym_vars(t: Any) -> list[tuple[str, str]]:
    """The symbol variables of pattern ``t`` with what each stands for (:data:`_SYM_KINDS`)."""
    if not isinstance(t, tuple):
        return []
    out = []
    for i, c in enumerate(t[1:], start=1):
        kind = _SYM_KINDS.get(t[0], {}).get(i)
        if kind is not None and isinstance(c, str) and c.startswith("?"):
            out.append((c, kind))
        out += _sym_vars(c)
    return out


def _program() -> Any:
    """The program instances are evaluated in: the :data:`_FUNCTIONS` a ``call`` names."""
    from tensat_py.frontends.knossos.lower import parse_type_text, raise_term
    from tensat_py.frontends.knossos.syntax import Def, Program

    flt = parse_type_text("Float")
    defs = []
    for name, (params, body) in _FUNCTIONS.items():
        names = params.strip("()").split()
        defs.append(Def(name, flt, tuple((n, flt) for n in names), raise_term(body)))
    return Program(list(defs))
