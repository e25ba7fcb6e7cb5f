"""Extraction split at dominator cuts (tensat_py.extract.decompose)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from extraction_helpers import make
from reference_data import fixture, fixture_optimum, param, shared
from tensat_py.egraph import ExtractionProblem, load_json
from tensat_py.extract import extract
from tensat_py.extract.decompose import decompose, immediate_dominators, piece_problem


def cyclic_egraphs() -> list:
    """``(path, optimum)``: our cyclic fixture e-graph (optimum computed without our
    extraction code) and, beside a development checkout, Tensat's ResNet-50 e-graph from
    ../shared/data/egraphs with CPLEX's 10 h optimum."""
    cases = [param(fixture("egraphs", "conv_pairs3.json"), fixture_optimum("conv_pairs3"))]
    if (path := shared("egraphs", "tensat_resnet50.json")) is not None:
        cases.append(param(path, 4.38579, source="shared"))
    return cases


def block(base: int, x_input: list[int]) -> list[tuple[int, list[int], float]]:
    """Classes base..base+3: X = x(input) 3; A = {a(X) 1 | 3}; B = {b(X) 1 | 3};
    O = r(A, B) 0. Greedy takes 3 + 3; sharing X costs 3 + 1 + 1."""
    x, a, b, o = base, base + 1, base + 2, base + 3
    return [
        (x, x_input, 3),
        (a, [x], 1),
        (a, [], 3),
        (b, [x], 1),
        (b, [], 3),
        (o, [a, b], 0),
    ]


def two_blocks(extra: list[tuple[int, list[int], float]] = ()) -> ExtractionProblem:
    """Block 1 (classes 0-3) feeds block 2 (classes 4-7); root 7."""
    return make(block(0, []) + block(4, [3]) + list(extra), roots=[7])


def test_blocks_in_a_chain_are_cut_apart() -> None:
    p = two_blocks()
    d = decompose(p, [True] * p.num_nodes, min_nodes=2)
    assert [q.root for q in d.pieces] == [3, None]
    assert sorted(d.pieces[0].classes) == [0, 1, 2, 3]
    assert d.pieces[1].leaves == [3]
    r = extract(p, solver="highs")
    # Block 2 from its leaves (3 + 3) is cheaper than block 1 plus block 2 shared (5 + 5).
    assert (r.status, r.cost, r.lower_bound) == ("optimal", 6.0, 6.0)
    assert 3 not in r.choices and r.stats["pieces"] > 1


def test_a_class_read_by_two_blocks_is_no_cut() -> None:
    # Block 2's root also reads block 1's class A: block 1's output no longer dominates it.
    p = two_blocks([(7, [3, 1], 0.5)])
    d = decompose(p, [True] * p.num_nodes, min_nodes=2)
    assert [q.root for q in d.pieces] == [None]


def test_shared_weights_do_not_block_a_cut() -> None:
    # A free leaf W (class 8) read by both blocks: trivial, its choice is fixed and free.
    p = make(block(0, [8]) + block(4, [3, 8]) + [(8, [], 0)], roots=[7])
    d = decompose(p, [True] * p.num_nodes, min_nodes=2)
    assert [q.root for q in d.pieces] == [3, None]
    assert d.trivial == {8: p.num_nodes - 1}


def test_a_child_the_parent_may_leave_out_is_priced() -> None:
    # Root R = {f(P) 0.5 | g(Q) 1}; P's block costs 10 and more, Q's 1: the optimum is g, Q.
    # Priced at 0, P would look cheaper to the root's piece.
    p = make(
        [
            (0, [], 10),  # P's only node... with a choice below it
            (1, [0], 1),
            (1, [0], 2),  # P = class 1
            (2, [], 1),
            (3, [2], 0),
            (3, [2], 0.5),  # Q = class 3
            (4, [1], 0.5),
            (4, [3], 1),  # R = class 4
        ],
        roots=[4],
    )
    d = decompose(p, [True] * p.num_nodes, min_nodes=2)
    assert {q.root for q in d.pieces} == {1, 3, None}
    r = extract(p, solver="highs")
    assert r.cost == 2.0 and r.status == "optimal"
    assert r.choices[4] == 7


def test_piece_problem_prices_its_leaves() -> None:
    p = two_blocks()
    d = decompose(p, [True] * p.num_nodes, min_nodes=2)
    sub, origin = piece_problem(p, d, d.pieces[1], {3: 5.0})
    leaf = origin.index(-1)
    assert sub.node_cost[leaf] == 5.0 and sub.node_children[leaf] == []
    assert sorted(i for i in origin if i >= 0) == list(range(6, 12))


def test_a_piece_meeting_its_critical_path_bound_needs_no_solver(monkeypatch) -> None:
    import tensat_py.extract.ilp as ilp

    # A chain piece, class 1 = {f(class 0 = x 1) 1 | g 2.5}, under block(2, [1]): its
    # greedy answer 2 is its critical path, so only the top piece (greedy 6, critical
    # path 3) needs HiGHS.
    p = make([(0, [], 1), (1, [0], 1), (1, [], 2.5)] + block(2, [1]), roots=[5])
    d = decompose(p, [True] * p.num_nodes, min_nodes=1)
    assert {q.root for q in d.pieces} == {0, 1, 2, None}
    assert [q.has_choice for q in d.pieces].count(True) == 2
    calls = []
    real = ilp._solve_highs
    monkeypatch.setattr(ilp, "_solve_highs", lambda *a, **k: calls.append(1) or real(*a, **k))
    counted = {}
    for path_bound in (True, False):
        calls.clear()
        r = extract(p, solver="highs", path_bound=path_bound)
        assert (r.status, r.cost) == ("optimal", 6.0)
        assert r.stats["pieces"] == 4
        assert r.stats["pieces_path_proved"] == (1 if path_bound else 0)
        counted[path_bound] = len(calls)
    assert counted == {True: 1, False: 2}


