"""Extraction split at dominator cuts: independent pieces, each solved (and proved) alone.

Branch and bound over an e-graph of many loosely coupled blocks (Inception modules, NasNet
cells, RNN time steps) explores the *product* of the blocks' search trees; solved one at a
time they cost the *sum*. This module finds where an e-graph falls apart into such blocks.

**Cuts.** Take the class graph of the kept nodes (an edge ``c -> d`` when a node of ``c``
has child class ``d``) from a virtual root above the root classes, leaving out *trivial*
classes: one kept node of cost 0 whose children are all trivial (inputs, weights and their
literal parameters), whose choice is fixed and free, so sharing them couples nothing. In
its dominator tree (Cooper, Harvey and Kennedy, *A Simple, Fast Dominance Algorithm*, 2001;
:func:`immediate_dominators`), class ``q`` is a *cut* when no edge
leaves ``q``'s dominator subtree ``T(q)``: every class ``q`` can reach is reached only
through ``q``. Then an extraction's choices inside ``T(q)`` and outside it are independent:
outside, ``q`` behaves as a leaf whose price is the cost of ``q``'s best sub-DAG; cycles
cannot cross the cut (no edge leaves ``T(q)``). Edge ``x -> y`` leaves exactly the subtrees
of the dominator-tree ancestors of ``x`` below ``idom(y)`` (or below ``y`` when ``y``
dominates ``x``: a back edge), so one pass of path increments and subtree sums finds every
cut.

**Pieces.** Each cut owns the classes of its dominator subtree not owned by a deeper cut;
the virtual root owns the rest (the *top* piece, which holds the root classes: a root is
never a cut). Cuts owning fewer than ``min_nodes`` kept
nodes are merged into the piece above (by default none: a piece without a choice needs no
solver call, see :func:`solve_pieces`).

**Bound.** Pieces are solved children first; a parent sees each child piece ``q`` as a leaf
priced at the child's incumbent cost ``p_q``. With ``lb_P`` a proved lower bound of piece
``P``'s problem at those prices, the optimum of the whole e-graph is at least
``lb_top - sum over the other pieces q of (p_q - lb_q)`` (lowering one leaf's price by
``d`` lowers any extraction's cost by at most ``d``: a class is built once), so the pieces'
gaps add up and a proof of every piece is a proof of the whole.
"""

from __future__ import annotations

import contextvars
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tensat_py.egraph import ExtractionProblem

if TYPE_CHECKING:
    from tensat_py.extract.ilp import IlpOutcome

#: ``solve(sub_problem, time_limit_seconds, warm_start) -> IlpOutcome`` for one piece.
PieceSolver = Callable[[ExtractionProblem, float, "dict[int, int] | None"], "IlpOutcome"]

__all__ = [
    "Piece",
    "Decomposition",
    "decompose",
    "immediate_dominators",
    "piece_problem",
    "solve_pieces",
]

_TOP = -1  # the virtual root's id in the class graph

#: Seconds kept back for each piece with a choice that is still to be solved.
RESERVE = 0.2

#: Kept nodes below which a cut is merged into the piece above it.
MIN_PIECE_NODES = 1

#: The message of a piece proved by its critical-path bound (no solver call).
PATH_PROVED = "meets the critical-path bound"

#: Pieces with at most this many kept nodes are first tried against their critical-path
#: bound in the scheduling thread (handing them to a worker costs more than the check);
#: the ones it does not prove go to a worker like the rest.
INLINE_NODES = 64


@dataclass
class Piece:
    """One independent part of the extraction problem.

    Attributes:
        root: the cut class this piece builds, or ``None`` for the top piece (it builds
            the problem's roots).
        classes: the classes this piece owns (their kept nodes are its candidates).
        leaves: classes the piece reads but does not own: roots of child pieces (priced at
            the child's cost) and trivial classes (price 0).
        nodes: number of kept nodes in ``classes``.
    """

    root: int | None
    classes: list[int]
    leaves: list[int] = field(default_factory=list)
    nodes: int = 0

    @property
    def has_choice(self) -> bool:
        """Whether some class of the piece has two kept nodes (else its extraction is
        fixed and needs no solver)."""
        return self.nodes > len(self.classes)


