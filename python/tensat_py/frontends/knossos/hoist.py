"""Loop-invariant hoisting on the Knossos syntax tree: RLO's ``new_bind`` + ``lift_bind``
(knossos-ksc ``rlo/src/rlo/rewrites.py``) composed, as a pass after saturation.

RLO moves a subexpression out of a ``build``/``sumbuild`` body in several steps: bind it
to a fresh variable where it stands (``new_bind``), then lift that ``let`` over each
enclosing operator while the bound value does not use a variable the operator binds
(``lift_bind``), finally over the loop. Those steps need fresh names, which the rule DSL
cannot create, so they are done here on the extracted program: every maximal
subexpression of a loop body that mentions neither the loop index nor a variable bound
inside the body, is not a variable or literal and does not sit under an ``if`` or
``assert`` (which might not evaluate it), is bound once in a ``let`` just outside the loop
(all its occurrences share the variable: RLO's ``cse_bind``). Fresh names are ``h$0``,
``h$1``, ... (deterministic, not used elsewhere in the def). Lets that bind a variable to
another variable are then substituted away.

The caller prices the result and keeps it only when it is cheaper, after the evaluator
agrees with the original (see :func:`tensat_py.frontends.knossos.optimize_program`).
"""

from __future__ import annotations

from tensat_py.frontends.knossos.syntax import (
    Assert,
    Call,
    Const,
    Def,
    Expr,
    If,
    Lam,
    Let,
    Var,
)

__all__ = ["free_vars", "hoist_def", "inline_all"]


def free_vars(e: Expr, calls: bool = False) -> frozenset[str]:
    """The free variables of ``e``; with ``calls``, the name of every call too (it may be
    a lambda-valued variable, ``(f x)``: what the hoisting checks use)."""
    if isinstance(e, Var):
        return frozenset([e.name])
    if isinstance(e, Const):
        return frozenset()
    if isinstance(e, Let):
        return free_vars(e.rhs, calls) | (free_vars(e.body, calls) - set(e.vars))
    if isinstance(e, Lam):
        return free_vars(e.body, calls) - {e.var}
    if isinstance(e, If):
        return free_vars(e.cond, calls) | free_vars(e.then, calls) | free_vars(e.other, calls)
    if isinstance(e, Assert):
        return free_vars(e.cond, calls) | free_vars(e.body, calls)
    assert isinstance(e, Call)
    out: frozenset[str] = frozenset([e.name] if calls else ())
    for a in e.args:
        out |= free_vars(a, calls)
    return out


def _names(e: Expr, out: set[str]) -> None:
    if isinstance(e, Var):
        out.add(e.name)
    elif isinstance(e, Let):
        out.update(e.vars)
        _names(e.rhs, out)
        _names(e.body, out)
    elif isinstance(e, Lam):
        out.add(e.var)
        _names(e.body, out)
    elif isinstance(e, If):
        for x in (e.cond, e.then, e.other):
            _names(x, out)
    elif isinstance(e, Assert):
        _names(e.cond, out)
        _names(e.body, out)
    elif isinstance(e, Call):
        for a in e.args:
            _names(a, out)


