"""The ``xla`` cost model's predicted speedups against XLA's measured ones.

Each HLO module given is optimised twice on ``device="cpu"`` (``confirm=False``: the cost
model's own choice is what is validated), under ``cost_model="xla"`` and under
``"roofline"``; then the original and both results run side by side through XLA's CPU
client (jaxlib), the arguments put on the device once, in rotating rounds for about
``--seconds`` seconds, with a second copy of the original as the A/A control. Ratios are
optimised / original: the predicted one is ``cost_after / cost_before``, the measured one
the median of the per-round ratios (:func:`tensat_py.runtime.timing.paired_ratio`).

Usage::

    python bench/xla_cost_validation.py bench/hlo_modules/jax_gcn_layer.hlo ... [--seconds 3]

Prints a markdown table (docs/cost-models.md, "``xla``").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np


def _caller(text: str, args: Sequence[np.ndarray]) -> Callable[[], None]:
    """A call running ``text`` compiled once on ``args`` put on the CPU device once."""
    import jax
    from tensat_py.runtime import xla_exec

    exe = xla_exec.compile_text(text)
    dev = jax.devices("cpu")[0]
    bufs = [jax.device_put(a, dev) for a in args]

    def call() -> None:
        for out in exe.execute_sharded(bufs).disassemble_into_single_device_arrays():
            out[0].block_until_ready()

    call()
    return call


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("modules", nargs="+")
    p.add_argument("--seconds", type=float, default=3.0, help="timing per module")
    p.add_argument("--time-limit", type=float, default=30.0, help="optimize() per model")
    a = p.parse_args(argv)

    import tensat_py
    from tensat_py.cost.roofline import RooflineCostModel
    from tensat_py.cost.xla import XlaCostModel
    from tensat_py.frontends.hlo import dumps, parse_file, print_module, random_args
    from tensat_py.runtime.timing import paired_ratio, rotating

    xla_model, per_node = XlaCostModel(), XlaCostModel(programs=False)
    roof = RooflineCostModel("cpu")
    print(
        "| module | xla predicted (per-node sum) | measured | roofline predicted | measured "
        "| xla predicted ms | measured ms | A/A | optimise s (xla) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for path in a.modules:
        g = tensat_py.load(path)
        t0 = time.perf_counter()
        rx = tensat_py.optimize(
            g, device="cpu", cost_model=xla_model, confirm=False, time_limit=a.time_limit
        )
        opt_s = time.perf_counter() - t0
        rr = tensat_py.optimize(
            g, device="cpu", cost_model=roof, confirm=False, time_limit=a.time_limit
        )
        original = print_module(parse_file(path))
        args = random_args(g, seed=1)
        calls = [_caller(t, args) for t in (original, dumps(rx.graph), dumps(rr.graph), original)]
        t1 = time.perf_counter()
        for c in calls:
            c()
        per_round = max(time.perf_counter() - t1, 1e-6)
        runs = rotating(calls, rounds=int(min(3000, max(20, a.seconds / per_round))), warmup=1)
        px = rx.cost_after / rx.cost_before
        pn = per_node.graph_cost(rx.graph) / per_node.graph_cost(g)
        pr = rr.cost_after / rr.cost_before
        mx, mr, aa = (paired_ratio(runs[0], runs[k]) for k in (1, 2, 3))
        print(
            f"| {path.rsplit('/', 1)[-1]} | {px:.3f} ({pn:.3f}) | {mx:.3f} | {pr:.3f} | "
            f"{mr:.3f} | {rx.cost_before * 1e3:.3f} | {min(runs[0]) * 1e3:.3f} | {aa:.3f} | "
            f"{opt_s:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
