"""The built-in ``layout`` rule set: a squeeze-excite gate ``[N, C, 1, 1]`` times
``x`` ``[N, C, H, W]`` offered with the gate resized (nearest) to the shape of ``x``
(``_core.RuleSet.layout()``, docs/rules.md)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tensat_py import _core
from tensat_py.frontends import onnx as tonnx
from tensat_py.pipeline import load_rules

LAYOUT_RULES = ["se-gate-upsample", "se-gate-upsample-l"]


def test_layout_names_the_two_gate_rules() -> None:
    assert load_rules("layout").names() == LAYOUT_RULES
    assert _core.RuleSet.layout().names() == LAYOUT_RULES


def test_layout_joins_other_rule_sets() -> None:
    taso = load_rules("taso").names()
    assert load_rules("taso+layout").names() == [*taso, *LAYOUT_RULES]


def test_a_misspelt_layout_is_suggested() -> None:
    with pytest.raises(FileNotFoundError) as e:
        load_rules("layuot")
    msg = str(e.value)
    assert "did you mean 'layout'?" in msg
    assert "built in: fold, layout" in msg


def _conv_weight(name: str, seed: int) -> TensorProto:
    a = np.random.default_rng(seed).standard_normal((16, 16, 1, 1)).astype(np.float32)
    return numpy_helper.from_array(a * 0.1, name)


def _squeeze_excite() -> onnx.ModelProto:
    """x [1,16,8,8] -> 1x1 Conv -> y; g = Sigmoid(1x1 Conv(GlobalAveragePool(y)))
    [1,16,1,1]; out = 1x1 Conv(y * g)."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["y"]),
        helper.make_node("GlobalAveragePool", ["y"], ["p"]),
        helper.make_node("Conv", ["p", "w2"], ["q"]),
        helper.make_node("Sigmoid", ["q"], ["g"]),
        helper.make_node("Mul", ["y", "g"], ["m"]),
        helper.make_node("Conv", ["m", "w3"], ["out"]),
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "se",
        [helper.make_tensor_value_info("x", f, [1, 16, 8, 8])],
        [helper.make_tensor_value_info("out", f, [1, 16, 8, 8])],
        [_conv_weight(w, seed) for seed, w in enumerate(["w1", "w2", "w3"])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def test_layout_offers_the_gate_upsampled_to_the_gated_shape() -> None:
    eg = _core.EGraph(tonnx.load(_squeeze_excite()).to_flat())
    eg.saturate(load_rules("layout"))
    ex = eg.export()
    ops, eclass, children = ex["node_op"], ex["node_eclass"], ex["node_children"]
    # Each class's node ops.
    class_ops: dict[int, list[str]] = {}
    for op, c in zip(ops, eclass, strict=True):
        class_ops.setdefault(c, []).append(op)
    resizes = [i for i, op in enumerate(ops) if op == "resize"]
    assert len(resizes) == 1
    gate, sizes, mode = (class_ops[c] for c in children[resizes[0]])
    assert (gate, sizes, mode) == (["sigmoid"], ["[1,16,8,8]"], ["nearest"])
    # The product with the resized gate joined the original product's e-class.
    resized = eclass[resizes[0]]
    muls = [i for i, op in enumerate(ops) if op == "mul"]
    assert len(muls) == 2 and eclass[muls[0]] == eclass[muls[1]]
    assert sum(resized in children[i] for i in muls) == 1
