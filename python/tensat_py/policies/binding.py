"""RLO's ``inline_let`` as one move on a Knossos term, for A* over rewrite sequences.

Knossos RLO (knossos-ksc ``rlo/src/rlo/rewrites.py``, ``inline_let``) replaces *one*
occurrence of a ``let``-bound variable by the bound value in a single action (the ``let``
stays; ``delete_let`` removes it once unused). A rule file cannot state that as one
rewrite: ``rules/knossos_binding.rules`` pushes the ``let`` down one operator at a time
(explicit substitution, egg's lambda-calculus example), which is exact in an e-graph but
makes a single inlining a climb of several rewrites over costlier terms on a term (a
``let`` pushed into a ``build`` body is paid once per element). A* would then need
thousands of evaluations to inline the size of a ``build`` (``blas_train.kso``'s
``float_matrix_multiply``: none found in 20,000).

Terms are :data:`tensat_py.policies.Term` (flat, root last) as the Knossos front end
lowers them: ``(let x v body)``, ``(lam x T body)`` and ``(var x T)`` with the names and
types as leaves. The moves here are capture-avoiding without renaming: an occurrence under
a binder (``let`` or ``lam``) of a name free in the value is not offered, nor one whose
name a nearer binder shadows (it refers to that binder).
"""

from __future__ import annotations

from tensat_py.policies import Term

__all__ = ["INLINE_LET", "inline_let_moves"]

#: Rule index :func:`tensat_py.policies.astar.successors` gives an ``inline_let`` move
#: (it is not a rule of the rule file).
INLINE_LET = -1

_BINDERS = ("let", "lam")

Tree = tuple[str, tuple["Tree", ...]]


def _tree(term: Term, i: int) -> Tree:
    op, ch = term[i]
    return (op, tuple(_tree(term, c) for c in ch))


def _free(t: Tree, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    key = id(t)
    if key in memo:
        return memo[key]
    op, kids = t
    if op == "var" and kids:
        out = frozenset([kids[0][0]])
    elif op in _BINDERS and len(kids) == 3:
        name = kids[0][0]
        body = _free(kids[2], memo) - {name}
        out = body | (_free(kids[1], memo) if op == "let" else frozenset())
    else:
        out = frozenset().union(*(_free(k, memo) for k in kids)) if kids else frozenset()
    memo[key] = out
    return out


def _flat(t: Tree, nodes: list[tuple[str, tuple[int, ...]]], ids: dict) -> int:
    op, kids = t
    key = (op, tuple(_flat(k, nodes, ids) for k in kids))
    if key not in ids:
        ids[key] = len(nodes)
        nodes.append(key)
    return ids[key]


def _replace(t: Tree, path: list[int], new: Tree) -> Tree:
    if not path:
        return new
    op, kids = t
    i = path[0]
    return (op, kids[:i] + (_replace(kids[i], path[1:], new),) + kids[i + 1 :])


def inline_let_moves(term: Term) -> list[tuple[int, Term]]:
    """Every ``inline_let`` of ``term``: ``(pre-order position of the occurrence, new
    term)``, one per occurrence of a ``let``-bound variable in its ``let``'s body.

    Example:
        >>> from tensat_py.policies.astar import parse_rlo, term_text
        >>> moves = inline_let_moves(parse_rlo("(let (n (mul x x)) (add n 1.0))"))
        >>> [(p, term_text(s)) for p, s in moves]  # doctest: +NORMALIZE_WHITESPACE
        [(10, '(let n (mul (var x Float) (var x Float))
               (add (mul (var x Float) (var x Float)) (scalar 1.0 float64)))')]
    """
    if not term:
        return []
    root = _tree(term, len(term) - 1)
    memo: dict[int, frozenset[str]] = {}
    out: list[tuple[int, Term]] = []
    # env: name -> (value, names bound since its let); walk in pre-order with positions.
    stack: list[tuple[Tree, list[int], dict[str, tuple[Tree, frozenset[str]]]]] = [(root, [], {})]
    pos = 0
    while stack:
        t, path, env = stack.pop()
        here = pos
        pos += 1
        op, kids = t
        if op == "var" and kids:
            hit = env.get(kids[0][0])
            if hit is not None and not (_free(hit[0], memo) & hit[1]):
                nodes: list[tuple[str, tuple[int, ...]]] = []
                _flat(_replace(root, path, hit[0]), nodes, {})
                out.append((here, tuple(nodes)))
        inner = env
        if op in _BINDERS and len(kids) == 3:
            name = kids[0][0]
            inner = {k: (v, seen | {name}) for k, (v, seen) in env.items() if k != name}
            if op == "let":  # its own name counts as crossed when the value uses it
                inner[name] = (kids[1], frozenset([name]))
        # children pushed in reverse so that they pop in pre-order
        for i in range(len(kids) - 1, -1, -1):
            scope = inner if op in _BINDERS and i == 2 else env
            if op in _BINDERS and i == 0:
                scope = {}
            stack.append((kids[i], [*path, i], scope))
    return out