@dataclass
class Decomposition:
    """The pieces of an e-graph, children before parents (the top piece is last).

    Attributes:
        pieces: the pieces; every kept class is owned by exactly one piece or is trivial.
        trivial: trivial classes (one free node over trivial children), with that node.
        members: the kept nodes of each kept class.
    """

    pieces: list[Piece]
    trivial: dict[int, int]
    members: dict[int, list[int]] = field(default_factory=dict)


def decompose(
    problem: ExtractionProblem, keep: list[bool], *, min_nodes: int = MIN_PIECE_NODES
) -> Decomposition:
    """Splits the kept part of ``problem`` into pieces at dominator cuts (module docstring).

    Args:
        problem: the e-graph.
        keep: one bool per node: still a candidate (after pruning/simplification; every
            root class must have a kept node).
        min_nodes: cuts owning fewer kept nodes than this are merged into their parent.

    Returns:
        a :class:`Decomposition`; a single top piece when the e-graph has no useful cut.

    Example:
        >>> from tensat_py.egraph import ExtractionProblem
        >>> # root 0 = f(class 1); class 1 = g(class 2) or h(class 2); class 2 = leaf.
        >>> p = ExtractionProblem(["f", "g", "h", "x"], [0, 1, 1, 2], [[1], [2], [2], []],
        ...                       [1.0, 2.0, 3.0, 0.0], 3, [0])
        >>> d = decompose(p, [True] * 4, min_nodes=1)
        >>> [(q.root, q.classes, q.leaves) for q in d.pieces]
        [(1, [1], [2]), (None, [0], [1])]
    """
    members: dict[int, list[int]] = {}
    for i, k in enumerate(keep):
        if k:
            members.setdefault(problem.node_eclass[i], []).append(i)
    trivial = _trivial(problem, members)
    succ: dict[int, list[int]] = {
        _TOP: list(dict.fromkeys(r for r in problem.roots if r not in trivial))
    }
    for c, ns in members.items():
        if c not in trivial:
            kids = (d for i in ns for d in problem.node_children[i] if d not in trivial)
            succ[c] = list(dict.fromkeys(kids))
    idom = immediate_dominators(succ, _TOP)
    kids: dict[int, list[int]] = {}
    for v, d in idom.items():
        if v != d:
            kids.setdefault(d, []).append(v)
    order, enter, leave = _preorder(kids)
    # Edges leaving each dominator subtree: +1 at the edge's source, -1 where its path ends.
    leaving = dict.fromkeys(order, 0)
    for x, y in ((x, y) for x, ys in succ.items() for y in ys):
        back = enter[y] <= enter[x] and leave[x] <= leave[y]  # y dominates x
        leaving[x] += 1
        leaving[y if back else idom[y]] -= 1
    size = {v: len(members.get(v, ())) for v in order}
    for v in reversed(order):  # children before parents
        if v != _TOP:
            leaving[idom[v]] += leaving[v]
    roots = set(problem.roots)
    cut: set[int] = set()
    for v in reversed(order):
        if v == _TOP:
            continue
        if leaving[v] == 0 and size[v] >= min_nodes and v not in roots:
            cut.add(v)
        else:
            size[idom[v]] += size[v]
    owner: dict[int, int] = {}
    for v in order:
        owner[v] = v if (v == _TOP or v in cut) else owner[idom[v]]
    owned: dict[int, list[int]] = {}
    for v in order:
        if v != _TOP:
            owned.setdefault(owner[v], []).append(v)
    pieces = []
    for q in reversed([v for v in order if v == _TOP or v in cut]):
        classes = owned.get(q, [])
        mine = set(classes)
        reads: dict[int, None] = {}
        for c in classes:
            for i in members[c]:
                for d in problem.node_children[i]:
                    if d not in mine:
                        reads[d] = None
        if q == _TOP:
            for r in problem.roots:
                if r not in mine:
                    reads[r] = None
        pieces.append(
            Piece(
                root=None if q == _TOP else q,
                classes=classes,
                leaves=list(reads),
                nodes=sum(len(members[c]) for c in classes),
            )
        )
    return Decomposition(
        pieces=pieces, trivial={c: members[c][0] for c in trivial}, members=members
    )


