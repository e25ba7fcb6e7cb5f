"""The profile cost model: each distinct operator measured once and cached in SQLite;
constant nodes free; onnxruntime fusion read from producers; two processes lose nothing.
Assertions are on structure and caching, never on how fast this machine is."""

import dataclasses
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner
from tensat_py.builder import GraphBuilder
from tensat_py.cli import main
from tensat_py.cost import layout, nchwc
from tensat_py.cost.base import graph_contexts, make_context
from tensat_py.cost.database import ProfileDatabase, Record
from tensat_py.cost.profile import (
    OVERHEAD_SIGNATURE,
    ProfileCostModel,
    fused_share_signature,
    signature,
    time_callable,
)
from tensat_py.graph import TensorType


def _twin_convs():
    """Two convolutions with the same signature, a relu after each, a constant concat."""
    b = GraphBuilder()
    x = b.input((1, 8, 8, 8), "x")
    w1 = b.weight((8, 8, 3, 3), "w1")
    w2 = b.weight((8, 8, 3, 3), "w2")
    a = b.relu(b.conv2d(x, w1, stride=1, padding="same"))
    c = b.relu(b.conv2d(a, w2, stride=1, padding="same"))
    wc = b.concat(0, [w1, w2])  # weight-only: constant
    return b.finish([c, wc])


def _priced_signatures(graph):
    from tensat_py import ops

    return {
        signature(c)
        for c in graph_contexts(graph)
        if not c.constant and ops.get(c.op).launches_kernel
    }


def test_each_distinct_operator_is_measured_once_and_cached(cache):
    g = _twin_convs()
    m = ProfileCostModel("cpu")
    first = m.graph_cost(g)
    # the program's NCHWc reorders and those the convolutions' figures hold, once a shape
    plan = nchwc.nchwc_plan(g, m.nchwc())
    reorders = {layout.reorder_signature(k, s) for k, s in {*plan.reorders, *plan.measured}}
    assert len(_priced_signatures(g)) == 2  # one conv, one relu signature
    assert m.measured == 2 + len(reorders)
    recs = {r.signature for r in m.db.records(m.fingerprint)}
    calibrations = {OVERHEAD_SIGNATURE, layout.BLOCK_SIGNATURE, fused_share_signature("relu")}
    assert _priced_signatures(g) | calibrations | reorders == recs
    again = ProfileCostModel("cpu")  # a new process would see the same file
    assert again.graph_cost(g) == first
    assert again.measured == 0
    assert (cache / "profile.sqlite").is_file()


def test_constant_nodes_and_views_cost_nothing_and_are_not_measured(cache):
    m = ProfileCostModel("cpu")
    assert (
        m.node_cost(
            "concat", {"axis": 0, "ndim": 4}, [(8, 8, 3, 3)] * 2, (16, 8, 3, 3), constant=True
        )
        == 0.0
    )
    # a view: onnxruntime dispatches it as a node (the per-node cost), NumPy not at all
    assert m.node_cost("reshape", {"shape": (4, 4)}, [(16,)], (4, 4)) == m.overhead()[1]
    numpy = ProfileCostModel("cpu", backend="numpy")
    assert numpy.node_cost("reshape", {"shape": (4, 4)}, [(16,)], (4, 4)) == 0.0
    assert m.measured == 0 and numpy.measured == 0


def _split_of_merged_conv():
    """A split of a convolution's output along channels (the ``conv-merge`` rewrite's)."""
    b = GraphBuilder()
    x = b.input((1, 8, 8, 8), "x")
    w1 = b.weight((8, 8, 1, 1), "w1")
    w2 = b.weight((4, 8, 1, 1), "w2")
    merged = b.conv2d(x, b.concat(0, [w1, w2]), stride=1, padding="same")
    first, second = b.split(merged, 1)
    return b.finish([first, second])


