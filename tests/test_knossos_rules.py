"""RLO's rules (knossos-ksc ``rlo/src/rlo/rewrites.py``): every rule set by RLO's names,
in the replay (``frontends/knossos/rlo_rules.py``) and in the rule files and Rust appliers
the optimiser saturates with. Fixtures: tests/fixtures/knossos (project-made)."""

from __future__ import annotations

import dataclasses

import pytest
from reference_data import fixture
from tensat_py import _core
from tensat_py.frontends.knossos import replay as R
from tensat_py.frontends.knossos.rlo_rules import NOT_IMPLEMENTED, RULE_SETS, RULES
from tensat_py.frontends.knossos.syntax import parse_file, parse_text, print_expr
from tensat_py.pipeline import RULES_DIR, load_rules

RULE_SETS_FIXTURE = fixture("knossos", "rlo_rule_sets.kso")

# rewrites.py's RuleSets and their sizes (after `uniquify`).
RLO_SET_SIZES = {
    "simplify_rules": 34,
    "binding_rules": 6,
    "if_rules": 9,
    "log_exp_rules": 8,
    "build_simplify_rules": 49,
    "binding_simplify_rules": 38,
    "ml_rules": 62,
    "ml_rules_no_bind": 58,
    "vector_tuple_rules": 17,
    "monomorphic_rules": 47,
}


def test_every_rlo_rule_set_has_its_rules_under_rlos_names() -> None:
    assert {k: len(v) for k, v in RULE_SETS.items()} == RLO_SET_SIZES
    every = {n for names in RULE_SETS.values() for n in names}
    assert every - set(RULES) == set(NOT_IMPLEMENTED) == {"cfold"}
    assert {"new_bind", "lift_bind", "cse_bind", "lift_if", "sumbuild_of_build"} <= set(RULES)
    assert "add_zero$i" in RULE_SETS["monomorphic_rules"]


def _rule_file_names() -> set[str]:
    """RLO names the optimiser's rules carry: ``R`` or ``R.<variant>``, built-in
    ``_int``/``_f32`` forms of the Rust appliers folded into ``R``."""
    sets = [load_rules(p) for p in sorted(RULES_DIR.glob("knossos_*.rules"))]
    sets += [_core.RuleSet.constant_folding(), _core.RuleSet.knossos_binding()]
    out = set()
    for rs in sets:
        for name in rs.names():
            base = name.split(".")[0]
            for suffix in ("_int", "_f32"):
                base = base.removesuffix(suffix)
            out.add(base)
    return out


def test_rule_files_and_appliers_carry_every_rlo_rule_name() -> None:
    every = {n for names in RULE_SETS.values() for n in names}
    # new_bind needs a fresh name (hoist.py composes it with lift_bind and cse_bind),
    # inline_call is made per program, cfold is the built-in cprop_* on our one `add`;
    # the language's arithmetic takes no tuples or vectors (docs/knossos.md).
    assert every - _rule_file_names() == {
        "new_bind", "inline_call", "cfold", "add_tuples", "mul_tuple_scalar", "sum_of_deltavecs",
    }  # fmt: skip


def test_knossos_rule_files_pass_the_numerical_check() -> None:
    from tensat_py.rules_check import check_files

    files = ["knossos_simplify", "knossos_binding", "knossos_lift", "knossos_log_exp"]
    report = check_files([*files, "knossos_monomorphic"])
    bad = [(r.name, r.status, r.reason) for r in report.results if r.status != "PASS"]
    assert not bad and len(report.results) == 36 + 62 + 130 + 6 + 46


def test_best_lines_of_every_rule_set_replay_verify_and_reach_the_hand_costs() -> None:
    prog = parse_file(str(RULE_SETS_FIXTURE))
    out = R.replay_all(prog, RULE_SETS_FIXTURE.read_text(), trials=3)
    assert {r.best.ruleset for r in out} == {
        "ml_rules", "binding_rules", "if_rules", "vector_tuple_rules", "log_exp_rules",
    }  # fmt: skip
    for r in out:
        assert r.verified and r.message == "verified", (r.best.line, r.message)
    cost = {(r.best.function, r.best.ruleset): r.cost for r in out}
    # Worked out by hand (RLO units): x / x * (1 * x) -> x; exp x + exp x ->
    # (let v (exp x) (add v v)) = let 0.1 + exp 4 + add 1; the vector sum ->
    # sumbuild 15 + size 1 + 16 x index 1, plus to_float 1 + size 1, plus add 1.
    assert cost[("ratio", "ml_rules")] == 0.0
    assert cost[("twice_exp", "binding_rules")] == pytest.approx(5.1)
    assert cost[("pick", "ml_rules")] == 0.0
    assert cost[("total", "ml_rules")] == pytest.approx(35.0)
    assert cost[("log_exp", "log_exp_rules")] == pytest.approx(1.0)


def test_a_user_line_without_a_run_id_parses() -> None:
    (b,) = R.best_lines('; BEST ml_rules f  user ; [[0, "let_recover"]]')
    assert (b.ruleset, b.function, b.who, b.run, b.steps) == (
        "ml_rules", "f", "user", "", ((0, "let_recover"),),
    )  # fmt: skip
    with pytest.raises(R.ReplayError, match="layout"):
        R.best_lines("; BEST ml_rules f expert ; []")


