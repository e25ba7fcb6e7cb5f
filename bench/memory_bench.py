"""Peak resident memory of one optimisation run (issue 5, "Limits and memory").

Optimises a zoo model (default: the largest by operator count) at ``k_multi=2`` and
reports the peak resident set size of this process (``resource.getrusage``: the Rust
e-graph, the analysis and the Python side) and of its finished children (the CBC solver
runs as a subprocess), in MiB, with the exploration statistics.

    python bench/memory_bench.py                      # largest zoo model, ILP
    python bench/memory_bench.py --model nasrnn --extractor greedy --json

Linux reports ``ru_maxrss`` in KiB, macOS in bytes; both are converted to MiB.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time


def _mib(rss: int) -> float:
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; prints a table (or JSON) and returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="zoo model (default: the largest)")
    ap.add_argument("--k-multi", type=int, default=2)
    ap.add_argument("--extractor", default="ilp", choices=["ilp", "greedy", "greedy-dag"])
    ap.add_argument("--node-limit", type=int, default=50_000)
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds")
    ap.add_argument("--cycle-filter", default="efficient", choices=["efficient", "vanilla", "none"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import tensat_py
    from tensat_py import models

    if args.model is None:
        sizes = {name: len(models.get(name)) for name in sorted(models.ZOO)}
        args.model = max(sizes, key=lambda n: sizes[n])
    graph = models.get(args.model)
    base = _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    t0 = time.perf_counter()
    res = tensat_py.optimize(
        graph,
        k_multi=args.k_multi,
        extractor=args.extractor,
        node_limit=args.node_limit,
        time_limit=args.time_limit,
        cycle_filter=args.cycle_filter,
    )
    wall = time.perf_counter() - t0
    peak = _mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    child = _mib(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    out = {
        "model": args.model,
        "operators": len(graph),
        "k_multi": args.k_multi,
        "extractor": args.extractor,
        "cycle_filter": args.cycle_filter,
        "node_limit": args.node_limit,
        "enodes": res.stats["enodes"],
        "eclasses": res.stats["eclasses"],
        "stop_reason": res.stats["stop_reason"],
        "extraction_status": res.extraction_status,
        "seconds": round(wall, 2),
        "peak_rss_mib_before": round(base, 1),
        "peak_rss_mib": round(peak, 1),
        "peak_rss_mib_children": round(child, 1),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:24s} {v}")
    return out


if __name__ == "__main__":
    main()
