"""Extraction: greedy tree, greedy DAG (Rust) and the ILP (PuLP, CBC / HiGHS)."""

from __future__ import annotations

import math
import random
import time
from pathlib import Path

import pytest
from extraction_helpers import brute_force, make
from reference_data import fixture, fixture_optimum, param, shared
from tensat_py.egraph import ExtractionProblem, load_json
from tensat_py.extract import extract
from tensat_py.extract.ilp import prune

# Reference optimum (CPLEX, 10 h; SmoothE artifact) of Tensat's full e-graphs in
# ../shared/data/egraphs (beside a development checkout only).
OPTIMUM = {"tensat_vgg": 4.85076, "tensat_resnet50": 4.38579, "tensat_bert": 0.70472}


def assert_valid(p: ExtractionProblem, r) -> None:
    assert p.check_choice(r.choices) is None, r
    assert r.choices == p.reachable(r.choices)
    assert r.cost == pytest.approx(p.dag_cost(r.choices), abs=1e-12)


# X cost 3; A = {a1(X) 1 | a2 3}; B = {b1(X) 1 | b2 3}; root R = r(A, B).
# Greedy (tree and DAG) picks a2, b2: 6. Optimum shares X: 3 + 1 + 1 = 5.
SHARED = make(
    [(0, [], 3), (1, [0], 1), (1, [], 3), (2, [0], 1), (2, [], 3), (3, [1, 2], 0)], roots=[3]
)

# A = {a leaf 5 | f(B) 0}; B = {g(A) 0 | b leaf 4}; root R = h(A) 1. Choosing f and g is a
# zero-cost cycle (objective 1 without acyclicity); the optimum is h, f, b = 5.
CYCLIC = make([(0, [], 5), (0, [1], 0), (1, [0], 0), (1, [], 4), (2, [0], 1)], roots=[2])


def test_greedy_on_shared() -> None:
    for ex in ("greedy", "greedy-dag"):
        r = extract(SHARED, extractor=ex)
        assert r.status == "greedy"
        assert r.cost == 6
        assert_valid(SHARED, r)


@pytest.mark.parametrize("solver", ["cbc", "highs"])
@pytest.mark.parametrize("mode", ["lazy", "order"])
def test_ilp_beats_greedy_on_shared(solver: str, mode: str) -> None:
    r = extract(SHARED, solver=solver, cycle_constraints=mode, time_limit=10)
    assert r.status == "optimal", r
    assert r.cost == 5
    assert r.choices == {3: 5, 1: 1, 2: 3, 0: 0}
    assert_valid(SHARED, r)


@pytest.mark.parametrize("solver", ["cbc", "highs"])
@pytest.mark.parametrize(
    ("mode", "order_vars"), [("lazy", "real"), ("order", "real"), ("order", "int")]
)
def test_ilp_cyclic(solver: str, mode: str, order_vars: str) -> None:
    r = extract(CYCLIC, solver=solver, cycle_constraints=mode, order_vars=order_vars, time_limit=10)
    assert r.status == "optimal", r
    assert r.cost == 5
    assert r.choices == {2: 4, 0: 1, 1: 3}
    assert_valid(CYCLIC, r)


@pytest.mark.parametrize("mode", ["lazy", "order"])
def test_highs_ilp_without_a_warm_start_solves(mode: str) -> None:
    from tensat_py.extract.ilp import solve_ilp

    # path_bound=False: the solver itself (the critical-path bound proves a piece of it).
    out = solve_ilp(CYCLIC, solver="highs", cycle_constraints=mode, time_limit=10, path_bound=False)
    assert out.rounds >= 1, out.message
    assert out.status == "optimal" and out.choices == {2: 4, 0: 1, 1: 3}


