"""Extraction benchmark: cost and seconds per extractor on the Tensat e-graphs.

Runs greedy (tree), greedy-dag, beam and the ILP (CBC and HiGHS; lazy cycle cuts by default, which
on e-graphs with class cycles first runs the search over acyclic restrictions, see
``docs/extraction.md``; ``--no-search`` adds the exact ILP alone; the paper's order variables
with ``--order``; HiGHS on the whole e-graph, not split at dominator cuts, with
``--whole``) on every egraph-serialize file in ``--dir`` (default
``../shared/data/egraphs``) and prints a markdown table: DAG cost (ms, TASO's measured
operator runtimes), wall-clock seconds, status, and the gap in percent to the
reference optimum (CPLEX, 10 h, from the SmoothE artifact; for ``*_acyclic`` files the
reference is the full e-graph's, which a cycle-filtered e-graph may not reach).

    python bench/extract_bench.py --time-limit 10 --whole --dir ../shared/data/egraphs /tmp/zoo2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tensat_py.egraph import load_json
from tensat_py.extract import extract

REFERENCE = {"tensat_vgg": 4.85076, "tensat_resnet50": 4.38579, "tensat_bert": 0.70472}
DEFAULT_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "egraphs"


def configs(
    order: bool, no_search: bool = False, cbc: bool = True, whole: bool = False
) -> list[tuple[str, dict]]:
    """The extractors to run, as (row name, keyword arguments of ``extract``)."""
    out = [
        ("greedy", {"extractor": "greedy"}),
        ("greedy-dag", {"extractor": "greedy-dag"}),
        ("beam", {"extractor": "beam"}),
    ]
    if cbc:
        out.append(("ilp-cbc", {"extractor": "ilp", "solver": "cbc"}))
    out.append(("ilp-highs", {"extractor": "ilp", "solver": "highs"}))
    if whole:
        out.append(("ilp-highs-whole", {"extractor": "ilp", "solver": "highs", "decompose": False}))
    if no_search:
        out.append(("ilp-highs-exact", {"extractor": "ilp", "solver": "highs", "search": False}))
    if order:
        out.append(
            ("ilp-cbc-order", {"extractor": "ilp", "solver": "cbc", "cycle_constraints": "order"})
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark; prints markdown to stdout. Returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--dir",
        type=Path,
        nargs="+",
        default=[DEFAULT_DIR],
        help="folders of *.json e-graphs",
    )
    ap.add_argument("--no-cbc", action="store_true", help="skip the CBC rows")
    ap.add_argument("--time-limit", type=float, default=60.0, help="ILP limit, seconds")
    ap.add_argument("--order", action="store_true", help="also run CBC with order variables")
    ap.add_argument("--only", nargs="*", help="file stems to run (default: all)")
    ap.add_argument(
        "--no-search", action="store_true", help="also run the exact HiGHS ILP without search"
    )
    ap.add_argument(
        "--whole",
        action="store_true",
        help="also run HiGHS on the whole e-graph (no split at dominator cuts), side by side",
    )
    args = ap.parse_args(argv)
    files = [f for d in args.dir for f in sorted(d.glob("*.json"))]
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        print(f"no e-graphs in {[str(d) for d in args.dir]}", file=sys.stderr)
        return 1
    print(
        f"ILP time limit {args.time_limit:g} s; cost in the file's unit; ref % = gap to the "
        "reference optimum; proved % = (cost - lower bound) / cost\n"
    )
    print(
        "| e-graph | nodes | kept | extractor | cost | lower bound | proved % | reference "
        "| ref % | seconds | build s | pieces | status |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    pairs: list[tuple[str, float, float, str, str]] = []
    for path in files:
        p = load_json(path)
        ref = REFERENCE.get(path.stem.removesuffix("_acyclic"))
        seen: dict[str, tuple[float, str]] = {}
        for name, kw in configs(args.order, args.no_search, not args.no_cbc, args.whole):
            kwargs = dict(kw)
            if kwargs["extractor"] == "ilp":
                kwargs["time_limit"] = args.time_limit
            r = extract(p, **kwargs)
            gap = f"{100 * (r.cost - ref) / ref:+.3f}" if ref else "-"
            status = r.status if r.status != "fallback-greedy" else f"fallback-greedy ({r.message})"
            lb = f"{r.lower_bound:.6g}" if r.lower_bound is not None else "-"
            proved = f"{100 * r.gap:.4f}" if r.gap is not None else "-"
            kept = r.stats.get("kept_nodes", "-")
            pieces = r.stats.get("pieces", 1 if kwargs["extractor"] == "ilp" else "-")
            seen[name] = (r.seconds, r.status)
            print(
                f"| {path.stem} | {p.num_nodes} | {kept} | {name} | {r.cost:.6g} | {lb} "
                f"| {proved} | {ref if ref else '-'} | {gap} | {r.seconds:.2f} "
                f"| {r.build_seconds:.2f} | {pieces} | {status} |",
                flush=True,
            )
        if "ilp-highs" in seen and "ilp-highs-whole" in seen:
            (a, sa), (b, sb) = seen["ilp-highs-whole"], seen["ilp-highs"]
            pairs.append((path.stem, a, b, sb, sa))
    if pairs:
        print("\nHiGHS in pieces against the whole e-graph (same run; seconds, status):\n")
        print("| e-graph | pieces s | status | whole s | status | whole / pieces |")
        print("|---|---:|---|---:|---|---:|")
        for stem, whole_s, parts_s, parts_st, whole_st in pairs:
            print(
                f"| {stem} | {parts_s:.2f} | {parts_st} | {whole_s:.2f} | {whole_st} "
                f"| {whole_s / parts_s:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
