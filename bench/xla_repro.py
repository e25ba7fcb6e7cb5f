"""How far do the ``xla`` model's prediction and XLA CPU's measured speedup move from one
minute to the next? (issue 41's last goal: the predicted ratio within 5 % of the measured
one on every module where a candidate is kept.)

Each module (a zoo name or an HLO file) is optimised once with the defaults for HLO
(``cost_model="xla"``, ``device="cpu"``), confirmation off so that the cost model's own
choice is what is studied. Then, in ``--sessions`` sessions, one after another over the
run, for each module in turn:

* the two programs it kept and started from are timed side by side on XLA CPU as
  ``bench/xla_bench.py`` times them (:func:`xla_bench.frozen_runs`,
  :func:`xla_bench.side_by_side`: weight-only operators pre-computed, rotating rounds for
  ``--budget`` seconds, with a second copy of the input): the *measured* speedup is the
  median of the per-round ratios, the A/A that of the input against its copy;
* in the first ``--pricings`` sessions, the same two programs are priced again by a new
  ``xla`` model over a fresh profile cache (every region measured again): a *prediction*
  of the same two programs made at another minute.

The report gives, per module, the optimisation's prediction, the range of the fresh
predictions and of the measured speedups over the sessions, the A/A range, and how many
sessions' measured speedups the optimisation's prediction is within 5 % of.

    python bench/xla_repro.py --out bench/xla_repro.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

#: The modules whose candidates the ``xla`` model kept in bench/xla_bench.md (2026-11-28).
DEFAULT = (
    "bert",
    "nasrnn",
    "bench/hlo_modules/jax_gcn_layer.hlo",
    "bench/hlo_modules/jax_linear_attention.hlo",
    "bench/hlo_modules/jax_lora_dense.hlo",
    "../shared/data/hlo/hloenv_Toy-nn_loss_dot_scatter.hlo",
)
#: Share within which a prediction counts as agreeing with a measurement (the goal's).
WITHIN = 0.05


def _load(name: str) -> Any:
    """The zoo model or HLO file ``name`` (a path relative to the repository root or
    absolute), or None for a file that is not there (``../shared`` absent)."""
    import tensat_py

    path = Path(name) if Path(name).is_absolute() else ROOT / name
    if path.suffix and not path.is_file():
        return None
    return tensat_py.load(str(path) if path.suffix else name)


def _price(graph: Any, candidate: Any) -> float:
    """Cost before / after of the two programs, by a new ``xla`` model over a fresh cache."""
    from tensat_py.cost.database import ProfileDatabase
    from tensat_py.cost.xla import XlaCostModel

    with tempfile.TemporaryDirectory() as d:
        model = XlaCostModel(db=ProfileDatabase(os.path.join(d, "profile.sqlite")))
        model.measure_until(None)
        before = model.graph_cost(graph)
        return before / model.graph_cost(candidate)


def _span(xs: list[float]) -> str:
    return f"{min(xs):.3f}-{max(xs):.3f}" if xs else ""


def main(argv: list[str] | None = None) -> None:
    import tensat_py
    from tensat_py.runtime.timing import paired_ratio
    from xla_bench import FALLBACK, frozen_runs, side_by_side

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("modules", nargs="*", default=list(DEFAULT), help="zoo names or HLO files")
    p.add_argument("--sessions", type=int, default=5, help="timing sessions per module")
    p.add_argument("--pricings", type=int, default=3, help="fresh-cache pricings per module")
    p.add_argument("--budget", type=float, default=3.0, help="seconds of timed runs each")
    p.add_argument("--time-limit", type=float, default=60.0, help="optimize() per module")
    p.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "xla_repro.md", help="the markdown report"
    )
    a = p.parse_args(argv)
    if a.sessions < 1 or a.pricings < 0 or a.budget <= 0:
        p.error("--sessions must be at least 1, --pricings at least 0, --budget positive")
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    graphs = {}
    for name in a.modules:
        try:
            graphs[name] = _load(name)
        except (OSError, ValueError) as e:  # not a zoo name, a file that does not parse
            p.error(str(e).strip().splitlines()[0])
    for name, g in graphs.items():
        if g is None:
            rows.append({"module": Path(name).stem, "status": "missing", "kept": False})
            continue
        res = tensat_py.optimize(
            g, cost_model="xla", device="cpu", time_limit=a.time_limit, confirm=False
        )
        kept = not res.extraction_status.startswith(FALLBACK)  # as xla_bench.kept
        row = {"module": Path(name).stem, "status": res.extraction_status, "graph": g}
        row.update(candidate=res.graph, kept=kept, measured=[], aa=[], fresh=[])
        row["predicted"] = res.cost_before / res.cost_after if kept else 1.0
        row["runs"] = frozen_runs(g, (g, res.graph, g)) if kept else None
        rows.append(row)
        print(name, res.extraction_status, f"predicted {row['predicted']:.3f}", flush=True)
    for k in range(a.sessions):
        for row in rows:
            if not row["kept"]:
                continue
            if k < a.pricings:
                row["fresh"].append(_price(row["graph"], row["candidate"]))
            times = side_by_side(row["runs"], a.budget)
            row["measured"].append(1 / paired_ratio(times[0], times[1]))
            row["aa"].append(1 / paired_ratio(times[0], times[2]))
        print(f"session {k + 1} of {a.sessions}", flush=True)
    a.out.write_text(_report(rows, a, time.perf_counter() - t0, argv))
    print(f"wrote {a.out}")


def _report(rows: list[dict[str, Any]], a: argparse.Namespace, wall: float, argv: Any) -> str:
    import jaxlib

    command = "python bench/xla_repro.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        "# The xla model's prediction and XLA CPU's measurement, minute to minute",
        "",
        f"Command: `{command.strip()}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, jaxlib {jaxlib.__version__}; wall time {wall:.0f} s; "
        f"{a.sessions} sessions of {a.budget:g} s per module, {a.pricings} fresh-cache "
        "pricings.",
        "",
        "`predicted`: the optimisation's cost before / after (a prediction). `fresh`: the "
        "same two programs priced again by a new model over a fresh cache, once in each of "
        "the first sessions (predictions). `measured`: input / kept program run time on XLA "
        "CPU, the median of per-round ratios, once per session; `A/A`: the input against a "
        f"second copy of itself (measurements). `within {WITHIN:.0%}`: sessions whose "
        "measured speedup the optimisation's prediction is within that share of.",
        "",
        "| module | status | predicted | fresh | measured | median measured | A/A | "
        f"within {WITHIN:.0%} |",
        "|---|---|---:|---|---|---:|---|---:|",
    ]
    for r in rows:
        if not r["kept"]:
            why = "file not found" if r["status"] == "missing" else f"{r['status']} (input kept)"
            lines.append(f"| {r['module']} | {why} | | | | | | |")
            continue
        hits = sum(abs(r["predicted"] / m - 1) <= WITHIN for m in r["measured"])
        lines.append(
            f"| {r['module']} | {r['status']} | {r['predicted']:.3f} | {_span(r['fresh'])} | "
            f"{_span(r['measured'])} | {statistics.median(r['measured']):.3f} | "
            f"{_span(r['aa'])} | {hits} of {len(r['measured'])} |"
        )
    kept = [r for r in rows if r["kept"]]
    if kept:
        spread = [max(r["measured"]) / min(r["measured"]) - 1 for r in kept]
        lines += [
            "",
            f"Largest spread of one module's measured speedup over the sessions: "
            f"{max(spread):.1%} ({kept[spread.index(max(spread))]['module']}); the A/A "
            f"stayed within {min(min(r['aa']) for r in kept):.3f}-"
            f"{max(max(r['aa']) for r in kept):.3f}.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
