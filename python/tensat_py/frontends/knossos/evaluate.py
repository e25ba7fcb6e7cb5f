"""A reference evaluator for Knossos programs (Python; NumPy for vector arithmetic).

Values: ``Float`` Python/NumPy float64, ``Integer`` int, ``Bool`` bool, ``String`` str,
``Vec`` a list (or a float64 array where the prelude makes one), ``Tuple`` a tuple,
``Lam`` a Python function. Prelude semantics follow knossos-ksc's ``SYNTAX.md``: integer
``div`` truncates toward zero, ``build n f`` is ``[f 0 .. f (n-1)]``, ``sumbuild n f`` is
``f 0 + ... + f (n-1)``, ``get$i$n`` is 1-based. Calls of user defs run their bodies;
declared-only functions (``edef``) run only when the prelude table below knows them.

>>> from tensat_py.frontends.knossos.syntax import parse_text
>>> p = parse_text("(def f Float ((v : Vec Float))"
...                " (sumbuild (size v) (lam (i : Integer) (index i v))))")
>>> run(p, "f", [[1.0, 2.0, 3.5]])
6.5
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensat_py.frontends.knossos.syntax import (
    Assert,
    Call,
    Const,
    Def,
    Expr,
    If,
    KsType,
    Lam,
    Let,
    Program,
    Var,
)

__all__ = ["EvalError", "run", "evaluate", "random_value", "compare_defs", "close"]


class EvalError(RuntimeError):
    """The program cannot run here (unknown function, failed assert, bad index)."""


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, list):
        return [_add(x, y) for x, y in zip(a, b, strict=False)]
    return a + b


def _div(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        if b == 0:
            raise EvalError("integer division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return float(np.float64(a) / np.float64(b)) if np.isscalar(b) and b != 0 else a / b


def _elementwise(f: Callable[..., Any]) -> Callable[..., Any]:
    def g(*xs: Any) -> Any:
        if any(isinstance(x, list) for x in xs):
            n = max(len(x) for x in xs if isinstance(x, list))
            return [g(*(x[i] if isinstance(x, list) else x for x in xs)) for i in range(n)]
        return f(*xs)

    return g


PRELUDE: dict[str, Callable[..., Any]] = {
    "add": _elementwise(lambda a, b: a + b),
    "sub": _elementwise(lambda a, b: a - b),
    "mul": _elementwise(lambda a, b: a * b),
    "div": _elementwise(_div),
    "neg": _elementwise(lambda a: -a),
    "max": lambda a, b=None: max(a) if b is None else max(a, b),
    "min": lambda a, b=None: min(a) if b is None else min(a, b),
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "gt": lambda a, b: a > b,
    "lt": lambda a, b: a < b,
    "gte": lambda a, b: a >= b,
    "lte": lambda a, b: a <= b,
    "and": lambda a, b: bool(a and b),
    "or": lambda a, b: bool(a or b),
    "not": lambda a: not a,
    "exp": _elementwise(math.exp),
    "log": _elementwise(math.log),
    "sqrt": _elementwise(math.sqrt),
    "abs": _elementwise(abs),
    "sin": _elementwise(math.sin),
    "cos": _elementwise(math.cos),
    "tanh": _elementwise(math.tanh),
    "erf": _elementwise(math.erf),
    "lgamma": _elementwise(math.lgamma),
    "pow": lambda a, b=None: (a[0] ** a[1]) if b is None else a**b,
    "to_float": _elementwise(float),
    "size": lambda v: len(v),
    "index": lambda i, v: _index(i, v),
    "sum": lambda v: _sum(v),
    "tuple": lambda *xs: tuple(xs),
    "dot": lambda a, b: float(np.dot(np.asarray(a, float), np.asarray(b, float))),
}


def _index(i: int, v: Sequence[Any]) -> Any:
    if not 0 <= i < len(v):
        raise EvalError(f"index {i} out of range for a Vec of {len(v)}")
    return v[i]


def _sum(v: Sequence[Any]) -> Any:
    if len(v) == 0:
        raise EvalError("sum of an empty Vec")
    acc = v[0]
    for x in v[1:]:
        acc = _add(acc, x)
    return acc


class _Interp:
    def __init__(self, prog: Program, depth_limit: int = 200) -> None:
        self.defs = {d.name: d for d in prog.defs}
        self.depth = 0
        self.limit = depth_limit

    def call_def(self, d: Def, args: Sequence[Any]) -> Any:
        if len(args) == 1 and len(d.params) > 1 and isinstance(args[0], tuple):
            args = args[0]
        if len(args) != len(d.params):
            raise EvalError(f"`{d.name}` takes {len(d.params)} arguments, got {len(args)}")
        self.depth += 1
        if self.depth > self.limit:
            raise EvalError("recursion too deep")
        try:
            return self.eval(d.body, {p: a for (p, _), a in zip(d.params, args, strict=True)})
        finally:
            self.depth -= 1

    def eval(self, e: Expr, env: dict[str, Any]) -> Any:
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            if e.name not in env:
                raise EvalError(f"unbound variable `{e.name}`")
            return env[e.name]
        if isinstance(e, Let):
            v = self.eval(e.rhs, env)
            if e.tupled:
                return self.eval(e.body, {**env, **dict(zip(e.vars, v, strict=False))})
            return self.eval(e.body, {**env, e.vars[0]: v})
        if isinstance(e, Lam):
            return lambda x: self.eval(e.body, {**env, e.var: x})
        if isinstance(e, If):
            c = self.eval(e.cond, env)
            return self.eval(e.then if c else e.other, env)
        if isinstance(e, Assert):
            if not self.eval(e.cond, env):
                raise EvalError("assertion failed")
            return self.eval(e.body, env)
        assert isinstance(e, Call)
        args = [self.eval(a, env) for a in e.args]
        name = e.name
        if name in self.defs:
            return self.call_def(self.defs[name], args)
        if name == "build":
            n, f = args
            return [f(i) for i in range(n)]
        if name == "sumbuild":
            n, f = args
            return _sum([f(i) for i in range(n)])
        if name.startswith("get$"):
            i, n = (int(x) for x in name.split("$")[1:3])
            t = args[0]
            if len(t) != n:
                raise EvalError(f"{name} of a {len(t)}-tuple")
            return t[i - 1]
        if name in PRELUDE:
            return PRELUDE[name](*args)
        raise EvalError(f"no evaluator for `{name}`")


def run(prog: Program, name: str, args: Sequence[Any]) -> Any:
    """Run def ``name`` of ``prog`` on ``args``."""
    interp = _Interp(prog)
    if name not in interp.defs:
        raise EvalError(f"no def `{name}`")
    return interp.call_def(interp.defs[name], args)


def evaluate(prog: Program, d: Def, args: Sequence[Any]) -> Any:
    """Run ``d`` (which need not be in ``prog``; calls resolve in ``prog``) on ``args``."""
    return _Interp(prog).call_def(d, args)


def random_value(t: KsType, rng: np.random.Generator, n: int = 3) -> Any:
    """A random value of type ``t``; every vector has length ``n`` (so matrices are
    square and nested sizes agree)."""
    if t.kind == "Float":
        return float(rng.uniform(0.5, 2.0))
    if t.kind == "Integer":
        return int(rng.integers(1, n + 1))
    if t.kind == "Bool":
        return bool(rng.integers(0, 2))
    if t.kind == "String":
        return "s"
    if t.kind == "Tensor":
        elem = t.args[0]
        for _ in range(t.rank - 1):
            elem = KsType("Tensor", (elem,), 1)
        return [random_value(elem, rng, n) for _ in range(n)]
    if t.kind == "Tuple":
        return tuple(random_value(a, rng, n) for a in t.args)
    raise EvalError(f"no random values of type {t}")


def close(a: Any, b: Any, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
    """Whether two values agree (numbers within tolerance, structure equal)."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)):
            return False
        return len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b, strict=False))
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    fa, fb = float(a), float(b)
    if math.isnan(fa) or math.isnan(fb):
        return math.isnan(fa) and math.isnan(fb)
    return abs(fa - fb) <= atol + rtol * max(abs(fa), abs(fb))


def compare_defs(
    prog: Program, old: Def, new: Def, trials: int = 3, seed: int = 0
) -> tuple[bool, str]:
    """Run ``old`` and ``new`` on the same random arguments.

    Returns:
        ``(ok, message)``: ok is False only when the new def's result differs or it fails
        where the old one runs; a def the evaluator cannot run is reported as not verified.
    """
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        try:
            args = [random_value(t, rng) for _, t in old.params]
            want = evaluate(prog, old, args)
        except (EvalError, ArithmeticError, ValueError, TypeError, IndexError) as e:
            return True, f"not verified: {e}"
        try:
            got = evaluate(prog, new, args)
        except (EvalError, ArithmeticError, ValueError, TypeError, IndexError) as e:
            return False, f"optimised def fails: {e}"
        if not close(want, got):
            return False, f"results differ: {want!r} vs {got!r}"
    return True, "verified"
