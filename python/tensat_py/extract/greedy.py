"""Greedy extraction: tree cost (egg's extractor) and DAG cost (extraction-gym's greedy-dag).

Both run in Rust (``tensat_py._core.greedy_tree`` / ``greedy_dag``, from
``rust/src/extract.rs``). When the native module lacks them (an old or partial build), the
same algorithms run here in Python, with the same tie-breaking, so results agree.
"""

from __future__ import annotations

import math
from collections import deque

from tensat_py.egraph import ExtractionProblem

__all__ = ["greedy_tree", "greedy_dag", "native_available"]


def _native():
    try:
        from tensat_py import _core
    except ImportError:
        return None
    if hasattr(_core, "greedy_tree") and hasattr(_core, "greedy_dag"):
        return _core
    return None


def native_available() -> bool:
    """Whether the Rust greedy extractors are compiled into ``tensat_py._core``."""
    return _native() is not None


def _to_choices(raw: list[int | None]) -> dict[int, int]:
    return {c: n for c, n in enumerate(raw) if n is not None and n >= 0}


def greedy_tree(problem: ExtractionProblem, *, native: bool | None = None) -> dict[int, int]:
    """Greedy tree extraction: per class, the node minimising cost + child class costs.

    Args:
        problem: the e-graph.
        native: force the Rust (``True``) or Python (``False``) implementation; ``None``
            uses Rust when available.

    Returns:
        class -> node for exactly the classes reachable from the roots; empty when a root
        cannot be built from allowed nodes.

    Raises:
        ValueError: on a malformed problem.
    """
    return _run(problem, "greedy_tree", native)


def greedy_dag(problem: ExtractionProblem, *, native: bool | None = None) -> dict[int, int]:
    """Greedy DAG extraction: each class's cost is the summed cost of its sub-DAG's nodes.

    Never costlier (as a DAG) than :func:`greedy_tree`; always acyclic.

    Args:
        problem: the e-graph.
        native: as in :func:`greedy_tree`.

    Returns:
        class -> node for exactly the classes reachable from the roots; empty when a root
        cannot be built.

    Raises:
        ValueError: on a malformed problem.
    """
    return _run(problem, "greedy_dag", native)


def _run(problem: ExtractionProblem, name: str, native: bool | None) -> dict[int, int]:
    problem.validate()
    core = _native()
    if native is True and core is None:
        raise RuntimeError(f"tensat_py._core.{name} is not available in this build")
    args = (
        problem.node_eclass,
        problem.node_children,
        [float(c) for c in problem.node_cost],
        problem.num_classes,
        problem.roots,
        problem.forbidden_mask(),
    )
    if core is not None and native is not False:
        return _to_choices(getattr(core, name)(*args))
    return _to_choices(_PY[name](*args))


# ---- pure-Python mirror of rust/src/extract.rs -------------------------------------------


def _parents(eclass: list[int], children: list[list[int]], num_classes: int) -> list[list[int]]:
    par: list[list[int]] = [[] for _ in range(num_classes)]
    for i, ch in enumerate(children):
        for c in ch:
            if not par[c] or par[c][-1] != i:
                par[c].append(i)
    return par


def _restrict(children: list[list[int]], roots: list[int], best: list[int | None]) -> list:
    if any(best[r] is None for r in roots):
        return [None] * len(best)
    out: list[int | None] = [None] * len(best)
    seen = [False] * len(best)
    stack = list(roots)
    while stack:
        c = stack.pop()
        if seen[c]:
            continue
        seen[c] = True
        n = best[c]
        if n is not None:
            out[c] = n
            stack.extend(children[n])
    return out


def _py_greedy_tree(eclass, children, cost, num_classes, roots, forbidden):
    n = len(eclass)
    par = _parents(eclass, children, num_classes)
    ccost = [math.inf] * num_classes
    best: list[int | None] = [None] * num_classes
    queued = [True] * n
    work = deque(range(n))
    while work:
        i = work.popleft()
        queued[i] = False
        if forbidden[i]:
            continue
        c = cost[i]
        for d in children[i]:
            c += ccost[d]
        k = eclass[i]
        if c < ccost[k]:
            ccost[k] = c
            best[k] = i
            for j in par[k]:
                if not queued[j]:
                    queued[j] = True
                    work.append(j)
    return _restrict(children, roots, best)


def _dag_cost(children, cost, roots, choice) -> float:
    seen = set()
    stack = list(roots)
    total = 0.0
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        n = choice[c]
        if n is None:
            return math.inf
        total += cost[n]
        stack.extend(children[n])
    return total


def _acyclic(eclass, children, roots, forbidden, choice) -> bool:
    p = ExtractionProblem(
        node_op=[""] * len(eclass),
        node_eclass=eclass,
        node_children=children,
        node_cost=[0.0] * len(eclass),
        num_classes=len(choice),
        roots=roots,
        forbidden=forbidden,
    )
    return p.check_choice(_to_choices(choice)) is None


def _py_greedy_dag(eclass, children, cost, num_classes, roots, forbidden):
    n = len(eclass)
    par = _parents(eclass, children, num_classes)
    sets: list[tuple[list[tuple[int, int]], float] | None] = [None] * num_classes
    best: list[int | None] = [None] * num_classes
    queued = [True] * n
    work = deque(range(n))
    while work:
        i = work.popleft()
        queued[i] = False
        if forbidden[i]:
            continue
        k = eclass[i]
        ch = children[i]
        if any(sets[d] is None or d == k for d in ch):
            continue
        merged: dict[int, int] = {}
        for d in ch:
            for cl, node in sets[d][0]:  # type: ignore[index]
                prev = merged.get(cl)
                if prev is None or node < prev:
                    merged[cl] = node
        if k in merged:
            continue
        merged[k] = i
        items = sorted(merged.items())
        total = sum(cost[j] for _, j in items)
        cur = sets[k]
        if cur is None or total < cur[1]:
            sets[k] = (items, total)
            best[k] = i
            for j in par[k]:
                if not queued[j]:
                    queued[j] = True
                    work.append(j)
    dag = _restrict(children, roots, best)
    tree = _py_greedy_tree(eclass, children, cost, num_classes, roots, forbidden)
    if all(x is None for x in dag):
        return tree
    if not _acyclic(eclass, children, roots, forbidden, dag) or _dag_cost(
        children, cost, roots, dag
    ) > _dag_cost(children, cost, roots, tree):
        return tree
    return dag


_PY = {"greedy_tree": _py_greedy_tree, "greedy_dag": _py_greedy_dag}
