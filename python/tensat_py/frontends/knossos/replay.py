"""Replay RLO's published ``; BEST`` rewrite sequences on a Knossos program.

RLO's ``.kso`` files (knossos-ksc ``rlo/src/rlo/ksc/``: blas, gelu, binding_simplify,
...) carry lines ``; BEST <ruleset> <function> <expert|rlo|user> [<run>] ;
[[node_index, rule_name], ...]``: the best rewrite sequences experts, users and RLO
found. To compare with them we rebuild, from our own syntax tree, the expression RLO
optimises and apply each step at its node index.

Facts taken from RLO's source (microsoft/knossos-ksc, ``rlo/src/rlo/``; this is our own
implementation of them):

* ``sparser.py``: a file becomes, per function ``f``, the chain
  ``(let d1 (lam ..) (let d2 (lam ..) ... f))`` of the non-``cost$`` defs up to ``f``
  in file order, then ``rewrites.delete_unused_defs`` drops defs ``f`` does not use. A
  def of several parameters takes one tuple argument ``varN``; its body is wrapped as
  ``(let pK (select varN K) ... (let p0 (select varN 0) body))`` (last parameter
  outermost). ``build``/``sumbuild`` hold ``[size, var, body]``; ``let`` holds
  ``[var, value, body]``; calls of functions are ``apply(var f, arg)`` with a tuple for
  several arguments; ``get$i$n`` is ``select(tuple, i-1)``; ``neg x`` is ``sub 0.0 x``,
  ``lt``/``lte`` swap into ``gt``/``gte``.
* ``expression.py``: node indices are pre-order over every child (binding occurrences
  of variables included); ``node_ids_with_environment`` gives let-bound variables
  their binder; ``replace_subtree`` renames binders on the path that would capture;
  fresh names are ``var<N>`` above every ``var<k>`` present.
* ``rewrites.py``: every rule of every rule set, by RLO's name, in
  :mod:`tensat_py.frontends.knossos.rlo_rules`; ``new_bind``, ``lift_bind`` and
  ``lift_if`` are identified by the *child* node but replace its parent.

:func:`replay` applies a sequence and raises :class:`ReplayError` naming the step when
one does not apply; :func:`to_def` turns the result back into a :class:`Def` of the
original signature for the evaluator and our cost model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tensat_py.frontends.knossos.rlo_terms import (
    _BINDERS,
    Env,
    Node,
    _const,
    _new_var,
    _rename_free,
    _replace,
    _var,
    _walk,
)
from tensat_py.frontends.knossos.syntax import (
    Assert,
    Call,
    Const,
    Def,
    Expr,
    If,
    Lam,
    Let,
    Program,
    Var,
)

__all__ = ["Node", "BestLine", "ReplayError", "best_lines", "rlo_expr", "replay", "to_def"]

_ARITY = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "exp": 1, "log": 1, "eq": 2, "gt": 2,
    "gte": 2, "to_float": 1, "index": 2, "size": 1, "sum": 1, "deltaVec": 3,
    "constVec": 2, "assert": 2, "if": 3,
}  # fmt: skip


class ReplayError(ValueError):
    """A BEST step that does not apply (the message names the line and the step)."""


def from_expr(e: Expr) -> Node:
    """RLO's form of one of our expressions (``sparser._convert_to_expr``)."""
    if isinstance(e, Const):
        return _const(e.value)
    if isinstance(e, Var):
        return _var(e.name)
    if isinstance(e, Let):
        if e.tupled:
            raise ReplayError("RLO has no tuple-binding let")
        body = from_expr(e.body)
        if len(e.vars) == 1:
            return Node("let", (_var(e.vars[0]), from_expr(e.rhs), body))
        raise ReplayError("unexpected let form")
    if isinstance(e, Lam):
        return Node("lam", (_var(e.var, e.type), from_expr(e.body)))
    if isinstance(e, If):
        return Node("if", (from_expr(e.cond), from_expr(e.then), from_expr(e.other)))
    if isinstance(e, Assert):
        return Node("assert", (from_expr(e.cond), from_expr(e.body)))
    assert isinstance(e, Call)
    name, args = e.name, e.args
    if name in ("build", "sumbuild"):
        lam = args[1]
        assert isinstance(lam, Lam)
        return Node(name, (from_expr(args[0]), _var(lam.var, lam.type), from_expr(lam.body)))
    m = re.fullmatch(r"get\$(\d+)\$(\d+)", name)
    if m:
        idx = _const(int(m.group(1)) - 1)
        return Node("select", (from_expr(args[0]), idx), size=int(m.group(2)))
    kids = tuple(from_expr(a) for a in args)
    if name == "tuple":
        return Node("tuple", kids)
    if name == "neg":
        return Node("sub", (_const(0.0), kids[0]))
    if name in ("lt", "lte"):
        return Node({"lt": "gt", "lte": "gte"}[name], (kids[1], kids[0]))
    if name in _ARITY and len(kids) == _ARITY[name]:
        return Node(name, kids)
    arg = kids[0] if len(kids) == 1 else Node("tuple", kids)
    return Node("apply", (_var(name), arg))


