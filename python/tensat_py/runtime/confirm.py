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

import math
import statistics
import time
from dataclasses import dataclass

from tensat_py.graph import Graph
from tensat_py.runtime import ort_exec, timing

__all__ = ["Confirmation", "measured_speedup"]


@dataclass(frozen=True)
class Confirmation:
    """The programs timed on onnxruntime.

    Attributes:
        speedup: reference latency / candidate latency (median of per-round ratios; above
            1: the candidate is faster), the reference being the input as exported and,
            when it was timed, the source model too (the smaller of the two ratios); NaN
            when no candidate was timed.
        rounds: timed rounds.
        input_ms, candidate_ms: median latencies, milliseconds (candidate NaN when none).
        seconds: wall-clock seconds spent (sessions, warm-up and rounds).
        source_ms: median latency of the model the input was loaded from, as it was given
            (:func:`tensat_py.frontends.onnx.exporter.source_model`); NaN when not timed
            (:func:`~tensat_py.runtime.ort_exec.source_session` found none to run).
        source_gain: input-as-exported latency / source-model latency (median of per-round
            ratios; above 1: the source model as given runs faster than the export of the
            unchanged program, e.g. onnxruntime fuses it differently once shapes are
            static); NaN when not timed.
    """

    speedup: float
    rounds: int
    input_ms: float
    candidate_ms: float
    seconds: float
    source_ms: float = math.nan
    source_gain: float = math.nan


def measured_speedup(
    graph: Graph,
    candidate: Graph | None,
    *,
    budget: float = 10.0,
    min_rounds: int = 5,
    max_rounds: int = 30,
    threads: int = 0,
    seed: int = 0,
) -> Confirmation:
    """Times ``graph``, ``candidate`` and the model ``graph`` was loaded from side by side
    on onnxruntime.

    Args:
        graph: the input program.
        candidate: the optimised program (same inputs and weights), or None to time the
            input's export against its source model only.
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
    sessions = [ort_exec.prepare(graph, feeds, threads=threads, spinning=False)]
    if candidate is not None:
        sessions.append(
            ort_exec.prepare(candidate, feeds, source=graph, threads=threads, spinning=False)
        )
    source = ort_exec.source_session(graph, feeds, threads=threads, spinning=False)
    if source is not None:
        sessions.append(source)
    calls = [lambda s=s, f=f: s.run(None, f) for s, f in sessions]
    warm = timing.rotating(calls, rounds=1, warmup=1)
    per_round = max(sum(t[0] for t in warm), 1e-6)
    rounds = max(min_rounds, min(max_rounds, int(budget / per_round)))
    times = timing.rotating(calls, rounds=rounds, warmup=0)
    nan = math.nan
    cand = times[1] if candidate is not None else None
    src = times[-1] if source is not None else None
    speedup = timing.paired_ratio(cand, times[0]) if cand is not None else nan
    if cand is not None and src is not None:
        speedup = min(speedup, timing.paired_ratio(cand, src))
    return Confirmation(
        speedup=speedup,
        rounds=rounds,
        input_ms=statistics.median(times[0]) * 1e3,
        candidate_ms=statistics.median(cand) * 1e3 if cand is not None else nan,
        seconds=time.perf_counter() - t0,
        source_ms=statistics.median(src) * 1e3 if src is not None else nan,
        source_gain=timing.paired_ratio(src, times[0]) if src is not None else nan,
    )
