"""Running HLO text through XLA on CPU (jaxlib's PJRT CPU client).

The text is parsed by XLA (``jax._src.lib.hlo.hlo_module_from_text``), converted to
StableHLO MLIR (``xla_computation_to_mlir_module``; jaxlib's client compiles MLIR) and
compiled by ``Client.compile_and_load`` with XLA's full CPU optimisation pipeline
(default ``CompileOptions``). Tuple results come back flattened, one array per leaf.

Timing (:func:`time_text`, :func:`time_interleaved`): compile seconds (one compilation)
and the fastest of ``repeats`` executions after one warm-up, each waiting for its results
(the minimum is the estimate least disturbed by other processes on a shared machine);
:func:`time_interleaved` runs several modules round-robin so drifts in machine load hit
them alike, and keeps every run so that a caller can compare modules round by round
(:func:`tensat_py.runtime.timing.paired_ratio`: the median of per-round ratios).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from tensat_py.runtime import timing

__all__ = [
    "compile_text",
    "run_text",
    "time_text",
    "time_interleaved",
    "np_dtype",
    "Timing",
    "XlaError",
]

_NP = {
    "pred": np.bool_,
    "s8": np.int8,
    "s16": np.int16,
    "s32": np.int32,
    "s64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
}


class XlaError(RuntimeError):
    """XLA rejected or failed to run a module (its message follows)."""


def np_dtype(etype: str) -> Any:
    """The NumPy dtype of an HLO element type (``bf16`` through ``ml_dtypes``)."""
    if etype == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return _NP[etype]


def _device() -> Any:
    import jax

    # 64-bit arrays (f64/s64 parameters) must reach XLA as they are.
    jax.config.update("jax_enable_x64", True)
    _load_lapack()
    return jax.devices("cpu")[0]


@lru_cache(maxsize=1)
def _load_lapack() -> None:
    """Load the LAPACK kernels behind jaxlib's ``lapack_*_ffi`` custom calls (what JAX does
    when it lowers ``jnp.linalg``): without them a module lowered from ``jnp.linalg``
    crashes the process when it runs."""
    try:
        from jax._src.lax import linalg

        linalg.initialize_lapack()
    except (ImportError, AttributeError):  # another jaxlib layout: its own loading applies
        pass


def legalize(text: str) -> str:
    """``bitcast`` between default (row-major) layouts written as the ``reshape`` it is:
    jaxlib's HLO-to-MLIR conversion mis-handles ``bitcast`` (it attaches the result's
    layout to the operand). Other text is returned unchanged."""
    if "bitcast(" not in text:
        return text
    from tensat_py.frontends.hlo.ir import ArrayShape, print_module
    from tensat_py.frontends.hlo.parser import parse_module

    module = parse_module(text)
    changed = False
    for comp in module.computations:
        by = comp.by_name()
        for ins in comp.instructions:
            if ins.opcode != "bitcast":
                continue
            src = by[ins.operands[0]].shape
            if (
                isinstance(ins.shape, ArrayShape)
                and isinstance(src, ArrayShape)
                and ins.shape.default_layout()
                and src.default_layout()
            ):
                ins.opcode = "reshape"
                changed = True
    return print_module(module) if changed else text


def compile_text(text: str) -> Any:
    """Compile HLO text for the CPU; returns the loaded executable (see :func:`legalize`).

    Raises:
        XlaError: XLA's parser or compiler rejected it.
    """
    return _compile_cached(text)


@lru_cache(maxsize=64)
def _compile_cached(text: str) -> Any:
    from jax._src.lib import _jax, xla_client
    from jax._src.lib import hlo as xla_hlo

    try:
        module = xla_hlo.hlo_module_from_text(legalize(text))
        comp = xla_hlo.XlaComputation(module.as_serialized_hlo_module_proto())
        mlir = xla_client._xla.mlir.xla_computation_to_mlir_module(comp)
        dev = _device()
        return dev.client.compile_and_load(
            mlir, xla_client.DeviceList((dev,)), xla_client.CompileOptions()
        )
    except (_jax.JaxRuntimeError, RuntimeError, ValueError) as e:
        raise XlaError(str(e).strip().splitlines()[0] if str(e).strip() else repr(e)) from None


def _execute(exe: Any, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    import jax

    dev = _device()
    bufs = [jax.device_put(np.asarray(a), dev) for a in args]
    out = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
    return [np.asarray(o[0]) for o in out]


def _runnable(text: str) -> None:
    """Refuse a module that calls back into the Python process that lowered it
    (``jax.debug.print``, ``jax.pure_callback``: custom-call targets
    ``xla_ffi_python_cpu_callback``...): run here, outside JAX's runtime, its callbacks are
    not registered and XLA crashes the process. Raises :class:`XlaError`."""
    if "python_cpu_callback" in text:
        raise XlaError(
            "the module calls back into Python (jax.debug.print, jax.pure_callback): it runs "
            "only inside the JAX process that lowered it"
        )


def run_text(text: str, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile (cached) and run HLO text on ``args`` (one array per entry parameter, tuple
    parameters flattened); returns the result leaves.

    Raises:
        XlaError: XLA rejected the module or the arguments, or the module calls back into
            Python (see :func:`_runnable`).
    """
    _runnable(text)
    exe = compile_text(text)
    try:
        return _execute(exe, args)
    except Exception as e:  # jaxlib raises its own runtime error types
        raise XlaError(str(e).strip().splitlines()[0]) from None


