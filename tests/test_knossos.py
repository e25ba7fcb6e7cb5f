"""Knossos programs: .ks in and out, the knossos dialect, RLO costs, optimisation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from reference_data import fixture, param, shared
from tensat_py import _core
from tensat_py.cli import main
from tensat_py.frontends.knossos import KsProgram, optimize_program
from tensat_py.frontends.knossos.evaluate import run
from tensat_py.frontends.knossos.lower import lower, signatures
from tensat_py.frontends.knossos.syntax import (
    KsSyntaxError,
    parse_file,
    parse_text,
    print_expr,
    print_program,
)

# Our hand-written programs (tests/fixtures/knossos) and, beside a development checkout,
# real Knossos programs and RLO's BLAS training set from ../shared/data.
KERNELS = fixture("knossos", "vector_kernels.kso")
KS_FILES = [param(fixture("knossos", "syntax_tour.ks")), param(KERNELS)]
if (_ks := shared("knossos")) is not None:
    KS_FILES += [param(p, source="shared") for p in sorted(_ks.glob("*.ks"))]
BLAS = shared("rlo", "blas_train.kso")
if BLAS is not None:
    KS_FILES.append(param(BLAS, source="shared"))


@pytest.mark.parametrize("path", KS_FILES)
def test_shared_ks_files_parse_and_round_trip(path: Path) -> None:
    prog = parse_file(str(path))
    again = parse_text(print_program(prog), "printed.ks")
    assert again.code() == prog.code()
    assert prog.defs


def test_comments_between_forms_are_kept() -> None:
    text = "; head\n(def f Float ((x : Float)) x)\n#| block\n |#\n(edef g Float (Float))\n"
    out = print_program(parse_text(text))
    assert "; head" in out and "#| block\n |#" in out


@pytest.mark.parametrize(
    ("text", "line", "col", "fragment"),
    [
        ("(def f Float ((x : Float)) (add x 1.0)", 1, 1, "unclosed `(`"),
        ("(def f Float ((x : Float)) x)\n(frob 1)", 2, 2, "unsupported top-level form `frob`"),
        ("(def f Float ((x : Float))\n  (let (y) x))", 2, 8, "a binding is"),
        ("(def f Frob ((x : Float)) x)", 1, 8, "unknown type `Frob`"),
    ],
)
def test_bad_ks_input_names_file_line_col(text: str, line: int, col: int, fragment: str) -> None:
    with pytest.raises(KsSyntaxError) as e:
        parse_text(text, "bad.ks")
    assert str(e.value).startswith(f"bad.ks:{line}:{col}: ")
    assert fragment in str(e.value)


def test_cli_bad_ks_file_exits_2_without_traceback(tmp_path: Path) -> None:
    f = tmp_path / "bad.ks"
    f.write_text("(def f Float ((x : Float))\n  (add x 1.0)\n")
    r = CliRunner().invoke(main, ["optimize", str(f), "--json"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    assert f"{f}:1:1: unclosed `(`" in r.output


def test_free_variables_respect_binders_in_the_analysis() -> None:
    prog = parse_text(
        "(def f Float ((v : Vec Float) (a : Float))"
        " (sumbuild (size v) (lam (i : Integer) (mul a (index i v)))))"
    )
    nodes, _ = lower(prog.defs[0], signatures(prog))
    eg = _core.EGraph(nodes)
    root = eg.export()["root"]
    assert eg.export()["classes"][root]["dtype"] == "float64"


def test_rlo_costs_follow_rlo_constants() -> None:
    prog = parse_text(
        "(def f Float ((x : Float) (y : Float)) (let (a (div x y)) (add (exp a) (mul a 2.0))))"
    )
    nodes, _ = lower(prog.defs[0], {})
    assert _core.rlo_cost(nodes, {}) == pytest.approx(0.1 + 2 + 1 + 4 + 2)


def test_inline_let_and_index_of_build_lower_the_cost() -> None:
    text = (
        "(def g Float ((v : Vec Float) (a : Float))"
        " (let (n (size v)) (index 0 (build n (lam (i : Integer) (mul a (index i v)))))))"
    )
    res = optimize_program(KsProgram(parse_text(text)))
    d = res.defs[0]
    assert d.status == "optimised" and d.message == "verified"
    assert d.cost_after < d.cost_before
    assert print_expr(res.program.program.defs[0].body) in (
        "(mul a (index 0 v))",
        "(mul (index 0 v) a)",
    )


def test_let_is_not_pushed_into_a_binder_that_captures() -> None:
    # Inlining y := i into the lam over i would capture i (and save RLO's let cost); the
    # optimised program must still compute the same vector.
    text = (
        "(def h (Vec Float) ((v : Vec Float) (i : Integer))"
        " (let (y i) (build (size v) (lam (i : Integer) (add (to_float y) (index i v))))))"
    )
    prog = parse_text(text)
    res = optimize_program(KsProgram(prog), verify=False)  # the rules alone must be sound
    new = res.program.program
    for args in ([[1.0, 2.0, 3.0], 0], [[1.0, 2.0, 3.0], 2]):
        assert run(new, "h", args) == run(prog, "h", args)


def test_inline_call_uses_the_callee_body() -> None:
    text = "(def sq Float ((x : Float)) (mul x x))\n(def f Float ((y : Float)) (add (sq y) 1.0))"
    res = optimize_program(KsProgram(parse_text(text)))
    f = next(d for d in res.defs if d.name == "f")
    assert f.cost_after == pytest.approx(3.0)  # (add (mul y y) 1.0), no call overhead
    assert f.cost_before == pytest.approx(1 + 2 + 2)


def _kso_files() -> list:
    """``(path, some def names, a def that must change)``: our hand-written kernels and,
    beside a development checkout, RLO's BLAS training set."""
    cases = [param(KERNELS, {"axpby", "first_scaled"}, "first_scaled")]
    if BLAS is not None:
        cases.append(param(BLAS, {"axpy", "gemm"}, "gemm", source="shared"))
    return cases