def test_a_failing_cbc_falls_back_and_leaves_no_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    import pulp

    # A CBC binary that exits with an error: PuLP raises before deleting its files.
    monkeypatch.setattr(pulp.PULP_CBC_CMD, "pulp_cbc_path", "/bin/false")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    r = extract(SHARED, solver="cbc", time_limit=10, decompose=False)
    assert r.status == "fallback-greedy", r
    assert "cbc failed" in r.message
    # one line in our terms: not PuLP's advice to its own users or the binary's path
    assert "exited with an error" in r.message and "msg=True" not in r.message
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def slow_cbc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A "CBC" that ignores its time limit (as CBC 2.10 did while it processed a MIP start)."""
    import pulp

    slow = tmp_path / "slow-cbc"
    slow.write_text("#!/bin/sh\nsleep 20\n")
    slow.chmod(0o755)
    monkeypatch.setattr(pulp.PULP_CBC_CMD, "pulp_cbc_path", str(slow))


@pytest.mark.usefixtures("slow_cbc")
def test_a_cbc_running_past_the_time_limit_is_stopped() -> None:
    t0 = time.perf_counter()
    r = extract(SHARED, solver="cbc", time_limit=2, decompose=False, path_bound=False)
    assert time.perf_counter() - t0 < 8
    assert r.status == "fallback-greedy" and r.cost == 6, r
    assert "had no answer at the time limit and was stopped" in r.message


def tiny_lp():  # noqa: ANN201
    """A one-variable PuLP problem (minimise x, x binary)."""
    import pulp

    lp = pulp.LpProblem("tiny", pulp.LpMinimize)
    x = lp.add_variable("x", 0, 1, cat=pulp.LpBinary)
    lp += x
    lp += x >= 0
    return lp


@pytest.mark.usefixtures("slow_cbc")
def test_a_cbc_started_after_the_deadline_is_stopped_too() -> None:
    # PuLP may still be writing the model when the deadline comes and start CBC after it.
    from tensat_py.extract.ilp import SolverStopped, _run, _solver

    t0 = time.perf_counter()
    with pytest.raises(SolverStopped, match="stopped at the time limit"):
        _run(tiny_lp(), _solver("cbc", 30.0), deadline=time.perf_counter() - 1.0)
    assert time.perf_counter() - t0 < 8


def test_ilp_without_cycle_constraints_falls_back_or_is_acyclic() -> None:
    r = extract(
        CYCLIC,
        solver="cbc",
        cycle_constraints="none",
        time_limit=10,
        decompose=False,
        path_bound=False,
    )
    assert_valid(CYCLIC, r)
    assert r.status in ("optimal", "fallback-greedy")
    # Split at dominator cuts, the cyclic piece alone keeps its greedy DAG.
    r = extract(
        CYCLIC,
        solver="highs",
        cycle_constraints="none",
        time_limit=10,
        decompose=True,
        path_bound=False,  # the ILP itself (the critical-path bound proves greedy here)
    )
    assert_valid(CYCLIC, r)
    assert r.stats["pieces"] > 1 and r.cost == 5
    assert r.cost == 5  # greedy finds the optimum here


def test_forbidden_nodes_are_never_chosen() -> None:
    p = make([(0, [], 5), (0, [1], 0), (1, [0], 0), (1, [], 4), (2, [0], 1)], [2], forbidden={3})
    for ex in ("greedy", "greedy-dag", "ilp"):
        r = extract(p, extractor=ex, time_limit=10)
        assert r.choices == {2: 4, 0: 0}, ex
        assert r.cost == 6


def test_unbuildable_root_raises() -> None:
    p = make([(0, [], 1), (1, [0], 1)], roots=[1], forbidden={0})
    for ex in ("greedy", "greedy-dag", "ilp"):
        with pytest.raises(ValueError, match="cannot be built"):
            extract(p, extractor=ex)


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="unknown extractor"):
        extract(SHARED, extractor="magic")
    with pytest.raises(ValueError, match="unknown solver"):
        extract(SHARED, solver="gurobi")
    with pytest.raises(ValueError, match="cycle_constraints"):
        extract(SHARED, cycle_constraints="eager")


def test_prune_drops_self_loops_forbidden_and_unreachable() -> None:
    # class 0 leaf; class 1 = {s(1) self loop, t(0)}; class 2 unreachable; class 3 = {u(4)}
    # where class 4 only has a forbidden node; root class 5 = {r(1), v(3)}.
    p = make(
        [
            (0, [], 1),
            (1, [1], 0),
            (1, [0], 1),
            (2, [], 1),
            (3, [4], 1),
            (4, [], 1),
            (5, [1], 0),
            (5, [3], 0),
        ],
        roots=[5],
        forbidden={5},
    )
    assert prune(p) == [True, False, True, False, False, False, True, False]


def random_problem(rng: random.Random, classes: int) -> ExtractionProblem:
    nodes = [(c, [], rng.choice([0.0, 0.5, 1.0, 2.0])) for c in range(classes)]
    nodes = []
    for c in range(classes):
        for _ in range(rng.randint(1, 2)):
            kids = [rng.randrange(classes) for _ in range(rng.randint(0, 2))]
            nodes.append((c, kids, rng.choice([0.0, 0.5, 1.0, 2.0, 3.0])))
    nodes.append((classes - 1, [], 9.0))  # the root can always be built
    forbidden = {i for i in range(len(nodes) - 1) if rng.random() < 0.1}
    return make(nodes, roots=[classes - 1], forbidden=forbidden)


def test_random_small_against_brute_force() -> None:
    rng = random.Random(7)
    for _ in range(12):
        p = random_problem(rng, rng.randint(2, 5))
        opt = brute_force(p)
        dag = extract(p, extractor="greedy-dag")
        tree = extract(p, extractor="greedy")
        assert_valid(p, dag)
        assert_valid(p, tree)
        assert dag.cost <= tree.cost + 1e-12
        for mode in ("lazy", "order"):
            r = extract(p, cycle_constraints=mode, time_limit=10)
            assert_valid(p, r)
            assert r.cost == pytest.approx(opt), (mode, r, p)
            assert r.cost <= dag.cost + 1e-12


def test_dag_cost_pays_a_shared_node_once() -> None:
    # SHARED: r(A, B) with a1(X), b1(X): X is paid once (3 + 1 + 1 + 0).
    assert SHARED.dag_cost({0: 0, 1: 1, 2: 3, 3: 5}) == 5.0
    assert SHARED.dag_cost({1: 2, 2: 4, 3: 5}) == 6.0
    # Classes not reached from the root do not count.
    assert SHARED.dag_cost({0: 0, 1: 2, 2: 4, 3: 5}) == 6.0


def test_dag_cost_is_infinite_when_a_reached_class_has_no_choice() -> None:
    assert math.isinf(SHARED.dag_cost({1: 1, 2: 4, 3: 5}))
    assert math.isinf(SHARED.dag_cost({}))


def test_dag_cost_rejects_ids_out_of_range() -> None:
    with pytest.raises(ValueError, match="class 9"):
        SHARED.dag_cost({9: 0})
    with pytest.raises(ValueError, match="class 3: 17 is not a node id"):
        SHARED.dag_cost({3: 17})


def egraph_cases(fixtures: list[str], reference: list[str]) -> list:
    """Parameters ``(path, full optimum, own optimum or None)``: our fixture e-graphs
    (tests/fixtures/egraphs, optima computed without our extraction code) and, beside a
    development checkout, Tensat's reference e-graphs (the CPLEX optimum of the full
    e-graph; an ``_acyclic`` file's own optimum is not published)."""
    cases = []
    for name in fixtures:
        full = fixture_optimum(name.removesuffix("_acyclic"))
        cases.append(param(fixture("egraphs", f"{name}.json"), full, fixture_optimum(name)))
    for name in reference:
        path = shared("egraphs", f"{name}.json")
        if path is not None:
            own = OPTIMUM.get(name)
            cases.append(param(path, OPTIMUM[name.removesuffix("_acyclic")], own, source="shared"))
    return cases


