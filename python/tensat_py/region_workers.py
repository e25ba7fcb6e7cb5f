"""Regions explored and extracted in parallel: local worker processes, or Ray tasks.

The classes of a program's regions (:mod:`tensat_py.regions`) are independent work items:
each is a small program explored and extracted on its own. With ``optimize(jobs=N)`` they
run on ``N`` local processes (``concurrent.futures``, started with ``spawn``: the parent
holds solver and XLA threads that a fork would copy mid-flight); with
``optimize(ray="ADDRESS")`` as tasks of a Ray cluster (``"local"`` starts one on this
machine), for programs that outgrow one machine. A job carries what a worker needs and
nothing of the input's source model: the region's nodes and outputs, its opaque payloads,
the rules and the cost model *by name*, the limits and its seconds. A run whose rules, cost
model or policy are Python objects (which need not cross a process boundary) explores its
regions in the calling process.

>>> from tensat_py.builder import GraphBuilder
>>> b = GraphBuilder()
>>> x = b.input((4, 8), name="x")
>>> g = b.finish([b.relu(b.matmul(x, b.weight((8, 8), name="w")))])
>>> job = RegionJob.of(g, rules="taso", cost_model="roofline", device="t4", seconds=5.0,
...                    limits=_limits(), mirror_once=True)
>>> solve_region(job).candidate().operator_counts()
{'matmul': 1}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tensat_py.graph import OPAQUE, Graph, Node

__all__ = ["RegionJob", "RegionResult", "solve_region", "solve_all"]


@dataclass(frozen=True)
class RegionJob:
    """One region class to explore and extract elsewhere (picklable).

    Attributes:
        nodes, outputs: the region's program (:meth:`Graph.from_nodes` rebuilds it).
        meta: its opaque payloads (``{"opaque": ...}``) and front-end name, nothing else.
        rules: rule file names or paths (as :func:`tensat_py.pipeline.load_rules` takes).
        cost_model, device: the cost model by name (:func:`tensat_py.cost.get_cost_model`).
        limits: exploration and extraction options (:class:`tensat_py.phases.Limits`).
        seconds: the job's wall-clock budget.
        mirror_once, merge_trees: see :func:`tensat_py.optimize`.
    """

    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]
    meta: dict[str, Any]
    rules: Any
    cost_model: str
    device: str
    limits: Any
    seconds: float
    mirror_once: bool
    merge_trees: bool = True

    @classmethod
    def of(cls, graph: Graph, **kw: Any) -> RegionJob:
        """The job for ``graph``: its nodes, outputs and the payloads of its opaque nodes."""
        opaque = graph.meta.get("opaque", {})
        used = {graph.opaque_key(i) for i, n in enumerate(graph.nodes) if n.op == OPAQUE}
        meta: dict[str, Any] = {k: v for k, v in opaque.items() if k in used}
        out = {"opaque": meta} if meta else {}
        if "frontend" in graph.meta:
            out["frontend"] = graph.meta["frontend"]
        return cls(tuple(graph.nodes), tuple(graph.outputs), out, **kw)


@dataclass(frozen=True)
class RegionResult:
    """What a worker sends back: the extracted program (nodes and outputs, rebuilt by
    :meth:`candidate`), its cost, the exploration statistics, the extraction result and the
    two phase limits it ran under."""

    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]
    cost: float
    stats: dict[str, Any]
    extraction: Any
    explore_limit: float
    extract_limit: float

    def candidate(self, meta: dict[str, Any] | None = None) -> Graph:
        """The extracted program as a :class:`Graph` with ``meta`` (the region's own:
        the opaque payloads its nodes name)."""
        return Graph.from_nodes(self.nodes, self.outputs, meta)


def solve_region(job: RegionJob) -> RegionResult:
    """Explores and extracts ``job``'s program (in this process: the worker's entry point).

    Raises:
        ValueError: a rule file, cost model or program that does not load.
    """
    from tensat_py import phases
    from tensat_py.budget import Budget
    from tensat_py.cost import get_cost_model
    from tensat_py.progress import PhaseDisplay
    from tensat_py.rule_files import load_rules

    graph = Graph.from_nodes(job.nodes, job.outputs, job.meta)
    model = get_cost_model(job.cost_model, job.device)
    budget = Budget(job.seconds)
    run = phases.Run(
        graph=graph,
        budget=budget,
        display=PhaseDisplay(False),
        limits=job.limits,
        ruleset=load_rules(job.rules),
        model=model,
        gain_floor=0.0,
        cost_before=math.nan,
        mirror_once=job.mirror_once,
        merge_trees=job.merge_trees,
        device=job.device,
        verify=False,
    )
    piece = phases._explore_extract(run, graph, budget.deadline)
    cand = piece.candidate
    return RegionResult(
        tuple(cand.nodes),
        tuple(cand.outputs),
        piece.cost,
        piece.stats,
        piece.extraction,
        piece.explore_limit,
        piece.extract_limit,
    )


def solve_all(
    jobs: Sequence[RegionJob], *, workers: int = 1, ray: str | None = None
) -> list[RegionResult]:
    """Solves ``jobs`` on ``workers`` local processes, or as Ray tasks on the cluster at
    ``ray`` (``"local"``: start one here), results in job order.

    Raises:
        ImportError: ``ray`` given and Ray is not installed (``pip install "tensat-py[ray]"``).
        ValueError: a worker's error, re-raised here.
    """
    if ray is not None:
        return _solve_ray(jobs, ray, workers)
    if workers <= 1 or len(jobs) <= 1:
        return [solve_region(j) for j in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
        return list(pool.map(solve_region, jobs))


def _solve_ray(jobs: Sequence[RegionJob], address: str, workers: int) -> list[RegionResult]:
    try:
        import ray
    except ImportError:
        raise ImportError(
            "ray: Ray is not installed; pip install 'tensat-py[ray]' or drop --ray"
        ) from None
    started = not ray.is_initialized()
    if started:
        if address == "local":
            ray.init(num_cpus=max(workers, 1), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        remote = ray.remote(solve_region)
        return list(ray.get([remote.remote(j) for j in jobs]))
    finally:
        if started:
            ray.shutdown()


def _limits() -> Any:
    """Default limits (for the doctest)."""
    from tensat_py.phases import Limits

    return Limits(1, None, 15, "efficient", "ilp", "highs", "real")
