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

Weight-only operators (:func:`freeze_weights`): a program whose weights are entry
parameters computes, on every run, what depends on its weights alone (the concatenation
of two weight matrices that a dot merge makes, a transposed weight). A user of XLA with
fixed weights computes those once, as XLA's own constant folding does for literal
constants, so the runs that measure a program (confirmation,
:mod:`tensat_py.runtime.confirm`; the ``xla`` cost model's whole-program prices,
:mod:`tensat_py.cost.xla`; ``bench/xla_bench.py``) run it with them pre-computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from tensat_py.runtime import timing

if TYPE_CHECKING:
    from tensat_py.graph import Graph

__all__ = [
    "compile_text",
    "freeze_weights",
    "run_text",
    "time_text",
    "time_interleaved",
    "np_dtype",
    "Timing",
    "XlaError",
    "Placement",
    "placed_call",
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


class Placement:
    """Host arrays placed on XLA's CPU device once, shared by every program run on them.

    Programs compared side by side (the input, its candidate and the A/A copy) run on the
    same input arrays, as a program that replaces another is fed the same data; giving
    each its own copy triples the data that cycles through the caches between runs, which
    slows a memory-bound program more than a compute-bound one (jax_gcn_layer's
    2048 x 2048 adjacency matrix, read by both programs: 4.2-4.5x measured with a copy
    each against 5.6x with one copy shared, in rounds of the same programs). A program's
    weights are its own (``private``): each program is placed with a copy of its own, as
    a deployed model holds its weights, so the input and its A/A copy do not keep each
    other's weights in the cache while the candidate's (pre-computed, new arrays) are
    not. Arrays are keyed by identity; the placement keeps them alive as long as it lives.

    >>> import numpy as np
    >>> p = Placement()
    >>> x, w = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
    >>> a = p([x, w], private=[1]); b = p([x, w], private=[1])
    >>> a[0] is b[0], a[1] is b[1]
    (True, False)
    """

    def __init__(self) -> None:
        self._placed: dict[int, tuple[Any, Any]] = {}  # id(host) -> (host, on device)

    def __call__(self, args: Sequence[Any], private: Sequence[int] = ()) -> list[Any]:
        """The device arrays of ``args`` (host arrays, or device arrays passed through):
        shared with earlier calls, except the positions ``private``, placed anew."""
        import jax

        dev = _device()
        own = set(private)
        out = []
        for k, a in enumerate(args):
            if isinstance(a, jax.Array) and k not in own:
                out.append(a)
                continue
            if k in own:
                out.append(jax.device_put(np.array(a), dev))
                continue
            hit = self._placed.get(id(a))
            if hit is None or hit[0] is not a:
                hit = self._placed[id(a)] = (a, jax.device_put(np.asarray(a), dev))
            out.append(hit[1])
        return out


def placed_call(
    exe: Any,
    args: Sequence[Any],
    donates: bool = False,
    placement: Placement | None = None,
    private: Sequence[int] = (),
) -> Callable[[], list[Any]]:
    """A call of the compiled ``exe`` on ``args`` placed on the device once, as a program
    with fixed inputs runs: each call executes and blocks until every output is ready; no
    host copy of an argument or a result is timed with it (a 2048 x 2048 float32 argument
    copied on every call took about 1.4 ms, which brought jax_gcn_layer's measured 4.4x
    down to 3.0x). ``placement``: share the placed arrays with the other programs placed
    through it (:class:`Placement`; default a placement of this call's own), except the
    positions ``private`` (the program's weights), placed for this call alone. A module
    that donates its arguments (``donates``: ``input_output_alias``) consumes them: they
    are placed anew for every call.

    Raises:
        Exception: jaxlib's own error when XLA refuses the arguments, on a call (callers
            such as :func:`tensat_py.runtime.protocol._xla_runnable` turn it into
            :class:`XlaError`).
    """
    import jax

    dev = _device()
    if donates:
        host = [np.asarray(a) for a in args]
    placed = [] if donates else (placement or Placement())(args, private)

    def call() -> list[Any]:
        bufs = [jax.device_put(a, dev) for a in host] if donates else placed
        outs = exe.execute_sharded(bufs).disassemble_into_single_device_arrays()
        for o in outs:
            o[0].block_until_ready()
        return outs

    return call


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
    call = placed_call(exe, args, "input_output_alias" in text)
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return Timing(compile_s, min(times), outs, tuple(times))


def time_interleaved(
    texts: Sequence[str], args: Sequence[np.ndarray], budget_s: float = 2.0, max_rounds: int = 5000
) -> list[Timing]:
    """Compile each text (timed, uncached), warm each up, then run them side by side
    (:func:`tensat_py.runtime.timing.rotating`, each timed run after an untimed run of the
    same module where they are short: :func:`~tensat_py.runtime.timing.lead_in_for`) for
    about ``budget_s`` seconds (at most
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
    placement = Placement()  # the modules run on the same arrays
    calls = [
        placed_call(exe, args, "input_output_alias" in text, placement)
        for exe, text in zip(exes, texts, strict=True)
    ]
    warm = []
    for exe, call in zip(exes, calls, strict=True):
        outs.append(_execute(exe, args))  # the outputs, on the host (not timed)
        t1 = time.perf_counter()
        call()
        warm.append(time.perf_counter() - t1)
    lead_in = timing.lead_in_for(warm)
    per_round = max(sum(warm), 1e-6) * (1 + lead_in)
    rounds = int(min(max_rounds, budget_s / per_round))
    if rounds == 0:
        times = [[w] for w in warm]
    else:
        times = timing.rotating(calls, rounds=rounds, warmup=0, lead_in=lead_in)
    return [Timing(c, min(t), o, tuple(t)) for c, t, o in zip(compile_s, times, outs, strict=True)]


def _parameter_weights(graph: Graph) -> set[str]:
    """Names of ``graph``'s weights that its HLO text holds as entry parameters (the
    others print as literals, which XLA's constant folding pre-computes itself)."""
    from tensat_py.frontends.hlo import entry_leaves

    names = {graph.nodes[i].name for i in graph.weights()}
    return names & set(entry_leaves(graph))


def freeze_weights(
    graph: Graph, feeds: Mapping[str, Any] | None = None
) -> tuple[Graph, dict[str, Any]]:
    """``graph`` with its weight-only operators pre-computed, as at inference with fixed
    weights: every operator whose value depends on weights alone, at least one of them an
    entry parameter of the program's HLO (:func:`~tensat_py.frontends.hlo.entry_leaves`;
    weights written as literals are left to XLA's own constant folding), and that a
    run-time operator or an output reads, becomes a weight holding its value (named
    ``frozen_<id>``), and the weights only such operators read are dropped.

    Broadcasts (``OpDef.fusion == "broadcast"``) are not frozen, as XLA's constant folding
    leaves them: fused into their readers they cost no memory pass, frozen they would be
    read whole; their operand is frozen instead. A TASO ``split`` that stays at run time
    is written as the two ``slice`` operators it is (its cut, which the type analysis
    takes from a ``concat`` below, may now be behind a frozen weight). Inputs are all kept,
    in order, so the entry parameters start alike.

    Args:
        graph: the program (not changed).
        feeds: input and weight values by name
            (:func:`tensat_py.runtime.numpy_exec.random_feeds`), or None to freeze the
            structure only (the new weights then have no values: what a cost model that
            times the program on random arguments needs). With feeds, only weights that
            have a value in them count as parameters.

    Returns:
        the new graph (``graph`` itself when nothing is weight-only; ``meta`` copied) and
        its feeds: ``feeds`` less the dropped weights, plus the frozen values (NumPy
        reference executor, :func:`tensat_py.runtime.numpy_exec.run`); ``{}`` without
        ``feeds``.

    Raises:
        ValueError: a feed is missing or an operator fails while computing a frozen value
            (from :func:`~tensat_py.runtime.numpy_exec.run`).
    """
    import copy

    from tensat_py import ops
    from tensat_py.graph import LEAF_OPS, Graph, TensorType

    params = _parameter_weights(graph)
    if feeds is not None:
        params &= set(feeds)
    nodes = graph.nodes
    ok: list[bool] = []  # computable from parameter weights and literals alone
    has_param: list[bool] = []
    freezable: list[bool] = []
    for n in nodes:
        if n.op == "weight":
            ok.append(n.name in params)
            has_param.append(n.name in params)
            freezable.append(False)
            continue
        if n.op in LEAF_OPS:
            ok.append(False)
            has_param.append(False)
            freezable.append(False)
            continue
        good = n.constant and all(ok[j] for j in n.inputs)
        ok.append(good)
        has_param.append(any(has_param[j] for j in n.inputs))
        try:
            broadcast = ops.get(n.op).fusion == "broadcast"
        except KeyError:
            broadcast = False
        freezable.append(
            good and has_param[-1] and isinstance(n.type, TensorType) and not broadcast
        )
    needed = [False] * len(nodes)
    for o in graph.outputs:
        needed[o] = True
    for i in range(len(nodes) - 1, -1, -1):
        if needed[i] and not freezable[i]:
            for j in nodes[i].inputs:
                needed[j] = True
    frontier = [i for i, n in enumerate(nodes) if needed[i] and freezable[i]]
    new_feeds: dict[str, Any] = dict(feeds or {})
    if not frontier:
        return graph, new_feeds
    values: dict[int, Any] = {}
    if feeds is not None:
        from tensat_py.runtime import numpy_exec

        sub = copy.copy(graph)
        sub.outputs = frontier
        for i, v in zip(frontier, numpy_exec.run(sub, feeds), strict=True):
            try:
                values[i] = np.asarray(v).astype(np.dtype(nodes[i].dtype), copy=False)
            except TypeError:  # a dtype NumPy does not name (bfloat16): as computed
                values[i] = np.asarray(v)
    out = Graph()
    out.meta = dict(graph.meta)
    taken = {n.name for n in nodes if n.op in LEAF_OPS}
    ids: dict[int, int] = {}
    for i, n in enumerate(nodes):
        if n.op == "input":
            ids[i] = out.add_input(n.name, n.shape, n.dtype)
        elif not needed[i]:
            if n.op == "weight":
                new_feeds.pop(n.name, None)
        elif n.op == "weight":
            ids[i] = out.add_weight(n.name, n.shape, n.dtype)
        elif freezable[i]:
            name = f"frozen_{i}"
            while name in taken:
                name += "_"
            taken.add(name)
            ids[i] = out.add_weight(name, n.shape, n.dtype)
            if feeds is not None:
                new_feeds[name] = values[i]
        elif n.op == "split":
            ids[i] = ids[n.inputs[0]]  # its parts become slices (below)
        elif n.op in ("split_0", "split_1") and nodes[n.inputs[0]].op == "split":
            pair = nodes[n.inputs[0]]
            axis = int(pair.params["axis"])
            first, _ = pair.type  # type: ignore[misc]
            total = nodes[pair.inputs[0]].shape[axis]
            cut = first.shape[axis]
            lo, hi = (0, cut) if n.op == "split_0" else (cut, total)
            ids[i] = out.add_node(
                "slice",
                {"starts": [lo], "ends": [hi], "axes": [axis], "steps": [1]},
                [ids[n.inputs[0]]],
                n.name,
            )
        else:
            ids[i] = out.add_node(n.op, n.params, [ids[j] for j in n.inputs], n.name)
    out.outputs = [ids[o] for o in graph.outputs]
    return out, new_feeds
