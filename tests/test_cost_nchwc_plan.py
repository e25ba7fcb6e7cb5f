"""onnxruntime's NCHWc layout over a whole program: ``nchwc.nchwc_plan`` against the
reorders onnxruntime's own optimised graph holds, and ``profile`` / ``learned`` pricing a
program with them. Prices come from stored records, never from this machine's speed."""

import collections

import pytest
from ort_helpers import optimised_ops
from tensat_py.builder import GraphBuilder
from tensat_py.cost import layout, nchwc
from tensat_py.cost.base import graph_contexts
from tensat_py.cost.database import Record
from tensat_py.cost.ort_fusion import ort_fusions
from tensat_py.cost.profile import ProfileCostModel, signature


def _ort(graph) -> tuple[int, int]:
    """(ReorderInput, ReorderOutput) nodes in onnxruntime's optimised graph of ``graph``."""
    ops = optimised_ops(graph)
    return ops["ReorderInput"], ops["ReorderOutput"]


def _plan(graph, block) -> tuple[int, int]:
    plan = nchwc.nchwc_plan(graph, block, ort_fusions(graph))
    kinds = collections.Counter(k for k, _ in plan.reorders)
    return kinds["input"], kinds["output"]


def _merged_cell(b: GraphBuilder):
    """NasNet-A's pattern after Tensat's merge: two 1x1 convolutions of one input merged
    into one and a split, whose parts meet NCHWc tensors in a sum, a ReLU, a pool and a
    concat."""
    x = b.input((1, 32, 14, 14), "x")
    h = b.conv2d(x, (32, 32, 1, 1), act="relu")
    w = b.concat(0, [b.weight((16, 32, 1, 1)), b.weight((16, 32, 1, 1))])
    a, c = b.split(b.conv2d(h, w), 1)
    d = b.conv2d(h, (16, 32, 3, 3))
    s = b.ewadd(a, d)
    p = b.poolavg(b.relu(c), 3, 1)
    return b.finish([b.conv2d(b.concat(1, [s, p, d]), (32, 48, 1, 1))])


def _squeeze_excite(b: GraphBuilder):
    """MobileNetV3's block: a per-channel gate (global pool, 1x1 convolutions, hard
    sigmoid) broadcast onto the feature map, which no NCHWc kernel multiplies."""
    x = b.input((1, 16, 14, 14), "x")
    h = b.conv2d(x, (32, 16, 1, 1), act="relu")
    g = b.conv2d(b.conv2d(b.op("global_avg_pool", h), (8, 32, 1, 1), act="relu"), (32, 8, 1, 1))
    gate = b.op("hard_sigmoid", g, alpha=0.2, beta=0.5)
    return b.finish([b.conv2d(b.op("mul", h, gate), (16, 32, 1, 1))])


def _few_channels(b: GraphBuilder):
    """Convolutions of 3 (image) and 4 input channels read NCHW; one of 12 input channels
    reads its NCHWc input padded to the block; one of 18 is not NCHWc at all."""
    x = b.input((1, 3, 16, 16), "x")
    h = b.conv2d(x, (4, 3, 3, 3), act="relu")
    k = b.conv2d(b.conv2d(b.conv2d(h, (12, 4, 1, 1)), (16, 12, 1, 1)), (16, 16, 1, 1))
    m = b.conv2d(b.conv2d(k, (18, 16, 1, 1)), (16, 18, 1, 1))
    return b.finish([b.conv2d(m, (16, 16, 1, 1))])


def _padded_and_upsampled(b: GraphBuilder):
    """A zero pad folded into the convolution after it; a nearest x2 resize (onnxruntime's
    NCHWc Upsample) joined to an NCHWc tensor."""
    x = b.input((1, 16, 8, 8), "x")
    h = b.conv2d(x, (16, 16, 1, 1), act="relu")
    p = b.op("pad", h, pads=(0, 0, 1, 1, 0, 0, 1, 1), mode="constant", value=0.0)
    q = b.conv2d(p, (16, 16, 3, 3), padding="valid")
    u = b.op("resize", b.conv2d(q, (16, 16, 1, 1), stride=2), sizes=(1, 16, 8, 8), mode="nearest")
    return b.finish([b.conv2d(b.concat(1, [u, q]), (16, 32, 1, 1))])


