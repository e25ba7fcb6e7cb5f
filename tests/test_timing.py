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
