"""The cost-model protocol: roofline figures unchanged, names and objects accepted,
unpriceable operators are errors, producers seen by fusion-aware models."""

import pytest
import tensat_py
from tensat_py import models
from tensat_py.builder import GraphBuilder
from tensat_py.cost import (
    COST_MODELS,
    CostModel,
    OpCostModel,
    RooflineCostModel,
    get_cost_model,
    register_cost_model,
)
from tensat_py.cost.base import graph_contexts

#: RooflineCostModel(device).graph_cost(zoo model) before the protocol refactor (repr).
GOLDEN = {
    ("bert", "t4"): 0.001028631676049383,
    ("squeezenet", "cpu"): 0.006344491733333337,
    ("resnet50", "cpu"): 0.05244551431111115,
    ("nasrnn", "t4"): 0.0013492512000000015,
}


@pytest.mark.parametrize(("name", "device"), sorted(GOLDEN))
def test_roofline_figures_are_bit_identical_to_before_the_protocol(name, device):
    assert RooflineCostModel(device).graph_cost(models.get(name)) == GOLDEN[(name, device)]


def test_every_builtin_model_class_implements_the_protocol():
    assert isinstance(RooflineCostModel("cpu"), CostModel)
    from tensat_py.cost.profile import ProfileCostModel

    assert {"roofline", "profile", "learned"} <= set(COST_MODELS)
    assert all(hasattr(ProfileCostModel, m) for m in ("cost", "graph_cost", "costs_for_export"))


def _small():
    b = GraphBuilder()
    x = b.input((1, 8, 8, 8), "x")
    w = b.weight((8, 8, 3, 3), "w")
    y = b.relu(b.conv2d(x, w, stride=1, padding="same"))
    return b.finish(y)


class Counting(OpCostModel):
    """One second per kernel-launching, non-constant node."""

    name = "counting"
    device = "anywhere"

    def __init__(self):
        self.seen = []

    def cost(self, ctx):
        self.seen.append(ctx.op)
        return 0.0 if ctx.constant or ctx.op in ("input", "weight") else 1.0


def test_optimize_takes_any_object_that_implements_the_protocol():
    model = Counting()
    res = tensat_py.optimize(_small(), cost_model=model, verify=False, time_limit=10)
    assert res.cost_before == 2.0  # conv + relu
    assert res.cost_after == 1.0  # relu fused into the conv
    assert "conv2d" in model.seen


def test_registry_maps_a_name_to_a_factory():
    register_cost_model("counting-test", lambda device: Counting())
    try:
        assert isinstance(get_cost_model("Counting-Test", "cpu"), Counting)
        with pytest.raises(ValueError, match="already registered"):
            register_cost_model("counting-test", lambda device: Counting())
    finally:
        COST_MODELS.pop("counting-test")


def test_unknown_model_name_is_an_error_listing_the_known():
    with pytest.raises(ValueError, match="unknown cost model 'nope'.*roofline"):
        get_cost_model("nope", "cpu")


def test_an_operator_a_model_cannot_price_is_an_error_naming_it():
    with pytest.raises(ValueError, match="`frobnicate`"):
        RooflineCostModel("cpu").node_cost("frobnicate", {}, [(2, 2)], (2, 2))


def test_graph_contexts_name_the_producer_of_each_operand_and_constant_flags():
    ctxs = {c.op: c for c in graph_contexts(_small())}
    assert ctxs["relu"].producers == (frozenset({"conv2d"}),)
    assert ctxs["conv2d"].operand_constant == (False, True)
