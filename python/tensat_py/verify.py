"""Numerical check that an optimised graph computes what the original does.

Both graphs run on the same runner with the same random inputs and weights (matched by
name, drawn from the original graph by :func:`tensat_py.runtime.numpy_exec.random_feeds`);
outputs are compared in order. Runners:

* ``"numpy"``: the NumPy reference executor, in ``dtype``. Opaque nodes are evaluated by
  their payloads (ONNX ones by ONNX's reference evaluator).
* ``"onnxruntime"``: both graphs are exported to ONNX and run by onnxruntime (CPU) in
  float32, whatever ``dtype`` says (the float32 tolerance applies). Weights of graphs
  loaded from ONNX keep the model's values; integer inputs are drawn from {0, 1}
  (:func:`tensat_py.runtime.ort_exec.feeds`).
* ``"xla"``: both graphs are printed as HLO (:mod:`tensat_py.frontends.hlo`) and compiled
  and run by XLA's CPU client through jaxlib (:mod:`tensat_py.runtime.xla_exec`) in
  float32: the candidate must compile and run. A sound rewrite changes where float32
  rounds, and a deep program amplifies that (a 12-layer GPT-2 block stack with random
  weights: 1.6 % between two sound programs), so the numbers are judged against the
  input's own rounding noise: the input is run a second time on arguments one float32
  unit away (:data:`NOISE_FACTOR` times that difference, at least
  :data:`XLA_TOLERANCE`). Where the NumPy executor can afford it (:func:`run_work` at most
  :data:`WIDE_WORK_LIMIT`), both programs also run in float64 and that comparison
  decides, at the float64 tolerance scaled by the same noise (issue: "verify float32
  modules by running both in float64").
* ``"auto"`` (default): the front end's runner when it names one (``meta["verify_runner"]``:
  ``"xla"`` for HLO input); else onnxruntime when either graph has opaque nodes (whose exact
  semantics, including non-float values, only the source runtime knows), NumPy otherwise.

Tolerances (``passed`` uses the relative error):

* float32: ``max_rel_error <= 1e-3``. Rewrites re-associate sums (a merged matmul or
  convolution accumulates in a different order), and errors grow with depth; 1e-3 of the
  output's magnitude is far above float32 round-off on the zoo models (typically 1e-6 to
  1e-5) and far below any real semantic difference (order 1).
* float64: ``max_rel_error <= 1e-9``.

The relative error is ``max|a - b| / max(max|a|, tiny)`` per output, the largest over
outputs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensat_py.graph import Graph
from tensat_py.runtime.numpy_exec import random_feeds, run

__all__ = [
    "TOLERANCES",
    "Reference",
    "VerificationError",
    "VerifyReport",
    "reference",
    "run_work",
    "verify",
]


class VerificationError(ValueError):
    """The reference program itself cannot be run by the chosen runner (so nothing can be
    verified against it); the message names the runner and its first line of error."""


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


#: Relative-error thresholds by dtype.
TOLERANCES = {"float32": 1e-3, "float64": 1e-9}
#: Smallest relative tolerance of the XLA runner (HLO input, float32 on XLA's CPU client):
#: both modules run through XLA's own optimisation pipeline in float32.
XLA_TOLERANCE = 1e-5
#: The XLA runner's tolerance is this many times the input's own rounding noise (its
#: relative change when its float arguments move by one float32 unit).
NOISE_FACTOR = 64.0
#: Largest :func:`run_work` (roofline-CPU seconds) of an HLO input whose float64 check
#: runs on the NumPy executor (which takes about 35 times that: a one-layer GPT-2 block
#: is 0.015, the whole EfficientNet of ../shared/data/hlo 29).
WIDE_WORK_LIMIT = 0.1
#: float64 unit roundoff over float32's (2^-53 / 2^-24): the input's float32 noise times
#: this estimates its float64 noise.
_WIDE_OVER_NARROW = 2.0**-29
RUNNERS = ("numpy", "onnxruntime", "xla")


@dataclass(frozen=True)
class VerifyReport:
    """Result of :func:`verify`.

    Attributes:
        max_abs_error: largest ``|a - b|`` over all outputs.
        max_rel_error: largest per-output ``max|a - b| / max|a|``.
        passed: ``max_rel_error`` within the dtype's tolerance (and shapes agree).
        tolerance: the threshold used.
        message: why it failed, or ``"ok"``.
        runner: ``"numpy"`` or ``"onnxruntime"``: what ran both programs.
    """

    max_abs_error: float
    max_rel_error: float
    passed: bool
    tolerance: float = 0.0
    message: str = "ok"
    runner: str = "numpy"


def reference(
    original: Graph,
    *,
    seed: int = 0,
    dtype: str = "float32",
    tolerance: float | None = None,
    runner: str = "auto",
) -> Reference:
    """Runs ``original`` once on its random feeds; :meth:`Reference.check` then compares
    any number of candidate programs against these outputs without running it again.

    Arguments as for :func:`verify` (``"auto"`` picks the runner from ``original``'s opaque
    nodes: candidates carry the same ones).

    Raises:
        ValueError: an unknown runner or dtype.
        VerificationError: the runner cannot run ``original``.
    """
    if runner == "auto":
        runner = _auto_runner(original)
    if runner not in RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; use 'auto', 'numpy', 'onnxruntime' or 'xla'")
    if runner in ("onnxruntime", "xla"):
        dtype = "float32"
    if dtype not in TOLERANCES:
        raise ValueError(f"unknown verification dtype {dtype!r}; use 'float32' or 'float64'")
    tol = TOLERANCES[dtype] if tolerance is None else tolerance
    if runner == "xla" and tolerance is None:
        tol = XLA_TOLERANCE
    args: Any = None
    wide: tuple[dict[str, Any], list[np.ndarray], float] | None = None
    try:
        if runner == "xla":
            from tensat_py.frontends.hlo import dumps, random_args
            from tensat_py.runtime.xla_exec import run_text

            args = random_args(original, seed=seed)
            feeds = {k: None for k in original.leaf_types()}
            t = time.perf_counter()
            text = dumps(original)
            outputs = run_text(text, args)
            seconds = time.perf_counter() - t
            noise = _rel_error(outputs, run_text(text, _nudged(args, seed)))
            if tolerance is None:
                tol = max(XLA_TOLERANCE, NOISE_FACTOR * noise)
            if run_work(original) <= WIDE_WORK_LIMIT:
                try:
                    feeds64 = random_feeds(original, seed=seed, dtype="float64")
                    tol64 = max(TOLERANCES["float64"], NOISE_FACTOR * noise * _WIDE_OVER_NARROW)
                    wide = (feeds64, list(run(original, feeds64, "float64")), tol64)
                except (MemoryError, KeyboardInterrupt):
                    raise
                except Exception:  # an operator NumPy cannot run: float32 on XLA decides
                    wide = None
            return Reference(
                original, runner, dtype, tol, feeds, list(outputs), args, seconds, wide
            )
        elif runner == "onnxruntime":
            from tensat_py.runtime import ort_exec

            feeds = ort_exec.feeds(original, seed=seed)
            t = time.perf_counter()
            outputs = ort_exec.run(original, feeds)
        else:
            feeds = random_feeds(original, seed=seed, dtype=dtype)
            t = time.perf_counter()
            outputs = run(original, feeds)
        seconds = time.perf_counter() - t
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:  # any runner failure: the input program cannot be checked
        raise VerificationError(
            f"verification: {runner} cannot run the input program ({_first_line(e)})"
        ) from e
    return Reference(original, runner, dtype, tol, feeds, list(outputs), args, seconds)


def _nudged(args: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """``args`` with every float element moved one unit in the last place (up, or down
    where ``seed`` is odd: one vectorised pass, no random draw over a model's weights);
    other arrays unchanged."""
    out = []
    for a in args:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            a = np.nextafter(a, np.array(-np.inf if seed % 2 else np.inf, a.dtype))
        out.append(a)
    return out


def _rel_error(a_out: list[np.ndarray], b_out: list[np.ndarray]) -> float:
    """Largest per-output ``max|a - b| / max|a|`` over the float outputs (0 when none)."""
    worst = 0.0
    for a, b in zip(a_out, b_out, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind != "f" or not a.size or a.shape != b.shape:
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        diff = float(np.max(np.abs(a64 - b64)))
        worst = max(worst, diff / max(float(np.max(np.abs(a64))), np.finfo(np.float64).tiny))
    return worst if np.isfinite(worst) else np.inf


def run_work(graph: Graph) -> float:
    """Estimated seconds of one run of ``graph`` on a CPU, for predicting how long a
    verification run takes: per live node the larger of FLOPs / peak FLOP/s and bytes /
    bandwidth of the ``"cpu"`` roofline preset (:data:`tensat_py.cost.roofline.PRESETS`),
    summed, *weight-only sub-graphs included* (a cost model prices them 0, as they are
    folded before deployment, but a verification run computes them: a product of two
    1024 x 1024 weights is 2.1 GFLOP, 16 times a 64-row activation's product with one).

    Only ratios of it mean something: a program of twice the work of another takes about
    twice as long to check. Operators the roofline cannot price count 0.

    Example:
        >>> from tensat_py.builder import GraphBuilder
        >>> def program(fold: bool):
        ...     b = GraphBuilder()
        ...     x, w = b.input((64, 1024), "x"), b.weight((1024, 1024), "w")
        ...     return b.finish(b.matmul(x, b.matmul(w, w) if fold else w))
        >>> round(run_work(program(True)) / run_work(program(False)))
        17
    """
    from tensat_py.cost.base import graph_contexts
    from tensat_py.cost.roofline import PRESETS, op_flops_bytes

    cpu = PRESETS["cpu"]
    total = 0.0
    for ctx in graph_contexts(graph):
        try:
            flops, nbytes = op_flops_bytes(ctx)
        except ValueError:
            continue
        total += max(flops / cpu.peak_flops, nbytes / cpu.bandwidth)
    return total


def _auto_runner(original: Graph, optimized: Graph | None = None) -> str:
    """The runner for ``original``: its front end's (``meta["verify_runner"]``: ``"xla"``
    for HLO), else onnxruntime when either graph has opaque ONNX nodes, else NumPy."""
    chosen = original.meta.get("verify_runner")
    if isinstance(chosen, str):
        return chosen
    opaque = original.opaque_nodes() or (optimized is not None and optimized.opaque_nodes())
    return "onnxruntime" if opaque else "numpy"


@dataclass
class Reference:
    """The outputs of a reference program on fixed random feeds (see :func:`reference`).

    Attributes:
        original: the reference program.
        runner: ``"numpy"``, ``"onnxruntime"`` or ``"xla"``.
        dtype: the dtype the feeds were drawn in.
        tolerance: relative-error threshold of :meth:`check`.
        feeds: inputs and weights by name.
        outputs: ``original``'s outputs, in order.
        args: the XLA runner's positional arguments (None for the other runners).
        run_seconds: wall-clock seconds the runner took on ``original`` (drawing the feeds
            not included): what a check of a program of the same work takes.
        wide: the XLA runner's float64 check, where affordable: the NumPy feeds,
            ``original``'s float64 outputs and the tolerance; None otherwise.
    """

    original: Graph
    runner: str
    dtype: str
    tolerance: float
    feeds: dict[str, Any]
    outputs: list[np.ndarray]
    args: Any = None
    run_seconds: float = 0.0
    wide: tuple[dict[str, Any], list[np.ndarray], float] | None = None

    def check(self, optimized: Graph) -> VerifyReport:
        """Runs ``optimized`` on the same feeds and compares its outputs with the
        reference's (see :func:`verify` for the report)."""
        runner, tol = self.runner, self.tolerance

        def report(*args: object) -> VerifyReport:
            return VerifyReport(*args, runner=runner)  # type: ignore[arg-type]

        missing = sorted(set(optimized.leaf_types()) - set(self.feeds))
        if missing:
            return report(np.inf, np.inf, False, tol, f"optimized graph has new leaves {missing}")
        if len(self.outputs) != len(optimized.outputs):
            return report(
                np.inf,
                np.inf,
                False,
                tol,
                f"output count differs: {len(self.outputs)} vs {len(optimized.outputs)}",
            )
        try:
            if runner == "xla":
                from tensat_py.frontends.hlo import dumps
                from tensat_py.runtime.xla_exec import run_text

                b_out = run_text(dumps(optimized), self._xla_args(optimized))
                if self.wide is not None:  # float64 decides (float32 only had to run)
                    feeds64, want, tol64 = self.wide
                    got = run(optimized, feeds64, "float64")
                    narrow = self._compare(self.outputs, b_out, tol)
                    if narrow.message.startswith("output"):  # shapes differ
                        return narrow
                    wide = self._compare(want, got, tol64)
                    note = (
                        f"float64 on numpy: {wide.message}; float32 on xla: max rel "
                        f"{narrow.max_rel_error:.3g}"
                    )
                    return VerifyReport(
                        wide.max_abs_error,
                        wide.max_rel_error,
                        wide.passed,
                        tol64,
                        note if not wide.passed else f"ok ({note})",
                        runner,
                    )
            elif runner == "onnxruntime":
                from tensat_py.runtime import ort_exec

                b_out = ort_exec.run(optimized, self.feeds, source=self.original)
            else:
                b_out = run(optimized, self.feeds)
        except (MemoryError, KeyboardInterrupt):
            raise
        except Exception as e:  # the candidate does not run: it fails verification
            return report(np.inf, np.inf, False, tol, f"{runner} cannot run it: {_first_line(e)}")
        return self._compare(self.outputs, b_out, tol)

    def _xla_args(self, optimized: Graph) -> list[np.ndarray]:
        """The arguments of ``optimized``'s module: the input's, matched by the graph
        leaf each parameter holds (:func:`~tensat_py.frontends.hlo.entry_leaves`: weights
        written as parameters may differ between the two programs).

        Raises:
            KeyError: ``optimized`` reads a leaf the input's module does not take.
        """
        from tensat_py.frontends.hlo import entry_leaves

        have, want = entry_leaves(self.original), entry_leaves(optimized)
        if have == want:
            return list(self.args)
        by = dict(zip(have, self.args, strict=True))
        return [by[n] for n in want]

    def _compare(
        self, a_out: list[np.ndarray], b_out: list[np.ndarray], tol: float
    ) -> VerifyReport:
        """The report of comparing outputs ``b_out`` with ``a_out`` at relative ``tol``."""
        runner = self.runner

        def report(*args: object) -> VerifyReport:
            return VerifyReport(*args, runner=runner)  # type: ignore[arg-type]

        max_abs = 0.0
        max_rel = 0.0
        for k, (a, b) in enumerate(zip(a_out, b_out, strict=True)):
            if a.shape != b.shape:
                return report(
                    np.inf, np.inf, False, tol, f"output {k}: shape {a.shape} vs {b.shape}"
                )
            if not np.issubdtype(a.dtype, np.number) or not np.issubdtype(b.dtype, np.number):
                a, b = a.astype(np.float64), b.astype(np.float64)  # booleans
            a64 = a.astype(np.float64)
            diff = float(np.max(np.abs(a64 - b.astype(np.float64)))) if a.size else 0.0
            scale = float(np.max(np.abs(a64))) if a.size else 0.0
            if not np.isfinite(diff):
                diff = np.inf
            max_abs = max(max_abs, diff)
            max_rel = max(max_rel, diff / max(scale, np.finfo(np.float64).tiny))
        passed = bool(max_rel <= tol)
        msg = "ok" if passed else f"max relative error {max_rel:.3g} exceeds {tol:g}"
        return report(max_abs, max_rel, passed, tol, msg)


def verify(
    original: Graph,
    optimized: Graph,
    *,
    seed: int = 0,
    dtype: str = "float32",
    tolerance: float | None = None,
    runner: str = "auto",
) -> VerifyReport:
    """Run both graphs on the same random feeds and compare their outputs in order.

    Args:
        original: the reference graph.
        optimized: the graph to check; its inputs and weights must be among the
            original's names (rewrites never invent weights).
        seed: random seed for the feeds.
        dtype: ``"float32"`` or ``"float64"``.
        tolerance: relative-error threshold; defaults to :data:`TOLERANCES` [dtype]
            (the float32 one for the onnxruntime runner).
        runner: ``"auto"`` (default), ``"numpy"``, ``"onnxruntime"`` or ``"xla"`` (see above).

    Returns:
        A :class:`VerifyReport`; a mismatch in output count, shape, missing feeds, or an
        optimized program the runner cannot run gives ``passed=False`` with infinite
        errors and a message.

    Raises:
        ValueError: an unknown runner or dtype.
        VerificationError: the runner cannot run ``original``.
    """
    if runner == "auto":
        runner = _auto_runner(original, optimized)
    ref = reference(original, seed=seed, dtype=dtype, tolerance=tolerance, runner=runner)
    return ref.check(optimized)
