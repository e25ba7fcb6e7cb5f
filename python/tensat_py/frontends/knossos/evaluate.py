"""A reference evaluator for Knossos programs (Python; NumPy for vector arithmetic).

Values: ``Float`` Python float, ``Integer`` int, ``Bool`` bool, ``String`` str, ``Vec``
a list, ``Tensor N`` (N > 1) a :class:`TensorN` (nested lists that know their rank),
``Tuple`` a tuple (``()`` the empty one), ``Lam`` a Python function. Prelude semantics
follow knossos-ksc's ``SYNTAX.md`` and ksc's ``Prim.hs``: integer ``div`` truncates toward
zero, ``build n f`` is ``[f 0 .. f (n-1)]`` (``n`` a tuple of Integers builds a Tensor N),
``sumbuild n f`` is ``f 0 + ... + f (n-1)``, ``index``/``size`` take/give a tuple of
Integers for a Tensor N, ``fold f acc v`` is ``f (... f (acc, v0) ..., v(n-1))``,
``get$i$n`` is 1-based. A call resolves to the def of that name whose parameter types
match the arguments (overloads), then to the prelude's defs, then to the primitives
below; ``[fwd f]``, ``[rev f]`` and ``[sufrev f]`` without a def are computed by central
differences of ``f`` (so the original and an optimised def agree; the figures are not
ksc's AD).

The constructs (``let``, ``lam``, ``if``, ``assert``, ``build``, ``sumbuild``, ``index``,
``size``, ``sum``, ``tuple``, ``get$i$n``) run through their operators' declarations
(:mod:`tensat_py.ops.knossos`), which hold their semantics; this module walks the syntax
tree, resolves calls and holds the prelude's primitives. :func:`evaluate_term` runs the
e-graph form of a def instead (:mod:`tensat_py.runtime.knossos_exec`).

>>> from tensat_py.frontends.knossos.syntax import parse_text
>>> p = parse_text("(def f Float ((v : Vec Float))"
...                " (sumbuild (size v) (lam (i : Integer) (index i v))))")
>>> run(p, "f", [[1.0, 2.0, 3.5]])
6.5
"""

from __future__ import annotations

import math
import time
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
from tensat_py.ops import OpContext
from tensat_py.ops import get as op_def
from tensat_py.ops import knossos as ks
from tensat_py.ops.knossos import EvalError, Given, TensorN

__all__ = [
    "EvalError",
    "TensorN",
    "run",
    "evaluate",
    "random_value",
    "compare_defs",
    "evaluate_term",
    "close",
]


#: Seconds one evaluation may take (a benchmark ``main`` over real sizes takes far longer
#: in Python than compiled; such a def is reported as not verified).
TIME_LIMIT = 3.0


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
            proto = next(x for x in xs if isinstance(x, list))
            n = max(len(x) for x in xs if isinstance(x, list))
            rows = [g(*(x[i] if isinstance(x, list) else x for x in xs)) for i in range(n)]
            return ks.like(proto, rows)
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
    "dot": lambda a, b: float(np.dot(np.asarray(a, float), np.asarray(b, float))),
}


def _ranhash(i: int) -> float:
    """ksc's ``$ranhashdoub``: a deterministic pseudo-random Float in [0, 1) of an
    Integer (here a splitmix-style hash; the values differ from ksc's runtime)."""
    z = (int(i) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53)


def _scale(s: Any, a: Any) -> Any:
    if isinstance(a, tuple):
        return tuple(_scale(s, x) for x in a)
    if isinstance(a, list):
        return ks.like(a, [_scale(s, x) for x in a])
    return s * a


def _leaves(v: Any) -> list[float]:
    if isinstance(v, (list, tuple)):
        return [x for y in v for x in _leaves(y)]
    return [v] if isinstance(v, float) else []


