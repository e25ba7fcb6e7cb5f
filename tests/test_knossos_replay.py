"""Replaying RLO's ``; BEST`` sequences (python/tensat_py/frontends/knossos/replay.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from reference_data import fixture, param, shared
from tensat_py.frontends.knossos import replay as R
from tensat_py.frontends.knossos.rlo_terms import _node_at
from tensat_py.frontends.knossos.syntax import parse_file, parse_text

# Our hand-written kernels with hand-written ; BEST lines (tests/fixtures/knossos) and,
# beside a development checkout, RLO's BLAS training set from ../shared/data/rlo.
KERNELS = fixture("knossos", "vector_kernels.kso")
BLAS = shared("rlo", "blas_train.kso")

SRC = """
(def f (Vec Float) ((a : Float) (x : (Vec Float)))
  (let ((n (size x)))
    (build n (lam (i : Integer) (mul a (index i x))))))
"""


def _show(n: R.Node) -> str:
    if n.op == "var":
        return n.name
    if n.op == "const":
        return repr(n.value)
    return "(" + " ".join([n.op, *(_show(k) for k in n.kids)]) + ")"


def test_rlo_numbering_of_a_two_parameter_def() -> None:
    prog = parse_text(SRC, "f.ks")
    e = R.rlo_expr(prog, "f")
    # RLO: the last parameter's let is outermost, lets hold [var, value, body].
    assert _show(e) == (
        "(let f (lam var0 (let x (select var0 1) (let a (select var0 0) "
        "(let n (size x) (build n i (mul a (index i x))))))) f)"
    )
    assert _node_at(e, 14).op == "let" and _node_at(e, 14).kids[0].name == "n"
    assert _node_at(e, 19).name == "n"  # the build's size


def test_expert_sequence_inlines_and_deletes() -> None:
    prog = parse_text(SRC, "f.ks")
    best = R.best_lines('; BEST r f expert x ; [[19, "inline_let"], [14, "delete_let"]]')[0]
    d = R.to_def(prog, R.replay(prog, best), "f")
    assert d.params == prog.defs[0].params
    assert "let" not in repr(d.body)
    assert "size" in repr(d.body)


def test_a_step_that_does_not_apply_names_the_line() -> None:
    prog = parse_text(SRC, "f.ks")
    best = R.best_lines('\n; BEST r f expert x ; [[18, "inline_let"]]')[0]
    with pytest.raises(R.ReplayError, match=r"line 2 .*step 0 \[18, inline_let\]"):
        R.replay(prog, best)
    bad = dataclasses.replace(best, steps=((14, "delete_let"),))  # n is still used
    with pytest.raises(R.ReplayError):
        R.replay(prog, bad)


def test_capture_avoiding_inline_renames_the_inner_binder() -> None:
    src = "(def g Float ((y : Float)) (let ((x (add y 1.0))) (let ((y 2.0)) (mul x y))))"
    prog = parse_text(src, "g.ks")
    assert _show(R.rlo_expr(prog, "g")).startswith("(let g (lam y (let x (add y 1.0)")
    # nodes: 0 let g, 1 g, 2 lam, 3 y, 4 let x, 5 x, 6 add, 7 y, 8 1.0, 9 let y, 10 y,
    # 11 2.0, 12 mul, 13 x
    best = R.best_lines('; BEST r g expert x ; [[13, "inline_let"], [4, "delete_let"]]')[0]
    d = R.to_def(prog, R.replay(prog, best), "g")
    from tensat_py.frontends.knossos.evaluate import compare_defs

    ok, msg = compare_defs(prog, prog.defs[0], d)
    assert ok and msg == "verified", msg


def _best_files() -> list:
    """``(path, BEST lines, functions, a function whose rlo line beats its expert line)``."""
    cases = [param(KERNELS, 9, 5, "first_scaled")]
    if BLAS is not None:
        cases.append(param(BLAS, 158, 31, "rscl", source="shared"))
    return cases


@pytest.mark.parametrize(("path", "lines", "functions", "rlo_wins"), _best_files())
def test_every_best_line_replays_and_verifies(
    path: Path, lines: int, functions: int, rlo_wins: str
) -> None:
    prog = parse_file(str(path))
    text = path.read_text()
    out = R.replay_all(prog, text, trials=2)
    assert len(out) == lines == sum(ln.startswith("; BEST ") for ln in text.splitlines())
    for r in out:
        assert r.verified and r.message == "verified", (r.best.line, r.message)
    by = {(r.best.function, r.best.who): r.cost for r in out}
    start = {r.best.function for r in out}
    assert len(start) == functions
    assert by[(rlo_wins, "rlo")] < by[(rlo_wins, "expert")]


def test_replayed_kernels_reach_the_costs_worked_out_by_hand() -> None:
    # RLO costs of our kernels after their BEST lines, priced by hand: first_scaled's rlo
    # line leaves (mul a (index 0 x)) = mul 2 + index 1; len_scaled's leaves (size x) = 1;
    # vscale without its let: build 2 + size 1 + 16 x (mul 2 + index 1) = 51.
    prog = parse_file(str(KERNELS))
    out = R.replay_all(prog, KERNELS.read_text(), trials=1)
    cost = {(r.best.function, r.best.who): r.cost for r in out}
    assert cost[("first_scaled", "rlo")] == pytest.approx(3.0)
    assert cost[("len_scaled", "rlo")] == pytest.approx(1.0)
    assert cost[("vscale", "expert")] == pytest.approx(51.0)


def test_constant_folding_reaches_the_folded_literal() -> None:
    from tensat_py.frontends.knossos import KsProgram, optimize_program

    prog = parse_text("(def f Float ((x : Float)) (mul x (div 15.0 2.0)))", "f.ks")
    folded = optimize_program(KsProgram(prog)).defs[0]
    plain = optimize_program(KsProgram(prog), fold_constants=False).defs[0]
    assert folded.cost_after == 2.0 and folded.message == "verified"
    assert plain.cost_after == 4.0


def test_hoisting_moves_invariants_out_of_loops_only() -> None:
    from tensat_py.frontends.knossos.evaluate import compare_defs
    from tensat_py.frontends.knossos.hoist import free_vars, hoist_def
    from tensat_py.frontends.knossos.syntax import Call, Lam, Let, print_expr

    src = """
