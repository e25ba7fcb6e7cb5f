"""Confirming a predicted gain on a runtime: the input and the candidate timed side by side
before the optimiser keeps the candidate.

A cost model that measures operators one at a time (``profile``, and ``learned``, trained
on those figures) cannot see what onnxruntime's graph optimisations do across operators:
they fuse a scale into a MatMul (``FusedMatMul``), an activation or a sum into a
convolution, recognise GELU and LayerNorm patterns, and keep convolutions in a blocked
layout that a ``Split`` interrupts. A rewrite can therefore look cheaper per operator and
run slower whole (``bench/cost_validation.md``: two OCR models predicted 2-4 % faster,
measured about 18 % slower); XLA fuses elementwise chains into its loops likewise. So, as
autotuners confirm candidates by running them (TVM, Chen et al., OSDI 2018),
:func:`measured_speedup` runs both programs on the runtime the input came for
(:mod:`tensat_py.runtime.protocol`: onnxruntime on the CPU for ONNX and built graphs, XLA
on the CPU for HLO) on the same inputs and weights, in rotating rounds
(:func:`tensat_py.runtime.timing.rotating`), and returns the median of the per-round
ratios; where the programs run for less than
:data:`~tensat_py.runtime.timing.LEAD_IN_SECONDS`, each timed run comes right after an
untimed run of the same program, so that a small candidate is not timed in the caches a
large input leaves (:func:`tensat_py.runtime.timing.side_by_side`). A second copy of the
input, prepared apart and timed in the same rounds (the *A/A*), says how far two runs of
one program differ there: its ratio and a confidence interval for it
(:func:`tensat_py.runtime.timing.median_interval`) are the noise a speedup is read
against.

On XLA (:class:`~tensat_py.runtime.protocol.XlaCpu`) every program is timed with its
weight-only operators pre-computed (:func:`tensat_py.runtime.xla_exec.freeze_weights`),
as a user of XLA with fixed weights runs it: a candidate that merges two dots over the
concatenation of their weights is timed with that concatenation made once, not per run.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensat_py.graph import Graph
from tensat_py.runtime import timing
from tensat_py.runtime.protocol import Runtime, XlaCpu, runtime_for

__all__ = ["MAX_ROUNDS", "Confirmation", "measured_speedup"]

#: Most timed rounds of a confirmation (:func:`measured_speedup`'s ``max_rounds``); the
#: budget bounds them first for programs that run long. Until 2026-11-28 it was 30: the
#: 95 % interval of 30 per-round ratios of a millisecond program was too wide to clear 1
#: on a 2-core AMD EPYC virtual machine. The example of docs/jax.md (jax_lora_dense,
#: ``time_limit=30``), optimised five times with each bound: at 30 rounds the candidate
#: was kept 3 times of 5 (measured 1.14-1.58x, the lower ends of the intervals
#: 0.92-1.26, A/A 0.96-1.15), at 200 rounds 5 of 5 (1.27-1.36x, lower ends 1.23-1.32,
#: A/A 0.985-1.027), confirmation taking 1.2-1.6 s against 0.4 s.
MAX_ROUNDS = 200


@dataclass(frozen=True)
class Confirmation:
    """The programs timed on a runtime.

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
        runtime: the runtime that timed them (:attr:`Runtime.name
            <tensat_py.runtime.protocol.Runtime.name>`: ``"onnxruntime-cpu"``, ``"xla-cpu"``).
        runtime_version: the library that ran them and its version (``"jaxlib 0.10.2"``).
        aa: the A/A ratio: input latency / latency of a second copy of the input prepared
            apart (median of per-round ratios; 1.0 when two runs of one program time
            alike); NaN when not timed.
        aa_interval: a 95 % confidence interval for ``aa``
            (:func:`~tensat_py.runtime.timing.median_interval` of the per-round ratios): the
            timing noise on this machine; NaNs when not timed.
        speedup_interval: the same interval for the candidate's ratio to the input (NaNs
            when no candidate was timed).
    """

    speedup: float
    rounds: int
    input_ms: float
    candidate_ms: float
    seconds: float
    source_ms: float = math.nan
    source_gain: float = math.nan
    runtime: str = "onnxruntime-cpu"
    runtime_version: str = ""
    aa: float = math.nan
    aa_interval: tuple[float, float] = (math.nan, math.nan)
    speedup_interval: tuple[float, float] = (math.nan, math.nan)

    @property
    def label(self) -> str:
        """``"xla-cpu (jaxlib 0.10.2)"``: the runtime and its version, for messages."""
        return f"{self.runtime} ({self.runtime_version})" if self.runtime_version else self.runtime


def measured_speedup(
    graph: Graph,
    candidate: Graph | None,
    *,
    runtime: Runtime | None = None,
    budget: float = 10.0,
    min_rounds: int = 5,
    max_rounds: int = MAX_ROUNDS,
    threads: int = 0,
    seed: int = 0,
) -> Confirmation:
    """Times ``graph``, a second copy of it (the A/A), ``candidate`` and, where the runtime
    has one, the program ``graph`` was loaded from (the ONNX model as given) side by side.

    Args:
        graph: the input program.
        candidate: the optimised program (same inputs and weights), or None to time the
            input against its copy and its source model only.
        runtime: the runtime to time them on (:mod:`tensat_py.runtime.protocol`); default
            :func:`~tensat_py.runtime.protocol.runtime_for` ``graph``: XLA on the CPU for
            HLO input, onnxruntime on the CPU otherwise.
        budget: seconds for the whole measurement, sessions or compilation and warm-up
            included (the number of timed rounds is estimated from one warm-up run of
            each, between ``min_rounds`` and ``max_rounds``: at least ``min_rounds`` run
            even where they overrun it).
        min_rounds, max_rounds: bounds on the timed rounds (default 5 and
            :data:`MAX_ROUNDS`).
        threads: intra-op threads of the default onnxruntime runtime (0: its default).
        seed: the random inputs' and weights' seed (:meth:`Runtime.inputs
            <tensat_py.runtime.protocol.Runtime.inputs>`).

    Returns:
        a :class:`Confirmation` naming the runtime.

    Raises:
        ValueError: a program that the runtime cannot load, compile or run (names the
            cause), or ``min_rounds < 1`` or ``max_rounds < min_rounds``.
    """
    if min_rounds < 1 or max_rounds < min_rounds:
        raise ValueError(
            f"measured_speedup: need 1 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}"
        )
    if runtime is None:
        runtime = runtime_for(graph)
        if threads and hasattr(runtime, "threads"):
            runtime.threads = threads
    t0 = time.perf_counter()
    inputs = runtime.inputs(graph, seed)
    # The input, its copy (the A/A control), the candidate, the source model.
    calls = [_prepare(runtime, graph, inputs, graph) for _ in range(2)]
    if candidate is not None:
        calls.append(_prepare(runtime, candidate, inputs, graph))
    source = runtime.prepare_source(graph, inputs)
    if source is not None:
        calls.append(source)
    left = budget - (time.perf_counter() - t0)  # loading counts too
    times, _ = timing.side_by_side(calls, left, min_rounds, max_rounds, clock=runtime.clock)
    rounds = len(times[0])
    nan = math.nan
    cand = times[2] if candidate is not None else None
    src = times[-1] if source is not None else None
    speedup, speedup_interval = nan, (nan, nan)
    if cand is not None:
        ratios = timing.paired_ratios(cand, times[0])
        speedup, speedup_interval = statistics.median(ratios), timing.median_interval(ratios)
    if cand is not None and src is not None:
        speedup = min(speedup, timing.paired_ratio(cand, src))
    aa_ratios = timing.paired_ratios(times[1], times[0])
    return Confirmation(
        speedup=speedup,
        rounds=rounds,
        input_ms=statistics.median(times[0]) * 1e3,
        candidate_ms=statistics.median(cand) * 1e3 if cand is not None else nan,
        seconds=time.perf_counter() - t0,
        source_ms=statistics.median(src) * 1e3 if src is not None else nan,
        source_gain=timing.paired_ratio(src, times[0]) if src is not None else nan,
        runtime=runtime.name,
        runtime_version=runtime.version,
        aa=statistics.median(aa_ratios),
        aa_interval=timing.median_interval(aa_ratios),
        speedup_interval=speedup_interval,
    )


def _prepare(runtime: Runtime, program: Graph, inputs: Any, source: Graph) -> Callable[[], object]:
    """``runtime.prepare(program, inputs, source=source)``; on XLA, ``program`` with its
    weight-only operators pre-computed (:func:`tensat_py.runtime.xla_exec.freeze_weights`)
    on the values ``inputs`` gives its entry parameters (in the order of ``source``'s,
    :func:`tensat_py.frontends.hlo.entry_leaves`), and its own arguments drawn from them
    by name.

    Raises:
        ValueError: the runtime cannot run the program, or a frozen value cannot be
            computed.
    """
    if not isinstance(runtime, XlaCpu):
        return runtime.prepare(program, inputs, source=source)
    import copy

    from tensat_py.frontends.hlo import entry_leaves
    from tensat_py.runtime.xla_exec import freeze_weights

    if "hlo" not in program.meta and "hlo" in source.meta:  # the source's module frame
        program = copy.copy(program)
        program.meta = {**program.meta, "hlo": source.meta["hlo"]}
    feeds = dict(zip(entry_leaves(source), inputs, strict=True))
    frozen, values = freeze_weights(program, feeds)
    if frozen is program:
        return runtime.prepare(program, inputs, source=source)
    return runtime.prepare(frozen, [values[n] for n in entry_leaves(frozen)], source=source)