def immediate_dominators(succ: dict[int, list[int]], root: int) -> dict[int, int]:
    """Immediate dominator of every vertex reachable from ``root`` (``root`` maps to itself).

    Cooper, Harvey and Kennedy, *A Simple, Fast Dominance Algorithm* (2001): iterate
    ``idom(b) = intersect over the processed predecessors p of b`` in reverse postorder until
    nothing changes, walking up the current tree by postorder number to intersect.

    Args:
        succ: successors of each vertex (a vertex missing from it has none).
        root: the start vertex.

    Example:
        >>> sorted(immediate_dominators({0: [1, 2], 1: [3], 2: [3], 3: [4]}, 0).items())
        [(0, 0), (1, 0), (2, 0), (3, 0), (4, 3)]
    """
    order = _postorder([root], lambda v: succ.get(v, ()))
    post = {v: k for k, v in enumerate(order)}
    preds: dict[int, list[int]] = {v: [] for v in order}
    for v in order:
        for w in succ.get(v, ()):
            preds[w].append(v)
    idom = {root: root}
    changed = True
    while changed:
        changed = False
        for b in reversed(order):
            if b == root:
                continue
            new = -1
            first = True
            for p in preds[b]:
                if p not in idom:
                    continue
                if first:
                    new, first = p, False
                    continue
                a = p
                while a != new:
                    while post[a] < post[new]:
                        a = idom[a]
                    while post[new] < post[a]:
                        new = idom[new]
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    return idom


def piece_problem(
    problem: ExtractionProblem,
    decomposition: Decomposition,
    piece: Piece,
    price: dict[int, float],
) -> tuple[ExtractionProblem, list[int]]:
    """The extraction problem of one piece.

    Its classes are the piece's classes and leaves (renumbered); its nodes the kept nodes
    of the piece's classes plus one childless node per leaf, costing ``price[leaf]`` (0.0
    for a leaf without a price: a trivial class). Its roots: the cut class, or the
    problem's roots for the top piece.

    Returns:
        ``(sub-problem, node map)``: the node map gives each sub-problem node's node in
        ``problem``, or -1 for a leaf node.
    """
    # The piece's classes first, then its leaves; every child is one of them.
    cid = {c: k for k, c in enumerate(_class_order(piece))}
    op: list[str] = []
    eclass: list[int] = []
    children: list[list[int]] = []
    cost: list[float] = []
    origin: list[int] = []
    for c in piece.classes:
        for i in decomposition.members[c]:
            op.append(problem.node_op[i])
            eclass.append(cid[c])
            children.append([cid[d] for d in problem.node_children[i]])
            cost.append(problem.node_cost[i])
            origin.append(i)
    for c in piece.leaves:
        op.append(f"piece:{c}")
        eclass.append(cid[c])
        children.append([])
        cost.append(float(price.get(c, 0.0)))
        origin.append(-1)
    roots = [cid[r] for r in problem.roots] if piece.root is None else [cid[piece.root]]
    sub = ExtractionProblem(
        node_op=op,
        node_eclass=eclass,
        node_children=children,
        node_cost=cost,
        num_classes=len(cid),
        roots=list(dict.fromkeys(roots)),
    )
    return sub, origin