def _def_lam(d: Def) -> Node:
    body = from_expr(d.body)
    if len(d.params) == 1:
        p, t = d.params[0]
        return Node("lam", (_var(p, t), body))
    av = _new_var(Node("tuple", tuple(_var(p) for p, _ in d.params)))
    av = _var(av.name, tuple(t for _, t in d.params))
    for i, (p, _) in enumerate(d.params):
        body = Node("let", (_var(p), Node("select", (av, _const(i)), size=len(d.params)), body))
    return Node("lam", (av, body))


def rlo_expr(prog: Program, name: str) -> Node:
    """The expression RLO optimises for def ``name``: the let chain of the defs up to it,
    unused ones deleted (``sparser.parse_defs``, ``rewrites.delete_unused_defs``)."""
    chain: list[tuple[str, Node]] = []
    for d in prog.defs:
        if d.name.startswith("cost$"):
            continue
        chain.append((d.name, _def_lam(d)))
        if d.name == name:
            break
    else:
        raise ReplayError(f"no def `{name}`")
    e: Node = _var(name)
    for n, lam in reversed(chain):
        e = Node("let", (_var(n), lam, e))
    while True:  # delete_def, first applicable in pre-order, until none applies
        found = False
        for idx, n, _ in _walk(e):
            if n.op == "let" and n.kids[1].op == "lam" and n.kids[0].name not in n.kids[2].free:
                e = _replace(e, idx, lambda x: x.kids[2])
                found = True
                break
        if not found:
            return e


# --- traversal and capture-avoiding replacement ----------------------------------------


@dataclass(frozen=True)
class BestLine:
    """One ``; BEST`` line: rule set, function, ``expert``/``rlo``, run, steps, line no."""

    ruleset: str
    function: str
    who: str
    run: str
    steps: tuple[tuple[int, str], ...]
    line: int
    text: str


def best_lines(text: str) -> list[BestLine]:
    """Every ``; BEST`` line of a ``.kso`` text: ``; BEST <rule set> <function> <who>
    <run> ; <json steps>``, where ``<run>`` may be missing after ``user`` (RLO's
    ``utils.parse_best_episodes``).

    Raises:
        ReplayError: a ``; BEST`` line of another layout.
    """
    import json

    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        if not raw.startswith("; BEST"):
            continue
        head, sep, seq = raw[6:].partition(";")
        cols = head.split()
        if len(cols) == 3 and cols[2] == "user":
            cols.append("")
        if not sep or len(cols) != 4:
            raise ReplayError(f"line {no}: not a `; BEST` line of RLO's layout")
        steps = tuple((int(i), str(r)) for i, r in json.loads(seq))
        out.append(BestLine(*cols, steps, no, raw))
    return out


def replay(prog: Program, best: BestLine) -> Node:
    """Apply ``best``'s steps to RLO's expression for its function, each with RLO's rule
    of that name (:mod:`tensat_py.frontends.knossos.rlo_rules`).

    Raises:
        ReplayError: a step does not apply, names an unknown rule or one outside the line's
            rule set.
    """
    from tensat_py.frontends.knossos.rlo_rules import RULE_SETS, RULES

    allowed = RULE_SETS.get(best.ruleset)
    e = rlo_expr(prog, best.function)
    for k, (idx, rule) in enumerate(best.steps):
        if rule not in RULES:
            raise ReplayError(f"line {best.line}: step {k} uses unknown rule `{rule}`")
        if allowed is not None and rule not in allowed:
            raise ReplayError(f"line {best.line}: step {k} uses `{rule}`, not in {best.ruleset}")
        env: Env | None = None
        for off, _, en in _walk(e):
            if off == idx:
                env = en
                break
        res = RULES[rule](e, idx, env) if env is not None else None
        if res is None:
            raise ReplayError(
                f"line {best.line} ({best.function} {best.who}): step {k} "
                f"[{idx}, {rule}] does not apply"
            )
        e = res
    return e


# --- back to our syntax tree ----------------------------------------------------------


