"""The ``profile`` cost model: every distinct operator measured once on the real device.

As TASO (Jia et al., SOSP 2019) and Tensat (Yang et al., MLSys 2021) do with cuDNN, each
distinct (operator, parameters, operand and output types, operand constant flags) is run
alone on the device, timed, and the figure cached (:mod:`tensat_py.cost.database`, keyed
by a device fingerprint and the operator's signature). A program's cost is the sum of its
operators' figures; constant (weight-only) nodes and operators that launch no kernel cost
0, as in the roofline model.

Backends:

* ``onnxruntime`` (CPU default): a one-operator ONNX model written by the operator's own
  ``to_onnx`` (through the exporter, :func:`tensat_py.frontends.onnx.to_model`) with
  constant operands as initializers, run in a session with the ORT runner's settings
  (:func:`tensat_py.runtime.ort_exec.session`: ``ORT_ENABLE_ALL``, intra-op spinning off)
  through IO binding (inputs bound once, outputs left on the device: no copies are timed).
  A session call costs more than the same kernel inside a whole model (binding, dispatch
  of ``run``); that overhead is calibrated once per device (chains of 1 and 16 one-element
  ``Neg`` nodes: the slope is the per-node cost inside a model, the intercept the call
  overhead) and subtracted, so a figure is ``max(median - call overhead, per-node cost)``.
* ``numpy`` (CPU): the operator's reference ``evaluate`` on NumPy arrays.
* ``cupy`` (GPU): the same ``evaluate`` on CuPy arrays (NumPy functions dispatch to CuPy
  through NEP 18 ``__array_function__``), timed with CUDA events
  (``cupy.cuda.Event``, ``cupy.cuda.get_elapsed_time``). NumPy and CuPy share one
  implementation, :class:`ArrayBackend`, generic over the array module.

Runtime fusion (onnxruntime): inside a whole model, onnxruntime's graph optimisations
(``ORT_ENABLE_ALL``; its documented ConvActivationFusion, NCHWc Conv+Sum fusion,
MatMulAddFusion / Gemm+activation fusion) fold some operators into the kernel before them,
so they cost almost nothing there while a one-operator session times them in full. The
onnxruntime backend therefore prices a node that onnxruntime fuses (:func:`ort_fused`,
read from the producers of its operands, :attr:`~tensat_py.cost.base.CostContext.producers`)
at the calibrated per-node cost instead of its one-operator time; an activation fused
into a convolution at a calibrated share of its one-operator time
(:meth:`ProfileCostModel.fused_share`: the convolution saves the activation's memory
traffic, not its arithmetic).

NCHWc layout (onnxruntime): a ``split`` of a convolution's output leaves onnxruntime's
blocked layout and its parts are reordered back, as does a broadcast squeeze-excite gate;
:mod:`tensat_py.cost.layout` prices those reorders (measured alone, cached) on top of the
operator's own figure, and a nearest ``resize`` that onnxruntime runs as its NCHWc
``Upsample`` as that kernel (measured alone in NCHWc); a whole
program's price (:class:`~tensat_py.cost.ort_program.OrtProgram`) has the reorders of its
NCHWc layout in place of those the convolutions' and pools' figures hold.

Each measurement: ``warmup`` untimed runs, then repetitions until about ``target_seconds``
have been spent (between ``min_reps`` and ``max_reps``); the median, the spread
(inter-quartile range) and the lower quartile are stored. Each new signature is measured
in ``passes`` (2) sessions, the passes over a batch in alternating order, and the pass
with the lowest lower quartile is kept; onnxruntime is warmed up for
:data:`WARM_UP_SECONDS` once per process first. The cost is the lower quartile:
on a shared machine the slow repetitions are other processes taking the cores, and the
lower quartile is far more repeatable than the median (re-measuring a convolution under
load moved its median by 3x and its lower quartile by a few per cent).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tensat_py import ops
from tensat_py.cost import layout
from tensat_py.cost.base import (
    SHARED,
    CostContext,
    GpuUnavailableError,
    OpCostModel,
    biased_conv,
    conv_folded,
    opdef,
    operand_flags,
)
from tensat_py.cost.database import ProfileDatabase, Record
from tensat_py.cost.ort_program import OrtProgram, ReorderPrice
from tensat_py.cost.residency import (
    BandwidthCurve,
    ColdWeights,
    last_level_cache_bytes,
    non_decreasing,
)
from tensat_py.graph import Graph, TensorType

__all__ = [
    "Measurement",
    "Timer",
    "PerfTimer",
    "CudaEventTimer",
    "time_callable",
    "Backend",
    "OrtBackend",
    "ArrayBackend",
    "numpy_backend",
    "cupy_backend",
    "signature",
    "canonical",
    "ort_sum",
    "fingerprint",
    "ProfileCostModel",
    "GPU_DEVICES",
    "GpuUnavailableError",
    "OVERHEAD_SIGNATURE",
    "ort_fused",
    "one_op_graph",
]

#: Device names that select the CuPy backend (the roofline GPU presets, or any GPU).
GPU_DEVICES = ("gpu", "cuda", "t4", "a100", "h100")

#: Signature under which the ORT call-overhead calibration is cached.
OVERHEAD_SIGNATURE = '{"calibration":"onnxruntime call overhead"}'
#: Prefix of the signatures under which the fused-activation shares are cached (one record
#: per activation, the share in ``low``; :meth:`ProfileCostModel.fused_share`). It names
#: the estimator (:func:`fused_share_estimate`), so shares a cache holds from another one
#: are measured again.
FUSED_SHARE_SIGNATURE = '{"calibration":"fused activation share","estimator":"paired","op":'


def fused_share_estimate(
    conv: Sequence[float], both: Sequence[float], alone: Sequence[float]
) -> float:
    """The share of its own time that an activation adds fused into a convolution, from
    interleaved rounds of seconds: round ``r`` timed the convolution alone (``conv[r]``),
    with the activation (``both[r]``) and the activation alone (``alone[r]``).

    It is the median over rounds of ``both[r] - conv[r]`` over the median of ``alone``,
    clipped to [0, 2]. Each difference is taken within one round, so a drift of the
    machine's speed over the rounds cancels; the difference of two separate statistics
    does not. Measured so (2026-11-26, 8 calibrations of 60 rounds each): ``Relu`` spread
    0.15 (standard deviation) against 0.23 with lower quartiles, ``Sigmoid`` 0.10 against
    0.17.

    Raises:
        ValueError: the three sequences are empty or of different lengths.
    """
    if not conv or not len(conv) == len(both) == len(alone):
        raise ValueError(
            f"profile: fused-share rounds of lengths {len(conv)}, {len(both)}, {len(alone)}"
        )
    added = statistics.median(b - c for b, c in zip(both, conv, strict=True))
    return min(max(added / statistics.median(alone), 0.0), 2.0)


def fused_share_signature(op: str) -> str:
    """The cache signature of activation ``op``'s fused share."""
    return FUSED_SHARE_SIGNATURE + json.dumps(op) + "}"


#: Prefix of the signatures under which the memory-bandwidth calibration is cached (one
#: record per weight size: bytes per second in ``low``).
BANDWIDTH_SIGNATURE = '{"calibration":"memory bandwidth"'
#: Matrix sides ``n`` of the bandwidth calibration's ``n x n`` float32 weights.
BANDWIDTH_SIDES = (256, 512, 1024, 2048)
#: Rounds of the bandwidth calibration: every size is timed once per round, the sizes
#: interleaved, and each size's figure is the median over rounds. Memory bandwidth on a
#: shared machine drifts from minute to minute (one calibration of this 2-core machine gave
#: 21.6 GB/s at 4 MiB and 24.3 at 1 MiB, the next three rounds 30-33 and 27-28), and a merge
#: pays or not by the ratio between sizes, which one slow moment inverts.
BANDWIDTH_ROUNDS = 3