@pytest.mark.parametrize(
    ("path", "full", "own"),
    egraph_cases(
        ["matmul_pair", "conv_pairs2_acyclic", "conv_pairs3_acyclic"],
        ["tensat_vgg_acyclic", "tensat_resnet50_acyclic"],
    ),
)
@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_real_acyclic_files(path: Path, full: float, own: float | None, solver: str) -> None:
    p = load_json(path)
    dag = extract(p, extractor="greedy-dag")
    assert_valid(p, dag)
    r = extract(p, solver=solver, time_limit=20)
    assert_valid(p, r)
    assert r.status == "optimal", r
    assert r.cost <= dag.cost + 1e-9
    assert r.cost >= full * (1 - 1e-5)  # a filtered e-graph cannot beat the full optimum
    if own is not None:  # our fixtures: the optimum, which greedy misses
        assert r.cost == pytest.approx(own, rel=1e-9)
        assert dag.cost > own * (1 + 1e-3)


@pytest.mark.parametrize(
    ("path", "full", "own"),
    egraph_cases(
        ["matmul_pair", "conv_pairs2", "conv_pairs3"],
        ["tensat_vgg", "tensat_resnet50", "tensat_bert"],
    ),
)
def test_real_full_files_greedy(path: Path, full: float, own: float | None) -> None:
    p = load_json(path)
    tree = extract(p, extractor="greedy")
    dag = extract(p, extractor="greedy-dag")
    for r in (tree, dag):
        assert_valid(p, r)
        assert r.cost >= full * (1 - 1e-5)
    assert dag.cost <= tree.cost + 1e-12