def solve_pieces(
    problem: ExtractionProblem,
    decomposition: Decomposition,
    solve: PieceSolver,
    *,
    deadline: float,
    warm: dict[int, int] | None = None,
    workers: int | None = None,
    path_proof: bool = True,
) -> IlpOutcome:
    """Solves the pieces, several at once, and joins their answers and bounds.

    A child piece whose root class every extraction of its parent piece builds (the
    parent's root cannot be built without it) is priced 0 there: its price is a constant
    the parent's choice does not depend on, so parent and child are solved at the same time and the
    child's cost is added afterwards. A child the parent may leave out is priced at its
    cost, so the parent waits for it (and for the pieces below it).

    Each piece may use twice its fair share of the time left (fair: the time left times
    the pieces that can run beside it, at most ``workers``, in proportion to its kept
    nodes), at least 0.5 s, less a reserve of
    :data:`RESERVE` seconds for each piece with a choice still to come (at most half the
    time left); a piece that finishes early leaves its time to the rest. A piece starts
    from the cheaper of the greedy DAG of its own problem and ``warm`` restricted to it. A
    piece whose classes have one node each has one extraction: it is taken as proved,
    without a solver call; so is a piece whose start meets the piece's critical-path lower
    bound (:func:`tensat_py.extract.bounds.critical_path_bound`) when ``path_proof``; for
    pieces of at most :data:`INLINE_NODES` kept nodes that check runs in the calling thread.

    Args:
        problem: the e-graph.
        decomposition: :func:`decompose`'s answer.
        solve: solves one piece's problem within a time limit (seconds) from a warm start;
            called from several threads at once (HiGHS releases the GIL while it solves).
        deadline: ``time.perf_counter()`` value by which everything ends.
        warm: an acyclic choice of the whole problem (kept nodes only), or ``None``.
        workers: pieces solved at once (default: the CPUs this process may use, at most 4).
        path_proof: try the critical-path bound on each piece before its solver call.

    Returns:
        an :class:`~tensat_py.extract.ilp.IlpOutcome` for the whole problem: the joined
        choice, ``"optimal"`` exactly when the joined bound (module docstring) proves it,
        the pieces' rounds, cuts and seconds (build, solve, simplify) summed; ``stats`` has
        ``pieces``, ``pieces_proved``, ``pieces_path_proved`` (of those, proved by their
        critical-path bound), ``pieces_greedy`` (pieces whose solver gave no answer: they
        keep their warm start), ``largest_piece`` (kept nodes), ``workers`` and the summed
        ``model_vars`` and ``model_rows``, ``search_steps`` and ``search_improvements``
        (restricted ILPs solved and improvements found by the searches beside the pieces'
        solves).
    """
    import heapq
    from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

    from tensat_py.extract.ilp import IlpOutcome, _met

    pieces = decomposition.pieces
    workers = workers or min(4, len(os.sched_getaffinity(0)))
    index = {q.root: k for k, q in enumerate(pieces) if q.root is not None}
    parent = {index[c]: k for k, q in enumerate(pieces) for c in q.leaves if c in index}
    free = [_free_leaves(problem, decomposition, q, index) for q in pieces]
    waits = [
        {index[c] for c in q.leaves if c in index and c not in free[k]}
        for k, q in enumerate(pieces)
    ]
    full_cost: dict[int, float] = {}  # piece -> cost of its sub-DAG, children included
    results: dict[int, _Solved] = {}
    left = sum(max(q.nodes, 1) for q in pieces)
    later = sum(q.has_choice for q in pieces)
    ready = [k for k in range(len(pieces)) if not waits[k]]  # children first: by index
    heapq.heapify(ready)
    running: dict[Future[_Solved], int] = {}

    def done(k: int, solved: _Solved) -> None:
        results[k] = solved
        j: int | None = k
        while j is not None and j not in full_cost and j in results:
            kids = [index[c] for c in pieces[j].leaves if c in index and c in free[j]]
            if any(i not in full_cost for i in kids):
                break
            full_cost[j] = results[j].cost + sum(full_cost[i] for i in kids)
            p = parent.get(j)
            if p is not None and j in waits[p]:
                waits[p].discard(j)
                if not waits[p]:
                    heapq.heappush(ready, p)
            j = p

    with ThreadPoolExecutor(max_workers=workers) as pool:
        while ready or running:
            while ready and len(running) < workers:
                k = heapq.heappop(ready)
                q = pieces[k]
                share = max(q.nodes, 1)
                remaining = max(0.0, deadline - time.perf_counter())
                later -= q.has_choice
                reserve = min(0.5 * remaining, RESERVE * later / workers)
                # Pieces that can run beside this one: at most the workers.
                beside = min(workers, 1 + len(ready) + len(running))
                fair = min(remaining, remaining * beside * share / left)
                limit = min(remaining - reserve, max(2.0 * fair, 0.5))
                left -= share
                args = (problem, decomposition, q, _prices(k, pieces, index, free, full_cost))
                job = (*args, solve, limit, warm, path_proof)
                if not q.has_choice:  # no solver, no thread
                    done(k, _solve_one(*job))
                    continue
                if path_proof and q.nodes <= INLINE_NODES:
                    proved = _solve_one(*args, _no_solver, limit, warm, True)
                    if proved.outcome.status == "optimal":  # the critical-path bound did
                        done(k, proved)
                        continue
                    job = (*args, solve, limit, warm, False)  # checked already
                # copy_context: the worker sees the caller's gap tolerance
                running[pool.submit(contextvars.copy_context().run, _solve_one, *job)] = k
            if running:
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in finished:
                    done(running.pop(fut), fut.result())
    if any(r.choice is None for r in results.values()):
        bad = next(pieces[k].root for k, r in results.items() if r.choice is None)
        return IlpOutcome(None, "none", f"piece at class {bad} has no extraction")
    choice: dict[int, int] = dict(decomposition.trivial)
    for r in results.values():
        choice.update(r.choice or {})
    joined = problem.reachable(choice)
    why = problem.check_choice(joined)
    if why is not None:  # a bug, not an input problem: the caller falls back to greedy
        return IlpOutcome(None, "none", f"joined pieces are not a valid extraction ({why})")
    total = problem.dag_cost(joined)
    bound = max(0.0, _full_bound(pieces, index, free, results, full_cost))
    status = "optimal" if _met(total, bound) else "feasible"
    proved = sum(_met(r.cost, r.bound) for r in results.values())
    out = [r.outcome for r in results.values()]
    n = len(pieces)
    largest = max(q.nodes for q in pieces)
    failed = [o.message for o in out if o.choices is None]
    by_path = sum(o.message == PATH_PROVED for o in out)
    msg = (
        f"{status}: {n} pieces at dominator cuts (largest {largest} nodes, {workers} at once), "
        f"{proved} proved ({by_path} by their critical path), "
        f"{sum(o.rounds for o in out)} solve(s), bound {bound:.6g}"
    )
    searched = sum(o.stats.get("search_steps", 0) > 0 for o in out)
    if searched:
        found = sum(o.stats.get("search_improvements", 0) for o in out)
        msg += f"; the search on {searched} piece(s) improved {found} time(s)"
    if failed:
        msg += f"; {len(failed)} piece(s) kept their greedy DAG (first: {failed[0]})"
    return IlpOutcome(
        joined,
        status,
        msg,
        rounds=sum(o.rounds for o in out),
        cuts=sum(o.cuts for o in out),
        lower_bound=min(bound, total),
        build_seconds=sum(o.build_seconds for o in out),
        solve_seconds=sum(o.solve_seconds for o in out),
        simplify_seconds=sum(o.simplify_seconds for o in out),
        stats={
            "pieces": n,
            "pieces_proved": proved,
            "pieces_path_proved": by_path,
            "pieces_greedy": len(failed),
            "largest_piece": largest,
            "workers": workers,
            "model_vars": sum(o.stats.get("model_vars", 0) for o in out),
            "model_rows": sum(o.stats.get("model_rows", 0) for o in out),
            "search_steps": sum(o.stats.get("search_steps", 0) for o in out),
            "search_improvements": sum(o.stats.get("search_improvements", 0) for o in out),
        },
    )