class _Hoister:
    def __init__(self, used: set[str]) -> None:
        self.used = used
        self.n = 0

    def fresh(self) -> str:
        while f"h${self.n}" in self.used:
            self.n += 1
        name = f"h${self.n}"
        self.used.add(name)
        return name

    def expr(self, e: Expr) -> Expr:
        """Hoist inside ``e`` (innermost loops first), then out of ``e`` if a loop."""
        if isinstance(e, Let):
            return Let(e.vars, self.expr(e.rhs), self.expr(e.body), e.tupled)
        if isinstance(e, Lam):
            return Lam(e.var, e.type, self.expr(e.body))
        if isinstance(e, If):
            return If(self.expr(e.cond), self.expr(e.then), self.expr(e.other))
        if isinstance(e, Assert):
            return Assert(self.expr(e.cond), self.expr(e.body))
        if not isinstance(e, Call):
            return e
        e = Call(e.name, tuple(self.expr(a) for a in e.args))
        if e.name in ("build", "sumbuild") and len(e.args) == 2 and isinstance(e.args[1], Lam):
            return self.loop(e)
        return e

    def loop(self, e: Call) -> Expr:
        lam = e.args[1]
        assert isinstance(lam, Lam)
        found: list[Expr] = []
        self.collect(lam.body, frozenset([lam.var]), found)
        if not found:
            return e
        names: dict[Expr, str] = {}
        for s in found:
            if s not in names:
                names[s] = self.fresh()
        body = _replace(lam.body, names)
        out: Expr = Call(e.name, (e.args[0], Lam(lam.var, lam.type, body)))
        for s, v in reversed(list(names.items())):
            out = Let((v,), s, out)
        return out

    def collect(self, e: Expr, banned: frozenset[str], found: list[Expr]) -> None:
        """Maximal invariant, non-trivial subexpressions of ``e`` (not under if/assert)."""
        if isinstance(e, (Var, Const)):
            return
        if not (free_vars(e, True) & banned) and not isinstance(e, Lam):
            found.append(e)
            return
        if isinstance(e, Let):
            self.collect(e.rhs, banned, found)
            self.collect(e.body, banned | set(e.vars), found)
        elif isinstance(e, Call):
            for a in e.args:
                if isinstance(a, Lam):
                    self.collect(a.body, banned | {a.var}, found)
                else:
                    self.collect(a, banned, found)
        elif isinstance(e, If):
            self.collect(e.cond, banned, found)


def _replace(e: Expr, names: dict[Expr, str]) -> Expr:
    """``e`` with the subexpressions in ``names`` replaced by their variables; under a
    binder of a variable free in a hoisted term, that term means something else and is
    left alone (fresh names cannot be captured)."""
    if not names:
        return e
    if e in names:
        return Var(names[e])
    if isinstance(e, Let):
        inner = _unshadowed(names, set(e.vars))
        return Let(e.vars, _replace(e.rhs, names), _replace(e.body, inner), e.tupled)
    if isinstance(e, Lam):
        return Lam(e.var, e.type, _replace(e.body, _unshadowed(names, {e.var})))
    if isinstance(e, If):
        return If(_replace(e.cond, names), e.then, e.other)
    if isinstance(e, Assert):
        return e
    if isinstance(e, Call):
        return Call(e.name, tuple(_replace(a, names) for a in e.args))
    return e


def _unshadowed(names: dict[Expr, str], bound: set[str]) -> dict[Expr, str]:
    return {k: v for k, v in names.items() if not (free_vars(k, True) & bound)}


def _copy_prop(e: Expr, sub: dict[str, str] | None = None) -> Expr:
    """Substitute away ``(let (h$k v) body)`` where ``v`` is a variable (only for the
    fresh ``h$`` names, which are bound exactly once)."""
    sub = sub or {}
    if isinstance(e, Var):
        return Var(sub.get(e.name, e.name))
    if isinstance(e, Let):
        rhs = _copy_prop(e.rhs, sub)
        if len(e.vars) == 1 and e.vars[0].startswith("h$") and isinstance(rhs, Var):
            return _copy_prop(e.body, {**sub, e.vars[0]: rhs.name})
        inner = {k: v for k, v in sub.items() if k not in e.vars}
        return Let(e.vars, rhs, _copy_prop(e.body, inner), e.tupled)
    if isinstance(e, Lam):
        inner = {k: v for k, v in sub.items() if k != e.var}
        return Lam(e.var, e.type, _copy_prop(e.body, inner))
    if isinstance(e, If):
        return If(*(_copy_prop(x, sub) for x in (e.cond, e.then, e.other)))
    if isinstance(e, Assert):
        return Assert(_copy_prop(e.cond, sub), _copy_prop(e.body, sub))
    if isinstance(e, Call):
        return Call(e.name, tuple(_copy_prop(a, sub) for a in e.args))
    return e


