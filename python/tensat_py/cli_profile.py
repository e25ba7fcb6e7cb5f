"""``tensat profile``: fill, inspect and learn from the profile cache.

* ``tensat profile MODEL... --device cpu`` measures every distinct operator of each model
  (a zoo name or a file) and, unless ``--no-egraph``, every e-node of its saturated
  e-graph (the alternatives ``tensat optimize --cost-model profile`` will ask for), with a
  progress bar; figures already cached are not measured again;
* ``tensat profile --runtime xla MODEL...`` fills the cache of the ``xla`` cost model
  instead (:mod:`tensat_py.cost.xla`: XLA's CPU backend through jaxlib, its library calls
  per signature and its fused kernels per element and per pass);
* ``tensat profile --stats`` shows what the cache holds, per device and operator;
* ``tensat profile --train`` fits the learned model (:mod:`tensat_py.cost.learned`) to the
  device's measurements and prints its held-out Spearman rank correlation (stored with the
  model).

The cache lives under the user's cache directory, or ``--cache-dir`` /
``$TENSAT_CACHE_DIR``. Exit status 2 on a user error (one line, ``error: ...``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import click
from rich.console import Console
from rich.table import Table

from tensat_py.cli_shapes import input_shape_option, input_shapes

__all__ = ["profile"]


def _fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


@click.command("profile")
@click.argument("models", nargs=-1)
@click.option("--device", default="cpu", show_default=True, help="cpu, or gpu (CuPy).")
@click.option(
    "--backend",
    default=None,
    help="cpu: onnxruntime (default) or numpy; gpu: cupy.",
)
@click.option(
    "--runtime",
    default="onnxruntime",
    show_default=True,
    type=click.Choice(["onnxruntime", "xla"]),
    help="Whose figures to measure: onnxruntime (the profile cost model, --backend) or xla "
    "(the xla cost model: XLA's CPU backend through jaxlib; --device cpu).",
)
@click.option("--no-egraph", is_flag=True, help="Measure the model's operators only.")
@click.option("--stats", is_flag=True, help="Show what the cache holds.")
@click.option("--train", is_flag=True, help="Fit the learned model to the cache.")
@click.option(
    "--objective",
    default="rank",
    show_default=True,
    type=click.Choice(["rank", "regression"]),
    help="Learned model's objective.",
)
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Cache folder.")
@input_shape_option("applies to every ONNX file of MODELS")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def profile(
    models: tuple[str, ...],
    device: str,
    backend: str | None,
    runtime: str,
    no_egraph: bool,
    stats: bool,
    train: bool,
    objective: str,
    cache_dir: str | None,
    input_shape: tuple[str, ...],
    quiet: bool,
) -> None:
    """Measure each distinct operator of MODELS (zoo names or files) on the device and
    cache the figures; --stats shows the cache, --train fits the learned model."""
    from tensat_py.cost.database import CACHE_ENV, ProfileDatabase

    shapes = input_shapes(input_shape)
    if cache_dir:
        os.environ[CACHE_ENV] = cache_dir
    if not (models or stats or train):
        _fail("nothing to do: give MODEL names, --stats or --train")
    try:
        db = ProfileDatabase()
        for name in models:
            _profile_model(db, name, device, backend, not no_egraph, quiet, shapes, runtime)
        if train:
            if runtime == "xla":
                _fail("--train fits the learned model to onnxruntime figures; drop --runtime xla")
            _train(db, device, backend, objective)
        if stats:
            _stats(db)
    except (ValueError, TypeError, OSError) as e:
        text = str(e).strip().splitlines()
        _fail(text[0] if text else type(e).__name__)


def _model(db, device: str, backend: str | None, progress=None, runtime: str = "onnxruntime"):
    if runtime == "xla":
        from tensat_py.cost.xla import XlaCostModel

        if backend is not None:
            raise ValueError(
                "--backend chooses the onnxruntime measurer; drop it with --runtime xla"
            )
        return XlaCostModel(device, db=db, progress=progress)
    from tensat_py.cost.profile import ProfileCostModel

    return ProfileCostModel(device, backend=backend, db=db, progress=progress)


def _profile_model(
    db,
    name: str,
    device: str,
    backend: str | None,
    egraph: bool,
    quiet: bool,
    shapes: dict[str, tuple[int, ...]],
    runtime: str = "onnxruntime",
):
    import tensat_py
    from tensat_py import _core
    from tensat_py.cost.base import export_contexts
    from tensat_py.frontends import defaults_for
    from tensat_py.rule_files import load_rules

    console = Console(stderr=True)
    graph = tensat_py.load(name, input_shapes=shapes) if shapes else tensat_py.load(name)
    model = _model(db, device, backend, runtime=runtime)
    ctxs = list(model.program_contexts(graph))
    n_graph = len(model.missing(ctxs))
    if egraph:
        fe = defaults_for(graph)
        rules = load_rules(fe.default_rules if fe is not None else "taso")
        eg = _core.EGraph(graph.to_flat())
        eg.saturate(
            rules,
            k_multi=1,
            node_limit=50_000,
            iter_limit=15,
            time_limit=30.0,
            cycle_filter="efficient",
        )
        # An opaque e-node's payload lives in the graph's meta: give its context the graph.
        ctxs += [
            dataclasses.replace(c, graph=graph) if c.op == "opaque" and c.graph is None else c
            for c in export_contexts(eg.export(), "profile")
            if c is not None
        ]
    todo = model.missing(ctxs)
    t0 = time.perf_counter()
    if todo:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=quiet,
        ) as bar:
            task = bar.add_task(f"profiling {name}", total=len(todo))

            def step(done: int, total: int, op: str) -> None:
                bar.update(task, completed=done, total=total, description=f"profiling {name}: {op}")

            model.progress = step
            model.costs(ctxs)  # measures what is missing, then the NCHWc reorders (layout)
    else:
        model.costs(ctxs)  # all cached: measures only the NCHWc reorders they need
    if model.cold_weights:
        model.bandwidth()  # calibrated once per device (cold weights; learned reads it too)
    # Price the graph itself (fusion read from its producers): the cached figures.
    total = model.graph_cost(graph)
    reorders = max(model.measured - len(todo), 0)  # measured while pricing (NCHWc layout)
    extra = "memory passes and program regions" if runtime == "xla" else "NCHWc reorders"
    click.echo(
        f"{name}: {len(todo) + reorders} new measurements ({n_graph} for the graph's own "
        f"operators, {reorders} {extra}) in "
        f"{time.perf_counter() - t0:.1f} s on {model.backend.name} "
        f"[{model.fingerprint}]; graph cost {total * 1e3:.3f} ms"
    )


def _train(db, device: str, backend: str | None, objective: str) -> None:
    from tensat_py.cost import learned
    from tensat_py.cost.profile import fingerprint

    learned.require_lightgbm()
    fp = fingerprint(_model(db, device, backend).info)
    _, report = learned.train(db, fp, objective=objective)
    click.echo(
        f"learned model ({report.objective}) for [{fp}]: trained on {report.n_train}, "
        f"held out {report.n_test}; held-out Spearman rank correlation {report.spearman:.4f} "
        f"(stored in {db.path})"
    )


def _stats(db) -> None:
    from tensat_py.cost.profile import is_calibration

    console = Console()
    devices = db.devices()
    table = Table(title=f"profile cache {db.path}")
    for col in ("device", "backend", "operator", "measurements", "sum of figures (ms)"):
        table.add_column(col, justify="right" if col[0] in "ms" else "left")
    total = 0
    for row in db.stats():
        if is_calibration(row["op"]):  # call overhead, bandwidth, NCHWc reorders
            continue
        info = devices.get(row["fingerprint"], {})
        table.add_row(
            row["fingerprint"],
            str(info.get("backend", "?")),
            row["op"],
            str(row["count"]),
            f"{row['seconds'] * 1e3:.3f}",
        )
        total += row["count"]
    console.print(table)
    console.print(f"{total} measurements, {len(devices)} device(s)")
    for m in db.models():
        rho = m["spearman"]
        console.print(
            f"model {m['kind']} [{m['fingerprint']}]: held-out Spearman "
            f"{rho:.4f} on {m['n_test']} (trained on {m['n_train']})"
            if rho is not None
            else f"model {m['kind']} [{m['fingerprint']}]"
        )
    for fp, info in devices.items():
        desc = ", ".join(f"{k}={v}" for k, v in sorted(info.items()))
        console.print(f"[{fp}] {desc}")