def test_a_split_is_a_kernel_on_onnxruntime_and_a_view_elsewhere(cache):
    # TASO's language treats split as a view; onnxruntime runs an ONNX Split (a copy).
    split = next(c for c in graph_contexts(_split_of_merged_conv()) if c.op == "split")
    ort = ProfileCostModel("cpu")
    assert ort.cost(split) > 0 and ort.measured == 1
    assert ProfileCostModel("cpu", backend="numpy").cost(split) == 0.0


def test_relu_after_a_convolution_is_priced_as_fused_on_onnxruntime(cache):
    m = ProfileCostModel("cpu")
    relu = {c.op: c for c in graph_contexts(_twin_convs())}["relu"]
    # A stored one-operator figure of one second (no measuring, no machine speed).
    m.db.put(m.fingerprint, [Record(signature(relu), "relu", 1.0, 0.0, 7, 1.0)])
    # and a fused share of 0, as calibrated here (a noisy machine measures up to 0.5)
    share = fused_share_signature("relu")
    m.db.put(m.fingerprint, [Record(share, "__fused_share__", 0.0, 0.0, 0, 0.0)])
    call, per_node = m.overhead()
    assert m.cost(relu) == per_node  # fused into the conv: the per-node cost
    assert ProfileCostModel("cpu", fusion=False).cost(relu) == 1.0 - call
    assert m.measured == 0


def _biased_block(regrouped: bool):
    """relu(conv(x) + bias + r) with a constant per-channel bias (an ONNX Conv's B), the
    sums grouped as exported, or regrouped as conv(x) + (bias + r)."""
    b = GraphBuilder()
    x = b.input((1, 8, 8, 8), "x")
    r = b.input((1, 8, 8, 8), "r")
    conv = b.conv2d(x, b.weight((8, 8, 3, 3), "w"), stride=1, padding="same")
    bias = b.weight((8, 1, 1), "bias")
    if regrouped:
        s = b.op("add", conv, b.op("add", bias, r))
    else:
        s = b.op("add", b.op("add", conv, bias), r)
    return b.finish(b.relu(s))


def test_a_per_channel_bias_after_a_convolution_is_fused_as_onnxruntime_does():
    from tensat_py.cost.profile import ort_fused

    # Conv(B) -> Add(r) -> Relu is one NCHWc kernel: every node after the conv is fused.
    ctxs = graph_contexts(_biased_block(regrouped=False))
    assert [(c.op, ort_fused(c)) for c in ctxs if c.op in ("add", "relu")] == [
        ("add", True),
        ("add", True),
        ("relu", True),
    ]
    # bias + r first is an Add onnxruntime runs (a constant broadcast over an input).
    ctxs = graph_contexts(_biased_block(regrouped=True))
    assert [(c.op, ort_fused(c)) for c in ctxs if c.op in ("add", "relu")] == [
        ("add", False),
        ("add", True),
        ("relu", True),
    ]


def test_the_biased_convolution_is_recognised_in_an_exported_egraph_too():
    from tensat_py import _core
    from tensat_py.cost.base import export_contexts
    from tensat_py.cost.profile import ort_fused

    g = _biased_block(regrouped=False)
    eg = _core.EGraph(g.to_flat())
    ctxs = [c for c in export_contexts(eg.export()) if c is not None]
    assert sorted((c.op, ort_fused(c)) for c in ctxs if c.op in ("add", "relu")) == [
        ("add", True),
        ("add", True),
        ("relu", True),
    ]


def test_numpy_backend_measures_the_reference_semantics_under_its_own_fingerprint(cache):
    ort = ProfileCostModel("cpu")
    npm = ProfileCostModel("cpu", backend="numpy")
    assert npm.fingerprint != ort.fingerprint
    assert npm.info["backend"] == "numpy"
    t = npm.node_cost("matmul", {"act": 0}, [(16, 16), (16, 16)], (16, 16))
    assert t > 0 and npm.measured == 1


def test_an_operator_that_cannot_run_alone_is_an_error_naming_it(cache):
    m = ProfileCostModel("cpu")
    ctx = make_context("opaque", {"type": "Foo_3@2_2"}, [(2, 2)], (2, 2))
    with pytest.raises(ValueError, match="opaque operator `Foo_3@2_2`"):
        m.cost(ctx)