def test_the_fixture_optimum_of_a_tiny_egraph_is_the_brute_force_one() -> None:
    # The ILP's optimum on our smallest dumped e-graph, against trying every choice.
    p = load_json(fixture("egraphs", "matmul_pair.json"))
    opt = brute_force(p)
    assert opt == pytest.approx(fixture_optimum("matmul_pair"), rel=1e-12)
    for solver in ("cbc", "highs"):
        for mode in ("lazy", "order"):
            r = extract(p, solver=solver, cycle_constraints=mode, time_limit=10)
            assert r.status == "optimal" and r.cost == pytest.approx(opt, rel=1e-12), r
            assert_valid(p, r)
    assert extract(p, extractor="greedy-dag").cost > opt * 1.5  # greedy keeps both matmuls


def test_a_cyclic_fixture_needs_the_cycle_constraints() -> None:
    # Without cycle constraints the ILP's answer closes a cycle (merge, split, concat): it
    # is refused, and what comes back is an acyclic choice short of the optimum; with the
    # constraints the ILP reaches the optimum.
    p = load_json(fixture("egraphs", "conv_pairs2.json"))
    opt = fixture_optimum("conv_pairs2")
    loose = extract(p, cycle_constraints="none", decompose=False, path_bound=False, time_limit=20)
    assert loose.status != "optimal" and "cyclic" in loose.message, loose
    assert_valid(p, loose)
    assert loose.cost > opt * (1 + 1e-3)
    for mode in ("lazy", "order"):
        r = extract(p, cycle_constraints=mode, decompose=False, path_bound=False, time_limit=20)
        assert r.status == "optimal", r
        assert r.cost == pytest.approx(opt, rel=1e-9)
        assert_valid(p, r)


