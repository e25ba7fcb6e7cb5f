"""Side-by-side timing shared by the benchmarks (onnxruntime and XLA runners).

Two programs are compared by running them in rounds, one run of each per round with the
order rotated from round to round (:func:`rotating`), so that drifts in machine load,
caches and clock hit both alike; their speed ratio is then the median of the per-round
ratios (:func:`paired_ratio`): a burst of load from another process slows the runs of
one round together and cancels out of that round's ratio, where it would shift a median
or minimum taken over each program's runs separately.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

__all__ = ["rotating", "paired_ratio"]


def rotating(
    calls: Sequence[Callable[[], object]], rounds: int, warmup: int = 1
) -> list[list[float]]:
    """Time ``calls`` side by side.

    Each callable runs ``warmup`` times (untimed), then ``rounds`` rounds of one timed run
    each; round ``k`` starts with callable ``k mod len(calls)``.

    Args:
        calls: the programs to run (each call runs one to completion).
        rounds: timed rounds (>= 1).
        warmup: untimed runs of each callable first (>= 0).

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
            t0 = time.perf_counter()
            calls[i]()
            times[i].append(time.perf_counter() - t0)
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
