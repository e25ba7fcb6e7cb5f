"""Roofline cost model: formulas, zero-cost nodes, presets, export costs."""

import pytest
from tensat_py.builder import GraphBuilder
from tensat_py.cost import PRESETS, get_cost_model
from tensat_py.cost.roofline import RooflineCostModel, flops_bytes
from test_builder import fake_export


def test_conv_and_matmul_formulas():
    f, b = flops_bytes(
        "conv2d", {"act": 0}, [(1, 8, 10, 10), (16, 4, 3, 3)], (1, 16, 10, 10)
    )  # 2 groups
    assert f == 2 * 16 * 10 * 10 * 4 * 3 * 3
    assert b == 4 * (800 + 16 * 4 * 9 + 1600)
    f, _ = flops_bytes("matmul", {"act": 2}, [(4, 5, 6), (4, 6, 7)], (4, 5, 7))
    assert f == 2 * 4 * 5 * 7 * 6 + 4 * 5 * 7
    f, b = flops_bytes("concat", {"axis": 0, "ndim": 1}, [(3,), (5,)], (8,))
    assert f == 0 and b == 4 * 16


def test_roofline_bound_and_launch():
    m = RooflineCostModel("t4")
    p = PRESETS["t4"]
    big = m.node_cost("matmul", {"act": 0}, [(1024, 1024), (1024, 1024)], (1024, 1024))
    assert big == pytest.approx(2 * 1024**3 / p.peak_flops + p.launch)  # compute bound
    ew = m.node_cost("relu", {}, [(1024, 1024)], (1024, 1024))
    assert ew == pytest.approx(8 * 1024 * 1024 / p.bandwidth + p.launch)  # memory bound


def test_zero_cost_nodes():
    m = get_cost_model("roofline", "a100")
    for op in ("input", "weight", "noop", "split", "split_0", "split_1", "reshape"):
        assert m.node_cost(op, {}, [(4, 4)], (4, 4)) == 0
    assert m.node_cost("relu", {}, [(4, 4)], (4, 4), constant=True) == 0


def test_presets_and_errors():
    assert set(PRESETS) >= {"t4", "a100", "h100", "cpu"}
    assert PRESETS["h100"].peak_flops > PRESETS["a100"].peak_flops > PRESETS["t4"].peak_flops
    with pytest.raises(ValueError, match="preset"):
        RooflineCostModel("tpu")
    with pytest.raises(ValueError, match="cost model"):
        get_cost_model("magic")


def test_graph_cost_equals_export_costs():
    b = GraphBuilder()
    x = b.input((1, 4, 8, 8), name="x")
    w = b.concat(0, [b.weight((4, 4, 3, 3)), b.weight((4, 4, 3, 3))])  # constant: free
    y = b.conv2d(x, w, act="relu")
    p, q = b.split(y, 1)
    g = b.finish([b.ewadd(p, q), b.poolavg(y, 3, 1)])
    m = RooflineCostModel("cpu")
    total = m.graph_cost(g)
    assert total > 0
    costs = m.costs_for_export(fake_export(g.to_flat()))
    assert sum(costs) == pytest.approx(total)
    conv_only = m.node_cost("conv2d", {"act": 2}, [(1, 4, 8, 8), (8, 4, 3, 3)], (1, 8, 8, 8))
    assert conv_only < total


def test_zero_cost_ops_come_from_the_registry():
    from tensat_py.cost import roofline

    assert roofline.ZERO_COST_OPS >= {"input", "weight", "noop", "split", "reshape"}
    assert "conv2d" not in roofline.ZERO_COST_OPS
