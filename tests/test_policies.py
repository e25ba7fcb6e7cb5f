"""Rule-choice policies (issue 16): the Rust hooks, the default policy, RuleSubset, one-step
term rewriting, A*, and optimize(policy=...). Tests of the learned parts and the Gymnasium
environment need the ``learn`` extra and skip, with the reason, without it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import tensat_py
from click.testing import CliRunner
from reference_data import fixture, param, shared
from tensat_py import _core, models
from tensat_py.builder import GraphBuilder
from tensat_py.cli import main
from tensat_py.pipeline import load_rules
from tensat_py.policies import DefaultPolicy, RuleSubset, best_program, get_policy
from tensat_py.policies import astar as A

HAVE_LGB = importlib.util.find_spec("lightgbm") is not None
HAVE_GYM = importlib.util.find_spec("gymnasium") is not None
needs_lgb = pytest.mark.skipif(
    not HAVE_LGB, reason="lightgbm not installed (pip install 'tensat-py[learn]')"
)
needs_gym = pytest.mark.skipif(
    not HAVE_GYM, reason="gymnasium not installed (pip install 'tensat-py[learn]')"
)
# RLO's value data set (../shared/data/rlo, beside a development checkout only) and our own
# points in its layout (tests/fixtures/rlo).
RLO_VALUES = shared("rlo", "value_dataset.json")
KS_RULES = "knossos_simplify+knossos_binding"


def _matmul_pair() -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((64, 256), name="x")
    q = b.matmul(x, b.weight((256, 256), name="wq"))
    k = b.matmul(x, b.weight((256, 256), name="wk"))
    return b.finish([b.relu(b.ewadd(q, k))])


@pytest.mark.parametrize("name", sorted(models.ZOO))
def test_default_policy_explores_the_zoo_exactly_as_no_policy(name: str) -> None:
    g = models.get(name)
    opts = dict(extractor="greedy-dag", verify=False, k_multi=1)
    plain = tensat_py.optimize(g, **opts)
    for policy in ("default", DefaultPolicy()):
        got = tensat_py.optimize(g, policy=policy, **opts)
        for key in ("enodes", "eclasses", "iterations", "stop_reason", "filtered_enodes"):
            assert got.stats[key] == plain.stats[key], (policy, key)
        assert got.cost_after == plain.cost_after


def test_rule_subset_applies_only_the_chosen_rules_matches() -> None:
    rules = load_rules("taso")
    names = rules.names()
    eg = _core.EGraph(_matmul_pair().to_flat())
    before = eg.match_counts(rules, True)
    comm = names.index(next(n for n in names if before[names.index(n)] > 0))
    pol = RuleSubset([comm])
    st = eg.saturate(rules, iter_limit=1, policy=pol)
    assert st["applied"] == before[comm]
    assert pol.found[comm] == before[comm]
    assert eg.iterations_done() == 1


def test_match_counts_counts_multi_pattern_matches_only_when_asked() -> None:
    rules = load_rules("taso")
    eg = _core.EGraph(_matmul_pair().to_flat())
    multi = eg.match_counts(rules, True)
    single = eg.match_counts(rules, False)
    multi_rules = [i for i, (_, s, _, _) in enumerate(rules.describe()) if len(s) > 1]
    assert sum(multi[i] for i in multi_rules) > 0
    assert all(single[i] == 0 for i in multi_rules)
    assert eg.size() == _core.EGraph(_matmul_pair().to_flat()).size()


def test_policy_select_errors_surface_after_exploration() -> None:
    class Broken:
        def selects(self, it: int) -> bool:
            return True

        def select(self, view: dict) -> list[bool]:
            raise RuntimeError("policy failed")

    eg = _core.EGraph(_matmul_pair().to_flat())
    with pytest.raises(RuntimeError, match="policy failed"):
        eg.saturate(load_rules("taso"), policy=Broken())


def test_policy_select_with_the_wrong_number_of_flags_is_an_error() -> None:
    class Short:
        def selects(self, it: int) -> bool:
            return True

        def select(self, view: dict) -> list[bool]:
            return [True]

    eg = _core.EGraph(_matmul_pair().to_flat())
    with pytest.raises(ValueError, match="flags for"):
        eg.saturate(load_rules("taso"), policy=Short())


def test_policy_view_carries_matches_and_the_export_on_request() -> None:
    seen: list[dict] = []

    class Spy:
        def selects(self, it: int) -> bool:
            return it == 0

        def wants_export(self, it: int) -> bool:
            return True

        def select(self, view: dict) -> None:
            seen.append(view)
            return None

    eg = _core.EGraph(_matmul_pair().to_flat())
    eg.saturate(load_rules("taso"), iter_limit=2, policy=Spy())
    assert len(seen) == 1
    v = seen[0]
    assert len(v["rules"]) == len(v["classes"]) == len(v["substs"]) == len(v["new_nodes"]) > 0
    assert all(n >= -1 for n in v["new_nodes"]) and max(v["new_nodes"]) > 0
    ids = set(v["export"]["class_id"])
    assert all(c in ids for cs in v["classes"] for c in cs)
    cost, used = best_program(v["export"], [1.0] * len(v["export"]["node_op"]))
    assert cost > 0 and v["export"]["root"] in used


def test_rewrites_lists_one_step_results_of_a_knossos_term() -> None:
    term = A.parse_rlo("(div (mul 1.0 x) x)")
    rules = load_rules(KS_RULES)
    names = rules.names()
    out = A.successors(term, rules)
    by_rule = {names[r]: A.term_text(t) for r, _, t in out}
    assert by_rule["mul_one"] == "(div (var x Float) (var x Float))"
    assert A.rlo_cost(term) == 4.0
    assert min(A.rlo_cost(t) for _, _, t in out) == 2.0


def test_astar_untrained_reaches_equality_saturations_cost_on_a_small_term() -> None:
    term = A.parse_rlo("(add (mul 1.0 x) (let (var0 1.0) (div (mul 1.0 x) x)))")
    rules = load_rules(KS_RULES)
    eq = A.eqsat_cost(term, rules)
    res = A.astar(term, rules, A.rlo_cost, A.ZeroValue(), depth=8, budget=3000)
    assert res.start_cost == pytest.approx(7.1)
    assert res.best_cost == pytest.approx(eq) == pytest.approx(1.0)
    assert res.evaluations_to_best <= res.evaluations <= 3000
    assert A.rlo_cost(res.best) == res.best_cost


def test_trace_targets_are_best_reductions_within_t_steps() -> None:
    term = A.parse_rlo("(div (mul 1.0 x) x)")
    rules = load_rules(KS_RULES)
    got = {t: v for s, t, v in A.trace_targets(term, rules, A.rlo_cost, depth=2) if s == term}
    assert got[1] == pytest.approx(2.0)  # mul_one: 4 -> 2
    assert got[2] == pytest.approx(4.0)  # then div_by_self: -> 0


def test_term_features_have_a_fixed_size() -> None:
    a = A.term_features(A.parse_rlo("(add x 1.0)"), 3, 1.0)
    b = A.term_features(A.parse_rlo("(let (v (mul x x)) (add v (exp y)))"), 1, 6.1)
    assert a.shape == b.shape == (len(A.FEATURE_NAMES),)
    assert b[5] == 0 and a[0] == 3


@pytest.mark.parametrize(
    ("path", "points"),
    [param(fixture("rlo", "value_points.json"), 8)]
    + ([param(RLO_VALUES, 6519, source="shared")] if RLO_VALUES else []),
)
def test_every_value_dataset_expression_parses_and_prices(path: Path, points: int) -> None:
    data = A.load_value_dataset(path)
    assert len(data) == points
    for e in sorted({e for _, e, _ in data})[:200]:
        assert A.rlo_cost(A.parse_rlo(e)) > 0


# Our value points' RLO costs, worked out by hand (add/sub 1, mul/div 2, exp/log 4, let 0.1).
HAND_COSTS = {
    "(let (v (add x 1.0)) v)": 0.1 + 1,
    "(mul x 1.0)": 2.0,
    "(add (div x x) y)": 1 + 2.0,
    "(let (a (mul x y)) (add a a))": 0.1 + 2 + 1,
    "(sub x x)": 1.0,
    "(log (add (exp x) (exp y)))": 4 + 1 + 4 + 4.0,
    "(div (let (w (mul x x)) (add w 1.0)) x)": 2 + 0.1 + 2 + 1.0,
}


def test_value_points_load_with_their_fields_and_price_as_worked_out_by_hand() -> None:
    data = A.load_value_dataset(fixture("rlo", "value_points.json"))
    assert data[0] == (1, "(let (v (add x 1.0)) v)", 0.0)
    assert {e for _, e, _ in data} == set(HAND_COSTS)
    for time_left, e, target in data:
        cost = A.rlo_cost(A.parse_rlo(e))
        assert cost == pytest.approx(HAND_COSTS[e]), e
        assert time_left >= 1 and 0.0 <= target <= cost  # a reduction, at most the cost


@needs_lgb
def test_shipped_value_function_predicts_reductions_within_cost() -> None:
    v = A.LearnedValue.load()
    term = A.parse_rlo("(div (mul 1.0 x) x)")
    raw = v.predict_features(np.stack([A.term_features(term, t, 4.0) for t in (1, 2)]))
    assert 0.0 <= raw[0] <= 4.0 and 0.0 <= raw[1] <= 4.0
    assert raw[1] > 1.0  # two steps reach 0 from 4
    # A* gets the discounted estimate (weighted A*).
    assert 0.0 < v.discount < 1.0
    p = v.predict([term, term], [1, 2], [4.0, 4.0])
    np.testing.assert_allclose(p, v.discount * raw)


@needs_lgb
@pytest.mark.parametrize("name", ["squeezenet", "vgg19"])
def test_learned_policy_is_never_worse_than_the_default(name: str) -> None:
    g = models.get(name)
    opts = dict(extractor="greedy-dag", verify=False)
    base = tensat_py.optimize(g, **opts)
    got = tensat_py.optimize(g, policy="learned", **opts)
    assert got.cost_after <= base.cost_after
    assert got.stats["policy"] == "learned"
    assert isinstance(got.stats["policy_fallback"], bool)
    assert got.stats["policy_offered"] >= got.stats["policy_admitted"] >= 0


@needs_lgb
def test_learned_policy_worse_than_the_default_falls_back_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tensat_py.policies import staged

    class ApplyNothing(staged.StagedMultiPolicy):
        def select(self, view: dict) -> list[bool]:
            return [False] * len(view["rules"])

    monkeypatch.setattr(
        staged.StagedMultiPolicy, "load", classmethod(lambda cls: ApplyNothing(None))
    )
    g = _matmul_triple_outputs()
    opts = dict(solver="highs", verify=False)
    base = tensat_py.optimize(g, k_multi=1, **opts)  # the learned policy's first stage
    got = tensat_py.optimize(g, policy="learned", **opts)
    assert base.cost_after < base.cost_before
    assert got.stats["policy_fallback"] is True
    assert got.cost_after == base.cost_after
    assert "kept the default" in got.message


@needs_lgb
def test_get_policy_learned_is_the_second_stages_policy() -> None:
    from tensat_py.policies.staged import StagedMultiPolicy

    pol = get_policy("learned")
    assert isinstance(pol, StagedMultiPolicy) and pol.model is not None


@needs_lgb
def test_in_window_policy_searches_multi_pattern_rules_one_iteration_past_k_multi() -> None:
    from tensat_py.policies.multi import LearnedMultiPolicy

    pol = LearnedMultiPolicy.load().bind(load_rules("taso"), None, 1)
    assert [pol.search_multi(i, 1) for i in range(4)] == [True, True, False, False]
    assert [pol.selects(i) for i in range(3)] == [False, True, False]


def _matmul_triple_outputs() -> tensat_py.Graph:
    """Three projections of one input, each an output: k_multi=1 merges two of them,
    k_multi=2 all three."""
    b = GraphBuilder()
    x = b.input((64, 256), name="x")
    return b.finish([b.matmul(x, b.weight((256, 256), name=n)) for n in ("wq", "wk", "wv")])


def _matmul_triple() -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((64, 256), name="x")
    q, k, v = (b.matmul(x, b.weight((256, 256), name=n)) for n in ("wq", "wk", "wv"))
    return b.finish([b.relu(b.ewadd(b.ewadd(q, k), v))])


def test_match_features_mark_merges_of_merges_and_operands_already_merged() -> None:
    from tensat_py.cost import get_cost_model
    from tensat_py.policies.multi import FEATURES, RecordingPolicy

    rules = load_rules("taso")
    cm = get_cost_model("roofline", "t4")
    rec = RecordingPolicy(rules, cm, record_from=0)
    eg = _core.EGraph(_matmul_triple().to_flat())
    eg.saturate(rules, k_multi=2, iter_limit=2, policy=rec)
    first, second = rec.rows
    merged, overlap = FEATURES.index("merged_matched"), FEATURES.index("var_overlap")
    assert (first[:, merged] == 0).all() and (first[:, overlap] == 0).all()
    rhs = np.asarray(rec.rules[len(first) :]) == "matmul-merge-rhs"
    pairs = {(int(a), int(b)) for a, b in second[rhs][:, [merged, overlap]]}
    # (QK, V): a merge with a third projection; (QK, Q): a merge with one it holds.
    assert (1, 0) in pairs and (1, 1) in pairs and (0, 0) in pairs


@needs_lgb
def test_multi_model_round_trips_through_its_file_and_names_a_bad_one(tmp_path: Path) -> None:
    from tensat_py.policies.multi import FEATURES, MultiModel, train

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(FEATURES)))
    y = (x[:, FEATURES.index("matched_in_best")] > 0.5).astype(int)
    names = ["a" if i % 2 else "b" for i in range(400)]
    model = train(x, y, names)
    assert model.rule_prior["a"] > 0 and model.rule_prior["b"] > 0
    model.save(tmp_path / "m.json")
    back = MultiModel.load(tmp_path / "m.json")
    assert back.rule_prior == model.rule_prior
    np.testing.assert_allclose(back.predict(x, names), model.predict(x, names))
    assert model.predict(x, names)[y == 1].mean() > model.predict(x, names)[y == 0].mean()
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json"):
        MultiModel.load(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="train one"):
        MultiModel.load(tmp_path / "none.json")


@needs_lgb
def test_learned_policy_searches_only_multi_pattern_rules_with_a_prior() -> None:
    from tensat_py.cost import get_cost_model
    from tensat_py.policies.multi import LearnedMultiPolicy, MultiModel

    rules = load_rules("taso")
    names = rules.names()
    shipped = LearnedMultiPolicy.load().model
    model = MultiModel(shipped.booster, {"matmul-merge-rhs": 0.1, "relu-merge-2d-axis0": 0.0})
    pol = LearnedMultiPolicy(model).bind(rules, get_cost_model("roofline", "t4"), 1)
    assert pol.multi_rules(0) is None
    assert pol.multi_rules(1) == [names.index("matmul-merge-rhs")]
    seen: list[int] = []
    inner = pol.select

    def spy(view: dict) -> list[bool]:
        seen.extend(view["rules"])
        return inner(view)

    pol.select = spy  # type: ignore[method-assign]
    eg = _core.EGraph(_matmul_triple().to_flat())
    eg.saturate(rules, k_multi=1, iter_limit=2, policy=pol)
    multi = {
        names[r] for r in seen if names[r] in {d[0] for d in rules.describe() if len(d[1]) > 1}
    }
    assert multi == {"matmul-merge-rhs"}
    assert pol.offered > 0


def test_astar_policy_is_never_worse_than_the_default() -> None:
    g = _matmul_pair()
    opts = dict(extractor="greedy-dag", verify=False)
    base = tensat_py.optimize(g, **opts)
    got = tensat_py.optimize(g, policy="astar", **opts)
    assert got.cost_after <= base.cost_after
    assert got.stats["policy"] == "astar"


def test_unknown_policy_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        tensat_py.optimize(_matmul_pair(), policy="random")


@needs_lgb
def test_cli_policy_option_reports_the_policy() -> None:
    r = CliRunner().invoke(
        main,
        ["optimize", "squeezenet", "--policy", "learned", "--extractor", "greedy", "--json"],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["cost_after"] <= out["cost_before"]


@needs_gym
def test_rewrite_env_passes_gymnasiums_env_checker() -> None:
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env
    from tensat_py.policies.env import RewriteEnv

    env = RewriteEnv(_matmul_pair(), max_steps=5)
    check_env(env, skip_render_check=True)
    made = gym.make("tensat_py.policies.env:tensat/Rewrite-v0", program=_matmul_pair(), max_steps=3)
    obs, info = made.reset(seed=0)
    assert made.observation_space.contains(obs)


@needs_gym
def test_rewrite_env_rewards_add_up_to_the_cost_decrease() -> None:
    from tensat_py.policies.env import RewriteEnv

    env = RewriteEnv(_matmul_pair(), max_steps=40)
    _, info = env.reset(seed=0)
    start = info["cost"]
    total, done, steps = 0.0, False, 0
    action = 0
    while not done:
        _, r, term, trunc, info = env.step(action % env.num_rules)
        total += r
        action += 1
        steps += 1
        done = term or trunc
    assert total == pytest.approx(start - info["cost"])
    assert info["cost"] < start  # the matmul merge was found
    _, r, term, _, _ = env.step(env.num_rules)
    assert term and r == 0.0


@needs_gym
def test_rewrite_env_takes_knossos_terms_under_rlo_cost() -> None:
    from tensat_py.policies.env import RewriteEnv

    term = list(A.parse_rlo("(div (mul 1.0 x) x)"))
    env = RewriteEnv(term, rules=KS_RULES, cost_model="rlo", max_steps=10)
    _, info = env.reset(seed=0)
    assert info["cost"] == 4.0
    names = env.ruleset.names()
    _, r, *_ = env.step(names.index("mul_one"))
    _, r2, *_ = env.step(names.index("div_by_self"))
    assert r + r2 == pytest.approx(4.0)


def test_cli_astar_policy_optimises_knossos_defs_no_worse_than_saturation(tmp_path: Path) -> None:
    src = tmp_path / "f.ks"
    src.write_text("(def f Float ((x : Float)) (add (div (mul 1.0 x) x) (mul x 0.0)))\n")
    runner = CliRunner()
    plain = runner.invoke(main, ["optimize", str(src), "--json"])
    got = runner.invoke(main, ["optimize", str(src), "--policy", "astar", "--json"])
    assert plain.exit_code == 0 and got.exit_code == 0, got.output
    a, b = json.loads(plain.output), json.loads(got.output)
    assert b["cost_after"] <= a["cost_after"] < a["cost_before"]


def test_mirror_key_is_shared_by_a_match_and_its_mirror_image_only() -> None:
    from tensat_py.policies.multi import mirror_key

    a = mirror_key(3, [5, 7], [("?a", 1), ("?b", 2), ("?c", 3)])
    assert a == mirror_key(3, [7, 5], [("?a", 1), ("?b", 3), ("?c", 2)])
    assert a != mirror_key(4, [7, 5], [("?a", 1), ("?b", 3), ("?c", 2)])
    assert a != mirror_key(3, [5, 8], [("?a", 1), ("?b", 2), ("?c", 3)])


def _ks_term(body: str, params: str = "(x : Float)", ret: str = "Float") -> A.Term:
    from tensat_py.frontends.knossos.lower import lower, signatures
    from tensat_py.frontends.knossos.syntax import parse_text

    prog = parse_text(f"(def f {ret} ({params}) {body})")
    nodes, _ = lower(prog.defs[0], signatures(prog))
    return A.as_term(nodes)


def test_inline_let_replaces_one_occurrence_and_keeps_the_let() -> None:
    from tensat_py.policies.binding import inline_let_moves

    term = _ks_term("(let (n (mul x x)) (add n n))")
    got = sorted(A.term_text(t) for _, t in inline_let_moves(term))
    mxx = "(mul (var x Float) (var x Float))"
    assert got == [
        f"(let n {mxx} (add {mxx} (var n Float)))",
        f"(let n {mxx} (add (var n Float) {mxx}))",
    ]
    # the positions are the occurrences' pre-order indices
    assert sorted(p for p, _ in inline_let_moves(term)) == [10, 13]


def test_inline_let_is_not_offered_where_a_binder_captures_or_shadows() -> None:
    from tensat_py.policies.binding import inline_let_moves

    # `x` is free in y's value and rebound before y's use: inlining y would capture it.
    captured = _ks_term("(let (y (mul x x)) (let (x 2.0) (add y x)))")
    texts = [A.term_text(t) for _, t in inline_let_moves(captured)]
    assert texts == [
        "(let y (mul (var x Float) (var x Float)) (let x (scalar 2.0 float64) "
        "(add (var y Float) (scalar 2.0 float64))))"
    ]
    # the inner `y` shadows the outer one: only the inner value is inlined.
    shadowed = _ks_term("(let (y (mul x x)) (let (y 2.0) (add y x)))")
    texts = [A.term_text(t) for _, t in inline_let_moves(shadowed)]
    assert texts == [
        "(let y (mul (var x Float) (var x Float)) (let y (scalar 2.0 float64) "
        "(add (scalar 2.0 float64) (var x Float))))"
    ]


def test_astar_reaches_saturations_cost_on_a_vector_let_with_inline_let() -> None:
    # blas_train.kso's shape: a `let` of a size read by a build; RLO inlines it in one move
    # (inline_let) and deletes the let; pushing the let down by rules climbs over terms
    # that pay the let once per element.
    term = _ks_term(
        "(let (m (size v)) (let (n (size (index 0 v))) "
        "(build m (lam (i : Integer) (build n (lam (j : Integer) "
        "(mul a (index j (index i v)))))))))",
        params="(a : Float) (v : Vec (Vec Float))",
        ret="(Vec (Vec Float))",
    )
    rules = load_rules(KS_RULES)
    eq = A.eqsat_cost(term, rules)
    assert eq < A.rlo_cost(term)
    res = A.astar(term, rules, A.rlo_cost, A.ZeroValue(), depth=10, budget=300)
    assert res.best_cost == pytest.approx(eq)
    without = [(r, p, s) for r, p, s in A.successors(term, rules, inline_let=False)]
    assert all(r >= 0 for r, _, _ in without)
    assert len(A.successors(term, rules)) > len(without)


def _admit_all_rhs(
    k_multi: int, iter_limit: int, mirror_once: bool = True
) -> tuple[object, list[tuple]]:
    """A learned policy whose model admits every offered ``matmul-merge-rhs`` match, run on
    three projections of one input; returns the policy and, per ``matmul-merge-rhs`` match
    it saw, ``(mirror key, new e-nodes, admitted)``."""
    from tensat_py.cost import get_cost_model
    from tensat_py.policies.multi import LearnedMultiPolicy, MultiModel, mirror_key

    class AdmitAll(MultiModel):
        def scores(self, x: np.ndarray, rules: list[str]) -> np.ndarray:
            return np.ones(len(x))

    rules = load_rules("taso")
    rhs = rules.names().index("matmul-merge-rhs")
    pol = LearnedMultiPolicy(AdmitAll(None, {"matmul-merge-rhs": 0.1}), max_admit=1000)
    pol.bind(rules, get_cost_model("roofline", "t4"), k_multi)
    seen: list[tuple] = []
    inner = pol.select

    def spy(view: dict) -> list[bool]:
        keep = inner(view)
        rows = zip(
            view["rules"], view["classes"], view["substs"], view["new_nodes"], keep, strict=True
        )
        seen.extend((mirror_key(r, c, s), n, k) for r, c, s, n, k in rows if r == rhs)
        return keep

    pol.select = spy  # type: ignore[method-assign]
    eg = _core.EGraph(_matmul_triple().to_flat())
    eg.saturate(rules, k_multi=k_multi, iter_limit=iter_limit, policy=pol, mirror_once=mirror_once)
    return pol, seen


@needs_lgb
def test_learned_policy_admits_a_match_and_its_mirror_image_both() -> None:
    pol, seen = _admit_all_rhs(k_multi=0, iter_limit=1, mirror_once=False)
    kept = [key for key, _, k in seen if k]
    # (Q, K) and (K, Q) merge the same pair in the other order: both are admitted.
    assert kept and all(kept.count(k) == 2 for k in kept)
    assert pol.admitted == pol.offered == len(kept)


@needs_lgb
def test_learned_policy_is_offered_a_mirror_symmetric_merge_once_per_pair() -> None:
    pol, seen = _admit_all_rhs(k_multi=0, iter_limit=1)
    kept = [key for key, _, k in seen if k]
    # Three projections: three pairs, each offered in one order only.
    assert len(kept) == len(set(kept)) == 3


@needs_lgb
def test_learned_policy_offers_only_matches_that_add_e_nodes() -> None:
    pol, seen = _admit_all_rhs(k_multi=1, iter_limit=2)
    # In iteration 2 the iteration-1 merges match again; their targets exist (0 new e-nodes).
    assert any(n == 0 for _, n, _ in seen) and any(n > 0 for _, n, _ in seen)
    assert all(k == (n > 0) for _, n, k in seen)
    assert pol.offered == pol.admitted == sum(n > 0 for _, n, _ in seen)
