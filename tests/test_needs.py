"""Classes every derivation needs: the rows y_c <= y_d that tighten the extraction ILP."""

from __future__ import annotations

import random

import pulp
import pytest
from extraction_helpers import brute_force, make
from tensat_py.egraph import ExtractionProblem
from tensat_py.extract import extract, ilp
from tensat_py.extract.highs import HighsModel
from tensat_py.extract.needs import needed_pairs
from tensat_py.extract.simplify import simplify

# root R = {f(A) 0 | g(B) 0}; A = a(C) 0; B = b(C) 0; C = c(D) 10; D leaf 0. Every way to
# R builds C: optimum 10. The LP without y_R <= y_C takes f and g at one half each, and with
# them A, B and C at one half: 5.
HALVES = make(
    [(0, [1], 0), (0, [2], 0), (1, [3], 0), (2, [3], 0), (3, [4], 10), (4, [], 0)], roots=[0]
)


def test_a_class_needs_what_all_its_alternatives_build() -> None:
    pairs = needed_pairs(HALVES, [True] * 6)
    # R needs C and D (through both alternatives); A needs C through its only node's child,
    # which the child row already says: only R's pair to C is new (C -> D is a child row).
    assert pairs == [(0, 3)]


def test_a_cycle_does_not_make_a_class_needed() -> None:
    # A = {a leaf 5 | f(B) 0}; B = {g(A) 0 | b leaf 4}; root R = h(A). A can be built
    # without B and B without A: neither needs the other.
    p = make([(0, [], 5), (0, [1], 0), (1, [0], 0), (1, [], 4), (2, [0], 1)], roots=[2])
    assert needed_pairs(p, [True] * 5) == []


def test_lp_relaxation_with_needs_pays_for_what_every_alternative_builds() -> None:
    s = simplify(HALVES, dominance=False, necessary=False)
    plain = HighsModel(HALVES, s, relax=True).solve(10)
    tight = HighsModel(HALVES, s, relax=True, needs=True).solve(10)
    assert plain.lower_bound == pytest.approx(5.0)
    assert tight.lower_bound == pytest.approx(10.0)


def test_cbc_model_carries_the_need_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    models: list[pulp.LpProblem] = []
    run = ilp._run

    def keep(lp: pulp.LpProblem, solver: pulp.LpSolver, *a: object, **kw: object) -> str:
        models.append(lp.deepcopy())
        return run(lp, solver, *a, **kw)

    monkeypatch.setattr(ilp, "_run", keep)
    out = ilp.solve_ilp(HALVES, solver="cbc", time_limit=10, decompose=False, path_bound=False)
    assert out.status == "optimal"
    assert models, "CBC was never called"
    relaxed = models[0]
    for v in relaxed.variables():
        v.cat = pulp.LpContinuous
    relaxed.solve(pulp.HiGHS(msg=False))
    assert pulp.value(relaxed.objective) == pytest.approx(1.0)  # 10, scaled by the top cost


def random_egraph(seed: int, cyclic: bool) -> ExtractionProblem:
    """A small random e-graph: class 0 has a leaf, every other class one with chance 0.4,
    and one to three operators whose children are earlier classes (acyclic) or any other
    classes (cyclic)."""
    rng = random.Random(seed)
    nodes: list[tuple[int, list[int], float]] = []
    classes = rng.randint(4, 7)
    for c in range(classes):
        if c == 0 or rng.random() < 0.4:
            nodes.append((c, [], float(rng.randint(3, 9))))
        pool = [d for d in range(classes) if d != c] if cyclic else list(range(c))
        for _ in range(rng.randint(1, 3) if pool else 0):
            kids = rng.sample(pool, rng.randint(1, min(2, len(pool))))
            nodes.append((c, kids, float(rng.randint(0, 9))))
    return make(nodes, roots=[classes - 1])


def buildable(p: ExtractionProblem) -> bool:
    return brute_force(p) < float("inf")


#: 30 random e-graphs of each kind whose root class can be built.
CASES = [
    (seed, cyclic)
    for cyclic in (False, True)
    for seed in [s for s in range(40) if buildable(random_egraph(s, cyclic))][:30]
]


@pytest.mark.parametrize(("seed", "cyclic"), CASES)
def test_cbc_with_need_rows_finds_the_brute_force_optimum(seed: int, cyclic: bool) -> None:
    # The rows never cut off the optimum: every acyclic extraction satisfies them.
    p = random_egraph(seed, cyclic)
    r = extract(p, extractor="ilp", solver="cbc", time_limit=10, path_bound=False)
    assert r.cost == pytest.approx(brute_force(p))


@pytest.mark.parametrize("cyclic", [False, True])
def test_the_random_egraphs_exercise_the_need_rows(cyclic: bool) -> None:
    graphs = [random_egraph(seed, c) for seed, c in CASES if c == cyclic]
    assert len(graphs) == 30
    assert sum(1 for p in graphs if needed_pairs(p, ilp.prune(p))) >= 10


def test_cbc_on_a_cyclic_egraph_reports_the_lp_bound_computed_beside_the_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A = {a leaf 5 | f(B) 0}; B = {g(A) 0 | b leaf 4}; root R = h(A) 1. Optimum 5 (h, f, b);
    # the LP without acyclicity builds A and B through f and g: 1.
    import time

    from tensat_py.extract import lns

    p = make([(0, [], 5), (0, [1], 0), (1, [0], 0), (1, [], 4), (2, [0], 1)], roots=[2])

    def slow_search(problem, start, kept, *, time_limit, **kw):  # noqa: ANN001, ANN003, ANN202
        time.sleep(time_limit)  # the whole budget: no exact ILP, no time left after
        return lns.LnsOutcome(start, problem.dag_cost(start), 0, 0, time_limit)

    monkeypatch.setattr(lns, "improve", slow_search)
    out = ilp.solve_ilp(p, solver="cbc", time_limit=2, decompose=False, path_bound=False)
    assert "no time left for the exact ILP" in out.message
    assert out.lower_bound == pytest.approx(1.0)


def test_a_cbc_extraction_ends_its_lp_bound_thread_before_returning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A thread left inside HiGHS when the interpreter exits aborts the process. Here CBC
    # proves the cyclic e-graph while the bound (made slow) is still being computed.
    import threading

    from tensat_py.extract import lns

    p = make([(0, [], 5), (0, [1], 0), (1, [0], 0), (1, [], 4), (2, [0], 1)], roots=[2])

    def slow_bound(problem, simp, deadline, stop=None):  # noqa: ANN001, ANN202
        assert stop is not None
        stop.wait(5.0)
        return 0.0

    def quick_search(problem, start, kept, *, time_limit, **kw):  # noqa: ANN001, ANN003, ANN202
        return lns.LnsOutcome(start, problem.dag_cost(start), 0, 0, 0.0)

    monkeypatch.setattr(ilp, "_lp_bound", slow_bound)
    monkeypatch.setattr(lns, "improve", quick_search)
    out = ilp.solve_ilp(p, solver="cbc", time_limit=10, decompose=False, path_bound=False)
    assert out.status == "optimal"
    assert not [t for t in threading.enumerate() if t.name == "tensat-lp-bound"]