def _erf_gelu(b: GraphBuilder):
    """The erf form of GELU between two convolutions: onnxruntime fuses it to one Gelu
    and runs it on the NCHWc tensor."""
    x = b.input((1, 16, 8, 8), "x")
    h = b.conv2d(x, (16, 16, 1, 1))

    def k(v):
        return b.op("scalar", value=v, dtype="float32")

    e = b.op("erf", b.op("div", h, k(2.0**0.5)))
    y = b.op("mul", b.op("mul", h, b.op("add", e, k(1.0))), k(0.5))
    return b.finish([b.conv2d(y, (16, 16, 1, 1))])


def _c2f(b: GraphBuilder, per_part: bool = False):
    """YOLOv8's C2f block: a convolution with SiLU split in two channel slices, the second
    through a bottleneck, all three concatenated; with ``per_part``, one convolution per
    slice instead (the ``slice-conv-channels`` rewrite)."""
    x = b.input((1, 16, 20, 20), "x")

    def silu(t):
        return b.op("ewmul", t, b.op("sigmoid", t))

    if per_part:
        a, c = (silu(b.conv2d(x, (16, 16, 1, 1))) for _ in range(2))
    else:
        h = silu(b.conv2d(x, (32, 16, 1, 1)))
        sl = {"axes": (1,), "steps": (1,)}
        a = b.op("slice", h, starts=(0,), ends=(16,), **sl)
        c = b.op("slice", h, starts=(16,), ends=(32,), **sl)
    m = b.ewadd(c, silu(b.conv2d(silu(b.conv2d(c, (16, 16, 3, 3))), (16, 16, 3, 3))))
    return b.finish([silu(b.conv2d(b.concat(1, [a, c, m]), (32, 48, 1, 1)))])