def to_expr(n: Node) -> Expr:
    """Our syntax tree for an RLO-shaped node."""
    from tensat_py.frontends.knossos.syntax import KsType

    if n.op == "const":
        return Const(n.value)  # type: ignore[arg-type]
    if n.op == "var":
        return Var(n.name)
    if n.op == "let":
        return Let((n.kids[0].name,), to_expr(n.kids[1]), to_expr(n.kids[2]))
    if n.op in ("build", "sumbuild"):
        lam = Lam(n.kids[1].name, KsType("Integer"), to_expr(n.kids[2]))
        return Call(n.op, (to_expr(n.kids[0]), lam))
    if n.op == "lam":
        return Lam(n.kids[0].name, n.kids[0].type, to_expr(n.kids[1]))  # type: ignore[arg-type]
    if n.op == "select":
        return Call(f"get${n.kids[1].value + 1}${n.size}", (to_expr(n.kids[0]),))
    if n.op == "if":
        return If(*(to_expr(k) for k in n.kids))
    if n.op == "assert":
        return Assert(to_expr(n.kids[0]), to_expr(n.kids[1]))
    if n.op == "apply":
        arg = n.kids[1]
        args = arg.kids if arg.op == "tuple" else (arg,)
        return Call(n.kids[0].name, tuple(to_expr(a) for a in args))
    return Call(n.op, tuple(to_expr(k) for k in n.kids))


def to_def(prog: Program, e: Node, name: str) -> Def:
    """The def ``name`` out of a replayed chain, with the original signature: a
    multi-parameter def's ``select``s of its tuple argument become the parameters again
    and the ``(let p p ...)`` wrappers that leaves are dropped."""
    orig = next(d for d in prog.defs if d.name == name)
    while e.op == "let" and e.kids[1].op == "lam" and e.kids[0].name != name:
        e = e.kids[2]
    if e.op == "let" and e.kids[1].op == "lam":
        lam = e.kids[1]
    elif e.op == "lam":  # let_recover took the final `(let f (lam ..) f)` apart
        lam = e
    else:
        raise ReplayError(f"def `{name}` vanished from the replayed chain")
    av, body = lam.kids
    if len(orig.params) > 1:
        body = _unwrap(body, av.name, [p for p, _ in orig.params])
        if av.name in body.free:
            tup = Node("tuple", tuple(_var(p) for p, _ in orig.params))
            body = Node("let", (av, tup, body))
    elif av.name != orig.params[0][0]:  # renamed to avoid capture while inlining a call
        body = _rename_free(body, av.name, _var(orig.params[0][0]))
    return Def(orig.name, orig.ret, orig.params, to_expr(body))


def _unwrap(n: Node, av: str, params: list[str]) -> Node:
    if n.op == "select" and n.kids[0].op == "var" and n.kids[0].name == av:
        return _var(params[n.kids[1].value])
    if n.op in _BINDERS and n.kids[n.bvi()].name == av:
        return n
    kids = tuple(_unwrap(k, av, params) for k in n.kids)
    n = n.with_kids(kids)
    if n.op == "let" and n.kids[1].op == "var" and n.kids[1].name == n.kids[0].name:
        return n.kids[2]
    return n


@dataclass(frozen=True)
class Replayed:
    """A replayed BEST line: the resulting def (``None`` where a step did not apply), its
    RLO cost in our model (``rust/src/ks_cost.rs``, RLO units; ``nan`` when not
    replayed) and the evaluator's verdict against the original."""

    best: BestLine
    definition: Def | None
    cost: float
    verified: bool
    message: str


def replay_all(prog: Program, text: str, trials: int = 3, strict: bool = True) -> list[Replayed]:
    """Replay every ``; BEST`` line of ``text`` (the source of ``prog``), verify each
    result against the original def on random arguments and price it (RLO units).

    The ``.kso`` files record sequences, not costs: RLO's best cost for a line is RLO's
    cost of the expression the sequence ends at, which is what ``cost`` prices.

    Args:
        strict: raise on a line that does not replay; otherwise record it (not verified,
            the error as its message).

    Raises:
        ReplayError: with ``strict``, a step of some line does not apply.
    """
    from tensat_py import _core
    from tensat_py.frontends.knossos import function_costs
    from tensat_py.frontends.knossos.evaluate import compare_defs
    from tensat_py.frontends.knossos.lower import lower, signatures

    sigs = signatures(prog)
    costs = function_costs(prog)
    out = []
    for b in best_lines(text):
        try:
            d = to_def(prog, replay(prog, b), b.function)
        except ReplayError as e:
            if strict:
                raise
            out.append(Replayed(b, None, float("nan"), False, str(e)))
            continue
        orig = next(x for x in prog.defs if x.name == b.function)
        ok, msg = compare_defs(prog, orig, d, trials=trials)
        nodes, _ = lower(d, sigs)
        out.append(Replayed(b, d, float(_core.rlo_cost(nodes, costs)), ok, msg))
    return out
