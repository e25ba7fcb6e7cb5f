"""The knossos dialect's operators (``rust/src/lang/knossos.rs``) and their semantics.

Each construct of the dialect (``let``, ``lam``, ``build``, ``index``, ``call``...) is an
:class:`~tensat_py.ops.OpDef` whose ``evaluate`` is the construct's meaning, following
knossos-ksc's ``SYNTAX.md`` and ksc's ``Prim.hs``. The Knossos evaluator
(:mod:`tensat_py.frontends.knossos.evaluate`, over the syntax tree) and the term executor
(:mod:`tensat_py.runtime.knossos_exec`, over e-graph terms) both run the constructs
through these declarations; scalar arithmetic is the tensor dialect's operators on
rank-0 values.

Values: ``Float`` a Python float, ``Integer`` an int, ``Bool`` a bool, ``String`` a str,
``Vec`` a list, ``Tensor N`` (N > 1) a :class:`TensorN`, ``Tuple`` a tuple (``()`` the
empty one), ``Lam`` a Python function of one argument (a tuple for several).

Constructs bind variables, so their ``evaluate`` does not receive values: each operand is
a :class:`KsOperand`, run when the construct needs its value (``if`` runs one branch) or
under new bindings (``let``'s body, ``lam``'s body). ``ctx.params`` holds the symbol and
integer parameters of the declaration (``name``, ``type``, ``i``/``n`` of ``get``,
``key`` of ``ks_opaque``), and ``ctx.scope`` the variables and functions in scope
(:class:`KsScope`); ``ctx.inputs``/``ctx.output`` are empty (Knossos types are
parameters).

Cost: the dialect is priced by RLO's cost model (``cost_model="rlo"``,
``rust/src/ks_cost.rs``, the one implementation extraction reads), in RLO's units; an
operator's ``cost`` (FLOPs and bytes for the roofline model) raises, saying so.

>>> from tensat_py import ops
>>> ctx = OpContext("build", {}, (), None)
>>> ops.get("build").evaluate(ctx, [Given(3), Given(lambda i: 2.0 * i)])
[0.0, 2.0, 4.0]
>>> ops.get("get").evaluate(OpContext("get", {"i": 2, "n": 2}, (), None), [Given((1, "x"))])
'x'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from tensat_py.ops import OpContext, OpDef, register

__all__ = [
    "EvalError",
    "TensorN",
    "KsOperand",
    "KsScope",
    "Given",
    "add_values",
    "like",
    "build_value",
    "index_value",
    "loop_indices",
    "rank_of",
    "size_of",
    "sum_values",
    "flat_sum",
    "CONSTRUCTS",
]


class EvalError(RuntimeError):
    """A Knossos program cannot run (unknown function, failed assert, bad index)."""


class TensorN(list):  # type: ignore[type-arg]
    """A ``Tensor N`` value with N > 1: nested lists (rows are plain lists) that know
    their rank, so that ``size`` gives a tuple and overloads tell it from a Vec of Vecs."""

    def __init__(self, rows: Any, rank: int) -> None:
        super().__init__(rows)
        self.rank = rank


class KsScope(Protocol):
    """What is in scope where a construct runs: variables and functions."""

    def variable(self, name: str) -> Any:
        """The value bound to ``name``; raises :class:`EvalError` when unbound."""
        ...

    def call(self, name: str, args: list[Any]) -> Any:
        """Call the function ``name`` (a def, a prelude function or a primitive)."""
        ...

    def opaque(self, key: str, operands: list[Any]) -> Any:
        """Run the untranslated sub-term ``key`` over its operands' values."""
        ...


class KsOperand(Protocol):
    """One operand of a construct, not yet run."""

    def value(self) -> Any:
        """The operand's value in the construct's scope."""
        ...

    def under(self, bindings: Mapping[str, Any]) -> Any:
        """The operand's value with ``bindings`` added to the scope (a binder's body)."""
        ...


class Given:
    """An operand whose value is already known (a call's evaluated argument).

    >>> Given(2.0).value()
    2.0
    """

    def __init__(self, value: Any) -> None:
        self._value = value

    def value(self) -> Any:
        return self._value

    def under(self, bindings: Mapping[str, Any]) -> Any:
        raise EvalError("a value given in advance cannot be run under new bindings")


# --- values -----------------------------------------------------------------------------


def like(proto: Any, rows: list[Any]) -> Any:
    """``rows`` as a tensor of ``proto``'s rank."""
    return TensorN(rows, proto.rank) if isinstance(proto, TensorN) else rows


