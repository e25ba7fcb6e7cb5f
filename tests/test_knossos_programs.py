"""Knossos programs whole (issue 43): the whole language of SYNTAX.md is optimised def by
def; what has no translation is an opaque sub-term, never the whole def; overloads
resolve by argument type; a prelude types, runs and prices the edefs a program calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_data import fixture, param, shared, skip_reason
from tensat_py.frontends.knossos import (
    KsProgram,
    function_costs,
    load,
    optimize_program,
    save,
)
from tensat_py.frontends.knossos.evaluate import (
    TensorN,
    compare_defs,
    evaluate,
    random_value,
    run,
)
from tensat_py.frontends.knossos.lower import (
    lower,
    opaque_count,
    raise_term,
    signatures,
)
from tensat_py.frontends.knossos.syntax import Def, parse_text, print_expr

WHOLE = fixture("knossos", "whole_language.ks")
PRELUDE = fixture("knossos", "mini_prelude.ks")


def _optimised(text: str, **kw: object) -> tuple[KsProgram, object]:
    prog = KsProgram(parse_text(text))
    return prog, optimize_program(prog, **kw)


def test_every_def_of_the_whole_language_is_optimised_and_verified() -> None:
    prog = load(WHOLE, prelude=PRELUDE)
    res = optimize_program(prog)
    statuses = {d.name: d.status for d in res.defs}
    assert len(res.defs) == len(prog.program.defs) == 13
    assert set(statuses.values()) <= {"optimised", "unchanged"}, statuses
    for d in res.defs:
        if d.status == "optimised":
            assert d.message == "verified", (d.name, d.message)
            assert d.cost_after < d.cost_before
    # The changes a reader can check by eye.
    body = {d.name: print_expr(d.body) for d in res.program.program.defs}
    assert body["tagged"] == '(tuple "tag" x)'
    assert body["apply_twice"] == "(f (f x))"
    assert "(mul a 1.0)" not in body["mat_scale"]
    assert "(fact (sub n 1))" in body["fact"]  # a recursive call stays a call


def test_a_tensor2_def_has_no_opaque_part_and_a_string_or_lambda_call_has_one_each() -> None:
    prog = load(WHOLE).program
    sigs = signatures(prog)
    count = {d.name: opaque_count(lower(d, sigs)[0]) for d in prog.defs}
    assert count["mat_scale"] == count["mat_total"] == count["t3_first"] == 0
    assert count["tagged"] == 1  # the string literal
    assert count["apply_twice"] == 2  # (f (f x)): the inner application is a hole
    assert count["total"] == 0  # fold is a call of a primitive whose type is known


def test_the_matrix_def_loops_over_a_tuple_of_indices_in_the_egraph() -> None:
    prog = load(WHOLE).program
    d = next(d for d in prog.defs if d.name == "mat_scale")
    ops = [op for op, _ in lower(d, signatures(prog))[0]]
    assert "build" in ops and "index" in ops and "ks_opaque" not in ops
    assert "Tensor2<Float>" in ops and "Tuple<Integer,Integer>" in ops


def test_an_overloaded_name_resolves_by_argument_type() -> None:
    text = (
        "(def sq Float ((x : Float)) (mul x x))\n"
        "(def sq (Vec Float) ((v : Vec Float))"
        " (build (size v) (lam (i : Integer) (mul (index i v) (index i v)))))\n"
        "(def use Float ((x : Float) (v : Vec Float)) (add (sq x) (index 1 (sq v))))"
    )
    prog = parse_text(text)
    sigs = signatures(prog)
    assert [s.params for s in sigs["sq"]] == [
        (prog.defs[0].params[0][1],),
        (prog.defs[1].params[0][1],),
    ]
    calls = [
        n
        for n, _ in lower(prog.defs[2], sigs)[0]
        if n.startswith("sq")  # the call symbols of the two overloads
    ]
    assert sorted(calls) == ["sq@Float", "sq@Vec<Float>"]
    assert run(prog, "use", [3.0, [1.0, 2.0, 4.0]]) == 9.0 + 4.0
    res = optimize_program(KsProgram(prog))
    use = next(d for d in res.defs if d.name == "use")
    assert use.status == "optimised" and use.message == "verified"
    # Both overloads inlined: no call of sq is left.
    assert "sq" not in print_expr(res.program.program.defs[2].body)


def test_an_opaque_term_whose_variable_was_substituted_raises_as_a_let() -> None:
    # (f x) with f a lambda variable is opaque over (var f) and (var x); a term in which
    # x's operand became (add y 1.0) must mean (f (add y 1.0)), not capture anything.
    prog = parse_text("(def g Float ((f : Lam Float Float) (x : Float) (y : Float)) (f x))")
    nodes, _ = lower(prog.defs[0], signatures(prog))
    op, ch = nodes[-1]
    assert op == "ks_opaque"
    key = nodes[ch[0]][0]
    term = (
        f"(ks_opaque {key} Float (var f Lam<Float,Float>) (add (var y Float) (scalar 1.0 float64)))"
    )
    d = prog.defs[0]
    new = Def("g", d.ret, d.params, raise_term(term))

    def double(z: float) -> float:
        return 2.0 * z

    assert evaluate(prog, d, [double, 5.0, 7.0]) == 10.0
    assert evaluate(prog, new, [double, 5.0, 7.0]) == 16.0


def test_free_variables_of_an_opaque_term_stop_a_let_from_being_dropped() -> None:
    # The let binds x, used only inside the opaque application (f x): deleting the let
    # (delete_let: x not free) would be wrong; the let stays, its value simplified.
    text = "(def g Float ((f : Lam Float Float) (a : Float)) (let (x (mul a 1.0)) (f x)))"
    prog, res = _optimised(text)
    d = res.defs[0]
    assert d.status == "optimised" and d.message == "verified"
    assert print_expr(res.program.program.defs[0].body) == "(let (x a) (f x))"


def test_the_prelude_gives_an_edef_its_body_for_the_evaluator_and_the_cost_model() -> None:
    plain = load(WHOLE)
    with_prelude = load(WHOLE, prelude=PRELUDE)
    pre = with_prelude.meta["prelude"]
    bench = next(d for d in plain.program.defs if d.name == "bench")
    v = [1.0, 2.0, 3.0]
    # With the prelude, dotv runs its def: 1 + 4 + 9.
    assert run(with_prelude.program, "bench", [v], prelude=pre) == 14.0
    # Without, dotv is an uninterpreted function: deterministic, not 14.
    a = run(plain.program, "bench", [v])
    assert a == run(plain.program, "bench", [v]) and a != 14.0
    sigs = signatures(plain.program, pre)
    sym = sigs.symbol("dotv", [bench.params[0][1], bench.params[0][1]])
    assert sym in function_costs(plain.program, pre)
    assert sym not in function_costs(plain.program)
    assert compare_defs(plain.program, bench, bench, prelude=pre) == (True, "verified")


def test_overloads_in_a_prelude_are_told_apart_by_the_evaluator() -> None:
    prog = load(WHOLE, prelude=PRELUDE)
    pre = prog.meta["prelude"]
    m = TensorN([[1.0, 2.0], [3.0, 4.0]], 2)
    out = run(pre, "scale", [2.0, m])
    assert isinstance(out, TensorN) and out == [[2.0, 4.0], [6.0, 8.0]]
    assert run(pre, "scale", [2.0, [1.0, 5.0]]) == [2.0, 10.0]


def test_random_tensor2_values_index_with_tuples() -> None:
    import numpy as np
    from tensat_py.frontends.knossos.syntax import FLOAT, vec

    m = random_value(vec(FLOAT, 2), np.random.default_rng(0), 3)
    prog = load(WHOLE).program
    total = run(prog, "mat_total", [m])
    assert total == pytest.approx(sum(sum(r) for r in m))


def test_a_program_saves_and_loads_again_unchanged(tmp_path: Path) -> None:
    prog = load(WHOLE, prelude=PRELUDE)
    res = optimize_program(prog)
    out = save(res.program, tmp_path / "out.ks")
    assert load(out).program.code() == res.program.program.code()


def _shared_ks() -> list:
    src = shared("knossos")
    if src is None:
        return [
            pytest.param(
                None, marks=pytest.mark.skip(reason=skip_reason("*.ks", "knossos", "knossos"))
            )
        ]
    return [param(p, source="shared") for p in sorted(src.glob("*.ks"))]


@pytest.mark.parametrize("path", _shared_ks())
def test_every_def_of_a_knossos_ksc_file_is_optimised(path: Path, tmp_path: Path) -> None:
    prog = load(path)
    res = optimize_program(prog, time_limit=20.0, rounds=1)
    statuses = [d.status for d in res.defs]
    assert len(statuses) == len(prog.program.defs)
    assert set(statuses) <= {"optimised", "unchanged"}, [
        (d.name, d.status, d.message) for d in res.defs
    ]
    new = res.program.program
    verified = sum(
        compare_defs(prog.program, a, b)[1] == "verified"
        for a, b in zip(prog.program.defs, new.defs, strict=True)
    )
    assert verified >= 0.9 * len(statuses)
    again = load(save(res.program, tmp_path / path.name)).program
    assert again.code() == new.code()


def test_a_let_of_a_name_list_and_a_call_is_one_tuple_binding_as_ksc_reads_it() -> None:
    # ((M N) (size m)): ksc's parser tries one binding first, so M and N are bound to the
    # two sizes of m (not M to N and size to m).
    prog = parse_text(
        "(def t (Tensor 2 Float) ((m : Tensor 2 Float))"
        " (let ((M N) (size m))"
        " (build (tuple N M) (lam (ij : Tuple Integer Integer)"
        " (let ((i j) ij) (index (tuple j i) m))))))"
    )
    m = TensorN([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], 2)
    assert run(prog, "t", [m]) == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    res = optimize_program(KsProgram(prog))
    assert res.defs[0].status in ("optimised", "unchanged")
    assert opaque_count(lower(prog.defs[0], signatures(prog))[0]) == 0


def test_the_command_line_takes_a_prelude_from_the_environment(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner
    from tensat_py.cli import main

    out = tmp_path / "out.ks"
    args = ["optimize", str(WHOLE), "-o", str(out), "--json"]
    r = CliRunner().invoke(main, args, env={"TENSAT_KS_PRELUDE": str(PRELUDE)})
    assert r.exit_code == 0, r.output
    obj = json.loads(r.output)
    defs = {d["name"]: d for d in obj["defs"]}
    assert len(defs) == 12  # 13 defs, two of them named sq
    assert all(d["status"] in ("optimised", "unchanged") for d in obj["defs"])
    assert defs["bench"]["message"] == "verified"
    assert load(out).program.code()
    # bench calls the edef dotv, which only the prelude defines: with the prelude RLO's
    # model prices the call at dotv's body (a sumbuild), without at RLO's edef cost 7.
    r2 = CliRunner().invoke(main, args, env={"TENSAT_KS_PRELUDE": ""})
    plain = {d["name"]: d for d in json.loads(r2.output)["defs"]}
    assert defs["bench"]["cost_before"] > plain["bench"]["cost_before"] + 50


def test_the_command_line_takes_a_prelude_flag(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner
    from tensat_py.cli import main

    args = ["optimize", str(WHOLE), "--json"]
    with_flag = CliRunner().invoke(main, [*args, "--prelude", str(PRELUDE)], env={})
    assert with_flag.exit_code == 0, with_flag.output
    plain = CliRunner().invoke(main, args, env={"TENSAT_KS_PRELUDE": ""})
    got = {d["name"]: d for d in json.loads(with_flag.output)["defs"]}
    base = {d["name"]: d for d in json.loads(plain.output)["defs"]}
    assert got["bench"]["cost_before"] > base["bench"]["cost_before"] + 50
    bad = CliRunner().invoke(main, ["optimize", "nasrnn", "--prelude", str(PRELUDE)])
    assert bad.exit_code != 0 and "--prelude: only Knossos .ks programs" in bad.output
