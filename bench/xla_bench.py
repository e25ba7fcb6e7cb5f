"""bench/xla_bench.md (issue 41): measured speedups over XLA alone, on XLA's CPU client.

Modules: the eight zoo models (optimised with their own front end's rules, TASO's; the
input and the program kept written as HLO with weight-only operators pre-computed, as at
inference, weights as entry parameters), JAX
GPT-2-small stacks (``bench/gpt_stack.py``: 1, 12 and 24 layers), ``../shared/data/hlo``
(when present) and ``bench/hlo_modules``. Each is optimised twice in the same run, once
per cost model (``xla`` on device ``cpu``, the HLO default there, and ``roofline`` on
``t4``), with the optimiser's defaults otherwise (rules ``tensor+hlo``, verification on),
then the input and the program kept are timed side by side on XLA CPU with an A/A
(``tensat_py.bench_hlo``: one compilation each, round-robin runs on one placed copy of
the inputs, each program with its own weights, medians of per-round ratios). The report
gives, per module and cost model, the predicted speedup, the measured one (original /
optimised run time) and the A/A, then the goal's figures:
geometric-mean measured speedup, NasRNN's, modules slower beyond their A/A, and on the
modules where a candidate was kept, predicted against measured.

    python bench/xla_bench.py --out bench/xla_bench.md --work /tmp/xla-bench
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

ZOO = ("bert", "nasrnn", "resnext50", "nasneta", "inceptionv3", "squeezenet", "vgg19", "resnet50")


def gather(work: Path, layers: list[int], shared: bool) -> list[Path]:
    """Write or copy every HLO module into ``work/modules``; returns their paths."""
    from gpt_stack import gpt_stack_hlo

    mods = work / "modules"
    mods.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    for n in layers:
        p = mods / f"jax_gpt2_{n}layers.hlo"
        if not p.exists():
            p.write_text(gpt_stack_hlo(n))
        out.append(p)
    folders = [ROOT / "bench" / "hlo_modules"]
    if shared and (ROOT.parent / "shared" / "data" / "hlo").is_dir():
        folders.append(ROOT.parent / "shared" / "data" / "hlo")
    for d in folders:
        for f in sorted(d.glob("*.hlo")):
            p = mods / f.name
            if not p.exists():
                shutil.copy(f, p)
            out.append(p)
    return out


def bench_zoo(name: str, cost_model: str, device: str, time_limit: float, budget_s: float):
    """One zoo model: optimised with its own front end's rules (TASO's) under
    ``cost_model``, then the input and the program kept, weight-only operators
    pre-computed (:func:`tensat_py.runtime.xla_exec.freeze_weights`, as confirmation on
    XLA and the ``xla`` cost model's whole-program prices do), printed as HLO (weights as
    entry parameters) and timed side by side on XLA CPU with an A/A. NasRNN's input
    merged by hand (:func:`nasrnn_bound.tensat_merged`, 2 dots per step: the goal's
    bound) is timed in the same rounds. Returns an ``HloRow`` as a dict, for NasRNN with
    ``bound`` (input / merged run time) and ``of_bound`` (merged / optimised), medians of
    per-round ratios; never raises."""
    import statistics
    import traceback
    from dataclasses import asdict

    import tensat_py
    from tensat_py.bench_hlo import HloRow, _estimated, _rel_err
    from tensat_py.runtime import timing
    from tensat_py.runtime.protocol import XlaCpu

    row = HloRow(f"zoo_{name}.hlo")
    bound: dict[str, float] = {}
    try:
        g = tensat_py.load(name)
        row.ops_before = g.num_operators()
        t0 = time.perf_counter()
        # The zoo model is run as HLO: confirmed on XLA CPU, as HLO input is by default
        # (a built graph's default runtime is onnxruntime).
        confirm = XlaCpu() if cost_model == "xla" else None
        res = tensat_py.optimize(
            g, cost_model=cost_model, device=device, time_limit=time_limit, confirm=confirm
        )
        row.verify_s = float(res.stats.get("phase_seconds", {}).get("verification", 0.0))
        row.opt_s = time.perf_counter() - t0 - row.verify_s
        row.ops_after, row.enodes = res.graph.num_operators(), int(res.stats.get("enodes") or 0)
        row.extraction = res.extraction_status
        row.predicted = res.cost_before / res.cost_after if res.cost_after else math.nan
        row.cost_model = f"{res.cost_model}/{res.device}"
        row.estimated = _estimated(res.stats)
        row.verify_runner = res.verify.runner if res.verify else ""
        programs = [g, res.graph, g]
        if name == "nasrnn":  # the goal's bound, timed in the same rounds
            from nasrnn_bound import tensat_merged

            programs.append(tensat_merged(len(g.inputs()), 2))
        runs = frozen_runs(g, programs)
        outs = [[o[0] for o in r()] for r in runs]
        row.max_rel_err = _rel_err(outs[0], outs[1])
        if len(outs) > 3 and _rel_err(outs[0], outs[3]) > 1e-5:
            raise ValueError("NasRNN merged by hand computes another state")
        times = side_by_side(runs, budget_s)
        row.run_ms_orig, row.run_ms_opt, row.run_ms_orig2 = (
            statistics.median(t) * 1e3 for t in times[:3]
        )
        row.ratio = timing.paired_ratio(times[0], times[1])
        row.aa = timing.paired_ratio(times[0], times[2])
        if len(times) > 3:
            bound = {
                "bound": 1 / timing.paired_ratio(times[0], times[3]),
                "of_bound": 1 / timing.paired_ratio(times[3], times[1]),
            }
    except Exception as e:  # a failure row
        row.status = "failed"
        row.reason = (
            f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:200]
        )
        traceback.print_exc()
    return {**asdict(row), **bound}


def frozen_runs(graph, programs) -> list:
    """One XLA CPU runnable per program of ``programs`` (computing what ``graph`` does):
    weight-only operators pre-computed, printed as HLO with weights as entry parameters,
    compiled once; the random inputs (seed 1) one placed copy for all, each program with
    weights of its own (:func:`tensat_py.runtime.protocol._xla_runnable`)."""
    from tensat_py.frontends.hlo import dumps, entry_leaves
    from tensat_py.runtime import numpy_exec
    from tensat_py.runtime.protocol import _xla_runnable, weight_positions
    from tensat_py.runtime.xla_exec import Placement, freeze_weights

    feeds = numpy_exec.random_feeds(graph, seed=1)
    placement = Placement()  # the programs share their input arrays
    runs = []
    for prog in programs:
        fg, ff = freeze_weights(prog, feeds)
        args = [ff[n] for n in entry_leaves(fg)]
        runs.append(_xla_runnable(dumps(fg), args, placement, weight_positions(fg)))
    return runs


def side_by_side(runs, budget_s: float) -> list[list[float]]:
    """Seconds of each runnable per round, as confirmation times them
    (:func:`tensat_py.runtime.timing.side_by_side`: one untimed round, then rotating
    rounds, each timed run after an untimed run of its own where the programs are short)
    for about ``budget_s`` seconds, 10 to 200 rounds."""
    from tensat_py.runtime import timing

    return timing.side_by_side(runs, budget_s, min_rounds=10, max_rounds=200)[0]


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def _f(x: float, nd: int = 3) -> str:
    return "" if not math.isfinite(x) else f"{x:.{nd}f}"


FALLBACK = ("fallback", "bound-stop")


def kept(r) -> bool:
    """Whether the optimiser kept a candidate (not the input)."""
    return not r.extraction.startswith(FALLBACK) and r.extraction != ""


def report(
    rows: dict[str, list],
    command: str,
    wall: float,
    bounds: dict[str, tuple[float, float]] | None = None,
) -> str:
    """The markdown: one table with both cost models, then the goal's figures;
    ``bounds[model]``: NasRNN's hand-merged bound, measured in the rounds of that model's
    NasRNN row (speedup over the input, optimised program's speedup over it)."""
    import os
    import platform

    import jaxlib

    models = list(rows)
    by = {m: {r.module: r for r in rows[m]} for m in models}
    names = [r.module for r in rows[models[0]]]
    head = "| module | ops | " + " | ".join(
        f"{m}: status | {m}: predicted | {m}: measured | {m}: A/A" for m in models
    )
    lines = [head + " |", "|---|---:|" + "---|---:|---:|---:|" * len(models)]
    for n in names:
        cells = []
        ops = ""
        for m in models:
            r = by[m].get(n)
            if r is None or r.status != "ok":
                why = "" if r is None else f"{r.status}: {r.reason}"
                cells.append(f"{why} | | |")
                continue
            ops = str(r.ops_before)
            est = f" ({r.estimated} est.)" if r.estimated else ""
            cells.append(
                f"{r.extraction} | {_f(r.predicted)}{est} | {_f(1 / r.ratio)} | {_f(1 / r.aa)}"
            )
        lines.append(f"| {n} | {ops} | " + " | ".join(cells) + " |")
    text = [
        "# Measured on XLA CPU: the optimiser's programs beside XLA alone",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, jaxlib {jaxlib.__version__}; wall time {wall:.0f} s.",
        "",
        "`predicted`: the cost model's speedup for the program it kept (cost before / "
        "after; 1.000 when it kept the input). `measured`: original / optimised run time "
        "on XLA CPU, the median of per-round ratios of round-robin runs (a run under "
        "0.1 s timed right after an untimed run of the same program; the programs "
        "read one placed copy of the inputs, each holds its own weights); `A/A`: the "
        "original against a second compilation of itself, measured the same way (the "
        "noise). Both are measured; only `predicted` is a prediction. `(N est.)` after a "
        "prediction: N of the operator prices it sums are roofline `cpu` estimates, not "
        "measurements (the xla cost model priced the programs operator by operator, past "
        "its measuring deadline or for operators XLA cannot run alone).",
        "",
        *lines,
        "",
    ]
    for m in models:
        ok = [r for r in rows[m] if r.status == "ok"]
        kept_rows = [r for r in ok if kept(r)]
        # Where the input was kept, the program run is the input: its measured ratio is
        # noise, and the program's speedup is 1.
        meas = [1 / r.ratio if kept(r) else 1.0 for r in ok]
        raw = [1 / r.ratio for r in ok]
        slower = [r.module for r in kept_rows if 1 / r.ratio < min(1.0, 1 / r.aa) - 0.02]
        within = [r for r in kept_rows if abs(r.predicted * r.ratio - 1) <= 0.05]
        nas = [(1 / r.ratio if kept(r) else 1.0) for r in ok if r.module == "zoo_nasrnn.hlo"]
        guessed = [r.module for r in ok if r.estimated]
        text += [
            f"**{m}**: {len(ok)} of {len(rows[m])} modules ran; candidates kept: "
            f"{len(kept_rows)}; geometric-mean measured speedup {_f(_geomean(meas))}x "
            f"(the input counted as 1.000 where it was kept; every measured ratio as "
            f"measured: {_f(_geomean(raw))}x); NasRNN "
            f"{_f(nas[0]) + 'x' if nas else 'not run'}{_bound(bounds, m)}; kept "
            f"candidates slower than the "
            f"original by more than 2 % beyond the A/A: {len(slower)} "
            f"({', '.join(slower) or 'none'}); kept candidates predicted within 5 % of "
            f"measured: {len(within)} of {len(kept_rows)}; predictions holding roofline "
            f"estimates: {len(guessed)} ({', '.join(guessed) or 'none'}).",
            "",
        ]
    return "\n".join(text)


def _bound(bounds: dict[str, tuple[float, float]] | None, model: str) -> str:
    """The NasRNN figure's clause on the hand-merged bound, measured in the same rounds.

    >>> for part in _bound({"xla": (1.336, 0.948)}, "xla").split("; "):
    ...     print(part)
     (its input merged by hand, 2 dots per step, in the same rounds: 1.336x
    the program kept at 0.948x of it)
    >>> _bound(None, "xla")
    ''
    """
    if not bounds or model not in bounds:
        return ""
    speedup, of = bounds[model]
    return (
        f" (its input merged by hand, 2 dots per step, in the same rounds: {_f(speedup)}x; "
        f"the program kept at {_f(of)}x of it)"
    )


def main(argv: list[str] | None = None) -> None:
    from tensat_py.bench_hlo import HloBenchConfig, HloRow, run_hlo_bench

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "xla_bench.md")
    p.add_argument("--work", type=Path, default=Path("/tmp/xla-bench"))
    p.add_argument("--layers", default="1,12,24", help="GPT-2 stack depths ('' for none)")
    p.add_argument("--no-zoo", action="store_true")
    p.add_argument("--no-shared", action="store_true")
    p.add_argument("--cost-models", default="xla,roofline")
    p.add_argument("--time-limit", type=float, default=60.0, help="the optimiser's default")
    p.add_argument("--budget", type=float, default=3.0, help="seconds of timed runs each")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument(
        "--module-timeout",
        type=float,
        default=1800.0,
        help="seconds one module may take, optimisation and timing (default 1800: one run "
        "of hloenv_efficientnet_forward_73conv_large took about 130 s here, and its three "
        "programs each run twice before they are timed; with 900 s it timed out)",
    )
    p.add_argument("--only", default="", help="comma-separated substrings of module names")
    a = p.parse_args(argv)
    if a.module_timeout <= 0:
        p.error(f"--module-timeout must be positive, got {a.module_timeout:g}")
    if a.time_limit <= 0 or a.budget <= 0 or a.jobs < 1:
        p.error("--time-limit and --budget must be positive, --jobs at least 1")
    from tensat_py.cost import COST_MODELS

    unknown = [m for m in a.cost_models.split(",") if m not in COST_MODELS]
    if unknown:
        p.error(f"--cost-models: unknown {', '.join(unknown)}; known: {', '.join(COST_MODELS)}")
    layers = [int(x) for x in a.layers.split(",") if x]
    files = gather(a.work, layers, not a.no_shared)
    zoo = [] if a.no_zoo else list(ZOO)
    if a.only:
        keep = a.only.split(",")
        files = [f for f in files if any(k in f.name for k in keep)]
        zoo = [z for z in zoo if any(k in f"zoo_{z}.hlo" for k in keep)]
    if not files and not zoo:
        p.error(f"no module to run: --only {a.only!r} matches no module name")
    t0 = time.perf_counter()
    rows: dict[str, list] = {}
    bounds: dict[str, tuple[float, float]] = {}
    for m in a.cost_models.split(","):
        device = "cpu" if m == "xla" else "t4"
        rows[m] = []
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            for z in zoo:
                fut = pool.submit(bench_zoo, z, m, device, a.time_limit, a.budget)
                try:
                    d = fut.result(timeout=a.module_timeout)
                except Exception as e:  # a killed worker, a time-out
                    d = asdict(HloRow(f"zoo_{z}.hlo", "failed", f"{type(e).__name__}: {e}"[:200]))
                if "bound" in d:
                    bounds[m] = (d.pop("bound"), d.pop("of_bound"))
                rows[m].append(HloRow(**d))
                print(m, d["module"], d["status"], d["reason"], flush=True)
        cfg = HloBenchConfig(
            folder=a.work / "modules",
            files=files,
            out=a.work / f"hlo_bench_{m}.md",
            jobs=a.jobs,
            time_limit=a.time_limit,
            node_limit=None,
            budget_s=a.budget,
            cost_model=m,
            device=device,
            command=f"xla_bench {m}",
            timeout_s=a.module_timeout,
        )
        if files:
            rows[m] += run_hlo_bench(
                cfg, progress=False, on_row=lambda r: print(r.module, r.status, flush=True)
            )
    command = "python bench/xla_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    a.out.write_text(report(rows, command.strip(), time.perf_counter() - t0, bounds) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
