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
side with an A/A (a second copy of ``separate``): rotating rounds, the speedup the median
of the per-round ratios with its 95 % interval (``tensat_py.runtime.timing``).

Run: ``python bench/nasrnn_bound.py --out bench/nasrnn_bound.md`` (about a minute).
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
from tensat_py.runtime.timing import median_interval, paired_ratios, rotating

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the table here (markdown)")
    ap.add_argument("--rounds", type=int, default=200, help="timed rounds (default 200)")
    ap.add_argument("--steps", type=int, default=5, help="cell steps (default 5, Tensat's)")
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
    t0 = time.perf_counter()
    times = rotating(calls, rounds=args.rounds, warmup=5)
    seconds = time.perf_counter() - t0
    rows = []
    for label, i in (("A/A (separate, second copy)", 1), ("merged2", 2), ("merged1", 3)):
        r = paired_ratios(times[i], times[0])  # separate / variant: > 1 is faster
        lo, hi = median_interval(r)
        rows.append((label, float(np.median(r)), lo, hi, float(np.median(times[i])) * 1e3))
    base_ms = float(np.median(times[0])) * 1e3
    lines = [
        "# NasRNN on XLA CPU: the bound of merging its matmuls by hand",
        "",
        f"Command: `python bench/nasrnn_bound.py --steps {STEPS} --out bench/nasrnn_bound.md` "
        f"(jax {jax.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; {args.rounds} rotating rounds, {seconds:.0f} s).",
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
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
