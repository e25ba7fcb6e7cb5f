"""What XLA's CPU pipeline leaves to the HLO rules: each rule's two sides, timed.

For each rewrite of ``rules/hlo.rules`` that is about speed on XLA (and a binary broadcast
sinking that XLA does itself), a JAX function written as the rule's left side and one written
as its right side, at sizes of real programs (GPT-2-small: d = 768, T = 1024, head 64),
are checked to compute the same values (float32, relative 1e-4) and timed through
``jax.jit`` side by side with an A/A (a second copy of the left side), in rotating rounds
(``tensat_py.runtime.timing``). A measured speedup near 1.000 means XLA's own pipeline
already does the rewrite (or it does not matter); far from 1 in either direction, the
rule changes what XLA runs, and the cost model decides where it pays.

Run: ``python bench/xla_rules.py --out bench/xla_rules.md`` (a few minutes).
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
from jax import lax
from tensat_py.runtime.timing import median_interval, paired_ratios, rotating

D, T, H = 768, 1024, 64
RNG = np.random.default_rng(0)


def _r(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)


def _dot_t(a: jax.Array, b: jax.Array, ca: int, cb: int) -> jax.Array:
    return lax.dot_general(a, b, (((ca,), (cb,)), ((), ())))


#: (rule, what the case is, left side, right side, arguments)
CASES: list[tuple[str, str, Callable[..., Any], Callable[..., Any], list[np.ndarray]]] = [
    (
        "hlo-dot-assoc",
        f"(q k^T) v => q (k^T v), T={T}, head {H}",
        lambda q, k, v: (q @ k.T) @ v,
        lambda q, k, v: q @ (k.T @ v),
        [_r(T, H), _r(T, H), _r(T, H)],
    ),
    (
        "hlo-dot-fold-transpose-lhs",
        f"transpose(a) . b => dot_general contracting a's dim 0, [{D},{T}]^T [{D},{D}]",
        lambda a, b: a.T @ b,
        lambda a, b: _dot_t(a, b, 0, 0),
        [_r(D, T), _r(D, D)],
    ),
    (
        "hlo-dot-fold-transpose-rhs",
        f"a . transpose(b) => dot_general contracting b's dim 1, [{T},{D}] [{D},{D}]^T",
        lambda a, b: a @ b.T,
        lambda a, b: _dot_t(a, b, 1, 1),
        [_r(T, D), _r(D, D)],
    ),
    (
        "hlo-reduce-dot",
        f"row sums of a b => a (row sums of b), [{T},{D}] [{D},{D}]",
        lambda a, b: jnp.sum(a @ b, axis=1),
        lambda a, b: a @ jnp.sum(b, axis=1),
        [_r(T, D), _r(D, D)],
    ),
    (
        "hlo-sink-broadcast-exp",
        f"exp(broadcast(x)) => broadcast(exp(x)), [{D}] to [{T},{D}]",
        lambda x: jnp.exp(jnp.broadcast_to(x, (T, D))),
        lambda x: jnp.broadcast_to(jnp.exp(x), (T, D)),
        [_r(D)],
    ),
    (
        "(no rule: XLA sinks it)",
        f"broadcast(a) + broadcast(b) => broadcast(a + b), [{D}] to [{T},{D}]",
        lambda a, b: jnp.broadcast_to(a, (T, D)) + jnp.broadcast_to(b, (T, D)),
        lambda a, b: jnp.broadcast_to(a + b, (T, D)),
        [_r(D), _r(D)],
    ),
    (
        "hlo-dot-add-rhs",
        f"x (W + A B) => x W + (x A) B, LoRA rank 8, [{T},{D}]",
        lambda x, w, a, b: x @ (w + a @ b),
        lambda x, w, a, b: x @ w + (x @ a) @ b,
        [_r(T, D), _r(D, D), _r(D, 8), _r(8, D)],
    ),
    (
        "hlo-dot-merge",
        f"x W1, x W2, x W3 => x [W1 W2 W3] sliced (q/k/v), [{T},{D}], weights concatenated",
        lambda x, w1, w2, w3, wc: (x @ w1, x @ w2, x @ w3),
        lambda x, w1, w2, w3, wc: tuple((x @ wc)[:, i * D : (i + 1) * D] for i in range(3)),
        [_r(T, D), *(w := [_r(D, D) for _ in range(3)]), np.concatenate(w, axis=1)],
    ),
    (
        "hlo-dot-merge",
        f"batch 1: x W1 .. x W8 => x [W1 .. W8] sliced (a NasRNN cell's input side), [1,{512}]",
        lambda x, *ws: tuple(x @ w for w in ws[:8]),
        lambda x, *ws: tuple((x @ ws[8])[:, i * 512 : (i + 1) * 512] for i in range(8)),
        [_r(1, 512), *(w8 := [_r(512, 512) for _ in range(8)]), np.concatenate(w8, axis=1)],
    ),
]


def _timed(fn: Callable[..., Any], args: list[Any]) -> Callable[[], object]:
    jitted = jax.jit(fn)
    dev = jax.device_put(args)
    jax.block_until_ready(jitted(*dev))
    return lambda: jax.block_until_ready(jitted(*dev))


def _same(a: Any, b: Any) -> float:
    xs = jax.tree_util.tree_leaves(a)
    ys = jax.tree_util.tree_leaves(b)
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y))) / max(np.max(np.abs(x)), 1e-30))
        for x, y in zip(xs, ys, strict=True)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the table here (markdown)")
    ap.add_argument("--rounds", type=int, default=60, help="timed rounds per rule (default 60)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    rows = []
    t0 = time.perf_counter()
    for rule, what, lhs, rhs, inputs in CASES:
        err = _same(jax.jit(lhs)(*inputs), jax.jit(rhs)(*inputs))
        if err > 1e-4:
            raise SystemExit(f"{rule}: the two sides differ (relative error {err:.2e})")
        calls = [_timed(lhs, inputs), _timed(lhs, inputs), _timed(rhs, inputs)]
        times = rotating(calls, rounds=args.rounds, warmup=3)
        aa = paired_ratios(times[1], times[0])  # left / left copy
        sp = paired_ratios(times[2], times[0])  # left / right: > 1, the right side is faster
        rows.append(
            (
                rule,
                what,
                float(np.median(times[0])) * 1e3,
                float(np.median(times[2])) * 1e3,
                float(np.median(sp)),
                median_interval(sp),
                float(np.median(aa)),
                median_interval(aa),
            )
        )
        print(rule, f"{rows[-1][4]:.3f}", flush=True)
    seconds = time.perf_counter() - t0
    lines = [
        "# What XLA's CPU pipeline leaves to the HLO rules",
        "",
        f"Command: `python bench/xla_rules.py --out bench/xla_rules.md` (jax "
        f"{jax.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, {args.rounds} "
        f"rotating rounds per rule, {seconds:.0f} s). Each rule's left and right side "
        "written in JAX, compiled by `jax.jit` (XLA's whole CPU pipeline), checked equal "
        "(float32, relative 1e-4) and timed side by side with an A/A. Measured speedup: "
        "median over rounds of left / right time, with its 95 % interval; above 1 the "
        "right side runs faster.",
        "",
        "| rule | case | left ms | right ms | measured speedup | 95 % interval "
        "| A/A | A/A interval |",
        "|---|---|---:|---:|---:|---|---:|---|",
    ]
    for rule, what, lm, rm, sp, (lo, hi), aa, (alo, ahi) in rows:
        lines.append(
            f"| {rule} | {what} | {lm:.3f} | {rm:.3f} | {sp:.3f} | [{lo:.3f}, {hi:.3f}] "
            f"| {aa:.3f} | [{alo:.3f}, {ahi:.3f}] |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
