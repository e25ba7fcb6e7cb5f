"""tensat_py.runtime.timing: rotating side-by-side runs and paired ratios."""

from __future__ import annotations

import pytest
from tensat_py.runtime.timing import paired_ratio, rotating


def test_rotating_runs_every_call_once_per_round_in_rotated_order() -> None:
    order: list[int] = []
    times = rotating([lambda: order.append(0), lambda: order.append(1)], rounds=3, warmup=2)
    assert order[:4] == [0, 1, 0, 1]  # warm-up, then rounds starting with 0, 1, 0
    assert order[4:] == [0, 1, 1, 0, 0, 1]
    assert [len(t) for t in times] == [3, 3] and all(x >= 0 for t in times for x in t)


def test_paired_ratio_is_the_median_of_per_round_ratios() -> None:
    # A burst of load in round 2 slows both programs; the paired ratio ignores it.
    a, b = [1.0, 5.0, 1.0, 1.0], [2.0, 10.0, 2.0, 2.0]
    assert paired_ratio(a, b) == 2.0
    with pytest.raises(ValueError, match="rounds"):
        paired_ratio([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="rounds"):
        rotating([lambda: None], rounds=0)


def test_a_turn_times_a_program_once_it_has_settled() -> None:
    """The first run after the other program is slow (4 ms against 1 ms): one run a turn
    times only those; a turn that settles for 5 ms first times the steady runs, and its
    figure is their median."""
    now = [0.0]
    last = [-1]

    def program(k: int):
        def call() -> None:
            now[0] += 0.004 if last[0] != k else 0.001
            last[0] = k

        return call

    calls = [program(0), program(1), program(2)]  # rotated: none runs twice in a row
    clock = lambda: now[0]  # noqa: E731
    plain = rotating(calls, rounds=4, warmup=0, clock=clock)
    assert all(t == pytest.approx(0.004) for ts in plain for t in ts)
    turns = rotating(
        calls, rounds=4, warmup=0, clock=clock, settle_seconds=0.005, turn_seconds=0.01
    )
    assert all(t == pytest.approx(0.001) for ts in turns for t in ts)
    with pytest.raises(ValueError, match="settle_seconds"):
        rotating(calls, rounds=1, settle_seconds=-1.0)


def test_a_long_program_does_not_settle_after_its_first_turn() -> None:
    now, runs = [0.0], [0]

    def long_call() -> None:  # 50 ms a run: ten times the settling seconds
        now[0] += 0.05
        runs[0] += 1

    rotating([long_call], rounds=3, warmup=0, clock=lambda: now[0], settle_seconds=0.005)
    assert runs[0] == 4  # one settling run in the first turn, then one timed run a turn
