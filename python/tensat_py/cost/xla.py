"""The ``xla`` cost model: a program priced as XLA's CPU backend runs it.

XLA does not run a program operator by operator. Its fusion passes
(https://openxla.org/xla/ : operation semantics, and the CPU backend's instruction
fusion) merge chains of elementwise operators, broadcasts, reshapes, transposes, slices
and the producers of a reduction into one *loop fusion*: one loop over the output that
reads its operands from memory once and writes its result once. Dots and convolutions
are not fused into loops; they are library calls whose operands and result live in
memory (this jaxlib's optimised modules often hold a dot in a ``kCustom`` "ynn" fusion
with its neighbouring elementwise work). The price of a chain of elementwise operators
is therefore one pass over its data plus each operator's arithmetic, not one pass per
operator; "Mind the Abstraction Gap" (OOPSLA 2025) makes the case that a
superoptimiser's cost model must price the program the compiler will actually run.
Everything here is measured on this machine through jaxlib
(:mod:`tensat_py.runtime.xla_exec` compiles the HLO text with XLA's full CPU pipeline).

Extraction adds per-e-node costs (the ILP is additive), so the model is written per
operator application (:class:`~tensat_py.cost.base.CostContext`), reading the operator's
declared :attr:`~tensat_py.ops.OpDef.fusion` and its operands' producers:

* ``library`` operators (``dot_general``, ``convolution``, and TASO's ``matmul`` and
  ``conv2d``, which lower to them) and ``none`` operators (a kernel of their own:
  ``gather``, ``resize``, ...) cost what a one-operator HLO module of their signature
  (operator, parameters, operand and output types) takes, less the call overhead of an
  empty module (:data:`OVERHEAD_SIGNATURE`). A TASO activation carried in ``act`` is a
  loop fusion of its own after the library call: its arithmetic, one pass over the
  output, one kernel dispatch.
* ``elementwise`` operators cost their arithmetic: ``n_out x c(kernel, dtype)``, where
  ``c`` is the seconds per element measured once per kernel and dtype *inside a fused
  chain*: a module of 1 and of ``1 + chain`` copies of the operator over ``elements``
  elements, the slope in the copy count (a unary operator is chained as ``op(y) + s``,
  less the slope of ``add``). ``ewadd`` and ``add`` share a kernel (``OpDef.kernel``),
  so they share ``c``.
* ``broadcast`` and ``reshape`` operators (index arithmetic inside a fusion) cost
  ``n_out x c(add, dtype)``; TASO's ``reshape`` and ``split`` launch nothing and cost 0.
* ``reduce`` operators (a loop fusion root: its producers fuse in, its output is
  written) cost the reducer's arithmetic per element read, plus the write of their output
  and one kernel dispatch; ``softmax`` and ``layer_norm`` (three fusions in XLA: two
  reductions and the normalisation) read their input three times.
* **The memory pass** of a fusion region is charged at its *entry*: a fusible operator
  one of whose non-constant operands, as large as its output, is *materialised* (a
  program input, or the output of a library, ``none`` or ``reduce`` operator, read from
  memory; in an e-graph, any such producer in the operand's class counts) pays the read
  of its materialised operands (weights and smaller operands, broadcast into the region,
  included), the write of its own output (for a broadcast: nothing, its output is never
  written) and one kernel dispatch. A pass of ``B`` bytes costs what a one-``add`` fusion moving
  ``B`` bytes takes (measured per power-of-two size, interpolated between, less the call
  overhead: :meth:`XlaCostModel.pass_seconds`); the dispatch is the slope of a chain of
  one-element reductions (:data:`DISPATCH_SIGNATURE`).

Approximations (per-node additivity forbids better): a region is charged one write per
entry operator, though it writes once (a region with two entries pays two writes, one
entered only through broadcasts pays none); a fusible producer read by several
consumers is charged once, though XLA duplicates it into each consumer's fusion; a
program output is written where its region is entered, not at the output; an
elementwise operator whose chain cannot be built (a comparison, ``select``, ``cast``,
``batchnorm``) costs ``c(add)`` per declared FLOP per element; transposes in a fusion
cost ``c(add)`` per element, not their strided reads.

Whole programs (:meth:`XlaCostModel.graph_cost`, ``programs=True``; the modules measured
are cut out of the compiled program by :mod:`tensat_py.cost.xla_regions`): the program's HLO
text is compiled by XLA and each instruction of the optimised entry computation (a
fusion, a convolution, a copy) is run alone as a module of its own
(:func:`region_module`), or after the region that makes its largest operand, the two as
one module less that producer alone (:func:`pair_module`: an operand made just before is
read from the cache), and the regions are replayed through XLA CPU's thunk executor
(:mod:`tensat_py.cost.executor`: a program of at most 8 regions runs them in order, a
larger one runs a burst of more than 8 ready regions on several threads), so the input's
and the candidate's prices, which
decide whether the candidate is kept, are those of the programs XLA runs (its algebraic
simplifier, CSE and fusions included), while extraction is guided by the per-e-node
prices above.

Weights (:mod:`tensat_py.cost.residency`). Two facts of XLA CPU runs that a program's
prices must hold, both measured on NasRNN (``bench/nasrnn_bound.md``):

* *Weight-only operators are pre-computed.* A user of XLA with fixed weights computes
  what depends on the weights alone once (XLA's constant folding does so for literal
  weights), so a weight-only operator costs nothing per e-node (``ctx.constant``), and a
  whole program is priced with them frozen into weights
  (:func:`tensat_py.runtime.xla_exec.freeze_weights`; confirmation on XLA times it so
  too). Without that, merging two dots over the concatenation of their weights measures
  0.84x (the concatenation runs every time).
* *Weights are read from memory, not the cache*, once a program's weights outgrow what
  the cache keeps between runs. A one-operator measurement runs its dot again and again
  with its weight in the cache (NasRNN's 1x512 by 512x512 dot: 15-24 us), while inside
  the program each weight is read from memory once per run (50-80 us per dot with 128
  of them side by side, each with a weight of its own). So while a program whose
  weights hold at least :data:`COLD_MIN_BYTES` is priced (:meth:`XlaCostModel.graph_cost`,
  :meth:`XlaCostModel.costs_for_export`), a program region or library operator that
  reads weights costs at least their bytes over the bandwidth XLA reaches on weights of
  that size when the program's whole weight set is cycled through
  (:meth:`XlaCostModel.bandwidth`; :func:`tensat_py.cost.residency.cold_adjust`), and,
  where streaming its weights is a fair share of its time (:data:`COLD_SHARE`), its
  figure is measured cold: copies of it side by side, each with weights of its own, that
  together read the program's weight set (:func:`replicated_module`,
  :meth:`XlaCostModel._cold_count`); a program region so measured is measured solo too
  (copies one after another, :meth:`XlaCostModel._solo_region_job`), its price in the
  program, and the two say how many cores it keeps busy when XLA runs it beside others.
  Where the cache does hold the weight set, those
  measurements run at cache speed and change nothing: whether weights are cold is what
  the measurement says, not a cache size read from the operating system (a virtual
  machine may report its host's: 480 MiB here).

Measurements live in the profile cache (:mod:`tensat_py.cost.database`) under a device
fingerprint whose runtime is ``"xla-cpu"`` with the jax and jaxlib versions, so they
never mix with ``profile``'s onnxruntime figures. Each measurement: ``warmup`` untimed
runs, then ``min_reps`` to ``max_reps`` timed runs for about ``target_seconds``; the
lower quartile is the figure (:func:`tensat_py.cost.profile.time_callable`). A signature
missing at optimisation time is measured then and stored, until the model's measuring
deadline (:meth:`XlaCostModel.measure_until`; :func:`tensat_py.optimize` gives it part of
its time limit); past it, a missing figure is estimated with the roofline ``cpu`` preset
(:attr:`XlaCostModel.estimated` counts them). ``tensat profile --runtime xla MODEL``
fills the cache ahead of time.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensat_py import ops
from tensat_py.cost.base import SHARED, OpCostModel, operand_flags
from tensat_py.cost.database import ProfileDatabase, Record
from tensat_py.cost.executor import SEQUENTIAL_THUNKS, Thunk, makespan
from tensat_py.cost.profile import (
    Measurement,
    _cpu_model,
    _mask,
    _positive,
    _version,
    fingerprint,
    one_op_graph,
    signature,
    time_callable,
)
from tensat_py.cost.provenance import Pricing
from tensat_py.cost.residency import (
    BandwidthCurve,
    ColdWeights,
    export_weight_bytes,
    graph_weight_bytes,
    non_decreasing,
)
from tensat_py.cost.xla_regions import (
    FREE_OPCODES,
    all_small,
    array_bytes,
    pair_module,
    region_dependencies,
    region_kind,
    region_module,
    region_signature,
    replicated_module,
    weight_parameters,
)
from tensat_py.graph import Graph, TensorType

__all__ = [
    "RUNTIME",
    "PROTOCOL",
    "OVERHEAD_SIGNATURE",
    "DISPATCH_SIGNATURE",
    "XlaBackend",
    "XlaCostModel",
    "pass_signature",
    "kernel_signature",
    "region_module",
    "region_signature",
    "region_kind",
    "pair_module",
    "NO_PAIR",
    "PAIR_NOISE",
    "chain_graph",
    "materialised",
    "ELEMENTS",
    "CHAIN",
    "TIMING",
    "MAX_PASS_ELEMENTS",
    "COLD_MIN_BYTES",
    "COLD_MAX_BYTES",
    "REGION_TRIES",
    "tries_figure",
    "cold_figure",
    "STREAM_SIDES",
    "STREAM_ROUNDS",
    "stream_signature",
    "replicas",
    "replicated_module",
    "MAX_REPLICAS",
    "working_set",
    "SOLO_COPIES",
    "machine_cores",
    "region_dependencies",
]

#: The runtime named in the device fingerprint (never mixed with ``onnxruntime``'s).
RUNTIME = "xla-cpu"
#: Bump when the measuring protocol changes (part of the fingerprint). 2: a program
#: region's cold figures are the lowest of :data:`REGION_TRIES` tries made in rounds
#: (:func:`cold_figure`), where they were the lowest of :data:`COLD_TRIES` in a row.
PROTOCOL = 2
#: Signature of the call overhead: an ``add`` of one float32 element run alone (seconds).
OVERHEAD_SIGNATURE = '{"calibration":"xla call overhead"}'
#: Signature of the per-kernel dispatch inside a program: the slope of a chain of
#: reductions over 4 elements (seconds per kernel).
DISPATCH_SIGNATURE = '{"calibration":"xla kernel dispatch"}'
#: Largest pass measured (float32 elements of the one-``add`` fusion); larger passes are
#: extrapolated linearly from it.
MAX_PASS_ELEMENTS = 1 << 25
#: Seconds one region measurement is expected to take (compile and time), to decide
#: whether a program's regions can be measured before the deadline.
REGION_SECONDS = 0.15
#: Seconds of the roofline ``cpu`` preset, for figures past the measuring deadline.
_PEAK_FLOPS, _BANDWIDTH = 1.8e11, 18e9
#: Per input element of the composite reductions: the kernels each element goes through
#: and the passes XLA makes over the input (two reductions, then the normalisation).
_COMPOSITE: dict[str, tuple[tuple[str, ...], int]] = {
    "softmax": (("max", "sub", "exp", "add", "div"), 3),
    "layer_norm": (("add", "sub", "mul", "add", "mul", "mul", "add"), 3),
}
#: Reducer kernel of each reduction.
_REDUCER = {
    "reduce_sum": "add",
    "reduce_mean": "add",
    "reduce_max": "max",
    "reduce_min": "min",
    "reduce_prod": "mul",
    "global_avg_pool": "add",
    "poolmax": "max",
    "poolavg": "add",
}
#: Default elements of the fused chains that measure a kernel's seconds per element.
ELEMENTS = 1 << 16
#: Default extra copies in the longer chain.
CHAIN = 8
#: Default timing of each measurement (:func:`tensat_py.cost.profile.time_callable`).
TIMING: dict[str, Any] = {
    "warmup": 2,
    "min_reps": 7,
    "max_reps": 200,
    "target_seconds": 0.03,
    "long_seconds": 1.0,
}
#: Weight bytes from which a program's weights are priced cold (the bandwidth measured
#: over its weight set, :meth:`XlaCostModel.bandwidth`); below it they are taken to stay
#: in the caches between runs (8 MiB: this machine's L2 is 2 MiB per core).
COLD_MIN_BYTES = 8 << 20
#: Largest weight set the bandwidth is measured over (bytes); a larger program's weights
#: stream at its rate.
COLD_MAX_BYTES = 256 << 20
#: Sides ``n`` of the ``n x n`` float32 weights of the weight-stream chains (1, 4 and
#: 16 MiB: NasRNN's dots read 1 MiB separate, 8 MiB merged by side, 16 MiB merged whole).
STREAM_SIDES = (512, 1024, 2048)
#: Interleaved rounds of the weight-stream calibration (the median of each size is kept:
#: a shared machine's memory bandwidth drifts from minute to minute).
STREAM_ROUNDS = 5
#: TASO activation code -> its operator.
_ACT_OPS = {1: "sigmoid", 2: "relu", 3: "tanh"}


def pass_signature(elements: int) -> str:
    """Cache signature of the memory pass over ``elements`` float32 elements."""
    return json.dumps({"calibration": "xla pass", "elements": int(elements)}, sort_keys=True)


def kernel_signature(
    kernel: str, dtype: str, params: Mapping[str, Any], elements: int, chain: int
) -> str:
    """Cache signature of kernel ``kernel``'s seconds per element in a fused chain (its
    parameters, dtype and the chain's size are part of it)."""
    doc = {
        "calibration": "xla elementwise",
        "kernel": kernel,
        "dtype": dtype,
        "params": {k: _plain(params[k]) for k in sorted(params)},
        "elements": int(elements),
        "chain": int(chain),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _plain(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def stream_signature(n: int, total: int) -> str:
    """Cache signature of the weight-stream calibration: ``n x n`` float32 weights in
    dots of one input whose distinct weights hold ``total`` bytes."""
    return json.dumps(
        {
            "calibration": "xla weight stream",
            "pattern": "fan-out",
            "n": int(n),
            "total": int(total),
            "rounds": STREAM_ROUNDS,
        },
        sort_keys=True,
    )


def working_set(nbytes: float) -> int:
    """The weight set (bytes) the bandwidth is measured over for a program whose weights
    hold ``nbytes``: the power of two at or above it, within [:data:`COLD_MIN_BYTES`,
    :data:`COLD_MAX_BYTES`].

    >>> working_set(80 << 20) == 128 << 20, working_set(1) == COLD_MIN_BYTES
    (True, True)
    """
    n = COLD_MIN_BYTES
    while n < nbytes and n < COLD_MAX_BYTES:
        n *= 2
    return n


#: Measurements of a library operator's cold figure, made in a row, the lowest kept
#: (:meth:`XlaCostModel._per_copy`). A program region's cold figures are measured in
#: rounds instead (:func:`cold_figure`).
COLD_TRIES = 3
#: Measurements of a program region's figure, made in rounds over the program's missing
#: regions (one of each region per round), their median kept (:func:`tries_figure`;
#: :meth:`XlaCostModel._measure_regions`). One measurement of about 30 ms can land in a
#: burst of load from another process: jax_gcn_layer's 2048 x 2048 by 2048 x 32 dot once
#: measured 1.72 ms against 1.00-1.12 ms in other runs, and the module's predicted speedup
#: came out 3.64x instead of 5.5x. The lowest of 3 tries still scattered: one try's lower
#: quartile of the module's 7.4 ms dot ranged 7.8-10.2 ms over 20 rounds (coefficient of
#: variation 6 %), and so did the lowest of a few. Over 8 pricings in fresh caches of the
#: input and the optimiser's program, the standard deviation of the log of the predicted
#: speedup was, with the lowest of 3 tries against the median of 5: jax_gcn_layer 0.090
#: against 0.023, jax_linear_attention 0.070 against 0.050, jax_lora_dense 0.041 against
#: 0.041 (the median of 7: 0.027, 0.054, 0.038); pricing took 1.5 times as long.
REGION_TRIES = 5
#: Seconds of timed calls from which a region's first try is its figure: it is not
#: measured again in later rounds (:meth:`XlaCostModel._measure_regions`). A try that long
#: averages a burst of load away by itself, and EfficientNet's convolution regions, about
#: a second a call, would otherwise be run dozens of times each.
LONG_REGION_SECONDS = 1.0
#: The figure stored for a pair module (:func:`pair_module`) that XLA compiles into other
#: regions than its producer and consumer (it fused them, or added a region), or could not
#: run: the consumer is priced alone.
NO_PAIR = -1.0
#: The noise of a region's figure, as a share of it: a region's price after its producer
#: (:func:`pair_module`) is the pair's figure less the producer's, and it replaces the
#: region's figure alone only where the two differ by more than this share of the
#: producer's figure (one try's lower quartile of a 7.4 ms dot varied by 6 %; see
#: :data:`REGION_TRIES`).
PAIR_NOISE = 0.05
#: Share of a region's or operator's time run alone that streaming its weights must take
#: before it is measured cold (copies side by side); below it, ``max(hot, bytes /
#: bandwidth)``.
COLD_SHARE = 0.25
#: Copies of a region in its solo cold measurement (:meth:`XlaCostModel._solo_region_job`):
#: as many as XLA CPU runs one after another in a module of its own.
SOLO_COPIES = SEQUENTIAL_THUNKS
#: Seconds the copies of one cold measurement take at most, run hot (a bound on how many).
COLD_SECONDS = 0.05
#: Most copies in a cold measurement (:func:`replicated_module`, :func:`replicated_graph`).
MAX_REPLICAS = 256


def replicas(weight_bytes: int, total: int) -> int:
    """Copies of a region or operator reading ``weight_bytes`` of weights that together
    read ``total`` bytes: at least 2, at most :data:`MAX_REPLICAS`.

    >>> replicas(1 << 20, 128 << 20), replicas(64 << 20, 128 << 20), replicas(1, 1 << 30)
    (128, 2, 256)
    """
    return max(2, min(MAX_REPLICAS, -(-int(total) // max(int(weight_bytes), 1))))


def _stream_graph(n: int, count: int) -> Graph:
    """``count`` dots ``[1, n] x [n, n]`` of one input, each with a weight of its own
    (entry parameters ``w0000``...), each an output: the pattern dot merging rewrites
    (several dots reading one operand, as NasRNN's eight per side and step)."""
    g = Graph()
    x = g.add_input("x", (1, n), "float32")
    g.outputs = [
        g.add_node("matmul", {"act": 0}, [x, g.add_weight(f"w{k:04d}", (n, n), "float32")])
        for k in range(count)
    ]
    return g


def _numel(t: Any) -> int:
    return math.prod(t.shape) if isinstance(t, TensorType) else sum(math.prod(p.shape) for p in t)


def _nbytes(t: Any) -> int:
    if isinstance(t, TensorType):
        return math.prod(t.shape) * t.itemsize
    return sum(_nbytes(p) for p in t)


def materialised(labels: frozenset[str] | set[str], constant: bool = False) -> bool:
    """Whether an operand with producer ``labels`` (:attr:`CostContext.producers`) is read
    from memory by a fusion: it is constant, its producers are unknown, or one of them is
    a program input or weight, a view of a buffer (an operator that launches no kernel,
    e.g. TASO's ``reshape``), or a ``library``, ``none`` or ``reduce`` operator.

    >>> materialised({"input"}), materialised({"exp"}), materialised({"dot_general"})
    (True, False, True)
    """
    if constant or not labels:
        return True
    for lab in labels:
        if lab == SHARED:
            continue
        op = lab.split("<", 1)[0].split("+", 1)[0]
        try:
            d = ops.get(op)
        except KeyError:
            return True
        if d.fusion in ("library", "none", "reduce") or not d.launches_kernel:
            return True
    return False


# ============================================================================ backend
class XlaBackend:
    """Times HLO modules on XLA's CPU backend through jaxlib.

    Args:
        warmup, min_reps, max_reps, target_seconds: see
            :func:`tensat_py.cost.profile.time_callable`.
    """

    name = RUNTIME

    def __init__(
        self,
        *,
        warmup: int = 2,
        min_reps: int = 7,
        max_reps: int = 200,
        target_seconds: float = 0.03,
        long_seconds: float | None = 1.0,
    ) -> None:
        self.timing = {
            "warmup": warmup,
            "min_reps": min_reps,
            "max_reps": max_reps,
            "target_seconds": target_seconds,
            "long_seconds": long_seconds,
        }

    def info(self) -> dict[str, Any]:
        """The device description the fingerprint hashes: the runtime (``xla-cpu``), CPU,
        cores, jax and jaxlib versions, protocol."""
        return {
            "backend": RUNTIME,
            "runtime": RUNTIME,
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "jax": _version("jax"),
            "jaxlib": _version("jaxlib"),
            "tensat_py": _version("tensat-py"),
            "protocol": PROTOCOL,
        }

    def time_module(
        self, text: str, args: Sequence[np.ndarray], deadline: float | None = None
    ) -> Measurement:
        """Compile HLO ``text`` (cached by text) and time its execution on ``args`` (put on
        the device once: no copies are timed), each run waiting for its results; no run
        starts past ``deadline`` (``time.monotonic()``; see
        :func:`tensat_py.cost.profile.time_callable`).

        Raises:
            ValueError: XLA rejected the module or failed to run it (its message follows).
            TimeoutError: ``deadline`` passed before one timed run.
        """
        return self.time_cycled(text, [args], deadline)

    def time_cycled(
        self, text: str, arg_sets: Sequence[Sequence[np.ndarray]], deadline: float | None = None
    ) -> Measurement:
        """Compile HLO ``text`` (cached by text) and time one call that runs it on each of
        ``arg_sets`` in turn (each set put on the device once), each run waiting for its
        results: a module cycled over weight sets of its own, so that together its runs
        read more weights than the caches hold (:meth:`XlaCostModel._solo_region_job`).

        Raises:
            ValueError: no argument sets, XLA rejected the module or failed to run it.
            TimeoutError: ``deadline`` passed before one timed call.
        """
        import jax

        from tensat_py.runtime import xla_exec

        if not arg_sets:
            raise ValueError("xla: time_cycled needs at least one argument set")
        try:
            exe = xla_exec.compile_text(text)
        except xla_exec.XlaError as e:
            raise ValueError(f"xla: XLA rejected the module: {e}") from None
        dev = jax.devices("cpu")[0]
        placed = [[jax.device_put(np.asarray(a), dev) for a in args] for args in arg_sets]

        def call() -> None:
            for bufs in placed:
                for out in exe.execute_sharded(bufs).disassemble_into_single_device_arrays():
                    out[0].block_until_ready()

        try:
            call()
        except Exception as e:  # jaxlib's runtime errors
            raise ValueError(f"xla: the module failed to run: {e}") from None
        return time_callable(call, **self.timing, deadline=deadline)

    def weight_stream(self, n: int, count: int) -> Measurement:
        """Times ``count`` dots ``[1, n] x [n, n]`` of one input with distinct float32
        weights (entry parameters, values in [0.5, 1.5]; :func:`_stream_graph`), for
        :meth:`XlaCostModel.bandwidth`.

        Raises:
            ValueError: XLA rejected or failed to run the module.
        """
        from tensat_py.frontends.hlo import dumps, entry_leaves

        g = _stream_graph(n, count)
        rng = np.random.default_rng(0)
        vals = {"x": np.full((1, n), 1.0 / n, np.float32)}
        for i in g.weights():
            vals[g.nodes[i].name] = rng.uniform(0.5, 1.5, (n, n)).astype(np.float32)
        return self.time_module(dumps(g), [vals[k] for k in entry_leaves(g)])

    def time_graph(self, graph: Graph) -> Measurement:
        """:meth:`time_module` of ``graph``'s HLO text on positive random values for its
        entry parameters (inputs, then the weights written as parameters; booleans in
        runs).

        Raises:
            ValueError: an operator without an HLO form, or XLA rejected the module.
        """
        from tensat_py.frontends.hlo import dumps, entry_leaves

        try:
            text = dumps(graph)
            leaves = entry_leaves(graph)
        except Exception as e:  # the HLO writer's errors: an operator without to_hlo...
            raise ValueError(f"xla: no HLO form: {type(e).__name__}: {e}") from None
        rng = np.random.default_rng(0)
        by_name = {graph.nodes[i].name: i for i in (*graph.inputs(), *graph.weights())}
        args = [_positive(rng, graph.nodes[by_name[n]].type) for n in leaves]
        return self.time_module(text, args)


# ============================================================================ modules
def _scalars(g: Graph, dtype: str) -> list[int]:
    return [g.add_input("s0", (), dtype), g.add_input("s1", (), dtype)]


def chain_graph(op: str, params: Mapping[str, Any], dtype: str, n: int, k: int) -> Graph:
    """``k`` copies of ``op`` chained over ``n`` elements of ``dtype``: ``y = op(y, s)``
    for a binary operator (``s`` two scalars taken in turn, broadcast), ``y = op(y) + s``
    for a unary one.

    Raises:
        ValueError: ``op`` does not chain so (another arity, a dtype-changing operator).
    """
    g = Graph()
    y = g.add_input("x", (n,), dtype)
    s = _scalars(g, dtype)
    arity = _arity(op)
    if arity not in (1, 2):
        raise ValueError(f"xla: `{op}` has {arity} operands; it does not chain")
    for i in range(k):
        if arity == 2:
            y = g.add_node(op, dict(params), [y, s[i % 2]])
        else:
            y = g.add_node("add", {}, [g.add_node(op, dict(params), [y]), s[i % 2]])
        t = g.nodes[y].type
        if not isinstance(t, TensorType) or t.shape != (n,) or t.dtype != dtype:
            raise ValueError(f"xla: `{op}` changes its operand's type; it does not chain")
    g.outputs = [y]
    return g


def _arity(op: str) -> int:
    """How many tensor operands ``op`` takes (its Rust declaration).

    Raises:
        KeyError: ``op`` is not declared.
    """
    from tensat_py import _core

    return sum(1 for _, kind in _core.signatures()[op] if kind in ("tensor", "pair"))


def _dispatch_graph(k: int) -> Graph:
    """``k`` reductions over 4 float32 elements, each added back: ``k`` kernels."""
    g = Graph()
    y = g.add_input("x", (4,), "float32")
    for _ in range(k):
        r = g.add_node("reduce_sum", {"axes": (0,), "keepdims": 1}, [y])
        y = g.add_node("add", {}, [y, r])
    g.outputs = [y]
    return g


def _pass_graph(n: int) -> Graph:
    """One ``add`` of a scalar over ``n`` float32 elements: reads ``4n`` bytes, writes
    ``4n``."""
    g = Graph()
    x = g.add_input("x", (n,), "float32")
    g.outputs = [g.add_node("add", {}, [x, _scalars(g, "float32")[0]])]
    return g


def _plain_context(ctx: ops.OpContext) -> ops.OpContext:
    """``ctx`` with every operand non-constant (XLA runs the module on parameters either
    way) and its ``act`` dropped: what a library signature is measured as."""
    params = dict(ctx.params)
    if params.get("act"):
        params["act"] = 0
    return ops.OpContext(
        op=ctx.op,
        params=params,
        inputs=list(ctx.inputs),
        output=ctx.output,
        graph=ctx.graph,
        name=ctx.name,
    )


def tries_figure(lows: Sequence[float]) -> float:
    """A region's figure (seconds) from its tries' lower quartiles ``lows``
    (:data:`REGION_TRIES` of them, fewer when the measuring deadline stopped the rounds):
    their median, the lower middle one for an even count, so the figure is always one
    measurement; :data:`NO_PAIR` when any try says so (a pair module XLA compiles into
    other regions, :meth:`XlaCostModel._time_pair`).

    Raises:
        ValueError: no tries.

    Example:
        >>> tries_figure([3e-4, 1e-4, 2e-4, 9e-4, 4e-4])   # the lowest would be 1e-4
        0.0003
        >>> tries_figure([3e-4, 1e-4])
        0.0001
        >>> tries_figure([3e-4, NO_PAIR, 2e-4])
        -1.0
    """
    if not lows:
        raise ValueError("tries_figure: no tries")
    if NO_PAIR in lows:
        return NO_PAIR
    return float(statistics.median_low(lows))


def cold_figure(lows: Sequence[float]) -> float:
    """A program region's cold figure (seconds a copy, :meth:`XlaCostModel._cold_region`)
    from its tries ``lows``, made in :data:`REGION_TRIES` rounds over the program's cold
    measurements: the lowest.

    Unlike a region's hot figure (:func:`tries_figure`), a cold figure is the time of
    copies that stream weights from memory, and what else the machine does only slows
    its tries down: memory's pace drifts, and the side-by-side copies, which keep both
    cores busy, run at half pace while a core is taken. On this 2-core virtual machine
    (2026-11-28), 34 tries of NasRNN's 1 x 512 by 512 x 512 dot over 60 s ran 87-120 us
    solo and 53-79 us a copy side by side; taken 5 at a time, their lowest scattered by
    0.062 (solo) and 0.054 (side by side) in the log, their median by 0.055 and 0.108.
    Over 5 pricings of NasRNN's input and the optimiser's program from tries made in
    rounds, the log of the predicted speedup scattered by 0.042 with the lowest of every
    figure against 0.084 with the median (jax_gcn_layer, no cold weights: 0.038 against
    0.035; jax_linear_attention 0.051 against 0.059). NasRNN's price is mostly its dots'
    cold figures, so only those take the lowest; hot figures keep their median. In fresh
    caches, NasRNN's dot priced 90-91 us solo in five pricings with this figure, 100-120
    us in four with the lowest of 3 tries in a row an hour before, and the predicted
    speedup's log scattered by 0.062 against 0.158.

    Raises:
        ValueError: no tries.

    Example:
        >>> cold_figure([9.8e-5, 8.7e-5, 1.2e-4])
        8.7e-05
    """
    if not lows:
        raise ValueError("cold_figure: no tries")
    return float(min(lows))


# ============================================================================ model
@dataclass(frozen=True)
class _Job:
    """One missing measurement: its cache signature, the record's operator name, and
    how to take it (returns the figure to store as ``low``, seconds)."""

    signature: str
    op: str
    run: Callable[[], Measurement]


class XlaCostModel(ColdWeights, OpCostModel):
    """Seconds of each operator application as XLA's CPU backend runs it inside a whole
    program (see the module docstring for the model, its assumptions and sources).

    Args:
        device: ``"cpu"`` (this machine's CPU: the only device XLA runs on here).
        db: the profile cache (a :class:`~tensat_py.cost.database.ProfileDatabase` or its
            path); default the user's.
        progress: ``progress(done, total, what)`` after each new measurement.
        elements: elements of the fused chains that measure a kernel's seconds per
            element (default :data:`ELEMENTS`, 65,536).
        chain: extra copies in the longer chain (default :data:`CHAIN`, 8).
        programs: price a whole program (:meth:`graph_cost`) as XLA compiles it, region
            by region (:meth:`program_seconds`), rather than as the sum of its
            operators' prices (default True).
        timing: ``warmup``, ``min_reps``, ``max_reps``, ``target_seconds``,
            ``long_seconds`` of each measurement
            (:func:`tensat_py.cost.profile.time_callable`; defaults :data:`TIMING`).

    Raises:
        ValueError: a device other than ``"cpu"``; ``elements`` or ``chain`` below 1; an
            unknown timing option.
    """

    name = "xla"
    needs_producers = True

    @property
    def default_k_multi(self) -> int | None:
        """The ``k_multi`` :func:`tensat_py.optimize` explores with when none is given
        (:func:`tensat_py.phases.k_multi_for`): 1 while :attr:`programs` (whole programs
        priced as XLA compiles them), else None (the pipeline's default). Extraction
        minimises a sum of per-e-node prices, and at ``k_multi=2`` that sum chose NasRNN's
        26-matmul program, priced 3.56 ms whole against 3.10 ms for the full merges that
        merge trees make in the first iteration (``docs/exploration.md``)."""
        return 1 if self.programs else None

    def __init__(
        self,
        device: str = "cpu",
        *,
        db: ProfileDatabase | str | os.PathLike[str] | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        elements: int | None = None,
        chain: int | None = None,
        programs: bool = True,
        **timing: Any,
    ) -> None:
        if str(device).lower() != "cpu":
            from tensat_py.options import spell

            raise ValueError(
                f"xla: prices XLA's CPU backend on this machine; device '{device}' is not "
                f"it (pass {spell('device', 'cpu')})"
            )
        elements = ELEMENTS if elements is None else int(elements)
        chain = CHAIN if chain is None else int(chain)
        if elements < 1 or chain < 1:
            raise ValueError(f"xla: elements and chain must be at least 1, got {elements}, {chain}")
        unknown = set(timing) - set(TIMING)
        if unknown:
            raise ValueError(
                f"xla: unknown timing option(s) {sorted(unknown)}; known: {list(TIMING)}"
            )
        self.device = "cpu"
        self.elements, self.chain = elements, chain
        self.backend = XlaBackend(**{**TIMING, **timing})
        self.db = db if isinstance(db, ProfileDatabase) else ProfileDatabase(db)
        self.info = self.backend.info()
        self.fingerprint = fingerprint(self.info)
        self.db.register_device(self.fingerprint, self.info)
        self.progress = progress
        self.programs = programs
        self.cold_weights = True  # weights read from memory: see bandwidth()
        self._wset: int | None = None  # weight bytes of the program being priced
        self._curves: dict[int, BandwidthCurve | None] = {}
        self._raw: dict[str, float] = {}  # signature -> cached low (seconds)
        self._unchainable: set[str] = set()
        self._chains: dict[tuple[str, str, str], bool] = {}
        self._failed: dict[str, str] = {}  # signature -> why it could not be measured
        self._deadline: float | None = None
        self._stop_at: float | None = None  # no region run starts past it (the input's)
        self._whole: bool | None = None  # programs priced whole in this optimisation
        self._paired: bool | None = None  # regions priced after their producers (idem)
        self.measured = 0  # new measurements made by this object
        self.estimated = 0  # figures estimated past the measuring deadline
        self.unmeasurable = 0  # figures estimated for operators XLA cannot run alone
        self.estimated_operators = 0  # operator prices (costs()) that used an estimate
        self.unmeasurable_operators = 0  # ... of an operator XLA cannot run alone
        self._pricing = Pricing()  # how this optimisation's programs were priced

    def __repr__(self) -> str:
        return f"XlaCostModel(device='cpu', fingerprint={self.fingerprint!r})"

    # ------------------------------------------------------------------ programs
    def graph_cost(self, graph: Graph) -> float:
        """Seconds of ``graph`` as XLA runs it (:meth:`program_seconds` of its HLO text),
        when :attr:`programs` is on and the graph has an HLO form; otherwise the sum of
        its operators' prices (:meth:`cost`).

        The program is priced with its weight-only operators pre-computed
        (:func:`tensat_py.runtime.xla_exec.freeze_weights`, structure only; node by node
        they cost 0) and, when its weights hold at least :data:`COLD_MIN_BYTES`, with
        cold weights (:meth:`bandwidth`; see the module docstring).

        Raises:
            ValueError: an operator without a declaration (names it).
        """
        wbytes = graph_weight_bytes(graph)
        with self._weights(wbytes):
            if self.programs and self._whole is not False:
                text, first_weight = None, None
                try:
                    from tensat_py.frontends.hlo import dumps, entry_leaves
                    from tensat_py.runtime.xla_exec import freeze_weights

                    frozen, _ = freeze_weights(graph)
                    text = dumps(frozen)
                    leaves = entry_leaves(frozen)
                    first_weight = len(leaves) - len(
                        {frozen.nodes[i].name for i in frozen.weights()} & set(leaves)
                    )
                except Exception:  # an operator without an HLO form: priced node by node
                    text = None
                why = "a program without an HLO form"
                if text is not None:
                    try:
                        cost = self.program_seconds(
                            text, first=self._whole is None, first_weight=first_weight
                        )
                        self._whole = True
                        self._pricing.whole += 1
                        return cost
                    except ValueError as e:
                        why = (str(e).strip().splitlines() or [""])[0].removeprefix("xla: ")[:160]
                if not self._pricing.why:
                    self._pricing.why = why
                # One program priced node by node: every program of this optimisation
                # is, so that the input's and the candidate's prices compare.
                self._whole = False
            elif not self.programs:
                self._pricing.why = "whole-program pricing off"
            before = self.estimated_operators, self.unmeasurable_operators
            cost = OpCostModel.graph_cost(self, graph)
            self._pricing.by_operator += 1
            self._pricing.estimated += self.estimated_operators - before[0]
            self._pricing.unmeasurable += self.unmeasurable_operators - before[1]
            return cost

    def pricing(self) -> Pricing:
        """How the programs priced since :meth:`measure_until` (one optimisation) were
        priced: whole or operator by operator, and how many operator prices were roofline
        estimates (:class:`~tensat_py.cost.provenance.Pricing`; :func:`tensat_py.optimize`
        reports it as ``stats["pricing"]``)."""
        return self._pricing

    def costs_for_export(self, export: Mapping[str, Any]) -> list[float]:
        """See :meth:`tensat_py.cost.base.OpCostModel.costs_for_export`; cold weights when
        the e-graph's weights hold at least :data:`COLD_MIN_BYTES` (:meth:`bandwidth`)."""
        with self._weights(export_weight_bytes(export)):
            return OpCostModel.costs_for_export(self, export)

    @contextlib.contextmanager
    def _weights(self, nbytes: int) -> Iterator[None]:
        """While pricing a program whose weights hold ``nbytes``: cold weights from
        :data:`COLD_MIN_BYTES` on (when :attr:`cold_weights`)."""
        prev = self._cold, self._wset
        self._cold = bool(self.cold_weights) and nbytes >= COLD_MIN_BYTES
        self._wset = nbytes if self._cold else None
        try:
            yield
        finally:
            self._cold, self._wset = prev

    def bandwidth(self) -> BandwidthCurve | None:
        """Bytes per second at which XLA reads a weight of a given size inside the program
        being priced: for each side ``n`` of :data:`STREAM_SIDES`, ``1 x n`` by ``n x n``
        dots of one input with distinct weights that together hold the program's weight set
        (:func:`working_set`), its weight bytes over its lower-quartile time, the median of
        :data:`STREAM_ROUNDS` interleaved rounds, made non-decreasing in the weight's size
        (:func:`~tensat_py.cost.residency.non_decreasing`); cached per weight set, measured
        even past the measuring deadline (the input and its candidate must be priced
        alike). None when no program is being priced or the chain cannot run."""
        if self._wset is None:
            return None
        total = working_set(self._wset)
        if total in self._curves:
            return self._curves[total]
        sigs = {n: stream_signature(n, total) for n in STREAM_SIDES}
        self._fetch(list(sigs.values()))
        todo = [n for n in STREAM_SIDES if sigs[n] not in self._raw]
        rates: dict[int, list[float]] = {n: [] for n in todo}
        curve: BandwidthCurve | None = None
        try:
            for _ in range(STREAM_ROUNDS if todo else 0):
                for n in todo:
                    count = max(2, -(-total // (n * n * 4)))
                    rates[n].append(count * n * n * 4 / self.backend.weight_stream(n, count).low)
            for n in todo:
                bw = float(np.median(rates[n]))
                spread = max(rates[n]) - min(rates[n])
                rec = Record(sigs[n], "__xla_stream__", bw, spread, len(rates[n]), bw)
                self.db.put(self.fingerprint, [rec])
                self.measured += 1
            self._fetch(list(sigs.values()))
            raw = [self._raw[sigs[n]] for n in STREAM_SIDES]
            curve = BandwidthCurve(
                [(n * n * 4, r) for n, r in zip(STREAM_SIDES, non_decreasing(raw), strict=True)]
            )
        except (ValueError, KeyError):
            curve = None
        self._curves[total] = curve
        return curve

    def program_seconds(
        self, text: str, first: bool = False, first_weight: int | None = None
    ) -> float:
        """Seconds of the HLO module ``text`` as XLA's CPU backend runs it: compiled with
        XLA's full pipeline, each instruction of the optimised entry computation (a loop
        or library fusion, a convolution, a copy...) measured alone as a module of its
        own (:func:`region_module`; identical regions measured once, cached; the median
        of :data:`REGION_TRIES` measurements made in rounds over the program's regions,
        :meth:`_measure_regions`), less the call overhead, plus one kernel dispatch;
        parameters, constants, tuples and bitcasts cost nothing. The regions' figures are
        replayed through XLA CPU's thunk executor (:func:`~tensat_py.cost.executor.makespan`
        over :func:`region_dependencies`, on :func:`machine_cores` cores): in order for a
        program of at most 8 regions (or whose buffers are all small), else independent
        regions may overlap where their cold measurements say they leave cores free
        (:meth:`_cold_region`); every other region keeps all cores busy, so such a
        program costs the sum of its regions.

        A region that reads the result of another region directly is priced *after its
        producer*: the time of the pair of them run as one module (:func:`pair_module`:
        the producer's result a temporary, written and read while in the cache, as in the
        program) less the producer's time alone, both measured in the same rounds (the
        call overhead is in both). Run alone, a region reads every operand from a placed
        argument: jax_lora_dense's ``w + 2 (a b)`` loop fusion took 0.33 ms alone and
        0.16 ms after the dot that makes ``a b``, and the input was priced 1.07 ms against
        0.77-0.95 ms measured. The producer is the largest such operand's; where XLA
        compiles the pair into other regions (it fuses the two, or adds a region), the
        region is priced alone (:data:`NO_PAIR`), and so is a region whose figure after its
        producer differs from its figure alone by no more than :data:`PAIR_NOISE` of the
        producer's (the difference is then the producer's noise: jax_gcn_layer's 0.20 ms
        dot after its 11 ms dot came out 0 ms). When measuring the pairs too would
        overrun the deadline for the ``first`` program while its regions alone would not,
        no region of that optimisation is priced after its producer.

        The regions missing from the cache are measured past the measuring deadline too
        (the decision needs whole programs), except for the ``first`` program priced
        after :meth:`measure_until` (the input): when measuring its missing regions, at
        about :data:`REGION_SECONDS` each, would overrun the deadline, or once measuring
        them has run past it, it raises and :meth:`graph_cost` prices every program of
        that optimisation node by node.

        ``first_weight``: the index of the first entry parameter that holds a weight
        (those from it on do). While a program with cold weights is priced
        (:meth:`graph_cost`), a region that reads weight parameters costs at least their
        bytes over :meth:`bandwidth` at their size.

        Raises:
            ValueError: XLA rejected the module, a region could not run alone, or (with
                ``first``) too many regions to measure before the deadline.
        """
        from tensat_py.frontends.hlo.parser import parse_module
        from tensat_py.runtime import xla_exec

        try:
            exe = xla_exec.compile_text(text)
            optimised = parse_module(exe.hlo_modules()[0].to_string())
        except Exception as e:  # XlaError, or a printed module our parser does not read
            raise ValueError(f"xla: cannot compile the program: {e}") from None
        jobs = []
        streamed: list[tuple[int, str, set[int]]] = []  # weight bytes, region, their params
        weights = weight_parameters(optimised, first_weight)
        regions = [i for i in optimised.entry.instructions if i.opcode not in FREE_OPCODES]
        for ins in regions:
            region = region_module(optimised, ins)
            operands = ins.operands if ins.opcode == "fusion" else list(dict.fromkeys(ins.operands))
            held = {k for k, o in enumerate(operands) if o in weights}
            streamed.append((sum(weights[operands[k]] for k in held), region, held))
            sig, _ = region_signature(region, REGION_TRIES)
            jobs.append(_Job(sig, f"xla:{ins.opcode}", lambda r=region: self._time_region(r)))
        pairs = self._pair_jobs(optimised, regions)
        curve = self.bandwidth() if self._cold and any(n for n, _, _ in streamed) else None
        self._fetch([j.signature for j in jobs] + [j.signature for _, j in pairs.values()])
        missing = len({j.signature for j in jobs if j.signature not in self._raw})
        if first and self._deadline is not None and missing:
            if time.monotonic() + missing * REGION_SECONDS > self._deadline:
                raise ValueError(f"xla: {missing} regions to measure before the deadline")
        if self._paired is None:  # decided by the first program, as _whole is
            paired = len({j.signature for _, j in pairs.values() if j.signature not in self._raw})
            self._paired = not (
                first
                and self._deadline is not None
                and time.monotonic() + (missing + paired) * REGION_SECONDS > self._deadline
            )
        if not self._paired:
            pairs = {}
        overhead, dispatch = self.overhead(), self.dispatch()
        self._measure_regions([*jobs, *(j for _, j in pairs.values())], first)
        raws = [self._take(job, ignore_deadline=True) for job in jobs]
        colds = self._measure_cold(raws, streamed, overhead, curve) if curve is not None else {}
        cores = machine_cores()
        deps = region_dependencies(optimised, regions)
        thunks = []
        for k, (raw, (nbytes, _, _)) in enumerate(zip(raws, streamed, strict=True)):
            assert raw is not None
            alone = max(raw - overhead, 0.0)
            t = alone
            demand = float(cores)  # alone, a region may keep every core busy
            if k in pairs:
                producer, pjob = pairs[k]
                both = self._take(pjob, ignore_deadline=True)
                if both is not None and both != NO_PAIR:
                    after = max(both - raws[producer], 0.0)  # one call overhead in each
                    if abs(after - alone) > PAIR_NOISE * max(raws[producer] - overhead, 0.0):
                        t = after
            if curve is not None and nbytes:
                t, demand = self._cold_region(colds.get(k), nbytes, alone, t, curve, cores)
            thunks.append(Thunk(t + dispatch, deps[k], demand))
        small = all_small(optimised, regions)
        return makespan(thunks, cores, sequential=small or len(thunks) <= SEQUENTIAL_THUNKS)

    def _measure_cold(
        self,
        raws: Sequence[float | None],
        streamed: Sequence[tuple[int, str, set[int]]],
        overhead: float,
        curve: BandwidthCurve,
    ) -> dict[int, tuple[_Job, _Job]]:
        """Measure the cold figures of a program's regions that read weights (``streamed``:
        weight bytes, region text, weight parameters; ``raws`` their hot figures), side by
        side and solo (:meth:`_cold_region`), missing from the cache, in
        :data:`REGION_TRIES` rounds over all of them, the lowest of each kept
        (:func:`cold_figure`): solo and side by side are measured in the same rounds, so
        the cores a region keeps busy, their ratio, is not one figure's slow moment.
        Returns ``{k: (side-by-side job, solo job)}`` for the ``k``-th region measured cold
        (:meth:`_cold_count` says which)."""
        colds: dict[int, tuple[_Job, _Job]] = {}
        for k, (raw, (nbytes, region, held)) in enumerate(zip(raws, streamed, strict=True)):
            if raw is None or not nbytes:
                continue
            cold = self._cold_region_job(region, held, nbytes, max(raw - overhead, 0.0), curve)
            if cold is not None:
                colds[k] = (cold, self._solo_region_job(region, held, nbytes))
        todo = [j for pair in colds.values() for j in pair]
        self._fetch([j.signature for j in todo])
        self._measure_regions(todo, first=False, figure=cold_figure)
        return colds

    def _cold_region(
        self,
        jobs: tuple[_Job, _Job] | None,
        nbytes: int,
        alone: float,
        t: float,
        curve: BandwidthCurve,
        cores: int,
    ) -> tuple[float, float]:
        """Seconds and core demand (:class:`~tensat_py.cost.executor.Thunk`) of a program
        region that reads ``nbytes`` of weights while the program's weights are cold;
        ``alone`` its hot figure, ``t`` that figure after its producer; ``jobs`` its cold
        measurements (:meth:`_measure_cold`), None where it is not measured cold.

        Where streaming its weights is a fair share of its time (:meth:`_cold_count`), it
        is measured cold twice: *solo* (:meth:`_solo_region_job`, copies run one after
        another, as XLA runs a burst of regions made ready together) and *side by side*
        (:meth:`_cold_region_job`, as XLA runs many independent regions). The solo figure
        replaces the hot one, and the two give the cores it keeps busy: ``cores x side /
        solo``, between 1 and ``cores`` (NasRNN's 1 x 512 by 512 x 512 dot: 80 us solo,
        49 us a copy side by side on 2 cores, so 1.2 cores: two run side by side at
        about 1.7 times one's pace, not twice). Otherwise ``max(t, bytes / bandwidth)``
        on every core."""
        if jobs is not None:
            side = self._take(jobs[0], ignore_deadline=True)
            solo = self._take(jobs[1], ignore_deadline=True)
            if side is not None and solo is not None and solo > 0:
                demand = min(max(cores * side / solo, 1.0), float(cores))
                return max(solo + t - alone, 0.0), demand
            if side is not None:
                t = max(side + t - alone, 0.0)
        return max(t, nbytes / curve(nbytes)), float(cores)

    def _pair_jobs(self, optimised: Any, regions: Sequence[Any]) -> dict[int, tuple[int, _Job]]:
        """``{k: (p, job)}``: for the ``k``-th region of ``regions`` (entry instructions of
        the optimised module that run a kernel) that reads the result of another region
        directly (no bitcast between), the index ``p`` of that producer (the largest
        result, the first of equals) and the measurement of the pair
        (:func:`pair_module`; :data:`NO_PAIR` where XLA does not compile it into the two
        regions)."""
        from tensat_py.frontends.hlo.ir import ArrayShape

        index = {ins.name: k for k, ins in enumerate(regions)}
        out: dict[int, tuple[int, _Job]] = {}
        for k, ins in enumerate(regions):
            made = [
                index[o]
                for o in dict.fromkeys(ins.operands)
                if o in index and isinstance(regions[index[o]].shape, ArrayShape)
            ]
            if not made:
                continue
            p = max(made, key=lambda j: (array_bytes(regions[j].shape), -j))
            try:
                text = pair_module(optimised, regions[p], ins)
            except ValueError:
                continue
            expected = [region_kind(regions[p]), region_kind(ins)]
            sig, _ = region_signature(text, REGION_TRIES)
            run = lambda t=text, e=expected: self._time_pair(t, e)  # noqa: E731
            out[k] = (p, _Job(sig, "xla:pair", run))
        return out

    def _time_pair(self, text: str, expected: Sequence[tuple[str, str | None]]) -> Measurement:
        """The time of pair module ``text``, or :data:`NO_PAIR` (as its figures) when XLA
        compiles it into regions other than ``expected`` (:func:`region_kind`) or it does
        not run.

        Raises:
            TimeoutError: the measuring deadline passed (:meth:`_measure_regions`).
        """
        from tensat_py.frontends.hlo.parser import parse_module
        from tensat_py.runtime import xla_exec

        none = Measurement(NO_PAIR, 0.0, 0, NO_PAIR)
        try:
            optimised = parse_module(xla_exec.compile_text(text).hlo_modules()[0].to_string())
            kinds = [region_kind(i) for i in optimised.entry.instructions]
            if [k for k in kinds if k[0] not in FREE_OPCODES] != list(expected):
                return none
            return self._time_region(text)
        except (ValueError, xla_exec.XlaError):
            return none

    def _measure_regions(
        self,
        jobs: Sequence[_Job],
        first: bool,
        figure: Callable[[Sequence[float]], float] = tries_figure,
    ) -> None:
        """Measure the regions of ``jobs`` missing from the cache in :data:`REGION_TRIES`
        rounds, one measurement of each region per round, and store each region's
        ``figure`` of its tries: by default their median (:func:`tries_figure`: rounds
        spread a region's measurements over the time the program's regions take, so
        neither one burst of load from another process nor one lucky try decides its
        figure); the lowest for cold figures (:func:`cold_figure`).

        With ``first`` (the input, see :meth:`program_seconds`), measuring stops at the
        deadline, inside a region's measurement too (no run of it starts past the
        deadline: one run of an EfficientNet convolution region takes seconds): during the
        first round it raises, after it the rounds made so far decide. Either way the
        figures measured so far are stored (with the tries they had), so that a later
        optimisation of the program measures on from there.

        Raises:
            ValueError: a region could not run alone, or (with ``first``) the first round
                ran past the deadline.
        """
        todo = list({j.signature: j for j in jobs if j.signature not in self._raw}.values())
        runs: dict[str, list[Measurement]] = {j.signature: [] for j in todo}

        def store() -> None:
            recs = []
            for j in todo:
                ms = runs[j.signature]
                if not ms or j.signature in self._raw:
                    continue
                low = figure([m.low for m in ms])
                med = float(np.median([m.median for m in ms]))
                spread = max(m.median for m in ms) - min(m.low for m in ms)
                recs.append(Record(j.signature, j.op, med, spread, sum(m.reps for m in ms), low))
                self._raw[j.signature] = low
                self.measured += 1
                if self.progress is not None:
                    self.progress(self.measured, self.measured, j.op)
            if recs:
                self.db.put(self.fingerprint, recs)

        late = "xla: the program's regions ran past the measuring deadline"
        self._stop_at = self._deadline if first else None
        try:
            for k in range(REGION_TRIES):
                for j in todo:
                    ms = runs[j.signature]
                    if ms and ms[0].median * ms[0].reps >= LONG_REGION_SECONDS:
                        continue  # a long first try is the figure (LONG_REGION_SECONDS)
                    try:
                        # A region can take far longer than REGION_SECONDS (a large
                        # convolution): the input's regions stop at the deadline, before
                        # a measurement or inside one.
                        if first and not self._may_measure():
                            raise TimeoutError
                        runs[j.signature].append(j.run())
                    except TimeoutError:
                        store()
                        if k == 0:
                            raise ValueError(late) from None
                        return
                    except ValueError as e:  # remembered: not tried again by this object
                        self._failed[j.signature] = str(e)
                        store()
                        raise
            store()
        finally:
            self._stop_at = None

    def _cold_count(self, nbytes: int, hot: float, curve: BandwidthCurve) -> int:
        """Copies of a region or operator reading ``nbytes`` of weights, ``hot`` seconds
        run alone, in its cold measurement: 0 (none: priced ``max(hot, bytes /
        bandwidth)``) unless streaming its weights takes at least :data:`COLD_SHARE` of
        ``hot`` (a region bound by its arithmetic, a large convolution, is not measured
        again), else :func:`replicas` over the program's weight set, at most as many as run
        in :data:`COLD_SECONDS` hot."""
        if self._wset is None or nbytes <= 0 or nbytes / curve(nbytes) < COLD_SHARE * hot:
            return 0
        cap = max(2, int(COLD_SECONDS / max(hot, 1e-9)))
        return min(replicas(nbytes, working_set(self._wset)), cap)

    def _cold_region_job(
        self, region: str, held: set[int], nbytes: int, hot: float, curve: BandwidthCurve
    ) -> _Job | None:
        """The cold measurement of a program region (:func:`replicated_module`: copies
        side by side, each with weight parameters ``held`` of its own), or None where
        :meth:`_cold_count` says none."""
        count = self._cold_count(nbytes, hot, curve)
        if not count:
            return None
        text = replicated_module(region, held, count)
        sig, _ = region_signature(text, REGION_TRIES)
        return _Job(
            sig,
            "xla:cold-region",
            lambda: self._per_copy(lambda: self._time_region(text), count, tries=1),
        )

    def _solo_region_job(self, region: str, held: set[int], nbytes: int) -> _Job:
        """The solo cold measurement of a program region: :data:`SOLO_COPIES` copies of it
        in one module (:func:`replicated_module`; XLA runs a module of that few regions
        one region after another, :data:`~tensat_py.cost.executor.SEQUENTIAL_THUNKS`),
        called in turn on as many sets of weights of their own as together read the
        program's weight set (:func:`replicas`); one try is seconds per copy, the call
        overhead taken out of each call (the figure: :meth:`_measure_cold`)."""
        groups = max(1, -(-replicas(nbytes, working_set(self._wset or nbytes)) // SOLO_COPIES))
        text = replicated_module(region, held, SOLO_COPIES)
        sig, _ = region_signature(text, REGION_TRIES)
        key = json.loads(sig)
        key["solo groups"] = groups
        sig = json.dumps(key, sort_keys=True)

        def run() -> Measurement:
            m = self._time_cycled_region(text, groups)
            per = max(m.low - groups * self.overhead(), 0.0) / (groups * SOLO_COPIES)
            return Measurement(per, 0.0, m.reps, per)

        return _Job(sig, "xla:solo-region", run)

    def _time_cycled_region(self, text: str, groups: int) -> Measurement:
        """:meth:`XlaBackend.time_cycled` of a module of copies (:func:`replicated_module`)
        on ``groups`` argument sets: its shared parameters (``shared_*``) the same arrays
        in every set, its weights (``weight_*``) new ones."""
        from tensat_py.frontends.hlo.parser import parse_module

        params = parse_module(text).entry.parameters()
        rng = np.random.default_rng(0)
        shared = {p.name: _region_arg(rng, p.shape) for p in params if p.name.startswith("shared_")}
        sets = [
            [shared[p.name] if p.name in shared else _region_arg(rng, p.shape) for p in params]
            for _ in range(groups)
        ]
        return self.backend.time_cycled(text, sets, self._stop_at)

    def _per_copy(
        self, measure: Callable[[], Measurement], count: int, tries: int = COLD_TRIES
    ) -> Measurement:
        """Seconds per copy of a module of ``count`` copies side by side: the lowest of
        ``tries`` measurements in a row (``measure``; other processes only slow a run
        down), the call overhead taken out once."""
        ms = [measure() for _ in range(tries)]
        low = min(m.low for m in ms)
        per = max(low - self.overhead(), 0.0) / count
        return Measurement(per, 0.0, sum(m.reps for m in ms), per)

    def _time_region(self, region: str) -> Measurement:
        from tensat_py.frontends.hlo.parser import parse_module

        rng = np.random.default_rng(0)
        args = [_region_arg(rng, p.shape) for p in parse_module(region).entry.parameters()]
        return self.backend.time_module(region, args, self._stop_at)

    def measure_until(self, deadline: float | None) -> None:
        """Measure missing figures only until ``time.monotonic()`` reaches ``deadline``
        (None: no limit); past it, missing figures are estimated (:attr:`estimated`).
        Starts a new optimisation: the next program priced decides whether programs are
        priced whole (:meth:`program_seconds`)."""
        self._deadline = deadline
        self._whole = None
        self._paired = None
        self._pricing = Pricing()

    # ------------------------------------------------------------------ figures
    def _fetch(self, sigs: Sequence[str]) -> None:
        want = [s for s in dict.fromkeys(sigs) if s not in self._raw]
        if want:
            for s, r in self.db.get(self.fingerprint, want).items():
                self._raw[s] = r.low

    def _may_measure(self) -> bool:
        return self._deadline is None or time.monotonic() < self._deadline

    def _take(
        self, job: _Job, done: int = 0, total: int = 0, ignore_deadline: bool = False
    ) -> float | None:
        """The figure of ``job``: cached, else measured and stored (None past the
        deadline, unless ``ignore_deadline``)."""
        if job.signature in self._raw:
            return self._raw[job.signature]
        self._fetch([job.signature])
        if job.signature in self._raw:
            return self._raw[job.signature]
        if job.signature in self._failed:
            raise ValueError(self._failed[job.signature])
        if not (ignore_deadline or self._may_measure()):
            return None
        try:
            m = job.run()
        except ValueError as e:  # remembered: not tried again by this object
            self._failed[job.signature] = str(e)
            raise
        self.db.put(
            self.fingerprint, [Record(job.signature, job.op, m.median, m.spread, m.reps, m.low)]
        )
        self._raw[job.signature] = self.db.get(self.fingerprint, [job.signature])[job.signature].low
        self.measured += 1
        if self.progress is not None:
            self.progress(done or self.measured, total or self.measured, job.op)
        return self._raw[job.signature]

    def overhead(self) -> float:
        """Seconds of calling an (almost) empty module: subtracted from every module's time
        (0 past the deadline when not yet measured)."""
        t = self._take(self._overhead_job())
        return t if t is not None else 0.0

    def _overhead_job(self) -> _Job:
        return _Job(
            OVERHEAD_SIGNATURE, "__xla_overhead__", lambda: self.backend.time_graph(_pass_graph(1))
        )

    def _dispatch_job(self) -> _Job:
        def run() -> Measurement:
            a = self.backend.time_graph(_dispatch_graph(1))
            b = self.backend.time_graph(_dispatch_graph(17))
            per = max((b.low - a.low) / 16, 0.0)
            return Measurement(per, 0.0, a.reps + b.reps, per)

        return _Job(DISPATCH_SIGNATURE, "__xla_dispatch__", run)

    def dispatch(self) -> float:
        """Seconds one more kernel (a fusion, a library call) adds inside a program."""
        t = self._take(self._dispatch_job())
        return t if t is not None else 0.0

    def _pass_job(self, n: int) -> _Job:
        return _Job(
            pass_signature(n), "__xla_pass__", lambda: self.backend.time_graph(_pass_graph(n))
        )

    def _pass_raw(self, n: int) -> float | None:
        t = self._take(self._pass_job(n))
        return None if t is None else max(t - self.overhead(), 0.0)

    def pass_seconds(self, nbytes: float) -> float:
        """Seconds of one fused pass moving ``nbytes`` (reads and writes): a one-``add``
        fusion over ``nbytes / 8`` float32 elements, measured at the powers of two around
        it and interpolated linearly (non-decreasing; beyond :data:`MAX_PASS_ELEMENTS`
        extrapolated in proportion)."""
        n = nbytes / 8.0
        if n <= 0:
            return 0.0
        if n <= 1:
            lo_t = self._pass_raw(1)
            return (lo_t if lo_t is not None else 8 / _BANDWIDTH) * n
        if n >= MAX_PASS_ELEMENTS:
            top = self._pass_raw(MAX_PASS_ELEMENTS)
            if top is None:
                return nbytes / _BANDWIDTH
            return top * n / MAX_PASS_ELEMENTS
        lo = 1 << int(math.floor(math.log2(n)))
        hi = lo * 2
        a, b = self._pass_raw(lo), self._pass_raw(hi)
        if a is None or b is None:
            self.estimated += 1
            return nbytes / _BANDWIDTH
        b = max(a, b)
        return a + (b - a) * (n - lo) / lo

    def _kernel_job(self, kernel: str, params: Mapping[str, Any], dtype: str) -> _Job:
        n, k = self.elements, self.chain
        sig = kernel_signature(kernel, dtype, params, n, k)

        def run() -> Measurement:
            g1 = chain_graph(kernel, params, dtype, n, 1)
            gk = chain_graph(kernel, params, dtype, n, 1 + k)
            a, b = self.backend.time_graph(g1), self.backend.time_graph(gk)
            per = (b.low - a.low) / (k * n)
            if _arity(kernel) == 1:  # chained as op(y) + s: take add's share out
                per -= self.per_element("add", {}, dtype)
            per = max(per, 0.0)
            return Measurement(per, 0.0, a.reps + b.reps, per)

        return _Job(sig, "__xla_elementwise__", run)

    def per_element(self, kernel: str, params: Mapping[str, Any], dtype: str) -> float | None:
        """Seconds per element of ``kernel`` on ``dtype`` inside a fused chain (measured
        once, cached); None when its chain cannot be built (another arity, a
        dtype-changing operator, no HLO form) or past the deadline."""
        key = kernel_signature(kernel, dtype, params, self.elements, self.chain)
        if key in self._unchainable or not self._chainable(kernel, dtype, params):
            return None
        if key in self._raw:
            return self._raw[key]
        try:
            return self._take(self._kernel_job(kernel, params, dtype))
        except ValueError:
            self._unchainable.add(key)
            return None

    def _add_rate(self, dtype: str) -> float:
        c = self.per_element("add", {}, dtype)
        return c if c is not None else 1.0 / _PEAK_FLOPS

    def compute_seconds(self, ctx: ops.OpContext, n: int | None = None) -> float:
        """Seconds of ``ctx``'s arithmetic inside a fusion: ``n`` (default its output's
        elements) times its kernel's seconds per element (:meth:`per_element`), or
        ``c(add)`` per declared FLOP per element when its chain cannot be built. A
        ``pow`` of a constant exponent is priced as ``mul``: XLA's algebraic simplifier
        writes ``x ** 2`` as ``x * x`` (a runtime exponent costs 28 ns per float32
        element here, a product under 0.1 ns), and the context does not hold the
        constant's value."""
        n = _numel(ctx.output) if n is None else n
        dtype = _dtype(ctx)
        kernel = ops.kernel_of(ctx.op)
        params = {k: v for k, v in ctx.params.items() if k != "act"}
        if kernel == "pow" and operand_flags(ctx)[1:2] == (True,):
            kernel = "mul"  # x ** c: XLA's algebraic simplifier writes small c as products
        c = self.per_element(kernel, params if kernel == ops.kernel_of(ctx.op) else {}, dtype)
        if c is None:
            try:
                flops = float(ops.get(ctx.op).cost(ctx)[0])
            except Exception:  # a cost rule that needs what this context lacks
                flops = float(n)
            c = self._add_rate(dtype) * max(1.0, flops / max(n, 1))
        return c * n

    def _cold_library_job(self, ctx: ops.OpContext) -> _Job | None:
        """The cold measurement of library operator ``ctx`` while a program with cold
        weights is priced: copies of it (:meth:`_cold_count`), each with weights of its
        own for its constant operands and its other operands shared, run side by side in
        one module; its figure is seconds per copy (call overhead taken out). None when no
        program with cold weights is priced, ``ctx`` reads no weights, or streaming them
        is a small share of its time (:meth:`_cold_count`)."""
        flags = operand_flags(ctx)
        nbytes = sum(
            _nbytes(t) for t, c in zip(ctx.inputs, flags, strict=True) if c and not _is_pair(t)
        )
        curve = self.bandwidth() if self._cold and nbytes else None
        if curve is None or self._wset is None:
            return None
        hot = self.library_seconds(ctx)
        count = self._cold_count(nbytes, hot, curve)
        if not count:
            return None
        plain = _plain_context(ctx)
        total = working_set(self._wset)
        sig = json.dumps(
            {
                "calibration": "xla cold",
                "op": signature(plain),
                "flags": list(flags),
                "total": total,
                "count": count,
                "tries": COLD_TRIES,
            },
            sort_keys=True,
        )

        def run() -> Measurement:
            g = Graph()
            shared: dict[int, int] = {}
            outs = []
            for r in range(count):
                ids = []
                for k, (t, c) in enumerate(zip(plain.inputs, flags, strict=True)):
                    if not isinstance(t, TensorType):
                        raise ValueError(f"xla: `{ctx.op}` reads a pair; cannot run it alone")
                    if c:
                        ids.append(g.add_weight(f"w{r:04d}_{k}", t.shape, t.dtype))
                    else:
                        if k not in shared:
                            shared[k] = g.add_input(f"x{k}", t.shape, t.dtype)
                        ids.append(shared[k])
                outs.append(g.add_node(plain.op, dict(plain.params), ids, name=f"op{r}"))
            g.outputs = outs
            return self._per_copy(lambda: self.backend.time_graph(g), count)

        return _Job(sig, "__xla_cold__", run)

    def _library_job(self, ctx: ops.OpContext) -> _Job:
        plain = _plain_context(ctx)
        return _Job(
            signature(plain), plain.op, lambda: self.backend.time_graph(one_op_graph(plain))
        )

    def library_seconds(self, ctx: ops.OpContext) -> float:
        """Seconds of ``ctx`` run alone as a one-operator module, less the call overhead
        (its ``act`` dropped); past the deadline, or for an operator XLA cannot run
        alone (an opaque operator without its payload), the roofline ``cpu`` estimate."""
        try:
            job = self._library_job(ctx)
            t = self._take(job)
        except ValueError:
            t = None
            self.unmeasurable += 1
        else:
            self.estimated += t is None
        if t is None:
            try:
                flops, nbytes = ops.get(ctx.op).cost(ctx)
            except Exception:
                flops, nbytes = 0.0, float(_nbytes(ctx.output))
            return max(float(flops) / _PEAK_FLOPS, float(nbytes) / _BANDWIDTH)
        return max(t - self.overhead(), 0.0)

    # ------------------------------------------------------------------ pricing
    def cost(self, ctx: ops.OpContext) -> float:
        """Seconds of one operator application inside an XLA CPU program (see the module
        docstring); 0 for constant nodes and operators that launch no kernel.

        Raises:
            ValueError: the operator has no declaration (names it).
        """
        try:
            d = ops.get(ctx.op)
        except KeyError:
            raise ValueError(f"xla: operator `{ctx.op}` has no Python declaration") from None
        if ctx.constant or not d.launches_kernel:
            return 0.0
        if d.fusion in ("library", "none"):
            total = self.library_seconds(ctx)
            cold = self._cold_library_job(ctx) if d.fusion == "library" else None
            if cold is not None:
                t = self._take(cold)
                total = t if t is not None else total  # past the deadline: hot (floored)
            act = int(ctx.params.get("act", 0) or 0) if ctx.op in ("matmul", "conv2d") else 0
            if act and isinstance(ctx.output, TensorType):
                after = ops.OpContext(_ACT_OPS[act], {}, [ctx.output], ctx.output)
                total += self.compute_seconds(after)
                total += self.pass_seconds(2 * _nbytes(ctx.output)) + self.dispatch()
            return total
        return self._fused(ctx, d.fusion)

    def _fused(self, ctx: ops.OpContext, fusion: str) -> float:
        """A fusible operator: its arithmetic, and at a region's entry its pass and
        dispatch (see the module docstring)."""
        flags = operand_flags(ctx)
        prods = tuple(getattr(ctx, "producers", ())) or (frozenset(),) * len(ctx.inputs)
        reads, entry = 0, False
        n_out = _numel(ctx.output)
        for t, c, p in zip(ctx.inputs, flags, prods, strict=True):
            if materialised(p, c):
                reads += _nbytes(t)
                # a smaller operand (a scalar, a bias) is broadcast into the region
                entry = entry or (not c and _numel(t) >= n_out)
        out_bytes = _nbytes(ctx.output)
        dtype = _dtype(ctx)
        kernels = 1
        if fusion == "elementwise":
            compute = self.compute_seconds(ctx)
            write = out_bytes if entry else 0
        elif fusion in ("broadcast", "reshape"):
            compute = self._add_rate(dtype) * n_out
            write = out_bytes if entry and fusion == "reshape" else 0
        else:  # reduce: a fusion root, its output written
            compute, kernels, extra = self._reduce_compute(ctx, dtype)
            reads += extra
            write, entry = out_bytes, True
        moved = reads + write if entry else reads
        total = compute + (self.pass_seconds(moved) if moved else 0.0)
        return total + (kernels * self.dispatch() if entry else 0.0)

    def _reduce_compute(self, ctx: ops.OpContext, dtype: str) -> tuple[float, int, int]:
        """A reduction's arithmetic (seconds), its kernel count and the bytes it reads
        beyond one pass over its input."""
        x = ctx.inputs[0] if ctx.inputs else ctx.output
        n_in = _numel(x)
        if ctx.op in _COMPOSITE:
            kernels, passes = _COMPOSITE[ctx.op]
            per = 0.0
            for k in kernels:
                c = self.per_element(k, {}, dtype)
                per += c if c is not None else self._add_rate(dtype)
            return per * n_in, passes, (passes - 1) * _nbytes(x)
        if ctx.op in ("poolmax", "poolavg", "reduce_window"):
            if ctx.op == "reduce_window":
                window = math.prod(int(w) for w in ctx.params.get("window", (1,)))
                kind = str(ctx.params.get("kind", "add"))
            else:
                window = int(ctx.params.get("kernel_h", 1)) * int(ctx.params.get("kernel_w", 1))
                kind = _REDUCER[ctx.op]
            c = self.per_element(kind, {}, dtype)
            c = c if c is not None else self._add_rate(dtype)
            total = c * _numel(ctx.output) * window
            act = int(ctx.params.get("act", 0) or 0)
            if act and isinstance(ctx.output, TensorType):
                total += self.compute_seconds(
                    ops.OpContext(_ACT_OPS[act], {}, [ctx.output], ctx.output)
                )
            return total, 1, 0
        kernel = _REDUCER.get(ctx.op, "add")
        c = self.per_element(kernel, {}, dtype)
        c = c if c is not None else self._add_rate(dtype)
        return c * n_in, 1, 0

    # ------------------------------------------------------------------ planning
    def jobs(self, ctxs: Sequence[ops.OpContext]) -> list[_Job]:
        """The measurements pricing ``ctxs`` takes, cached or not, in the order they are
        taken (calibrations first), each signature once."""
        jobs: dict[str, _Job] = {}

        def add(job: _Job) -> None:
            jobs.setdefault(job.signature, job)

        add(self._overhead_job())
        add(self._dispatch_job())
        for ctx in ctxs:
            try:
                d = ops.get(ctx.op)
            except KeyError:
                continue
            if ctx.constant or not d.launches_kernel:
                continue
            dtype = _dtype(ctx)
            if d.fusion in ("library", "none"):
                try:
                    add(self._library_job(ctx))
                except ValueError:
                    pass
                continue
            for kernel in self._kernels(ctx, d.fusion):
                if kernel == "pow" and operand_flags(ctx)[1:2] == (True,):
                    kernel = "mul"
                if self._chainable(kernel, dtype):
                    add(self._kernel_job(kernel, self._params(ctx, kernel), dtype))
            if self._chainable("add", dtype):
                add(self._kernel_job("add", {}, dtype))
        return list(jobs.values())

    def _params(self, ctx: ops.OpContext, kernel: str) -> dict[str, Any]:
        if kernel == ops.kernel_of(ctx.op):
            return {k: v for k, v in ctx.params.items() if k != "act"}
        return {}

    def _kernels(self, ctx: ops.OpContext, fusion: str) -> list[str]:
        if fusion == "elementwise":
            return [ops.kernel_of(ctx.op)]
        if fusion == "reduce":
            if ctx.op in _COMPOSITE:
                return list(dict.fromkeys(_COMPOSITE[ctx.op][0]))
            if ctx.op == "reduce_window":
                return [str(ctx.params.get("kind", "add"))]
            return [_REDUCER.get(ctx.op, "add")]
        return []

    def _chainable(self, kernel: str, dtype: str, params: Mapping[str, Any] | None = None) -> bool:
        """Whether ``kernel`` chains on ``dtype`` (:func:`chain_graph`; remembered)."""
        key = (kernel, dtype, json.dumps({k: _plain(v) for k, v in (params or {}).items()}))
        if key not in self._chains:
            try:
                chain_graph(kernel, params or {}, dtype, 2, 1)
                self._chains[key] = True
            except (ValueError, KeyError):
                self._chains[key] = False
        return self._chains[key]

    def missing(self, ctxs: Sequence[ops.OpContext]) -> list[_Job]:
        """:meth:`jobs` of ``ctxs`` whose figure the cache does not hold yet (the
        memory passes, which depend on the program's sizes, are measured while pricing)."""
        todo = self.jobs(ctxs)
        have = self.db.get(self.fingerprint, [j.signature for j in todo])
        return [j for j in todo if j.signature not in have]

    def costs(self, ctxs: Sequence[ops.OpContext]) -> list[float]:
        """Seconds for each of ``ctxs`` (see :meth:`cost`): the cached figures are read
        at once, the missing ones measured (each stored at once) until the deadline.

        Raises:
            ValueError: an operator without a declaration (names it).
        """
        todo = self.jobs(ctxs)
        self._fetch([j.signature for j in todo])
        new = [j for j in todo if j.signature not in self._raw]
        for i, job in enumerate(new, 1):
            try:
                self._take(job, i, len(new))
            except ValueError:
                continue  # an operator XLA cannot run alone: estimated when priced
        prices = []
        for c in ctxs:
            before = self.estimated, self.unmeasurable
            prices.append(self.cost(c))
            if self.unmeasurable > before[1]:
                self.unmeasurable_operators += 1
            elif self.estimated > before[0]:
                self.estimated_operators += 1
        return self.cold_weights_adjust(prices, ctxs)


def _is_pair(t: Any) -> bool:
    return not isinstance(t, TensorType)


def _dtype(ctx: ops.OpContext) -> str:
    """The dtype a context computes in: its first tensor operand's, else its output's."""
    for t in (*ctx.inputs, ctx.output):
        if isinstance(t, TensorType):
            return t.dtype
    return "float32"


def _region_arg(rng: np.random.Generator, shape: Any) -> np.ndarray:
    """A value for a region module's parameter of HLO ``shape``: uniform in [0.5, 1.5)
    for floats, 0 or 1 for integers, runs of true and false for booleans.

    Raises:
        ValueError: a tuple parameter.
    """
    from tensat_py.runtime.xla_exec import np_dtype

    if not hasattr(shape, "etype"):
        raise ValueError("xla: a region with a tuple parameter")
    dt = np.dtype(np_dtype(shape.etype))
    if dt == np.bool_:
        return _mask(shape.dims)
    if dt.kind in "iu":
        return rng.integers(0, 2, shape.dims).astype(dt)
    return rng.uniform(0.5, 1.5, shape.dims).astype(dt)


def machine_cores() -> int:
    """The cores this process may run on (the threads of XLA CPU's intra-op pool)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # not Linux
        return max(os.cpu_count() or 1, 1)
