"""Knossos expressions to and from the e-graph language (the knossos dialect).

:func:`lower` types a def's body (the front end's type inference, as a Knossos compiler's
type checker does) and writes it as a flat node list for ``_core.EGraph``: variables become
``(var x T)`` with ``T`` in the compact type form (``Vec<Float>``), literals rank-0
``scalar`` tensors (``Float`` float64, ``Integer`` int64, ``Bool`` bool), scalar
arithmetic the tensor dialect's operators (``add``, ``mul``, ``exp``, ``equal``...),
``to_float`` a ``cast`` to float64, ``get$i$n`` ``(get i n t)``, tuple bindings a ``let``
of a fresh tuple variable and ``get``\\ s, and user-function calls ``(call f T args...)``.
:func:`raise_term` reads an extracted term back into a Knossos expression.

What has no translation (strings, ``Tensor N`` with N > 1, structured names, prelude
functions without a known type) raises :class:`Untranslatable`; such a def is kept as it
is.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from tensat_py.frontends.knossos.syntax import (
    ANY,
    BOOL,
    FLOAT,
    INTEGER,
    Assert,
    Call,
    Const,
    Def,
    Edef,
    Expr,
    If,
    KsType,
    Lam,
    Let,
    Program,
    Var,
    tup,
    vec,
)

__all__ = [
    "Untranslatable",
    "Signature",
    "signatures",
    "type_text",
    "parse_type_text",
    "lower",
    "raise_term",
    "infer",
]


class Untranslatable(ValueError):
    """An expression the knossos dialect does not model (the message says what)."""


@dataclass(frozen=True)
class Signature:
    """A function's result type and parameter types (``None`` when unknown)."""

    ret: KsType
    params: tuple[KsType, ...] | None


#: Binary prelude operators on two scalars of one type -> tensor-dialect operator.
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min"}
#: Comparisons -> tensor-dialect operator (result Bool).
COMPARE = {
    "eq": "equal",
    "gt": "greater",
    "lt": "less",
    "gte": "greater_equal",
    "lte": "less_equal",
}
#: Unary Float -> Float prelude functions the tensor dialect has.
UNARY = {"exp": "exp", "log": "log", "neg": "neg", "abs": "abs", "sqrt": "sqrt", "erf": "erf"}
#: Other prelude functions kept as calls, with their result type.
PRELUDE_CALLS = {
    "and": BOOL,
    "or": BOOL,
    "not": BOOL,
    "lgamma": FLOAT,
    "sin": FLOAT,
    "cos": FLOAT,
    "tanh": FLOAT,
}
_BACK = {v: k for k, v in {**BINARY, **COMPARE, **UNARY}.items()}
_GET = re.compile(r"get\$(\d+)\$(\d+)")


def signatures(prog: Program) -> dict[str, Signature]:
    """The user functions of ``prog`` (defs and edefs) by name."""
    out: dict[str, Signature] = {}
    for item in prog.items:
        if isinstance(item, Def):
            out[item.name] = Signature(item.ret, tuple(t for _, t in item.params))
        elif isinstance(item, Edef):
            out[item.name] = Signature(item.ret, item.arg_types)
    return out


def type_text(t: KsType) -> str:
    """The compact type form of the e-graph (``Vec<Tuple<Float,Integer>>``).

    Raises:
        Untranslatable: types the dialect does not model (``Tensor N``, N > 1, ``LM``...).
    """
    if t.kind in ("Integer", "Float", "Bool", "String"):
        return t.kind
    if t.kind == "Tensor" and t.rank == 1:
        return f"Vec<{type_text(t.args[0])}>"
    if t.kind == "Tuple" and t.args:
        return "Tuple<" + ",".join(type_text(a) for a in t.args) + ">"
    if t.kind == "Lam":
        return f"Lam<{type_text(t.args[0])},{type_text(t.args[1])}>"
    raise Untranslatable(f"type {t} is not modelled by the knossos dialect")


def parse_type_text(text: str) -> KsType:
    """The inverse of :func:`type_text`."""
    t, rest = _ptype(text)
    if rest:
        raise ValueError(f"bad compact type {text!r}")
    return t


def _ptype(text: str) -> tuple[KsType, str]:
    m = re.match(r"[A-Za-z]+", text)
    if not m:
        raise ValueError(f"bad compact type {text!r}")
    head, rest = m.group(), text[m.end() :]
    simple = {"Integer": INTEGER, "Float": FLOAT, "Bool": BOOL, "String": KsType("String")}
    if head in simple:
        return simple[head], rest
    if not rest.startswith("<"):
        raise ValueError(f"bad compact type {text!r}")
    rest = rest[1:]
    args = []
    while True:
        a, rest = _ptype(rest)
        args.append(a)
        if rest.startswith(","):
            rest = rest[1:]
            continue
        if not rest.startswith(">"):
            raise ValueError(f"bad compact type {text!r}")
        rest = rest[1:]
        break
    if head == "Vec":
        return vec(args[0]), rest
    if head == "Tuple":
        return tup(*args), rest
    return KsType("Lam", (args[0], args[1])), rest