def test_unknown_device_and_backend_are_errors():
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        ProfileCostModel("tpu")
    with pytest.raises(ValueError, match="backend 'cupy' does not run on device 'cpu'"):
        ProfileCostModel("cpu", backend="cupy")


def test_time_callable_reports_median_spread_and_lower_quartile():
    calls = []
    m = time_callable(lambda: calls.append(1), warmup=3, min_reps=5, max_reps=9, target_seconds=0.0)
    assert m.reps == 5 and len(calls) == 8
    assert 0 <= m.low <= m.median and m.spread >= 0


_WRITER = textwrap.dedent(
    """
    import sys
    from tensat_py.cost.database import ProfileDatabase, Record
    db = ProfileDatabase(sys.argv[1])
    tag, n = sys.argv[2], int(sys.argv[3])
    for i in range(n):
        # half the signatures are shared with the other process, half are its own
        sig = f"shared-{i}" if i % 2 else f"{tag}-{i}"
        db.put("fp", [Record(sig, "relu", 1.0, 0.0, 1, 1.0)])
    """
)


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "p.sqlite"
    ProfileDatabase(path)  # schema first
    n = 200
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), tag, str(n)])
        for tag in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    sigs = {r.signature for r in ProfileDatabase(path).records("fp")}
    assert len(sigs) == n // 2 + 2 * (n // 2)  # shared once, each process's own


_PROFILER = textwrap.dedent(
    """
    import sys
    from tensat_py.builder import GraphBuilder
    from tensat_py.cost.profile import ProfileCostModel
    b = GraphBuilder()
    x = b.input((1, 4, 6, 6), "x")
    ys = [b.conv2d(x, b.weight((4 + k, 4, 3, 3), f"w{k}"), stride=1, padding="same")
          for k in range(6)]
    g = b.finish(ys)
    m = ProfileCostModel("cpu")
    print(m.graph_cost(g) > 0)
    """
)


