"""``tensat bench hlo DIR``: optimise every HLO module of a folder and run original and
optimised through XLA side by side.

For each ``*.hlo`` file (sorted by name): parse, skip it when its structural hash
(:func:`tensat_py.frontends.hlo.graph_hash`, names/metadata/layouts ignored) equals an
earlier module's, load, optimise (rules ``tensor+hlo``; the cost model and device of the
configuration: by default the roofline model's ``t4`` preset; ``cost_model="xla"`` prices
programs as XLA's CPU client runs them), and time both
modules with XLA's full CPU pipeline
(:func:`tensat_py.runtime.xla_exec.time_interleaved`: one compilation each, a warm-up run,
then round-robin runs for about ``budget_s`` seconds, a run under 0.1 s right after an
untimed run of the same module) on the same random arguments.
The original is compiled and timed twice; the ratio of the two (the *A/A* column) is the
noise floor a run-time ratio must beat. ``run ms`` is each module's fastest run; ``run
ratio`` and ``A/A`` are medians of per-round ratios
(:func:`tensat_py.runtime.timing.paired_ratio`): on a machine shared with other jobs a
ratio of two minima moved by up to 7 % between runs where the median of paired rounds
moved by under 1 %. Each module runs in its own worker process
(``jobs`` at a time; or as Ray tasks with ``ray_address``), so a crash or a time-out gives a
failure row with its reason instead of ending the run.

Columns: ``ops`` before/after (operator nodes some output needs, leaves and constants
excluded), ``e-nodes``, ``opt s`` (load, exploration and extraction: the optimisation
proper), ``verify s`` (the verification inside :func:`tensat_py.optimize`: both modules
compiled and run through XLA), ``compile ms`` and ``run ms``
of original and optimised, ``run ratio`` (optimised / original) and ``A/A`` (second
original / first original), ``predicted`` (the cost model's cost before / after: its
predicted speedup, for the program kept), ``max rel err`` (``max|a - b| / max|a|`` over
outputs)
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["HloRow", "HloBenchConfig", "bench_module", "run_hlo_bench", "markdown"]


@dataclass
class HloRow:
    """One module's results (``status`` ``"ok"``, ``"duplicate"`` or ``"failed"``)."""

    module: str
    status: str = "ok"
    reason: str = ""
    graph_hash: str = ""
    ops_before: int = 0
    ops_after: int = 0
    enodes: int = 0
    opt_s: float = math.nan
    verify_s: float = math.nan
    extraction: str = ""
    compile_ms_orig: float = math.nan
    compile_ms_opt: float = math.nan
    run_ms_orig: float = math.nan
    run_ms_orig2: float = math.nan
    run_ms_opt: float = math.nan
    #: Optimised / original run time, the median of per-round ratios.
    ratio: float = math.nan
    #: Second original / first original (the noise floor), measured like ``ratio``.
    aa: float = math.nan
    max_rel_err: float = math.nan
    verify_runner: str = ""
    #: The cost model's predicted speedup of the program kept: cost before / cost after.
    predicted: float = math.nan
    #: ``name/device`` of the cost model that chose the program.
    cost_model: str = ""
    #: Operator prices in ``predicted`` that are roofline estimates, not measurements
    #: (the ``xla`` model past its measuring deadline, or for operators XLA cannot run
    #: alone: ``stats["pricing"]``).
    estimated: int = 0


@dataclass
class HloBenchConfig:
    """Options of :func:`run_hlo_bench`."""

    folder: Path
    out: Path = Path("bench/hlo_bench.md")
    jobs: int = 1
    extractor: str = "ilp"
    solver: str = "highs"
    time_limit: float = 10.0
    node_limit: int | None = 20_000  # None: the optimiser's default (per operator)
    budget_s: float = 2.0  # seconds of round-robin timed runs per module
    cost_model: str | None = None  # None: roofline on t4 (optimize's own HLO default: xla, cpu)
    device: str = "t4"
    timeout_s: float = 900.0
    ray_address: str | None = None
    files: list[Path] = field(default_factory=list)
    command: str = ""


def _rel_err(a: Sequence[Any], b: Sequence[Any]) -> float:
    import numpy as np

    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape:
            return math.inf
        x64, y64 = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if not x64.size:
            continue
        diff = float(np.max(np.abs(x64 - y64)))
        scale = float(np.max(np.abs(x64)))
        if not math.isfinite(diff):
            same = np.array_equal(x64, y64, equal_nan=True)
            diff = 0.0 if same else math.inf
        worst = max(worst, diff / max(scale, np.finfo(np.float64).tiny))
    return worst


