"""The search over acyclic restrictions (tensat_py.extract.lns) and the exact solve beside it."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from extraction_helpers import make
from reference_data import fixture, fixture_optimum, param, shared
from tensat_py.egraph import ExtractionProblem, load_json
from tensat_py.extract.greedy import greedy_dag
from tensat_py.extract.highs import HighsModel
from tensat_py.extract.lns import improve, neighbourhood
from tensat_py.extract.simplify import simplify

# Tensat's merge of two matmuls sharing an input, with the split/concat cycle it brings.
# Classes: 0 X (input), 1 W1, 2 W2 (weights), 3 C = concat(W1, W2), 4 A = X*W1 | split0(S),
# 5 B = X*W2 | split1(S), 6 S = split(M), 7 M = X*C | concat(A, B), 8 root r(A, B).
# Greedy computes A and B directly (3 + 3); the optimum merges them (4): A and B from the
# splits of M = X*C. Choosing M = concat(A, B) there would close the cycle A -> S -> M -> A.
MERGE = make(
    [
        (0, [], 0),
        (1, [], 0),
        (2, [], 0),
        (3, [1, 2], 0),
        (4, [0, 1], 3),
        (4, [6], 0),
        (5, [0, 2], 3),
        (5, [6], 0),
        (6, [7], 0),
        (7, [0, 3], 4),
        (7, [4, 5], 0),
        (8, [4, 5], 0),
    ],
    roots=[8],
)


def cover(targets: int = 30, sets: int = 120, seed: int = 0) -> ExtractionProblem:
    """Weighted set cover as an acyclic e-graph (hard for the ILP's LP relaxation, as
    Inception-v3's merges are): the root needs every target class; a target is a leaf of
    its own cost or a free split of a merge class, a leaf covering 3-6 targets at once."""
    rng = random.Random(seed)
    nodes: list[tuple[int, list[int], float]] = [(0, list(range(1, targets + 1)), 0.0)]
    nodes += [(j, [], rng.uniform(2, 4)) for j in range(1, targets + 1)]
    for s in range(sets):
        merged = targets + 1 + s
        nodes.append((merged, [], rng.uniform(3, 8)))
        nodes += [(j, [merged], 0.0) for j in rng.sample(range(1, targets + 1), rng.randint(3, 6))]
    return make(nodes, roots=[0])


def test_search_merges_through_a_split_concat_cycle() -> None:
    simp = simplify(MERGE)
    start = greedy_dag(MERGE)
    assert MERGE.dag_cost(start) == 6
    out = improve(MERGE, start, simp.keep, time_limit=10)
    assert out.cost == 4
    assert MERGE.check_choice(out.choices) is None
    assert out.choices[7] == 9 and out.choices[4] == 5 and out.choices[5] == 7
    assert out.improvements >= 1


def test_neighbourhood_frees_released_classes_and_new_classes_within_the_radius() -> None:
    by_class = MERGE.class_nodes()
    greedy = {8: 11, 4: 4, 5: 6, 0: 0, 1: 1, 2: 2}
    # Nothing released: every class of the incumbent keeps its node, nothing new is offered.
    fixed = neighbourhood(MERGE, by_class, greedy, set(), 5)
    assert fixed == [[0], [1], [2], [], [4], [6], [], [], [11]]
    # A released: both its nodes; S is one step away, M two, C three.
    for radius, offered in ((1, {6}), (2, {6, 7}), (3, {3, 6, 7})):
        allowed = neighbourhood(MERGE, by_class, greedy, {4}, radius)
        assert allowed[4] == [4, 5] and allowed[5] == [6]
        assert {c for c in (3, 6, 7) if allowed[c]} == offered, radius
        assert all(allowed[c] == by_class[c] for c in offered)


def test_search_rejects_a_radius_below_one() -> None:
    with pytest.raises(ValueError, match="radius must be at least 1, got 0"):
        improve(MERGE, greedy_dag(MERGE), [True] * MERGE.num_nodes, time_limit=1, radius=0)


def test_search_stops_when_told() -> None:
    seen: list[float] = []

    def stop(cost: float) -> bool:
        seen.append(cost)
        return True

    out = improve(MERGE, greedy_dag(MERGE), simplify(MERGE).keep, time_limit=10, stop=stop)
    assert out.iterations == 0 and out.cost == 6 and seen == [6]


def test_search_reports_each_improvement() -> None:
    reported: list[tuple[dict[int, int], float]] = []
    out = improve(
        MERGE,
        greedy_dag(MERGE),
        simplify(MERGE).keep,
        time_limit=10,
        on_improve=lambda choice, cost: reported.append((choice, cost)),
    )
    assert reported and reported[-1] == (out.choices, 4)


def test_a_running_highs_solve_polls_offers_and_skips_foreign_ones() -> None:
    simp = simplify(MERGE)
    model = HighsModel(MERGE, simp)
    polled: list[int] = []

    def offers() -> dict[int, int]:
        polled.append(1)
        return {8: 11, 4: 999}  # a node the model does not have: not handed over

    model.set_start(greedy_dag(MERGE))
    assert model.start_vector({8: 11, 4: 999}) is None
    solve = model.solve(10, offers=offers)
    assert solve.selected is not None
    assert model.h.cbMipUserSolution.callbacks == []  # unsubscribed after the run


def cyclic_egraphs() -> list:
    """``(path, optimum, a cost the greedy start exceeds)``: our cyclic fixture e-graph
    (optimum computed without our extraction code) and, beside a development checkout,
    Tensat's ResNet-50 e-graph from ../shared/data/egraphs (CPLEX's 10 h optimum)."""
    opt = fixture_optimum("conv_pairs3")
    cases = [param(fixture("egraphs", "conv_pairs3.json"), opt, 1.1 * opt)]
    if (path := shared("egraphs", "tensat_resnet50.json")) is not None:
        cases.append(param(path, 4.38579, 4.3959, source="shared"))
    return cases


@pytest.mark.parametrize(("path", "optimum", "start_above"), cyclic_egraphs())
def test_search_reaches_the_optimum_of_a_cyclic_egraph_from_greedy(
    path: Path, optimum: float, start_above: float
) -> None:
    # The first step releases the whole incumbent: one acyclic restriction of the whole
    # e-graph, which holds the optimum of this cyclic e-graph.
    p = load_json(path)
    simp = simplify(p)
    start = simp.repair(p, greedy_dag(p))
    assert p.dag_cost(start) > start_above
    out = improve(p, start, simp.keep, time_limit=60, stall=1)
    assert out.cost == pytest.approx(optimum, rel=1e-5)
    assert p.check_choice(out.choices) is None


def test_a_slow_first_round_has_the_search_beside_it_and_takes_its_answer(monkeypatch) -> None:
    from tensat_py.extract import ilp

    solve = HighsModel.solve
    handed: list[dict[int, int] | None] = []

    def slow(self, time_limit, offers=None, interrupt=None):  # noqa: ANN001, ANN202
        if offers is not None:  # the exact solve (the search's own solves have no offers)
            time.sleep(0.5)  # the search, started beside it, has finished by now
            handed.append(offers())
        return solve(self, time_limit, offers, interrupt)

    monkeypatch.setattr(HighsModel, "solve", slow)
    monkeypatch.setattr(ilp, "SEARCH_GRACE", 0.05)
    out = ilp.solve_ilp(
        MERGE, solver="highs", time_limit=10, warm_start=greedy_dag(MERGE), decompose=False
    )
    assert "search beside it" in out.message
    assert handed[0] is not None and MERGE.dag_cost(handed[0]) == 4
    assert out.status == "optimal" and MERGE.dag_cost(out.choices) == 4


def test_an_error_in_the_exact_solve_beside_the_search_reaches_the_caller(monkeypatch) -> None:
    from tensat_py.extract import ilp

    def broken(self, time_limit, offers=None, interrupt=None):  # noqa: ANN001, ANN202
        raise RuntimeError("HiGHS broke")

    monkeypatch.setattr(HighsModel, "solve", broken)
    with pytest.raises(RuntimeError, match="HiGHS broke"):
        ilp.solve_ilp(
            MERGE, solver="highs", time_limit=5, warm_start=greedy_dag(MERGE), decompose=False
        )


def test_a_highs_solve_stops_when_interrupted() -> None:
    p = cover()
    model = HighsModel(p, simplify(p))
    polled: list[float] = []
    solve = model.solve(30, interrupt=lambda gap: polled.append(gap) or True)
    assert polled and solve.status == "Interrupted by user" and not solve.optimal
    assert model.h.cbMipInterrupt.callbacks == []  # unsubscribed after the run


def slow_exact_solve(
    monkeypatch,  # noqa: ANN001
    handed: list[dict[int, int] | None],
    gap: float | None = None,
) -> None:
    """Makes the exact solve (the one polling offers) report ``gap`` (if given), wait 1 s,
    then take the offer."""
    solve = HighsModel.solve

    def slow(self, time_limit, offers=None, interrupt=None):  # noqa: ANN001, ANN202
        if offers is not None:
            if gap is not None and interrupt is not None:
                interrupt(gap)
            time.sleep(1.0)
            handed.append(offers())
        return solve(self, time_limit, offers, interrupt)

    monkeypatch.setattr(HighsModel, "solve", slow)


def test_a_slow_acyclic_solve_gets_the_search_late_and_takes_its_answer(monkeypatch) -> None:
    from tensat_py.extract import ilp

    p = cover()
    greedy = greedy_dag(p)
    handed: list[dict[int, int] | None] = []
    slow_exact_solve(monkeypatch, handed)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    monkeypatch.setattr(ilp, "LATE_SEARCH_SHARE", 0.02)
    out = ilp.solve_ilp(p, solver="highs", time_limit=20, warm_start=greedy, decompose=False)
    assert "search beside it" in out.message
    assert handed[0] is not None and p.dag_cost(handed[0]) < p.dag_cost(greedy)
    assert out.status == "optimal" and out.stats["search_steps"] > 0


def test_the_late_search_skips_a_solve_already_close_to_its_bound(monkeypatch) -> None:
    from tensat_py.extract import ilp

    p = cover()
    handed: list[dict[int, int] | None] = []
    slow_exact_solve(monkeypatch, handed, gap=0.5 * ilp.LATE_SEARCH_GAP)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    monkeypatch.setattr(ilp, "LATE_SEARCH_SHARE", 0.02)
    out = ilp.solve_ilp(p, solver="highs", time_limit=20, warm_start=greedy_dag(p), decompose=False)
    assert "search beside it" not in out.message and handed == [None]
    assert out.stats["search_steps"] == 0


def test_the_late_search_waits_while_another_extraction_runs(monkeypatch) -> None:
    from tensat_py.extract import ilp

    p = cover()
    handed: list[dict[int, int] | None] = []
    slow_exact_solve(monkeypatch, handed)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    monkeypatch.setattr(ilp, "LATE_SEARCH_SHARE", 0.02)
    with ilp.RUNNING:  # another piece's solve, still running when this one ends
        out = ilp.solve_ilp(
            p, solver="highs", time_limit=20, warm_start=greedy_dag(p), decompose=False
        )
    assert "search beside it" not in out.message and handed == [None]
    assert ilp.RUNNING.count == 0


def test_an_error_in_the_search_interrupts_the_exact_solve_beside_it(monkeypatch) -> None:
    from tensat_py.extract import ilp, lns

    solve = HighsModel.solve
    statuses: list[str] = []

    def recorded(self, time_limit, offers=None, interrupt=None):  # noqa: ANN001, ANN202
        out = solve(self, time_limit, offers, interrupt)
        if offers is not None:
            statuses.append(out.status)
        return out

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("search broke")

    monkeypatch.setattr(HighsModel, "solve", recorded)
    monkeypatch.setattr(lns, "improve", broken)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    monkeypatch.setattr(ilp, "LATE_SEARCH_SHARE", 0.001)
    p = cover(40, 300)  # HiGHS needs seconds to prove it
    with pytest.raises(RuntimeError, match="search broke"):
        ilp.solve_ilp(p, solver="highs", time_limit=60, warm_start=greedy_dag(p), decompose=False)
    assert statuses == ["Interrupted by user"]


def test_the_late_search_ends_with_its_solve(monkeypatch) -> None:
    from tensat_py.extract import ilp, lns

    p = cover()
    solve = HighsModel.solve
    restricted = lns.solve_restricted
    steps: list[int] = []

    def short_exact(self, time_limit, offers=None, interrupt=None):  # noqa: ANN001, ANN202
        if offers is None:
            return solve(self, time_limit, offers, interrupt)
        time.sleep(0.5)  # the search has started beside it by now
        return solve(self, 0.01, offers, interrupt)  # ends at its time limit, unproved

    def slow_step(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        steps.append(1)
        time.sleep(0.1)
        return restricted(*args, **kwargs)

    monkeypatch.setattr(HighsModel, "solve", short_exact)
    monkeypatch.setattr(lns, "solve_restricted", slow_step)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    monkeypatch.setattr(ilp, "LATE_SEARCH_SHARE", 0.001)
    out = ilp.solve_ilp(p, solver="highs", time_limit=20, warm_start=greedy_dag(p), decompose=False)
    assert out.stats["search_steps"] == len(steps) >= 1
    # Without the rule the search runs on until 12 steps in a row find nothing (13-16).
    assert len(steps) < 10


def slow_cbc(monkeypatch, seconds: float = 1.0, builds: bool = True) -> list[float]:  # noqa: ANN001
    """Makes the CBC solve take ``seconds`` and end with no answer, as a CBC stopped at its
    time limit does (its process started at once, or never when not ``builds``: PuLP still
    writing the model); returns the time limits it was given."""
    from tensat_py.extract import ilp

    limits: list[float] = []

    def stopped(problem, *, solver, time_limit, started=None, **kwargs):  # noqa: ANN001, ANN003, ANN202
        assert solver == "cbc"
        limits.append(time_limit)
        if builds and started is not None:
            started.set()
        time.sleep(seconds)
        raise ilp.SolverStopped("the solver process was stopped at the time limit")

    monkeypatch.setattr(ilp, "_solve_exact", stopped)
    return limits


def late_cbc(monkeypatch, builds: bool = True) -> tuple[ExtractionProblem, dict[int, int]]:  # noqa: ANN001
    """:func:`cover` and its greedy DAG, with a slow CBC (:func:`slow_cbc`) whose late search
    is due almost at once."""
    from tensat_py.extract import ilp

    slow_cbc(monkeypatch, builds=builds)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    monkeypatch.setattr(ilp, "LATE_SEARCH_SHARE", 0.02)
    p = cover()
    return p, greedy_dag(p)


def test_a_slow_acyclic_cbc_solve_gets_the_search_late_and_keeps_its_answer(monkeypatch) -> None:
    from tensat_py.extract import ilp

    p, greedy = late_cbc(monkeypatch)
    out = ilp.solve_ilp(p, solver="cbc", time_limit=20, warm_start=greedy, decompose=False)
    assert out.choices is not None and p.dag_cost(out.choices) < p.dag_cost(greedy)
    assert "best of search" in out.message and out.stats["search_steps"] > 0
    assert "had no answer at the time limit and was stopped" in out.message


def test_the_cbc_late_search_waits_for_the_model_to_be_built(monkeypatch) -> None:
    from tensat_py.extract import ilp

    p, greedy = late_cbc(monkeypatch, builds=False)
    out = ilp.solve_ilp(p, solver="cbc", time_limit=20, warm_start=greedy, decompose=False)
    assert out.choices is None and "search" not in out.message
    assert "had no answer at the time limit and was stopped" in out.message


def test_the_cbc_late_search_waits_while_more_extractions_run_than_cpus(monkeypatch) -> None:
    from tensat_py.extract import ilp

    p, greedy = late_cbc(monkeypatch)
    monkeypatch.setattr(ilp, "_cpus", lambda: 1)
    with ilp.RUNNING:  # another piece's solve, still running when this one ends
        out = ilp.solve_ilp(p, solver="cbc", time_limit=20, warm_start=greedy, decompose=False)
    assert out.choices is None and "search" not in out.message
    assert ilp.RUNNING.count == 0


def test_the_cbc_late_search_runs_beside_another_extraction_on_a_free_cpu(monkeypatch) -> None:
    from tensat_py.extract import ilp

    p, greedy = late_cbc(monkeypatch)
    monkeypatch.setattr(ilp, "_cpus", lambda: 2)
    with ilp.RUNNING:  # another piece's CBC solve, on the other CPU
        out = ilp.solve_ilp(p, solver="cbc", time_limit=20, warm_start=greedy, decompose=False)
    assert out.choices is not None and p.dag_cost(out.choices) < p.dag_cost(greedy)
    assert "best of search" in out.message and out.stats["search_steps"] > 0


def test_the_cbc_late_search_goes_on_after_cbc_stops_without_a_proof(monkeypatch) -> None:
    from tensat_py.extract import ilp, lns

    p, greedy = late_cbc(monkeypatch)  # CBC: 1 s, then stopped with no answer
    asked: list[bool] = []
    improve = lns.improve

    def later(*args, stop, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        time.sleep(1.2)  # CBC has ended by now
        asked.append(stop(0.0))
        return improve(*args, stop=stop, **kwargs)

    monkeypatch.setattr(lns, "improve", later)
    out = ilp.solve_ilp(p, solver="cbc", time_limit=20, warm_start=greedy, decompose=False)
    assert asked == [False]  # the search was not told to stop
    assert "best of search" in out.message


def test_a_cbc_solve_that_proves_in_time_gets_no_search(monkeypatch) -> None:
    from tensat_py.extract import ilp, lns

    def unexpected(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the search ran beside a CBC solve that proved its answer")

    monkeypatch.setattr(lns, "improve", unexpected)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    p = cover()
    out = ilp.solve_ilp(p, solver="cbc", time_limit=60, warm_start=greedy_dag(p), decompose=False)
    assert out.status == "optimal" and "search" not in out.message


def test_a_cbc_model_that_cannot_start_in_time_leaves_the_time_to_the_search(monkeypatch) -> None:
    from tensat_py.extract import ilp

    def unexpected(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a CBC model was built with no time to solve it")

    monkeypatch.setattr(ilp, "_solve_exact", unexpected)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    # Building the model of cover()'s ~700 nodes would take 7 s of the 2 s given.
    monkeypatch.setattr(ilp, "CBC_START_SECONDS_PER_NODE", 0.01)
    p = cover()
    greedy = greedy_dag(p)
    t = time.perf_counter()
    out = ilp.solve_ilp(p, solver="cbc", time_limit=2, warm_start=greedy, decompose=False)
    assert time.perf_counter() - t < 2.5
    assert out.choices is not None and p.dag_cost(out.choices) < p.dag_cost(greedy)
    assert "no CBC solve: building its model of" in out.message
    assert out.stats["search_steps"] > 0


def test_a_cbc_model_that_starts_in_time_is_solved(monkeypatch) -> None:
    from tensat_py.extract import ilp

    limits = slow_cbc(monkeypatch, seconds=0.1)
    monkeypatch.setattr(ilp, "LATE_SEARCH_NODES", 1)
    monkeypatch.setattr(ilp, "CBC_START_SECONDS_PER_NODE", 1e-6)
    p = cover()
    ilp.solve_ilp(p, solver="cbc", time_limit=2, warm_start=greedy_dag(p), decompose=False)
    assert len(limits) == 1


def test_a_restricted_solve_counts_building_its_model_in_its_time_limit(monkeypatch) -> None:
    from tensat_py.extract import lns

    built = HighsModel.__init__
    given: list[float] = []
    solve = HighsModel.solve

    def slow_build(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        built(self, *args, **kwargs)
        time.sleep(0.3)

    def recorded(self, time_limit, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        given.append(time_limit)
        return solve(self, time_limit, *args, **kwargs)

    monkeypatch.setattr(HighsModel, "__init__", slow_build)
    monkeypatch.setattr(HighsModel, "solve", recorded)
    p = cover()
    lns.solve_restricted(p, [True] * p.num_nodes, greedy_dag(p), 1.0)
    assert given and given[0] <= 0.7
