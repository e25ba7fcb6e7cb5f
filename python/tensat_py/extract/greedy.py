"""Greedy extraction: tree cost (egg's extractor), DAG cost (extraction-gym's greedy-dag) and
a beam over DAG costs (extraction-gym's beam idea).

All run in Rust (``tensat_py._core.greedy_tree`` / ``greedy_dag`` / ``beam_dag``, from
``rust/src/extract.rs``); this module only converts an :class:`ExtractionProblem` to their
flat arguments and their answer back to a choice.
"""

from __future__ import annotations

from collections.abc import Callable

from tensat_py import _core
from tensat_py.egraph import ExtractionProblem

__all__ = ["greedy_tree", "greedy_dag", "beam_dag"]


def _to_choices(raw: list[int | None]) -> dict[int, int]:
    return {c: n for c, n in enumerate(raw) if n is not None and n >= 0}


def greedy_tree(problem: ExtractionProblem) -> dict[int, int]:
    """Greedy tree extraction: per class, the node minimising cost + child class costs.

    Args:
        problem: the e-graph.

    Returns:
        class -> node for exactly the classes reachable from the roots; empty when a root
        cannot be built from allowed nodes.

    Raises:
        ValueError: on a malformed problem.
    """
    return _run(problem, _core.greedy_tree)


def greedy_dag(problem: ExtractionProblem) -> dict[int, int]:
    """Greedy DAG extraction: each class's cost is the summed cost of its sub-DAG's nodes.

    Never costlier (as a DAG) than :func:`greedy_tree`; always acyclic.

    Args:
        problem: the e-graph.

    Returns:
        class -> node for exactly the classes reachable from the roots; empty when a root
        cannot be built.

    Raises:
        ValueError: on a malformed problem.
    """
    return _run(problem, _core.greedy_dag)


def beam_dag(problem: ExtractionProblem, width: int = 4) -> dict[int, int]:
    """Beam DAG extraction: each class keeps the ``width`` cheapest sub-DAGs found.

    Never costlier (as a DAG) than :func:`greedy_dag` (it is compared with it); always
    acyclic. ``width=1`` is greedy DAG.

    Args:
        problem: the e-graph.
        width: partial solutions kept per class (at least 1).

    Returns:
        class -> node for exactly the classes reachable from the roots; empty when a root
        cannot be built.

    Raises:
        ValueError: on a malformed problem or ``width < 1``.
    """
    if width < 1:
        raise ValueError(f"beam width must be at least 1, got {width}")
    return _run(problem, lambda *args: _core.beam_dag(*args, width))


def _run(problem: ExtractionProblem, fn: Callable[..., list[int]]) -> dict[int, int]:
    problem.validate()
    return _to_choices(
        fn(
            problem.node_eclass,
            problem.node_children,
            [float(c) for c in problem.node_cost],
            problem.num_classes,
            problem.roots,
            problem.forbidden_mask(),
        )
    )