(def r (Vec Float) ((x : (Vec Float)))
  (build (size x) (lam (i : Integer)
    (add (div (index i x) (sum x))
         (let ((x (build (add i 1) (lam (j : Integer) 1.0)))) (sum x))))))
"""
    prog = parse_text(src, "r.ks")
    h = hoist_def(prog.defs[0])
    # The outer (sum x) is hoisted; the inner (sum x) means another x (bound in the loop
    # from i) and stays.
    assert isinstance(h.body, Let)
    text = print_expr(h.body)
    assert text.count("(sum x)") == 2
    loop = h.body
    while isinstance(loop, Let):
        loop = loop.body
    assert isinstance(loop, Call) and loop.name == "build"
    lam = loop.args[1]
    assert isinstance(lam, Lam) and print_expr(lam.body).count("(sum x)") == 1
    assert free_vars(h.body) == {"x"}
    ok, msg = compare_defs(prog, prog.defs[0], h)
    assert ok and msg == "verified", msg


@pytest.mark.parametrize(
    ("path", "name"),
    [pytest.param(KERNELS, n, id=f"fixture:{n}") for n in ("first_scaled", "len_scaled", "axpby")]
    + [pytest.param(BLAS, n, id=f"shared:{n}") for n in ("rscl", "syr2") if BLAS is not None],
)
def test_optimising_reaches_rlos_best(path: Path, name: str) -> None:
    from tensat_py.frontends.knossos import KsProgram, optimize_program

    prog = parse_file(str(path))
    best = min(
        r.cost for r in R.replay_all(prog, path.read_text(), trials=1) if r.best.function == name
    )
    res = optimize_program(KsProgram(prog), only={name}).defs[0]
    assert res.message == "verified"
    assert res.cost_after <= best + 1e-9