def bandwidth_signature(n: int) -> str:
    """The cache signature of the bandwidth calibration at ``n x n`` float32 weights (the
    round count is part of it: a calibration of another protocol is not reused)."""
    return f'{BANDWIDTH_SIGNATURE},"n":{int(n)},"rounds":{BANDWIDTH_ROUNDS}}}'


def cached_bandwidth(db: ProfileDatabase, fp: str) -> BandwidthCurve | None:
    """The bandwidth curve the cache holds for device ``fp`` (one point per
    :data:`BANDWIDTH_SIDES` entry, made non-decreasing in the weight's size:
    :func:`~.residency.non_decreasing`), or ``None`` while any point is missing."""
    sigs = [bandwidth_signature(n) for n in BANDWIDTH_SIDES]
    got = db.get(fp, sigs)
    if not all(s in got for s in sigs):
        return None
    rates = non_decreasing([got[s].low for s in sigs])
    return BandwidthCurve([(n * n * 4, r) for n, r in zip(BANDWIDTH_SIDES, rates, strict=True)])


def figure(low: float, call: float, per_node: float) -> float:
    """A one-operator measurement (seconds, its lower quartile ``low``) as the cost of the
    operator inside a model: less the session ``call`` overhead, at least the ``per_node``
    cost (:meth:`OrtBackend.overhead`)."""
    return max(low - call, per_node)


def _low(m: Measurement) -> float:
    return m.low


def is_calibration(op: str) -> bool:
    """Whether a cache record of operator name ``op`` is a calibration (call overhead,
    bandwidth, NCHWc block and reorders: ``__name__``), not an operator's figure."""
    return op.startswith("__") and op.endswith("__")


#: Bump when the measuring protocol changes (part of every fingerprint). 2: a process
#: warms up first, and each figure is the lowest of two passes
#: (:class:`ProfileCostModel` ``passes``). 3: boolean operands are masks in runs
#: (:func:`_mask`), not random.
PROTOCOL = 3

#: Seconds of untimed onnxruntime work before a process's first measurement: the first
#: one-operator sessions of a process ran 25-50 % slow (a 1x1 convolution of 32 channels
#: at 80x80: 211 us, then 153 and 137 us; after 0.5 s of warm-up, 107-124 us), and that
#: figure would be cached for good.
WARM_UP_SECONDS = 0.5
_warmed_up = False


# ============================================================================ timing
@dataclass(frozen=True)
class Measurement:
    """One operator's timing.

    Attributes:
        median: median seconds over the repetitions.
        spread: inter-quartile range, seconds.
        reps: timed repetitions.
        low: lower quartile, seconds: the figure priced with, as the slow repetitions are
            mostly other work taking the cores (the machine is shared).
    """

    median: float
    spread: float
    reps: int
    low: float


class Timer(Protocol):
    """Times one call of a function, in seconds."""

    def __call__(self, fn: Callable[[], Any]) -> float: ...


class PerfTimer:
    """Wall-clock timer (``time.perf_counter``) for CPU work."""

    def __call__(self, fn: Callable[[], Any]) -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t


