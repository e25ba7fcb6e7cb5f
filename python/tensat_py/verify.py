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
  and run by XLA on CPU (jaxlib) in their declared dtypes on the same random arguments
  (:func:`tensat_py.frontends.hlo.random_args`); tolerance ``1e-5`` (XLA's own rewrites
  re-associate too).
* ``"auto"`` (default): the runner the front end asked for (``Graph.meta["verify_runner"]``,
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

from dataclasses import dataclass

import numpy as np

from tensat_py.graph import Graph
from tensat_py.runtime.numpy_exec import random_feeds, run

__all__ = ["TOLERANCES", "VerifyReport", "verify"]

#: Relative-error thresholds by dtype.
TOLERANCES = {"float32": 1e-3, "float64": 1e-9}
#: Relative-error threshold of the XLA runner (float32 modules, XLA's rewrites both sides).
XLA_TOLERANCE = 1e-5


@dataclass(frozen=True)
class VerifyReport:
    """Result of :func:`verify`.

    Attributes:
        max_abs_error: largest ``|a - b|`` over all outputs.
        max_rel_error: largest per-output ``max|a - b| / max|a|``.
        passed: ``max_rel_error`` within the dtype's tolerance (and shapes agree).
        tolerance: the threshold used.
        message: why it failed, or ``"ok"``.
    """

    max_abs_error: float
    max_rel_error: float
    passed: bool
    tolerance: float = 0.0
    message: str = "ok"
    runner: str = "numpy"


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
        runner: ``"auto"`` (default), ``"numpy"``, ``"onnxruntime"`` or ``"xla"`` (see
            above).

    Returns:
        A :class:`VerifyReport`; a mismatch in output count, shape, or missing feeds gives
        ``passed=False`` with infinite errors and a message.
    """
    if runner == "auto":
        opaque = original.opaque_nodes() or optimized.opaque_nodes()
        runner = original.meta.get("verify_runner") or ("onnxruntime" if opaque else "numpy")
    if runner not in ("numpy", "onnxruntime", "xla"):
        raise ValueError(f"unknown runner {runner!r}; use 'auto', 'numpy', 'onnxruntime' or 'xla'")
    if runner in ("onnxruntime", "xla"):
        dtype = "float32"
    tol = TOLERANCES.get(dtype, 1e-3) if tolerance is None else tolerance
    if runner == "xla" and tolerance is None:
        tol = XLA_TOLERANCE

    def report(*args: object) -> VerifyReport:
        return VerifyReport(*args, runner=runner)  # type: ignore[arg-type]

    if runner == "xla":
        from tensat_py.frontends.hlo import dumps, random_args
        from tensat_py.runtime.xla_exec import run_text

        args = random_args(original, seed=seed)
        feeds = {k: None for k in original.leaf_types()}
    elif runner == "onnxruntime":
        from tensat_py.runtime import ort_exec

        feeds = ort_exec.feeds(original, seed=seed)
    else:
        feeds = random_feeds(original, seed=seed, dtype=dtype)
    missing = sorted(set(optimized.leaf_types()) - set(feeds))
    if missing:
        return report(np.inf, np.inf, False, tol, f"optimized graph has new leaves {missing}")
    if len(original.outputs) != len(optimized.outputs):
        return report(
            np.inf,
            np.inf,
            False,
            tol,
            f"output count differs: {len(original.outputs)} vs {len(optimized.outputs)}",
        )
    if runner == "xla":
        a_out = run_text(dumps(original), args)
        b_out = run_text(dumps(optimized), args)
    elif runner == "onnxruntime":
        a_out = ort_exec.run(original, feeds)
        b_out = ort_exec.run(optimized, feeds, source=original)
    else:
        a_out = run(original, feeds)
        b_out = run(optimized, feeds)
    max_abs = 0.0
    max_rel = 0.0
    for k, (a, b) in enumerate(zip(a_out, b_out, strict=True)):
        if a.shape != b.shape:
            return report(np.inf, np.inf, False, tol, f"output {k}: shape {a.shape} vs {b.shape}")
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