def _dot(a: Any, b: Any) -> Any:
    if (
        isinstance(a, list)
        and a
        and isinstance(a[0], list)
        and isinstance(b, list)
        and b
        and isinstance(b[0], list)
    ):
        return (np.asarray(a, float) @ np.asarray(b, float)).tolist()
    return float(sum(x * y for x, y in zip(_leaves(a), _leaves(b), strict=False)))


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, list) and a and isinstance(a[0], list) and isinstance(b, list):
        if b and not isinstance(b[0], list):  # (mul (Tensor 2 Float) (Vec Float))
            return (np.asarray(a, float) @ np.asarray(b, float)).tolist()
    if not isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return _scale(a, b)
    if not isinstance(b, (list, tuple)) and isinstance(a, (list, tuple)):
        return _scale(b, a)
    return _elementwise(lambda x, y: x * y)(a, b)


def _elementwise_tuple(f: Callable[..., Any]) -> Callable[..., Any]:
    ew = _elementwise(f)

    def g(*xs: Any) -> Any:
        if len(xs) == 1 and isinstance(xs[0], tuple):
            xs = xs[0]
        if any(isinstance(x, tuple) for x in xs) and len(xs) == 2:
            a, b = xs
            if isinstance(a, tuple) and isinstance(b, tuple):
                return tuple(g(x, y) for x, y in zip(a, b, strict=False))
        return ew(*xs)

    return g


PRELUDE.update(
    {
        "add": _elementwise_tuple(lambda a, b: a + b),
        "sub": _elementwise_tuple(lambda a, b: a - b),
        "mul": lambda *xs: _mul(*(xs[0] if len(xs) == 1 else xs)),
        "div": _elementwise_tuple(_div),
        "ts_add": lambda a, b: _map_pair(a, b),
        "ts_scale": _scale,
        "ts_neg": lambda a: _scale(-1.0, a),
        "ts_dot": _dot,
        "dot": _dot,
        "cosh": _elementwise(math.cosh),
        "sinh": _elementwise(math.sinh),
        "atan": _elementwise(math.atan),
        "atan2": lambda a, b=None: math.atan2(*(a if b is None else (a, b))),
        "bool_to_float": lambda b: 1.0 if b else 0.0,
        "to_integer": lambda x: int(x),
        "imax": lambda v: int(np.argmax(np.asarray(v, float))),
        "imin": lambda v: int(np.argmin(np.asarray(v, float))),
        "map2": lambda f, a, b: [f((x, y)) for x, y in zip(a, b, strict=True)],
        "shape": lambda v: _shape(v),
        "buildFromSparse": lambda t, n, f: _from_sparse(t, n, f),
        "buildFromSparseTupled": lambda ts, n, f: tuple(
            _from_sparse(t, n, lambda ix, j=j: f(ix)[j]) for j, t in enumerate(ts)
        ),
        "$check": lambda f, rf, s_, *rest: _check(f, rf, s_, *rest[-2:]),
        "$ranhashdoub": _ranhash,
        "$trace": lambda x: x,
        "$copydown": lambda x: x,
        "$inline": lambda x: x,
        "print": lambda *xs: 0,
        "Vec_init": lambda *xs: list(xs),
        "unzip": lambda v: tuple(list(x) for x in zip(*v, strict=True)) if v else (),
        "constVec": lambda n, x: ks.build_value(n, lambda _i: x),
        "deltaVec": lambda n, i, x: ks.build_value(n, lambda j: x if j == i else _scale(0.0, x)),
        "relu": _elementwise(lambda x: max(x, 0.0)),
        "sigmoid": _elementwise(lambda x: 1.0 / (1.0 + math.exp(-x))),
    }
)


