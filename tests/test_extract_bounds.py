"""Extraction at scale: simplification, HiGHS from arrays, lower bounds and gaps, beam."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from extraction_helpers import brute_force, make
from reference_data import fixture, fixture_optimum, param, shared
from tensat_py.egraph import ExtractionProblem, load_json
from tensat_py.extract import extract
from tensat_py.extract.greedy import beam_dag, greedy_dag
from tensat_py.extract.highs import HighsModel
from tensat_py.extract.simplify import simplify


def egraphs(fixtures: dict[str, float | None], reference: dict[str, float | None]) -> list:
    """Parameters ``(path, optimum or None)``: our fixture e-graphs (optima computed without
    our extraction code) and, beside a development checkout, Tensat's reference e-graphs
    in ../shared/data/egraphs (the CPLEX optimum where published)."""
    cases = [param(fixture("egraphs", f"{n}.json"), opt) for n, opt in fixtures.items()]
    for name, opt in reference.items():
        if (path := shared("egraphs", f"{name}.json")) is not None:
            cases.append(param(path, opt, source="shared"))
    return cases


# X cost 3; A = {a1(X) 1 | a2 3}; B = {b1(X) 1 | b2 3}; root R = r(A, B). Optimum 5.
SHARED = make(
    [(0, [], 3), (1, [0], 1), (1, [], 3), (2, [0], 1), (2, [], 3), (3, [1, 2], 0)], roots=[3]
)
# A = {a leaf 5 | f(B) 0}; B = {g(A) 0 | b leaf 4}; root R = h(A) 1. Optimum h, f, b = 5;
# without acyclicity f, g cost 1.
CYCLIC = make([(0, [], 5), (0, [1], 0), (1, [0], 0), (1, [], 4), (2, [0], 1)], roots=[2])


def test_dominated_node_is_removed_and_warm_starts_are_repaired() -> None:
    # class 1 = {a(X) cost 1 | b(X, Y) cost 2}: b is dominated by a.
    p = make([(0, [], 1), (2, [], 1), (1, [0], 1), (1, [0, 2], 2), (3, [1], 0)], roots=[3])
    s = simplify(p)
    assert s.keep == [True, False, True, False, True]  # b gone; Y then unreachable
    assert s.dominator == {3: 2}
    assert s.stats["dominated"] == 1
    assert s.repair(p, {3: 4, 1: 3, 0: 0, 2: 1}) == {3: 4, 1: 2, 0: 0}


def test_node_whose_child_needs_its_own_class_is_removed() -> None:
    # A = {a leaf 5 | f(B) 0}; B = {g(A) 0}: every derivation of B uses A, so f can never
    # be part of an acyclic extraction; after removing it the class graph is acyclic.
    p = make([(0, [], 5), (0, [1], 0), (1, [0], 0), (2, [0], 1), (2, [1], 1)], roots=[2])
    s = simplify(p, dominance=False)
    assert s.keep == [True, False, True, True, True]
    assert s.stats["necessary"] == 1
    assert not s.cyclic
    assert simplify(p, dominance=False, necessary=False).cyclic


def test_forced_classes_follow_common_children_of_the_root() -> None:
    p = make([(0, [], 1), (1, [0], 1), (1, [0], 2), (2, [1], 0), (2, [1, 0], 0)], roots=[2])
    assert simplify(p, dominance=False).forced == {0, 1, 2}


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_ilp_result_carries_a_proved_lower_bound(solver: str) -> None:
    r = extract(SHARED, solver=solver, time_limit=10)
    assert r.status == "optimal"
    assert r.cost == 5
    assert r.lower_bound == pytest.approx(5, rel=1e-6)
    assert r.gap == pytest.approx(0, abs=1e-6)
    assert r.build_seconds > 0
    out = r.to_json()
    assert {"cost", "lower_bound", "gap", "status", "build_seconds"} <= set(out)
    json.dumps(out)


def test_highs_proves_the_acyclic_optimum_on_a_cyclic_egraph() -> None:
    r = extract(CYCLIC, solver="highs", time_limit=10)
    assert r.status == "optimal", r
    assert r.cost == 5
    assert r.lower_bound == pytest.approx(5)


def test_highs_model_collapses_single_node_classes_and_common_children() -> None:
    m = HighsModel(SHARED, simplify(SHARED, dominance=False))
    # 6 node columns, y only for the two classes with two nodes.
    assert m.num_vars == 8
    # 2 class rows; R's two children are common to its only node (2 rows); a1, b1 (2 rows).
    assert m.num_rows == 6


def random_problem(rng: random.Random) -> ExtractionProblem:
    classes = rng.randint(2, 5)
    nodes = []
    for c in range(classes):
        for _ in range(rng.randint(1, 2)):
            kids = [rng.randrange(classes) for _ in range(rng.randint(0, 2))]
            nodes.append((c, kids, rng.choice([0, 1, 2, 3])))
    nodes.append((classes, [rng.randrange(classes)], 1))
    return make(nodes, roots=[classes])


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_bound_never_exceeds_the_optimum_and_optimal_means_proved(solver: str) -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(60):
        p = random_problem(rng)
        best = brute_force(p)
        if math.isinf(best):
            continue
        r = extract(p, solver=solver, time_limit=10)
        assert p.check_choice(r.choices) is None
        assert r.lower_bound is not None
        assert r.lower_bound <= best + 1e-9, (p, r)
        assert r.status == "optimal", (p, r)
        assert r.cost == pytest.approx(best), (p, r)
        checked += 1
    assert checked > 30


def test_simplification_keeps_an_optimum_on_random_egraphs() -> None:
    rng = random.Random(11)
    for _ in range(60):
        p = random_problem(rng)
        best = brute_force(p)
        if math.isinf(best):
            continue
        s = simplify(p)
        reduced = ExtractionProblem(
            node_op=p.node_op,
            node_eclass=p.node_eclass,
            node_children=p.node_children,
            node_cost=p.node_cost,
            num_classes=p.num_classes,
            roots=p.roots,
            forbidden=[not k for k in s.keep],
        )
        assert brute_force(reduced) == pytest.approx(best), p


def test_beam_finds_sharing_greedy_dag_misses() -> None:
    assert SHARED.dag_cost(greedy_dag(SHARED)) == 6
    r = extract(SHARED, extractor="beam", beam_width=2)
    assert r.cost == 5
    assert r.status == "greedy"
    assert r.lower_bound is None and r.gap is None
    assert SHARED.dag_cost(beam_dag(SHARED, 1)) == 6
    with pytest.raises(ValueError, match="beam_width"):
        extract(SHARED, extractor="beam", beam_width=0)


def test_beam_is_valid_and_never_worse_than_greedy_dag_on_random_egraphs() -> None:
    rng = random.Random(3)
    for _ in range(100):
        p = random_problem(rng)
        dag = greedy_dag(p)
        if not dag:
            continue
        beam = beam_dag(p, 3)
        assert p.check_choice(beam) is None
        assert beam == p.reachable(beam)
        assert p.dag_cost(beam) <= p.dag_cost(dag) + 1e-12


@pytest.mark.parametrize(
    ("path", "optimum"),
    egraphs(
        {n: fixture_optimum(n) for n in ("conv_pairs2_acyclic", "conv_pairs3_acyclic")},
        {"tensat_vgg_acyclic": None, "tensat_resnet50_acyclic": None},
    ),
)
def test_highs_proves_the_acyclic_files_optimal(path: Path, optimum: float | None) -> None:
    p = load_json(path)
    r = extract(p, solver="highs", time_limit=30)
    assert r.status == "optimal"
    assert r.gap is not None and r.gap <= 1e-6
    assert extract(p, extractor="beam").cost >= r.cost * (1 - 1e-9)
    if optimum is not None:
        assert r.cost == pytest.approx(optimum, rel=1e-9)


# ----------------------------------------------------------------------------- critical path
def test_the_critical_path_bound_never_exceeds_the_optimum_and_is_tight_on_a_chain() -> None:
    from tensat_py.extract.bounds import critical_path_bound
    from test_extract import random_problem

    rng = random.Random(11)
    for _ in range(40):
        p = random_problem(rng, rng.randint(2, 5))
        opt = brute_force(p)
        assert critical_path_bound(p) <= opt + 1e-12, p
    # A chain x -> f -> g (with a dearer alternative for f): the bound is the optimum.
    chain = make([(0, [], 1), (1, [0], 2), (1, [0], 5), (2, [1], 3)], roots=[2])
    assert critical_path_bound(chain) == brute_force(chain) == 6.0
    # Two branches: the bound is the cheapest dearest path (a leaf of cost 3 for either
    # branch), below the DAG cost that pays both branches.
    assert critical_path_bound(SHARED) == 3.0 < brute_force(SHARED) == 5.0


def test_a_forbidden_node_is_not_on_any_path() -> None:
    from tensat_py.extract.bounds import critical_path_bound

    chain = make([(0, [], 1), (1, [0], 2), (1, [0], 5), (2, [1], 3)], roots=[2], forbidden={1})
    assert critical_path_bound(chain) == 9.0  # only f's dearer node is allowed


def test_an_answer_meeting_the_critical_path_bound_is_proved_without_an_ilp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tensat_py.extract import ilp

    def no_ilp(*args, **kwargs):
        raise AssertionError("the ILP ran although the greedy answer was proved")

    monkeypatch.setattr(ilp, "solve_ilp", no_ilp)
    chain = make([(0, [], 1), (1, [0], 2), (1, [0], 5), (2, [1], 3)], roots=[2])
    r = extract(chain, solver="highs")
    assert r.status == "optimal" and r.cost == 6.0 and r.lower_bound == 6.0 and r.gap == 0.0
    assert "critical-path" in r.message


@pytest.mark.parametrize(
    ("path", "optimum"),
    # the reference optimum of tensat_vgg: CPLEX, 10 h
    egraphs({"conv_pairs3": fixture_optimum("conv_pairs3")}, {"tensat_vgg": 4.85076}),
)
def test_a_full_egraph_is_proved_optimal(path: Path, optimum: float) -> None:
    p = load_json(path)
    r = extract(p, solver="highs", time_limit=10)
    # (a gap of rounding noise, 1e-14, on the fixture's costs of order 1e-5 s)
    assert r.status == "optimal" and r.gap == pytest.approx(0.0, abs=1e-12)
    assert r.cost == pytest.approx(optimum, rel=1e-5)
