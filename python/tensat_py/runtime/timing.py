"""Side-by-side timing shared by the benchmarks (onnxruntime and XLA runners).

Two programs are compared by running them in rounds, one *turn* of each per round with
the order rotated from round to round (:func:`rotating`), so that drifts in machine load,
caches and clock hit both alike; their speed ratio is then the median of the per-round
ratios (:func:`paired_ratio`): a burst of load from another process slows the runs of
one round together and cancels out of that round's ratio, where it would shift a median
or minimum taken over each program's runs separately.

A turn is one run by default. With ``settle_seconds`` and ``turn_seconds``
(:data:`SETTLE_SECONDS`, :data:`TURN_SECONDS`, which confirmation and the XLA benches
use), a turn runs the program untimed for ``settle_seconds``, then timed for
``turn_seconds``, and its figure is the median of those timed runs: the program is
timed as it runs in a loop of its own, not in the state another program left. The first
runs after a switch pay for it: on XLA CPU (``bench/hlo_modules/jax_lora_dense.hlo``, 2
cores), the optimised program's first run after 40 runs of the input took 835 us, its
fourth 594 us, from its tenth on 520-530 us; the input's first after the optimised
program 866 us, then 720-760 us. One run per turn adds that switch to every run and
measured the pair 1.24x (3,600 rounds); turns of 10 ms, their first half dropped,
1.43x; 30 ms, 1.57x; the A/A 0.99-1.00 throughout.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

__all__ = [
    "rotating",
    "turn_seconds",
    "paired_ratio",
    "paired_ratios",
    "median_interval",
    "SETTLE_SECONDS",
    "TURN_SECONDS",
    "SETTLE_RUNS",
]

#: Untimed seconds at the start of each turn (:func:`rotating`) in confirmation and the
#: XLA benches: the runs that pay for the switch from the previous program.
SETTLE_SECONDS = 0.005
#: Timed seconds of each turn (at least one run) in confirmation and the XLA benches.
TURN_SECONDS = 0.01
#: A program whose turn's figure is at least this many times the settling seconds does not
#: settle in its next turn: the switch (about 0.3 ms on XLA CPU here) is a small share of
#: one of its runs, and a settling run would double its turn.
SETTLE_RUNS = 4


def rotating(
    calls: Sequence[Callable[[], object]],
    rounds: int,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
    settle_seconds: float = 0.0,
    turn_seconds: float = 0.0,
) -> list[list[float]]:
    """Time ``calls`` side by side.

    Each callable runs ``warmup`` times (untimed), then ``rounds`` rounds of one turn
    each; round ``k`` starts with callable ``k mod len(calls)``. A turn runs the callable
    untimed until ``settle_seconds`` have passed (none when 0, or when its previous turn's
    figure was at least :data:`SETTLE_RUNS` times ``settle_seconds``: a switch is then a
    small share of one run), then timed until ``turn_seconds`` have passed (at least
    once); its figure is the median of its timed runs (see the module docstring).

    Args:
        calls: the programs to run (each call runs one to completion).
        rounds: timed rounds (>= 1).
        warmup: untimed runs of each callable first (>= 0).
        clock: the time now in seconds (a runtime's own clock; ``time.perf_counter``).
        settle_seconds, turn_seconds: the untimed and timed seconds of a turn (>= 0;
            default one timed run a turn).

    Returns:
        Seconds per run of each callable per round: ``times[i][k]`` is callable ``i`` in
        round ``k``.

    Raises:
        ValueError: ``rounds < 1``, ``warmup < 0``, a negative number of seconds or no
            callables.

    >>> len(rotating([lambda: None, lambda: None], rounds=3)[1])
    3
    """
    if rounds < 1 or warmup < 0 or not calls or settle_seconds < 0 or turn_seconds < 0:
        raise ValueError(
            f"rotating: rounds {rounds} >= 1, warmup {warmup} >= 0, settle_seconds "
            f"{settle_seconds} >= 0, turn_seconds {turn_seconds} >= 0, calls given"
        )
    for _ in range(warmup):
        for call in calls:
            call()
    times: list[list[float]] = [[] for _ in calls]
    n = len(calls)
    for k in range(rounds):
        for j in range(n):
            i = (j + k) % n
            if settle_seconds > 0 and (not times[i] or times[i][-1] < SETTLE_RUNS * settle_seconds):
                end = clock() + settle_seconds
                while True:
                    calls[i]()
                    if clock() >= end:
                        break
            runs: list[float] = []
            end = clock() + turn_seconds
            while True:
                t0 = clock()
                calls[i]()
                t1 = clock()
                runs.append(t1 - t0)
                if t1 >= end:
                    break
            times[i].append(statistics.median(runs))
    return times


def turn_seconds(run_seconds: float, settle_seconds: float, turn_seconds: float) -> float:
    """Seconds one turn of :func:`rotating` takes for a program that runs in
    ``run_seconds``: its settling runs (none when ``settle_seconds`` is 0 or the run takes
    :data:`SETTLE_RUNS` times as long, else at least one) and its timed runs (at least one).

    >>> turn_seconds(0.002, 0.005, 0.01), turn_seconds(0.5, 0.005, 0.01), turn_seconds(0.1, 0, 0)
    (0.015, 0.5, 0.1)
    """
    settle = 0.0
    if 0 < settle_seconds and run_seconds < SETTLE_RUNS * settle_seconds:
        settle = max(settle_seconds, run_seconds)
    return settle + max(turn_seconds, run_seconds)


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