def _size(e: Expr) -> int:
    if isinstance(e, Let):
        return 1 + _size(e.rhs) + _size(e.body)
    if isinstance(e, Lam):
        return 1 + _size(e.body)
    if isinstance(e, If):
        return 1 + _size(e.cond) + _size(e.then) + _size(e.other)
    if isinstance(e, Assert):
        return 1 + _size(e.cond) + _size(e.body)
    if isinstance(e, Call):
        return 1 + sum(_size(a) for a in e.args)
    return 1


def _count(e: Expr, banned: frozenset[str], out: dict[Expr, int]) -> None:
    """Occurrences of candidate subexpressions (calls other than ``get``/``tuple`` that
    use no variable bound inside the scope), not under if branches or assert bodies."""
    if isinstance(e, Let):
        _count(e.rhs, banned, out)
        _count(e.body, banned | set(e.vars), out)
    elif isinstance(e, Lam):
        _count(e.body, banned | {e.var}, out)
    elif isinstance(e, If):
        _count(e.cond, banned, out)
    elif isinstance(e, Call):
        if (
            not e.name.startswith("get$")
            and e.name != "tuple"
            and not (free_vars(e, True) & banned)
        ):
            out[e] = out.get(e, 0) + 1
        for a in e.args:
            _count(a, banned, out)


class _Cse:
    """RLO's ``new_bind`` + ``cse_bind``: a call occurring twice or more in a scope (the
    def body, a lambda body or a let body) is bound once in a ``let`` at the top of that
    scope."""

    def __init__(self, hoister: _Hoister) -> None:
        self.h = hoister

    def scope(self, e: Expr) -> Expr:
        e = self.inner(e)
        while True:
            counts: dict[Expr, int] = {}
            _count(e, frozenset(), counts)
            dups = [x for x, k in counts.items() if k >= 2]
            if not dups:
                return e
            best = max(dups, key=_size)
            v = self.h.fresh()
            e = Let((v,), best, _replace(e, {best: v}))

    def inner(self, e: Expr) -> Expr:
        if isinstance(e, Lam):
            return Lam(e.var, e.type, self.scope(e.body))
        if isinstance(e, Let):
            # A let's body is a scope too: a repeated term that uses the let's variable is
            # bound at the top of that body (RLO binds `(mul x y)` of a tuple's `get` so).
            return Let(e.vars, self.inner(e.rhs), self.scope(e.body), e.tupled)
        if isinstance(e, If):
            return If(self.inner(e.cond), self.inner(e.then), self.inner(e.other))
        if isinstance(e, Assert):
            return Assert(self.inner(e.cond), self.inner(e.body))
        if isinstance(e, Call):
            return Call(e.name, tuple(self.inner(a) for a in e.args))
        return e


def hoist_def(d: Def, cse: bool = False) -> Def:
    """``d`` with loop invariants hoisted out of every ``build``/``sumbuild``; with
    ``cse``, repeated calls in a scope are then bound once (:class:`_Cse`)."""
    used: set[str] = {p for p, _ in d.params}
    _names(d.body, used)
    hoister = _Hoister(used)
    body = hoister.expr(d.body)
    if cse:
        body = _Cse(hoister).scope(body)
    body = _copy_prop(body)
    return Def(d.name, d.ret, d.params, body, d.line)


#: :func:`inline_all` gives up on a body larger than this (nodes): substituting every
#: ``let`` can multiply a term's size.
INLINE_ALL_MAX_NODES = 4000


