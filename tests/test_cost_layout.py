"""onnxruntime's NCHWc layout around a split of a convolution's output: which reorders
``layout.reorders`` predicts, that onnxruntime inserts exactly those, and that ``profile``
and ``learned`` add their figures. Prices come from stored records, never from this
machine's speed."""

import pytest
from ort_helpers import optimised_ops
from tensat_py.builder import GraphBuilder
from tensat_py.cost import layout
from tensat_py.cost.base import CostContext, graph_contexts
from tensat_py.cost.database import ProfileDatabase, Record
from tensat_py.cost.profile import ProfileCostModel, signature
from tensat_py.graph import TensorType

try:
    import lightgbm  # noqa: F401

    HAVE_LGB = True
except ImportError:
    HAVE_LGB = False

X = TensorType((1, 32, 8, 8), "float32")
HALF = TensorType((1, 16, 8, 8), "float32")


def _split(producers=("conv2d",), parts=(HALF, HALF), axis=1, x=X):
    return CostContext("split", {"axis": axis}, [x], parts, producers=(frozenset(producers),))


def test_a_split_of_a_convolution_reorders_its_input_out_and_each_part_back():
    assert layout.reorders(_split(), 8) == [
        ("output", (1, 32, 8, 8)),
        ("input", (1, 16, 8, 8)),
        ("input", (1, 16, 8, 8)),
    ]
    # a fused activation or a sum onto a convolution also leaves NCHWc
    assert len(layout.reorders(_split(("conv2d+act",)), 8)) == 3
    assert len(layout.reorders(_split(("ewadd<conv2d",)), 8)) == 3
    # a part whose channels the block does not divide is not NCHWc after the split
    odd = (TensorType((1, 28, 8, 8), "float32"), TensorType((1, 4, 8, 8), "float32"))
    assert layout.reorders(_split(parts=odd), 8) == [("output", (1, 32, 8, 8))]


def test_no_reorders_off_the_nchwc_path():
    assert layout.reorders(_split(), 0) == []  # no NCHWc on this CPU
    assert layout.reorders(_split(("concat",)), 8) == []  # not a convolution's output
    assert layout.reorders(_split(axis=0), 8) == []
    assert layout.reorders(_split(x=TensorType((1, 36, 8, 8), "float32")), 8) == []


def _slice(start, end, producers=("ewmul",), x=X):
    part = TensorType((1, end - start, 8, 8), "float32")
    params = {"starts": (start,), "ends": (end,), "axes": (1,), "steps": (1,)}
    return CostContext("slice", params, [x], part, producers=(frozenset(producers),))


def test_a_channel_slice_reorders_like_a_split_part():
    # the first part carries the input's reorder out, each aligned part its own back in
    assert layout.reorders(_slice(0, 16), 8) == [("output", X.shape), ("input", HALF.shape)]
    assert layout.reorders(_slice(16, 32), 8) == [("input", HALF.shape)]
    assert layout.reorders(_slice(16, 28), 8) == []  # 12 channels: not NCHWc after
    assert layout.reorders(_slice(0, 16, ("reshape",)), 8) == []  # operand not NCHWc
    assert layout.reorders(_slice(0, 16), 0) == []


def _conv_pair(merged: bool):
    """Two 1x1 convolutions of one input, each read by a 3x3 convolution, summed: as
    given, or merged (one convolution of the concatenated weights, then a split)."""
    b = GraphBuilder()
    x = b.input((1, 32, 8, 8), "x")
    w1, w2 = b.weight((16, 32, 1, 1), "w1"), b.weight((16, 32, 1, 1), "w2")
    if merged:
        a, c = b.split(b.conv2d(x, b.concat(0, [w1, w2]), stride=1, padding="same"), 1)
    else:
        a = b.conv2d(x, w1, stride=1, padding="same")
        c = b.conv2d(x, w2, stride=1, padding="same")
    v1, v2 = b.weight((16, 16, 3, 3), "v1"), b.weight((16, 16, 3, 3), "v2")
    y = b.ewadd(
        b.conv2d(a, v1, stride=1, padding="same"), b.conv2d(c, v2, stride=1, padding="same")
    )
    return b.finish([y])