@dataclass
class _Solved:
    """One piece's answer: its choice (in the whole problem's node ids), its problem's
    cost and proved lower bound, and the solver's outcome."""

    choice: dict[int, int] | None
    cost: float
    bound: float
    outcome: IlpOutcome


def _solve_one(
    problem: ExtractionProblem,
    decomposition: Decomposition,
    piece: Piece,
    price: dict[int, float],
    solve: PieceSolver,
    limit: float,
    warm: dict[int, int] | None,
    path_proof: bool = True,
) -> _Solved:
    """Builds and solves one piece's problem (see :func:`solve_pieces`) within ``limit``
    seconds from now, building included."""
    from tensat_py.extract.greedy import greedy_dag
    from tensat_py.extract.ilp import IlpOutcome

    deadline = time.perf_counter() + limit
    sub, origin = piece_problem(problem, decomposition, piece, price)
    if not piece.has_choice:  # one extraction
        only = sub.reachable({c: k for k, c in enumerate(sub.node_eclass)})
        cost = sub.dag_cost(only)
        out = IlpOutcome(only, "optimal", "one extraction", lower_bound=cost)
        start = None
    else:
        start = _cheaper(sub, greedy_dag(sub), _restrict(sub, origin, problem, warm))
        proof = _path_proof(sub, start) if path_proof else None
        out = proof or solve(sub, max(1e-6, deadline - time.perf_counter()), start)
    best = _cheaper(sub, out.choices, start)
    if best is None:
        return _Solved(None, math.inf, 0.0, out)
    cost = sub.dag_cost(best)
    mine = {origin[k]: None for k in best.values() if origin[k] >= 0}
    return _Solved({problem.node_eclass[i]: i for i in mine}, cost, min(out.lower_bound, cost), out)