class _Flat:
    """A flat node list with hash-consing."""

    def __init__(self) -> None:
        self.nodes: list[tuple[str, list[int]]] = []
        self.index: dict[tuple[str, tuple[int, ...]], int] = {}

    def add(self, op: str, children: list[int] | None = None) -> int:
        key = (op, tuple(children or ()))
        if key not in self.index:
            self.index[key] = len(self.nodes)
            self.nodes.append((op, list(children or ())))
        return self.index[key]

    def leaf(self, text: str) -> int:
        return self.add(text)


def _scalar(f: _Flat, value: float, dtype: str) -> int:
    return f.add("scalar", [f.leaf(repr(float(value))), f.leaf(dtype)])


def infer(e: Expr, env: Mapping[str, KsType], sigs: Mapping[str, Signature]) -> KsType:
    """The type of ``e`` in ``env`` (raises :class:`Untranslatable` when unknown)."""
    return _Lower(sigs).expr(e, dict(env), _Flat())[1]


class _Lower:
    def __init__(self, sigs: Mapping[str, Signature]) -> None:
        self.sigs = sigs
        self.fresh = itertools.count()

    def expr(self, e: Expr, env: dict[str, KsType], f: _Flat) -> tuple[int, KsType]:
        if isinstance(e, Const):
            v = e.value
            if isinstance(v, bool):
                return _scalar(f, 1.0 if v else 0.0, "bool"), BOOL
            if isinstance(v, int):
                return _scalar(f, v, "int64"), INTEGER
            if isinstance(v, float):
                return _scalar(f, v, "float64"), FLOAT
            raise Untranslatable("string literals are not modelled")
        if isinstance(e, Var):
            if e.name not in env:
                raise Untranslatable(f"unbound variable `{e.name}`")
            t = env[e.name]
            return f.add("var", [f.leaf(e.name), f.leaf(type_text(t))]), t
        if isinstance(e, Let):
            v, vt = self.expr(e.rhs, env, f)
            if not e.tupled:
                b, bt = self.expr(e.body, {**env, e.vars[0]: vt}, f)
                return f.add("let", [f.leaf(e.vars[0]), v, b]), bt
            if vt.kind != "Tuple" or len(vt.args) != len(e.vars):
                raise Untranslatable(f"tuple binding of {len(e.vars)} names to {vt}")
            tname = f"t${next(self.fresh)}"
            inner = {**env, tname: vt}
            tv = f.add("var", [f.leaf(tname), f.leaf(type_text(vt))])
            n = len(e.vars)
            gets = [f.add("get", [f.leaf(str(i + 1)), f.leaf(str(n)), tv]) for i in range(n)]
            for name, t in zip(e.vars, vt.args, strict=True):
                inner[name] = t
            b, bt = self.expr(e.body, inner, f)
            for name, g in reversed(list(zip(e.vars, gets, strict=False))):
                b = f.add("let", [f.leaf(name), g, b])
            return f.add("let", [f.leaf(tname), v, b]), bt
        if isinstance(e, Lam):
            b, bt = self.expr(e.body, {**env, e.var: e.type}, f)
            lt = KsType("Lam", (e.type, bt))
            return f.add("lam", [f.leaf(e.var), f.leaf(type_text(e.type)), b]), lt
        if isinstance(e, If):
            c, _ = self.expr(e.cond, env, f)
            a, at = self.expr(e.then, env, f)
            b, _ = self.expr(e.other, env, f)
            return f.add("if", [c, a, b]), at
        if isinstance(e, Assert):
            c, _ = self.expr(e.cond, env, f)
            b, bt = self.expr(e.body, env, f)
            return f.add("assert", [c, b]), bt
        return self.call(e, env, f)

    def call(self, e: Call, env: dict[str, KsType], f: _Flat) -> tuple[int, KsType]:
        name = e.name
        if name.startswith("["):
            raise Untranslatable(f"structured name {name}")
        args = [self.expr(a, env, f) for a in e.args]
        ids = [a[0] for a in args]
        ts = [a[1] for a in args]
        if name in self.sigs:
            ret = self.sigs[name].ret
            return f.add("call", [f.leaf(name), f.leaf(type_text(ret)), *ids]), ret
        scalar = all(t.is_scalar for t in ts)
        if name in BINARY and len(ts) == 2 and scalar and ts[0] == ts[1]:
            return f.add(BINARY[name], ids), ts[0]
        if name in COMPARE and len(ts) == 2 and scalar and ts[0] == ts[1]:
            return f.add(COMPARE[name], ids), BOOL
        if name in UNARY and len(ts) == 1 and ts[0] == FLOAT:
            return f.add(UNARY[name], ids), FLOAT
        if name == "neg" and len(ts) == 1 and ts[0] == INTEGER:
            return f.add("neg", ids), INTEGER
        if name == "to_float" and ts == [INTEGER]:
            return f.add("cast", [ids[0], f.leaf("float64")]), FLOAT
        if name in ("build", "sumbuild") and len(ts) == 2 and ts[0] == INTEGER:
            if ts[1].kind != "Lam":
                raise Untranslatable(f"{name} of {ts[1]}")
            body = ts[1].args[1]
            return f.add(name, ids), vec(body) if name == "build" else body
        if name == "index" and len(ts) == 2 and ts[0] == INTEGER and _is_vec(ts[1]):
            return f.add("index", ids), ts[1].args[0]
        if name == "size" and len(ts) == 1 and _is_vec(ts[0]):
            return f.add("size", ids), INTEGER
        if name == "sum" and len(ts) == 1 and _is_vec(ts[0]):
            return f.add("sum", ids), ts[0].args[0]
        if name == "tuple" and ts:
            return f.add("tuple", ids), tup(*ts)
        m = _GET.fullmatch(name)
        if m and len(ts) == 1:
            i, n = int(m.group(1)), int(m.group(2))
            t = ts[0]
            if t.kind == "Tuple" and len(t.args) == n and 1 <= i <= n:
                return f.add("get", [f.leaf(str(i)), f.leaf(str(n)), ids[0]]), t.args[i - 1]
        if name in PRELUDE_CALLS and scalar:
            ret = PRELUDE_CALLS[name]
            return f.add("call", [f.leaf(name), f.leaf(type_text(ret)), *ids]), ret
        shown = ", ".join(str(t) for t in ts)
        raise Untranslatable(f"no translation for `{name}` of ({shown})")


