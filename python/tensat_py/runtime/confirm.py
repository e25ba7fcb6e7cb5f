"""Confirming a predicted gain on onnxruntime: the input and the candidate timed side by
side before the optimiser keeps the candidate.

A cost model that measures operators one at a time (``profile``, and ``learned``, trained
on those figures) cannot see what onnxruntime's graph optimisations do across operators:
they fuse a scale into a MatMul (``FusedMatMul``), an activation or a sum into a
convolution, recognise GELU and LayerNorm patterns, and keep convolutions in a blocked
layout that a ``Split`` interrupts. A rewrite can therefore look cheaper per operator and
run slower whole (``bench/cost_validation.md``: two OCR models predicted 2-4 % faster,
measured about 18 % slower). So, as autotuners confirm candidates by running them (TVM,
Chen et al., OSDI 2018), :func:`measured_speedup` runs both programs on onnxruntime (CPU,
``ORT_ENABLE_ALL``, spinning off) on the same inputs and weights, in rotating rounds
(:func:`tensat_py.runtime.timing.rotating`), and returns the median of the per-round
ratios.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from tensat_py.graph import Graph
from tensat_py.runtime import ort_exec, timing

__all__ = ["Confirmation", "measured_speedup"]


@dataclass(frozen=True)
class Confirmation:
    """Both programs timed on onnxruntime.

    Attributes:
        speedup: input latency / candidate latency (median of per-round ratios; above 1:
            the candidate is faster).
        rounds: timed rounds.
        input_ms, candidate_ms: median latencies, milliseconds.
        seconds: wall-clock seconds spent (sessions, warm-up and rounds).
    """

    speedup: float
    rounds: int
    input_ms: float
    candidate_ms: float
    seconds: float


def measured_speedup(
    graph: Graph,
    candidate: Graph,
    *,
    budget: float = 10.0,
    min_rounds: int = 5,
    max_rounds: int = 30,
    threads: int = 0,
    seed: int = 0,
) -> Confirmation:
    """Times ``graph`` and ``candidate`` side by side on onnxruntime.

    Args:
        graph: the input program.
        candidate: the optimised program (same inputs and weights).
        budget: seconds for the timed rounds (their number is estimated from one warm-up
            run of each, between ``min_rounds`` and ``max_rounds``).
        min_rounds, max_rounds: bounds on the timed rounds.
        threads: intra-op threads (0: onnxruntime's default).
        seed: the random inputs' and weights' seed (:func:`ort_exec.feeds`).

    Returns:
        a :class:`Confirmation`.

    Raises:
        ValueError: a program that cannot be exported to ONNX or run (names the cause),
            or ``min_rounds < 1`` or ``max_rounds < min_rounds``.
    """
    if min_rounds < 1 or max_rounds < min_rounds:
        raise ValueError(
            f"measured_speedup: need 1 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}"
        )
    t0 = time.perf_counter()
    feeds = ort_exec.feeds(graph, seed=seed)
    a, fa = ort_exec.prepare(graph, feeds, threads=threads, spinning=False)
    b, fb = ort_exec.prepare(candidate, feeds, source=graph, threads=threads, spinning=False)
    calls = [lambda: a.run(None, fa), lambda: b.run(None, fb)]
    warm = timing.rotating(calls, rounds=1, warmup=1)
    per_round = max(warm[0][0] + warm[1][0], 1e-6)
    rounds = max(min_rounds, min(max_rounds, int(budget / per_round)))
    times = timing.rotating(calls, rounds=rounds, warmup=0)
    return Confirmation(
        speedup=timing.paired_ratio(times[1], times[0]),
        rounds=rounds,
        input_ms=statistics.median(times[0]) * 1e3,
        candidate_ms=statistics.median(times[1]) * 1e3,
        seconds=time.perf_counter() - t0,
    )
