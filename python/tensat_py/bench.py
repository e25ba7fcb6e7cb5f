"""Benchmark harness: reproduces the Tensat evaluation (Yang et al., MLSys 2021) under our
cost model and writes CSV files, one markdown report and PNG plots.

Tables and figures (numbered as in the paper):

* **Table 1**: per model, optimisation time (exploration + extraction) and cost-model
  speedup at ``k_multi=1``, beside the paper's figures (T4 GPU, 16-core CPU) and the ratio;
  one column per ILP solver.
* **Figure 6**: ``k_multi`` 0..3 under a time cap: speedup, optimisation time, final e-nodes.
* **Table 3**: greedy (tree cost) against ILP extraction.
* **Table 4**: ILP time with cycle constraints (``cycle_filter="none"``, topological order
  variables real and integer) against efficient cycle filtering (no order constraints).
* **Table 5**: exploration time with vanilla against efficient cycle filtering.

Every optimised graph is checked numerically against its model (float64, NumPy reference
executor, the same check as :func:`tensat_py.verify`); the reference outputs are computed
once per model and identical optimised graphs are checked once.

Entry points: :func:`run_bench` (the ``tensat bench`` command and ``bench/run.py``).
"""

from __future__ import annotations

import csv
import hashlib
import os
import pickle
import platform
import resource
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ALL_MODELS",
    "PAPER",
    "QUICK_MODELS",
    "BenchConfig",
    "Run",
    "RunSpec",
    "Verifier",
    "machine_info",
    "plan_runs",
    "run_bench",
]

#: Every zoo model, in the paper's order.
ALL_MODELS = (
    "bert",
    "resnext50",
    "nasneta",
    "nasrnn",
    "inceptionv3",
    "squeezenet",
    "vgg19",
    "resnet50",
)
#: Models of ``--quick``: small graphs whose optimisation and verification are fast.
QUICK_MODELS = ("bert", "nasrnn", "squeezenet")
#: Models of Table 4 (the paper reports only these three).
TABLE4_MODELS = ("bert", "nasrnn", "nasneta")

#: The paper's figures (Tensat, MLSys 2021; T4 GPU, 16-core CPU). ``opt_s``: optimisation
#: time (s) and ``speedup``: measured runtime speedup (%) at k_multi=1 (Table 1);
#: ``ilp_order_s``: ILP time with cycle constraints at k_multi 1 / 2 (Table 4);
#: ``explore_s``: exploration time with efficient filtering at k_multi 1 / 2 (Table 5).
PAPER: dict[str, dict[str, Any]] = {
    "bert": {"opt_s": 1.4, "speedup": 9.2, "ilp_order_s": (0.16, 510.0), "explore_s": (0.17, 0.89)},
    "resnext50": {"opt_s": 0.7, "speedup": 8.8},
    "nasneta": {
        "opt_s": 10.6,
        "speedup": 7.3,
        "ilp_order_s": (1.81, 75.0),
        "explore_s": (1.27, 8.62),
    },
    "nasrnn": {
        "opt_s": 0.5,
        "speedup": 68.9,
        "ilp_order_s": (0.32, 357.0),
        "explore_s": (0.08, 1.47),
    },
    "inceptionv3": {"opt_s": 5.1, "speedup": 10.0},
    "squeezenet": {"opt_s": 0.3, "speedup": 24.5},
    "vgg19": {"opt_s": 0.4, "speedup": 8.9},
    "resnet50": {},
}


# --------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class RunSpec:
    """One optimisation: a model under one configuration."""

    model: str
    k_multi: int
    extractor: str = "ilp"
    cycle_filter: str = "efficient"
    solver: str = "highs"
    order_vars: str = "real"

    @property
    def label(self) -> str:
        """Short text for progress and tables."""
        parts = [self.model, f"k={self.k_multi}", self.extractor]
        if self.extractor == "ilp":
            parts.append(self.solver)
        parts.append(self.cycle_filter)
        if self.cycle_filter == "none" and self.extractor == "ilp":
            parts.append(f"order={self.order_vars}")
        return " ".join(parts)