class CudaEventTimer:
    """CUDA-event timer for CuPy work (``cupy.cuda.Event`` recorded on the current stream
    around the call; ``end.synchronize()``; ``cupy.cuda.get_elapsed_time`` in ms)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def __call__(self, fn: Callable[[], Any]) -> float:
        self._start.record()
        fn()
        self._end.record()
        self._end.synchronize()
        return self._cp.cuda.get_elapsed_time(self._start, self._end) / 1e3


#: Fewest timed calls of a work that takes long (``time_callable``'s ``long_seconds``).
LONG_REPS = 3


def time_callable(
    fn: Callable[[], Any],
    *,
    timer: Timer | None = None,
    warmup: int = 2,
    min_reps: int = 7,
    max_reps: int = 50,
    target_seconds: float = 0.05,
    deadline: float | None = None,
    long_seconds: float | None = None,
) -> Measurement:
    """Median and spread of ``fn``'s run time.

    Args:
        fn: the work (no arguments).
        timer: how one call is timed (default :class:`PerfTimer`).
        warmup: untimed calls first.
        min_reps: fewest timed calls.
        max_reps: most timed calls.
        target_seconds: timed calls stop after about this long once ``min_reps`` are done.
        deadline: ``time.monotonic()`` past which no call starts (None: none): the
            measurement then ends with the timed calls made so far, fewer than
            ``min_reps``; a work that takes seconds a call (a large convolution) is not
            run ``warmup + min_reps`` times past a measuring budget.
        long_seconds: for a work that takes long (None: no limit): no more warm-up calls
            once those made took this long, and no more timed calls once
            :data:`LONG_REPS` of them took this long, even below ``min_reps`` (a call of
            EfficientNet's largest convolution region takes about a second; 9 of them,
            in each of 5 tries, took ``tensat profile`` past 40 minutes).

    Raises:
        ValueError: ``min_reps < 1`` or ``max_reps < min_reps``.
        TimeoutError: the deadline passed before one timed call.
    """
    if min_reps < 1 or max_reps < min_reps:
        raise ValueError(
            f"time_callable: need 1 <= min_reps <= max_reps, got {min_reps}, {max_reps}"
        )
    timer = timer or PerfTimer()

    def late() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    warm = time.perf_counter()
    for _ in range(warmup):
        if late() or (long_seconds is not None and time.perf_counter() - warm >= long_seconds):
            break
        fn()
    times: list[float] = []
    spent = 0.0
    while len(times) < max_reps and (len(times) < min_reps or spent < target_seconds):
        if long_seconds is not None and len(times) >= LONG_REPS and spent >= long_seconds:
            break
        if late():
            if not times:
                raise TimeoutError("time_callable: the deadline passed before a timed call")
            break
        t = timer(fn)
        times.append(t)
        spent += t
    q = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else [times[0]] * 3
    return Measurement(statistics.median(times), q[2] - q[0], len(times), q[0])


# ============================================================================ signature
def _canon(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_canon(x) for x in v]
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _type_json(t: Any) -> Any:
    if isinstance(t, TensorType):
        return [list(t.shape), t.dtype]
    return [_type_json(p) for p in t]


# ``SAME_KERNEL`` (operators measured under another operator's name: the declarations'
# ``OpDef.kernel``, TASO's ``ewadd`` / ``ewmul``, equal shapes, are ONNX ``Add`` / ``Mul``
# as ``add`` / ``mul`` are) and ``COMMUTATIVE`` (``OpDef.commutative``) are computed from
# the registry on first access (module ``__getattr__``).


def __getattr__(name: str) -> Any:
    if name == "SAME_KERNEL":
        return {n: d.kernel for n, d in ops.all_ops().items() if d.kernel}
    if name == "COMMUTATIVE":
        return frozenset(n for n, d in ops.all_ops().items() if d.commutative and not d.kernel)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _commutative(op: str) -> bool:
    """Whether ``op``'s two operands may be put in either order (``OpDef.commutative``).
    Their ONNX kernels do the same work in either order (``Add``, ``Mul``, ``Max``,
    ``Min``, ``Equal``): onnxruntime, 2 threads, 300 interleaved runs, ``x op c`` against
    ``c op x`` for a scalar, a bias row, a channel vector and an equal shape: within 4 %
    of each other (2026-11-26)."""
    try:
        return ops.get(op).commutative
    except KeyError:
        return False


#: Operators measured in a one-operator model of a newer opset than the exporter's
#: default (17), where they are one ONNX operator. ``gelu_tanh``: before opset 20 the
#: exporter writes the chain onnxruntime's FastGeluFusion fuses into one ``FastGelu``,
#: except where the chain ends at a model output, as it would in a one-operator model;
#: ``Gelu`` (approximate="tanh", opset 20) runs as fast (0.24 and 0.25 ms on a
#: [1, 512, 508] tensor, 2026-11-26; the unfused chain 0.75 ms).
MEASURE_OPSET = {"gelu_tanh": 20}


def canonical(ctx: ops.OpContext) -> CostContext:
    """The application that ``ctx`` is measured as: the kernel's operator name
    (:func:`tensat_py.ops.kernel_of`), and for a commutative operator
    (``OpDef.commutative``) its two operands (with their constant flags and
    producers) in a fixed order. Measured apart, ``mul(x, 0.5)`` and ``mul(0.5, x)`` on a
    1 x 128 x 1024 tensor were priced 39 and 23 us (timing noise: the same kernel, 64 us
    either way end to end), and the extraction picked every cheaper-looking variant that
    commutativity puts in the e-graph: GPT-2's candidate was predicted 5.1 % faster and
    measured 10 % slower (bench/onnx_real.md). A context that needs no change is returned
    as a :class:`~tensat_py.cost.base.CostContext` with the same fields."""
    op = ops.kernel_of(ctx.op)
    flags = operand_flags(ctx)
    producers = tuple(getattr(ctx, "producers", ())) or (frozenset(),) * len(ctx.inputs)
    operands = list(zip(ctx.inputs, flags, producers, strict=True))
    if _commutative(op) and len(operands) == 2:
        operands.sort(key=lambda o: json.dumps([_type_json(o[0]), bool(o[1])]))
    fields = {f.name: getattr(ctx, f.name) for f in dataclasses.fields(ops.OpContext)}
    fields.update(op=op, inputs=[o[0] for o in operands])
    return CostContext(
        **fields,
        operand_constant=tuple(o[1] for o in operands),
        producers=tuple(o[2] for o in operands) if getattr(ctx, "producers", ()) else (),
    )


def signature(ctx: ops.OpContext) -> str:
    """The canonical JSON of one operator application (:func:`canonical`): operator,
    parameters (sorted), operand types with their constant flags, output type. Equal
    signatures are measured once."""
    ctx = canonical(ctx)
    oc = operand_flags(ctx)
    doc = {
        "op": ctx.op,
        "params": {k: _canon(ctx.params[k]) for k in sorted(ctx.params)},
        "inputs": [[_type_json(t), bool(c)] for t, c in zip(ctx.inputs, oc, strict=True)],
        "output": _type_json(ctx.output),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint(info: Mapping[str, Any]) -> str:
    """A short stable hash (16 hex digits) of a device description."""
    text = json.dumps(dict(info), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _version(mod: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(mod)
    except PackageNotFoundError:
        return "absent"


# ============================================================================ backends
class Backend(Protocol):
    """Runs one operator application on a device, timed."""

    name: str

    def info(self) -> dict[str, Any]:
        """The device description the fingerprint hashes."""
        ...

    def measure(self, ctx: ops.OpContext) -> Measurement:
        """Time ``ctx`` alone on the device.

        Raises:
            ValueError: the operator cannot run here (names it).
        """
        ...


def _mask(shape: Sequence[int]) -> np.ndarray:
    """A boolean operand for timing, true in runs as real masks are: a causal (lower
    triangular) mask over the last two axes, ``[..., i, j]`` true where ``j <= i``; a vector
    true on its first half; a scalar true.

    Random booleans make onnxruntime's ``Where`` mispredict its branches: on
    [1, 4, 128, 128] float32 (2 threads) it ran 357 us on a random condition, 135 us on a
    causal mask, 107 us on an all-false one and 125 us as ``IsNaN`` + ``Where``
    (2026-11-26). GPT-2's four ``Where`` ran 72 us each inside the model and were priced
    303 us each from random conditions."""
    shape = tuple(int(d) for d in shape)
    if not shape:
        return np.ones((), bool)
    if len(shape) == 1:
        return np.arange(shape[0]) < (shape[0] + 1) // 2
    rows, cols = shape[-2:]
    causal = np.arange(cols)[None, :] <= np.arange(rows)[:, None]
    return np.broadcast_to(causal, shape).copy()


def _positive(rng: np.random.Generator, t: TensorType) -> np.ndarray:
    """Values for timing: floats in [0.5, 1.5] (valid for log, sqrt, division, batch-norm
    variances; no denormals), integers in {0, 1}, booleans in runs (:func:`_mask`)."""
    if t.dtype == "bool":
        return _mask(t.shape)
    if t.dtype.startswith("int") or t.dtype.startswith("uint"):
        return rng.integers(0, 2, t.shape).astype(t.dtype)
    a = rng.uniform(0.5, 1.5, t.shape)
    if t.dtype == "bfloat16":
        import ml_dtypes

        return a.astype(ml_dtypes.bfloat16)
    return a.astype(t.dtype)


def one_op_graph(ctx: ops.OpContext) -> Graph:
    """A graph holding only ``ctx``'s operator: one leaf per operand (a ``weight`` when the
    operand is constant, else an ``input``), the operator, its output.

    Raises:
        ValueError: an operand that is a pair (no kernel reads one), or an opaque operator
            without its payload (names it).
    """
    g = Graph()
    ids = []
    for k, (t, const) in enumerate(zip(ctx.inputs, operand_flags(ctx), strict=True)):
        if not isinstance(t, TensorType):
            raise ValueError(f"profile: operator `{ctx.op}` reads a pair; cannot run it alone")
        add = g.add_weight if const else g.add_input
        ids.append(add(f"{'w' if const else 'x'}{k}", t.shape, t.dtype))
    if ctx.op == "opaque":
        key = str(ctx.params["type"]).rpartition("@")[0]
        payload = ctx.graph.meta.get("opaque", {}).get(key) if ctx.graph is not None else None
        if payload is None:
            raise ValueError(
                f"profile: opaque operator `{ctx.params['type']}` has no payload here "
                "(price the graph that holds it first)"
            )
        g.meta["opaque"] = {key: payload}
    try:
        out = g.add_node(ctx.op, dict(ctx.params), ids, name="op")
    except ValueError as e:
        raise ValueError(f"profile: cannot build operator `{ctx.op}` alone: {e}") from None
    g.outputs = [out]
    return g


def _split_model(ctx: ops.OpContext) -> Any:
    """The ONNX model of one ``split``: input ``x``, an ONNX ``Split`` into the two parts of
    ``ctx.output`` along ``ctx.params["axis"]`` (opset 17)."""
    from onnx import TensorProto, helper, numpy_helper

    from tensat_py.frontends.onnx import DTYPE_TO_ELEM

    x = ctx.inputs[0]
    parts = ctx.output
    assert isinstance(x, TensorType) and isinstance(parts, tuple)
    axis = int(ctx.params["axis"])
    elem = DTYPE_TO_ELEM.get(x.dtype, TensorProto.FLOAT)
    sizes = numpy_helper.from_array(
        np.asarray([p.shape[axis] for p in parts], dtype=np.int64), "sizes"
    )
    graph = helper.make_graph(
        [helper.make_node("Split", ["x", "sizes"], ["y0", "y1"], axis=axis)],
        "split",
        [helper.make_tensor_value_info("x", elem, list(x.shape))],
        [helper.make_tensor_value_info(f"y{k}", elem, list(p.shape)) for k, p in enumerate(parts)],
        initializer=[sizes],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


class OrtBackend:
    """onnxruntime CPU: a one-operator session per signature (see the module docstring).

    Args:
        threads: intra-op threads (0: onnxruntime's default, one per core).
        warmup, min_reps, max_reps, target_seconds: see :func:`time_callable`.
    """

    name = "onnxruntime"

    def __init__(
        self,
        threads: int = 0,
        *,
        warmup: int = 2,
        min_reps: int = 7,
        max_reps: int = 50,
        target_seconds: float = 0.05,
    ) -> None:
        self.threads = threads
        self.timing = {
            "warmup": warmup,
            "min_reps": min_reps,
            "max_reps": max_reps,
            "target_seconds": target_seconds,
        }

    def info(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "threads": self.threads or os.cpu_count(),
            "onnxruntime": _version("onnxruntime"),
            "onnx": _version("onnx"),
            "tensat_py": _version("tensat-py"),
            "protocol": PROTOCOL,
        }

    def _session(self, model: Any) -> Any:
        from tensat_py.runtime import ort_exec

        return ort_exec.session(model, threads=self.threads, level="all", spinning=False)

    def _bound_call(self, sess: Any, feeds: Mapping[str, np.ndarray]) -> Callable[[], Any]:
        import onnxruntime as ort

        binding = sess.io_binding()
        keep = []
        for name, arr in feeds.items():
            v = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr))
            keep.append(v)
            binding.bind_ortvalue_input(name, v)
        for o in sess.get_outputs():
            binding.bind_output(o.name, "cpu")

        def call() -> Any:
            sess.run_with_iobinding(binding)
            return keep

        return call

    def warm_up(self) -> None:
        """Runs a 1x1 convolution (32 channels, 56x56) untimed for
        :data:`WARM_UP_SECONDS`, once per process, before the first measurement
        (:meth:`measure`, :meth:`calibrate`, :meth:`reorder`, :meth:`weight_stream`)."""
        global _warmed_up
        if _warmed_up or WARM_UP_SECONDS <= 0:
            return
        _warmed_up = True
        x, y = TensorType((1, 32, 56, 56), "float32"), TensorType((32, 32, 1, 1), "float32")
        conv = CostContext("conv2d", {"stride_h": 1, "stride_w": 1, "pad": 0, "act": 0}, [x, y], x)
        call = self._one_op_call(conv)
        end = time.perf_counter() + WARM_UP_SECONDS
        while time.perf_counter() < end:
            call()

    def _one_op_call(self, ctx: ops.OpContext) -> Callable[[], Any]:
        """A bound call of a one-operator session of ``ctx`` on random positive inputs.

        Raises:
            ValueError: the operator cannot run on onnxruntime (names it).
        """
        from tensat_py.frontends.onnx import to_model

        rng = np.random.default_rng(0)
        g = one_op_graph(ctx)
        weights = {g.nodes[i].name: _positive(rng, g.nodes[i].type) for i in g.weights()}
        try:
            model = to_model(g, weights=weights, check=False, opset=MEASURE_OPSET.get(ctx.op))
            sess = self._session(model)
        except Exception as e:
            raise ValueError(
                f"profile: operator `{ctx.op}` cannot run on onnxruntime: {type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}"
            ) from None
        wanted = {i.name for i in sess.get_inputs()}
        feeds = {
            g.nodes[i].name: _positive(rng, g.nodes[i].type)
            for i in g.inputs()
            if g.nodes[i].name in wanted
        }
        return self._bound_call(sess, feeds)

    def measure(self, ctx: ops.OpContext) -> Measurement:
        self.warm_up()
        rng = np.random.default_rng(0)
        if ctx.op == "split":  # the language builds a split only over a concat
            x = ctx.inputs[0]
            assert isinstance(x, TensorType)
            feeds = {"x": _positive(rng, x)}
            return time_callable(
                self._bound_call(self._session(_split_model(ctx)), feeds), **self.timing
            )
        return time_callable(self._one_op_call(ctx), **self.timing)

    def calibrate(self) -> tuple[float, float]:
        """``(call overhead, per-node cost)`` in seconds: one-element ``Neg`` chains of
        length 1 and 16, timed like an operator; the slope is what one more node costs
        inside a model, the intercept what a session call adds."""
        self.warm_up()
        from onnx import TensorProto, helper

        def chain(n: int) -> Any:
            nodes = [
                helper.make_node("Neg", [f"t{k}"], [f"t{k + 1}"], name=f"n{k}") for k in range(n)
            ]
            graph = helper.make_graph(
                nodes,
                "chain",
                [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1])],
                [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1])],
            )
            m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
            m.ir_version = 8
            return m

        timing = dict(self.timing, min_reps=31, max_reps=200, target_seconds=0.1)
        feeds = {"t0": np.ones(1, np.float32)}
        t1 = time_callable(self._bound_call(self._session(chain(1)), feeds), **timing).low
        t16 = time_callable(self._bound_call(self._session(chain(16)), feeds), **timing).low
        per_node = max((t16 - t1) / 15, 0.0)
        return max(t1 - per_node, 0.0), per_node

    def fused_activation_share(self, op: str) -> float:
        """What an activation ``op`` (of :data:`FUSED_ACTIVATIONS`) fused into a convolution
        adds to it, as a share of the activation run alone: a 3x3 convolution of 64
        channels on [1, 64, 24, 96] float32 with and without the activation, and the
        activation alone on its output, timed in :data:`FUSED_SHARE_ROUNDS` interleaved
        rounds (:func:`fused_share_estimate`).

        onnxruntime's NCHWc convolution applies the activation to each output block, so
        it saves the activation's memory traffic, not its arithmetic. Measured so
        (2026-11-26, 2 threads): ``Relu`` added 3-44 us, a share of 0.04-0.34; ``HardSwish``
        64-242 us, 0.7-1.2, as much as it costs alone; ``HardSigmoid``, ``Sigmoid`` and
        ``Tanh`` 0.3-1.1.

        Raises:
            ValueError: ``op`` is not one of :data:`FUSED_ACTIVATIONS`.
        """
        if op not in FUSED_ACTIVATIONS:
            raise ValueError(f"profile: no fused-activation calibration for `{op}`")
        self.warm_up()
        from onnx import TensorProto, helper, numpy_helper

        onnx_op, attrs, extra = FUSED_ACTIVATIONS[op]
        rng = np.random.default_rng(0)
        shape = [1, 64, 24, 96]
        inits = [
            numpy_helper.from_array(
                (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32), "w"
            ),
            *(numpy_helper.from_array(np.array(v, np.float32), k) for k, v in extra),
        ]

        def model(conv: bool, act: bool) -> Any:
            nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])] if conv else []
            src = "c" if conv else "x"
            if act:
                ins = [src, *(k for k, _ in extra)]
                nodes.append(helper.make_node(onnx_op, ins, ["y"], **attrs))
            else:
                nodes[-1].output[0] = "y"
            used = {i for n in nodes for i in n.input}
            graph = helper.make_graph(
                nodes,
                "fused",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                [t for t in inits if t.name in used],
            )
            m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
            m.ir_version = 8
            return m

        feeds = {"x": rng.uniform(-1.0, 1.0, shape).astype(np.float32)}
        calls = [
            self._bound_call(self._session(model(c, a)), feeds)
            for c, a in ((True, False), (True, True), (False, True))
        ]
        times: list[list[float]] = [[], [], []]
        for call in calls:
            call()
        for r in range(FUSED_SHARE_ROUNDS):
            for k in range(3) if r % 2 == 0 else range(2, -1, -1):
                t0 = time.perf_counter()
                calls[k]()
                times[k].append(time.perf_counter() - t0)
        return fused_share_estimate(*times)

    def nchwc_block(self) -> int:
        """onnxruntime's NCHWc block size here (0: none), :func:`layout.nchwc_block`."""
        return layout.nchwc_block(self.threads)

    def reorder(self, kind: str, shape: Sequence[int], block: int = 0) -> Measurement:
        """Times one NCHWc copy alone at NCHWc block ``block``: a ``Reorder{Input,Output}``
        (``kind`` ``"input"``/``"output"``) of float32 NCHW ``shape``, or an ``Upsample``
        (``"upsample"``, :data:`layout.Reorder`) (:func:`layout.measure_reorder`)."""
        self.warm_up()
        return layout.measure_reorder(
            kind, shape, self._session, self._bound_call, self.timing, block
        )

    def weight_stream(self, n: int, count: int) -> Measurement:
        """Times a chain of ``count`` matmuls ``[1, n] x [n, n]`` with distinct constant
        float32 weights (initializers), for :meth:`ProfileCostModel.bandwidth`."""
        from onnx import helper, numpy_helper

        self.warm_up()
        rng = np.random.default_rng(0)
        inits = [
            numpy_helper.from_array(rng.uniform(0.5, 1.5, (n, n)).astype(np.float32), f"w{k}")
            for k in range(count)
        ]
        nodes = [
            helper.make_node("MatMul", [f"t{k}", f"w{k}"], [f"t{k + 1}"]) for k in range(count)
        ]
        graph = helper.make_graph(
            nodes,
            "stream",
            [helper.make_tensor_value_info("t0", 1, [1, n])],
            [helper.make_tensor_value_info(f"t{count}", 1, [1, n])],
            inits,
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        feeds = {"t0": np.full((1, n), 1.0 / n, np.float32)}
        return time_callable(self._bound_call(self._session(m), feeds), **self.timing)


class ArrayBackend:
    """The operator's reference ``evaluate`` on arrays of an array module (NumPy or CuPy:
    one implementation for both), timed by ``timer``.

    Args:
        xp: the array module (``numpy`` or ``cupy``).
        timer: how one call is timed (:class:`PerfTimer`, :class:`CudaEventTimer`).
        info: the device description for the fingerprint.
        warmup, min_reps, max_reps, target_seconds: see :func:`time_callable`.
    """

    def __init__(
        self,
        xp: Any,
        timer: Timer,
        info: Mapping[str, Any],
        *,
        warmup: int = 2,
        min_reps: int = 7,
        max_reps: int = 50,
        target_seconds: float = 0.05,
    ) -> None:
        self.xp = xp
        self.timer = timer
        self.name = str(info.get("backend", xp.__name__))
        self._info = dict(info)
        self.timing = {
            "warmup": warmup,
            "min_reps": min_reps,
            "max_reps": max_reps,
            "target_seconds": target_seconds,
        }

    def info(self) -> dict[str, Any]:
        return dict(self._info)

    def measure(self, ctx: ops.OpContext) -> Measurement:
        d = opdef(ctx.op, "profile")
        rng = np.random.default_rng(0)
        args: list[Any] = []
        for t in ctx.inputs:
            if not isinstance(t, TensorType):
                raise ValueError(f"profile: operator `{ctx.op}` reads a pair; cannot run it alone")
            args.append(self.xp.asarray(_positive(rng, t)))
        # The reference semantics may need the graph (opaque payloads): keep ctx as given.
        run_ctx = ops.OpContext(
            op=ctx.op,
            params=ctx.params,
            inputs=ctx.inputs,
            output=ctx.output,
            constant=ctx.constant,
            graph=ctx.graph,
            name=ctx.name,
        )
        try:
            d.evaluate(run_ctx, args)
        except Exception as e:
            raise ValueError(
                f"profile: operator `{ctx.op}` cannot run on {self.name}: {type(e).__name__}: {e}"
            ) from None
        return time_callable(lambda: d.evaluate(run_ctx, args), timer=self.timer, **self.timing)

    def weight_stream(self, n: int, count: int) -> Measurement:
        """Times a chain of ``count`` matmuls ``[1, n] x [n, n]`` with distinct float32
        weights, for :meth:`ProfileCostModel.bandwidth`."""
        xp = self.xp
        rng = np.random.default_rng(0)
        ws = [xp.asarray(rng.uniform(0.5, 1.5, (n, n)).astype(np.float32)) for _ in range(count)]
        x0 = xp.asarray(np.full((1, n), 1.0 / n, np.float32))

        def chain() -> Any:
            x = x0
            for w in ws:
                x = x @ w
            return x

        return time_callable(chain, timer=self.timer, **self.timing)


def numpy_backend(**timing: Any) -> ArrayBackend:
    """:class:`ArrayBackend` on NumPy with a wall-clock timer."""
    info = {
        "backend": "numpy",
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "numpy": np.__version__,
        "tensat_py": _version("tensat-py"),
        "protocol": PROTOCOL,
    }
    return ArrayBackend(np, PerfTimer(), info, **timing)


def cupy_backend(device_id: int = 0, **timing: Any) -> ArrayBackend:
    """:class:`ArrayBackend` on CuPy (GPU ``device_id``) with CUDA-event timing; the
    fingerprint holds the GPU's name, driver and runtime versions and CuPy's version.

    Raises:
        ValueError: CuPy is not installed or no CUDA GPU is visible.
    """
    try:
        import cupy
    except ImportError:
        raise GpuUnavailableError(
            "a GPU device needs CuPy (pip install cupy-cuda12x) and a CUDA GPU; no CuPy here"
        ) from None
    try:
        cupy.cuda.Device(device_id).use()
        props = cupy.cuda.runtime.getDeviceProperties(device_id)
        name = props["name"]
        info = {
            "backend": "cupy",
            "gpu": name.decode() if isinstance(name, bytes) else str(name),
            "driver": cupy.cuda.runtime.driverGetVersion(),
            "runtime": cupy.cuda.runtime.runtimeGetVersion(),
            "cupy": cupy.__version__,
            "tensat_py": _version("tensat-py"),
            "protocol": PROTOCOL,
        }
    except Exception as e:  # cupy.cuda.runtime.CUDARuntimeError and friends
        raise GpuUnavailableError(f"no usable CUDA GPU for CuPy: {e}") from None
    return ArrayBackend(cupy, CudaEventTimer(cupy), info, **timing)


# ============================================================================ fusion
#: Operators the TASO language treats as views (no kernel, cost 0) that onnxruntime runs as
#: a kernel: ``split`` becomes an ONNX ``Split``, which copies each part out (and in a CNN
#: also takes the tensor out of the blocked NCHWc layout, which is not priced; see
#: docs/cost-models.md). On onnxruntime they are measured like any operator.
ORT_KERNELS = frozenset({"split"})
#: Views (no kernel in the TASO language) that onnxruntime runs as a node aliasing its
#: input: a non-constant ``reshape`` stays an ONNX ``Reshape`` (or ``Squeeze`` /
#: ``Unsqueeze``) node in onnxruntime's optimised graph, which copies nothing but is
#: dispatched like any node. Priced at the per-node cost (:func:`ort_adjust`), not measured:
#: 16 ``Reshape`` between 16 ``Relu`` on [1, 8, 16, 16] added 0.47-0.65 us each
#: (interleaved, 2026-11-26), where the per-node calibration gave 0.66 us. The reshapes
#: that flatten a MatMul's operand to 2-D or restore its output are not: the ONNX exporter
#: removes them (:func:`ort_node`).
ORT_NODES = frozenset({"reshape"})


def ort_node(ctx: ops.OpContext) -> bool:
    """Whether ``ctx`` is a view onnxruntime runs as a node (:data:`ORT_NODES`): not
    constant, and not a reshape between 2-D and a higher rank that keeps the last axis
    (``[a, b, k]`` to ``[a * b, k]`` or back), which the exporter's peephole pass removes
    around a ``MatMul`` (:mod:`tensat_py.frontends.onnx.peephole`)."""
    if ctx.op not in ORT_NODES or ctx.constant:
        return False
    src, dst = ctx.inputs[0].shape, ctx.output.shape
    ranks = sorted((len(src), len(dst)))
    flatten = ranks[0] == 2 and ranks[1] > 2 and src[-1:] == dst[-1:]
    return not flatten


def ort_priced(ctx: ops.OpContext) -> bool:
    """Whether ``ctx`` costs time on onnxruntime (CPU): not constant, and an operator that
    launches a kernel (the registry's ``launches_kernel``) or one of :data:`ORT_KERNELS`."""
    if ctx.constant:
        return False
    return opdef(ctx.op, "profile").launches_kernel or ctx.op in ORT_KERNELS


#: TASO activation code -> the language's activation operator.
_ACT_OPS = {1: "sigmoid", 2: "relu", 3: "tanh"}


def ort_kernel_of(ctx: ops.OpContext) -> tuple[ops.OpContext, int, ops.OpContext | None]:
    """The operator application onnxruntime's kernel for ``ctx`` is measured as, the number
    of fused nodes to add at the per-node cost, and the application of a separate kernel
    onnxruntime runs after it (None when there is none).

    * A convolution carrying an activation (``act``, Tensat's fused form) runs in
      onnxruntime as the plain convolution's kernel with the activation folded in
      (ConvActivationFusion), exactly as a convolution followed by its activation does: it
      is measured as the plain convolution, plus one per-node cost. Two signatures for one
      kernel would let measurement noise alone make a fusion look like a gain (SqueezeNet:
      the convolutions with ``act`` measured 20 % cheaper than the same convolutions
      without, predicted 1.117, measured 1.008).
    * A ``matmul`` carrying an activation is exported as ``MatMul`` then the activation,
      which onnxruntime does not fuse (only ``MatMul -> Add`` becomes a ``Gemm`` that takes
      one): it is priced as the plain ``matmul`` plus the activation on its output, each
      measured as it is elsewhere. Measured as its own signature, it made VGG-19's fused
      fully connected layers 7.6 ms cheaper by noise than the same program unfused.
    """
    act = int(ctx.params.get("act", 0) or 0) if ctx.op in ("conv2d", "matmul") else 0
    if not act:
        return ctx, 0, None
    plain = dataclasses.replace(ctx, params={**ctx.params, "act": 0})  # type: ignore[type-var]
    if ctx.op == "conv2d":
        return plain, 1, None
    after = ops.OpContext(_ACT_OPS[act], {}, [ctx.output], ctx.output, ctx.constant)
    return plain, 0, after


def ort_kernels(
    ctxs: Sequence[ops.OpContext],
) -> tuple[list[ops.OpContext], list[int], list[bool]]:
    """:func:`ort_kernel_of` of each of ``ctxs``: the applications to price and, per
    application, the fused nodes to add and whether a separate kernel follows it (see
    :func:`ort_adjust`). The separate kernels come after the ``len(ctxs)`` applications,
    one per application that has one, in order."""
    triples = [ort_kernel_of(c) for c in ctxs]
    after = [a for _, _, a in triples if a is not None]
    return (
        [c for c, _, _ in triples] + after,
        [n for _, n, _ in triples],
        [a is not None for _, _, a in triples],
    )


def ort_adjust(
    costs: Sequence[float],
    ctxs: Sequence[ops.OpContext],
    fused: Sequence[int],
    after: Sequence[bool],
    per_node: float,
    shares: Mapping[str, float] | None = None,
) -> list[float]:
    """onnxruntime's fusions applied to per-application figures (seconds): a view it runs
    as a node (:func:`ort_node`) costs ``per_node``; what it folds
    into its producer (:func:`ort_fused`) costs ``per_node``, or for an activation ``op``
    in ``shares`` that share of its own figure when that is more (the convolution applies
    it to its output: :meth:`ProfileCostModel.fused_share`); an application priced as a
    plainer kernel (:func:`ort_kernel_of`) adds ``per_node`` per fused node and, where
    ``after`` says so, the figure of the separate kernel after it. ``ctxs`` are the
    applications as given (with their producers); ``costs`` (the applications
    :func:`ort_kernels` listed, priced), ``fused`` and ``after`` come from
    :func:`ort_kernels`."""
    n = len(ctxs)
    shares = shares or {}
    out = [
        max(per_node, shares.get(c.op, 0.0) * x) if x > 0 and ort_fused(c) else x + k * per_node
        for x, c, k in zip(costs[:n], ctxs, fused, strict=True)
    ]
    for i, c in enumerate(ctxs):
        if ort_node(c):
            out[i] = max(out[i], per_node)
    extra = iter(costs[n:])
    for i, has in enumerate(after):
        if has:
            out[i] += next(extra)
    return out


#: The activations onnxruntime fuses into the convolution (or Gemm) before them, each with
#: its ONNX operator for the fused-activation calibration: ``(op_type, attributes, extra
#: constant inputs)``.
FUSED_ACTIVATIONS: dict[str, tuple[str, dict[str, Any], tuple[tuple[str, float], ...]]] = {
    "relu": ("Relu", {}, ()),
    "sigmoid": ("Sigmoid", {}, ()),
    "tanh": ("Tanh", {}, ()),
    "leaky_relu": ("LeakyRelu", {"alpha": 0.01}, ()),
    "clip": ("Clip", {}, (("lo", 0.0), ("hi", 6.0))),
    "hard_sigmoid": ("HardSigmoid", {}, ()),
    "hard_swish": ("HardSwish", {}, ()),
}
#: Activations onnxruntime fuses into the convolution (or Gemm) before them.
ORT_ACTIVATIONS = frozenset(FUSED_ACTIVATIONS)
#: Interleaved rounds of :meth:`OrtBackend.fused_activation_share`.
FUSED_SHARE_ROUNDS = 150


def ort_sum(op: str) -> bool:
    """Whether ``op`` is a sum onnxruntime fuses into the convolution (NCHWc Conv+Sum) or
    MatMul (Gemm) before it: an operator that runs as the ``add`` kernel (``add``,
    ``ewadd``)."""
    return ops.kernel_of(op) == "add"


def ort_fused(ctx: ops.OpContext) -> bool:
    """Whether onnxruntime (CPU, ``ORT_ENABLE_ALL``) folds ``ctx`` into its producer:

    * an activation whose operand a convolution without activation makes, or a sum over
      one (``Conv -> Add -> Relu`` is one NCHWc kernel), or a 2-D sum over a MatMul
      (``MatMul -> Add -> Relu`` becomes ``FusedGemm``);
    * a sum of two equal-shape operands one of which a convolution without activation
      makes (4-D output), or a MatMul (2-D output);
    * a convolution's output plus a constant per-channel bias (``(C, 1, 1)``): folded into
      the convolution's bias input (ConvAddFusion). The sum then counts as the convolution
      for what follows (``cost.base`` labels it ``conv2d``), so an activation or a second
      sum after it fuses too, as ``Conv(B) -> Add -> Relu`` does;
    * a ``batchnorm`` of constant parameters over a convolution's output: folded into its
      weights and bias (ConvBNFusion), and likewise counted as the convolution after.

    In an e-graph an operand's class may hold several producers; any that fuses counts. A
    producer labelled :data:`~tensat_py.cost.base.SHARED` (in a program, read by more than
    this node) fuses nothing.
    """
    prods = getattr(ctx, "producers", ())
    if not prods or not isinstance(ctx.output, TensorType):
        return False
    prods = tuple(frozenset() if SHARED in p else p for p in prods)
    nd = len(ctx.output.shape)
    if ctx.op in ORT_ACTIVATIONS and len(prods) >= 1:
        conv = {"conv2d", "ewadd<conv2d", "add<conv2d"}
        gemm = {"ewadd<matmul", "add<matmul"}
        return bool(prods[0] & conv) or (nd == 2 and bool(prods[0] & gemm))
    oc = getattr(ctx, "operand_constant", ())
    if ctx.op == "batchnorm" and len(oc) == len(ctx.inputs) == len(prods):
        operands = [(set(p), c, ()) for p, c in zip(prods, oc, strict=True)]
        return conv_folded("batchnorm", operands, ())
    if ort_sum(ctx.op) and len(ctx.inputs) == 2:
        a, b = ctx.inputs
        if (
            len(oc) == 2
            and len(prods) == 2
            and biased_conv(
                [(set(prods[i]), oc[i], getattr(t, "shape", ())) for i, t in enumerate(ctx.inputs)],
                ctx.output.shape,
            )
        ):
            return True
        if not (isinstance(a, TensorType) and isinstance(b, TensorType)) or a.shape != b.shape:
            return False
        for p in prods:
            if (nd == 4 and "conv2d" in p) or (nd == 2 and "matmul" in p):
                return True
    return False


# ============================================================================ the model
#: ``progress(done, total, op)`` after each new measurement.
Progress = Callable[[int, int, str], None]


class ProfileCostModel(ColdWeights, OrtProgram, OpCostModel):
    """Measured seconds per operator, cached (see the module docstring).

    On the CPU, a program whose weights outgrow the last-level cache is priced with cold
    weights: an operator costs at least its weights' bytes over the measured memory
    bandwidth (:mod:`tensat_py.cost.residency`).

    Args:
        device: ``"cpu"`` (the default backend is onnxruntime) or a GPU (``"gpu"``,
            ``"cuda"``, or a roofline GPU preset name: CuPy on GPU 0).
        backend: ``"onnxruntime"`` or ``"numpy"`` on CPU, ``"cupy"`` on GPU, or a
            :class:`Backend` object; default by device.
        db: the cache (a :class:`ProfileDatabase` or a path); default the user's cache.
        progress: called after each new measurement.
        threads: onnxruntime intra-op threads (0: its default).
        fusion: price what onnxruntime fuses into its producer at the per-node cost
            (:func:`ort_fused`), and a program's chains it runs as one kernel as that
            kernel, with the NCHWc reorders its layout adds
            (:class:`~tensat_py.cost.ort_program.OrtProgram`); onnxruntime backend only.
        passes: how many times each new signature is measured, each time in its own
            session, the passes over a batch in alternating order (default 2); the
            lowest of their lower quartiles is cached. One pass left some figures 2-2.5x
            too high (a large ``Concat``, a ``Resize``) on this shared 2-core machine.

    Raises:
        ValueError: an unknown device or backend; a GPU device without CuPy or a GPU
            (``"no GPU/CuPy"`` in the message); ``passes < 1``.
    """

    name = "profile"
    needs_producers = True

    def __init__(
        self,
        device: str = "cpu",
        *,
        backend: str | Backend | None = None,
        db: ProfileDatabase | str | os.PathLike[str] | None = None,
        progress: Progress | None = None,
        threads: int = 0,
        fusion: bool = True,
        passes: int = 2,
    ) -> None:
        dev = device.lower()
        if passes < 1:
            raise ValueError(f"profile: passes must be at least 1, got {passes}")
        self.passes = passes
        if dev not in ("cpu", *GPU_DEVICES):
            raise ValueError(
                f"profile: unknown device '{device}'; known: cpu, {', '.join(GPU_DEVICES)}"
            )
        if backend is None:
            backend = "onnxruntime" if dev == "cpu" else "cupy"
        if isinstance(backend, str):
            b = backend.lower()
            if dev == "cpu" and b in ("onnxruntime", "ort"):
                backend = OrtBackend(threads)
            elif dev == "cpu" and b == "numpy":
                backend = numpy_backend()
            elif dev != "cpu" and b == "cupy":
                backend = cupy_backend()
            else:
                raise ValueError(
                    f"profile: backend '{backend}' does not run on device '{device}' "
                    "(cpu: onnxruntime, numpy; gpu: cupy)"
                )
        self.backend: Backend = backend
        self.device = dev
        self.db = db if isinstance(db, ProfileDatabase) else ProfileDatabase(db)
        self.info = self.backend.info()
        self.fingerprint = fingerprint(self.info)
        self.db.register_device(self.fingerprint, self.info)
        self.progress = progress
        self.fusion = fusion and isinstance(self.backend, OrtBackend)
        self._memo: dict[str, float] = {}
        self._overhead: tuple[float, float] | None = None
        self._bandwidth: BandwidthCurve | None = None
        self._block: int | None = None
        self._shares: dict[str, float] = {}
        self.cold_weights = dev == "cpu"
        self.llc = last_level_cache_bytes()
        self.measured = 0  # new measurements made by this object

    def __repr__(self) -> str:
        return (
            f"ProfileCostModel(device={self.device!r}, backend={self.backend.name!r}, "
            f"fingerprint={self.fingerprint!r})"
        )

    # ---------------------------------------------------------------- calibration
    def overhead(self) -> tuple[float, float]:
        """``(call overhead, per-node floor)`` in seconds subtracted from / bounding each
        raw figure: calibrated once per device for onnxruntime (cached), ``(0, 0)`` for
        array backends."""
        if self._overhead is not None:
            return self._overhead
        if not isinstance(self.backend, OrtBackend):
            self._overhead = (0.0, 0.0)
            return self._overhead
        got = self.db.get(self.fingerprint, [OVERHEAD_SIGNATURE]).get(OVERHEAD_SIGNATURE)
        if got is None:
            call, per_node = self.backend.calibrate()
            self.db.put(
                self.fingerprint,
                [Record(OVERHEAD_SIGNATURE, "__overhead__", call, per_node, 0, call)],
            )
            got = self.db.get(self.fingerprint, [OVERHEAD_SIGNATURE])[OVERHEAD_SIGNATURE]
        self._overhead = (got.median, got.spread)  # spread holds the per-node cost here
        return self._overhead

    def bandwidth(self) -> BandwidthCurve | None:
        """Memory bandwidth by weight size as a program's weights see it on this backend,
        calibrated once per device (cached): for each ``n`` of :data:`BANDWIDTH_SIDES`, a
        chain of ``1 x n`` by ``n x n`` float32 matmuls whose distinct weights hold four
        times the last-level cache, their bytes over the chain's lower-quartile time, the
        median of :data:`BANDWIDTH_ROUNDS` interleaved rounds; ``None`` for a backend
        without ``weight_stream``."""
        if self._bandwidth is not None:
            return self._bandwidth
        stream = getattr(self.backend, "weight_stream", None)
        if stream is None:
            return None
        curve = cached_bandwidth(self.db, self.fingerprint)
        if curve is None:
            have = self.db.get(self.fingerprint, [bandwidth_signature(n) for n in BANDWIDTH_SIDES])
            sides = [n for n in BANDWIDTH_SIDES if bandwidth_signature(n) not in have]
            rates: dict[int, list[float]] = {n: [] for n in sides}
            for _ in range(BANDWIDTH_ROUNDS):
                for n in sides:
                    count = -(-4 * self.llc // (n * n * 4))
                    rates[n].append(count * n * n * 4 / stream(n, count).low)
            for n in sides:
                bw = statistics.median(rates[n])
                spread = max(rates[n]) - min(rates[n])
                rec = Record(bandwidth_signature(n), "__bandwidth__", bw, spread, len(rates[n]), bw)
                self.db.put(self.fingerprint, [rec])
            curve = cached_bandwidth(self.db, self.fingerprint)
        self._bandwidth = curve
        return curve

    def fused_share(self, op: str) -> float:
        """What activation ``op`` costs fused into the convolution before it, as a share of
        its own figure (:meth:`OrtBackend.fused_activation_share`), calibrated once per
        device and activation (cached); 0 for an operator onnxruntime does not fuse so
        and for backends other than onnxruntime."""
        if op in self._shares:
            return self._shares[op]
        probe = getattr(self.backend, "fused_activation_share", None)
        if probe is None or op not in FUSED_ACTIVATIONS:
            self._shares[op] = 0.0
            return 0.0
        sig = fused_share_signature(op)
        got = self.db.get(self.fingerprint, [sig]).get(sig)
        if got is None:
            share = float(probe(op))
            self.db.put(self.fingerprint, [Record(sig, "__fused_share__", share, 0.0, 0, share)])
            got = self.db.get(self.fingerprint, [sig])[sig]
        self._shares[op] = got.low
        return got.low

    def _figure(self, raw: float) -> float:
        return figure(raw, *self.overhead())

    # ---------------------------------------------------------------- pricing
    def _priced(self, ctx: ops.OpContext) -> bool:
        if isinstance(self.backend, OrtBackend):
            return ort_priced(ctx)
        d = opdef(ctx.op, "profile")
        return not (ctx.constant or not d.launches_kernel)

    def costs(self, ctxs: Sequence[ops.OpContext]) -> list[float]:
        """Seconds for each of ``ctxs``: cached figures, and new measurements (each stored
        at once) for signatures not yet in the cache; 0 for constant nodes and operators
        that launch no kernel.

        Raises:
            ValueError: an operator that cannot run on the backend (names it).
        """
        given = ctxs
        if self.fusion:
            ctxs, fused, after = ort_kernels(ctxs)
        sigs: list[str | None] = [signature(c) if self._priced(c) else None for c in ctxs]
        wanted = {s for s in sigs if s is not None and s not in self._memo}
        if wanted:
            for s, r in self.db.get(self.fingerprint, wanted).items():
                self._memo[s] = self._figure(r.low)
            missing: dict[str, ops.OpContext] = {}
            for s, c in zip(sigs, ctxs, strict=True):
                if s is not None and s not in self._memo and s not in missing:
                    missing[s] = canonical(c)
            if missing:
                self.overhead()
            best: dict[str, Measurement] = {}
            todo, done = list(missing.items()), 0
            for p in range(self.passes):
                last = p == self.passes - 1
                for s, c in todo if p % 2 == 0 else todo[::-1]:
                    m = self.backend.measure(c)
                    if s not in best or m.low < best[s].low:
                        best[s] = m
                    done += 1
                    if last:
                        self._store(s, c.op, best[s])
                    if self.progress is not None:
                        self.progress(done, len(todo) * self.passes, c.op)
        out = [0.0 if s is None else self._memo[s] for s in sigs]
        if self.fusion:
            acts = {c.op for c in given if c.op in FUSED_ACTIVATIONS}
            shares = {op: self.fused_share(op) for op in sorted(acts)}
            out = ort_adjust(out, given, fused, after, self.overhead()[1], shares)
            out = self._layout_adjust(out, given)
        return self.cold_weights_adjust(out, given)

    def _store(self, sig: str, op: str, m: Measurement) -> None:
        """Stores a new figure at once and reads it back: another process may have stored
        the signature first, and its figure wins."""
        self.db.put(self.fingerprint, [Record(sig, op, m.median, m.spread, m.reps, m.low)])
        self._memo[sig] = self._figure(self.db.get(self.fingerprint, [sig])[sig].low)
        self.measured += 1

    def nchwc(self) -> int:
        """onnxruntime's NCHWc block size on this device (0: none; :mod:`.layout`), probed
        once per device and cached; 0 for backends other than onnxruntime."""
        if self._block is not None:
            return self._block
        probe = getattr(self.backend, "nchwc_block", None)
        if probe is None:
            self._block = 0
            return 0
        got = self.db.get(self.fingerprint, [layout.BLOCK_SIGNATURE])
        if layout.BLOCK_SIGNATURE not in got:
            block = float(probe())
            rec = Record(layout.BLOCK_SIGNATURE, "__nchwc_block__", block, 0.0, 0, block)
            self.db.put(self.fingerprint, [rec])
            got = self.db.get(self.fingerprint, [layout.BLOCK_SIGNATURE])
        self._block = int(got[layout.BLOCK_SIGNATURE].low)
        return self._block

    def _layout_adjust(self, costs: list[float], ctxs: Sequence[ops.OpContext]) -> list[float]:
        """Adds the NCHWc reorders onnxruntime puts around each of ``ctxs``
        (:func:`layout.reorders`) and prices an operator it runs with an NCHWc kernel as
        that kernel (:func:`layout.nchwc_kernel`), each measured once and cached
        (:func:`layout.adjust`). The block size is probed only once an operator that may
        need either is priced."""
        if not any(layout.reorders(c, 1) or layout.nchwc_kernel(c, 1) for c in ctxs):
            return costs
        return layout.adjust(costs, ctxs, self.nchwc(), self._reorder)

    def reorder_price(self) -> tuple[int, ReorderPrice] | None:
        """The NCHWc block size here and one reorder's measured seconds (each shape
        measured once and cached), for
        :meth:`~tensat_py.cost.ort_program.OrtProgram.layout_cost`; None without fusion
        or where onnxruntime uses no NCHWc."""
        if not self.fusion:
            return None
        block = self.nchwc()
        return (block, self._reorder) if block > 0 else None

    def _reorder(self, kind: str, shape: tuple[int, ...]) -> float:
        sig = layout.reorder_signature(kind, shape)
        if sig not in self._memo:
            got = self.db.get(self.fingerprint, [sig])
            if sig not in got:
                block = self.nchwc()
                reorder = self.backend.reorder  # type: ignore[attr-defined]
                m = min((reorder(kind, shape, block) for _ in range(self.passes)), key=_low)
                rec = Record(sig, layout.reorder_op(kind), m.median, m.spread, m.reps, m.low)
                self.db.put(self.fingerprint, [rec])
                got = self.db.get(self.fingerprint, [sig])
                self.measured += 1
            self._memo[sig] = self._figure(got[sig].low)
        return self._memo[sig]

    def cost(self, ctx: ops.OpContext) -> float:
        """Measured seconds for one operator application (see :meth:`costs`)."""
        return self.costs([ctx])[0]

    def applications(self, ctxs: Sequence[ops.OpContext]) -> dict[str, ops.OpContext]:
        """The distinct measured applications that price ``ctxs``, by :func:`signature`:
        the first context of each signature, canonical (:func:`canonical`), as
        :meth:`costs` measures it. With fusion on, these are the kernels of
        :func:`ort_kernels` (a convolution with its bias or activation is measured as the
        plain convolution), never the fused applications themselves. Calibrations
        (call overhead, reorders, bandwidth) are not among them."""
        if self.fusion:
            ctxs = ort_kernels(ctxs)[0]
        sigs: dict[str, ops.OpContext] = {}
        for c in ctxs:
            if self._priced(c):
                sigs.setdefault(signature(c), canonical(c))
        return sigs

    def missing(self, ctxs: Sequence[ops.OpContext]) -> list[ops.OpContext]:
        """:meth:`applications` of ``ctxs`` whose figure is not yet in the cache: what
        :meth:`costs` would measure (a graph's own context, which carries an opaque
        operator's payload, before an e-graph's)."""
        sigs = self.applications(ctxs)
        have = self.db.get(self.fingerprint, sigs)
        return [c for s, c in sigs.items() if s not in have]

    @contextlib.contextmanager
    def figures_replaced(self, lows: Mapping[str, float]) -> Iterator[None]:
        """Inside the ``with`` block, prices each signature of ``lows`` with the given raw
        figure (a lower quartile in seconds, as :class:`Measurement` ``low``) in place of
        the cache's; the cache is not written. For what-if and noise studies
        (bench/profile_noise.py: how far the predicted speedup moves when one-operator
        figures are re-measured).

        Example::

            with model.figures_replaced({signature(ctx): 120e-6}):
                cost = model.graph_cost(graph)
        """
        saved = {s: self._memo[s] for s in lows if s in self._memo}
        try:
            for s, raw in lows.items():
                self._memo[s] = self._figure(raw)
            yield
        finally:
            for s in lows:
                if s in saved:
                    self._memo[s] = saved[s]
                else:
                    self._memo.pop(s, None)
