"""Results that cannot hide a failure: the candidate's own verification and cost, the two
fallbacks told apart, ``--json`` and ``--strict``, one time limit for the whole run, and
errors that are raised instead of swallowed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import tensat_py
from click.testing import CliRunner
from onnx import TensorProto, helper
from tensat_py.builder import GraphBuilder
from tensat_py.cli import EXIT_UNVERIFIED, main
from tensat_py.cost import RooflineCostModel
from tensat_py.graph import TensorType

# A rule that is cheaper and wrong: x + y is not relu(x).
UNSOUND = "unsound-drop-addend: (ewadd ?a ?b) => (relu ?a)\n"


def _sum_graph() -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((64, 64), name="x")
    y = b.input((64, 64), name="y")
    return b.finish([b.ewadd(x, y)])


def _two_matmuls() -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((64, 256), name="x")
    q = b.matmul(x, b.weight((256, 256), name="wq"))
    k = b.matmul(x, b.weight((256, 256), name="wk"))
    return b.finish([q, k])


@pytest.fixture
def unsound_rules(tmp_path: Path) -> Path:
    path = tmp_path / "unsound.rules"
    path.write_text(UNSOUND)
    return path


# ----------------------------------------------------------------------------- fallbacks
def test_unsound_rule_makes_the_candidate_fail_verification(unsound_rules: Path) -> None:
    g = _sum_graph()
    res = tensat_py.optimize(g, rules=unsound_rules, extractor="greedy-dag")
    # the candidate is what the unsound rule made: relu(x), cheaper than x + y
    assert res.candidate is not None and res.candidate.op_counts().get("relu") == 1
    assert res.candidate_cost < res.cost_before
    assert res.verify is not None and not res.verify.passed
    assert res.verify.max_rel_error > 1e-3 and res.verify.runner == "numpy"
    assert res.extraction_status == "fallback-unverified"
    assert res.candidate_status == "greedy"
    assert "failed verification" in res.message
    # the result is the input, at the input's cost
    assert res.graph is g and res.cost_after == res.cost_before


class NegativeMatmul:
    """Roofline prices for extraction; the whole-program price counts each matmul as
    minus one millisecond, so that fewer matmuls cost more."""

    def __init__(self) -> None:
        self.inner = RooflineCostModel("t4")

    def costs_for_export(self, export):
        return self.inner.costs_for_export(export)

    def graph_cost(self, graph) -> float:
        live = graph.live()
        total = 0.0
        for nid, node in enumerate(graph.nodes):
            if live[nid] and node.op == "matmul":
                total -= 1e-3
        return total + self.inner.graph_cost(graph)


def test_negative_price_shows_the_not_cheaper_fallback() -> None:
    g = _two_matmuls()
    res = tensat_py.optimize(g, cost_model=NegativeMatmul())
    # the candidate merged the matmuls (what the ILP made under the roofline node costs)...
    assert res.candidate is not None and res.candidate.op_counts().get("matmul") == 1
    assert res.candidate_status == "optimal"
    # ...which the negative price makes costlier than the input's two matmuls
    assert res.candidate_cost > res.cost_before
    assert res.extraction_status == "fallback-not-cheaper"
    assert "more than the input" in res.message
    assert res.verify is not None and res.verify.passed  # the candidate itself is sound
    assert res.graph is g


def test_candidate_kept_when_cheaper_and_verified() -> None:
    res = tensat_py.optimize(_two_matmuls())
    assert res.extraction_status == "optimal" and not res.fell_back
    assert res.graph is res.candidate and res.cost_after == res.candidate_cost
    assert res.verify is not None and res.verify.passed and res.verify.message == "ok"


# ----------------------------------------------------------------------------- CLI
def test_json_shows_the_candidates_failure_and_strict_exits_3(unsound_rules: Path) -> None:
    args = ["optimize", "nasrnn", "--rules", str(unsound_rules), "--extractor", "greedy"]
    out = CliRunner().invoke(main, [*args, "--json"])
    assert out.exit_code == 0, out.output
    obj = json.loads(out.stdout)
    assert obj["extraction_status"] == "fallback-unverified"
    assert obj["verify"]["passed"] is False and obj["verify"]["runner"] == "numpy"
    assert "exceeds" in obj["verify"]["message"]
    assert "failed verification" in obj["message"]
    assert obj["candidate"]["status"] == "greedy"
    strict = CliRunner().invoke(main, [*args, "--strict", "--quiet"])
    assert strict.exit_code == EXIT_UNVERIFIED
    assert "failed verification" in strict.output and "Traceback" not in strict.output


def test_json_has_verify_message_and_phase_seconds() -> None:
    out = CliRunner().invoke(main, ["optimize", "nasrnn", "--extractor", "greedy", "--json"])
    assert out.exit_code == 0, out.output
    obj = json.loads(out.stdout)
    assert {"passed", "runner", "max_abs_error", "max_rel_error", "message"} <= set(obj["verify"])
    assert obj["verify"]["passed"] is True
    phases = obj["stats"]["phase_seconds"]
    want = {"setup", "exploration", "extraction", "refinement", "verification", "confirmation"}
    assert want <= set(phases) <= want | {"load", "save"}
    assert phases["verification"] > 0
    assert phases["refinement"] == 0 and "refinement" not in obj["stats"]  # roofline: none
    assert abs(sum(obj["stats"]["phase_share"].values()) - 1) < 0.05


def test_human_table_shows_each_phase_including_verification() -> None:
    out = CliRunner().invoke(main, ["optimize", "nasrnn", "--extractor", "greedy", "-q"])
    assert out.exit_code == 0, out.output
    for label in ("exploration (s)", "extraction (s)", "verification (s)", "total (s)"):
        assert label in out.output


# ----------------------------------------------------------------------------- time limit
def test_time_limit_bounds_the_whole_optimisation() -> None:
    res = tensat_py.optimize(
        "nasrnn", k_multi=2, time_limit=3.0, extractor="greedy-dag", mirror_once=False
    )
    st = res.stats
    assert st["stop_reason"] == "node_limit"  # a run with work in every phase
    assert st["time_limit"] == 3.0
    assert st["explore_time_limit"] <= 1.5 + 1e-9
    assert st["total_seconds"] <= 3.0 * 1.25 + 0.5, st["phase_seconds"]
    assert abs(sum(st["phase_seconds"].values()) - st["total_seconds"]) < 0.05
    assert res.verify is not None and res.verify.passed


def test_extraction_gets_what_the_earlier_phases_left(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensat_py import phases

    given: list[float] = []
    real = phases.extract

    def spy(problem, **kw):
        given.append(kw["time_limit"])
        return real(problem, **kw)

    monkeypatch.setattr(phases, "extract", spy)
    res = tensat_py.optimize(_two_matmuls(), time_limit=5.0)
    spent = res.stats["phase_seconds"]
    assert len(given) == 1
    assert given[0] <= 5.0 - spent["setup"] - res.stats["explore_seconds"]
    assert given[0] > 0


def _matmul_chain() -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((1, 1024), name="x")
    h = b.matmul(x, b.weight((1024, 1024), name="w1"))
    return b.finish(b.matmul(h, b.weight((1024, 1024), name="w2")))


def test_the_check_reserve_covers_the_weight_only_work_of_the_explored_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dataclasses

    from tensat_py import phases

    real = phases.reference

    def slow(graph, **kw):  # the input's run takes 0.2 s (feeds apart)
        return dataclasses.replace(real(graph, **kw), run_seconds=0.2)

    monkeypatch.setattr(phases, "reference", slow)
    res = tensat_py.optimize(_matmul_chain(), time_limit=60.0)
    # The candidate is x @ (w1 @ w2): one matmul at run time, but its check multiplies the
    # two weights (2.1 GFLOP against the input's 4 MFLOP): 26 times the input's work.
    folded = [n for n in res.candidate.nodes if n.op == "matmul" and n.constant]
    assert len(folded) == 1
    assert res.stats["verify_reserve_seconds"] > 0.2 * 10
    assert res.stats["extract_time_limit"] < 60.0 - 0.2 * 10


def test_the_reference_run_is_timed_without_drawing_its_feeds() -> None:
    from tensat_py.verify import reference

    ref = reference(_matmul_chain(), dtype="float64")
    assert 0.0 < ref.run_seconds < 5.0


# ----------------------------------------------------------------------------- no swallowed errors
def test_roofline_raises_on_an_unknown_operator() -> None:
    with pytest.raises(ValueError, match="frobnicate"):
        RooflineCostModel("t4").node_cost("frobnicate", {}, [(4, 4)], (4, 4))


def test_tensor_type_raises_on_an_unknown_dtype() -> None:
    with pytest.raises(ValueError, match="unknown dtype `float13`"):
        TensorType((2, 2), "float13")


def test_onnx_translator_error_is_raised_not_made_opaque(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tensat_py import ops

    def broken(importer, node):
        raise KeyError("bug in the Relu translator")

    ops.onnx_importers()  # the registry is filled on first use
    monkeypatch.setitem(ops._ONNX_IMPORTERS, "Relu", broken)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(ValueError, match="bug in the Relu translator"):
        tensat_py.load(str(path))


def test_rules_check_reports_an_unknown_operator_as_an_error() -> None:
    from tensat_py.rules_check import _kinds_of, parse_pattern

    with pytest.raises(ValueError, match="`frobnicate` is not an operator"):
        _kinds_of(parse_pattern("(frobnicate ?x)"))


# ----------------------------------------------------------------------------- sanity of inputs
def test_reference_is_reused_for_several_candidates() -> None:
    from tensat_py.verify import reference

    g = _sum_graph()
    ref = reference(g, dtype="float64")
    assert ref.check(g).passed
    b = GraphBuilder()
    x = b.input((64, 64), name="x")
    b.input((64, 64), name="y")
    wrong = b.finish([b.relu(x)])
    bad = ref.check(wrong)
    assert not bad.passed and np.isfinite(bad.max_abs_error)