@dataclass
class Run:
    """A :class:`RunSpec` and what it measured (times in seconds, speedup in percent)."""

    model: str
    k_multi: int
    extractor: str
    cycle_filter: str
    solver: str
    order_vars: str
    explore_s: float = float("nan")
    extract_s: float = float("nan")
    opt_s: float = float("nan")
    enodes: int = 0
    eclasses: int = 0
    iterations: int = 0
    stop_reason: str = ""
    filtered_enodes: int = 0
    cost_before_ms: float = float("nan")
    cost_after_ms: float = float("nan")
    speedup_pct: float = float("nan")
    status: str = ""
    verified: bool = False
    max_rel_error: float = float("nan")
    verify_s: float = 0.0
    message: str = ""

    @classmethod
    def columns(cls) -> list[str]:
        """CSV header."""
        return [f.name for f in fields(cls)]


class Verifier:
    """Float64 numerical check of optimised graphs against their model, with caching.

    Same semantics as :func:`tensat_py.verify` with ``dtype="float64"``, ``seed=0``: both
    graphs run on the NumPy reference executor with the model's random feeds and are
    compared output by output (relative error within ``TOLERANCES["float64"]``). The
    model's outputs are computed once, and an optimised graph identical to one already
    checked is not run again.
    """

    def __init__(self) -> None:
        self._ref: dict[str, tuple[dict[str, np.ndarray], list[np.ndarray]]] = {}
        self._done: dict[tuple[str, str], tuple[bool, float, str]] = {}

    def reference(self, model: str, original: Any) -> None:
        """Computes (once) the model's feeds and reference outputs."""
        from tensat_py.runtime import random_feeds, run

        if model not in self._ref:
            feeds = random_feeds(original, seed=0, dtype="float64")
            self._ref[model] = (feeds, run(original, feeds))

    def check(self, model: str, original: Any, optimized: Any) -> tuple[bool, float, str]:
        """``(passed, max relative error, message)`` for ``optimized`` against ``original``."""
        from tensat_py.runtime import run
        from tensat_py.verify import TOLERANCES

        # The flat form, not the s-expression: a tree print of a DAG with heavy sharing
        # (NasNet-A's cells) is exponential in size.
        key = (model, hashlib.sha1(repr(optimized.to_flat()).encode()).hexdigest())
        if key in self._done:
            return self._done[key]
        self.reference(model, original)
        feeds, ref = self._ref[model]
        tol = TOLERANCES["float64"]
        missing = sorted(set(optimized.leaf_types()) - set(feeds))
        if missing:
            out = (False, float("inf"), f"optimized graph has new leaves {missing}")
        else:
            got = run(optimized, feeds)
            out = (True, 0.0, "ok")
            if len(got) != len(ref):
                out = (False, float("inf"), f"output count {len(got)} vs {len(ref)}")
            else:
                worst = 0.0
                for k, (a, b) in enumerate(zip(ref, got, strict=True)):
                    if a.shape != b.shape:
                        worst = float("inf")
                        out = (False, worst, f"output {k}: shape {a.shape} vs {b.shape}")
                        break
                    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
                    scale = float(np.max(np.abs(a))) if a.size else 0.0
                    rel = diff / max(scale, np.finfo(np.float64).tiny)
                    worst = max(worst, rel if np.isfinite(rel) else float("inf"))
                else:
                    ok = worst <= tol
                    out = (ok, worst, "ok" if ok else f"max relative error {worst:.3g} > {tol:g}")
        self._done[key] = out
        return out


