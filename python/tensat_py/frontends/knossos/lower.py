"""Knossos expressions to and from the e-graph language (the knossos dialect).

:func:`lower` types a def's body (the front end's type inference, as a Knossos compiler's
type checker does) and writes it as a flat node list for ``_core.EGraph``: variables become
``(var x T)`` with ``T`` in the compact type form (``Vec<Float>``, ``Tensor2<Float>``,
``Tuple<Float,Integer>``, ``Unit``, ``Lam<S,T>``, ``LM<S,T>``), literals rank-0 ``scalar``
tensors (``Float`` float64, ``Integer`` int64, ``Bool`` bool), scalar arithmetic the tensor
dialect's operators (``add``, ``mul``, ``exp``, ``equal``...), ``to_float`` a ``cast`` to
float64, ``get$i$n`` ``(get i n t)``, tuple bindings a ``let`` of a fresh tuple variable and
``get``\\ s, ``build``/``sumbuild``/``index``/``size`` over ``Tensor N`` (an index is an
``Integer`` or a tuple of N of them, SYNTAX.md), and calls of user functions and of the
prelude's edefs ``(call f T args...)``.

Overloads: a function is known by its name and its argument type (one parameter's type,
or the ``Tuple`` of several), as ksc keys it; :func:`signatures` lists every overload, and
a call resolves by the types of its arguments. In the e-graph a call names its overload by
a symbol (:meth:`Signatures.symbol`): the plain name when it is an identifier with one
overload, else a mangled ``name@ArgType`` that :func:`raise_term` maps back.

Opaque sub-terms: whatever has no translation (a string literal, an unknown primitive
whose type is known, ``fold``, the application of a lambda variable, the empty tuple...)
becomes one ``(ks_opaque key T operands...)`` node. Its operands are its translatable
direct pieces not under one of its binders (the "holes") and its free variables, so the
rules optimise around and inside it and never move a binder past it wrongly; ``key``
names the original syntax (with the holes cut out) in a side table, and
:func:`raise_term` writes it back as it was. Only a sub-term whose type cannot be
inferred at all makes its parent opaque in turn.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tensat_py.frontends.knossos.syntax import (
    ANY,
    BOOL,
    FLOAT,
    INTEGER,
    STRING,
    UNIT,
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
    read,
    tup,
    vec,
)

__all__ = [
    "Untranslatable",
    "Signature",
    "Signatures",
    "signatures",
    "arg_type",
    "type_text",
    "parse_type_text",
    "lower",
    "raise_term",
    "infer",
    "opaque_count",
    "tangent",
    "base_name",
]


class Untranslatable(ValueError):
    """An expression the knossos dialect does not model (the message says what)."""


@dataclass(frozen=True)
class Signature:
    """One overload of a function: result type, parameter types (``None`` when unknown)
    and the e-graph symbol its calls use (``""``: the name itself)."""

    ret: KsType
    params: tuple[KsType, ...] | None
    symbol: str = ""


def arg_type(params: Sequence[KsType]) -> KsType:
    """The argument type a function is keyed by: its one parameter's type, or the
    ``Tuple`` of its parameters' types (``()`` for none), as ksc's overloading does."""
    if len(params) == 1:
        return params[0]
    return tup(*params) if params else UNIT


#: Registry of mangled call symbols -> Knossos function names (filled when lowering).
_SYMBOL_NAMES: dict[str, str] = {}
#: Registry of opaque keys -> (skeleton, free-variable names, number of holes).
_OPAQUE: dict[str, tuple[Expr, tuple[str, ...], int]] = {}
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$@.']*")
_HOLE = "\0hole"


class Signatures(dict):  # type: ignore[type-arg]
    """The functions of a program (defs and edefs; with a prelude, its too): name ->
    list of :class:`Signature` overloads, in file order (program after prelude)."""

    def add(self, name: str, ret: KsType, params: tuple[KsType, ...]) -> None:
        """Register an overload (a later one with the same argument type replaces it);
        a def named ``[f T]`` is the overload of ``f`` at ``T``."""
        name = base_name(name)
        lst = self.setdefault(name, [])
        key = arg_type(params)
        lst[:] = [s for s in lst if s.params is None or arg_type(s.params) != key]
        lst.append(Signature(ret, params))
        self._resymbol(name)

    def _resymbol(self, name: str) -> None:
        lst = self[name]
        plain = len(lst) == 1 and _IDENT.fullmatch(name) is not None
        for i, s in enumerate(lst):
            sym = name if plain else _mangle(name, s.params)
            _SYMBOL_NAMES[sym] = name
            lst[i] = Signature(s.ret, s.params, sym)

    def resolve(self, name: str, ts: Sequence[KsType]) -> Signature | None:
        """The overload of ``name`` for arguments of types ``ts`` (several arguments or
        one tuple of them), or None."""
        lst = self.get(name)
        if not lst:
            return None
        key = arg_type(ts)
        for s in lst:
            if s.params is None or arg_type(s.params) == key:
                return s
        return None

    def symbol(self, name: str, params: Sequence[KsType]) -> str:
        """The e-graph symbol of the overload of ``name`` taking ``params``."""
        s = self.resolve(base_name(name), params)
        return s.symbol if s is not None and s.symbol else name


def base_name(name: str) -> str:
    """``f`` for a name ``[f T]`` (the function ``f`` at argument type ``T``), else the
    name itself."""
    if name.startswith("[") and not name.startswith("[["):
        parts = _split_name(name)
        if parts is not None and not parts[0]:
            return parts[1]
    return name


def _mangle(name: str, params: tuple[KsType, ...] | None) -> str:
    base = re.sub(r"[^A-Za-z0-9_$]+", "_", name).strip("_") or "f"
    return f"{base}@{type_text(arg_type(params or ()))}"


def _mangle_unique(name: str, ts: Sequence[KsType]) -> str:
    """The symbol of a call of ``name`` (not an identifier) on arguments of types ``ts``,
    registered for :func:`raise_term`."""
    base = _mangle(name, tuple(ts))
    sym, k = base, 0
    while _SYMBOL_NAMES.get(sym, name) != name:
        k += 1
        sym = f"{base}#{k}"
    _SYMBOL_NAMES[sym] = name
    return sym


def signatures(prog: Program, prelude: Program | None = None) -> Signatures:
    """The functions of ``prog`` (defs and edefs), after those of ``prelude``, with
    every overload (:class:`Signatures`)."""
    out = Signatures()
    for p in (prelude, prog):
        if p is None:
            continue
        for item in p.items:
            if isinstance(item, Def):
                out.add(item.name, item.ret, tuple(t for _, t in item.params))
            elif isinstance(item, Edef):
                out.add(item.name, item.ret, item.arg_types)
    return out


def _as_sigs(sigs: Mapping[str, object]) -> Signatures:
    if isinstance(sigs, Signatures):
        return sigs
    out = Signatures()
    for name, s in sigs.items():
        for one in s if isinstance(s, list) else [s]:
            assert isinstance(one, Signature)
            out.add(name, one.ret, one.params or ())
    return out


def type_text(t: KsType) -> str:
    """The compact type form of the e-graph (``Vec<Tuple<Float,Integer>>``,
    ``Tensor2<Float>``, ``Unit``, ``LM<Float,Float>``).

    Raises:
        Untranslatable: an unknown type (``Any``).
    """
    if t.kind in ("Integer", "Float", "Bool", "String"):
        return t.kind
    if t.kind == "Unit" or (t.kind == "Tuple" and not t.args):
        return "Unit"
    if t.kind == "Tensor":
        inner = type_text(t.args[0])
        return f"Vec<{inner}>" if t.rank == 1 else f"Tensor{t.rank}<{inner}>"
    if t.kind == "Tuple":
        return "Tuple<" + ",".join(type_text(a) for a in t.args) + ">"
    if t.kind in ("Lam", "LM"):
        return f"{t.kind}<{type_text(t.args[0])},{type_text(t.args[1])}>"
    raise Untranslatable(f"type {t} is not modelled by the knossos dialect")


def parse_type_text(text: str) -> KsType:
    """The inverse of :func:`type_text`."""
    t, rest = _ptype(text)
    if rest:
        raise ValueError(f"bad compact type {text!r}")
    return t


def _ptype(text: str) -> tuple[KsType, str]:
    m = re.match(r"[A-Za-z]+[0-9]*", text)
    if not m:
        raise ValueError(f"bad compact type {text!r}")
    head, rest = m.group(), text[m.end() :]
    simple = {"Integer": INTEGER, "Float": FLOAT, "Bool": BOOL, "String": STRING, "Unit": UNIT}
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
    if head.startswith("Tensor") and head[6:].isdigit():
        return vec(args[0], int(head[6:])), rest
    if head == "Tuple":
        return tup(*args), rest
    if head in ("Lam", "LM"):
        return KsType(head, (args[0], args[1])), rest
    raise ValueError(f"bad compact type {text!r}")


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


# --- typing of prelude primitives ---------------------------------------------------

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
#: Elementwise maths whose result has its argument's type (ksc's Prim.hs, the prelude).
_SAME_TYPE = {
    "exp", "log", "sin", "cos", "tanh", "sqrt", "erf", "lgamma", "abs", "neg", "cosh",
    "sinh", "atan", "ts_neg", "$trace", "$copydown", "$inline", "relu", "sigmoid",
}  # fmt: skip
_BOOL_OF = {"eq", "ne", "gt", "lt", "gte", "lte", "and", "or", "not"}
_BACK = {v: k for k, v in {**BINARY, **COMPARE, **UNARY}.items()}
_GET = re.compile(r"get\$(\d+)\$(\d+)")
#: Derivations ksc generates for a function ``f : S -> T`` (SYNTAX.md, ksc's Prim.hs).
DERIVATIONS = ("D", "fwd", "rev", "sufrev", "suffwdpass", "sufrevpass", "CL", "shape", "Dt")


def tangent(t: KsType) -> KsType:
    """The tangent type of ``t`` (ksc): ``Float`` itself, discrete types ``()``,
    tensors and tuples elementwise."""
    if t.kind == "Float":
        return FLOAT
    if t.kind == "Tensor":
        return vec(tangent(t.args[0]), t.rank)
    if t.kind == "Tuple":
        return tup(*(tangent(a) for a in t.args))
    return UNIT


def _shape_type(t: KsType) -> KsType:
    """The type of ksc's ``shape`` of a ``t`` (Prim.hs ``makeShape``): ``()`` where every
    value has the same shape (scalars, tuples of those), the size of a tensor of such
    elements, else the shapes elementwise."""
    s = _nontrivial_shape(t)
    return UNIT if s is None else s


def _nontrivial_shape(t: KsType) -> KsType | None:
    if t.kind == "Tensor":
        e = _nontrivial_shape(t.args[0])
        return index_type(t.rank) if e is None else vec(e, t.rank)
    if t.kind == "Tuple":
        parts = [_nontrivial_shape(a) for a in t.args]
        if all(p is None for p in parts):
            return None
        return tup(*(UNIT if p is None else p for p in parts))
    return None


def index_type(rank: int) -> KsType:
    """The index type of a rank-``rank`` tensor: ``Integer`` or a tuple of Integers."""
    return INTEGER if rank == 1 else tup(*([INTEGER] * rank))


def _rank_of_index(t: KsType) -> int | None:
    if t == INTEGER:
        return 1
    if t.kind == "Tuple" and len(t.args) > 1 and all(a == INTEGER for a in t.args):
        return len(t.args)
    return None


def _numeric(t: KsType) -> bool:
    if t.kind in ("Float", "Integer"):
        return True
    if t.kind == "Tensor":
        return _numeric(t.args[0])
    if t.kind == "Tuple":
        return all(_numeric(a) for a in t.args)
    return False


def _split_name(name: str) -> tuple[str, str, KsType | None] | None:
    """A structured name ``[deriv f]`` / ``[deriv [f T]]`` / ``[f T]`` as
    ``(deriv or "", f, T or None)``."""
    if not name.startswith("["):
        return None
    items = [x for x in read(name, "<name>") if not isinstance(x, str)]
    if len(items) != 1:
        return None
    s = items[0]
    from tensat_py.frontends.knossos.syntax import Atom, SList, _name, parse_type

    if not isinstance(s, SList) or not s.items:
        return None
    head = s.items[0]
    if isinstance(head, Atom) and head.text in DERIVATIONS and len(s.items) == 2:
        inner = s.items[1]
        if isinstance(inner, Atom):
            return head.text, inner.text, None
        sub = _split_name(_name(inner))
        if sub is None or sub[0]:
            return head.text, _name(inner), None
        return head.text, sub[1], sub[2]
    if isinstance(head, Atom) and len(s.items) >= 2:
        try:
            return "", head.text, parse_type(list(s.items[1:]), "<name>")
        except ValueError:
            return None
    return None


def type_of_expr(e: Expr) -> KsType | None:
    """A type written where an expression stands (``($dummy (Vec Integer))``), or None."""
    if isinstance(e, Var):
        simple = {"Integer": INTEGER, "Float": FLOAT, "Bool": BOOL, "String": STRING}
        return simple.get(e.name, UNIT if e.name == "Tuple" else None)
    if not isinstance(e, Call):
        return None
    args = [type_of_expr(a) for a in e.args]
    if e.name == "Tensor" and e.args and isinstance(e.args[0], Const) and len(args) == 2:
        rank = e.args[0].value
        return vec(args[1], rank) if isinstance(rank, int) and args[1] is not None else None
    if any(a is None for a in args):
        return None
    ts = [a for a in args if a is not None]
    if e.name == "Vec" and len(ts) == 1:
        return vec(ts[0])
    if e.name == "Tuple":
        return tup(*ts) if ts else UNIT
    if e.name in ("Lam", "LM") and len(ts) == 2:
        return KsType(e.name, (ts[0], ts[1]))
    return None


class _Typer:
    """Type inference over the whole language (SYNTAX.md; prelude types from ksc's
    Prim.hs and ``sigs``)."""

    def __init__(self, sigs: Signatures) -> None:
        self.sigs = sigs

    def resolve(self, name: str, ts: Sequence[KsType]) -> Signature | None:
        s = self.sigs.resolve(name, ts)
        if s is not None:
            return s
        parts = _split_name(name)
        if parts is not None and not parts[0] and parts[2] is not None:
            s = self.sigs.resolve(parts[1], [parts[2]])
            if s is not None and arg_type(ts) == parts[2]:
                return s
        return None

    def call_type(self, name: str, ts: list[KsType], env: Mapping[str, KsType]) -> KsType | None:
        """The result type of ``(name args...)`` with argument types ``ts`` (None: unknown)."""
        if name in env:
            lt = env[name]
            if lt.kind == "Lam" and arg_type(ts) == lt.args[0]:
                return lt.args[1]
            return None
        s = self.resolve(name, ts)
        if s is not None:
            return s.ret
        n = len(ts)
        if len(ts) == 1 and ts[0].kind == "Tuple" and name in BINARY | COMPARE and ts[0].args:
            ts, n = list(ts[0].args), len(ts[0].args)  # (add (tuple a b)) is (add a b)
        if name == "ts_add" and n == 2 and ts[1] in (ts[0], tangent(ts[0])):
            return ts[0]  # a value plus a tangent of it
        if name in ("add", "sub", "max", "min", "ts_add") and n == 2 and ts[0] == ts[1]:
            return ts[0] if _numeric(ts[0]) else None
        if name in ("mul", "div", "ts_scale") and n == 2:
            if ts[0] == ts[1] and _numeric(ts[0]):
                return ts[0]
            if ts[0].is_scalar and _numeric(ts[1]):
                return ts[1]
            if ts[1].is_scalar and _numeric(ts[0]):
                return ts[0]
            return None
        if name in _BOOL_OF:
            return BOOL
        if name in _SAME_TYPE and n == 1:
            return ts[0]
        if name in ("max", "min", "sum") and n == 1 and ts[0].kind == "Tensor":
            return ts[0].args[0]
        if name in ("to_float", "bool_to_float") and n == 1:
            if ts[0].kind == "Tensor":
                return vec(FLOAT, ts[0].rank)
            return FLOAT if ts[0].is_scalar else None
        if name in ("to_integer", "imax", "imin") and n >= 1:
            return INTEGER
        if name in ("pow", "atan2") and n == 2:
            return FLOAT
        if name in ("dot", "ts_dot") and n == 2:
            return FLOAT
        if name == "$ranhashdoub" and n == 1:
            return FLOAT
        if name == "print":
            return INTEGER
        if name == "tuple":
            return tup(*ts) if ts else UNIT
        if name in ("build", "sumbuild") and n == 2:
            r, lt = _rank_of_index(ts[0]), ts[1]
            if r is None or lt.kind != "Lam" or lt.args[0] != ts[0]:
                return None
            return vec(lt.args[1], r) if name == "build" else lt.args[1]
        if name == "index" and n == 2 and ts[1].kind == "Tensor":
            return ts[1].args[0] if ts[0] == index_type(ts[1].rank) else None
        if name == "size" and n == 1 and ts[0].kind == "Tensor":
            return index_type(ts[0].rank)
        if name in ("constVec", "deltaVec") and n >= 2:
            r = _rank_of_index(ts[0])
            return vec(ts[-1], r) if r is not None else None
        if name == "Vec_init" and n >= 1 and all(t == ts[0] for t in ts):
            return vec(ts[0])
        if name == "fold" and n == 3 and ts[0].kind == "Lam":
            return ts[1]
        if name == "map" and n == 2 and ts[0].kind == "Lam" and ts[1].kind == "Tensor":
            return vec(ts[0].args[1], ts[1].rank)
        if name == "unzip" and n == 1 and ts[0].kind == "Tensor" and ts[0].args[0].kind == "Tuple":
            return tup(*(vec(a, ts[0].rank) for a in ts[0].args[0].args))
        if name == "shape" and n == 1:
            return _shape_type(ts[0])
        if name == "buildFromSparse" and n == 3 and ts[0].kind == "Tensor":
            lt = ts[2]
            if lt.kind == "Lam" and lt.args[1].kind == "Tuple" and len(lt.args[1].args) == 2:
                return vec(lt.args[1].args[1], ts[0].rank)
            return None
        if name == "buildFromSparseTupled" and n == 3 and ts[0].kind == "Tuple":
            lt = ts[2]
            if lt.kind != "Lam" or lt.args[1].kind != "Tuple":
                return None
            pairs = lt.args[1].args
            if len(pairs) != len(ts[0].args) or any(
                p.kind != "Tuple" or len(p.args) != 2 or s.kind != "Tensor"
                for p, s in zip(pairs, ts[0].args, strict=True)
            ):
                return None
            return tup(*(vec(p.args[1], s.rank) for p, s in zip(pairs, ts[0].args, strict=True)))
        if name == "$check" and n in (5, 6):
            return FLOAT
        if name == "map2" and n == 3 and ts[0].kind == "Lam" and ts[1].kind == "Tensor":
            return vec(ts[0].args[1], ts[1].rank)
        if name == "$BENCH" and n == 1 and ts[0].kind == "Lam":
            return FLOAT
        m = _GET.fullmatch(name)
        if m and n == 1:
            i, k = int(m.group(1)), int(m.group(2))
            t = ts[0]
            if t.kind == "Tuple" and len(t.args) == k and 1 <= i <= k:
                return t.args[i - 1]
            return None
        parts = _split_name(name)
        if parts is not None and parts[0]:
            return self.derived_type(parts, ts, env)
        return None

    def derived_type(
        self, parts: tuple[str, str, KsType | None], ts: list[KsType], env: Mapping[str, KsType]
    ) -> KsType | None:
        """The type of a call of ``[deriv f]`` (ksc: fwd (x, dx) -> dy, rev (x, dy) -> dx,
        D x -> LM S T, ...)."""
        deriv, base, given = parts
        if deriv in ("fwd", "rev", "sufrev") and len(ts) == 1 and ts[0].kind == "Tuple":
            ts = list(ts[0].args)
        x: KsType | None = given
        if x is None:
            if deriv in ("D", "CL", "shape", "suffwdpass"):
                x = arg_type(ts)
            elif deriv in ("fwd", "rev", "sufrev") and len(ts) == 2:
                x = ts[0]
            else:
                return None
        s = self.resolve(base, [x]) or self.sigs.resolve(base, [x])
        ret = s.ret if s is not None else self.call_type(base, [x], env)
        if ret is None:
            return None
        if deriv == "D":
            return KsType("LM", (x, ret))
        if deriv == "fwd":
            return tangent(ret)
        if deriv in ("rev", "sufrev"):
            return tangent(x)
        if deriv == "CL":
            return ret
        if deriv == "shape":
            return _shape_type(ret)
        return None

    def typeof(self, e: Expr, env: Mapping[str, KsType]) -> KsType:
        """The type of ``e`` in ``env``.

        Raises:
            Untranslatable: the type cannot be inferred.
        """
        if isinstance(e, Const):
            return e.type
        if isinstance(e, Var):
            if e.name not in env:
                raise Untranslatable(f"unbound variable `{e.name}`")
            return env[e.name]
        if isinstance(e, Let):
            vt = self.typeof(e.rhs, env)
            if not e.tupled:
                return self.typeof(e.body, {**env, e.vars[0]: vt})
            if vt.kind != "Tuple" or len(vt.args) != len(e.vars):
                raise Untranslatable(f"tuple binding of {len(e.vars)} names to {vt}")
            return self.typeof(e.body, {**env, **dict(zip(e.vars, vt.args, strict=True))})
        if isinstance(e, Lam):
            return KsType("Lam", (e.type, self.typeof(e.body, {**env, e.var: e.type})))
        if isinstance(e, If):
            a, b = self.typeof(e.then, env), self.typeof(e.other, env)
            if a != b:
                raise Untranslatable(f"if: branches of types {a} and {b}")
            return a
        if isinstance(e, Assert):
            return self.typeof(e.body, env)
        if e.name == "$dummy" and len(e.args) == 1:
            dt = type_of_expr(e.args[0])
            if dt is None:
                raise Untranslatable("`$dummy` of something that is not a type")
            return dt
        ts = [self.typeof(a, env) for a in e.args]
        t = self.call_type(e.name, ts, env)
        if t is None:
            shown = ", ".join(str(x) for x in ts)
            raise Untranslatable(f"no type for `{e.name}` of ({shown})")
        return t


def _free(e: Expr) -> frozenset[str]:
    """Free variables of ``e`` (the argument of ``$dummy`` is a type: none there)."""
    from tensat_py.frontends.knossos.hoist import free_vars

    if isinstance(e, Call) and e.name == "$dummy":
        return frozenset()
    if isinstance(e, Call):
        out: frozenset[str] = frozenset([e.name])  # (f x) with f a lambda variable
        for a in e.args:
            out |= _free(a)
        return out
    if isinstance(e, Let):
        return _free(e.rhs) | (_free(e.body) - set(e.vars))
    if isinstance(e, Lam):
        return _free(e.body) - {e.var}
    if isinstance(e, (If, Assert)):
        parts = (e.cond, e.then, e.other) if isinstance(e, If) else (e.cond, e.body)
        out = frozenset()
        for x in parts:
            out |= _free(x)
        return out
    return free_vars(e)


def _called(e: Expr) -> set[str]:
    """Every name ``e`` calls."""
    if isinstance(e, Call):
        return {e.name}.union(*(_called(a) for a in e.args))
    if isinstance(e, Let):
        return _called(e.rhs) | _called(e.body)
    if isinstance(e, Lam):
        return _called(e.body)
    if isinstance(e, If):
        return _called(e.cond) | _called(e.then) | _called(e.other)
    if isinstance(e, Assert):
        return _called(e.cond) | _called(e.body)
    return set()


def infer(e: Expr, env: Mapping[str, KsType], sigs: Mapping[str, object]) -> KsType:
    """The type of ``e`` in ``env`` (raises :class:`Untranslatable` when unknown)."""
    return _Typer(_as_sigs(sigs)).typeof(e, dict(env))


class _Lower:
    def __init__(self, sigs: Mapping[str, object]) -> None:
        self.sigs = _as_sigs(sigs)
        self.typer = _Typer(self.sigs)
        self.fresh = itertools.count()
        #: Opaque keys made while lowering (one per opaque sub-term occurrence).
        self.opaques: list[str] = []

    def expr(self, e: Expr, env: dict[str, KsType], f: _Flat) -> tuple[int, KsType]:
        """The node of ``e`` and its type; an untranslatable ``e`` of known type becomes
        a ``ks_opaque`` node."""
        try:
            return self.direct(e, env, f)
        except Untranslatable:
            t = self.typer.typeof(e, env)  # unknown type: the parent takes it whole
            return self.opaque(e, t, env, f), t

    def opaque(self, e: Expr, t: KsType, env: dict[str, KsType], f: _Flat) -> int:
        holes: list[int] = []

        def skel(x: Expr, top: bool, bound: bool) -> Expr:
            if not top and not bound and not isinstance(x, (Var, Const)):
                try:
                    i, _ = self.expr(x, env, f)
                    holes.append(i)
                    return Var(f"{_HOLE}{len(holes) - 1}")
                except Untranslatable:
                    pass
            if isinstance(x, Call) and x.name == "$dummy":
                return x  # its argument is a type, not an expression
            if isinstance(x, Call):
                return Call(x.name, tuple(skel(a, False, bound) for a in x.args), x.pos)
            if isinstance(x, Let):
                return Let(x.vars, skel(x.rhs, False, bound), skel(x.body, False, True), x.tupled)
            if isinstance(x, Lam):
                return Lam(x.var, x.type, skel(x.body, False, True))
            if isinstance(x, If):
                return If(*(skel(y, False, bound) for y in (x.cond, x.then, x.other)))
            if isinstance(x, Assert):
                return Assert(skel(x.cond, False, bound), skel(x.body, False, bound))
            return x

        from tensat_py.frontends.knossos.syntax import print_expr

        sk = skel(e, True, False)
        called = _called(sk)
        names = tuple(
            sorted(
                v for v in _free(sk) if not v.startswith(_HOLE) and (v in env or v not in called)
            )
        )
        ids = []
        for v in names:
            if v not in env:
                raise Untranslatable(f"unbound variable `{v}`")
            ids.append(f.add("var", [f.leaf(v), f.leaf(type_text(env[v]))]))
        text = print_expr(sk, width=10**9) + "|" + ",".join(names) + "|" + type_text(t)
        key = "o$" + hashlib.sha1(text.encode()).hexdigest()[:12]
        _OPAQUE[key] = (sk, names, len(holes))
        self.opaques.append(key)
        return f.add("ks_opaque", [f.leaf(key), f.leaf(type_text(t)), *holes, *ids])

    def direct(self, e: Expr, env: dict[str, KsType], f: _Flat) -> tuple[int, KsType]:
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
            b, bt = self.expr(e.other, env, f)
            if at != bt:
                raise Untranslatable(f"if: branches of types {at} and {bt}")
            return f.add("if", [c, a, b]), at
        if isinstance(e, Assert):
            c, _ = self.expr(e.cond, env, f)
            b, bt = self.expr(e.body, env, f)
            return f.add("assert", [c, b]), bt
        return self.call(e, env, f)

    def call(self, e: Call, env: dict[str, KsType], f: _Flat) -> tuple[int, KsType]:
        name = e.name
        if name in env:
            raise Untranslatable(f"application of the lambda `{name}`")
        args = [self.expr(a, env, f) for a in e.args]
        ids = [a[0] for a in args]
        ts = [a[1] for a in args]
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
        if name in ("build", "sumbuild", "index", "size", "sum"):
            t = self.typer.call_type(name, ts, {})
            if t is not None:
                return f.add(name, ids), t
        if name == "tuple" and ts:
            return f.add("tuple", ids), tup(*ts)
        m = _GET.fullmatch(name)
        if m and len(ts) == 1:
            i, n = int(m.group(1)), int(m.group(2))
            t = ts[0]
            if t.kind == "Tuple" and len(t.args) == n and 1 <= i <= n:
                return f.add("get", [f.leaf(str(i)), f.leaf(str(n)), ids[0]]), t.args[i - 1]
        sig = self.typer.resolve(name, ts)
        if sig is not None:
            ret = sig.ret
            sym = sig.symbol or name
            return f.add("call", [f.leaf(sym), f.leaf(type_text(ret)), *ids]), ret
        if name in PRELUDE_CALLS and scalar:
            ret = PRELUDE_CALLS[name]
            return f.add("call", [f.leaf(name), f.leaf(type_text(ret)), *ids]), ret
        # Any other function of known type (a prelude primitive such as deltaVec or fold,
        # a derived [fwd f]): a call by name (a structured name by a mangled symbol).
        t = self.typer.call_type(name, ts, env)
        if t is not None and name != "tuple" and not _GET.fullmatch(name):
            sym = name if _IDENT.fullmatch(name) else _mangle_unique(name, ts)
            return f.add("call", [f.leaf(sym), f.leaf(type_text(t)), *ids]), t
        shown = ", ".join(str(t) for t in ts)
        raise Untranslatable(f"no translation for `{name}` of ({shown})")


def _is_vec(t: KsType) -> bool:
    return t.kind == "Tensor" and t.rank == 1


def lower(
    d: Def, sigs: Mapping[str, object], *, opaques: list[str] | None = None
) -> tuple[list[tuple[str, list[int]]], KsType]:
    """A def's body as a flat node list (root last) and its type.

    Sub-terms without a translation become ``ks_opaque`` nodes (their keys are appended
    to ``opaques`` when given); a body whose type cannot be inferred at all is one
    opaque node of the declared type over the parameters.

    Raises:
        Untranslatable: a parameter or result type the dialect cannot write (``Any``).
    """
    f = _Flat()
    low = _Lower(sigs)
    env = dict(d.params)
    for _, t in d.params:
        type_text(t)
    try:
        root, t = low.expr(d.body, env, f)
    except Untranslatable:
        if d.ret == ANY:
            raise
        root, t = low.opaque(d.body, d.ret, env, f), d.ret
    if t != d.ret and d.ret != ANY:
        # The inferred type is not the declared one (a primitive typed differently by the
        # ksc version that wrote the file): the body is kept whole, of the declared type.
        low.opaques.clear()
        root, t = low.opaque(d.body, d.ret, env, f), d.ret
    if opaques is not None:
        opaques.extend(low.opaques)
    return _reroot(f.nodes, root), t


def opaque_count(nodes: Sequence[tuple[str, Sequence[int]]]) -> int:
    """How many ``ks_opaque`` nodes a lowered term has."""
    return sum(1 for op, ch in nodes if op == "ks_opaque" and ch)


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


_RENAME = itertools.count()


def _raise_opaque(key: str, operands: list[Expr]) -> Expr:
    from tensat_py.frontends.knossos import _rename

    if key not in _OPAQUE:
        raise ValueError(f"unknown opaque key `{key}`")
    sk, names, nholes = _OPAQUE[key]
    holes, vals = operands[:nholes], operands[nholes:]
    # A free variable whose operand is no longer itself (a let was substituted into the
    # opaque term) is renamed apart and bound to its operand around the term.
    binds: list[tuple[str, Expr]] = []
    ren: dict[str, str] = {}
    for v, val in zip(names, vals, strict=True):
        if not (isinstance(val, Var) and val.name == v):
            fresh = f"{v}$o{next(_RENAME)}"
            ren[v] = fresh
            binds.append((fresh, val))
    body = _fill(_rename(sk, ren), holes)
    if len(binds) == 1:
        return Let((binds[0][0],), binds[0][1], body)
    if binds:
        return Let(
            tuple(b[0] for b in binds), Call("tuple", tuple(b[1] for b in binds)), body, True
        )
    return body


def call_name(symbol: str) -> str:
    """The function name a ``call`` node's symbol stands for (an overload's mangled
    ``name@ArgType`` symbol maps back to ``name``; any other symbol is the name)."""
    return _SYMBOL_NAMES.get(symbol, symbol)


def opaque_skeleton(key: str, n_operands: int) -> tuple[Expr, list[str], list[str]]:
    """The syntax an opaque sub-term ``key`` stands for, to run it: ``(skeleton,
    free variable names, hole variable names)``; ``ks_opaque``'s operands are its holes
    then its free variables.

    Raises:
        ValueError: ``key`` is unknown, or ``n_operands`` is not its operand count.
    """
    if key not in _OPAQUE:
        raise ValueError(f"unknown opaque key `{key}`")
    sk, names, nholes = _OPAQUE[key]
    if n_operands != nholes + len(names):
        raise ValueError(f"opaque `{key}` takes {nholes + len(names)} operands, got {n_operands}")
    return sk, list(names), [f"{_HOLE}{k}" for k in range(nholes)]


def _fill(e: Expr, holes: list[Expr]) -> Expr:
    if isinstance(e, Var) and e.name.startswith(_HOLE):
        return holes[int(e.name[len(_HOLE) :])]
    if isinstance(e, Let):
        return Let(e.vars, _fill(e.rhs, holes), _fill(e.body, holes), e.tupled, e.pos)
    if isinstance(e, Lam):
        return Lam(e.var, e.type, _fill(e.body, holes), e.pos)
    if isinstance(e, If):
        return If(*(_fill(x, holes) for x in (e.cond, e.then, e.other)), e.pos)
    if isinstance(e, Assert):
        return Assert(_fill(e.cond, holes), _fill(e.body, holes), e.pos)
    if isinstance(e, Call):
        return Call(e.name, tuple(_fill(a, holes) for a in e.args), e.pos)
    return e


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
        return Call(_SYMBOL_NAMES.get(args[0], args[0]), tuple(_raise(a) for a in args[2:]))
    if op == "ks_opaque":
        return _raise_opaque(args[0], [_raise(a) for a in args[2:]])
    if op == "get":
        return Call(f"get${args[0]}${args[1]}", (_raise(args[2]),))
    if op == "cast":
        return Call("to_float", (_raise(args[0]),))
    if op in _BACK:
        return Call(_BACK[op], tuple(_raise(a) for a in args))
    return Call(op, tuple(_raise(a) for a in args))
