"""RLO's rewrite rules on RLO-shaped expressions, for replaying ``; BEST`` sequences.

Every rule of every rule set of knossos-ksc ``rlo/src/rlo/rewrites.py`` (RLO), by RLO's
name: the algebraic rules (``_algebraic_rules_helper``, ``_float_rules``; also their
``$f``/``$i`` monomorphic forms of ``monomorphic_rules``), the native simplify rules
(``cprop_add``/``sub``/``mul``/``div``, ``div_by_self``, ``inline_let``,
``delete_let``), ``_binding_rules`` (``new_bind``, ``lift_bind``, ``cse_bind``,
``let_recover``), ``_if_rules``, ``_log_exp_rules``, ``_vector_tuple_rules`` and
``inline_call``. ``cfold`` (``monomorphic_rules``: a primitive of constant arguments run
natively) is the one rule left out; see :data:`NOT_IMPLEMENTED`.

Pattern rules (RLO's ``ParsedRule``) are written here as ``(name, variables, source,
target)`` s-expressions and matched the way RLO matches them: a template variable stands
for any subtree, a repeated one for alpha-equal subtrees, binders of the source are
template variables too, a constant matches an equal value, and the target is instantiated
without capture avoidance except for binders new in the target. This module is our own
implementation; the facts (rule names, sources, targets, side conditions) are RLO's.

:data:`RULE_SETS` maps each RLO rule-set name to its rules (RLO's ``RuleSet`` names).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from tensat_py.frontends.knossos.rlo_terms import (
    _BINDERS,
    Env,
    Node,
    _alpha_eq,
    _const,
    _new_var,
    _node_at,
    _rename_free,
    _replace,
    _var,
    _walk,
)

__all__ = ["RULES", "RULE_SETS", "NOT_IMPLEMENTED", "parse_template"]

Apply = Callable[[Node, int, Env], "Node | None"]

# --- templates ----------------------------------------------------------------------

_OPS = {
    "add", "sub", "mul", "div", "exp", "log", "eq", "gt", "gte", "to_float", "index",
    "size", "sum", "deltaVec", "constVec", "assert", "if", "tuple",
}  # fmt: skip


def _tokens(s: str) -> list[str]:
    return re.findall(r"\(|\)|[^\s()]+", s)


def _read(toks: list[str]) -> object:
    t = toks.pop(0)
    if t != "(":
        return t
    out = []
    while toks[0] != ")":
        out.append(_read(toks))
    toks.pop(0)
    return out


def _atom(a: str) -> Node:
    if a in ("true", "false"):
        return _const(a == "true")
    if re.fullmatch(r"-?\d+", a):
        return _const(int(a))
    if re.fullmatch(r"-?[\d.]+(e-?\d+)?", a):
        return _const(float(a))
    return _var(a)


def _node(x: object) -> Node:
    if isinstance(x, str):
        return _atom(x)
    assert isinstance(x, list)
    head, args = x[0], x[1:]
    if head == "lam":
        return Node("lam", (_var(args[0]), _node(args[1])))
    if head in ("build", "sumbuild"):
        lam = args[1]
        return Node(head, (_node(args[0]), _var(lam[1]), _node(lam[2])))
    if head == "let":
        return Node("let", (_var(args[0]), _node(args[1]), _node(args[2])))
    kids = tuple(_node(a) for a in args)
    if head in _OPS:
        return Node(head, kids)
    return Node("apply", (_var(head), kids[0] if len(kids) == 1 else Node("tuple", kids)))


def parse_template(text: str) -> Node:
    """An RLO-shaped node from an s-expression in RLO's rule syntax: ``(lam x body)``,
    ``(build n (lam x body))``, ``(let x value body)``, RLO's primitive operators, and a
    call of anything else as ``apply`` (a ``$f``/``$i`` primitive of several arguments
    takes one tuple, as RLO's parser writes it)."""
    return _node(_read(_tokens(text)))


def _fit(t: Node, e: Node, tv: frozenset[str]) -> dict[str, Node] | None:
    """RLO's ``fit_template``: a substitution for ``tv`` making ``t`` equal ``e``."""
    if t.op == "var":
        if t.name in tv:
            return {t.name: e}
        return {} if e.op == "var" and e.name == t.name else None
    if t.op != e.op or len(t.kids) != len(e.kids):
        return None
    if t.op == "const":
        return {} if t.value == e.value else None
    d: dict[str, Node] = {}
    for tk, ek in zip(t.kids, e.kids, strict=True):
        s = _fit(tk, ek, tv)
        if s is None:
            return None
        for k, v in s.items():
            if k in d:
                if not _alpha_eq(d[k], v):
                    return None
            else:
                d[k] = v
    return d


def _inst(t: Node, sub: dict[str, Node]) -> Node:
    """RLO's ``subst_template``: fresh names only for binders new in the target."""
    if t.op == "var":
        return sub.get(t.name, t)
    if t.op == "const":
        return t
    if t.op in _BINDERS and t.kids[t.bvi()].name not in sub:
        scope = [k for i, k in enumerate(t.kids) if t.binds_in(i)] + list(sub.values())
        sub = {**sub, t.kids[t.bvi()].name: _new_var(*scope)}
    return t.with_kids([_inst(k, sub) for k in t.kids])


def _bound(t: Node) -> set[str]:
    out = {t.kids[t.bvi()].name} if t.op in _BINDERS else set()
    for k in t.kids:
        out |= _bound(k)
    return out


def _parsed(variables: str, lhs: str, rhs: str) -> Apply:
    src, tgt = parse_template(lhs), parse_template(rhs)
    tv = frozenset(variables.split()) | frozenset(_bound(src))

    def apply(e: Node, idx: int, env: Env) -> Node | None:
        n = _node_at(e, idx)
        s = _fit(src, n, tv)
        if s is None:
            return None
        return _replace(e, idx, lambda _: _inst(tgt, s))

    return apply


def _algebraic(r: str, o: str, zero: str, one: str, m1: str) -> list[tuple[str, str, str, str]]:
    """``_algebraic_rules_helper``: rule suffix ``r``, operator suffix ``o``."""
    return [
        (f"add_zero{r}", "a", f"(add{o} {zero} a)", "a"),
        (f"mul_zero{r}", "a", f"(mul{o} {zero} a)", zero),
        (f"mul_one{r}", "a", f"(mul{o} {one} a)", "a"),
        (f"sub_zero{r}", "a", f"(sub{o} a {zero})", "a"),
        (f"div_one{r}", "a", f"(div{o} a {one})", "a"),
        (f"add_neg_to_sub{r}", "a b", f"(add{o} a (mul{o} b {m1}))", f"(sub{o} a b)"),
        (f"commute_mul{r}", "a b", f"(mul{o} a b)", f"(mul{o} b a)"),
        (f"commute_add{r}", "a b", f"(add{o} a b)", f"(add{o} b a)"),
        (f"sub_self{r}", "a", f"(sub{o} a a)", zero),
        (f"assoc_add_add{r}", "a b c", f"(add{o} (add{o} a b) c)", f"(add{o} (add{o} a c) b)"),
        (f"assoc_sub_add{r}", "a b c", f"(sub{o} (add{o} a b) c)", f"(add{o} (sub{o} a c) b)"),
        (f"assoc_add_sub{r}", "a b c", f"(add{o} (sub{o} a b) c)", f"(sub{o} (add{o} a c) b)"),
        (f"assoc_sub_sub{r}", "a b c", f"(sub{o} (sub{o} a b) c)", f"(sub{o} (sub{o} a c) b)"),
        (
            f"sub_sub_to_sub_add{r}", "a b c",
            f"(sub{o} a (sub{o} b c))", f"(sub{o} (add{o} a c) b)",
        ),
        (f"assoc_mul_mul{r}", "a b c", f"(mul{o} (mul{o} a b) c)", f"(mul{o} (mul{o} a c) b)"),
        (
            f"mul_by_add{r}", "a b c",
            f"(mul{o} a (add{o} b c))", f"(add{o} (mul{o} a b) (mul{o} a c))",
        ),
        (
            f"mul_by_sub{r}", "a b c",
            f"(mul{o} a (sub{o} b c))", f"(sub{o} (mul{o} a b) (mul{o} a c))",
        ),
        (
            f"add_of_muls{r}", "a b c",
            f"(add{o} (mul{o} a b) (mul{o} a c))", f"(mul{o} a (add{o} b c))",
        ),
        (
            f"sub_of_muls{r}", "a b c",
            f"(sub{o} (mul{o} a b) (mul{o} a c))", f"(mul{o} a (sub{o} b c))",
        ),
    ]  # fmt: skip


def _float(r: str, o: str) -> list[tuple[str, str, str, str]]:
    """``_float_rules``."""
    return [
        (f"assoc_div_mul{r}", "a b c", f"(div{o} (mul{o} a b) c)", f"(mul{o} (div{o} a c) b)"),
        (f"assoc_mul_div{r}", "a b c", f"(mul{o} (div{o} a b) c)", f"(div{o} (mul{o} a c) b)"),
        (f"div_by_div{r}", "a b c", f"(div{o} a (div{o} b c))", f"(div{o} (mul{o} a c) b)"),
        (
            f"add_of_divs{r}", "a b c",
            f"(add{o} (div{o} a c) (div{o} b c))", f"(div{o} (add{o} a b) c)",
        ),
        (
            f"sub_of_divs{r}", "a b c",
            f"(sub{o} (div{o} a c) (div{o} b c))", f"(div{o} (sub{o} a b) c)",
        ),
        (f"assoc_div_div{r}", "a b c", f"(div{o} (div{o} a b) c)", f"(div{o} (div{o} a c) b)"),
        (f"div_of_div{r}", "a b c", f"(div{o} (div{o} a b) c)", f"(div{o} a (mul{o} b c))"),
        (f"div_by_mul{r}", "a b c", f"(div{o} a (mul{o} b c))", f"(div{o} (div{o} a b) c)"),
    ]  # fmt: skip


_ALGEBRAIC = _algebraic("", "", "0.0", "1.0", "-1.0") + _float("", "")
_MONOMORPHIC = (
    _algebraic("$i", "$ii", "0", "1", "-1")
    + _algebraic("$f", "$ff", "0.0", "1.0", "-1.0")
    + _float("$f", "$ff")
)
_IF = [
    ("if_true", "a b", "(if true a b)", "a"),
    ("if_false", "a b", "(if false a b)", "b"),
    ("if_return_p", "p", "(if p true false)", "p"),
    ("if_both_same", "p a", "(if p a a)", "a"),
    ("eq_self", "a", "(eq a a)", "true"),
]
_LOG_EXP = [
    ("log_of_exp", "a", "(log (exp a))", "a"),
    ("exp_of_log", "a", "(exp (log a))", "a"),
    ("exp_of_add", "a b", "(exp (add a b))", "(mul (exp a) (exp b))"),
    ("mul_of_exps", "a b", "(mul (exp a) (exp b))", "(exp (add a b))"),
    ("log_of_mul", "a b", "(log (mul a b))", "(add (log a) (log b))"),
    ("add_of_logs", "a b", "(add (log a) (log b))", "(log (mul a b))"),
]
_VECTOR = [
    ("size_of_build", "n b", "(size (build n (lam x b)))", "n"),
    ("index_of_build", "arg sz body", "(index arg (build sz (lam x body)))", "(let x arg body)"),
    ("mk_sumbuild", "n e", "(sum (build n (lam x e)))", "(sumbuild n (lam x e))"),
    (
        "sumbuild_of_deltavec", "n e",
        "(sumbuild n (lam x (deltaVec n x e)))", "(build n (lam x e))",
    ),
    (
        "sum_of_deltavecs", "n i e1 e2",
        "(add (deltaVec n i e1) (deltaVec n i e2))", "(deltaVec n i (add e1 e2))",
    ),
    (
        "sumbuild_of_build", "o n e",
        "(sumbuild o (lam oi (build n (lam ni e))))",
        "(build n (lam ni (sumbuild o (lam oi e))))",
    ),
]  # fmt: skip
_BINDING = [("let_recover", "e", "(let x e x)", "e")]

# --- native rules -------------------------------------------------------------------


def _local(op: str, ok: Callable[[Node], bool], fn: Callable[[Node], Node]) -> Apply:
    """RLO's ``LocalRule``: ``ok`` and ``fn`` on the node at the index."""

    def apply(e: Node, idx: int, env: Env) -> Node | None:
        n = _node_at(e, idx)
        if n.op != op or not ok(n):
            return None
        return _replace(e, idx, fn)

    return apply


def _consts(n: Node) -> bool:
    return all(k.op == "const" for k in n.kids)


def _cprop(op: str, f: Callable[..., object]) -> Apply:
    return _local(op, _consts, lambda n: _const(f(*(k.value for k in n.kids))))


def _inline_let(e: Node, idx: int, env: Env) -> Node | None:
    n = _node_at(e, idx)
    if n.op != "var" or n.name not in env or env[n.name][1].op == "lam":
        return None
    binder, val = env[n.name]
    return _replace(e, binder, lambda b: _replace(b, idx - binder, lambda _: val, val))


def _inline_call(e: Node, idx: int, env: Env) -> Node | None:
    n = _node_at(e, idx)
    if n.op != "apply" or n.kids[0].name not in env:
        return None
    binder, func = env[n.kids[0].name]
    if func.op != "lam":
        return None

    def at_binder(b: Node) -> Node:
        return _replace(
            b,
            idx - binder,
            lambda app: Node("let", (func.kids[0], app.kids[1], func.kids[1])),
            func.kids[1],
        )

    return _replace(e, binder, at_binder)


def _parent_rule(check: Callable[[Node, Node], bool], fn: Callable[[Node, Node, int], Node]):
    """RLO's ``ReplaceParentRule``: ``idx`` names a child; the parent is rewritten."""

    def apply(e: Node, idx: int, env: Env) -> Node | None:
        for off, p, _ in _walk(e):
            c = off + 1
            for i, k in enumerate(p.kids):
                if c == idx:
                    if p.op in _BINDERS and i == p.bvi():
                        return None
                    if not check(k, p):
                        return None
                    return _replace(e, off, lambda par, i=i: fn(par.kids[i], par, i))
                c += k.num
        return None

    return apply


def _not_def_binder(p: Node) -> bool:
    return p.op != "lam" and not (p.op == "let" and p.kids[1].op == "lam")


def _binds_any_in(p: Node, e: Node) -> bool:
    return p.op in _BINDERS and p.kids[p.bvi()].name in e.free


def _new_bind_ok(k: Node, p: Node) -> bool:
    return p.op not in ("lam", "let") and k.op != "let" and k.num > 1


def _new_bind(k: Node, p: Node, i: int) -> Node:
    nv = _new_var(k)
    return p.with_kids(p.kids[:i] + (Node("let", (nv, k, nv)),) + p.kids[i + 1 :])


def _lift_bind_ok(k: Node, p: Node) -> bool:
    return _not_def_binder(p) and k.op == "let" and not _binds_any_in(p, k.kids[1])


def _lift_bind(k: Node, p: Node, i: int) -> Node:
    x, val, body = k.kids
    if any(x.name in s.free for j, s in enumerate(p.kids) if j != i):
        nv = _new_var(p)
        body = _rename_free(body, x.name, nv)
        x = nv
    return Node("let", (x, val, p.with_kids(p.kids[:i] + (body,) + p.kids[i + 1 :])))


def _lift_if_ok(k: Node, p: Node) -> bool:
    return _not_def_binder(p) and k.op == "if" and not _binds_any_in(p, k.kids[0])


def _lift_if(k: Node, p: Node, i: int) -> Node:
    def put(x: Node) -> Node:
        return p.with_kids(p.kids[:i] + (x,) + p.kids[i + 1 :])

    return Node("if", (k.kids[0], put(k.kids[1]), put(k.kids[2])))


def _cse_ok(n: Node) -> bool:
    inner = n.kids[2]
    return (
        inner.op == "let"
        and _alpha_eq(n.kids[1], inner.kids[1])
        and n.kids[0].name not in inner.kids[1].free
    )


def _cse(n: Node) -> Node:
    inner = n.kids[2]
    if inner.kids[0].name == n.kids[0].name:
        body = inner.kids[2]
    else:
        body = _rename_free(inner.kids[2], inner.kids[0].name, n.kids[0])
    return Node("let", (n.kids[0], n.kids[1], body))


def _div_by_self_ok(n: Node) -> bool:
    a, b = n.kids
    return _alpha_eq(a, b) and (a.op != "const" or a.value != 0.0)


def _select_ok(n: Node) -> bool:
    return n.kids[0].op == "tuple"


def _is_zero_vec(e: Node) -> bool:
    return (e.op == "const" and e.value == 0.0) or (e.op == "constVec" and _is_zero_vec(e.kids[1]))


def _involves(e: Node, v: Node) -> bool:
    return v.name in e.free


def _sumbuild_other_deltavec_ok(n: Node) -> bool:
    b = n.kids[2]
    return (
        b.op == "deltaVec"
        and not _involves(b.kids[0], n.kids[1])
        and not _involves(b.kids[1], n.kids[1])
    )


def _sumbuild_other_deltavec(n: Node) -> Node:
    b = n.kids[2]
    return Node("deltaVec", (b.kids[0], b.kids[1], n.with_kids((*n.kids[:2], b.kids[2]))))


def _sumbuild_of_tuple(n: Node) -> Node:
    return Node("tuple", tuple(n.with_kids((*n.kids[:2], k)) for k in n.kids[2].kids))


def _add_tuples_ok(n: Node) -> bool:
    a, b = n.kids
    return a.op == "tuple" and b.op == "tuple" and len(a.kids) == len(b.kids)


def _add_tuples(n: Node) -> Node:
    a, b = n.kids
    return Node("tuple", tuple(Node("add", (x, y)) for x, y in zip(a.kids, b.kids, strict=True)))


def _mul_tuple_scalar(n: Node) -> Node:
    return Node("tuple", tuple(Node("mul", (x, n.kids[1])) for x in n.kids[0].kids))


def _sumbuild_of_sum(n: Node) -> Node:
    a, b = n.kids[2].kids
    return Node("add", (n.with_kids((*n.kids[:2], a)), n.with_kids((*n.kids[:2], b))))


_NATIVE: dict[str, Apply] = {
    "cprop_add": _cprop("add", lambda a, b: a + b),
    "cprop_sub": _cprop("sub", lambda a, b: a - b),
    "cprop_mul": _cprop("mul", lambda a, b: a * b),
    "cprop_div": _cprop("div", lambda a, b: a / b),
    "cprop_log": _cprop("log", lambda a: float(math.log(a))),
    "cprop_exp": _cprop("exp", lambda a: float(math.exp(a))),
    "cprop_eq": _cprop("eq", lambda a, b: a == b),
    "cprop_gt": _cprop("gt", lambda a, b: a > b),
    "cprop_gteq": _cprop("gte", lambda a, b: a >= b),
    "div_by_self": _local("div", _div_by_self_ok, lambda n: _const(1.0)),
    "inline_let": _inline_let,
    "delete_let": _local(
        "let", lambda n: n.kids[0].name not in n.kids[2].free, lambda n: n.kids[2]
    ),
    "inline_call": _inline_call,
    "new_bind": _parent_rule(_new_bind_ok, _new_bind),
    "lift_bind": _parent_rule(_lift_bind_ok, _lift_bind),
    "cse_bind": _local("let", _cse_ok, _cse),
    "lift_if": _parent_rule(_lift_if_ok, _lift_if),
    "select_of_tuple": _local("select", _select_ok, lambda n: n.kids[0].kids[n.kids[1].value]),
    "sumbuild_other_deltavec": _local(
        "sumbuild", _sumbuild_other_deltavec_ok, _sumbuild_other_deltavec
    ),
    "sumbuild_of_tuple": _local("sumbuild", lambda n: n.kids[2].op == "tuple", _sumbuild_of_tuple),
    "add_tuples": _local("add", _add_tuples_ok, _add_tuples),
    "mul_tuple_scalar": _local("mul", lambda n: n.kids[0].op == "tuple", _mul_tuple_scalar),
    "sumbuild_invariant": _local(
        "sumbuild",
        lambda n: not _involves(n.kids[2], n.kids[1]),
        lambda n: Node("mul", (Node("to_float", (n.kids[0],)), n.kids[2])),
    ),
    "sumbuild_of_zero_vec": _local(
        "sumbuild",
        lambda n: not _involves(n.kids[2], n.kids[1]) and _is_zero_vec(n.kids[2]),
        lambda n: n.kids[2],
    ),
    "sumbuild_of_sum": _local("sumbuild", lambda n: n.kids[2].op == "add", _sumbuild_of_sum),
}

_PARSED = _ALGEBRAIC + _MONOMORPHIC + _IF + _LOG_EXP + _VECTOR + _BINDING

#: Every implemented RLO rule by RLO's name: ``apply(expr, node_index, env)`` returns the
#: rewritten expression, or ``None`` where the rule does not apply at that node.
RULES: dict[str, Apply] = {
    **{name: _parsed(v, lhs, rhs) for name, v, lhs, rhs in _PARSED},
    **_NATIVE,
}

#: RLO rules not implemented, with the reason.
NOT_IMPLEMENTED = {
    "cfold": "runs a prelude primitive natively on constants (RLO's native_impls); "
    "no .kso sequence uses it",
}


def _names(rules: list[tuple[str, str, str, str]]) -> list[str]:
    return [r[0] for r in rules]


_SIMPLIFY = _names(_ALGEBRAIC) + [
    "cprop_add", "cprop_sub", "cprop_mul", "cprop_div", "inline_let", "delete_let",
    "div_by_self",
]  # fmt: skip
_BIND = ["new_bind", "lift_bind", "cse_bind", "inline_let", "delete_let", "let_recover"]
_IFS = _names(_IF) + ["cprop_eq", "cprop_gt", "cprop_gteq", "lift_if"]
_LOGS = _names(_LOG_EXP[:2]) + ["cprop_log", "cprop_exp"] + _names(_LOG_EXP[2:])
_VEC = ["size_of_build", "index_of_build", "select_of_tuple", "mk_sumbuild",
        "sumbuild_other_deltavec", "sumbuild_of_deltavec", "sumbuild_of_tuple", "add_tuples",
        "mul_tuple_scalar", "sumbuild_invariant", "sumbuild_of_zero_vec", "sum_of_deltavecs",
        "sumbuild_of_sum", "sumbuild_of_build"]  # fmt: skip


def _uniq(*lists: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for ls in lists for n in ls))


#: RLO's rule sets (``rewrites.py``: ``RuleSet(..., name)``), rule names in RLO's order.
RULE_SETS: dict[str, tuple[str, ...]] = {
    "simplify_rules": _uniq(_SIMPLIFY),
    "binding_rules": _uniq(_BIND),
    "if_rules": _uniq(_IFS),
    "log_exp_rules": _uniq(_LOGS),
    "build_simplify_rules": _uniq(_VEC, _SIMPLIFY, ["inline_call"]),
    "binding_simplify_rules": _uniq(_SIMPLIFY, _BIND),
    "ml_rules": _uniq(_SIMPLIFY, _BIND, _VEC, _IFS, ["inline_call"]),
    "ml_rules_no_bind": _uniq(_SIMPLIFY, _VEC, _IFS, ["inline_call"]),
    "vector_tuple_rules": _uniq(_VEC, ["inline_let", "inline_call", "delete_let"]),
    "monomorphic_rules": _uniq(_names(_MONOMORPHIC), ["cfold"]),
}
