"""Bad input gets a clear error, never a traceback; limits and fallbacks say what happened;
output files are written whole or not at all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pulp
import pytest
import tensat_py
from click.testing import CliRunner
from tensat_py import egraph as egraph_mod
from tensat_py.builder import GraphBuilder
from tensat_py.cli import main
from tensat_py.egraph import ExtractionProblem, save_json
from tensat_py.graph import GraphError

# (file text, line, column, message fragment)
BAD_RULES = {
    "unknown-operator": (
        "ok: (relu ?x) => (relu ?x)\nr: (relu (frob ?x)) => ?x\n",
        2,
        11,
        "unknown operator `frob`",
    ),
    "wrong-arity": ("r: (matmul ?a ?b) => ?a\n", 1, 5, "wrong arity"),
    "unbound-target-variable": (
        "r: (relu ?x) => (ewadd ?x ?y)\n",
        1,
        27,
        "variable `?y` in the target is not bound",
    ),
    "unbalanced-parentheses": ("r: (relu (tanh ?x) => ?x\n", 1, 4, "unclosed `(`"),
    "extra-parenthesis": ("r: (relu ?x)) => ?x\n", 1, 13, "unmatched `)`"),
    "multi-unequal": ("r: (relu ?x), (relu ?y) => (relu ?x)\n", 1, 25, "2 sources but 1 target"),
}


def _assert_clean_error(result, path: Path, line: int, col: int, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    out = result.output
    assert re.search(rf"{re.escape(str(path))}:{line}:{col}: .*{re.escape(fragment)}", out), out


@pytest.mark.parametrize("case", sorted(BAD_RULES))
@pytest.mark.parametrize("command", ["optimize", "check"])
def test_bad_rule_files_report_file_line_col(tmp_path: Path, case: str, command: str) -> None:
    text, line, col, fragment = BAD_RULES[case]
    f = tmp_path / "bad.rules"
    f.write_text(text)
    args = (
        ["optimize", "nasrnn", "--rules", str(f), "--extractor", "greedy"]
        if command == "optimize"
        else ["rules", "check", str(f)]
    )
    _assert_clean_error(CliRunner().invoke(main, args), f, line, col, fragment)


def test_missing_rule_file_exits_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["rules", "check", str(tmp_path / "nope.rules")])
    assert res.exit_code == 2 and "Traceback" not in res.output and "error:" in res.output


# ----------------------------------------------------------------------------- .model files
SMALL = (
    "100\n0\n10:0\n1,3,8,8\n101\n1\n11:0\n4,3,3,3\n102\n3\n100:0,101:0\n"
    "1,3,8,8,4,3,3,3,1,1,0,2,1,1\n103\n8\n102:0\n1,4,8,8\n"
)


@pytest.mark.parametrize(
    "case,edit,fragment",
    [
        ("truncated", lambda t: "\n".join(t.split("\n")[:-3]), r"truncated"),
        (
            "missing-input",
            lambda t: t.replace("102:0\n1,4,8,8", "999:0\n1,4,8,8"),
            r"guid 103 \(Relu\) reads guid 999",
        ),
        (
            "cycle",
            lambda t: t.replace("100:0,101:0", "103:0,101:0"),
            r"cycle: operator guid \d+ \(\w+\) depends on guid \d+",
        ),
    ],
)
def test_bad_model_files_name_the_node(tmp_path: Path, case: str, edit, fragment: str) -> None:
    f = tmp_path / f"{case}.model"
    f.write_text(edit(SMALL))
    res = CliRunner().invoke(main, ["optimize", str(f), "--extractor", "greedy"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert re.search(fragment, res.output), res.output
    assert str(f) in res.output


def test_good_small_model_optimizes(tmp_path: Path) -> None:
    f = tmp_path / "small.model"
    f.write_text(SMALL)
    res = CliRunner().invoke(main, ["optimize", str(f), "--extractor", "greedy", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["cost_after"] <= json.loads(res.output)["cost_before"]


# ----------------------------------------------------------------------------- builder
def test_builder_shape_mismatch_names_operator_and_shapes() -> None:
    b = GraphBuilder()
    x = b.input((2, 3), name="x")
    w = b.weight((4, 5), name="w")
    with pytest.raises(GraphError, match=r"matmul.*\[2, 3\].*\[4, 5\]"):
        b.matmul(x, w)
    with pytest.raises(GraphError, match=r"ewadd.*\[2, 3\].*\[4, 5\]"):
        b.ewadd(x, w)
    img = b.input((1, 3, 8, 8), name="img")
    with pytest.raises(GraphError, match=r"conv2d.*\[8, 5, 3, 3\].*\[1, 3, 8, 8\]"):
        b.conv2d(img, b.weight((8, 5, 3, 3), name="k"))


# ----------------------------------------------------------------------------- limits
def _two_matmuls(n: int = 64) -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((n, 256), name="x")
    q = b.matmul(x, b.weight((256, 256), name="wq"))
    k = b.matmul(x, b.weight((256, 256), name="wk"))
    return b.finish([q, k])


def test_node_limit_is_reported() -> None:
    res = tensat_py.optimize(_two_matmuls(), node_limit=12, extractor="greedy")
    assert res.stats["stop_reason"] == "node_limit"
    assert res.verify is not None and res.verify.passed


def test_iteration_limit_is_reported() -> None:
    res = tensat_py.optimize(_two_matmuls(), iter_limit=1, extractor="greedy")
    assert res.stats["stop_reason"] == "iter_limit" and res.stats["iterations"] == 1


def test_time_limit_is_reported_and_ilp_falls_back() -> None:
    res = tensat_py.optimize(_two_matmuls(), time_limit=1e-6, solver="cbc")
    assert res.stats["stop_reason"] == "time_limit"
    # The ILP had no time either: the greedy answer stands and the status says so.
    assert res.candidate_status == "fallback-greedy"  # the extractor's own answer
    assert "time limit" in res.stats["extraction_message"]
    assert res.cost_after <= res.cost_before


@pytest.mark.parametrize("error", [pulp.PulpSolverError("cbc: not found"), OSError("no cbc")])
def test_missing_solver_falls_back_to_greedy(monkeypatch: pytest.MonkeyPatch, error) -> None:
    def broken(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(pulp.LpProblem, "solve", broken)
    res = tensat_py.optimize(_two_matmuls(), extractor="ilp", solver="cbc")
    assert res.candidate_status == "fallback-greedy"  # the extractor's own answer
    assert "solver cbc failed" in res.stats["extraction_message"]
    assert res.verify is not None and res.verify.passed
    assert res.cost_after <= res.cost_before


def test_solver_failure_via_cli_is_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self, *args, **kwargs):
        raise pulp.PulpSolverError("cbc: not found")

    monkeypatch.setattr(pulp.LpProblem, "solve", broken)
    res = CliRunner().invoke(
        main, ["optimize", "nasrnn", "--json", "--node-limit", "3000", "--solver", "cbc"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["extraction_status"].startswith("fallback")


# ----------------------------------------------------------------------------- atomic writes
def _problem() -> ExtractionProblem:
    g = _two_matmuls(8)
    eg = tensat_py._core.EGraph(g.to_flat())
    export = eg.export()
    from tensat_py.cost import get_cost_model

    return ExtractionProblem.from_export(
        export, get_cost_model("roofline", "t4").costs_for_export(export)
    )


def test_save_json_writes_whole_file(tmp_path: Path) -> None:
    out = tmp_path / "eg.json"
    save_json(_problem(), out)
    assert json.loads(out.read_text())["nodes"]
    assert [p.name for p in tmp_path.iterdir()] == ["eg.json"]


def test_failed_write_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = _problem()
    out = tmp_path / "eg.json"

    def dies_midway(obj, f, *args, **kwargs):
        f.write('{"nodes": {')  # half a document, then the disk "fills up"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(egraph_mod.json, "dump", dies_midway)
    with pytest.raises(OSError):
        save_json(problem, out)
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temporary


def test_failed_write_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = _problem()
    out = tmp_path / "eg.json"
    save_json(problem, out)
    before = out.read_bytes()

    def dies_midway(obj, f, *args, **kwargs):
        f.write("{")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(egraph_mod.json, "dump", dies_midway)
    with pytest.raises(OSError):
        save_json(problem, out)
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["eg.json"]


def test_dump_egraph_to_missing_folder_is_a_clean_error(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "eg.json"
    res = CliRunner().invoke(
        main, ["optimize", "nasrnn", "--extractor", "greedy", "--dump-egraph", str(target)]
    )
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert not target.exists()