def bench_module(
    path: str,
    extractor: str,
    time_limit: float,
    node_limit: int | None,
    budget_s: float,
    solver: str = "highs",
    cost_model: str | None = None,
    device: str = "t4",
) -> dict[str, Any]:
    """Optimise one module and time it through XLA; returns an :class:`HloRow` as a dict.

    Never raises: a failure is a row with ``status="failed"`` and the reason.
    """
    import tensat_py
    from tensat_py.frontends.hlo import dumps, parse_file, print_module, random_args
    from tensat_py.runtime.timing import paired_ratio
    from tensat_py.runtime.xla_exec import time_interleaved

    row = HloRow(Path(path).name)
    try:
        t0 = time.perf_counter()
        graph = tensat_py.load(path)
        row.ops_before = graph.num_operators()
        result = tensat_py.optimize(
            graph,
            extractor=extractor,
            solver=solver,
            time_limit=time_limit,
            node_limit=node_limit,
            cost_model=cost_model,
            device=device,
        )
        total_s = time.perf_counter() - t0
        row.verify_s = float(result.stats.get("phase_seconds", {}).get("verification", 0.0))
        row.opt_s = total_s - row.verify_s
        row.ops_after = result.graph.num_operators()
        row.enodes = int(result.stats.get("enodes") or 0)
        row.extraction = result.extraction_status
        row.predicted = result.cost_before / result.cost_after if result.cost_after else math.nan
        row.cost_model = f"{result.cost_model}/{result.device}"
        row.estimated = _estimated(result.stats)
        row.verify_runner = result.verify.runner if result.verify else ""
        original = print_module(parse_file(path))
        optimised = dumps(result.graph)
        args = random_args(graph, seed=1)
        # Round-robin: original, optimised, original again (the A/A control).
        a, b, a2 = time_interleaved([original, optimised, original], args, budget_s=budget_s)
        row.compile_ms_orig, row.compile_ms_opt = a.compile_s * 1e3, b.compile_s * 1e3
        row.run_ms_orig, row.run_ms_opt, row.run_ms_orig2 = (
            a.run_s * 1e3,
            b.run_s * 1e3,
            a2.run_s * 1e3,
        )
        row.ratio, row.aa = paired_ratio(a.runs, b.runs), paired_ratio(a.runs, a2.runs)
        row.max_rel_err = _rel_err(a.outputs, b.outputs)
    except Exception as e:  # a failure row, never a crash of the whole run
        row.status = "failed"
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        row.reason = f"{type(e).__name__}: {msg}"[:200]
        if os.environ.get("TENSAT_BENCH_TRACE"):
            traceback.print_exc()
    return asdict(row)


def _hash(path: Path) -> str:
    from tensat_py.frontends.hlo import graph_hash, parse_file

    return graph_hash(parse_file(path))