def _ort_reorders(graph) -> int:
    ops = optimised_ops(graph)
    return ops["ReorderInput"] + ops["ReorderOutput"]


def test_onnxruntime_inserts_exactly_the_predicted_reorders():
    block = layout.nchwc_block()
    if not block:
        pytest.skip("onnxruntime runs no NCHWc convolution on this CPU (no AVX2)")
    merged = _conv_pair(True)
    split = next(c for c in graph_contexts(merged) if c.op == "split")
    extra = _ort_reorders(merged) - _ort_reorders(_conv_pair(False))
    assert extra == len(layout.reorders(split, block)) == 3


def test_a_reorder_runs_alone_on_onnxruntime():
    from tensat_py.cost.profile import OrtBackend

    for kind in ("input", "output"):
        m = OrtBackend().reorder(kind, (1, 16, 8, 8))
        assert m.reps >= 7 and m.low > 0


def _stored(db, fp, block: int, seconds: float, split) -> None:
    recs = [Record(layout.BLOCK_SIGNATURE, "__nchwc_block__", block, 0.0, 0, block)]
    for kind, shape in layout.reorders(split, 8):
        sig = layout.reorder_signature(kind, shape)
        recs.append(Record(sig, f"__reorder_{kind}__", seconds, 0.0, 7, seconds))
    recs.append(Record(signature(split), "split", seconds, 0.0, 7, seconds))
    db.put(fp, recs)


def test_profile_prices_a_split_of_a_convolution_with_its_reorders(cache):
    m = ProfileCostModel("cpu")
    split = _split()
    _stored(m.db, m.fingerprint, 8, 1.0, split)
    call, _ = m.overhead()
    assert m.cost(split) == pytest.approx(4 * (1.0 - call))  # the split and 3 reorders
    assert m.cost(_split(("concat",))) == pytest.approx(1.0 - call)
    assert m.measured == 0
    other = ProfileCostModel("cpu", db=cache / "other.sqlite")  # a CPU without NCHWc
    _stored(other.db, other.fingerprint, 0, 1.0, split)
    assert other.cost(split) == pytest.approx(1.0 - other.overhead()[0])  # the split alone
    assert other.measured == 0


@pytest.mark.skipif(not HAVE_LGB, reason="the 'learn' extra (LightGBM) is not installed")
def test_learned_prices_reorders_and_uses_measured_figures_where_cached(cache):
    from tensat_py.cost.learned import LearnedCostModel

    def predictor(x):  # every operator predicted at 5 seconds
        return [5.0] * len(x)

    db = ProfileDatabase()
    prof = ProfileCostModel("cpu", db=db)
    split = _split()
    _stored(db, prof.fingerprint, 8, 1.0, split)
    call, per_node = prof.overhead()
    rates = layout.ReorderCurves.from_records(db.records(prof.fingerprint), call, per_node)
    kw = {"overhead": (call, per_node), "nchwc": (8, rates)}
    measured = LearnedCostModel(predictor, "cpu", prof.fingerprint, measured=db, **kw)
    trees = LearnedCostModel(predictor, "cpu", prof.fingerprint, **kw)
    reorders = 3 * (1.0 - call)
    assert measured.cost(split) == pytest.approx(1.0 - call + reorders)
    assert trees.cost(split) == pytest.approx(5.0 - call + reorders)
    unmeasured = _split(x=TensorType((1, 64, 8, 8), "float32"), parts=(X, X))
    # not in the cache: predicted, and its reorders priced at the cached seconds per byte
    assert measured.cost(unmeasured) == pytest.approx(5.0 - call + 3 * 2 * (1.0 - call))