@pytest.mark.parametrize(("src", "names", "must_change"), _kso_files())
def test_cli_optimises_blas_defs_and_writes_ks(
    tmp_path: Path, src: Path, names: set[str], must_change: str
) -> None:
    out = tmp_path / "out.ks"
    r = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    obj = json.loads(r.output)
    assert obj["cost_after"] < obj["cost_before"]
    assert {d["name"] for d in obj["defs"]} >= names
    assert all(d["status"] != "failed-verification" for d in obj["defs"])
    v = obj["verify"]  # the evaluator's verdict on every changed def
    assert v["runner"] == "knossos-evaluator" and v["passed"] and not obj["stats"]["failed"]
    changed = {d["name"] for d in obj["defs"] if d["status"] == "optimised"}
    assert set(obj["stats"]["verified"]) == changed and must_change in changed
    assert len(parse_file(str(out)).defs) == len(parse_file(str(src)).defs)


@pytest.mark.parametrize(
    "path",
    [param(fixture("knossos", "syntax_tour.ks"))]
    + ([param(p, source="shared")] if (p := shared("knossos", "test__ksc__gmm.ks")) else []),
)
def test_optimize_on_a_ks_file_returns_the_usual_result(path: Path) -> None:
    import tensat_py
    from tensat_py.result import OptimizeResult

    res = tensat_py.optimize(str(path), time_limit=30)
    assert isinstance(res, OptimizeResult) and res.cost_model == "rlo"
    assert res.unit == "RLO cost units" and res.defs
    assert res.cost_after <= res.cost_before
    assert res.cost_before == pytest.approx(sum(d.cost_before for d in res.defs))
    assert len(res.graph.program.defs) == len(parse_file(str(path)).defs)