def random_blocks(rng: random.Random, blocks: int) -> ExtractionProblem:
    """A chain of small random blocks, each reading the previous block's output."""
    nodes: list[tuple[int, list[int], float]] = []
    prev: list[int] = []
    base = 0
    for _ in range(blocks):
        size = rng.randint(2, 5)
        classes = list(range(base, base + size))
        for c in classes:
            for _ in range(rng.randint(1, 2)):
                below = [d for d in classes if d < c]
                kids = rng.sample(below, k=min(len(below), rng.randint(0, 2)))
                nodes.append((c, kids + prev, rng.choice([0.0, 0.5, 1.0, 2.0, 3.0])))
        out = classes[-1]
        nodes.append((out, prev, 9.0))  # every block can be built
        prev = [out]
        base += size
    return make(nodes, roots=prev)


def test_decomposed_extraction_matches_the_whole_ilp() -> None:
    rng = random.Random(11)
    split_some = 0
    for _ in range(25):
        p = random_blocks(rng, rng.randint(2, 5))
        # path_bound=False: the ILP itself, whole and in pieces (the critical-path bound
        # alone proves some of these chains optimal).
        whole = extract(p, solver="highs", decompose=False, time_limit=20, path_bound=False)
        parts = extract(p, solver="highs", decompose=True, time_limit=20, path_bound=False)
        assert whole.status == parts.status == "optimal"
        assert parts.cost == pytest.approx(whole.cost)
        assert p.check_choice(parts.choices) is None
        assert parts.lower_bound == pytest.approx(parts.cost)
        split_some += parts.stats.get("pieces", 1) > 1
    assert split_some >= 10


@pytest.mark.parametrize(("path", "optimum"), cyclic_egraphs())
def test_a_cyclic_egraph_is_proved_optimal_piece_by_piece(path: Path, optimum: float) -> None:
    p = load_json(path)
    r = extract(p, solver="highs", time_limit=60)
    assert r.stats["pieces"] > 1
    assert r.status == "optimal"
    assert r.cost == pytest.approx(optimum, rel=1e-5)


def reach(succ: dict[int, list[int]], root: int, without: int | None = None) -> set[int]:
    seen, stack = {root}, [root]
    while stack:
        for w in succ.get(stack.pop(), ()):
            if w != without and w not in seen:
                seen.add(w)
                stack.append(w)
    return seen


def test_immediate_dominators_match_the_definition() -> None:
    # d dominates v when v cannot be reached from the root without d; idom(v) is the strict
    # dominator of v that every other strict dominator of v dominates.
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(1, 10)
        succ = {v: [rng.randrange(n) for _ in range(rng.randint(0, 3))] for v in range(n)}
        idom = immediate_dominators(succ, 0)
        live = reach(succ, 0)
        assert set(idom) == live and idom[0] == 0
        dom = {v: {d for d in live if d in (0, v) or v not in reach(succ, 0, d)} for v in live}
        for v in live - {0}:
            strict = dom[v] - {v}
            assert idom[v] in strict
            assert strict <= dom[idom[v]]


def test_building_a_piece_comes_out_of_its_time_limit(monkeypatch) -> None:
    from tensat_py.extract import decompose as pieces
    from tensat_py.extract.ilp import IlpOutcome

    p = two_blocks()
    d = decompose(p, [True] * p.num_nodes, min_nodes=2)
    build = pieces.piece_problem
    limits: list[float] = []

    def slow_build(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        time.sleep(0.3)
        return build(*args, **kwargs)

    def solve(sub: ExtractionProblem, limit: float, start: dict[int, int] | None) -> IlpOutcome:
        limits.append(limit)
        return IlpOutcome(None, "none", "not solved")

    monkeypatch.setattr(pieces, "piece_problem", slow_build)
    solved = pieces._solve_one(p, d, d.pieces[0], {}, solve, 5.0, None, path_proof=False)
    assert solved.choice is not None  # the piece's greedy start stands
    assert len(limits) == 1 and limits[0] <= 5.0 - 0.3


def test_a_cbc_piece_stopped_at_the_time_limit_keeps_its_greedy_answer(monkeypatch) -> None:
    import threading

    import tensat_py.extract.ilp as ilp

    monkeypatch.setattr(ilp, "CBC_PIECE_NODES", 1)
    real = ilp._solve_exact
    lock, stopped = threading.Lock(), []

    def first_stopped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        with lock:
            first = not stopped
            stopped.append(1)
        if first:  # one piece's CBC had no answer at its time limit
            raise ilp.SolverStopped("the solver process was stopped at the time limit")
        return real(*args, **kwargs)

    monkeypatch.setattr(ilp, "_solve_exact", first_stopped)
    p = two_blocks()
    r = extract(p, solver="cbc", time_limit=30, path_bound=False)
    # The other piece keeps its ILP answer; the extraction does not fall back as a whole.
    assert r.status == "feasible" and r.stats["pieces_greedy"] == 1, r
    assert r.cost == 6.0 and p.check_choice(r.choices) is None
    assert "kept their greedy DAG" in r.message and "had no answer" in r.message