def _map_pair(a: Any, b: Any) -> Any:
    """``ts_add``: a value plus a tangent of it (the tangent of a discrete part is
    ``()``, which leaves it as it is)."""
    if b == ():
        return a
    if isinstance(a, tuple):
        return tuple(_map_pair(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, list):
        return ks.like(a, [_map_pair(x, y) for x, y in zip(a, b, strict=True)])
    return a + b


def _shape(v: Any) -> Any:
    """ksc's ``shape`` (Prim.hs ``makeShape``): ``()`` where every value of the type has
    the same shape, the size of a tensor of such elements, else the shapes elementwise."""
    s = _nontrivial(v)
    return () if s is None else s


def _nontrivial(v: Any) -> Any:
    if isinstance(v, TensorN):
        flat: list[Any] = list(v)
        for _ in range(v.rank - 1):
            flat = [y for x in flat for y in x]
        if all(_nontrivial(x) is None for x in flat):
            return ks.size_of(v, v.rank)
        return _map_tensor(_shape, v)
    if isinstance(v, list):
        inner = [_nontrivial(x) for x in v]
        if not v or all(x is None for x in inner):
            return ks.size_of(v, ks.rank_of(v))
        return ks.like(v, inner)
    if isinstance(v, tuple):
        parts = [_nontrivial(x) for x in v]
        if all(p is None for p in parts):
            return None
        return tuple(() if p is None else p for p in parts)
    return None


def _zero_of_shape(t: Any) -> Any:
    if isinstance(t, list):
        return ks.like(t, [_zero_of_shape(x) for x in t])
    if isinstance(t, tuple) and t:
        return tuple(_zero_of_shape(x) for x in t)
    return 0.0


def _from_sparse(template: Any, n: Any, f: Callable[[Any], Any]) -> Any:
    """ksc's ``buildFromSparse``: a tensor shaped like ``template`` (a tensor of
    shapes) whose elements are the sums of the values ``f`` pairs with each index."""
    out = _zero_of_shape(template)
    for ix in ks.loop_indices(n):
        i, v = f(ix)
        path = i if isinstance(i, tuple) else (i,)
        row = out
        for k in path[:-1]:
            row = row[k]
        if not 0 <= path[-1] < len(row):
            raise EvalError(f"buildFromSparse: index {i} out of range")
        row[path[-1]] = ks.add_values(row[path[-1]], v)
    return out


def _check(f: Any, rev_f: Any, s: Any, ds: Any, dt: Any) -> float:
    """ksc's ``$check f rev_f s ds dt``: how far ``<rev_f (s, dt), ds>`` is from
    ``<dt, f'(s) ds>`` (the latter by central differences)."""
    lhs = _dot(rev_f((s, dt)), ds)
    rhs = _dot(dt, _fwd(f, s, ds))
    return abs(float(lhs) - float(rhs))


#: Calls that are constructs of the knossos dialect: run by their ``OpDef``
#: (:mod:`tensat_py.ops.knossos`) on the evaluated arguments.
_CONSTRUCT_CALLS = frozenset({"build", "sumbuild", "index", "size", "sum", "tuple"})

#: Primitives of two arguments that also take them as one pair (ksc's calling convention).
_BINARY_PRIMS = {
    "add", "sub", "mul", "div", "max", "min", "eq", "ne", "gt", "lt", "gte", "lte", "and",
    "or", "pow", "atan2", "dot", "ts_add", "ts_scale", "ts_dot",
}  # fmt: skip


_H = 1e-6


def _map_floats(x: Any, fn: Callable[[float], Any], discrete: Any = ()) -> Any:
    """``x`` with ``fn`` applied to each Float leaf and ``discrete`` for the others
    (``()``: a tangent's shape; ``None``: keep them)."""
    if isinstance(x, tuple):
        return tuple(_map_floats(y, fn, discrete) for y in x)
    if isinstance(x, list):
        return ks.like(x, [_map_floats(y, fn, discrete) for y in x])
    if isinstance(x, float):
        return fn(x)
    return x if discrete is None else discrete


def _perturb(x: Any, d: Any, h: float) -> Any:
    """``x + h * d`` on the Float leaves (``d`` a tangent of ``x``)."""
    if isinstance(x, tuple):
        return tuple(_perturb(a, b, h) for a, b in zip(x, d, strict=False))
    if isinstance(x, list):
        return ks.like(x, [_perturb(a, b, h) for a, b in zip(x, d, strict=False)])
    if isinstance(x, float) and isinstance(d, (int, float)):
        return x + h * float(d)
    return x


def _diff(a: Any, b: Any, h: float) -> Any:
    """``(a - b) / 2h`` on the Float leaves, ``()`` on the others (a tangent)."""
    if isinstance(a, tuple):
        return tuple(_diff(x, y, h) for x, y in zip(a, b, strict=False))
    if isinstance(a, list):
        return ks.like(a, [_diff(x, y, h) for x, y in zip(a, b, strict=False)])
    if isinstance(a, float):
        return (a - b) / (2 * h)
    return ()


def _fwd(f: Callable[[Any], Any], x: Any, dx: Any) -> Any:
    """The forward derivative of ``f`` at ``x`` along ``dx`` (central differences)."""
    return _diff(f(_perturb(x, dx, _H)), f(_perturb(x, dx, -_H)), _H)


def _rev(f: Callable[[Any], Any], x: Any, dr: Any) -> Any:
    """The reverse derivative of ``f`` at ``x`` applied to ``dr`` (central differences,
    one Float leaf of ``x`` at a time)."""
    n = len(_leaves(x))
    grads = []
    for k in range(n):
        counter = iter(range(n))
        e = _map_floats(x, lambda _v, k=k, c=counter: 1.0 if next(c) == k else 0.0)
        g = _diff(f(_perturb(x, e, _H)), f(_perturb(x, e, -_H)), _H)
        grads.append(sum(a * b for a, b in zip(_leaves(g), _leaves(dr), strict=False)))
    it = iter(grads)
    return _map_floats(x, lambda _v: next(it))


def _matches(v: Any, t: KsType) -> bool:
    """Whether the value ``v`` has type ``t`` (a Vec of Vecs and a Tensor 2 differ)."""
    k = t.kind
    if k == "Float":
        return isinstance(v, float)
    if k == "Integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if k == "Bool":
        return isinstance(v, bool)
    if k == "String":
        return isinstance(v, str)
    if k == "Unit" or (k == "Tuple" and not t.args):
        return v == ()
    if k == "Tuple":
        return (
            isinstance(v, tuple)
            and len(v) == len(t.args)
            and all(_matches(x, a) for x, a in zip(v, t.args, strict=True))
        )
    if k == "Tensor":
        if not isinstance(v, list) or ks.rank_of(v) != t.rank:
            return False
        flat: list[Any] = list(v)
        for _ in range(t.rank - 1):
            flat = [y for x in flat for y in x]
        return all(_matches(x, t.args[0]) for x in flat[:4])
    return k in ("Lam", "LM") and callable(v)


class _Interp:
    def __init__(
        self, prog: Program, depth_limit: int = 200, prelude: Program | None = None
    ) -> None:
        self.defs: dict[str, list[Def]] = {}
        from tensat_py.frontends.knossos.lower import base_name

        for p in (prelude, prog):
            for d in p.defs if p is not None else ():
                lst = self.defs.setdefault(base_name(d.name), [])
                key = [t for _, t in d.params]
                lst[:] = [x for x in lst if [t for _, t in x.params] != key]
                lst.append(d)
        from tensat_py.frontends.knossos.lower import arg_type

        #: Declared-only functions: name -> result types and argument types (overloads).
        self.edefs: dict[str, list[KsType]] = {}
        self.edef_params: dict[str, list[KsType]] = {}
        for p in (prelude, prog):
            for e in p.edefs if p is not None else ():
                self.edefs.setdefault(e.name, []).append(e.ret)
                self.edef_params.setdefault(e.name, []).append(arg_type(e.arg_types))
        self.depth = 0
        self.limit = depth_limit
        self.steps = 0
        self.seconds = TIME_LIMIT
        self.deadline = time.perf_counter() + TIME_LIMIT

    def find(self, name: str, args: Sequence[Any]) -> Def | None:
        """The def ``name`` of the overload that takes ``args``."""
        from tensat_py.frontends.knossos.lower import _split_name, arg_type, base_name

        base = base_name(name)
        lst = self.defs.get(base)
        if not lst:
            return None
        if base != name:  # [f T]: the overload at T
            parts = _split_name(name)
            want = parts[2] if parts is not None else None
            return next((d for d in lst if arg_type([t for _, t in d.params]) == want), None)
        # One def and no other implementation of the name: that def.
        sole = (
            len(lst) == 1
            and base not in PRELUDE
            and base not in _CONSTRUCT_CALLS - {"build", "sumbuild"}
            and base not in self.edefs
        )
        if sole:
            return lst[0]
        for d in lst:
            ps = [t for _, t in d.params]
            if len(ps) == len(args) and all(_matches(a, t) for a, t in zip(args, ps, strict=True)):
                return d
            if len(args) == 1 and isinstance(args[0], tuple) and len(ps) == len(args[0]) > 1:
                if all(_matches(a, t) for a, t in zip(args[0], ps, strict=True)):
                    return d
            if len(ps) == 1 and len(args) > 1 and _matches(tuple(args), ps[0]):
                return d
        return lst[0] if sole else None

    def call_def(self, d: Def, args: Sequence[Any]) -> Any:
        if len(args) == 1 and len(d.params) > 1 and isinstance(args[0], tuple):
            args = args[0]
        elif len(args) > 1 and len(d.params) == 1:
            args = [tuple(args)]
        elif not args and len(d.params) == 1 and d.params[0][1].kind in ("Unit", "Tuple"):
            args = [()]
        elif args == [()] and not d.params:
            args = []
        if len(args) != len(d.params):
            raise EvalError(f"`{d.name}` takes {len(d.params)} arguments, got {len(args)}")
        self.depth += 1
        if self.depth > self.limit:
            raise EvalError("recursion too deep")
        try:
            return self.eval(d.body, {p: a for (p, _), a in zip(d.params, args, strict=True)})
        finally:
            self.depth -= 1

    def function(self, name: str, env: dict[str, Any]) -> Callable[[Any], Any]:
        """``name`` as a one-argument function (a tuple for several arguments)."""

        def f(x: Any) -> Any:
            return self.apply(name, [x], env)

        return f

    def apply(self, name: str, args: list[Any], env: dict[str, Any]) -> Any:
        if name in env:
            fn = env[name]
            if not callable(fn):
                raise EvalError(f"`{name}` is not a function")
            return fn(args[0] if len(args) == 1 else tuple(args))
        d = self.find(name, args)
        if d is not None:
            return self.call_def(d, args)
        if name in _CONSTRUCT_CALLS:
            return self.construct(name, {}, [Given(a) for a in args], env)
        if name == "fold":
            f, acc, v = args
            for x in v:
                acc = f((acc, x))
            return acc
        if name == "map":
            f, v = args
            return _map_tensor(f, v)
        if name == "$BENCH":
            r = args[0](())
            return float(r) if isinstance(r, (int, float)) else 0.0
        if name.startswith("get$"):
            i, n = (int(x) for x in name.split("$")[1:3])
            return self.construct("get", {"i": i, "n": n}, [Given(a) for a in args], env)
        if name in PRELUDE:
            if len(args) == 1 and isinstance(args[0], tuple) and name in _BINARY_PRIMS:
                args = list(args[0])  # (add (tuple a b)) is (add a b)
            return PRELUDE[name](*args)
        if name.startswith("["):
            return self.structured(name, args, env)
        return self.uninterpreted(name, args)

    def opaque(self, key: str, operands: list[Any]) -> Any:
        """Run the untranslated sub-term ``key`` (the front end's side table) with its
        holes and free variables bound to ``operands``' values, in that order."""
        from tensat_py.frontends.knossos.lower import opaque_skeleton

        skeleton, names, holes = opaque_skeleton(key, len(operands))
        env = dict(zip(holes + names, operands, strict=True))
        return self.eval(skeleton, env)

    def uninterpreted(self, name: str, args: list[Any]) -> Any:
        """An ``edef`` nothing defines: a deterministic pseudo-random value of its result
        type, a function of its name and arguments (an uninterpreted function, so that a
        def calling it is compared as a program over an unknown function)."""
        ret = self.edefs.get(name)
        if ret is None or len(ret) != 1 and not args:
            raise EvalError(f"no evaluator for `{name}`")
        t = ret[0]
        if len(ret) > 1:
            for r, ps in zip(ret, self.edef_params[name], strict=True):
                if _matches(args[0] if len(args) == 1 else tuple(args), ps):
                    t = r
                    break
        seed = int.from_bytes(
            __import__("hashlib").sha1(f"{name}|{args!r}".encode()).digest()[:8], "little"
        )
        return random_value(t, np.random.default_rng(seed))

    def structured(self, name: str, args: list[Any], env: dict[str, Any]) -> Any:
        from tensat_py.frontends.knossos.lower import _split_name

        parts = _split_name(name)
        if parts is None:
            raise EvalError(f"no evaluator for `{name}`")
        deriv, base, _ = parts
        if not deriv:
            return self.apply(base, args, env)
        f = self.function(base, env)
        if deriv in ("fwd", "rev", "sufrev"):
            if len(args) == 1 and isinstance(args[0], tuple) and len(args[0]) == 2:
                args = list(args[0])
            if len(args) != 2:
                raise EvalError(f"`{name}` takes (x, d), got {len(args)} arguments")
            x, d = args
            return _fwd(f, x, d) if deriv == "fwd" else _rev(f, x, d)
        if deriv == "CL":
            return f(args[0] if len(args) == 1 else tuple(args))
        if deriv == "shape":
            return _shape(f(args[0] if len(args) == 1 else tuple(args)))
        raise EvalError(f"no evaluator for `{name}`")

    def construct(
        self, op: str, params: dict[str, Any], operands: Sequence[Any], env: dict[str, Any]
    ) -> Any:
        """Run the knossos-dialect construct ``op`` through its ``OpDef``."""
        ctx = OpContext(op, params, (), None, scope=_Scope(self, env))
        return _EVALUATE[op](ctx, operands)

    def operands(self, exprs: Sequence[Expr], env: dict[str, Any]) -> list[_Operand]:
        return [_Operand(self, x, env) for x in exprs]

    def eval(self, e: Expr, env: dict[str, Any]) -> Any:
        self.steps += 1
        if self.steps & 0xFFF == 0 and time.perf_counter() > self.deadline:
            raise EvalError(f"evaluation takes longer than {self.seconds:g} s")
        if isinstance(e, Const):
            return e.value
        if isinstance(e, Var):
            if e.name not in env:
                raise EvalError(f"unbound variable `{e.name}`")
            return env[e.name]
        if isinstance(e, Let):
            name = e.vars if e.tupled else e.vars[0]
            return self.construct("let", {"name": name}, self.operands((e.rhs, e.body), env), env)
        if isinstance(e, Lam):
            return self.construct("lam", {"name": e.var}, self.operands((e.body,), env), env)
        if isinstance(e, If):
            return self.construct("if", {}, self.operands((e.cond, e.then, e.other), env), env)
        if isinstance(e, Assert):
            return self.construct("assert", {}, self.operands((e.cond, e.body), env), env)
        assert isinstance(e, Call)
        if e.name == "$dummy" and len(e.args) == 1:
            from tensat_py.frontends.knossos.lower import type_of_expr

            t = type_of_expr(e.args[0])
            if t is None:
                raise EvalError("`$dummy` of something that is not a type")
            return random_value(t, np.random.default_rng(0))
        return self.apply(e.name, [self.eval(a, env) for a in e.args], env)


class _Operand:
    """A syntax-tree operand of a construct (:class:`tensat_py.ops.knossos.KsOperand`)."""

    __slots__ = ("interp", "expr", "env")

    def __init__(self, interp: _Interp, expr: Expr, env: dict[str, Any]) -> None:
        self.interp, self.expr, self.env = interp, expr, env

    def value(self) -> Any:
        return self.interp.eval(self.expr, self.env)

    def under(self, bindings: Any) -> Any:
        return self.interp.eval(self.expr, {**self.env, **bindings})


class _Scope:
    """The variables and functions where a construct runs (:class:`ks.KsScope`)."""

    __slots__ = ("interp", "env")

    def __init__(self, interp: _Interp, env: dict[str, Any]) -> None:
        self.interp, self.env = interp, env

    def variable(self, name: str) -> Any:
        if name not in self.env:
            raise EvalError(f"unbound variable `{name}`")
        return self.env[name]

    def call(self, name: str, args: list[Any]) -> Any:
        return self.interp.apply(name, args, self.env)

    def opaque(self, key: str, operands: list[Any]) -> Any:
        return self.interp.opaque(key, operands)


_EVALUATE = {name: op_def(name).evaluate for name in ks.CONSTRUCTS}


def _map_tensor(f: Callable[[Any], Any], v: Any) -> Any:
    if isinstance(v, TensorN):

        def rec(x: Any, depth: int) -> Any:
            return [rec(y, depth - 1) for y in x] if depth else f(x)

        return TensorN([rec(r, v.rank - 1) for r in v], v.rank)
    return [f(x) for x in v]


def run(prog: Program, name: str, args: Sequence[Any], prelude: Program | None = None) -> Any:
    """Run def ``name`` of ``prog`` on ``args`` (the overload that takes them); calls
    resolve in ``prog``, then in ``prelude``'s defs, then in the built-in primitives."""
    interp = _Interp(prog, prelude=prelude)
    d = next((x for x in prog.defs if x.name == name), None)
    if d is None or len(interp.defs.get(name, [])) > 1:
        d = interp.find(name, args)
    if d is None:
        raise EvalError(f"no def `{name}`")
    return interp.call_def(d, args)


def evaluate(prog: Program, d: Def, args: Sequence[Any], prelude: Program | None = None) -> Any:
    """Run ``d`` (which need not be in ``prog``; calls resolve in ``prog``) on ``args``."""
    return _Interp(prog, prelude=prelude).call_def(d, args)


class _TermProgram:
    """The program a term's calls resolve in (:class:`tensat_py.runtime.knossos_exec.Program`)."""

    def __init__(self, interp: _Interp) -> None:
        self.interp = interp

    def call(self, name: str, args: list[Any]) -> Any:
        from tensat_py.frontends.knossos.lower import call_name

        return self.interp.apply(call_name(name), args, {})

    def opaque(self, key: str, operands: list[Any]) -> Any:
        return self.interp.opaque(key, operands)


def evaluate_term(
    prog: Program,
    nodes: Sequence[tuple[str, Sequence[int]]],
    params: Sequence[str],
    args: Sequence[Any],
    prelude: Program | None = None,
) -> Any:
    """Run a knossos-dialect term (a def's body as :func:`~tensat_py.frontends.knossos.
    lower.lower` or extraction writes it) with its parameters ``params`` bound to
    ``args``, through the operators' declarations
    (:func:`tensat_py.runtime.knossos_exec.run_term`); calls resolve as in :func:`run`.

    Raises:
        EvalError: as :func:`run`; also when ``params`` and ``args`` differ in length.

    >>> from tensat_py.frontends.knossos.syntax import parse_text
    >>> from tensat_py.frontends.knossos.lower import lower, signatures
    >>> p = parse_text("(def f Float ((x : Float)) (mul x (add x 1.0)))")
    >>> nodes, _ = lower(p.defs[0], signatures(p))
    >>> evaluate_term(p, nodes, ["x"], [2.0])
    6.0
    """
    from tensat_py.runtime.knossos_exec import run_term

    if len(params) != len(args):
        raise EvalError(f"{len(params)} parameters, {len(args)} arguments")
    interp = _Interp(prog, prelude=prelude)
    return run_term(nodes, dict(zip(params, args, strict=True)), _TermProgram(interp))


def random_value(t: KsType, rng: np.random.Generator, n: int = 3) -> Any:
    """A random value of type ``t``; every tensor has ``n`` elements per dimension (so
    matrices are square and nested sizes agree); a ``Lam S T`` is a constant function
    returning a random ``T``."""
    if t.kind == "Float":
        return float(rng.uniform(0.5, 2.0))
    if t.kind == "Integer":
        return int(rng.integers(1, n + 1))
    if t.kind == "Bool":
        return bool(rng.integers(0, 2))
    if t.kind == "String":
        return "s"
    if t.kind == "Unit" or (t.kind == "Tuple" and not t.args):
        return ()
    if t.kind == "Tensor":
        size = (n,) * t.rank if t.rank > 1 else n
        return ks.build_value(size, lambda _i: random_value(t.args[0], rng, n))
    if t.kind == "Tuple":
        return tuple(random_value(a, rng, n) for a in t.args)
    if t.kind == "Lam":
        r = random_value(t.args[1], rng, n)
        return lambda _x: r
    raise EvalError(f"no random values of type {t}")


def close(a: Any, b: Any, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
    """Whether two values agree (numbers within tolerance, structure equal)."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)):
            return False
        if isinstance(a, tuple) != isinstance(b, tuple):
            return False
        return len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b, strict=False))
    if isinstance(a, str) or isinstance(b, str) or callable(a) or callable(b):
        return a == b
    fa, fb = float(a), float(b)
    if math.isnan(fa) or math.isnan(fb):
        return math.isnan(fa) and math.isnan(fb)
    return abs(fa - fb) <= atol + rtol * max(abs(fa), abs(fb))


def compare_defs(
    prog: Program,
    old: Def,
    new: Def,
    trials: int = 3,
    seed: int = 0,
    prelude: Program | None = None,
) -> tuple[bool, str]:
    """Run ``old`` and ``new`` on the same random arguments.

    Returns:
        ``(ok, message)``: ok is False only when the new def's result differs or it fails
        where the old one runs; a def the evaluator cannot run is reported as not verified.
    """
    errors = (EvalError, RecursionError, ArithmeticError, ValueError, TypeError, IndexError)
    rng = np.random.default_rng(seed)
    ran = 0
    why = ""
    # Argument sizes: tensors of 3 elements per dimension first; where the original
    # cannot run on those (a constant index past the end, a zero divisor), other sizes.
    for n in (3, 3, 3, 5, 5, 8, 2):
        if ran >= trials:
            break
        try:
            args = [random_value(t, rng, n) for _, t in old.params]
            want = evaluate(prog, old, args, prelude)
        except errors as e:
            why = why or str(e)
            if not old.params or "longer than" in why:
                break  # nothing random to change, or too slow to try again
            continue
        ran += 1
        if new == old:
            continue  # the same def: it runs, so it is verified
        try:
            got = evaluate(prog, new, args, prelude)
        except errors as e:
            return False, f"optimised def fails: {e}"
        if not close(want, got):
            return False, f"results differ: {want!r} vs {got!r}"
    if ran == 0:
        return True, f"not verified: {why}"
    return True, "verified"