def _is_vec(t: KsType) -> bool:
    return t.kind == "Tensor" and t.rank == 1


def lower(d: Def, sigs: Mapping[str, Signature]) -> tuple[list[tuple[str, list[int]]], KsType]:
    """A def's body as a flat node list (root last) and its type.

    Raises:
        Untranslatable: the body uses something the dialect does not model, or its type
            is not the declared one.
    """
    f = _Flat()
    root, t = _Lower(sigs).expr(d.body, dict(d.params), f)
    if t != d.ret and d.ret != ANY:
        raise Untranslatable(f"body of `{d.name}` has type {t}, declared {d.ret}")
    # The root must be the last node.
    nodes = f.nodes
    if root != len(nodes) - 1:
        nodes = [*nodes, ("let", [])]  # never used: re-root below
        nodes.pop()
        order = _reroot(f.nodes, root)
        return order, t
    return nodes, t


def _reroot(nodes: list[tuple[str, list[int]]], root: int) -> list[tuple[str, list[int]]]:
    """The nodes reachable from ``root``, renumbered so that the root is last."""
    seen: dict[int, int] = {}
    out: list[tuple[str, list[int]]] = []

    def visit(i: int) -> int:
        if i in seen:
            return seen[i]
        op, ch = nodes[i]
        new = [visit(c) for c in ch]
        seen[i] = len(out)
        out.append((op, new))
        return seen[i]

    visit(root)
    return out


# --- back from the e-graph ----------------------------------------------------------


def _tokens(text: str) -> list[str]:
    return re.findall(r"\(|\)|[^\s()]+", text)


def _sexp(tokens: list[str], i: int) -> tuple[object, int]:
    if tokens[i] == "(":
        items = []
        i += 1
        while tokens[i] != ")":
            x, i = _sexp(tokens, i)
            items.append(x)
        return items, i + 1
    return tokens[i], i + 1


def raise_term(text: str) -> Expr:
    """A Knossos expression from an extracted e-graph term (its s-expression text)."""
    s, _ = _sexp(_tokens(text), 0)
    return _raise(s)


def _raise(s: object) -> Expr:
    if isinstance(s, str):
        raise ValueError(f"unexpected leaf `{s}` in a Knossos term")
    assert isinstance(s, list)
    op, args = s[0], s[1:]
    if op == "scalar":
        v, dt = float(args[0]), args[1]
        if dt == "bool":
            return Const(v != 0.0)
        if dt == "int64":
            return Const(int(v))
        return Const(v)
    if op == "var":
        return Var(args[0])
    if op == "let":
        return Let((args[0],), _raise(args[1]), _raise(args[2]))
    if op == "lam":
        return Lam(args[0], parse_type_text(args[1]), _raise(args[2]))
    if op == "if":
        return If(_raise(args[0]), _raise(args[1]), _raise(args[2]))
    if op == "assert":
        return Assert(_raise(args[0]), _raise(args[1]))
    if op == "call":
        return Call(args[0], tuple(_raise(a) for a in args[2:]))
    if op == "get":
        return Call(f"get${args[0]}${args[1]}", (_raise(args[2]),))
    if op == "cast":
        return Call("to_float", (_raise(args[0]),))
    if op in _BACK:
        return Call(_BACK[op], tuple(_raise(a) for a in args))
    return Call(op, tuple(_raise(a) for a in args))
