"""RLO's expression form, as RLO's own source holds it (knossos-ksc ``rlo/src/rlo/``
``expression.py``; this is our own implementation): :class:`Node` trees whose binders
keep their bound variable as a child, node indices in RLO's pre-order over every child,
the environment of let-bound names at each node, alpha-equivalence, and
capture-avoiding substitution and replacement at an index. The replay of RLO's
``; BEST`` lines (:mod:`.replay`) and RLO's rules (:mod:`.rlo_rules`) work on it.

>>> e = Node("let", (_var("x"), _const(1.0), Node("add", (_var("x"), _var("y")))))
>>> sorted(e.free), e.num
(['y'], 6)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Node", "Env"]

_BINDERS = ("let", "lam", "build", "sumbuild")


@dataclass(frozen=True)
class Node:
    """An RLO-shaped expression node: ``op`` with ``kids``; ``name`` for variables,
    ``value`` for constants, ``size`` for ``select``; ``type`` for lam parameters."""

    op: str
    kids: tuple[Node, ...] = ()
    name: str = ""
    value: object = None
    size: int = 0
    type: object = None

    @property
    def num(self) -> int:
        """Number of nodes in this subtree."""
        return _num(self)

    @property
    def free(self) -> frozenset[str]:
        """Free variable names (RLO's ``free_var_names``)."""
        return _free(self)

    def bvi(self) -> int:
        """Index of the bound variable among the children of a binder."""
        return 0 if self.op in ("lam", "let") else 1

    def binds_in(self, i: int) -> bool:
        """Whether the bound variable scopes over child ``i``."""
        return i == self.bvi() or i == len(self.kids) - 1

    def with_kids(self, kids: Sequence[Node]) -> Node:
        """A copy with other children."""
        return Node(self.op, tuple(kids), self.name, self.value, self.size, self.type)


def _num(n: Node) -> int:
    return 1 + sum(_num(k) for k in n.kids)


def _free(n: Node) -> frozenset[str]:
    if n.op == "var":
        return frozenset([n.name])
    if n.op in _BINDERS:
        inner: set[str] = set()
        outer: set[str] = set()
        for i, k in enumerate(n.kids):
            (inner if n.binds_in(i) else outer).update(_free(k))
        inner.discard(n.kids[n.bvi()].name)
        return frozenset(inner | outer)
    out: set[str] = set()
    for k in n.kids:
        out |= _free(k)
    return frozenset(out)


def _var(name: str, t: object = None) -> Node:
    return Node("var", name=name, type=t)


def _const(v: object) -> Node:
    return Node("const", value=v)


def _next_var(*ns: Node) -> int:
    best = 0
    for n in ns:
        stack = [n]
        while stack:
            x = stack.pop()
            if x.op == "var":
                m = re.fullmatch(r"var(\d+)", x.name)
                if m:
                    best = max(best, int(m.group(1)) + 1)
            stack.extend(x.kids)
    return best


def _new_var(*ns: Node, t: object = None) -> Node:
    return _var(f"var{_next_var(*ns)}", t)


def _alpha_eq(a: Node, b: Node, env: dict[str, str] | None = None) -> bool:
    env = env or {}
    if a.op != b.op or len(a.kids) != len(b.kids):
        return False
    if a.op == "var":
        return env.get(a.name, a.name) == b.name
    if a.op == "const":
        return a.value == b.value and type(a.value) is type(b.value)
    if a.op == "select" and a.size != b.size:
        return False
    inner = env
    if a.op in _BINDERS:
        inner = {**env, a.kids[a.bvi()].name: b.kids[b.bvi()].name}
    for i, (x, y) in enumerate(zip(a.kids, b.kids, strict=True)):
        if a.op in _BINDERS and i == a.bvi():
            continue
        if not _alpha_eq(x, y, inner if a.op in _BINDERS and a.binds_in(i) else env):
            return False
    return True


# --- from our syntax tree -----------------------------------------------------------


Env = dict[str, tuple[int, Node]]


def _walk(e: Node, off: int = 0, env: Env | None = None):
    """Pre-order ``(index, node, env)`` skipping binding occurrences; env maps
    let-bound names to ``(binder index, value)`` (``node_ids_with_environment``)."""
    env = env if env is not None else {}
    yield off, e, env
    c = off + 1
    if e.op in _BINDERS:
        bv = e.kids[e.bvi()].name
        if e.op == "let":
            benv = {**env, bv: (off, e.kids[1])}
        else:
            benv = {k: v for k, v in env.items() if k != bv}
        for i, k in enumerate(e.kids):
            if i != e.bvi():
                yield from _walk(k, c, benv if e.binds_in(i) else env)
            c += k.num
    else:
        for k in e.kids:
            yield from _walk(k, c, env)
            c += k.num


def _node_at(e: Node, idx: int) -> Node:
    while idx:
        idx -= 1
        for k in e.kids:
            if idx < k.num:
                e = k
                break
            idx -= k.num
        else:
            raise IndexError(idx)
    return e


def _subst(e: Node, sub: dict[str, Node], target=None) -> Node:
    """RLO's ``_cav_helper``: replace the node at ``target = (idx, fn, preserve)`` with
    ``fn(old)`` and free variables per ``sub``, renaming binders that would capture."""
    if target is not None:
        idx, fn, preserve = target
        if idx == 0:
            return fn(_subst(e, sub) if sub else e)
    if e.op == "var":
        return sub.get(e.name, e)
    keep = {k: v for k, v in sub.items() if k in e.free}
    if target is None and not keep:
        return e
    vals = ([target[2]] if target is not None else []) + list(keep.values())
    bkeep = keep
    if e.op in _BINDERS:
        bv = e.kids[e.bvi()]
        if any(bv.name in v.free for v in vals):
            nv = _var(_new_var(e, *vals).name, bv.type)
            bkeep = {**keep, bv.name: nv}
    t = target[0] - 1 if target is not None else None
    kids = []
    for i, k in enumerate(e.kids):
        kt = None
        if t is not None:
            if t < k.num:
                kt = (t, target[1], target[2])
                t = None
            else:
                t -= k.num
        s = bkeep if e.op in _BINDERS and e.binds_in(i) else keep
        kids.append(_subst(k, s, kt))
    return e.with_kids(kids)


def _replace(e: Node, idx: int, fn: Callable[[Node], Node], preserve: Node | None = None) -> Node:
    return _subst(e, {}, (idx, fn, preserve if preserve is not None else _const(0)))


def _rename_free(e: Node, name: str, nv: Node) -> Node:
    return _subst(e, {name: nv})
