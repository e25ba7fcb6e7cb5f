"""The NumPy reference executor against direct definitions, and verify()."""

import numpy as np
import pytest
from tensat_py.builder import GraphBuilder
from tensat_py.runtime import random_feeds, run
from tensat_py.runtime.numpy_exec import conv2d, merge
from tensat_py.verify import verify


def naive_conv(x, w, sh, sw, pad):
    """Direct loops: SAME pads before = total // 2, groups = C // I contiguous."""
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    g = c // i
    if pad == 0:
        oh, ow = -(-h // sh), -(-wd // sw)
        ph = max((oh - 1) * sh + kh - h, 0)
        pw = max((ow - 1) * sw + kw - wd, 0)
        x = np.pad(x, ((0, 0), (0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2)))
    else:
        oh, ow = -(-(h - kh + 1) // sh), -(-(wd - kw + 1) // sw)
    y = np.zeros((n, o, oh, ow))
    for oc in range(o):
        grp = oc // (o // g)
        for a in range(oh):
            for b in range(ow):
                patch = x[:, grp * i : (grp + 1) * i, a * sh : a * sh + kh, b * sw : b * sw + kw]
                y[:, oc, a, b] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return y


@pytest.mark.parametrize(
    "xs,ws,stride,pad",
    [
        ((2, 3, 7, 8), (4, 3, 3, 3), (1, 1), 0),
        ((1, 3, 7, 8), (4, 3, 3, 2), (2, 3), 0),
        ((1, 4, 9, 9), (6, 2, 3, 3), (2, 2), 1),  # 2 groups
        ((1, 4, 6, 6), (4, 1, 3, 3), (1, 1), 0),  # depthwise
        ((1, 4, 5, 5), (8, 4, 1, 1), (2, 2), 0),  # 1x1 strided
        ((1, 2, 6, 5), (3, 2, 4, 4), (1, 1), 0),  # even kernel, uneven SAME padding
    ],
)
def test_conv_matches_direct_loops(xs, ws, stride, pad):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    got = conv2d(x, w, stride[0], stride[1], pad, 0)
    np.testing.assert_allclose(got, naive_conv(x, w, *stride, pad), rtol=1e-10, atol=1e-10)


def one(graph, feeds):
    return run(graph, feeds)[0]


def test_pooling_same_padding_and_average_excludes_padding():
    b = GraphBuilder()
    x = b.input((1, 1, 3, 3), name="x")
    g = b.finish([b.poolavg(x, 3, 1, "same"), b.poolmax(x, 2, 2, "same", act="relu")])
    xv = np.arange(9.0).reshape(1, 1, 3, 3) - 4
    avg, mx = run(g, {"x": xv})
    assert avg[0, 0, 0, 0] == pytest.approx(np.mean([-4, -3, -1, 0]))  # 4 real elements
    assert avg[0, 0, 1, 1] == pytest.approx(0.0)
    # 3x3 input, k=2, s=2 SAME: out 2, pad_total 1 -> 0 before, 1 after
    np.testing.assert_array_equal(mx[0, 0], [[0, 1], [3, 4]])


def test_split_recovers_concat_parts_and_matmul_activation():
    b = GraphBuilder()
    x = b.input((3, 4), name="x")
    w1, w2 = b.weight((4, 2), name="w1"), b.weight((4, 5), name="w2")
    s0, s1 = b.split(b.matmul(x, b.concat(1, [w1, w2]), act="sigmoid"), 1)
    g = b.finish([s0, s1, b.matmul(x, w1, act="sigmoid")])
    f = random_feeds(g, seed=3, dtype="float64")
    a, c, ref = run(g, f)
    np.testing.assert_allclose(a, ref)
    np.testing.assert_allclose(c, 1 / (1 + np.exp(-(f["x"] @ f["w2"]))))


def test_merge_is_exact_for_groups_equal_count():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 5, 5))
    w = rng.standard_normal((9, 2, 3, 3))  # 3 groups of 2 input channels
    grouped = conv2d(x, w, 1, 1, 0, 0)
    merged = conv2d(x, merge(w, 3), 1, 1, 0, 0)  # one group
    np.testing.assert_allclose(merged, grouped, atol=1e-12)
    m = merge(w, 3)
    assert m.shape == (9, 6, 3, 3)
    assert np.all(m[0, 2:] == 0) and np.all(m[8, :4] == 0)


def test_enlarge_centres_kernel():
    b = GraphBuilder()
    x = b.input((1, 3, 6, 6), name="x")
    w = b.weight((4, 3, 1, 1), name="w")
    big = b.enlarge(w, b.weight((4, 3, 3, 3), name="r"))
    g = b.finish([b.conv2d(x, w), b.conv2d(x, big)])
    a, c = run(g, random_feeds(g, dtype="float64"))
    np.testing.assert_allclose(a, c, atol=1e-12)


def test_batchnorm_transpose_reshape_and_elementwise():
    b = GraphBuilder()
    x = b.input((2, 3, 2, 2), name="x")
    s, bb, m, v = (b.weight((3,), name=n) for n in ("s", "b", "m", "v"))
    y = b.batchnorm(x, s, bb, m, v)
    t = b.reshape(b.transpose(x, (0, 2, 3, 1)), (8, 3))
    e = b.ewmul(b.ewadd(x, x), b.dropout(b.tanh(x)))
    g = b.finish([y, t, e])
    f = random_feeds(g, dtype="float64")
    yv, tv, ev = run(g, f)
    sh = (1, 3, 1, 1)
    ref = (f["x"] - f["m"].reshape(sh)) / np.sqrt(f["v"].reshape(sh) + 1e-5)
    np.testing.assert_allclose(yv, ref * f["s"].reshape(sh) + f["b"].reshape(sh))
    np.testing.assert_array_equal(tv, f["x"].transpose(0, 2, 3, 1).reshape(8, 3))
    np.testing.assert_allclose(ev, 2 * f["x"] * np.tanh(f["x"]))
    assert f["v"].min() >= 0.5  # batch-norm variances are positive


def test_random_feeds_are_deterministic_and_typed():
    b = GraphBuilder()
    x = b.input((2, 3), name="x")
    g = b.finish([b.matmul(x, b.weight((3, 4), name="w"))])
    f1, f2 = random_feeds(g, seed=5), random_feeds(g, seed=5)
    assert f1["w"].dtype == np.float32
    np.testing.assert_array_equal(f1["w"], f2["w"])
    assert not np.array_equal(random_feeds(g, seed=6)["w"], f1["w"])
    with pytest.raises(ValueError, match="no feed"):
        run(g, {"x": f1["x"]})
    with pytest.raises(ValueError, match="shape"):
        run(g, {"x": f1["x"].T, "w": f1["w"]})


def test_verify_passes_equivalent_and_fails_different_graphs():
    def build(merged: bool, act: str = "none"):
        b = GraphBuilder()
        x = b.input((4, 8), name="x")
        w1, w2 = b.weight((8, 3), name="w1"), b.weight((8, 3), name="w2")
        if merged:
            p, q = b.split(b.matmul(x, b.concat(1, [w1, w2])), 1)
        else:
            p, q = b.matmul(x, w1), b.matmul(x, w2)
        y = b.ewadd(p, q)
        return b.finish([b.relu(y) if act == "relu" else b.tanh(y)])

    r = verify(build(False), build(True))
    assert r.passed and r.max_rel_error < 1e-5
    r64 = verify(build(False), build(True), dtype="float64")
    assert r64.passed and r64.max_rel_error < 1e-12
    bad = verify(build(False), build(False, act="relu"))
    assert not bad.passed and bad.max_abs_error > 0.01
