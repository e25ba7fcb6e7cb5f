"""Side-by-side timing shared by the benchmarks (onnxruntime and XLA runners).

Two programs are compared by running them in rounds, one run of each per round with the
order rotated from round to round (:func:`rotating`), so that drifts in machine load,
caches and clock hit both alike; their speed ratio is then the median of the per-round
ratios (:func:`paired_ratio`): a burst of load from another process slows the runs of
one round together and cancels out of that round's ratio, where it would shift a median
or minimum taken over each program's runs separately.

A program that runs for a short while is timed right after an untimed run of itself
(``lead_in``, :func:`side_by_side`). Rotated one run a turn, each run follows another
program, and the first runs after a switch are slower; of three programs (the input, its
copy, a candidate), the candidate always follows a copy of the input, while each copy
follows the candidate in some rounds, so a small candidate is timed in the caches a large
input leaves. On a 2-core AMD EPYC virtual machine (2026-11-28, XLA CPU, jaxlib 0.10.2,
three sessions of 3 s each), jax_linear_attention's optimised program measured
4.33-4.57x its input one run a turn and 4.98-5.46x with a lead-in, against 5.44-5.89x
with each program run in a loop of its own; jax_gcn_layer 5.99-6.02x against 6.17-6.33x
(6.0-6.7x in loops), their A/A within 1 % of 1 either way; zoo BERT, whose runs take
about 30 ms, measured 1.22-1.24x against 1.21-1.24x.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

__all__ = [
    "LEAD_IN_SECONDS",
    "lead_in_for",
    "median_interval",
    "paired_ratio",
    "paired_ratios",
    "rotating",
    "side_by_side",
]

#: A program whose untimed warm-up run took less than this (seconds) is run once more,
#: untimed, right before each of its timed runs (:func:`lead_in_for`): its runs are short
#: enough for the caches another program left to show in them. In a longer run the switch
#: is a small share (jax_lora_dense's optimised program took about 0.3 ms longer on its
#: first run after a switch than on its tenth), and a lead-in would double every round.
LEAD_IN_SECONDS = 0.1


def rotating(
    calls: Sequence[Callable[[], object]],
    rounds: int,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
    lead_in: int = 0,
) -> list[list[float]]:
    """Time ``calls`` side by side.

    Each callable runs ``warmup`` times (untimed), then ``rounds`` rounds of one timed run
    each; round ``k`` starts with callable ``k mod len(calls)``. With ``lead_in``, each
    timed run comes right after that many untimed runs of the same callable (its turn),
    so it finds the caches as its own runs leave them (see the module docstring).

    Args:
        calls: the programs to run (each call runs one to completion).
        rounds: timed rounds (>= 1).
        warmup: untimed runs of each callable first (>= 0).
        clock: the time now in seconds (a runtime's own clock; ``time.perf_counter``).
        lead_in: untimed runs of a callable right before each of its timed runs (>= 0).

    Returns:
        Seconds per callable per round: ``times[i][k]`` is callable ``i`` in round ``k``.

    Raises:
        ValueError: ``rounds < 1``, ``warmup < 0``, ``lead_in < 0`` or no callables.

    >>> len(rotating([lambda: None, lambda: None], rounds=3)[1])
    3
    """
    if rounds < 1 or warmup < 0 or lead_in < 0 or not calls:
        raise ValueError(
            f"rotating: rounds {rounds} >= 1, warmup {warmup} >= 0, lead_in {lead_in} >= 0,"
            " calls given"
        )
    for _ in range(warmup):
        for call in calls:
            call()
    times: list[list[float]] = [[] for _ in calls]
    n = len(calls)
    for k in range(rounds):
        for j in range(n):
            i = (j + k) % n
            for _ in range(lead_in):
                calls[i]()
            t0 = clock()
            calls[i]()
            times[i].append(clock() - t0)
    return times


def lead_in_for(warm: Sequence[float]) -> int:
    """Untimed runs before each timed run (:func:`rotating`'s ``lead_in``) for programs
    whose warm-up runs took ``warm`` seconds: 1 when every one took less than
    :data:`LEAD_IN_SECONDS`, else 0.

    >>> lead_in_for([0.002, 0.009]), lead_in_for([0.002, 0.5])
    (1, 0)
    """
    return int(all(t < LEAD_IN_SECONDS for t in warm))


def side_by_side(
    calls: Sequence[Callable[[], object]],
    budget_s: float,
    min_rounds: int = 1,
    max_rounds: int = 5000,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[list[float]], list[float]]:
    """Time ``calls`` side by side for about ``budget_s`` wall seconds, the untimed round
    included: one untimed round (a warm-up run of each, then one more, whose seconds set
    the pace), then :func:`rotating` rounds, each timed run after a lead-in run of its own
    where the programs are short (:func:`lead_in_for`), between ``min_rounds`` and
    ``max_rounds`` of them.

    Returns:
        ``(times, warm)``: seconds per callable per round (as :func:`rotating`), and each
        callable's seconds in the untimed round.

    Raises:
        ValueError: ``min_rounds < 1``, ``max_rounds < min_rounds`` or no callables.

    >>> times, warm = side_by_side([lambda: None, lambda: None], 0.01, max_rounds=5)
    >>> [len(t) for t in times], len(warm)
    ([5, 5], 2)
    """
    if min_rounds < 1 or max_rounds < min_rounds or not calls:
        raise ValueError(
            f"side_by_side: need 1 <= min_rounds <= max_rounds and calls, got {min_rounds},"
            f" {max_rounds}, {len(calls)} calls"
        )
    t0 = time.perf_counter()
    warm = [t[0] for t in rotating(calls, rounds=1, warmup=1, clock=clock)]
    lead_in = lead_in_for(warm)
    per_round = max(sum(warm), 1e-9) * (1 + lead_in)
    left = budget_s - (time.perf_counter() - t0)  # wall seconds, whatever ``clock`` reads
    rounds = max(min_rounds, min(max_rounds, int(left / per_round)))
    return rotating(calls, rounds=rounds, warmup=0, clock=clock, lead_in=lead_in), warm


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over rounds of ``b[k] / a[k]`` (two timings from one :func:`rotating` call).

    Raises:
        ValueError: the sequences are empty or of different lengths.

    >>> paired_ratio([1.0, 2.0, 1.0], [1.1, 2.0, 0.5])
    1.0
    """
    if not a or len(a) != len(b):
        raise ValueError(f"paired_ratio: {len(a)} and {len(b)} rounds")
    return statistics.median(y / x for x, y in zip(a, b, strict=True))


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """The per-round ratios ``b[k] / a[k]`` whose median :func:`paired_ratio` is.

    Raises:
        ValueError: the sequences are empty or of different lengths.

    >>> paired_ratios([1.0, 2.0], [2.0, 1.0])
    [2.0, 0.5]
    """
    if not a or len(a) != len(b):
        raise ValueError(f"paired_ratios: {len(a)} and {len(b)} rounds")
    return [y / x for x, y in zip(a, b, strict=True)]


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of ``values``: the order
    statistics ``(x_(k), x_(n+1-k))`` with the largest ``k`` whose binomial tail
    ``P(Bin(n, 1/2) < k)`` is at most ``(1 - confidence) / 2`` (at least the smallest and
    largest value: with 5 values, ``[min, max]`` covers the median with probability
    0.9375). Applied to per-round ratios (:func:`paired_ratios`) it bounds the ratio
    :func:`paired_ratio` reports; for an A/A pair, that is the timing noise.

    Raises:
        ValueError: no values, or ``confidence`` outside ``(0, 1)``.

    >>> median_interval([1.0, 0.9, 1.2, 1.1, 1.0])
    (0.9, 1.2)
    """
    if not values or not 0.0 < confidence < 1.0:
        raise ValueError(f"median_interval: {len(values)} values, confidence {confidence}")
    xs = sorted(values)
    n = len(xs)
    alpha = (1.0 - confidence) / 2
    k, tail = 1, 0.0
    for j in range(1, n // 2 + 1):
        tail += math.comb(n, j - 1) / 2.0**n  # P(Bin(n, 1/2) <= j - 1)
        if tail > alpha:
            break
        k = j
    return xs[k - 1], xs[n - k]