def run_one(
    spec: RunSpec,
    graph: Any,
    verifier: Verifier,
    *,
    time_cap: float,
    node_limit: int,
    iter_limit: int,
    device: str,
) -> Run:
    """Optimises ``graph`` under ``spec`` (cost model roofline on ``device``) and verifies it.

    The optimisation itself runs without ``optimize``'s internal check
    (``verify=False``); the result is checked by ``verifier`` (same test, cached).
    """
    from tensat_py.pipeline import optimize

    rec = Run(**asdict(spec))
    try:
        res = optimize(
            graph,
            k_multi=spec.k_multi,
            node_limit=node_limit,
            iter_limit=iter_limit,
            time_limit=time_cap,
            cycle_filter=spec.cycle_filter,
            extractor=spec.extractor,
            solver=spec.solver if spec.solver != "-" else "cbc",  # "-": no ILP in this run
            order_vars=spec.order_vars if spec.order_vars != "-" else "real",
            device=device,
            verify=False,
        )
    except Exception as e:  # noqa: BLE001 - a failed configuration is a result too
        rec.status = "error"
        rec.message = f"{type(e).__name__}: {e}"
        return rec
    st = res.stats
    rec.explore_s = float(st.get("explore_seconds", float("nan")))
    rec.extract_s = float(st.get("extract_seconds", float("nan")))
    rec.opt_s = rec.explore_s + rec.extract_s
    rec.enodes = int(st.get("enodes", 0))
    rec.eclasses = int(st.get("eclasses", 0))
    rec.iterations = int(st.get("iterations", 0))
    rec.stop_reason = str(st.get("stop_reason", ""))
    rec.filtered_enodes = int(st.get("filtered_enodes", 0))
    rec.cost_before_ms = res.cost_before * 1e3
    rec.cost_after_ms = res.cost_after * 1e3
    rec.speedup_pct = (res.speedup - 1.0) * 100.0
    rec.status = res.extraction_status
    rec.message = res.message or str(st.get("extraction_message", ""))
    t0 = time.perf_counter()
    rec.verified, rec.max_rel_error, vmsg = verifier.check(spec.model, graph, res.graph)
    rec.verify_s = time.perf_counter() - t0
    if not rec.verified:
        rec.message = f"VERIFICATION FAILED: {vmsg}; {rec.message}"
    return rec


