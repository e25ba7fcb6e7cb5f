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

It also says how steady the machine itself was, since a prediction cannot agree with a
measurement more closely than the measurement agrees with itself:

* before and after the modules, a reference kernel (a 256 x 256 by 256 x 256 float32 dot,
  a library call on every core) is timed in back-to-back tries for ``--steady`` seconds:
  the share of tries within 1.1x of its fast time (the tries' 10th percentile), 1.1-1.3x,
  1.3-1.7x and at least 1.7x, and a timeline of them (:func:`steadiness`);
* per module, the rounds sorted by the pace of the input's second copy (the A/A's, run in
  the same round; not the input itself, whose slow runs would raise the very ratios they
  select): the share of rounds in which that copy ran at least 1.3x its fast time, and
  the measured speedup over the rounds in which it ran within 1.1x of it (*fast rounds*)
  beside the speedup over the rounds in which it ran at least 1.3x (*slow rounds*)
  (:func:`by_pace`): where the two differ, what the measurement says depends on the state
  the machine was in while it ran.

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
#: Bounds of the bands a time is sorted into, as multiples of the fast time of its kind
#: (the 10th percentile): below 1.1x, 1.1-1.3x, 1.3-1.7x, at least 1.7x.
BANDS = (1.1, 1.3, 1.7)
#: One timeline mark per band, in the order of :data:`BANDS`' bands.
MARKS = ".-+#"
#: Tries per timeline mark (their median is marked).
TRIES_PER_MARK = 4
#: The reference kernel of :func:`steadiness`: a float32 256 x 256 by 256 x 256 dot.
REFERENCE_HLO = """HloModule reference

ENTRY main {
  x = f32[256,256]{1,0} parameter(0)
  w = f32[256,256]{1,0} parameter(1)
  ROOT d = f32[256,256]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def fast_time(times: list[float]) -> float:
    """The fast time of ``times`` (seconds): their 10th percentile (the lower one)."""
    xs = sorted(times)
    return xs[(len(xs) - 1) // 10]


def band(x: float, fast: float) -> int:
    """The band (0 to 3, :data:`BANDS`) of time ``x`` against fast time ``fast``.

    >>> [band(t, 1.0) for t in (1.0, 1.2, 1.5, 2.0)]
    [0, 1, 2, 3]
    """
    return sum(x >= b * fast for b in BANDS)


def shares(times: list[float], fast: float | None = None) -> list[float]:
    """Share of ``times`` in each band (:func:`band`) against ``fast`` (default: their own
    fast time).

    >>> shares([1.0] * 7 + [1.2, 1.5, 2.0])
    [0.7, 0.1, 0.1, 0.1]
    >>> shares([2.0, 2.0], fast=1.0)
    [0.0, 0.0, 0.0, 1.0]
    """
    fast = fast_time(times) if fast is None else fast
    counts = [0] * (len(BANDS) + 1)
    for x in times:
        counts[band(x, fast)] += 1
    return [c / len(times) for c in counts]


def timeline(times: list[float], fast: float | None = None) -> str:
    """One mark (:data:`MARKS`) per :data:`TRIES_PER_MARK` tries in order, the band of
    their median against ``fast`` (default: the fast time of all ``times``).

    >>> timeline([1.0] * 4 + [2.0] * 4 + [1.2] * 3)
    '.#-'
    """
    fast = fast_time(times) if fast is None else fast
    marks = []
    for k in range(0, len(times), TRIES_PER_MARK):
        marks.append(MARKS[band(statistics.median(times[k : k + TRIES_PER_MARK]), fast)])
    return "".join(marks)


def steadiness(seconds: float) -> dict[str, Any]:
    """Tries of :data:`REFERENCE_HLO` back to back for about ``seconds`` (each try the
    lower quartile of the xla backend's timed calls, as a region's try is,
    :meth:`tensat_py.cost.xla.XlaBackend.time_module`): ``{"tries": their seconds in
    order, "seconds": wall seconds taken}``."""
    import numpy as np
    from tensat_py.cost.xla import XlaBackend

    rng = np.random.default_rng(0)
    args = [rng.uniform(0.5, 1.5, (256, 256)).astype(np.float32) for _ in range(2)]
    backend = XlaBackend()
    backend.time_module(REFERENCE_HLO, args)  # compiled and warm before the clock
    tries: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds or not tries:
        tries.append(backend.time_module(REFERENCE_HLO, args).low)
    return {"tries": tries, "seconds": time.perf_counter() - t0}


def by_pace(pace: list[float], base: list[float], other: list[float]) -> tuple[float, float, float]:
    """From per-round seconds of three programs timed side by side, ``pace`` (a program
    that tells the machine's state: the input's second copy), ``base`` (the input) and
    ``other`` (the program kept): the share of rounds in which ``pace`` ran at least 1.3x
    its fast time, and the speedup (median of per-round ``base / other``) over the rounds
    in which it ran within 1.1x of its fast time, and over those in which it ran at least
    1.3x (NaN where there are none).

    >>> by_pace([1.0] * 8 + [2.0] * 2, [2.0] * 8 + [6.0] * 2, [1.0] * 10)
    (0.2, 2.0, 6.0)
    """
    fast = fast_time(pace)
    rounds = list(zip(pace, base, other, strict=True))
    fast_rounds = [a / b for p, a, b in rounds if band(p, fast) == 0]
    slow_rounds = [a / b for p, a, b in rounds if band(p, fast) >= 2]
    return len(slow_rounds) / len(pace), _median(fast_rounds), _median(slow_rounds)


def best_within(measured: list[float], within: float = WITHIN) -> int:
    """The most of ``measured`` (speedups) that any one prediction ``p`` is within
    ``within`` of (``|p / m - 1| <= within``, the goal's test): the largest number of them
    inside one interval ``[p / (1 + within), p / (1 - within)]``. Where it is below
    ``len(measured)``, no prediction, however made, agrees with every measurement of the
    same two programs.

    >>> best_within([1.0, 1.05, 1.10]), best_within([1.0, 1.2, 1.25, 1.3])
    (3, 3)
    >>> best_within([1.0, 1.2]), best_within([])
    (1, 0)
    """
    xs = sorted(measured)
    ratio = (1 + within) / (1 - within)
    best, lo = 0, 0
    for hi, m in enumerate(xs):
        while m > xs[lo] * ratio * (1 + 1e-12):
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def _median(xs: list[float]) -> float:
    """The median of ``xs``, NaN for none."""
    return statistics.median(xs) if xs else float("nan")


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
        "--steady",
        type=float,
        default=20.0,
        help="seconds of reference-kernel tries before and after the modules (0: none)",
    )
    p.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "xla_repro.md", help="the markdown report"
    )
    a = p.parse_args(argv)
    if a.sessions < 1 or a.pricings < 0 or a.budget <= 0 or a.steady < 0:
        p.error(
            "--sessions must be at least 1, --pricings and --steady at least 0, --budget positive"
        )
    t0 = time.perf_counter()
    graphs = {}
    for name in a.modules:
        try:
            graphs[name] = _load(name)
        except (OSError, ValueError) as e:  # not a zoo name, a file that does not parse
            p.error(str(e).strip().splitlines()[0])
        if graphs[name] is None and name not in DEFAULT:  # a default may lack ../shared
            p.error(f"{name}: no such file")
    steady = [steadiness(a.steady)] if a.steady else []
    rows: list[dict[str, Any]] = []
    for name, g in graphs.items():
        if g is None:
            rows.append({"module": Path(name).stem, "status": "missing", "kept": False})
            continue
        res = tensat_py.optimize(
            g, cost_model="xla", device="cpu", time_limit=a.time_limit, confirm=False
        )
        kept = not res.extraction_status.startswith(FALLBACK)  # as xla_bench.kept
        row = {"module": Path(name).stem, "status": res.extraction_status, "graph": g}
        row.update(candidate=res.graph, kept=kept, measured=[], aa=[], fresh=[], pace=[])
        row["predicted"] = res.cost_before / res.cost_after if kept else 1.0
        row["runs"] = frozen_runs(g, (g, res.graph, g)) if kept else None
        rows.append(row)
        pricing = res.stats.get("pricing") or {}
        print(name, res.extraction_status, f"predicted {row['predicted']:.3f}", pricing, flush=True)
    for k in range(a.sessions):
        for row in rows:
            if not row["kept"]:
                continue
            if k < a.pricings:
                row["fresh"].append(_price(row["graph"], row["candidate"]))
            times = side_by_side(row["runs"], a.budget)
            row["measured"].append(1 / paired_ratio(times[0], times[1]))
            row["aa"].append(1 / paired_ratio(times[0], times[2]))
            row["pace"].append(by_pace(times[2], times[0], times[1]))
        print(f"session {k + 1} of {a.sessions}", flush=True)
    if a.steady:
        steady.append(steadiness(a.steady))
    a.out.write_text(_report(rows, a, time.perf_counter() - t0, argv, steady))
    print(f"wrote {a.out}")


def _report(
    rows: list[dict[str, Any]],
    a: argparse.Namespace,
    wall: float,
    argv: Any,
    steady: list[dict[str, Any]],
) -> str:
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
        "measured speedup the optimisation's prediction is within that share of; `any "
        "prediction`: the most sessions any one number is within it of (`best_within`: "
        "below the sessions, no prediction agrees with every measurement of the module).",
        "",
        "| module | status | predicted | fresh | measured | median measured | A/A | "
        f"within {WITHIN:.0%} | any prediction |",
        "|---|---|---:|---|---|---:|---|---:|---:|",
    ]
    for r in rows:
        if not r["kept"]:
            why = "file not found" if r["status"] == "missing" else f"{r['status']} (input kept)"
            lines.append(f"| {r['module']} | {why} | | | | | | | |")
            continue
        hits = sum(abs(r["predicted"] / m - 1) <= WITHIN for m in r["measured"])
        lines.append(
            f"| {r['module']} | {r['status']} | {r['predicted']:.3f} | {_span(r['fresh'])} | "
            f"{_span(r['measured'])} | {statistics.median(r['measured']):.3f} | "
            f"{_span(r['aa'])} | {hits} of {len(r['measured'])} | "
            f"{best_within(r['measured'])} of {len(r['measured'])} |"
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
        beyond = [r["module"] for r in kept if best_within(r["measured"]) < len(r["measured"])]
        lines.append(
            f"Modules whose measured speedups no one prediction is within {WITHIN:.0%} of in "
            f"every session: {len(beyond)} of {len(kept)}"
            + (f" ({', '.join(beyond)})." if beyond else ".")
        )
    lines += _steadiness_lines(steady)
    lines += _pace_lines(kept)
    return "\n".join(lines) + "\n"


def _pct(xs: list[float]) -> str:
    return " / ".join(f"{x:.0%}" for x in xs)


def _steadiness_lines(steady: list[dict[str, Any]]) -> list[str]:
    """The reference kernel's tries before and after the modules (:func:`steadiness`)."""
    if not steady:
        return []
    lines = [
        "",
        "## How steady the machine was",
        "",
        "A float32 256 x 256 by 256 x 256 dot timed in back-to-back tries (each the lower "
        "quartile of about 30 ms of calls, as a region's try is). Shares of tries within "
        "1.1x of the fast time (the 10th percentile of all its tries, before and after) / "
        "1.1-1.3x / 1.3-1.7x / at least 1.7x; the fast time of each sitting's own tries; "
        f"timeline one mark per {TRIES_PER_MARK} tries (`{MARKS[0]}` within "
        f"1.1x, `{MARKS[1]}` 1.1-1.3x, `{MARKS[2]}` 1.3-1.7x, `{MARKS[3]}` at least 1.7x).",
        "",
        "| when | tries | seconds | fast time (us) | shares |",
        "|---|---:|---:|---:|---|",
    ]
    fast = fast_time([t for s in steady for t in s["tries"]])
    for when, s in zip(("before", "after"), steady, strict=False):
        lines.append(
            f"| {when} | {len(s['tries'])} | {s['seconds']:.0f} | "
            f"{fast_time(s['tries']) * 1e6:.0f} | {_pct(shares(s['tries'], fast))} |"
        )
    lines.append("")
    for when, s in zip(("before", "after"), steady, strict=False):
        lines += [f"Timeline {when}:", "", "```", timeline(s["tries"], fast), "```", ""]
    return lines


def _pace_lines(kept: list[dict[str, Any]]) -> list[str]:
    """Per module, the measured speedup split by the machine's pace in each round, read
    from the input's second copy (:func:`by_pace`), over the sessions."""
    if not kept:
        return []
    lines = [
        "## The measurement by the machine's pace",
        "",
        "Per session, the rounds in which the input's second copy (the A/A's, run in the "
        "same round) ran at least 1.3x its fast time (its 10th percentile that session), "
        "and the measured speedup of the input over the program kept in the rounds in "
        "which that copy ran within 1.1x of it (fast rounds) and at least 1.3x (slow "
        "rounds); ranges over the sessions.",
        "",
        "| module | slow rounds | speedup, fast rounds | speedup, slow rounds |",
        "|---|---|---|---|",
    ]
    for r in kept:
        slow = [x for x, _, _ in r["pace"]]
        fast_s = [f for _, f, _ in r["pace"] if f == f]
        slow_s = [s for _, _, s in r["pace"] if s == s]
        lines.append(
            f"| {r['module']} | {min(slow):.0%}-{max(slow):.0%} | {_span(fast_s)} | "
            f"{_span(slow_s)} |"
        )
    return lines


if __name__ == "__main__":
    main()
