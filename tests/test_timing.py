"""tensat_py.runtime.timing: rotating side-by-side runs and paired ratios."""

from __future__ import annotations

import pytest
from tensat_py.runtime.timing import LEAD_IN_SECONDS, paired_ratio, rotating, side_by_side


def test_rotating_runs_every_call_once_per_round_in_rotated_order() -> None:
    order: list[int] = []
    times = rotating([lambda: order.append(0), lambda: order.append(1)], rounds=3, warmup=2)
    assert order[:4] == [0, 1, 0, 1]  # warm-up, then rounds starting with 0, 1, 0
    assert order[4:] == [0, 1, 1, 0, 0, 1]
    assert [len(t) for t in times] == [3, 3] and all(x >= 0 for t in times for x in t)


class Clocked:
    """Callables on a made-up clock: the n-th run of callable ``i`` (from 1) advances it by
    ``seconds[i] * n`` and is logged as ``(i, n)``."""

    def __init__(self, *seconds: float) -> None:
        self.now, self.log, self.seconds = 0.0, [], seconds
        self.runs = [0] * len(seconds)

    def clock(self) -> float:
        return self.now

    def call(self, i: int):
        def run() -> None:
            self.runs[i] += 1
            self.now += self.seconds[i] * self.runs[i]
            self.log.append((i, self.runs[i]))

        return run


def test_a_lead_in_run_comes_right_before_each_timed_run_and_is_not_timed() -> None:
    c = Clocked(1.0, 10.0)
    times = rotating([c.call(0), c.call(1)], rounds=2, warmup=0, clock=c.clock, lead_in=1)
    # Round 0 starts with callable 0, round 1 with callable 1; each turn is two runs.
    assert c.log == [(0, 1), (0, 2), (1, 1), (1, 2), (1, 3), (1, 4), (0, 3), (0, 4)]
    # Only the second run of each turn is timed (the n-th run takes seconds * n).
    assert times == [[2.0, 4.0], [20.0, 40.0]]
    with pytest.raises(ValueError, match="lead_in"):
        rotating([c.call(0)], rounds=1, lead_in=-1)


def test_side_by_side_leads_in_short_programs_and_not_long_ones() -> None:
    short = Clocked(LEAD_IN_SECONDS / 100, LEAD_IN_SECONDS / 100)
    times, warm = side_by_side(
        [short.call(0), short.call(1)], 1e9, min_rounds=3, max_rounds=3, clock=short.clock
    )
    assert [len(t) for t in times] == [3, 3] and len(warm) == 2
    assert short.runs == [2 + 2 * 3, 2 + 2 * 3]  # warm-up and pace runs, then turns of 2
    long = Clocked(LEAD_IN_SECONDS, LEAD_IN_SECONDS / 100)
    side_by_side([long.call(0), long.call(1)], 1e9, min_rounds=3, max_rounds=3, clock=long.clock)
    assert long.runs == [2 + 3, 2 + 3]  # one run a turn: a warm-up run took too long
    with pytest.raises(ValueError, match="min_rounds"):
        side_by_side([long.call(0)], 1.0, min_rounds=0)


def test_paired_ratio_is_the_median_of_per_round_ratios() -> None:
    # A burst of load in round 2 slows both programs; the paired ratio ignores it.
    a, b = [1.0, 5.0, 1.0, 1.0], [2.0, 10.0, 2.0, 2.0]
    assert paired_ratio(a, b) == 2.0
    with pytest.raises(ValueError, match="rounds"):
        paired_ratio([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="rounds"):
        rotating([lambda: None], rounds=0)