def test_the_greedy_start_comes_out_of_the_ilp_budget(monkeypatch) -> None:
    import tensat_py.extract as extraction
    from tensat_py.extract import ilp

    greedy_dag = extraction.greedy_dag
    budgets: list[float] = []
    solve_ilp = ilp.solve_ilp

    def slow_greedy(problem: ExtractionProblem) -> dict[int, int]:
        time.sleep(0.3)
        return greedy_dag(problem)

    def recorded(problem: ExtractionProblem, **kwargs) -> ilp.IlpOutcome:  # noqa: ANN003
        budgets.append(kwargs["time_limit"])
        return solve_ilp(problem, **kwargs)

    monkeypatch.setattr(extraction, "greedy_dag", slow_greedy)
    monkeypatch.setattr(ilp, "solve_ilp", recorded)
    r = extract(SHARED, solver="highs", time_limit=5)
    assert r.cost == 5
    assert budgets[0] <= 5 - 0.3  # the first call: the whole problem (then its pieces)


def test_a_cbc_solve_with_no_time_left_builds_no_model(monkeypatch) -> None:
    import tensat_py.extract.ilp as ilp

    def unexpected(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a PuLP model was built with no time left")

    monkeypatch.setattr(ilp, "_solve_exact", unexpected)
    out = ilp.solve_ilp(SHARED, solver="cbc", time_limit=0.01, decompose=False)
    assert out.choices is None and "time limit reached" in out.message


@pytest.mark.usefixtures("slow_cbc")
def test_a_cbc_run_says_when_its_process_has_started() -> None:
    import threading

    from tensat_py.extract.ilp import SolverStopped, _run, _solver

    lp = tiny_lp()
    started, errors = threading.Event(), []

    def run() -> None:
        try:
            _run(lp, _solver("cbc", 30.0), deadline=time.perf_counter() + 4, started=started)
        except SolverStopped as e:
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    # Seen while the (sleeping) process runs, long before the deadline stops it.
    assert started.wait(3) and thread.is_alive()
    thread.join()
    assert errors  # stopped at the deadline


def test_the_ilp_keeps_time_back_for_reading_its_answer(monkeypatch) -> None:
    import tensat_py.extract as extraction
    from tensat_py.extract import ilp

    given: list[float] = []
    real = ilp.solve_ilp

    def spy(problem, **kw):  # noqa: ANN001, ANN003, ANN202
        given.append(kw["time_limit"])
        return real(problem, **kw)

    monkeypatch.setattr(ilp, "solve_ilp", spy)
    monkeypatch.setattr(extraction, "FINISH_SECONDS_PER_NODE", 0.1)
    extraction.extract(SHARED, solver="highs", time_limit=5.0, path_bound=False)
    assert given and given[0] <= 5.0 - 0.1 * SHARED.num_nodes


# SHARED's optimum: X shared by a1 and b1 (3 + 1 + 1 + 0).
SHARED_OPTIMUM = {0: 0, 1: 1, 2: 3, 3: 5}


def solve_cbc(start: dict[int, int]):  # noqa: ANN201
    from tensat_py.extract.ilp import _solve_exact

    return _solve_exact(
        SHARED,
        solver="cbc",
        time_limit=10,
        cycle_constraints="lazy",
        order_vars="real",
        warm_start=start,
    )


def test_cbc_searches_below_the_start_cost_and_finds_the_optimum() -> None:
    greedy = extract(SHARED, extractor="greedy-dag").choices
    r = solve_cbc(greedy)
    assert r.status == "optimal" and SHARED.dag_cost(r.choices) == 5, r


def test_cbc_proving_nothing_under_the_cutoff_returns_the_start_as_optimal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tensat_py.extract import ilp

    # The cutoff a hair below the optimal start: CBC must prove that nothing is cheaper.
    monkeypatch.setattr(ilp, "CUTOFF_SLACK", -1e-6)
    r = solve_cbc(SHARED_OPTIMUM)
    assert r.status == "optimal" and "none cheaper exists" in r.message, r
    assert r.choices == SHARED_OPTIMUM


PREPROCESSING_SAYS_INFEASIBLE = (
    "seconds was changed from 1e+100 to {limit}\n"
    "Cgl0000I Cut generators found to be infeasible! (or unbounded)\n"
    "Pre-processing says infeasible or unbounded\n"
    "Total time (CPU seconds):       1.22   (Wallclock seconds):       1.33\n"
)


@pytest.mark.parametrize(
    ("log", "solution", "status"),
    [
        # CBC 2.10.3 when its time limit strikes in preprocessing: "infeasible", no proof.
        (
            PREPROCESSING_SAYS_INFEASIBLE.format(limit=1),
            "Integer infeasible - objective 1",
            "feasible",
        ),
        # The same well before the limit: a proof.
        (
            PREPROCESSING_SAYS_INFEASIBLE.format(limit=9.5),
            "Integer infeasible - objective 1",
            "optimal",
        ),
        ("Result - Stopped on time limit\n", "Stopped on time (no integer solution)", "feasible"),
        ("Result - Problem proven infeasible\n", "Infeasible - objective value 1.0", "optimal"),
        ("Problem is infeasible - 0.00 seconds\n", "Infeasible - objective value 1.0", "optimal"),
    ],
)
def test_cbc_without_an_answer_under_the_cutoff_keeps_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: str, solution: str, status: str
) -> None:
    import pulp

    fake = tmp_path / "fake-cbc"
    fake.write_text(
        "#!/bin/sh\n"
        'while [ $# -gt 0 ]; do [ "$1" = -solution ] && out="$2"; shift; done\n'
        f"echo '{solution}' > \"$out\"\nprintf '{log}'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(pulp.PULP_CBC_CMD, "pulp_cbc_path", str(fake))
    greedy = extract(SHARED, extractor="greedy-dag").choices
    r = solve_cbc(greedy)
    assert r.status == status and r.choices == SHARED.reachable(greedy), r


def test_a_start_outside_the_model_sets_no_cutoff() -> None:
    # a1 forbidden: the start that uses it is no answer here, and its cost (5) is below
    # the restricted optimum (a2 + b2 = 6); as a cutoff it would make CBC find nothing.
    from tensat_py.extract.ilp import _solve_exact

    restricted = make(
        [(0, [], 3), (1, [0], 1), (1, [], 3), (2, [0], 1), (2, [], 3), (3, [1, 2], 0)],
        roots=[3],
        forbidden={1},
    )
    r = _solve_exact(
        restricted,
        solver="cbc",
        time_limit=10,
        cycle_constraints="lazy",
        order_vars="real",
        warm_start=SHARED_OPTIMUM,
    )
    assert r.status == "optimal" and restricted.dag_cost(r.choices) == 6, r
    assert 1 not in r.choices.values()


def test_cbc_stopped_short_reports_its_own_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CBC's "best possible" is in the scaled unit (SHARED: the costliest node, 3, costs 1).
    import pulp

    fake = tmp_path / "fake-cbc"
    fake.write_text(
        "#!/bin/sh\n"
        'while [ $# -gt 0 ]; do [ "$1" = -solution ] && out="$2"; shift; done\n'
        "echo 'Stopped on time (no integer solution - continuous used) - objective value 1'"
        ' > "$out"\n'
        "echo 'Cbc0005I Partial search - best objective 1e+50 (best possible 1.5), took 0'\n"
        "echo 'Result - Stopped on time limit'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(pulp.PULP_CBC_CMD, "pulp_cbc_path", str(fake))
    r = solve_cbc(SHARED_OPTIMUM)
    assert r.status == "feasible" and r.choices == SHARED_OPTIMUM, r
    assert r.lower_bound == pytest.approx(4.5)


def test_best_possible_reads_the_last_bound_and_ignores_none() -> None:
    from tensat_py.extract.ilp import _best_possible

    log = "(best possible 2.7342665), took\n(best possible 2.7647871), took 651\n"
    assert _best_possible(log) == pytest.approx(2.7647871)
    assert _best_possible("best objective 1e+50 (best possible 1e+50)") is None
    assert _best_possible("Result - Optimal solution found") is None