def test_a_step_outside_its_lines_rule_set_is_refused() -> None:
    prog = parse_file(str(RULE_SETS_FIXTURE))
    ratio = next(b for b in R.best_lines(RULE_SETS_FIXTURE.read_text()) if b.function == "ratio")
    bad = dataclasses.replace(ratio, ruleset="binding_rules")
    with pytest.raises(R.ReplayError, match="`div_by_self`, not in binding_rules"):
        R.replay(prog, bad)


def test_lift_bind_renames_a_binder_its_sibling_uses() -> None:
    src = "(def f Float ((x : Float)) (add (let ((y (exp x))) y) (let ((y (log x))) y)))"
    prog = parse_text(src, "f.ks")
    # 0 let f, 1 f, 2 lam, 3 x, 4 add, 5 let y ... : lift the first let over the add,
    # whose other operand binds y too (not free there, so no renaming), then the second,
    # which now sits beside a free y and must be renamed.
    best = R.best_lines('; BEST ml_rules f user ; [[5, "lift_bind"], [10, "lift_bind"]]')[0]
    d = R.to_def(prog, R.replay(prog, best), "f")
    from tensat_py.frontends.knossos.evaluate import compare_defs

    ok, msg = compare_defs(prog, prog.defs[0], d)
    assert ok and msg == "verified", msg
    assert "var0" in print_expr(d.body)  # the fresh name RLO's lift_bind makes


def _flat(text: str) -> list[tuple[str, list[int]]]:
    from tensat_py.rules_check_ks import _flat as flat

    return flat(text)


def test_cse_bind_applier_renames_the_inner_variable_to_the_outer() -> None:
    src = (
        "(let a (exp (var y Float)) (let b (exp (var y Float)) (add (var a Float) (var b Float))))"
    )
    want = "(let a (exp (var y Float)) (let b (var a Float) (add (var a Float) (var b Float))))"
    eg = _core.EGraph(_flat(src))
    eg.saturate(_core.RuleSet.knossos_binding(), iter_limit=1, cycle_filter="none")
    assert eg.equivalent(_flat(src), _flat(want))


@pytest.mark.parametrize(
    ("body", "cost"),
    [
        ("(if (gt 3.0 2.0) x (mul x x))", 0.0),  # cprop_gt, if_true
        ("(if (lt 3.0 2.0) (mul x x) x)", 0.0),  # lt is gt swapped (cprop_gt.less)
        ("(mul x (exp 0.0))", 0.0),  # cprop_exp, mul_one
        ("(add x (log 1.0))", 0.0),  # cprop_log, add_zero
    ],
)
def test_built_in_rlo_folds_reach_the_folded_literal(body: str, cost: float) -> None:
    from tensat_py.frontends.knossos import KsProgram, optimize_program

    prog = parse_text(f"(def f Float ((x : Float)) {body})", "f.ks")
    res = optimize_program(KsProgram(prog), hoist=False).defs[0]
    assert res.message == "verified"
    assert res.cost_after == cost


def test_extraction_binds_an_operand_an_enode_repeats() -> None:
    # (x x) / (y y) is (x / y)(x / y) by the simplify rules; extraction writes the square
    # of one division with a let (RLO's new_bind + cse_bind): 0.1 + 2 + 2, not 6.
    import tensat_py
    from tensat_py.frontends.knossos import KsProgram, parse_text, print_expr

    text = "(def q Float ((x : Float) (y : Float)) (div (mul x x) (mul y y)))"
    res = tensat_py.optimize(KsProgram(parse_text(text)), time_limit=30)
    d = res.defs[0]
    assert d.status == "optimised" and d.message == "verified"
    assert d.cost_after == pytest.approx(4.1)
    assert print_expr(res.graph.program.defs[0].body).startswith("(let (cse$0 (div x y))")


def test_cse_binds_a_repeated_term_inside_a_let_body() -> None:
    from tensat_py.frontends.knossos import parse_text, print_expr
    from tensat_py.frontends.knossos.hoist import hoist_def

    text = (
        "(def g Float ((x : Float) (y : Float)) (let (a (tuple 3.0 y))"
        " (add (mul (mul x (get$2$2 a)) 2.0) (exp (mul x (get$2$2 a))))))"
    )
    d = hoist_def(parse_text(text).defs[0], cse=True)
    want = "(let (a (tuple 3.0 y)) (let (h$0 (mul x (get$2$2 a))) (add (mul h$0 2.0) (exp h$0))))"
    assert " ".join(print_expr(d.body).split()) == want


def test_an_addition_of_a_negated_product_becomes_a_subtraction() -> None:
    import tensat_py
    from tensat_py.frontends.knossos import KsProgram, parse_text, print_expr

    text = "(def r Float ((s : Float) (c : Float) (x : Float) (y : Float))" \
        " (add (mul (neg s) x) (mul c y)))"  # fmt: skip
    res = tensat_py.optimize(KsProgram(parse_text(text)), time_limit=30)
    assert res.defs[0].cost_after == pytest.approx(5.0)  # sub 1 + two mul 2: no neg (6)
    assert print_expr(res.graph.program.defs[0].body).startswith("(sub")
