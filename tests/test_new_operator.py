"""An operator added as docs/language.md ("Adding an operator") says works end to end.

`softplus` was added that way: one ``OpDecl`` in ``rust/src/lang/tensor.rs``, one entry in
``tensat_py/ops/tensor.py`` (NumPy, cost, ONNX in and out), one row in docs/language.md
and one rule in ``rules/tensor.rules``. Nothing else was edited; these tests reach it
through the builder, the e-graph and rules, the NumPy executor, the roofline cost model and
the ONNX front end.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import tensat_py
from onnx import TensorProto, helper
from tensat_py.builder import GraphBuilder
from tensat_py.cost.roofline import RooflineCostModel
from tensat_py.frontends.onnx import load, to_model
from tensat_py.runtime import numpy_exec


def _decomposed() -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((4, 16), name="x")
    one = b.op("scalar", value=1.0, dtype="float32")
    y = b.op("log", b.op("add", b.op("exp", x), one))
    return b.finish([y])


def test_softplus_builds_and_runs_in_numpy() -> None:
    b = GraphBuilder()
    x = b.input((3, 5), name="x")
    y = b.op("softplus", x)
    g = b.finish([y])
    assert g.type_of(y.id).shape == (3, 5)
    feeds = {"x": np.linspace(-800, 800, 15).reshape(3, 5)}
    (out,) = numpy_exec.run(g, feeds)
    assert np.all(np.isfinite(out))
    mid = np.linspace(-5, 5, 15).reshape(3, 5)
    (small,) = numpy_exec.run(g, {"x": mid})
    np.testing.assert_allclose(small, np.log1p(np.exp(mid)), rtol=1e-12)


def test_rules_fuse_the_decomposition_into_softplus() -> None:
    g = _decomposed()
    res = tensat_py.optimize(g, rules="tensor", extractor="ilp", verify=True)
    assert res.graph.op_counts().get("softplus") == 1
    assert "exp" not in res.graph.op_counts() and "log" not in res.graph.op_counts()
    assert res.extraction_status == "optimal"
    assert res.verify is not None and res.verify.passed
    model = RooflineCostModel("t4")
    assert res.cost_after < res.cost_before == model.graph_cost(g)


def test_softplus_goes_to_onnx_and_comes_back() -> None:
    b = GraphBuilder()
    x = b.input((2, 6), name="x")
    g = b.finish([b.op("softplus", x)])
    model = to_model(g)
    assert [n.op_type for n in model.graph.node] == ["Softplus"]
    feed = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {"x": feed})
    np.testing.assert_allclose(got, np.logaddexp(0, feed), rtol=1e-5)

    node = helper.make_node("Softplus", ["a"], ["b"])
    gp = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
    )
    m = helper.make_model(gp, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    loaded = load(m)
    assert loaded.op_counts() == {"input": 1, "softplus": 1}
