"""Measured ONNX speedups: the original zoo model vs tensat's, both under onnxruntime.

For every zoo model (``tensat_py.models.ZOO``):

1. the graph is exported to ONNX with random weights (seed 0), the *original* model;
2. that file is loaded back with :func:`tensat_py.frontends.onnx.load`, optimised with the
   ``cpu`` roofline cost model, and exported again, the *optimised* model;
3. onnxruntime (CPUExecutionProvider, ``ORT_ENABLE_ALL``, ``intra_op_num_threads=2``)
   runs both on the same random inputs. Outputs must agree within a relative tolerance of
   1e-3 (``max|a - b| / max|a|`` per output): float32 with sums re-associated by merged
   matmuls/convolutions, far above round-off (~1e-6) and far below a semantic error (~1);
4. after ``--warmup`` runs of each, ``--runs`` (>= 20) timed runs alternate between the
   two sessions; the table gives the median latency of each, their ratio
   (original / optimised: > 1 means ours is faster) and the cost model's predicted ratio
   (cost before / cost after).

Usage::

    python bench/onnx_bench.py                     # every zoo model, markdown table
    python bench/onnx_bench.py --models bert nasrnn --runs 50 --out bench/onnx_bench.md

Models that cannot be built (a missing data file) are listed as skipped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tensat_py
from tensat_py import models
from tensat_py.frontends import onnx as tonnx
from tensat_py.runtime import ort_exec, timing

#: Relative tolerance on outputs (see the module docstring).
TOLERANCE = 1e-3


@dataclass
class Row:
    """One model's measurements (latencies in milliseconds)."""

    model: str
    ops_before: int
    ops_after: int
    original_ms: float
    optimized_ms: float
    control_ms: float
    predicted: float
    max_rel_error: float
    status: str
    optimize_s: float
    #: Original / optimised: the median of per-round ratios.
    measured: float
    #: Original / second session of the original (the A/A ratio, i.e. the noise), measured
    #: like ``measured``.
    control: float


def _nodes(model) -> int:
    return len(model.graph.node)


def bench_model(name: str, args: argparse.Namespace) -> Row:
    """Export, optimise, check and time one zoo model."""
    graph = models.get(name)
    original = tonnx.to_model(graph, weights="random")
    loaded = tonnx.load(original)
    t0 = time.perf_counter()
    result = tensat_py.optimize(
        loaded,
        device="cpu",
        extractor=args.extractor,
        time_limit=args.time_limit,
        verify=False,  # checked below, on onnxruntime, against the original file
    )
    opt_s = time.perf_counter() - t0
    optimized = tonnx.to_model(result.graph)

    a = ort_exec.session(original, threads=2, level="all", spinning=False)
    b = ort_exec.session(optimized, threads=2, level="all", spinning=False)
    # A/A control: a second session of the original, timed in the same rotation.
    c = ort_exec.session(original, threads=2, level="all", spinning=False)
    rng = np.random.default_rng(args.seed)
    feeds = {
        i.name: rng.standard_normal([int(d) for d in i.shape]).astype(np.float32)
        for i in a.get_inputs()
    }
    ya, yb = a.run(None, feeds), b.run(None, feeds)
    err = 0.0
    for p, q in zip(ya, yb, strict=True):
        if p.shape != q.shape:
            raise AssertionError(f"{name}: output shapes differ {p.shape} vs {q.shape}")
        err = max(err, float(np.abs(p - q).max()) / max(float(np.abs(p).max()), 1e-30))
    if not err <= TOLERANCE:
        raise AssertionError(f"{name}: outputs differ, max relative error {err:.3g}")

    ta, tb, tc = timing.rotating(
        [lambda: a.run(None, feeds), lambda: b.run(None, feeds), lambda: c.run(None, feeds)],
        rounds=args.runs,
        warmup=args.warmup,
    )
    return Row(
        model=name,
        ops_before=_nodes(original),
        ops_after=_nodes(optimized),
        original_ms=statistics.median(ta) * 1e3,
        optimized_ms=statistics.median(tb) * 1e3,
        control_ms=statistics.median(tc) * 1e3,
        measured=timing.paired_ratio(tb, ta),
        control=timing.paired_ratio(tc, ta),
        predicted=result.speedup,
        max_rel_error=err,
        status=result.extraction_status,
        optimize_s=opt_s,
    )


def table(rows: list[Row], skipped: dict[str, str], args: argparse.Namespace) -> str:
    """The markdown report."""
    lines = [
        f"onnxruntime CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads=2; "
        f"{args.runs} rounds of rotating runs after {args.warmup} warm-up runs each; latencies "
        "are medians, ratios medians of per-round ratios; "
        f"intra-op spinning off; A/A = original vs a second session of the original (noise); "
        f"cost model roofline/cpu, extractor {args.extractor}; tolerance {TOLERANCE:g} relative.",
        "",
        "| model | ONNX nodes orig / opt | original (ms) | optimised (ms) | measured ratio "
        "| A/A ratio | predicted ratio | max rel err | extraction | optimise (s) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.model} | {r.ops_before} / {r.ops_after} | {r.original_ms:.3f} | "
            f"{r.optimized_ms:.3f} | {r.measured:.3f} | {r.control:.3f} | {r.predicted:.3f} | "
            f"{r.max_rel_error:.1e} | {r.status} | {r.optimize_s:.1f} |"
        )
    for name, why in skipped.items():
        lines.append(f"| {name} | skipped: {why} | | | | | | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="*", default=None, help="zoo names (default: all)")
    p.add_argument("--runs", type=int, default=30, help="timed runs per model (>= 20)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up runs per model")
    p.add_argument("--extractor", default="ilp", choices=["ilp", "greedy", "greedy-dag"])
    p.add_argument("--time-limit", type=float, default=60.0, help="exploration/ILP seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = p.parse_args(argv)
    if args.runs < 20:
        p.error("--runs must be at least 20")
    names = args.models or list(models.ZOO)
    rows: list[Row] = []
    skipped: dict[str, str] = {}
    for name in names:
        try:
            rows.append(bench_model(name, args))
        except FileNotFoundError as e:
            skipped[name] = str(e)
            continue
        r = rows[-1]
        print(
            f"{name}: {r.original_ms:.3f} ms -> {r.optimized_ms:.3f} ms "
            f"(x{r.measured:.3f}, predicted x{r.predicted:.3f})",
            file=sys.stderr,
        )
    text = table(rows, skipped, args)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
