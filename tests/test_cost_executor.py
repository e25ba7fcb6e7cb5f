"""tensat_py.cost.executor: XLA CPU's thunk executor replayed over region times (which
regions run side by side, which one after another)."""

from __future__ import annotations

import pytest
from tensat_py.cost.executor import MAX_WORKERS, SPLIT_THRESHOLD, Thunk, makespan


def _independent(n: int, seconds: float = 1.0, threads: float = 1.0) -> list[Thunk]:
    return [Thunk(seconds, (), threads) for _ in range(n)]


def test_a_program_of_few_regions_runs_them_one_after_another() -> None:
    assert makespan(_independent(8), cores=4) == 8.0
    assert makespan(_independent(9), cores=4) == 9.0  # 8 wait after the first pop: no split
    assert makespan(_independent(10), cores=4) < 10.0
    assert makespan(_independent(20), cores=4, sequential=True) == 20.0


def test_many_ready_regions_are_split_between_threads() -> None:
    # 11 sources: the calling thread keeps 1 + 5, a worker takes the back 5.
    assert makespan(_independent(11), cores=2) == 6.0
    # more cores than workers: at most MAX_WORKERS tasks besides the calling thread
    wide = makespan(_independent(200), cores=64)
    assert wide >= 200 / (MAX_WORKERS + 1)


def test_a_burst_of_at_most_the_split_threshold_stays_on_one_thread() -> None:
    burst = [Thunk(1.0)] + [Thunk(1.0, (0,)) for _ in range(SPLIT_THRESHOLD)]
    assert makespan(burst, cores=8) == 1.0 + SPLIT_THRESHOLD
    wider = [Thunk(1.0)] + [Thunk(1.0, (0,)) for _ in range(SPLIT_THRESHOLD + 2)]
    assert makespan(wider, cores=8) < 1.0 + SPLIT_THRESHOLD + 2


def test_regions_that_keep_every_core_busy_do_not_overlap() -> None:
    assert makespan(_independent(12, threads=2.0), cores=2) == pytest.approx(12.0)
    # a region that keeps 1.5 of 2 cores busy: two side by side run at 2/3 pace
    assert makespan(_independent(12, threads=1.5), cores=2) == pytest.approx(9.0)


def test_a_chain_is_the_sum_of_its_regions() -> None:
    chain = [Thunk(float(k + 1), (k - 1,) if k else ()) for k in range(10)]
    assert makespan(chain, cores=4) == pytest.approx(55.0)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="cores"):
        makespan(_independent(3), cores=0)
    with pytest.raises(ValueError, match="thunk 1 depends on a thunk not before it"):
        makespan([Thunk(1.0), Thunk(1.0, (1,))], cores=2)