def run_hlo_bench(
    cfg: HloBenchConfig, progress: bool = True, on_row: Callable[[HloRow], None] | None = None
) -> list[HloRow]:
    """Run every module of ``cfg.folder`` (see the module docstring); returns the rows in
    file order and writes ``cfg.out`` (markdown) and a CSV beside it."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    files = cfg.files or sorted(Path(cfg.folder).glob("*.hlo"))
    rows: dict[Path, HloRow] = {}
    todo: list[Path] = []
    seen: dict[str, str] = {}
    for f in files:
        try:
            h = _hash(f)
        except ValueError as e:
            rows[f] = HloRow(f.name, "failed", str(e).splitlines()[0][:200])
            continue
        if h in seen:
            rows[f] = HloRow(f.name, "duplicate", f"same graph hash as {seen[h]}", h)
        else:
            seen[h] = f.name
            todo.append(f)
    hashes = {f: _hash(f) for f in todo}
    t0 = time.perf_counter()
    args = (
        cfg.extractor,
        cfg.time_limit,
        cfg.node_limit,
        cfg.budget_s,
        cfg.solver,
        cfg.cost_model,
        cfg.device,
    )
    with Progress(
        TextColumn("[bold]hlo bench"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} {task.description}"),
        TimeElapsedColumn(),
        disable=not progress,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=len(todo))

        def done(f: Path, d: dict[str, Any]) -> None:
            r = HloRow(**d)
            r.graph_hash = hashes[f]
            rows[f] = r
            bar.update(task, advance=1, description=f.name)
            if on_row is not None:
                on_row(r)

        if cfg.ray_address is not None:
            import ray

            if cfg.ray_address == "local":
                ray.init(num_cpus=max(cfg.jobs, 1), include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=cfg.ray_address, log_to_driver=False)
            try:
                remote = ray.remote(bench_module)
                refs = {remote.remote(str(f), *args): f for f in todo}
                pending = list(refs)
                while pending:
                    ready, pending = ray.wait(pending, num_returns=1)
                    for ref in ready:
                        f = refs[ref]
                        try:
                            d = ray.get(ref)
                        except Exception as e:  # a worker that died
                            d = asdict(HloRow(f.name, "failed", f"ray: {e}"[:200]))
                        done(f, d)
            finally:
                ray.shutdown()
        else:
            # spawn, not fork: a forked child of a process that already runs XLA's thread
            # pools can deadlock.
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=max(cfg.jobs, 1), mp_context=ctx) as pool:
                futs = {pool.submit(bench_module, str(f), *args): f for f in todo}
                for fut, f in futs.items():
                    try:
                        d = fut.result(timeout=cfg.timeout_s)
                    except Exception as e:  # killed worker, time-out
                        d = asdict(HloRow(f.name, "failed", f"{type(e).__name__}: {e}"[:200]))
                    done(f, d)
    out = [rows[f] for f in files]
    write_report(cfg, out, time.perf_counter() - t0)
    return out


def _f(x: float, nd: int = 2) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def markdown(rows: Sequence[HloRow]) -> str:
    """The results table."""
    head = (
        "| module | ops before | ops after | e-nodes | opt s | verify s | extraction | "
        "compile ms orig | compile ms opt | run ms orig | run ms opt | run ratio | A/A | "
        "predicted speedup | max rel err | note |"
    )
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        if r.status != "ok":
            lines.append(f"| {r.module} | | | | | | | | | | | | | | | {r.status}: {r.reason} |")
            continue
        lines.append(
            f"| {r.module} | {r.ops_before} | {r.ops_after} | {r.enodes} | {_f(r.opt_s)} | "
            f"{_f(r.verify_s)} | {r.extraction} | {_f(r.compile_ms_orig, 1)} | "
            f"{_f(r.compile_ms_opt, 1)} | "
            f"{_f(r.run_ms_orig, 3)} | {_f(r.run_ms_opt, 3)} | {_f(r.ratio, 3)} | "
            f"{_f(r.aa, 3)} | {_f(r.predicted, 3)} | {r.max_rel_err:.1e} | {_estimates(r)} |"
        )
    return "\n".join(lines)


def _estimated(stats: dict[str, Any]) -> int:
    """Roofline estimates among a result's operator prices (``stats["pricing"]``: past
    the measuring deadline, or for operators XLA cannot run alone); 0 when it has none."""
    pricing = stats.get("pricing", {})
    return int(pricing.get("estimated", 0)) + int(pricing.get("unmeasurable", 0))


def _estimates(r: HloRow) -> str:
    """The note on a prediction that holds roofline estimates (``""`` when none does)."""
    return f"predicted with {r.estimated} roofline-estimated prices" if r.estimated else ""


def _model_name(cfg: HloBenchConfig) -> str:
    return f"{cfg.cost_model or 'roofline'} ({cfg.device})"


def write_report(cfg: HloBenchConfig, rows: Sequence[HloRow], wall_s: float) -> Path:
    """Write the markdown report and ``<out>.csv``; returns the markdown path."""
    import csv
    import platform

    ok = [r for r in rows if r.status == "ok"]
    verified = [r for r in ok if r.max_rel_err <= 1e-5]
    faster = [r for r in ok if r.ratio < r.aa and r.ratio < 0.98]
    slower = [r for r in ok if r.ratio > max(r.aa, 1.0) + 0.02]
    under10 = [r for r in ok if r.opt_s < 10]
    text = [
        "# XLA HLO benchmark",
        "",
        f"Command: `{cfg.command or 'tensat bench hlo ' + str(cfg.folder)}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}; "
        f"XLA CPU through jaxlib; wall time {wall_s:.0f} s. Programs chosen by the "
        f"{_model_name(cfg)} cost model; `predicted speedup` is that model's prediction, "
        "`run ratio` and `A/A` are measured on XLA CPU.",
        "",
        markdown(rows),
        "",
        f"- modules: {len(rows)} ({len(ok)} ok, "
        f"{sum(r.status == 'duplicate' for r in rows)} duplicates, "
        f"{sum(r.status == 'failed' for r in rows)} failed)",
        f"- verified through XLA (max relative error <= 1e-5, float32): {len(verified)}/{len(ok)}",
        f"- optimise time (load, exploration, extraction; verification excluded) under 10 s: "
        f"{len(under10)}/{len(ok)}",
        f"- run ratio below both 0.98 and the A/A ratio (faster): {len(faster)}; "
        f"more than 2% above max(1, A/A) (slower): {len(slower)}",
    ]
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text("\n".join(text) + "\n")
    with open(cfg.out.with_suffix(".csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(list(asdict(rows[0]).keys()) if rows else [])
        for r in rows:
            w.writerow(list(asdict(r).values()))
    return cfg.out
