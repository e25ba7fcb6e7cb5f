"""Shared by the extraction tests: small e-graphs written as (class, child classes, cost)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

from tensat_py.egraph import ExtractionProblem


def make(
    nodes: list[tuple[int, list[int], float]], roots: list[int], forbidden: Iterable[int] = ()
) -> ExtractionProblem:
    """An extraction problem; node ``i`` is ``nodes[i] = (class, child classes, cost)``."""
    return ExtractionProblem(
        node_op=[f"n{i}" for i in range(len(nodes))],
        node_eclass=[n[0] for n in nodes],
        node_children=[list(n[1]) for n in nodes],
        node_cost=[float(n[2]) for n in nodes],
        num_classes=1 + max(n[0] for n in nodes),
        roots=roots,
        forbidden=set(forbidden),
    )


def brute_force(p: ExtractionProblem) -> float:
    """Least DAG cost over every choice function of allowed nodes (tiny problems only)."""
    forbidden = p.forbidden_mask()
    options = [[i for i in nodes if not forbidden[i]] or [None] for nodes in p.class_nodes()]
    best = math.inf
    for combo in itertools.product(*options):
        choices = {c: n for c, n in enumerate(combo) if n is not None}
        if p.check_choice(choices) is None:
            best = min(best, p.dag_cost(choices))
    return best