def add_values(a: Any, b: Any) -> Any:
    """``a + b`` elementwise over tuples and tensors (``sumbuild``'s and ``sum``'s add)."""
    if isinstance(a, tuple):
        return tuple(add_values(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, list):
        return like(a, [add_values(x, y) for x, y in zip(a, b, strict=False)])
    return a + b


def rank_of(v: Any) -> int:
    """The rank of a tensor value: a :class:`TensorN`'s, else 1 (a Vec)."""
    return v.rank if isinstance(v, TensorN) else 1


def index_value(i: Any, v: Sequence[Any]) -> Any:
    """``index i v``: element ``i`` (an Integer, or a tuple of N for a Tensor N).

    Raises:
        EvalError: the index is out of range.
    """
    for k in i if isinstance(i, tuple) else (i,):
        if not isinstance(v, list) or not 0 <= k < len(v):
            raise EvalError(f"index {i} out of range")
        v = v[k]
    return v


def size_of(v: Any, rank: int = 1) -> Any:
    """``size v``: an Integer for a Vec, a tuple of N Integers for a Tensor N."""
    if rank == 1:
        return len(v)
    out = []
    for _ in range(rank):
        out.append(len(v))
        v = v[0] if v else []
    return tuple(out)


def loop_indices(n: Any) -> list[Any]:
    """The index values of a loop over ``n`` (an Integer or a tuple of Integers), in
    row-major order."""
    if isinstance(n, tuple):
        return [tuple(int(x) for x in ix) for ix in np.ndindex(*n)]
    return list(range(int(n)))


def build_value(n: Any, f: Callable[[Any], Any]) -> Any:
    """``build n f``: ``[f 0, ..., f (n-1)]``; a Tensor N when ``n`` is a tuple."""
    if not isinstance(n, tuple):
        return [f(i) for i in range(int(n))]

    def rec(prefix: tuple[int, ...]) -> Any:
        if len(prefix) == len(n):
            return f(prefix)
        return [rec((*prefix, i)) for i in range(int(n[len(prefix)]))]

    return TensorN(rec(()), len(n))


def sum_values(v: Sequence[Any]) -> Any:
    """The sum of a non-empty sequence of values (elementwise for tuples and tensors).

    Raises:
        EvalError: ``v`` is empty (ksc has no zero of an unknown shape).
    """
    if len(v) == 0:
        raise EvalError("sum of an empty Vec")
    acc = v[0]
    for x in v[1:]:
        acc = add_values(acc, x)
    return acc


def flat_sum(v: Any) -> Any:
    """``sum v``: the sum of every element of a (possibly nested) tensor."""
    if isinstance(v, list) and v and isinstance(v[0], list):
        return sum_values([flat_sum(x) for x in v])
    return sum_values(v)


# --- the constructs ---------------------------------------------------------------------


def _var(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    return ctx.scope.variable(str(ctx.params["name"]))


def _let(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    """``(let x value body)``; ``name`` a tuple of names binds a tuple's elements."""
    value, body = args
    names = ctx.params["name"]
    v = value.value()
    if isinstance(names, tuple):
        if not isinstance(v, tuple) or len(v) != len(names):
            raise EvalError(f"let of {len(names)} names binds {v!r}")
        return body.under(dict(zip(names, v, strict=True)))
    return body.under({str(names): v})


def _lam(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    (body,) = args
    name = str(ctx.params["name"])
    return lambda x: body.under({name: x})


def _build(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    n, f = args
    return build_value(n.value(), f.value())


def _sumbuild(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    n, f = args
    fn = f.value()
    return sum_values([fn(i) for i in loop_indices(n.value())])


def _index(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    i, v = args
    return index_value(i.value(), v.value())


def _size(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    v = args[0].value()
    return size_of(v, rank_of(v))


def _sum(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    return flat_sum(args[0].value())


def _tuple(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    return tuple(a.value() for a in args)


def _get(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    """``get$i$n``: element ``i`` (1-based) of an ``n``-tuple."""
    i, n = int(ctx.params["i"]), int(ctx.params["n"])
    t = args[0].value()
    if not isinstance(t, tuple) or len(t) != n or not 1 <= i <= n:
        raise EvalError(f"get${i}${n} of {t!r}")
    return t[i - 1]


def _if(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    cond, then, other = args
    return then.value() if cond.value() else other.value()


def _assert(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    cond, body = args
    if not cond.value():
        raise EvalError("assertion failed")
    return body.value()


def _call(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    return ctx.scope.call(str(ctx.params["name"]), [a.value() for a in args])


def _opaque(ctx: OpContext, args: Sequence[KsOperand]) -> Any:
    return ctx.scope.opaque(str(ctx.params["key"]), [a.value() for a in args])


_CONSTRUCTS: dict[str, tuple[Callable[[OpContext, Sequence[Any]], Any], str]] = {
    "var": (_var, "a variable of the given type"),
    "let": (_let, "body with name bound to value"),
    "lam": (_lam, "the function name -> body"),
    "build": (_build, "the vector [f 0, ..., f (n-1)]"),
    "sumbuild": (_sumbuild, "f 0 + ... + f (n-1)"),
    "index": (_index, "element i of vector v"),
    "size": (_size, "length of vector v"),
    "sum": (_sum, "sum of the elements of v"),
    "tuple": (_tuple, "the tuple of the operands"),
    "get": (_get, "element i (1-based) of an n-tuple"),
    "if": (_if, "then if cond else else"),
    "assert": (_assert, "body, after checking cond"),
    "call": (_call, "a call of a user or prelude function"),
    "ks_opaque": (
        _opaque,
        "an untranslated sub-term over its operands (kept by key, raised as written)",
    ),
}


def _cost(ctx: OpContext) -> tuple[float, float]:
    raise ValueError(
        f"`{ctx.op}` (Knossos) is priced by the rlo cost model in RLO units "
        "(cost_model='rlo'), not by FLOPs and bytes"
    )


def _to_onnx(writer: Any, ctx: OpContext, inputs: Sequence[str], output: str) -> None:
    raise ValueError(f"`{ctx.op}` (Knossos) has no ONNX form; write .ks files")


#: The knossos dialect's operators, by name.
CONSTRUCTS = tuple(_CONSTRUCTS)

for _name, (_fn, _doc) in _CONSTRUCTS.items():
    register(OpDef(_name, "knossos", _fn, _cost, _to_onnx, doc=_doc))
