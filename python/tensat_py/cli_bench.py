"""``tensat bench``: the Tensat evaluation (Tables 1, 3, 4, 5 and Figure 6) under our cost
model, with a progress bar; CSV files, ``report.md`` and PNG plots go under ``--out``
(default: a new ``./tensat-bench-<date>-<time>`` folder; an existing folder that holds
files is written only with ``--force``)."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import click

__all__ = ["bench"]


def _split(values: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for v in values:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return out


@click.group("bench", invoke_without_command=True)
@click.option(
    "--models",
    "models_",
    multiple=True,
    help="Zoo models, comma-separated or repeated (default: all eight; --quick: small ones).",
)
@click.option(
    "--k-multi",
    "k_multi",
    multiple=True,
    help="Figure 6's k_multi values, e.g. 0,1,2,3 (default 0..3; --quick: 0,1).",
)
@click.option(
    "--out",
    default=None,
    help="Output folder (default: a new ./tensat-bench-YYYYMMDD-HHMMSS). An existing folder "
    "that holds files is used only with --force.",
)
@click.option("--force", is_flag=True, help="Write into --out even if it holds files.")
@click.option("--quick", is_flag=True, help="Small models, short time cap: a smoke test (<2 min).")
@click.option(
    "--solver",
    "solvers",
    multiple=True,
    type=click.Choice(["highs", "cbc"]),
    help="ILP solver(s); the first drives Figure 6 and Tables 3-5, Table 1 shows each "
    "(default: highs and cbc; --quick: highs).",
)
@click.option(
    "--time-cap",
    type=float,
    default=None,
    help="Seconds for each run's whole optimisation (default 60; --quick 10).",
)
@click.option("--node-limit", default=50_000, show_default=True, help="E-node limit.")
@click.option("--iter-limit", default=15, show_default=True, help="Iteration limit.")
@click.option(
    "--device",
    type=click.Choice(["t4", "a100", "h100", "cpu"]),
    default="t4",
    show_default=True,
    help="Roofline cost-model preset.",
)
@click.option(
    "--tables",
    default="1,6,3,4,5",
    show_default=True,
    help="Which tables/figures to produce (1, 6 = Figure 6, 3, 4, 5).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
@click.pass_context
def bench(
    ctx: click.Context,
    models_: tuple[str, ...],
    k_multi: tuple[str, ...],
    out: str | None,
    force: bool,
    quick: bool,
    solvers: tuple[str, ...],
    time_cap: float | None,
    node_limit: int,
    iter_limit: int,
    device: str,
    tables: str,
    no_progress: bool,
) -> None:
    """Reproduce the Tensat paper's tables under the roofline cost model.

    `tensat bench hlo DIR` runs XLA HLO modules instead (see `tensat bench hlo --help`).
    """
    from pathlib import Path

    if ctx.invoked_subcommand is not None:
        return

    from tensat_py.bench import ALL_MODELS, QUICK_MODELS, BenchConfig, default_out, run_bench

    try:
        ks = [int(k) for k in _split(k_multi)] or ([0, 1] if quick else [0, 1, 2, 3])
    except ValueError:
        click.echo(f"error: --k-multi takes integers, got {k_multi}", err=True)
        sys.exit(2)
    names = [m.lower() for m in _split(models_)] or list(QUICK_MODELS if quick else ALL_MODELS)
    cfg = BenchConfig(
        models=names,
        k_multi=sorted(set(ks)),
        solvers=list(dict.fromkeys(solvers)) or (["highs"] if quick else ["highs", "cbc"]),
        time_cap=time_cap if time_cap is not None else (10.0 if quick else 60.0),
        node_limit=node_limit,
        iter_limit=iter_limit,
        device=device,
        tables=_split((tables,)),
        out=Path(out) if out else default_out(),
        quick=quick,
        command="tensat " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
    )
    try:
        log = None
        if no_progress:

            def log(r: Any) -> None:
                click.echo(
                    f"{r.model} k={r.k_multi} {r.extractor} {r.solver} {r.cycle_filter} "
                    f"{r.order_vars}: {r.opt_s:.2f} s, {r.status}, {r.enodes} e-nodes, "
                    f"verified={r.verified}",
                    err=True,
                )

        report = run_bench(cfg, progress=not no_progress, on_run=log, force=force)
    except KeyError as e:
        click.echo(f"error: {e.args[0]}", err=True)
        sys.exit(2)
    except (FileExistsError, OSError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    click.echo(report.read_text())
    click.echo(f"wrote {report} and the CSV files and plots beside it")


def _seconds(flag: str, default: float, help: str) -> Any:
    """A ``click`` option taking a positive number of seconds."""
    return click.option(
        flag,
        type=click.FloatRange(min=0, min_open=True),
        default=default,
        show_default=True,
        help=help,
    )


@bench.command("hlo")
@click.argument("folders", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    default=None,
    help="Markdown report (its CSV is written beside it). Default: hlo_bench.md in a new "
    "folder tensat-bench-YYYYMMDD-HHMMSS under the current folder.",
)
@click.option("--force", is_flag=True, help="Overwrite --out (and its CSV) if it exists.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes.",
)
@click.option(
    "--extractor",
    type=click.Choice(["ilp", "greedy", "greedy-dag"]),
    default="ilp",
    show_default=True,
)
@click.option(
    "--solver",
    type=click.Choice(["highs", "cbc"]),
    default="highs",
    show_default=True,
    help="ILP solver (HiGHS gets its model from arrays; CBC through PuLP).",
)
@_seconds(
    "--time-limit",
    10.0,
    "Seconds for one module's whole optimisation (exploration, extraction, verification).",
)
@click.option(
    "--node-limit",
    type=click.IntRange(min=1),
    default=20_000,
    show_default=True,
    help="E-node limit.",
)
@_seconds("--budget", 2.0, "Seconds of timed runs per module.")
@_seconds("--timeout", 900.0, "Seconds per module.")
@click.option(
    "--ray", "ray_address", default=None, help="Ray cluster address ('local': start one)."
)
@click.option(
    "--cost-model",
    type=click.Choice(["roofline", "xla"]),
    default="roofline",
    show_default=True,
    help="Cost model choosing each program: roofline (predicted, the --device preset) or "
    "xla (XLA CPU as measured through jaxlib).",
)
@click.option(
    "--device",
    type=click.Choice(["t4", "a100", "h100", "cpu"]),
    default=None,
    help="Cost-model device (default: t4 for roofline, cpu for xla).",
)
@click.option("--no-progress", is_flag=True, help="No progress bar; one line per module.")
def bench_hlo(
    folders: tuple[str, ...],
    out: str | None,
    force: bool,
    jobs: int,
    extractor: str,
    solver: str,
    time_limit: float,
    node_limit: int,
    budget: float,
    timeout: float,
    ray_address: str | None,
    cost_model: str,
    device: str | None,
    no_progress: bool,
) -> None:
    """Optimise every *.hlo module in FOLDERS and run original and optimised through XLA."""
    from pathlib import Path

    from tensat_py.bench import default_out
    from tensat_py.bench_hlo import HloBenchConfig, markdown, run_hlo_bench

    report = Path(out) if out else default_out() / "hlo_bench.md"
    if not force:
        for path in (report, report.with_suffix(".csv")):
            if path.exists():
                click.echo(f"error: {path} exists; pass --force to overwrite it", err=True)
                sys.exit(2)
    cfg = HloBenchConfig(
        folder=Path(folders[0]),
        files=[f for d in folders for f in sorted(Path(d).glob("*.hlo"))],
        out=report,
        jobs=jobs,
        extractor=extractor,
        solver=solver,
        time_limit=time_limit,
        node_limit=node_limit,
        budget_s=budget,
        timeout_s=timeout,
        ray_address=ray_address,
        cost_model=cost_model,
        device=device or ("cpu" if cost_model == "xla" else "t4"),
        command="tensat " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
    )

    def log(r: Any) -> None:
        click.echo(f"{r.module}: {r.status} {r.reason}".rstrip(), err=True)

    rows = run_hlo_bench(cfg, progress=not no_progress, on_row=log if no_progress else None)
    click.echo(markdown(rows))
    click.echo(f"wrote {cfg.out}")
