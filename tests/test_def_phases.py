"""The pipeline's function stage (def_phases.py): Knossos programs through tensat_py.optimize."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tensat_py
from click.testing import CliRunner
from tensat_py.cli import main
from tensat_py.cost.rlo import RloCostModel
from tensat_py.def_phases import call_graph_order
from tensat_py.frontends.knossos import KsProgram, parse_text, print_expr
from tensat_py.frontends.knossos.functions import KsFunctions

# f calls g (defined later), h calls itself, k calls f and h.
CALLS = """
(def f Float ((x : Float)) (add (g x) 0.0))
(def h Float ((n : Integer) (x : Float)) (if (lt n 1) x (h (sub n 1) (mul x 1.0))))
(def g Float ((x : Float)) (mul x 1.0))
(def k Float ((x : Float)) (add (f x) (h 2 x)))
"""


def _prog(text: str) -> KsProgram:
    return KsProgram(parse_text(text))


def test_call_graph_order_puts_callees_before_callers() -> None:
    fs = KsFunctions(_prog(CALLS))
    order = [fs.name(i) for i in call_graph_order(fs)]
    assert order.index("g") < order.index("f") < order.index("k")
    assert order.index("h") < order.index("k")
    assert sorted(order) == ["f", "g", "h", "k"]


def test_optimize_takes_a_ks_program_and_returns_the_usual_result() -> None:
    res = tensat_py.optimize(_prog(CALLS), time_limit=30)
    assert isinstance(res, tensat_py.OptimizeResult)
    assert (res.cost_model, res.unit) == ("rlo", "RLO cost units")
    assert res.basis == "rlo cost model, no device"
    names = [d.name for d in res.defs]
    assert names == ["f", "h", "g", "k"]  # file order, whatever order they were optimised in
    by = {d.name: d for d in res.defs}
    assert by["g"].status == "optimised" and by["g"].message == "verified"
    assert print_expr(res.graph.program.defs[2].body) == "x"
    # f's inline_call rule inlined g as already optimised: (add (g x) 0.0) becomes x.
    assert print_expr(res.graph.program.defs[0].body) == "x"
    assert all(d.cost_after <= d.cost_before for d in res.defs)
    assert res.cost_after == pytest.approx(sum(d.cost_after for d in res.defs))
    assert res.verify is not None and res.verify.runner == "knossos-evaluator"
    assert res.stats["functions"]["optimised"] >= 2
    assert res.stats["phase_seconds"]["exploration"] > 0


def test_optimize_refuses_options_that_do_not_apply_to_ks_programs() -> None:
    with pytest.raises(ValueError, match="confirm: no runtime runs knossos programs"):
        tensat_py.optimize(_prog(CALLS), confirm=True)
    with pytest.raises(ValueError, match="cost_model: 'roofline' prices tensor graphs"):
        tensat_py.optimize(_prog(CALLS), cost_model="roofline")


def test_rlo_cost_model_takes_function_costs_as_data() -> None:
    nodes = KsFunctions(_prog(CALLS)).lower(parse_text(CALLS).defs[0])
    cheap, dear = RloCostModel({"g": 1.0}), RloCostModel({"g": 10.0})
    assert dear.term_cost(nodes) - cheap.term_cost(nodes) == pytest.approx(9.0)
    with pytest.raises(ValueError, match="one at a time"):
        cheap.graph_cost(_prog(CALLS))


def test_cost_model_does_not_import_the_knossos_front_end() -> None:
    code = (
        "import sys, tensat_py.cost.rlo as m; m.RloCostModel({}).term_cost([('x', []), "
        "('Float', []), ('var', [0, 1])]); "
        "print('tensat_py.frontends.knossos' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_cli_optimises_a_ks_file_through_the_pipeline(tmp_path: Path) -> None:
    src = tmp_path / "calls.ks"
    src.write_text(CALLS)
    out = tmp_path / "out.ks"
    r = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    obj = json.loads(r.output)
    assert obj["cost_model"] == "rlo" and obj["speedup_kind"] == "predicted"
    assert [d["name"] for d in obj["defs"]] == ["f", "h", "g", "k"]
    assert obj["stats"]["phase_seconds"]["exploration"] > 0
    assert "(def g Float ((x : Float)) x)" in " ".join(out.read_text().split())
    r = CliRunner().invoke(main, ["optimize", str(src), "--confirm"])
    assert r.exit_code != 0 and "confirm" in r.output


def test_inline_call_does_not_capture_an_argument_named_like_a_parameter() -> None:
    # f's inline_call rule binds x$f then y$f; g passes its own x$f as f's y: binding
    # x$f := 1.0 around it would capture it (g would return 3.0 for every argument).
    from tensat_py.frontends.knossos.evaluate import run

    text = (
        "(def f Float ((x : Float) (y : Float)) (add x (mul y 2.0)))\n"
        "(def g Float ((x$f : Float)) (f 1.0 x$f))"
    )
    prog = _prog(text)
    res = tensat_py.optimize(prog, verify=False, time_limit=30)  # the rules alone
    for v in (0.0, 5.0):
        assert run(res.graph.program, "g", [v]) == run(prog.program, "g", [v]) == 1.0 + 2 * v
