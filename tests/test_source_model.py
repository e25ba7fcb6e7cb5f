"""An ONNX input the optimiser keeps is written as the model it was loaded from when
onnxruntime runs that model faster than the input's export (confirmation measures both);
a changed program never is."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import onnx
import pytest
import tensat_py
from onnx import TensorProto, helper, numpy_helper
from tensat_py.builder import GraphBuilder
from tensat_py.frontends import onnx as tonnx
from tensat_py.frontends.onnx.exporter import WRITE_SOURCE, source_model
from tensat_py.graph import Graph
from tensat_py.pipeline import SOURCE_MARGIN
from tensat_py.runtime import confirm as confirm_mod
from tensat_py.runtime.confirm import Confirmation, measured_speedup

SHAPES = {"x": (2, 3, 4)}


def _source() -> onnx.ModelProto:
    """A symbolic batch, a shape sub-graph and an ``Identity``: its export (static shapes,
    folded, no ``Identity``) differs from it."""
    f = TensorProto.FLOAT
    g = helper.make_graph(
        [
            helper.make_node("Identity", ["x"], ["xi"]),
            helper.make_node("Shape", ["xi"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["xi", "shape"], ["flat"]),
            helper.make_node("MatMul", ["flat", "w"], ["m"]),
            helper.make_node("Relu", ["m"], ["y"]),
        ],
        "source",
        [helper.make_tensor_value_info("x", f, ["N", 3, 4])],
        [helper.make_tensor_value_info("y", f, ["N", 5])],
        [
            numpy_helper.from_array(np.array(0, np.int64), "zero"),
            numpy_helper.from_array(np.array([0], np.int64), "zero1"),
            numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
            numpy_helper.from_array(
                np.random.default_rng(1).standard_normal((12, 5)).astype(np.float32), "w"
            ),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def _ops(m: onnx.ModelProto) -> Counter:
    return Counter(n.op_type for n in m.graph.node)


def _marked(g: Graph) -> Graph:
    import copy

    kept = copy.copy(g)
    kept.meta = {**g.meta, WRITE_SOURCE: True}
    return kept


def test_an_unchanged_program_marked_so_is_written_as_its_source_model():
    m = _source()
    g = tonnx.load(m, input_shapes=SHAPES)
    plain = tonnx.to_model(g)
    assert "Identity" not in _ops(plain) and "Shape" not in _ops(plain)
    assert plain.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2
    kept = tonnx.to_model(_marked(g))
    assert kept.SerializeToString() == m.SerializeToString()
    assert source_model(g).SerializeToString() == m.SerializeToString()


def test_a_changed_program_is_never_written_as_its_source_model():
    m = _source()
    g = tonnx.load(m, input_shapes=SHAPES)
    assert g.nodes[-1].op == "relu"
    nodes = [*g.nodes[:-1], dataclasses.replace(g.nodes[-1], op="sigmoid")]
    changed = Graph.from_nodes(nodes, g.outputs, meta=g.meta)
    assert source_model(changed) is None
    out = tonnx.to_model(_marked(changed))
    assert "Sigmoid" in _ops(out) and "Relu" not in _ops(out)


def _fake(monkeypatch, gain: float) -> list:
    calls = []

    def fake(graph, candidate, **kw):
        calls.append(candidate)
        speedup = math.nan if candidate is None else 0.5
        return Confirmation(speedup, 5, 1.0, math.nan, 0.0, 1.0 / gain, gain)

    monkeypatch.setattr(confirm_mod, "measured_speedup", fake)
    return calls


@pytest.mark.parametrize("gain", [1.25, 1.02, 1.0])
def test_a_kept_input_is_written_as_its_source_model_only_when_that_runs_faster(
    monkeypatch, tmp_path, gain
):
    calls = _fake(monkeypatch, gain)
    m = _source()
    g = tonnx.load(m, input_shapes=SHAPES)
    r = tensat_py.optimize(g, verify=False, confirm=True, time_limit=20)
    assert r.cost_after == r.cost_before and len(calls) == 1
    assert r.stats["source_gain"] == gain
    out = tensat_py.save(r.graph, str(tmp_path / "o.onnx"), source=g)
    written = onnx.load(str(out))
    if gain > 1 + SOURCE_MARGIN:
        assert "written as the source model" in r.message
        assert written.SerializeToString() == m.SerializeToString()
    else:
        assert "source model" not in r.message
        assert "Shape" not in _ops(written) and "Identity" not in _ops(written)


def test_the_candidate_must_beat_both_the_export_and_the_source_model(monkeypatch):
    g = tonnx.load(_source(), input_shapes=SHAPES)
    # The input's export, its copy (the A/A), the candidate, the source model.
    base = [2.0, 2.0, 1.0, 1.5]

    def rotating(calls, rounds, warmup, clock=None, lead_in=0):
        assert len(calls) == 4
        return [[base[i]] * rounds for i in range(len(calls))]

    monkeypatch.setattr(confirm_mod.timing, "rotating", rotating)
    c = measured_speedup(g, g, budget=0.05, min_rounds=5, max_rounds=5)
    assert c.speedup == pytest.approx(1.5) and c.source_gain == pytest.approx(2.0 / 1.5)
    assert c.source_ms == pytest.approx(1500.0) and c.candidate_ms == pytest.approx(1000.0)
    assert c.aa == pytest.approx(1.0) and c.runtime == "onnxruntime-cpu"


def test_measured_speedup_times_the_source_model_of_an_onnx_input():
    g = tonnx.load(_source(), input_shapes=SHAPES)
    c = measured_speedup(g, None, budget=0.05, min_rounds=5, max_rounds=6)
    assert math.isnan(c.speedup) and math.isnan(c.candidate_ms)
    assert c.source_ms > 0 and c.source_gain > 0
    built = GraphBuilder()
    x = built.input((1, 8), "x")
    plain = built.finish(built.relu(x))
    c = measured_speedup(plain, plain, budget=0.05, min_rounds=5, max_rounds=6)
    assert math.isnan(c.source_ms) and math.isnan(c.source_gain) and c.speedup > 0


def test_a_source_model_onnxruntime_cannot_load_is_not_timed(monkeypatch):
    from tensat_py.frontends.onnx import exporter
    from tensat_py.runtime import ort_exec

    g = tonnx.load(_source(), input_shapes=SHAPES)
    broken = source_model(g)
    broken.graph.node[-1].op_type = "NoSuchOperator"
    monkeypatch.setattr(exporter, "source_model", lambda graph: broken)
    assert ort_exec.source_session(g, ort_exec.feeds(g)) is None
    c = measured_speedup(g, g, budget=0.05, min_rounds=5, max_rounds=5)
    assert math.isnan(c.source_ms) and c.speedup > 0