def _no_solver(sub: ExtractionProblem, limit: float, start: dict[int, int] | None) -> IlpOutcome:
    """A :data:`PieceSolver` that solves nothing (its answer has no choice)."""
    from tensat_py.extract.ilp import IlpOutcome

    return IlpOutcome(None, "none", "not solved")


def _path_proof(sub: ExtractionProblem, start: dict[int, int] | None) -> IlpOutcome | None:
    """``start`` as a proved answer when its cost meets the piece's critical-path bound
    (:func:`tensat_py.extract.bounds.critical_path_bound`), else None: most small pieces
    (a few alternatives on a chain) are proved this way, without a solver call."""
    from tensat_py.extract.bounds import critical_path_bound, meets
    from tensat_py.extract.ilp import IlpOutcome

    if start is None:
        return None
    bound = critical_path_bound(sub)
    if not meets(sub.dag_cost(start), bound):
        return None
    return IlpOutcome(start, "optimal", PATH_PROVED, lower_bound=bound)


def _free_leaves(
    problem: ExtractionProblem, decomposition: Decomposition, piece: Piece, index: dict[int, int]
) -> set[int]:
    """Child-piece roots that every extraction of ``piece`` builds.

    ``need(c)``, the child roots every derivation of class ``c`` uses, is the greatest
    fixpoint of ``need(c) = ⋂_{node i of c} ⋃_{child e of i} need(e)`` (a child root
    needs itself, a trivial class nothing); the answer is ``need`` of the piece's roots,
    as bitsets over the children, swept in depth-first postorder until stable."""
    from tensat_py.extract.simplify import need_fixpoint

    kids = [c for c in piece.leaves if c in index]
    if not kids:
        return set()
    bit = {c: 1 << k for k, c in enumerate(kids)}
    full = (1 << len(kids)) - 1
    members = decomposition.members
    mine = set(piece.classes)
    need = {c: full for c in piece.classes}
    need.update({c: bit.get(c, 0) for c in piece.leaves})
    roots = [piece.root] if piece.root is not None else list(problem.roots)
    children = problem.node_children
    order = _postorder(
        [r for r in roots if r in mine],
        lambda c: (e for i in members[c] for e in children[i] if e in mine),
    )
    options = {c: [problem.node_children[i] for i in members[c]] for c in order}
    need_fixpoint(order, options, need, full, {})
    got = 0
    for r in roots:
        got |= need[r]
    return {c for c in kids if got & bit[c]}


def _postorder(roots: list[int], successors: Callable[[int], Iterable[int]]) -> list[int]:
    """Vertices reachable from ``roots``, each after its successors (iterative depth-first
    search; on a cycle, in the order the search closes them)."""
    seen: set[int] = set()
    order: list[int] = []
    for r in roots:
        if r in seen:
            continue
        seen.add(r)
        stack = [(r, iter(successors(r)))]
        while stack:
            v, it = stack[-1]
            for w in it:
                if w not in seen:
                    seen.add(w)
                    stack.append((w, iter(successors(w))))
                    break
            else:
                stack.pop()
                order.append(v)
    return order