def inline_all(d: Def, defs: dict[str, Def] | None = None) -> Def | None:
    """``d`` with no ``let`` and no call to the functions in ``defs``: RLO's ``inline_let``
    + ``delete_let`` on every ``let`` (a tuple ``let`` binds each name to its ``get`` of
    the value), ``inline_call`` on every call to a def of ``defs`` (by name, with as many
    arguments as it has parameters; the caller leaves out recursive ones) and
    ``select_of_tuple`` on every ``get`` of a ``tuple``, composed as one pass.

    Not a cheaper def (shared values are repeated), but a start for exploration with no
    ``let`` for the ``inline_let`` rules to push down one operator at a time (their
    e-nodes otherwise fill the node limit before the arithmetic is reached) and no tuple
    in the way; the cheapest term extracted from it binds the repeated values again.
    ``None`` when the body has a lambda (substituting under its binder could capture) or
    applies a variable (an opaque term), a call nests more than 32 deep, or the result
    has more than :data:`INLINE_ALL_MAX_NODES` nodes.

    >>> from tensat_py.frontends.knossos.syntax import parse_text, print_expr
    >>> p = parse_text("(def g Float ((a : Float)) (mul a a))"
    ...     "(def f Float ((x : Float)) (let (y (add x 1.0)) (get$1$2 (tuple (g y) y))))")
    >>> print_expr(inline_all(p.defs[1], {"g": p.defs[0]}).body)
    '(mul (add x 1.0) (add x 1.0))'
    """
    defs = defs or {}
    params = {p for p, _ in d.params}
    size = [0]

    def go(e: Expr, env: dict[str, Expr], depth: int) -> Expr | None:
        size[0] += 1
        if size[0] > INLINE_ALL_MAX_NODES or depth > 32:
            return None
        if isinstance(e, Var):
            return env.get(e.name, e)
        if isinstance(e, Const):
            return e
        if isinstance(e, Let):
            rhs = go(e.rhs, env, depth)
            if rhs is None:
                return None
            inner = dict(env)
            if len(e.vars) == 1 and not e.tupled:
                inner[e.vars[0]] = rhs
            else:
                n = len(e.vars)
                for k, v in enumerate(e.vars):
                    if isinstance(rhs, Call) and rhs.name == "tuple" and len(rhs.args) == n:
                        inner[v] = rhs.args[k]
                    else:
                        inner[v] = Call(f"get${k + 1}${n}", (rhs,))
            return go(e.body, inner, depth)
        if isinstance(e, If):
            parts = [go(x, env, depth) for x in (e.cond, e.then, e.other)]
            return None if any(x is None for x in parts) else If(*parts)  # type: ignore[arg-type]
        if isinstance(e, Assert):
            c, b = go(e.cond, env, depth), go(e.body, env, depth)
            return None if c is None or b is None else Assert(c, b)
        if not isinstance(e, Call):
            return None  # a lambda
        if str(e.name) in env or str(e.name) in params:
            return None  # a lambda-valued variable applied: an opaque term, left alone
        args: list[Expr] = []
        for a in e.args:
            x = go(a, env, depth)
            if x is None:
                return None
            args.append(x)
        name = str(e.name)
        if name.startswith("get$") and args and isinstance(args[0], Call):
            parts_ = name.split("$")
            t = args[0]
            if t.name == "tuple" and len(parts_) == 3 and parts_[2] == str(len(t.args)):
                return t.args[int(parts_[1]) - 1]
        callee = defs.get(name)
        if callee is not None and len(callee.params) == len(args):
            return go(
                callee.body,
                {p: a for (p, _), a in zip(callee.params, args, strict=True)},
                depth + 1,
            )
        return Call(e.name, tuple(args))

    body = go(d.body, {}, 0)
    if body is None or _tree_size(body, {}) > INLINE_ALL_MAX_NODES:
        return None
    return Def(d.name, d.ret, d.params, body, d.line)


def _tree_size(e: Expr, memo: dict[int, int]) -> int:
    """:func:`_size` of a term whose sub-terms may be shared objects (each object's size
    once, by identity)."""
    k = id(e)
    if k not in memo:
        if isinstance(e, Call):
            memo[k] = 1 + sum(_tree_size(a, memo) for a in e.args)
        elif isinstance(e, If):
            memo[k] = 1 + sum(_tree_size(a, memo) for a in (e.cond, e.then, e.other))
        elif isinstance(e, Assert):
            memo[k] = 1 + _tree_size(e.cond, memo) + _tree_size(e.body, memo)
        else:
            memo[k] = _size(e)
    return memo[k]
