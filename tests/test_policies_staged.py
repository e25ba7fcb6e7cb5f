"""The staged learned policy (issue 16): Tensat at k_multi=1, then one learned
multi-pattern iteration on the extracted program (``tensat_py.policies.staged``). The
programs here are made with Tensat's pairwise merges (``merge_trees=False``): merge trees
merge all three projections in the first stage and leave the second nothing to do. Needs the
``learn`` extra (LightGBM) and skips, with the reason, without it."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import pytest
import tensat_py
from tensat_py import _core
from tensat_py.builder import GraphBuilder
from tensat_py.cost import get_cost_model
from tensat_py.pipeline import load_rules

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("lightgbm") is None,
    reason="lightgbm not installed (pip install 'tensat-py[learn]')",
)


def _projections(n: int = 3, residual: bool = False) -> tensat_py.Graph:
    """``n`` projections of one input, each an output: k_multi=1 merges two of them. With
    ``residual``, one more output adds the input to the first (a single-pattern match)."""
    b = GraphBuilder()
    x = b.input((64, 256), name="x")
    outs = [b.matmul(x, b.weight((256, 256), name=f"w{i}")) for i in range(n)]
    return b.finish(outs + ([b.ewadd(outs[0], x)] if residual else []))


def _setup(residual: bool = False) -> tuple[object, object, tensat_py.Graph]:
    rules, model = load_rules("taso"), get_cost_model("roofline", "t4")
    first = tensat_py.optimize(
        _projections(residual=residual), k_multi=1, merge_trees=False, verify=False, solver="highs"
    )
    return rules, model, first.graph


def _matmuls(graph: tensat_py.Graph) -> int:
    return sum(op == "matmul" for op, _ in graph.to_flat())


def test_second_stage_merges_the_third_projection_into_the_extracted_pair() -> None:
    from tensat_py.policies.staged import StagedMultiPolicy, refine

    rules, model, p1 = _setup()
    assert _matmuls(p1) == 2  # k_multi=1: one pair merged, the third projection alone
    ref = refine(p1, rules, model, StagedMultiPolicy(None).bind(rules, model), solver="highs")
    assert ref.improved and ref.admitted > 0 and ref.status == "optimal"
    assert ref.cost < model.graph_cost(p1)
    assert _matmuls(ref.graph) == 1  # all three in one matmul
    k2 = tensat_py.optimize(_projections(), verify=False, solver="highs", k_multi=2)
    assert ref.cost == pytest.approx(k2.cost_after)


def test_second_stage_searches_rules_with_a_prior_and_applies_no_single_pattern_match() -> None:
    from tensat_py.policies.multi import MultiModel
    from tensat_py.policies.staged import StagedMultiPolicy

    rules, model, p1 = _setup(residual=True)
    names = rules.names()
    shipped = StagedMultiPolicy.load().model
    prior = {"matmul-merge-rhs": 0.2, "matmul-merge-lhs": 0.0}
    pol = StagedMultiPolicy(MultiModel(shipped.booster, prior)).bind(rules, model)
    assert pol.multi_rules(0) == [names.index("matmul-merge-rhs")]
    assert pol.search_multi(0, 0) and not pol.search_multi(1, 0)
    seen: list[tuple[str, bool]] = []
    inner = pol.select

    def spy(view: dict) -> list[bool]:
        keep = inner(view)
        seen.extend((names[r], k) for r, k in zip(view["rules"], keep, strict=True))
        return keep

    pol.select = spy  # type: ignore[method-assign]
    _core.EGraph(p1.to_flat()).saturate(rules, k_multi=0, iter_limit=1, policy=pol)
    multi = {d[0] for d in rules.describe() if len(d[1]) > 1}
    assert {n for n, _ in seen if n in multi} == {"matmul-merge-rhs"}
    assert any(k for n, k in seen if n in multi)
    assert any(n not in multi for n, _ in seen)  # single-pattern matches were found ...
    assert not any(k for n, k in seen if n not in multi)  # ... and none applied
    assert pol.admitted == sum(k for _, k in seen) > 0


def test_second_stage_without_an_admitted_match_extracts_nothing() -> None:
    from tensat_py.policies.multi import MultiModel
    from tensat_py.policies.staged import StagedMultiPolicy, refine

    rules, model, p1 = _setup()
    shipped = StagedMultiPolicy.load().model
    pol = StagedMultiPolicy(MultiModel(shipped.booster, {})).bind(rules, model)
    ref = refine(p1, rules, model, pol)
    assert (ref.status, ref.improved, ref.admitted) == ("nothing admitted", False, 0)
    assert ref.graph is p1 and ref.export is None


def test_learned_policy_reaches_k_multi_2_on_three_projections_and_verifies_it() -> None:
    g = _projections()
    # Tensat's pairwise merges: merge trees would merge all three in the first stage
    default = tensat_py.optimize(g, solver="highs", k_multi=1, merge_trees=False)
    k2 = tensat_py.optimize(g, solver="highs", k_multi=2, merge_trees=False)
    got = tensat_py.optimize(g, solver="highs", policy="learned", merge_trees=False)
    assert got.stats["policy_fallback"] is False and got.stats["policy_admitted"] > 0
    assert got.cost_after < default.cost_after
    assert got.cost_after == pytest.approx(k2.cost_after)
    assert got.verify is not None and got.verify.passed
    assert _matmuls(got.graph) == 1 and got.message == ""


def test_shipped_model_chooses_the_merge_rules_the_zoo_gains_from() -> None:
    from tensat_py.policies.staged import StagedMultiPolicy

    prior = StagedMultiPolicy.load().model.rule_prior
    assert prior["matmul-merge-rhs"] > 0 and prior["conv-relu-enlarge-merge"] > 0
    # ResNeXt-50's and ResNet-50's second stages offer ReLU merges that never pay off.
    assert prior.get("relu-merge-4d-axis0", 0.0) == 0 == prior.get("relu-merge-4d-axis1", 0.0)


def test_learned_policy_keeps_the_default_program_when_the_second_stage_fails_verification(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verify = importlib.import_module("tensat_py.verify")  # the package exports verify()

    def failing(original: object, optimized: object, **kw: object) -> object:
        return verify.VerifyReport(1.0, 1.0, False, message="outputs differ")

    default = tensat_py.optimize(_projections(), solver="highs", k_multi=1, merge_trees=False)
    monkeypatch.setattr(verify, "verify", failing)
    got = tensat_py.optimize(_projections(), solver="highs", policy="learned", merge_trees=False)
    assert got.stats["policy_fallback"] is True and got.stats["policy_admitted"] > 0
    assert got.cost_after == default.cost_after
    assert "failed verification" in got.message and "kept the default" in got.message


def test_second_stage_keeps_the_program_when_its_merges_do_not_pay_off() -> None:
    from tensat_py.policies.staged import StagedMultiPolicy, refine

    b = GraphBuilder()
    x, y = (b.input((1, 64, 56, 56), name=n) for n in ("x", "y"))
    rules, model = load_rules("taso"), get_cost_model("roofline", "t4")
    p1 = tensat_py.optimize(b.finish([b.relu(x), b.relu(y)]), verify=False, solver="highs").graph
    ref = refine(p1, rules, model, StagedMultiPolicy(None).bind(rules, model), solver="highs")
    # The ReLU merge was admitted and extracted, and it is no cheaper: the input stays.
    assert ref.admitted > 0 and ref.status == "optimal" and ref.export is not None
    assert not ref.improved and ref.graph is p1 and ref.cost == model.graph_cost(p1)


def test_second_stage_program_passes_the_same_gates_as_any_candidate() -> None:
    # min_gain 0.9: neither stage gains 90 %, so the input stays, though the second stage's
    # program is cheaper under the cost model.
    got = tensat_py.optimize(_projections(), solver="highs", policy="learned", min_gain=0.9)
    assert got.cost_after == got.cost_before
    assert got.stats["policy_fallback"] is True and got.stats["policy_admitted"] > 0
    assert "not kept" in got.message and "kept the default" in got.message


def _two_relu_convolutions() -> tensat_py.Graph:
    """Two 1x1 ReLU convolutions of one input, with kernels of one size."""
    b = GraphBuilder()
    x = b.input((1, 4, 8, 8), name="x")
    return b.finish([b.conv2d(x, (8, 4, 1, 1), act="relu") for _ in range(2)])


def _labels(cost_model: object) -> tuple[list[str], list[int]]:
    """Rule and label of each multi-pattern match of iteration 0 of Tensat's schedule on
    :func:`_two_relu_convolutions` (the later iterations apply the single-pattern rules,
    ``enlarge-same-size`` among them), with the ILP's program under ``cost_model``."""
    from tensat_py.egraph import ExtractionProblem
    from tensat_py.extract import extract
    from tensat_py.policies.multi import RecordingPolicy, label_matches

    rules = load_rules("taso")
    rec = RecordingPolicy(rules, cost_model, record_from=0)
    eg = _core.EGraph(_two_relu_convolutions().to_flat())
    eg.saturate(rules, k_multi=1, policy=rec)
    export = eg.export()
    problem = ExtractionProblem.from_export(export, cost_model.costs_for_export(export))
    res = extract(problem, extractor="ilp", solver="highs")
    y = label_matches(rec, rules, eg, export, set(res.choices))
    return rec.rules, [int(v) for v in y]


def test_labels_count_a_merge_the_program_uses() -> None:
    rules, y = _labels(get_cost_model("roofline", "t4"))
    assert "conv-relu-enlarge-merge" in rules and sum(y) > 0


def test_labels_ignore_an_operand_that_an_identity_joined_to_the_target() -> None:
    # No merged (16-channel) convolution pays under this model, so the program keeps the
    # two convolutions and their kernels. `conv-relu-enlarge-merge` built (enlarge w1 w2),
    # which `enlarge-same-size` joined to w1's e-class: the program uses w1, not the merge.
    from tensat_py.cost.base import OpCostModel

    class NoWideConvolution(OpCostModel):
        name, device = "no-wide-convolution", "cpu"

        def cost(self, ctx: Any) -> float:
            if ctx.op != "conv2d":
                return 0.0
            return 1.0 if ctx.output.shape[1] > 8 else 0.1

    rules, y = _labels(NoWideConvolution())
    assert "conv-relu-enlarge-merge" in rules and sum(y) == 0