@dataclass(frozen=True)
class Timing:
    """Compile and run time of one module (seconds): ``run_s`` the fastest run, ``runs``
    every timed run in order; ``outputs`` of the first run."""

    compile_s: float
    run_s: float
    outputs: list[np.ndarray]
    runs: tuple[float, ...] = ()


def time_text(text: str, args: Sequence[np.ndarray], repeats: int = 5) -> Timing:
    """Compile ``text`` (uncached, timed) and time ``repeats`` runs after a warm-up."""
    _runnable(text)
    t0 = time.perf_counter()
    exe = _compile_cached.__wrapped__(text)
    compile_s = time.perf_counter() - t0
    outs = _execute(exe, args)
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        _execute(exe, args)
        times.append(time.perf_counter() - t0)
    return Timing(compile_s, min(times), outs, tuple(times))


def time_interleaved(
    texts: Sequence[str], args: Sequence[np.ndarray], budget_s: float = 2.0, max_rounds: int = 5000
) -> list[Timing]:
    """Compile each text (timed, uncached), warm each up, then run them side by side
    (:func:`tensat_py.runtime.timing.rotating`) for about ``budget_s`` seconds (at most
    ``max_rounds`` rounds); each :class:`Timing` has the fastest run (``run_s``) and every
    run (``runs``; compare two modules with
    :func:`tensat_py.runtime.timing.paired_ratio` on their ``runs``). When one round
    alone takes longer than the budget (a module running for minutes), the warm-up runs
    are the timings.

    The round cap is high on purpose: a module that runs in 0.1 ms needs thousands of
    samples before its fastest run is stable on a shared machine (with 50 rounds, modules
    whose programs were identical differed by up to 15 %)."""
    exes, compile_s, outs = [], [], []
    for text in texts:
        _runnable(text)
        t0 = time.perf_counter()
        exes.append(_compile_cached.__wrapped__(text))
        compile_s.append(time.perf_counter() - t0)
    warm = []
    for exe in exes:
        t1 = time.perf_counter()
        outs.append(_execute(exe, args))
        warm.append(time.perf_counter() - t1)
    per_round = max(sum(warm), 1e-6)
    rounds = int(min(max_rounds, budget_s / per_round))
    if rounds == 0:
        times = [[w] for w in warm]
    else:
        times = timing.rotating(
            [lambda exe=exe: _execute(exe, args) for exe in exes], rounds=rounds, warmup=0
        )
    return [Timing(c, min(t), o, tuple(t)) for c, t, o in zip(compile_s, times, outs, strict=True)]
