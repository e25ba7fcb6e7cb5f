"""The bound a hand-merged NasRNN reaches on XLA CPU (issue 41's NasRNN goal).

Tensat's NasRNN (``tensat_py.models.nasrnn``: 5 steps, hidden 512, batch 1) written in JAX
twice, with the same random weights:

* ``separate``: as the zoo graph is, 16 matmuls per step (``x @ Wx_i`` and ``h @ Wh_i``
  for the eight combine nodes);
* ``merged2``: the weights of each side stored concatenated (``Wx = [Wx_0 .. Wx_7]``,
  512 x 4096), two matmuls per step and slices, as Tensat's merge rules leave it;
* ``merged1``: one matmul per step, ``[x, h] @ [[Wx], [Wh]]`` (1024 x 4096).

The concatenated weights are made once, outside the timed function, as a hand-written
model stores them; every weight is its own argument (one entry parameter, as in the zoo's
HLO), so no slice of a stacked array is copied before its dot. Each pair is checked to
compute the same state (float32, relative 1e-5), then timed through ``jax.jit`` side by
side with an A/A (a second copy of ``separate``): rotating rounds (each timed run right
after an untimed run of the same program, as confirmation times short programs), the
speedup the median
of the per-round ratios with its 95 % interval (``tensat_py.runtime.timing``).

Beside them, in the same rotating rounds, the optimiser's program (``--tensat``, the
default): the zoo's NasRNN optimised with the defaults for HLO (``cost_model="xla"`` on
``device="cpu"``, confirmation on XLA CPU), and its input, both printed as HLO with their
weights as entry parameters and their weight-only operators pre-computed
(:func:`tensat_py.runtime.xla_exec.freeze_weights`), each compiled by XLA, with a second
copy of the input as their A/A. Its speedup over its input is measured; its predicted
speedup (the ``xla`` model's cost before / after) is a prediction and says so.

Run: ``python bench/nasrnn_bound.py --out bench/nasrnn_bound.md`` (about two minutes).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from tensat_py.runtime.timing import lead_in_for, median_interval, paired_ratios, rotating

STEPS, HIDDEN = 5, 512


def _combine(t: list[jax.Array]) -> jax.Array:
    """The NasRNN cell's fixed tree over its eight combine nodes (models/nasrnn.py)."""
    relu, sig, tanh = jax.nn.relu, jax.nn.sigmoid, jnp.tanh
    m0 = relu(t[0]) + sig(t[3])
    m1 = sig(t[1]) + tanh(t[2])
    m2 = sig(t[4]) * tanh(t[5])
    m3 = sig(t[6]) * relu(t[7])
    m4 = sig(m1) + tanh(m2)
    m5 = tanh(m0) * tanh(m3)
    m6 = tanh(m4) * tanh(m5)
    return tanh(m6)


# Weights are lists of arrays (one entry parameter each, as in the zoo's HLO), so that no
# slice of a stacked array is copied before its dot.


def separate(xs: list, h: jax.Array, wx: list, wh: list) -> jax.Array:
    """16 matmuls per step; ``wx[s][i]``, ``wh[s][i]``: ``[hidden, hidden]``."""
    for s in range(STEPS):
        h = _combine([xs[s] @ wx[s][i] + h @ wh[s][i] for i in range(8)])
    return h


def merged2(xs: list, h: jax.Array, wxc: list, whc: list) -> jax.Array:
    """2 matmuls per step; ``wxc[s]``, ``whc[s]``: ``[hidden, 8 * hidden]``."""
    for s in range(STEPS):
        y = xs[s] @ wxc[s] + h @ whc[s]
        h = _combine([y[:, i * HIDDEN : (i + 1) * HIDDEN] for i in range(8)])
    return h


def merged1(xs: list, h: jax.Array, wc: list) -> jax.Array:
    """1 matmul per step; ``wc[s]``: ``[2 * hidden, 8 * hidden]``."""
    for s in range(STEPS):
        y = jnp.concatenate([xs[s], h], axis=1) @ wc[s]
        h = _combine([y[:, i * HIDDEN : (i + 1) * HIDDEN] for i in range(8)])
    return h


