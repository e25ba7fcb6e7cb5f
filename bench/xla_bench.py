"""bench/xla_bench.md (issue 41): measured speedups over XLA alone, on XLA's CPU client.

Modules: the eight zoo models written as HLO (``tensat_py.save(graph, "m.hlo")``), JAX
GPT-2-small stacks (``bench/gpt_stack.py``: 1, 12 and 24 layers), ``../shared/data/hlo``
(when present) and ``bench/hlo_modules``. Each is optimised twice in the same run, once
per cost model (``xla`` on device ``cpu``, the HLO default there, and ``roofline`` on
``t4``), with the optimiser's defaults otherwise (rules ``tensor+hlo``, verification on),
then the input and the program kept are timed side by side on XLA CPU with an A/A
(``tensat_py.bench_hlo``: one compilation each, round-robin runs, medians of per-round
ratios). The report gives, per module and cost model, the predicted speedup, the
measured one (original / optimised run time) and the A/A, then the goal's figures:
geometric-mean measured speedup, NasRNN's, modules slower beyond their A/A, and on the
modules where a candidate was kept, predicted against measured.

    python bench/xla_bench.py --out bench/xla_bench.md --work /tmp/xla-bench
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

ZOO = ("bert", "nasrnn", "resnext50", "nasneta", "inceptionv3", "squeezenet", "vgg19", "resnet50")


def gather(work: Path, layers: list[int], zoo: bool, shared: bool) -> list[Path]:
    """Write or copy every module into ``work/modules``; returns their paths."""
    import tensat_py
    from gpt_stack import gpt_stack_hlo

    mods = work / "modules"
    mods.mkdir(parents=True, exist_ok=True)
    out: list[Path] = []
    if zoo:
        for name in ZOO:
            p = mods / f"zoo_{name}.hlo"
            if not p.exists():
                tensat_py.save(tensat_py.load(name), p)
            out.append(p)
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


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def _f(x: float, nd: int = 3) -> str:
    return "" if not math.isfinite(x) else f"{x:.{nd}f}"


FALLBACK = ("fallback", "bound-stop")


def kept(r) -> bool:
    """Whether the optimiser kept a candidate (not the input)."""
    return not r.extraction.startswith(FALLBACK) and r.extraction != ""


def report(rows: dict[str, list], command: str, wall: float) -> str:
    """The markdown: one table with both cost models, then the goal's figures."""
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
            cells.append(f"{r.extraction} | {_f(r.predicted)} | {_f(1 / r.ratio)} | {_f(1 / r.aa)}")
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
        "on XLA CPU, the median of per-round ratios of round-robin runs; `A/A`: the "
        "original against a second compilation of itself, measured the same way (the "
        "noise). Both are measured; only `predicted` is a prediction.",
        "",
        *lines,
        "",
    ]
    for m in models:
        ok = [r for r in rows[m] if r.status == "ok"]
        meas = [1 / r.ratio for r in ok]
        slower = [r.module for r in ok if 1 / r.ratio < min(1.0, 1 / r.aa) - 0.02]
        kept_rows = [r for r in ok if kept(r)]
        within = [r for r in kept_rows if abs(r.predicted * r.ratio - 1) <= 0.05]
        nas = [1 / r.ratio for r in ok if r.module == "zoo_nasrnn.hlo"]
        text += [
            f"**{m}**: {len(ok)} of {len(rows[m])} modules ran; geometric-mean measured "
            f"speedup {_f(_geomean(meas))}x; NasRNN {_f(nas[0]) + 'x' if nas else 'not run'}; "
            f"slower than the original by more than 2 % beyond the A/A: {len(slower)} "
            f"({', '.join(slower) or 'none'}); candidates kept: {len(kept_rows)}, of which "
            f"predicted within 5 % of measured: {len(within)}.",
            "",
        ]
    return "\n".join(text)


def main(argv: list[str] | None = None) -> None:
    from tensat_py.bench_hlo import HloBenchConfig, run_hlo_bench

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
    p.add_argument("--only", default="", help="comma-separated substrings of module names")
    a = p.parse_args(argv)
    layers = [int(x) for x in a.layers.split(",") if x]
    files = gather(a.work, layers, not a.no_zoo, not a.no_shared)
    if a.only:
        files = [f for f in files if any(s in f.name for s in a.only.split(","))]
    t0 = time.perf_counter()
    rows: dict[str, list] = {}
    for m in a.cost_models.split(","):
        cfg = HloBenchConfig(
            folder=a.work / "modules",
            files=files,
            out=a.work / f"hlo_bench_{m}.md",
            jobs=a.jobs,
            time_limit=a.time_limit,
            node_limit=None,
            budget_s=a.budget,
            cost_model=m,
            device="cpu" if m == "xla" else "t4",
            command=f"xla_bench {m}",
        )
        rows[m] = run_hlo_bench(cfg, progress=False, on_row=lambda r: print(r.module, r.status))
    command = "python bench/xla_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    a.out.write_text(report(rows, command.strip(), time.perf_counter() - t0) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