PROGRAMS = {
    "merged convolutions and a split": _merged_cell,
    "squeeze-excite gate": _squeeze_excite,
    "few input channels": _few_channels,
    "pad and upsample": _padded_and_upsampled,
    "erf gelu": _erf_gelu,
    "split by channel slices": _c2f,
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_plan_has_the_reorders_of_onnxruntimes_optimised_graph(name, block):
    graph = PROGRAMS[name](GraphBuilder())
    got = _plan(graph, block)
    assert got == _ort(graph)
    assert sum(got) > 0


def test_a_convolution_per_slice_keeps_the_c2f_block_in_nchwc(block):
    sliced, per_part = _c2f(GraphBuilder()), _c2f(GraphBuilder(), per_part=True)
    assert _plan(per_part, block) == _ort(per_part)
    assert sum(_plan(per_part, block)) < sum(_plan(sliced, block))


#: Activations between two convolutions: True where onnxruntime runs them on NCHWc.
ACTIVATIONS = {
    "relu": ({}, True),
    "sigmoid": ({}, True),
    "tanh": ({}, True),
    "hard_sigmoid": ({"alpha": 0.2, "beta": 0.5}, True),
    "hard_swish": ({}, True),
    "gelu": ({}, True),
    "leaky_relu": ({"alpha": 0.1}, False),
    "clip": ({"lo": 0.0, "hi": 6.0}, False),
    "exp": ({}, False),
    "erf": ({}, False),
}


@pytest.mark.parametrize("op", list(ACTIVATIONS))
def test_an_activation_between_convolutions_keeps_or_leaves_nchwc_as_onnxruntime_does(op, block):
    params, kept = ACTIVATIONS[op]
    b = GraphBuilder()
    x = b.input((1, 16, 8, 8), "x")
    h = b.conv2d(x, (16, 16, 1, 1))
    # h is also an output, so onnxruntime cannot fold the activation into its convolution
    graph = b.finish([b.conv2d(b.op(op, h, **params), (16, 16, 1, 1)), h])
    got = _plan(graph, block)
    assert got == _ort(graph)
    assert (got == (1, 2)) == kept  # x in, the two outputs out: nothing around `op`


@pytest.mark.parametrize("op", ["leaky_relu", "clip", "bias then clip"])
def test_what_onnxruntime_folds_into_a_convolution_stays_nchwc(op, block):
    b = GraphBuilder()
    x = b.input((1, 16, 8, 8), "x")
    h = b.conv2d(x, (16, 16, 1, 1))
    if op == "bias then clip":  # ConvAddFusion, then ConvActivationFusion
        h, op = b.op("add", h, b.weight((1, 16, 1, 1))), "clip"
    a = b.op(op, h, **ACTIVATIONS[op][0])
    graph = b.finish([b.conv2d(a, (16, 16, 1, 1))])
    assert _plan(graph, block) == _ort(graph) == (1, 1)


def test_no_plan_without_nchwc():
    graph = _merged_cell(GraphBuilder())
    plan = nchwc.nchwc_plan(graph, 0)
    assert plan.reorders == plan.measured == () and not plan.nchwc


def _priced(db, fp, graph, seconds: float, reorder: float) -> None:
    """Every operator of ``graph`` stored at ``seconds``, every reorder at ``reorder``."""
    recs = [Record(layout.BLOCK_SIGNATURE, "__nchwc_block__", 8, 0.0, 0, 8)]
    for c in graph_contexts(graph):
        recs.append(Record(signature(c), c.op, seconds, 0.0, 7, seconds))
    plan = nchwc.nchwc_plan(graph, 8)
    split = [r for c in graph_contexts(graph) for r in layout.reorders(c, 8)]
    for kind, shape in {*plan.reorders, *plan.measured, *split}:
        sig = layout.reorder_signature(kind, shape)
        recs.append(Record(sig, layout.reorder_op(kind), reorder, 0.0, 7, reorder))
    db.put(fp, recs)


def test_profile_prices_the_programs_reorders_in_place_of_those_its_figures_hold(cache):
    graph = _merged_cell(GraphBuilder())
    model = ProfileCostModel("cpu")
    _priced(model.db, model.fingerprint, graph, 1.0, 0.25)
    call, _ = model.overhead()
    ctxs = model.program_contexts(graph)
    plan = nchwc.nchwc_plan(graph, 8)
    figures = sum(model.costs(ctxs))
    # Each of the program's reorders added, each one held by an NCHWc convolution's or
    # pool's figure, or by the split's estimate, taken out.
    held = len(plan.measured) + sum(len(layout.reorders(c, 8)) for c in ctxs)
    want = figures + (len(plan.reorders) - held) * (0.25 - call)
    assert model.graph_cost(graph) == pytest.approx(want)
    assert (len(plan.reorders), len(plan.measured), held) == (7, 10, 13)
    assert model.measured == 0
    off = ProfileCostModel("cpu", db=cache / "off.sqlite", fusion=False)
    _priced(off.db, off.fingerprint, graph, 1.0, 0.25)
    assert off.graph_cost(graph) == pytest.approx(sum(off.costs(off.program_contexts(graph))))


def test_learned_prices_the_programs_reorders_at_the_cached_rate(cache):
    pytest.importorskip("lightgbm", reason="the 'learn' extra (LightGBM) is not installed")
    from tensat_py.cost.learned import LearnedCostModel

    graph = _merged_cell(GraphBuilder())
    prof = ProfileCostModel("cpu")
    _priced(prof.db, prof.fingerprint, graph, 1.0, 0.25)
    call, per_node = prof.overhead()
    rates = layout.ReorderCurves.from_records(prof.db.records(prof.fingerprint), call, per_node)
    kw = {"overhead": (call, per_node), "nchwc": (8, rates)}
    model = LearnedCostModel(lambda x: [5.0] * len(x), "cpu", prof.fingerprint, **kw)
    plan = nchwc.nchwc_plan(graph, 8)
    ctxs = model.program_contexts(graph)
    held = [*plan.measured, *(r for c in ctxs for r in layout.reorders(c, 8))]
    want = sum(model.costs(ctxs)) + sum(rates.price(k, s) for k, s in plan.reorders)
    want -= sum(rates.price(k, s) for k, s in held)
    assert model.graph_cost(graph) == pytest.approx(want)
    assert model.graph_cost(graph) < sum(model.costs(ctxs))  # fewer reorders than held