def _inputs(seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(HIDDEN)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    wx = [[w(HIDDEN, HIDDEN) for _ in range(8)] for _ in range(STEPS)]
    wh = [[w(HIDDEN, HIDDEN) for _ in range(8)] for _ in range(STEPS)]
    wxc = [np.concatenate(ws, axis=1) for ws in wx]
    whc = [np.concatenate(ws, axis=1) for ws in wh]
    return {
        "xs": [rng.standard_normal((1, HIDDEN)).astype(np.float32) for _ in range(STEPS)],
        "h": rng.standard_normal((1, HIDDEN)).astype(np.float32),
        "wx": wx,
        "wh": wh,
        "wxc": wxc,
        "whc": whc,
        "wc": [np.concatenate([a, b], axis=0) for a, b in zip(wxc, whc, strict=True)],
    }


def _timed(fn: Callable[..., jax.Array], *args: Any) -> Callable[[], object]:
    jitted = jax.jit(fn)
    dev = jax.device_put(args)
    jitted(*dev).block_until_ready()
    return lambda: jitted(*dev).block_until_ready()


def tensat_merged(steps: int, dots: int, hidden: int = HIDDEN) -> Any:
    """The zoo's NasRNN (``tensat_py.models.nasrnn``) as a graph with its matmuls merged
    by hand, the weights concatenated in the graph (weight-only operators, pre-computed
    when it runs): ``dots=2``, ``x @ [Wx_0 .. Wx_7]`` and ``h @ [Wh_0 .. Wh_7]`` per
    step, sliced and added; ``dots=1``, ``[x, h] @ [[Wx], [Wh]]``, sliced."""
    from tensat_py.builder import GraphBuilder
    from tensat_py.models.nasrnn import cell_state

    b = GraphBuilder()
    xs = [b.input((1, hidden), name=f"x{i}") for i in range(steps)]
    h = b.weight((1, hidden), name="h0")

    def part(y: Any, i: int) -> Any:
        ends = ((i + 1) * hidden,)
        return b.op("slice", y, starts=(i * hidden,), ends=ends, axes=(1,), steps=(1,))

    for s in range(steps):
        wx = [b.weight((hidden, hidden), name=f"s{s}_wx{i}") for i in range(8)]
        wh = [b.weight((hidden, hidden), name=f"s{s}_wh{i}") for i in range(8)]
        if dots == 2:
            y1, y2 = b.matmul(xs[s], b.concat(1, wx)), b.matmul(h, b.concat(1, wh))
            t = [b.ewadd(part(y1, i), part(y2, i)) for i in range(8)]
        else:
            w = b.concat(0, [b.concat(1, wx), b.concat(1, wh)])
            y = b.matmul(b.concat(1, [xs[s], h]), w)
            t = [part(y, i) for i in range(8)]
        h = cell_state(b, t)
    return b.finish([h])


def tensat_programs(steps: int, time_limit: float) -> dict[str, Any]:
    """The zoo's NasRNN optimised with the defaults for HLO (``cost_model="xla"``,
    ``device="cpu"``, confirmation on XLA CPU), beside its input, a second copy of it
    (the A/A) and the input merged by hand (:func:`tensat_merged`, 2 and 1 dots per
    step). Returns ``calls`` (callables running each once on XLA, weight-only operators
    pre-computed, in that order: input, A/A, optimised, merged2, merged1), ``result``
    (the :class:`~tensat_py.OptimizeResult`), ``seconds`` (the optimiser's),
    ``predicted`` (the xla model's speedup of each merged program over the input, priced
    by one model in this run: predictions) and ``max_abs_diff`` (largest absolute
    difference of each program's output from the input's, on XLA).

    Raises:
        SystemExit: a merged program computes another state (relative error over 1e-5).
    """
    import tensat_py
    from tensat_py.cost.xla import XlaCostModel
    from tensat_py.frontends.hlo import dumps, entry_leaves
    from tensat_py.models import nasrnn
    from tensat_py.runtime import numpy_exec
    from tensat_py.runtime.protocol import XlaCpu, _xla_runnable, weight_positions
    from tensat_py.runtime.xla_exec import Placement, freeze_weights

    g = nasrnn(steps=steps)
    t0 = time.perf_counter()
    res = tensat_py.optimize(
        g, cost_model="xla", device="cpu", time_limit=time_limit, confirm=XlaCpu()
    )
    seconds = time.perf_counter() - t0
    hand = [tensat_merged(steps, 2), tensat_merged(steps, 1)]
    model = XlaCostModel()
    base = model.graph_cost(g)
    predicted = [base / model.graph_cost(m) for m in hand]
    feeds = numpy_exec.random_feeds(g, seed=1)
    calls = []
    placement = Placement()  # the programs share their input arrays
    for prog in (g, g, res.graph, *hand):
        fg, ff = freeze_weights(prog, feeds)
        args = [ff[n] for n in entry_leaves(fg)]
        calls.append(_xla_runnable(dumps(fg), args, placement, weight_positions(fg)))
    outs = [np.asarray(c()[0][0]) for c in calls]  # type: ignore[index]
    diffs = [float(np.max(np.abs(o - outs[0]))) for o in outs]
    scale = max(float(np.max(np.abs(outs[0]))), 1e-30)
    if max(diffs) / scale > 1e-5:
        raise SystemExit(f"a tensat program computes another state (errors {diffs})")
    return {
        "calls": calls,
        "result": res,
        "seconds": seconds,
        "predicted": predicted,
        "max_abs_diff": max(diffs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the table here (markdown)")
    ap.add_argument("--rounds", type=int, default=200, help="timed rounds (default 200)")
    ap.add_argument("--steps", type=int, default=5, help="cell steps (default 5, Tensat's)")
    ap.add_argument(
        "--tensat",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time the optimiser's program and its input beside the JAX programs",
    )
    ap.add_argument("--time-limit", type=float, default=60.0, help="the optimiser's (s)")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1:
        ap.error(f"--rounds and --steps must be at least 1, got {args.rounds}, {args.steps}")
    global STEPS
    STEPS = args.steps
    v = _inputs()
    wc = v["wc"]
    ref = np.asarray(jax.jit(separate)(v["xs"], v["h"], v["wx"], v["wh"]))
    for name, got in (
        ("merged2", jax.jit(merged2)(v["xs"], v["h"], v["wxc"], v["whc"])),
        ("merged1", jax.jit(merged1)(v["xs"], v["h"], wc)),
    ):
        err = float(np.max(np.abs(np.asarray(got) - ref)) / max(np.max(np.abs(ref)), 1e-30))
        if err > 1e-5:
            raise SystemExit(f"{name} computes a different state (relative error {err:.2e})")
    calls = [
        _timed(separate, v["xs"], v["h"], v["wx"], v["wh"]),
        _timed(separate, v["xs"], v["h"], v["wx"], v["wh"]),
        _timed(merged2, v["xs"], v["h"], v["wxc"], v["whc"]),
        _timed(merged1, v["xs"], v["h"], wc),
    ]
    ours = tensat_programs(STEPS, args.time_limit) if args.tensat else None
    if ours is not None:
        calls += ours["calls"]
    t0 = time.perf_counter()
    warm = [t[0] for t in rotating(calls, rounds=1, warmup=5)]
    times = rotating(calls, rounds=args.rounds, warmup=0, lead_in=lead_in_for(warm))
    seconds = time.perf_counter() - t0
    rows = []
    for label, i in (("A/A (separate, second copy)", 1), ("merged2", 2), ("merged1", 3)):
        r = paired_ratios(times[i], times[0])  # separate / variant: > 1 is faster
        lo, hi = median_interval(r)
        rows.append((label, float(np.median(r)), lo, hi, float(np.median(times[i])) * 1e3))
    base_ms = float(np.median(times[0])) * 1e3
    cache = (
        f"TENSAT_CACHE_DIR={os.environ['TENSAT_CACHE_DIR']} "
        if os.environ.get("TENSAT_CACHE_DIR")
        else ""
    )
    lines = [
        "# NasRNN on XLA CPU: the bound of merging its matmuls by hand",
        "",
        f"Command: `{cache}python bench/nasrnn_bound.py --steps {STEPS} --rounds {args.rounds}"
        f"{'' if args.tensat else ' --no-tensat'}{f' --out {args.out}' if args.out else ''}` "
        f"(jax {jax.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; {args.rounds} rotating rounds, {seconds:.0f} s; load average "
        f"{os.getloadavg()[0]:.1f} at the end: the machine is shared).",
        "",
        f"NasRNN as Tensat's zoo builds it ({STEPS} steps, hidden {HIDDEN}, batch 1), in JAX; "
        "every variant computes the same state (float32, relative error under 1e-5). "
        "Speedup: median over rounds of separate's time / the variant's, measured, with its "
        "95 % interval.",
        "",
        "| program | matmuls per step | median ms | measured speedup over separate "
        "| 95 % interval |",
        "|---|---:|---:|---:|---|",
        f"| separate (the zoo's form) | 16 | {base_ms:.3f} | 1.000 | |",
    ]
    per = {"A/A (separate, second copy)": 16, "merged2": 2, "merged1": 1}
    for label, med, lo, hi, ms in rows:
        lines.append(f"| {label} | {per[label]} | {ms:.3f} | {med:.3f} | [{lo:.3f}, {hi:.3f}] |")
    if ours is not None:
        lines += _tensat_rows(ours, times, STEPS)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


def _tensat_rows(ours: dict[str, Any], times: list[list[float]], steps: int) -> list[str]:
    """The optimiser's rows: its input, the input's A/A copy and its program, against
    its input and against the JAX programs of the same rounds (``times``: separate, its
    copy, merged2, merged1, then the input, its copy, the program)."""
    res = ours["result"]
    mm = res.graph.op_counts().get("matmul", 0)
    inp, aa, prog, m2, m1 = times[4:9]
    p2, p1 = ours["predicted"]

    def cell(ref: list[float], x: list[float]) -> str:
        r = paired_ratios(x, ref)  # ref / x: > 1 is faster
        lo, hi = median_interval(r)
        return f"{float(np.median(r)):.3f} [{lo:.3f}, {hi:.3f}]"

    pred = res.cost_before / res.cost_after if res.cost_after else float("nan")
    rows = [
        ("tensat: input (the zoo's NasRNN as HLO)", 16, inp, "1.000"),
        ("tensat: A/A (input, second copy)", 16, aa, ""),
        (f"tensat: optimised ({res.extraction_status})", mm / steps, prog, f"{pred:.3f}"),
        ("tensat: input merged by hand, 2 dots per step", 2, m2, f"{p2:.3f}"),
        ("tensat: input merged by hand, 1 dot per step", 1, m1, f"{p1:.3f}"),
    ]
    lines = [
        "",
        "The optimiser's program, timed in the same rounds: `tensat_py.optimize(nasrnn("
        f'steps={steps}), cost_model="xla", device="cpu", confirm=XlaCpu())` '
        f"({ours['seconds']:.0f} s), its input (the zoo's graph printed as HLO, weights as "
        "entry parameters), a second copy of the input (the A/A) and the input merged by "
        "hand as graphs (`tensat_merged`: the concatenations of weights in the graph); "
        "every program with its weight-only operators pre-computed (`freeze_weights`), "
        "all computing the input's state (largest absolute difference on XLA "
        f"{ours['max_abs_diff']:.1e}). Speedups are measured (median of per-round "
        "ratios, 95 % interval); `predicted` is the xla cost model's speedup over the "
        "input (cost before / after; for the optimised program, the cost of the program "
        "it returned), a prediction. Where the optimiser returned its input "
        "(`fallback-*`), its row is a third copy of the input: its ratio is noise.",
        "",
        "| program | matmuls per step | median ms | measured speedup over tensat input "
        "| over JAX separate | over JAX merged2 | over JAX merged1 | predicted |",
        "|---|---:|---:|---|---|---|---|---:|",
    ]
    for label, per_step, t, pr in rows:
        lines.append(
            f"| {label} | {per_step:g} | {np.median(t) * 1e3:.3f} | {cell(inp, t)} | "
            f"{cell(times[0], t)} | {cell(times[2], t)} | {cell(times[3], t)} | {pr} |"
        )
    if res.message:
        lines += ["", f"The optimiser said: {res.message}."]
    return lines


if __name__ == "__main__":
    main()
