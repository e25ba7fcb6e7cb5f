"""`enlarge-same-size` (rules/taso.rules, the one rule there that Tensat lacks): an
`enlarge` to a kernel of the same size is the kernel itself, so the weights that two
merges of one convolution pair stack fall into one e-class."""

from tensat_py import _core, models, optimize
from tensat_py.cost import get_cost_model
from tensat_py.graph import Graph
from tensat_py.pipeline import load_rules


def _enlarges() -> list[tuple[str, list[int]]]:
    """``(enlarge w1 w2)`` of two 1x1 kernels and ``(enlarge w1 w3)`` of a 1x1 and a 3x3,
    as a flat node list."""
    g = Graph()
    w1 = g.add_weight("w1", (8, 4, 1, 1))
    w2 = g.add_weight("w2", (8, 4, 1, 1))
    w3 = g.add_weight("w3", (8, 4, 3, 3))
    same = g.add_node("enlarge", inputs=[w1, w2])
    larger = g.add_node("enlarge", inputs=[w1, w3])
    g.outputs = [same, larger]
    return g.to_flat()


def test_enlarge_to_the_same_size_joins_the_kernels_eclass() -> None:
    flat = _enlarges()
    eg = _core.EGraph(flat)
    eg.saturate(load_rules("taso"), k_multi=0, iter_limit=1)
    w1, same = flat[:2], flat[:7]
    larger = flat[:6] + [("enlarge", [1, 5])]
    assert eg.equivalent(same, w1)
    assert not eg.equivalent(larger, w1)  # a 1x1 kernel padded to 3x3 is another tensor


def test_nasneta_shares_its_merged_convolutions_at_k_multi_1() -> None:
    # Without the rule, NasNet-A's k_multi=1 optimum is 7.3 % (README Table 1 before it):
    # the same merged 1x1 convolution built by `conv-relu-enlarge-merge` and by the
    # mirrored merge had weights in two e-classes, so it was computed twice.
    g = models.get("nasneta")
    model = get_cost_model("roofline", "t4")
    res = optimize(g, k_multi=1, cost_model=model, solver="highs", verify=False)
    speedup = model.graph_cost(g) / model.graph_cost(res.graph) - 1
    assert speedup > 0.078