def test_two_processes_profiling_the_same_graph_at_once_both_finish_and_share(cache):
    procs = [
        subprocess.Popen([sys.executable, "-c", _PROFILER], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0] and outs == ["True", "True"]
    db = ProfileDatabase()
    (fp,) = db.devices()
    assert len([r for r in db.records(fp) if r.op == "conv2d"]) == 6


def test_cli_profile_fills_the_cache_and_stats_show_it(cache):
    r = CliRunner().invoke(
        main,
        [
            "profile",
            "squeezenet",
            "--device",
            "cpu",
            "--no-egraph",
            "-q",
            "--cache-dir",
            str(cache),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "squeezenet:" in r.output and "new measurements" in r.output
    r = CliRunner().invoke(main, ["profile", "--stats", "--cache-dir", str(cache)])
    assert r.exit_code == 0 and "conv2d" in r.output and "onnxruntime" in r.output


def test_cli_optimize_with_the_profile_cost_model(cache):
    r = CliRunner().invoke(
        main,
        [
            "optimize",
            "squeezenet",
            "--cost-model",
            "profile",
            "--device",
            "cpu",
            "--json",
            "--no-verify",
            "--time-limit",
            "30",
        ],
    )
    assert r.exit_code == 0, r.output
    import json

    out = json.loads(r.output.strip().splitlines()[-1])
    assert 0 < out["cost_after"] <= out["cost_before"]


def test_cli_profile_without_work_is_a_one_line_error():
    r = CliRunner().invoke(main, ["profile"])
    assert r.exit_code == 2 and "nothing to do" in r.output


def _gpu():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.skipif(not _gpu(), reason="no GPU/CuPy")
def test_cupy_backend_times_with_cuda_events_under_the_gpu_fingerprint(cache):
    m = ProfileCostModel("gpu")
    assert m.info["backend"] == "cupy" and "gpu" in m.info and "driver" in m.info
    t = m.node_cost("matmul", {"act": 0}, [(64, 64), (64, 64)], (64, 64))
    assert t > 0 and m.measured == 1


def test_a_gpu_device_without_cupy_says_so():
    if _gpu():
        pytest.skip("a GPU with CuPy is present")
    with pytest.raises(ValueError, match="CuPy|GPU"):
        ProfileCostModel("gpu")


def test_records_keep_the_first_figure_for_a_signature(tmp_path):
    db = ProfileDatabase(tmp_path / "x.sqlite")
    assert db.put("fp", [Record("s", "relu", 1.0, 0.0, 1, 1.0)]) == 1
    assert db.put("fp", [Record("s", "relu", 2.0, 0.0, 1, 2.0)]) == 0
    assert db.get("fp", ["s"])["s"].median == 1.0
    assert TensorType((1,)).numel == 1


def test_a_convolution_with_its_activation_is_measured_as_the_plain_convolution(cache):
    # onnxruntime runs both as one kernel: one signature, plus the fused node's cost.
    ctxs = {c.op: c for c in graph_contexts(_twin_convs())}
    conv = ctxs["conv2d"]
    fused = dataclasses.replace(conv, params={**conv.params, "act": 2})
    m = ProfileCostModel("cpu")
    plain, with_act = m.costs([conv, fused])
    assert m.measured == 1
    assert with_act == pytest.approx(plain + m.overhead()[1])
    numpy_model = ProfileCostModel("cpu", backend="numpy")  # no fusion there: two kernels
    numpy_model.costs([conv, fused])
    assert numpy_model.measured == 2


def test_a_matmul_with_its_activation_is_priced_as_the_matmul_then_the_activation(cache):
    # onnxruntime does not fuse MatMul -> Relu: the fused form runs the same two kernels
    # as the unfused one, and is priced from the same two signatures.
    b = GraphBuilder()
    x = b.input((16, 64), "x")
    w = b.weight((64, 32), "w")
    unfused = b.relu(b.matmul(x, w))
    fused = b.matmul(x, w, act="relu")
    ctxs = graph_contexts(b.finish([unfused, fused]))
    m = ProfileCostModel("cpu")
    costs = m.costs(ctxs)
    assert m.measured == 2  # the plain matmul and the relu
    by_kind = {(c.op, c.params.get("act", 0)): k for c, k in zip(ctxs, costs, strict=True)}
    assert by_kind[("matmul", 2)] == pytest.approx(by_kind[("matmul", 0)] + by_kind[("relu", 0)])


def _symbolic_relu_model(path):
    """An ONNX file whose input has a symbolic batch dimension: ``y = Relu(x)``."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)
    return path


def test_cli_profile_fixes_symbolic_dimensions_with_input_shape(cache, tmp_path):
    path = str(_symbolic_relu_model(tmp_path / "sym.onnx"))
    args = ["profile", path, "--no-egraph", "-q", "--cache-dir", str(cache)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and "no static shape" in r.output, r.output
    r = CliRunner().invoke(main, [*args, "--input-shape", "x=3,16"])
    assert r.exit_code == 0, r.output
    db = ProfileDatabase()
    (fp,) = db.devices()
    relus = [r for r in db.records(fp) if r.op == "relu"]
    assert len(relus) == 1 and "3" in relus[0].signature and "16" in relus[0].signature


def _opaque_model(path):
    """An ONNX file with one operator the language keeps opaque: Relu, Hardmax, Relu."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Hardmax", ["a"], ["b"]),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    g = helper.make_graph(nodes, "g", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_cli_profile_measures_opaque_operators_of_the_egraph(cache, tmp_path):
    path = str(_opaque_model(tmp_path / "hardmax.onnx"))
    r = CliRunner().invoke(main, ["profile", path, "-q", "--cache-dir", str(cache)])
    assert r.exit_code == 0, r.output
    (fp,) = ProfileDatabase().devices()
    assert [r.op for r in ProfileDatabase().records(fp)].count("opaque") == 1


def test_missing_keeps_the_context_that_carries_the_graph(cache, tmp_path):
    import tensat_py

    g = tensat_py.load(str(_opaque_model(tmp_path / "hardmax.onnx")))
    (own,) = [c for c in graph_contexts(g) if c.op == "opaque"]
    bare = dataclasses.replace(own, graph=None)  # as an e-graph export gives it
    (todo,) = ProfileCostModel("cpu").missing([own, bare])
    assert todo.graph is g


def _conv_read_by_biases(readers: int):
    """A convolution whose output ``readers`` sums with constant per-channel biases read,
    each sum a program output."""
    b = GraphBuilder()
    x = b.input((1, 8, 8, 8), "x")
    conv = b.conv2d(x, b.weight((8, 8, 3, 3), "w"), stride=1, padding="same")
    return b.finish([b.op("add", conv, b.weight((8, 1, 1), f"bias{k}")) for k in range(readers)])


@pytest.mark.parametrize("readers", [1, 2])
def test_nothing_fuses_into_a_convolution_that_several_nodes_read(tmp_path, readers):
    import onnx
    import onnxruntime as ort
    from tensat_py.cost.profile import ort_fused
    from tensat_py.frontends.onnx import to_model

    g = _conv_read_by_biases(readers)
    fused = [ort_fused(c) for c in graph_contexts(g) if c.op == "add"]
    assert fused == [readers == 1] * readers
    # onnxruntime agrees: its optimised graph keeps an Add per bias unless one reads the conv.
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    opts.log_severity_level = 3
    model = to_model(g, weights="random")
    ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    adds = [n for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node if n.op_type == "Add"]
    assert len(adds) == (0 if readers == 1 else readers)


def _binary(op, a, b, flags):
    from tensat_py.cost.base import CostContext

    out = a if len(a.shape) >= len(b.shape) else b
    return CostContext(op=op, params={}, inputs=[a, b], output=out, operand_constant=flags)


X = TensorType((1, 128, 1024), "float32")
S = TensorType((), "float32")


def test_commuted_and_same_kernel_applications_have_one_signature():
    assert signature(_binary("mul", X, S, (False, True))) == signature(
        _binary("mul", S, X, (True, False))
    )
    assert signature(_binary("ewadd", X, X, (False, False))) == signature(
        _binary("add", X, X, (False, False))
    )
    # not commutative; and the constant flag stays with its operand
    assert signature(_binary("sub", X, S, (False, True))) != signature(
        _binary("sub", S, X, (True, False))
    )
    assert signature(_binary("mul", X, S, (False, True))) != signature(
        _binary("mul", S, X, (False, True))
    )


class _OrderSensitive:
    """A backend whose figures depend on operand order, as timing noise made them: a
    scalar first is "faster". Records what it was asked to run."""

    name = "order-sensitive"

    def __init__(self):
        self.asked = []

    def info(self):
        return {"backend": self.name}

    def measure(self, ctx):
        from tensat_py.cost.profile import Measurement

        self.asked.append((ctx.op, [tuple(t.shape) for t in ctx.inputs]))
        t = 1e-6 if ctx.inputs[0].shape == () else 1e-5
        return Measurement(t, 0.0, 1, t)


def test_the_extraction_gains_nothing_from_commuting_a_noisy_measurement(cache):
    import tensat_py
    from tensat_py.graph import Graph

    g = Graph()
    x = g.add_input("x", X.shape, "float32")
    s = g.add_weight("s", (), "float32")
    g.outputs = [g.add_node("relu", {}, [g.add_node("mul", {}, [x, s])])]
    backend = _OrderSensitive()
    model = ProfileCostModel("cpu", backend=backend)
    r = tensat_py.optimize(g, cost_model=model, rules="tensor", verify=False, time_limit=10)
    assert r.cost_after == r.cost_before, r.stats
    muls = [shapes for op, shapes in backend.asked if op == "mul"]
    assert len(muls) == model.passes == 2 and muls[0] == muls[1], backend.asked


def test_missing_lists_exactly_what_pricing_then_measures(cache):
    # `tensat profile` reports len(missing) as its new measurements: a convolution with its
    # activation is measured as the plain convolution, never as itself.
    conv = next(c for c in graph_contexts(_twin_convs()) if c.op == "conv2d")
    ctxs = [conv, dataclasses.replace(conv, params={**conv.params, "act": 2})]
    m = ProfileCostModel("cpu")
    m.overhead()  # the calibration is not an operator
    todo = m.missing(ctxs)
    m.costs(ctxs)
    assert len(todo) == m.measured == 1
    assert m.missing(ctxs) == []


def _conv_bn(shared: bool):
    """relu(batchnorm(conv(x))) with constant statistics; with ``shared``, the convolution's
    output is a program output too."""
    b = GraphBuilder()
    x = b.input((1, 8, 8, 8), "x")
    conv = b.conv2d(x, b.weight((8, 8, 3, 3), "w"), stride=1, padding="same")
    y = b.relu(b.batchnorm(conv))
    return b.finish([y, conv] if shared else [y])


def test_a_batchnorm_after_a_convolution_is_folded_as_onnxruntime_does():
    from ort_helpers import optimised_ops
    from tensat_py.cost.profile import ort_fused

    # ConvBNFusion, then ConvActivationFusion: onnxruntime runs one convolution.
    g = _conv_bn(shared=False)
    kept = optimised_ops(g)
    assert "BatchNormalization" not in kept and "Relu" not in kept
    fused = {c.op: ort_fused(c) for c in graph_contexts(g) if c.op in ("batchnorm", "relu")}
    assert fused == {"batchnorm": True, "relu": True}
    # A convolution read by more than the batch norm keeps its output: nothing folds.
    shared = graph_contexts(_conv_bn(shared=True))
    assert [ort_fused(c) for c in shared if c.op in ("batchnorm", "relu")] == [False, False]


def test_onnxruntime_is_warmed_up_once_per_process_before_measuring(monkeypatch):
    import time

    from tensat_py.cost import profile as prof

    monkeypatch.setattr(prof, "_warmed_up", False)
    monkeypatch.setattr(prof, "WARM_UP_SECONDS", 0.2)
    backend = prof.OrtBackend()
    t = time.perf_counter()
    backend.warm_up()
    assert time.perf_counter() - t >= 0.2 and prof._warmed_up
    t = time.perf_counter()
    prof.OrtBackend().warm_up()  # a second backend of the same process: no more warm-up
    assert time.perf_counter() - t < 0.2


class _Drifting:
    """A backend that gives the figures it is handed, in the order asked."""

    name = "drifting"

    def __init__(self, figures):
        self.figures = list(figures)
        self.asked = []

    def info(self):
        return {"backend": self.name}

    def measure(self, ctx):
        from tensat_py.cost.profile import Measurement

        self.asked.append(ctx.op)
        t = self.figures.pop(0)
        return Measurement(t, 0.0, 1, t)


def test_each_new_figure_is_the_lowest_of_its_passes_in_alternating_order(cache):
    from tensat_py.cost.base import CostContext

    relu, tanh = (CostContext(op, {}, [X], X) for op in ("relu", "tanh"))
    backend = _Drifting([3e-5, 1e-5, 2e-5, 4e-5])  # relu, tanh, then tanh, relu
    model = ProfileCostModel("cpu", backend=backend, passes=2)
    model._overhead = (0.0, 0.0)
    assert model.costs([relu, tanh]) == [3e-5, 1e-5]
    assert backend.asked == ["relu", "tanh", "tanh", "relu"] and model.measured == 2
    with pytest.raises(ValueError, match="passes must be at least 1, got 0"):
        ProfileCostModel("cpu", backend=_Drifting([]), passes=0)


def test_a_tanh_gelu_is_measured_as_the_one_kernel_onnxruntime_runs(monkeypatch):
    # Before opset 20 the export is a chain that onnxruntime fuses into FastGelu, but not
    # at a model output, as in a one-operator model: measured as opset 20's Gelu instead.
    from tensat_py.cost import profile as prof

    monkeypatch.setattr(prof, "WARM_UP_SECONDS", 0.0)
    backend = prof.OrtBackend()
    seen = []
    session = backend._session

    def spy(model):
        seen.append([n.op_type for n in model.graph.node])
        return session(model)

    monkeypatch.setattr(backend, "_session", spy)
    ctx = make_context("gelu_tanh", {}, [(2, 64)], (2, 64))
    assert backend.measure(ctx).median > 0
    assert seen == [["Gelu"]]


def test_a_boolean_operand_is_timed_as_a_mask_in_runs_not_at_random(monkeypatch):
    # onnxruntime's Where ran 357 us on a random [1, 4, 128, 128] condition and 135 us on a
    # causal mask: random booleans priced GPT-2's Where 4x what it costs inside the model.
    import numpy as np
    from tensat_py.cost import profile as prof

    monkeypatch.setattr(prof, "WARM_UP_SECONDS", 0.0)
    backend = prof.OrtBackend()
    fed = []
    bound = backend._bound_call

    def spy(sess, feeds):
        fed.append(dict(feeds))
        return bound(sess, feeds)

    monkeypatch.setattr(backend, "_bound_call", spy)
    cond = TensorType((2, 5, 5), "bool")
    ctx = make_context("select", {}, [cond, (2, 5, 5), (2, 5, 5)], (2, 5, 5))
    assert backend.measure(ctx).median > 0
    (masks,) = [v for f in fed for v in f.values() if v.dtype == bool]
    assert (masks == np.tril(np.ones((5, 5), bool))).all()
    assert prof._mask((4,)).tolist() == [True, True, False, False]
    assert prof._mask(()).item() is True


def test_replaced_figures_price_the_program_inside_the_block_only(cache):
    # bench/profile_noise.py re-prices two programs with re-measured figures this way.
    g = _twin_convs()
    m = ProfileCostModel("cpu")
    before = m.graph_cost(g)
    apps = m.applications(m.program_contexts(g))
    assert set(apps) == _priced_signatures(g)  # one conv, one relu signature
    conv = next(s for s, c in apps.items() if c.op == "conv2d")
    stored = len(m.db.records(m.fingerprint))
    with m.figures_replaced({conv: 1.0}):  # one second a convolution; there are two
        inside = m.graph_cost(g)
    assert 1.9 < inside - before < 2.0
    assert m.graph_cost(g) == before
    assert len(m.db.records(m.fingerprint)) == stored


def test_an_activation_fused_into_a_convolution_costs_its_calibrated_share(cache, monkeypatch):
    # onnxruntime's NCHWc convolution applies a fused HardSwish to its output: it saved the
    # activation's memory traffic, not its arithmetic (64-242 us added, about what it costs
    # alone), where the per-node floor priced it at about 1 us.
    from tensat_py.cost import profile as prof

    # 64 x 64 planes: the activation's own figure is well above the per-node floor, which
    # a fused share cannot go below (at 8 x 8 a fast machine measured it at the floor).
    b = GraphBuilder()
    x = b.input((1, 8, 64, 64), "x")
    conv = b.conv2d(x, b.weight((8, 8, 3, 3), "w"), stride=1, padding="same")
    g = b.finish([b.op("hard_swish", conv)])
    calls = []

    def share(self, op):
        calls.append(op)
        return 0.5

    monkeypatch.setattr(prof.OrtBackend, "fused_activation_share", share)
    m = ProfileCostModel("cpu")
    ctxs = m.program_contexts(g)
    act = next(i for i, c in enumerate(ctxs) if c.op == "hard_swish")
    alone = m.costs([dataclasses.replace(ctxs[act], producers=())])[0]
    assert 0.5 * alone > m.overhead()[1], "the activation alone priced at the per-node floor"
    assert m.costs(ctxs)[act] == pytest.approx(0.5 * alone)
    assert ProfileCostModel("cpu").costs(ctxs)[act] == pytest.approx(0.5 * alone)
    assert calls == ["hard_swish"]  # calibrated once per device, then read from the cache


def test_the_fused_share_is_taken_within_rounds_so_a_drift_cancels():
    from tensat_py.cost.profile import fused_share_estimate

    # Each round's three calls share a speed factor in [1, 2] (the machine drifts); the
    # convolution and the fused one each jitter by 0.2 % (2 us) on their own. The
    # activation adds 10 us to a 1 ms convolution and costs 20 us alone: a share of 0.5.
    # (The difference of lower quartiles measured 0.70 on seed 3.)
    for seed in range(6):
        rng = np.random.default_rng(seed)
        speed = 1 + rng.random(60)
        conv = 1e-3 * speed * (1 + 0.002 * rng.standard_normal(60))
        both = 1.01e-3 * speed * (1 + 0.002 * rng.standard_normal(60))
        alone = 2e-5 * speed
        assert fused_share_estimate(list(conv), list(both), list(alone)) == pytest.approx(
            0.5, abs=0.05
        )
    assert fused_share_estimate([1.0], [0.5], [1.0]) == 0.0  # clipped to [0, 2]
    assert fused_share_estimate([1.0], [4.0], [1.0]) == 2.0
    with pytest.raises(ValueError, match="lengths 0, 0, 0"):
        fused_share_estimate([], [], [])


def test_a_reshape_costs_a_node_on_onnxruntime_unless_the_exporter_removes_it(cache):
    # onnxruntime dispatches a Reshape (or Squeeze / Unsqueeze) like any node: 16 of them
    # between ReLUs added 0.47-0.65 us each, the per-node cost. A flattening for a MatMul
    # is removed by the exporter, and a constant one is folded.
    b = GraphBuilder()
    x = b.input((1, 8, 16), "x")
    unsqueezed = b.reshape(b.relu(x), (1, 8, 1, 16))  # a 1-D convolution's Unsqueeze
    flat = b.reshape(b.relu(x), (8, 16))  # a MatMul's flattening: exported away
    folded = b.reshape(b.weight((8, 16), "w"), (1, 8, 16))
    g = b.finish([b.relu(unsqueezed), b.matmul(flat, b.weight((16, 4), "v")), folded])
    ctxs = [c for c in graph_contexts(g) if c.op == "reshape"]
    assert [c.output.shape for c in ctxs] == [(1, 8, 1, 16), (8, 16), (1, 8, 16)]
    m = ProfileCostModel("cpu")
    _, per_node = m.overhead()
    assert m.costs(ctxs) == [per_node, 0.0, 0.0]
    assert ProfileCostModel("cpu", fusion=False).costs(ctxs) == [0.0, 0.0, 0.0]
    assert m.measured == 0  # priced, not measured


def test_time_callable_starts_no_run_past_its_deadline() -> None:
    import time

    from tensat_py.cost.profile import time_callable

    calls: list[float] = []

    def slow() -> None:
        calls.append(time.monotonic())
        time.sleep(0.02)

    deadline = time.monotonic() + 0.05
    m = time_callable(slow, warmup=2, min_reps=7, max_reps=7, target_seconds=0.0, deadline=deadline)
    assert 1 <= m.reps < 7 and len(calls) < 9
    assert all(t < deadline for t in calls)
    with pytest.raises(TimeoutError):
        time_callable(slow, warmup=0, deadline=time.monotonic() - 1.0)


def test_time_callable_runs_a_long_work_fewer_times() -> None:
    """A work that takes long stops warming up once the warm-up took ``long_seconds`` and
    is timed LONG_REPS times once they took that long, below ``min_reps``; a short work
    still gets every warm-up and ``min_reps`` timed calls."""
    import time

    from tensat_py.cost.profile import LONG_REPS, time_callable

    calls = []

    def work(seconds: float):
        def run() -> None:
            calls.append(seconds)
            time.sleep(seconds)

        return run

    m = time_callable(work(0.03), warmup=4, min_reps=7, max_reps=7, long_seconds=0.05)
    assert m.reps == LONG_REPS == 3 and len(calls) == 2 + 3  # two warm-ups passed 0.05 s
    calls.clear()
    m = time_callable(work(0.0), warmup=4, min_reps=7, max_reps=7, long_seconds=0.05)
    assert m.reps == 7 and len(calls) == 4 + 7
