"""Side-by-side timing shared by the benchmarks (onnxruntime and XLA runners).

Two programs are compared by running them in rounds, one run of each per round with the
order rotated from round to round (:func:`rotating`), so that drifts in machine load,
caches and clock hit both alike; their speed ratio is then the median of the per-round
ratios (:func:`paired_ratio`): a burst of load from another process slows the runs of
one round together and cancels out of that round's ratio, where it would shift a median
or minimum taken over each program's runs separately.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

__all__ = ["rotating", "paired_ratio", "paired_ratios", "median_interval"]


def rotating(
    calls: Sequence[Callable[[], object]],
    rounds: int,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> list[list[float]]:
    """Time ``calls`` side by side.

    Each callable runs ``warmup`` times (untimed), then ``rounds`` rounds of one timed run
    each; round ``k`` starts with callable ``k mod len(calls)``.

    Args:
        calls: the programs to run (each call runs one to completion).
        rounds: timed rounds (>= 1).
        warmup: untimed runs of each callable first (>= 0).
        clock: the time now in seconds (a runtime's own clock; ``time.perf_counter``).

    Returns:
        Seconds per callable per round: ``times[i][k]`` is callable ``i`` in round ``k``.

    Raises:
        ValueError: ``rounds < 1``, ``warmup < 0`` or no callables.

    >>> len(rotating([lambda: None, lambda: None], rounds=3)[1])
    3
    """
    if rounds < 1 or warmup < 0 or not calls:
        raise ValueError(f"rotating: rounds {rounds} >= 1, warmup {warmup} >= 0, calls given")
    for _ in range(warmup):
        for call in calls:
            call()
    times: list[list[float]] = [[] for _ in calls]
    n = len(calls)
    for k in range(rounds):
        for j in range(n):
            i = (j + k) % n
            t0 = clock()
            calls[i]()
            times[i].append(clock() - t0)
    return times


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