def _forked(fn: Callable[[], Any], mem_fraction: float = 0.8) -> tuple[str, Any]:
    """Runs ``fn`` in a forked child under a memory cap (a fraction of physical memory);
    returns ``("ok", value)`` or ``("error", message)``. A run that exhausts memory, or
    leaks it, takes only its child down, never the whole benchmark."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            cap = int(total * mem_fraction)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            data = pickle.dumps(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            import traceback

            where = traceback.extract_tb(e.__traceback__)[-1]
            msg = f"{type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno})"
            data = pickle.dumps(("error", msg))
        with os.fdopen(wfd, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        return "error", f"run process died (wait status {status}; out of memory?)"
    return pickle.loads(data)


# --------------------------------------------------------------------------- plan
@dataclass
class BenchConfig:
    """What ``tensat bench`` runs.

    Attributes:
        models: zoo names.
        k_multi: Figure 6's k_multi values (Tables 3-5 use 1 and 2 among them).
        solvers: ILP solvers; the first drives Figure 6 and Tables 3-5, Table 1 shows all.
        time_cap: seconds for each run's whole optimisation (exploration and extraction).
        node_limit: e-node limit of exploration.
        iter_limit: iteration limit of exploration.
        device: roofline device preset.
        tables: which of ``"1", "6", "3", "4", "5"`` to produce.
        out: output folder (default :func:`default_out`: a new folder in the current one).
        quick: the ``--quick`` preset (recorded in the report).
    """

    models: Sequence[str] = ALL_MODELS
    k_multi: Sequence[int] = (0, 1, 2, 3)
    solvers: Sequence[str] = ("highs", "cbc")
    time_cap: float = 60.0
    node_limit: int = 50_000
    iter_limit: int = 15
    device: str = "t4"
    tables: Sequence[str] = ("1", "6", "3", "4", "5")
    out: Path = field(default_factory=lambda: default_out())
    quick: bool = False
    command: str = ""
    runs: list[Run] = field(default_factory=list)

    @property
    def solver(self) -> str:
        """The primary solver."""
        return self.solvers[0]

    @property
    def table_ks(self) -> list[int]:
        """k_multi values of Tables 3-5: 1 and 2 where selected."""
        return [k for k in (1, 2) if k in self.k_multi] or [min(self.k_multi)]


def plan_runs(cfg: BenchConfig) -> list[RunSpec]:
    """The distinct runs the selected tables need, model by model (shared runs once)."""
    specs: list[RunSpec] = []
    for m in cfg.models:
        want: list[RunSpec] = []
        if "1" in cfg.tables:
            want += [RunSpec(m, 1, solver=s) for s in cfg.solvers]
        if "6" in cfg.tables:
            want += [RunSpec(m, k, solver=cfg.solver) for k in cfg.k_multi]
        for k in cfg.table_ks:
            if "3" in cfg.tables:
                want += [RunSpec(m, k, solver=cfg.solver), RunSpec(m, k, "greedy")]
            if "4" in cfg.tables and m in TABLE4_MODELS:
                want.append(RunSpec(m, k, solver=cfg.solver))
                for ov in ("real", "int"):
                    want.append(RunSpec(m, k, "ilp", "none", cfg.solver, ov))
            if "5" in cfg.tables:
                want += [RunSpec(m, k, solver=cfg.solver), RunSpec(m, k, "greedy", "vanilla")]
        for s in want:
            if s.extractor != "ilp":
                s = RunSpec(s.model, s.k_multi, s.extractor, s.cycle_filter, "-", "-")
            if s not in specs:
                specs.append(s)
    return specs


# --------------------------------------------------------------------------- machine
def machine_info() -> dict[str, str]:
    """CPU model name, core count (``nproc``), memory, OS and Python version."""
    info = {"cores": str(os.cpu_count() or "?"), "cpu": platform.processor() or "?"}
    try:
        info["cores"] = subprocess.run(
            ["nproc"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        info["memory"] = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        info["memory"] = "?"
    info["os"] = f"{platform.system()} {platform.release()}"
    info["python"] = platform.python_version()
    return info


# --------------------------------------------------------------------------- tables
def _f(x: float | None, nd: int = 2) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "—"
    return f"{x:.{nd}f}"


def _find(runs: Iterable[Run], **kw: Any) -> Run | None:
    for r in runs:
        if all(getattr(r, k) == v for k, v in kw.items()):
            return r
    return None


def _main(cfg: BenchConfig, model: str, k: int, solver: str) -> Run | None:
    """The run with ILP extraction and efficient cycle filtering."""
    kw = {"extractor": "ilp", "cycle_filter": "efficient", "solver": solver}
    return _find(cfg.runs, model=model, k_multi=k, **kw)


Table = tuple[list[str], list[list[str]]]


def table1(cfg: BenchConfig) -> Table:
    """Table 1 rows: ours against the paper at k_multi=1."""
    head = ["model", "paper time (s)"]
    for s in cfg.solvers:
        head += [f"ours {s} (s)", f"ratio {s}", f"ILP {s}"]
    head += [
        "paper measured speedup (%)",
        f"our predicted speedup (%, roofline {cfg.device})",
        "e-nodes",
        "verify (s)",
        "verified",
    ]
    rows = []
    for m in cfg.models:
        p = PAPER.get(m, {})
        row = [m, _f(p.get("opt_s"), 1)]
        first = None
        for s in cfg.solvers:
            r = _main(cfg, m, 1, s)
            first = first or r
            if r is None:
                row += ["—", "—", "—"]
                continue
            ratio = r.opt_s / p["opt_s"] if p.get("opt_s") else None
            row += [_f(r.opt_s), _f(ratio), r.status]
        row += [
            _f(p.get("speedup"), 1),
            _f(first.speedup_pct, 1) if first else "—",
            str(first.enodes) if first else "—",
            _f(first.verify_s) if first else "—",
            _yes(first),
        ]
        rows.append(row)
    return head, rows


def _yes(r: Run | None) -> str:
    if r is None:
        return "—"
    return "yes" if r.verified else "**NO**"


def figure6(cfg: BenchConfig) -> Table:
    """Figure 6 rows: per model and k_multi."""
    head = [
        "model",
        "k_multi",
        "predicted speedup (%)",
        "opt. time (s)",
        "explore (s)",
        "extract (s)",
    ]
    head += ["e-nodes", "stop", "ILP", "verified"]
    rows = []
    for m in cfg.models:
        for k in cfg.k_multi:
            r = _main(cfg, m, k, cfg.solver)
            if r is None:
                continue
            rows.append(
                [m, str(k), _f(r.speedup_pct, 1), _f(r.opt_s), _f(r.explore_s), _f(r.extract_s)]
                + [str(r.enodes), r.stop_reason, r.status, _yes(r)]
            )
    return head, rows


def table3(cfg: BenchConfig) -> Table:
    """Table 3 rows: greedy against ILP extraction."""
    head = ["model", "k_multi", "greedy predicted speedup (%)", "ILP predicted speedup (%)"]
    head += ["greedy extract (s)", "ILP extract (s)", "ILP", "verified"]
    rows = []
    for m in cfg.models:
        for k in cfg.table_ks:
            g = _find(cfg.runs, model=m, k_multi=k, extractor="greedy", cycle_filter="efficient")
            i = _main(cfg, m, k, cfg.solver)
            if g is None or i is None:
                continue
            rows.append(
                [m, str(k), _f(g.speedup_pct, 1), _f(i.speedup_pct, 1)]
                + [_f(g.extract_s), _f(i.extract_s), i.status]
                + ["yes" if g.verified and i.verified else "**NO**"]
            )
    return head, rows


def table4(cfg: BenchConfig) -> Table:
    """Table 4 rows: ILP time with order-variable cycle constraints against efficient filtering."""
    head = ["model", "k_multi", "paper with cycle constr. (s)", "real vars (s)", "real ILP"]
    head += ["int vars (s)", "int ILP", "efficient filter (s)", "efficient ILP", "verified"]
    rows = []
    for m in cfg.models:
        for k in cfg.table_ks:
            kw = {"model": m, "k_multi": k, "extractor": "ilp", "solver": cfg.solver}
            re_ = _find(cfg.runs, cycle_filter="none", order_vars="real", **kw)
            in_ = _find(cfg.runs, cycle_filter="none", order_vars="int", **kw)
            ef = _find(cfg.runs, cycle_filter="efficient", **kw)
            if re_ is None or in_ is None or ef is None:
                continue
            paper = PAPER.get(m, {}).get("ilp_order_s")
            ok = all(r.verified for r in (re_, in_, ef))
            rows.append(
                [m, str(k), _f(paper[k - 1], 2) if paper and k in (1, 2) else "—"]
                + [_f(re_.extract_s), re_.status, _f(in_.extract_s), in_.status]
                + [_f(ef.extract_s), ef.status, "yes" if ok else "**NO**"]
            )
    return head, rows


def table5(cfg: BenchConfig) -> Table:
    """Table 5 rows: exploration time, vanilla against efficient cycle filtering."""
    head = ["model", "k_multi", "paper efficient (s)", "vanilla (s)", "efficient (s)"]
    head += ["vanilla e-nodes", "efficient e-nodes", "filtered (eff.)", "verified"]
    rows = []
    for m in cfg.models:
        for k in cfg.table_ks:
            v = _find(cfg.runs, model=m, k_multi=k, cycle_filter="vanilla")
            e = _main(cfg, m, k, cfg.solver)
            if v is None or e is None:
                continue
            paper = PAPER.get(m, {}).get("explore_s")
            rows.append(
                [m, str(k), _f(paper[k - 1], 2) if paper and k in (1, 2) else "—"]
                + [_f(v.explore_s, 3), _f(e.explore_s, 3), str(v.enodes), str(e.enodes)]
                + [str(e.filtered_enodes), "yes" if v.verified and e.verified else "**NO**"]
            )
    return head, rows


def markdown_table(table: Table) -> str:
    """A GitHub markdown table."""
    head, rows = table
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def write_csv(path: Path, table: Table) -> None:
    """Writes a table as CSV."""
    head, rows = table
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        w.writerows(rows)


# --------------------------------------------------------------------------- plots
def plot_figure6(cfg: BenchConfig, path: Path) -> None:
    """Figure 6: speedup, optimisation time and e-nodes against k_multi, one line per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    metrics = (
        ("speedup_pct", "predicted speedup (%, roofline)", False),
        ("opt_s", "optimisation time (s)", True),
        ("enodes", "final e-nodes", True),
    )
    for ax, (attr, title, log) in zip(axes, metrics, strict=True):
        for m in cfg.models:
            pts = []
            for k in cfg.k_multi:
                r = _main(cfg, m, k, cfg.solver)
                if r is not None and r.status != "error":
                    pts.append((k, max(float(getattr(r, attr)), 1e-3) if log else getattr(r, attr)))
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=m)
        ax.set_xlabel("k_multi")
        ax.set_title(title)
        ax.set_xticks(list(cfg.k_multi))
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Figure 6 (roofline cost model, {cfg.device}; time cap {cfg.time_cap:g} s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_table1(cfg: BenchConfig, path: Path) -> None:
    """Table 1 as bars: our optimisation time per solver against the paper's (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(cfg.models)
    series: list[tuple[str, list[float]]] = [
        ("paper", [PAPER.get(m, {}).get("opt_s", float("nan")) for m in models])
    ]
    for s in cfg.solvers:
        vals = []
        for m in models:
            r = _main(cfg, m, 1, s)
            vals.append(r.opt_s if r is not None else float("nan"))
        series.append((f"ours ({s})", vals))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(models)), 4))
    width = 0.8 / len(series)
    for j, (label, vals) in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(models))]
        ax.bar(xs, vals, width, label=label)
    ax.set_xticks(range(len(models)), models, rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel("optimisation time at k_multi=1 (s)")
    ax.set_title("Table 1: optimisation time, ours (2-core CPU) vs Tensat paper (16-core)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- report
def goal_notes(cfg: BenchConfig) -> list[str]:
    """Bullet lines on the issue's goals: k=1 time at most the paper's; k=2 optimal in 60 s."""
    notes = []
    for m in cfg.models:
        p = PAPER.get(m, {}).get("opt_s")
        r = _main(cfg, m, 1, cfg.solver)
        if p and r is not None:
            verdict = "meets" if r.opt_s <= p else "**misses**"
            notes.append(
                f"- {m}, k_multi=1: {r.opt_s:.2f} s vs the paper's {p:g} s "
                f"({r.opt_s / p:.2f}x) — {verdict} the goal ({cfg.solver})."
            )
    for m in cfg.models:
        r = _main(cfg, m, 2, cfg.solver)
        if r is None:
            continue
        ok = r.status == "optimal" and r.opt_s < 60
        verdict = "meets" if ok else "**misses**"
        notes.append(
            f"- {m}, k_multi=2: {r.opt_s:.2f} s (exploration {r.explore_s:.2f} s, ILP "
            f"{r.extract_s:.2f} s), ILP {r.status}, {r.enodes} e-nodes ({r.stop_reason}) — "
            f"{verdict} the goal (optimal in under 60 s, {cfg.solver})."
        )
    return notes


def solver_notes(cfg: BenchConfig) -> list[str]:
    """Bullet lines comparing the ILP solvers where they differ (status, time, cost)."""
    if len(cfg.solvers) < 2:
        return []
    notes = []
    for m in cfg.models:
        rs = [_main(cfg, m, 1, s) for s in cfg.solvers]
        if any(r is None for r in rs):
            continue
        parts = [
            f"{s}: {r.extract_s:.2f} s, {r.status}, speedup {r.speedup_pct:.1f} %"
            for s, r in zip(cfg.solvers, rs, strict=True)
        ]
        differ = len({r.status for r in rs}) > 1 or max(r.extract_s for r in rs) > 2 * max(
            min(r.extract_s for r in rs), 0.5
        )
        if differ:
            notes.append(f"- {m} (k_multi=1): " + "; ".join(parts) + ".")
    return notes


def write_report(cfg: BenchConfig, out: Path, wall_s: float) -> Path:
    """Writes ``report.md`` with every selected table, the goals and the verification note."""
    mi = machine_info()
    nver = sum(r.verified for r in cfg.runs)
    failed = [r for r in cfg.runs if not r.verified]
    lines = [
        "# tensat-py benchmarks: the Tensat evaluation under the roofline cost model",
        "",
        f"Command: `{cfg.command}`  ",
        f"Machine: {mi['cpu']}, {mi['cores']} cores (`nproc`), {mi['memory']} memory, "
        f"{mi['os']}, Python {mi['python']}.  ",
        f"Settings: device `{cfg.device}` (roofline), node limit {cfg.node_limit:,}, iteration "
        f"limit {cfg.iter_limit}, time cap {cfg.time_cap:g} s (the whole optimisation: "
        f"exploration and extraction together), solvers {', '.join(cfg.solvers)} (first one "
        f"for Figure 6 and Tables 3-5){'; --quick' if cfg.quick else ''}.  ",
        f"Wall time of the whole benchmark: {wall_s:.0f} s, {len(cfg.runs)} runs.",
        "",
        "Speedups are cost-model speedups (roofline, "
        f"`{cfg.device}` preset: cost before / cost after - 1); the paper's are measured T4 "
        "runtimes. Times are wall-clock seconds of exploration + extraction; the paper's ran "
        "on a 16-core CPU. Ratio = ours / paper (below 1 is faster).",
        "",
        "**Verification**: every optimised graph was run against its model on the NumPy "
        "reference executor in float64 with the same random inputs and weights "
        "(`tensat_py.verify` semantics, relative error <= 1e-9): "
        + (
            f"all {nver} runs verified."
            if not failed
            else f"{nver} of {len(cfg.runs)} verified; FAILED: "
            + ", ".join(RunSpec(**_spec(r)).label for r in failed)
            + "."
        ),
        "",
    ]
    sections = [
        (
            "1",
            "Table 1: optimisation time and speedup at k_multi=1",
            table1,
            "Optimisation time = exploration + extraction; verification is not included "
            "(`verify (s)`: the float64 check on the NumPy reference executor, which "
            "`tensat optimize` runs too, so its wall time is about the sum). `ILP` is the "
            "extraction status (`optimal` proved, `feasible` stopped at the time cap, "
            "`fallback-greedy` the ILP was not better than greedy). The paper's speedups "
            "are measured on a T4 GPU; ours are predicted by the roofline cost model for "
            f"device `{cfg.device}`, not measured.",
        ),
        (
            "6",
            "Figure 6: k_multi",
            figure6,
            f"Plot: `figure6.png`. Primary solver {cfg.solver}; `stop` is why exploration ended.",
        ),
        (
            "3",
            "Table 3: greedy against ILP extraction",
            table3,
            "Greedy is egg's tree-cost extractor; ILP is Tensat's formulation.",
        ),
        (
            "4",
            "Table 4: ILP with cycle constraints against efficient filtering",
            table4,
            'With `cycle_filter="none"` the e-graph keeps its cycles and the ILP carries the '
            "paper's topological order variables (real or integer); with efficient filtering it "
            f"has none. Times are ILP (extraction) seconds, within the {cfg.time_cap:g} s cap; the "
            "paper's column is its ILP time with cycle constraints (real variables).",
        ),
        (
            "5",
            "Table 5: exploration, vanilla against efficient cycle filtering",
            table5,
            "Exploration seconds only; vanilla runs use greedy extraction (their graphs are "
            "verified too).",
        ),
    ]
    for key, title, fn, note in sections:
        if key not in cfg.tables:
            continue
        lines += [f"## {title}", "", note, "", markdown_table(fn(cfg)), ""]
    lines += ["## Goals", ""] + goal_notes(cfg) + [""]
    sn = solver_notes(cfg)
    if sn:
        lines += ["## Solvers (k_multi=1) where they differ", ""] + sn + [""]
    errs = [r for r in cfg.runs if r.status == "error"]
    if errs:
        lines += ["## Errors", ""] + [f"- {RunSpec(**_spec(r)).label}: {r.message}" for r in errs]
        lines += [""]
    lines += [
        "Files: `runs.csv` (every run, every statistic), `table1.csv`, `figure6.csv`, "
        "`table3.csv`, `table4.csv`, `table5.csv`, `figure6.png`, `table1.png`.",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _spec(r: Run) -> dict[str, Any]:
    return {f.name: getattr(r, f.name) for f in fields(RunSpec)}


# --------------------------------------------------------------------------- driver
def default_out() -> Path:
    """A new output folder name in the current folder: ``tensat-bench-YYYYMMDD-HHMMSS``
    (with ``-2``, ``-3``, ... when that exists already)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(f"tensat-bench-{stamp}")
    k = 2
    while path.exists():
        path = Path(f"tensat-bench-{stamp}-{k}")
        k += 1
    return path


def run_bench(
    cfg: BenchConfig,
    *,
    progress: bool = True,
    on_run: Callable[[Run], None] | None = None,
    isolate: bool = True,
    force: bool = False,
) -> Path:
    """Runs the plan, writes CSVs, plots and ``report.md`` under ``cfg.out``; returns the
    report's path.

    With ``isolate`` (default) each run happens in a forked process under a memory cap, so
    one run that exhausts memory is reported as an error instead of ending the benchmark.

    Raises:
        KeyError: an unknown model name (with a "did you mean" suggestion).
        FileExistsError: ``cfg.out`` holds files and ``force`` is false; or it is a file.
    """
    from tensat_py import models
    from tensat_py.options import suggest

    for m in cfg.models:
        if m not in models.ZOO:
            raise KeyError(
                f"unknown model '{m}'{suggest(m, sorted(models.ZOO))}; known: {sorted(models.ZOO)}"
            )
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{cfg.out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise FileExistsError(
            f"{cfg.out}: folder exists and holds files; pass --force (force=True) to "
            "overwrite them, or choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    specs = plan_runs(cfg)
    verifier = Verifier()
    graphs: dict[str, Any] = {}
    start = time.perf_counter()
    cfg.runs = []

    def one(spec: RunSpec) -> Run:
        if spec.model not in graphs:
            graphs[spec.model] = models.get(spec.model)
            verifier.reference(spec.model, graphs[spec.model])
        before = set(verifier._done)

        def work() -> tuple[Run, dict]:
            rec = run_one(
                spec,
                graphs[spec.model],
                verifier,
                time_cap=cfg.time_cap,
                node_limit=cfg.node_limit,
                iter_limit=cfg.iter_limit,
                device=cfg.device,
            )
            return rec, {k: v for k, v in verifier._done.items() if k not in before}

        if isolate:
            kind, value = _forked(work)
        else:
            kind, value = "ok", work()
        if kind == "ok":
            rec, done = value
            verifier._done.update(done)
        else:
            rec = Run(**asdict(spec), status="error", message=str(value))
        cfg.runs.append(rec)
        if on_run is not None:
            on_run(rec)
        return rec

    if progress:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        cols = (
            TextColumn("[bold]{task.description:<44}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*cols) as bar:
            task = bar.add_task("bench", total=len(specs))
            for spec in specs:
                bar.update(task, description=spec.label)
                one(spec)
                bar.advance(task)
    else:
        for spec in specs:
            one(spec)
    wall = time.perf_counter() - start

    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(Run.columns())
        for r in cfg.runs:
            w.writerow([getattr(r, c) for c in Run.columns()])
    builders = {"1": ("table1", table1), "6": ("figure6", figure6), "3": ("table3", table3)}
    builders |= {"4": ("table4", table4), "5": ("table5", table5)}
    for key, (name, fn) in builders.items():
        if key in cfg.tables:
            write_csv(out / f"{name}.csv", fn(cfg))
    if "6" in cfg.tables:
        plot_figure6(cfg, out / "figure6.png")
    if "1" in cfg.tables:
        plot_table1(cfg, out / "table1.png")
    return write_report(cfg, out, wall)