def _class_order(piece: Piece) -> list[int]:
    """The classes of ``piece``'s problem in :func:`piece_problem`'s numbering."""
    return list(dict.fromkeys([*piece.classes, *piece.leaves]))


def _prices(
    k: int,
    pieces: list[Piece],
    index: dict[int, int],
    free: list[set[int]],
    full_cost: dict[int, float],
) -> dict[int, float]:
    """Leaf prices of piece ``k``'s problem: the full cost of each child it may leave out
    (free children and trivial classes are priced 0)."""
    return {c: full_cost[index[c]] for c in pieces[k].leaves if c in index and c not in free[k]}


def _full_bound(
    pieces: list[Piece],
    index: dict[int, int],
    free: list[set[int]],
    results: dict[int, _Solved],
    full_cost: dict[int, float],
) -> float:
    """Proved lower bound of the whole problem (module docstring): per piece, children
    first, its own bound plus its free children's bounds, less each priced child's slack
    (its price minus its bound)."""
    bound: list[float] = []
    for k, q in enumerate(pieces):
        total = results[k].bound
        for c in q.leaves:
            if c in index:
                j = index[c]
                total += bound[j] if c in free[k] else bound[j] - full_cost[j]
        bound.append(total)
    return bound[-1]


def _restrict(
    sub: ExtractionProblem,
    origin: list[int],
    problem: ExtractionProblem,
    warm: dict[int, int] | None,
) -> dict[int, int] | None:
    """``warm`` as a choice of the piece's problem, or ``None`` when it does not build the
    piece's root from the piece's nodes."""
    if not warm:
        return None
    choice: dict[int, int] = {}
    for k, i in enumerate(origin):
        if i < 0 or warm.get(problem.node_eclass[i]) == i:
            choice[sub.node_eclass[k]] = k
    choice = sub.reachable(choice)
    return choice if sub.check_choice(choice) is None else None


def _cheaper(
    sub: ExtractionProblem, a: dict[int, int] | None, b: dict[int, int] | None
) -> dict[int, int] | None:
    """The cheaper of two choices (either may be missing or empty; ties go to ``a``)."""
    cost = [sub.dag_cost(c) if c else math.inf for c in (a, b)]
    if not math.isfinite(min(cost)):
        return None
    return a if cost[0] <= cost[1] else b


def _trivial(problem: ExtractionProblem, members: dict[int, list[int]]) -> set[int]:
    """Classes with one kept node of cost 0 whose children are all trivial (least fixpoint
    from the childless ones upwards)."""
    single = {c: ns[0] for c, ns in members.items() if len(ns) == 1}
    parents: dict[int, list[int]] = {}
    missing: dict[int, int] = {}
    queue: list[int] = []
    for c, i in single.items():
        if problem.node_cost[i] != 0.0:
            continue
        kids = set(problem.node_children[i])
        missing[c] = len(kids)
        for d in kids:
            parents.setdefault(d, []).append(c)
        if not kids:
            queue.append(c)
    trivial: set[int] = set()
    while queue:
        c = queue.pop()
        trivial.add(c)
        for p in parents.get(c, ()):
            missing[p] -= 1
            if missing[p] == 0:
                queue.append(p)
    return trivial


def _preorder(kids: dict[int, list[int]]) -> tuple[list[int], dict[int, int], dict[int, int]]:
    """Preorder of the dominator tree from the virtual root, with enter/leave numbers
    (``a`` is an ancestor-or-self of ``b`` iff ``enter[a] <= enter[b]`` and
    ``leave[b] <= leave[a]``)."""
    order: list[int] = []
    enter: dict[int, int] = {}
    leave: dict[int, int] = {}
    stack: list[tuple[int, bool]] = [(_TOP, False)]
    while stack:
        v, done = stack.pop()
        if done:
            leave[v] = len(order)
            continue
        enter[v] = len(order)
        order.append(v)
        stack.append((v, True))
        for k in kids.get(v, ()):
            stack.append((k, False))
    return order, enter, leave
