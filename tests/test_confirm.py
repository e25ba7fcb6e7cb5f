"""Confirmation on onnxruntime: optimize(confirm=...) keeps a candidate only when it
measures faster than the input; the default confirms for CPU-measured cost models."""

import math

import pytest
import tensat_py
from tensat_py.builder import GraphBuilder
from tensat_py.cost.base import OpCostModel
from tensat_py.runtime import confirm as confirm_mod
from tensat_py.runtime.confirm import Confirmation, measured_speedup


def _stub(monkeypatch, speedup: float) -> list:
    calls = []

    def fake(graph, candidate, **kw):
        calls.append((graph, candidate))
        return Confirmation(speedup, 5, 1.0, 1.0 / speedup, 0.0)

    monkeypatch.setattr(confirm_mod, "measured_speedup", fake)
    return calls


def test_a_candidate_measured_slower_is_not_kept(monkeypatch):
    calls = _stub(monkeypatch, 0.9)
    g = tensat_py.load("squeezenet")
    r = tensat_py.optimize(g, verify=False, confirm=True, time_limit=30)
    assert len(calls) == 1 and calls[0][0] is g
    assert r.extraction_status == "fallback-not-faster" and r.graph is g
    assert r.cost_after == r.cost_before and r.candidate_cost < r.cost_before
    assert "measured 0.900x" in r.message and r.stats["measured_speedup"] == 0.9


def test_a_candidate_measured_faster_is_kept(monkeypatch):
    calls = _stub(monkeypatch, 1.2)
    r = tensat_py.optimize("squeezenet", verify=False, confirm=True, time_limit=30)
    assert len(calls) == 1 and r.graph is r.candidate
    assert r.extraction_status not in tensat_py.pipeline.FALLBACKS


def test_roofline_is_not_confirmed_by_default(monkeypatch):
    calls = _stub(monkeypatch, 0.5)
    r = tensat_py.optimize("squeezenet", verify=False, time_limit=30)
    assert calls == [] and r.graph is r.candidate and "measured_speedup" not in r.stats


class _Measured(OpCostModel):
    """Stands for a measured model on the CPU (its name and device are what count): a
    matmul costs the same at any size, so merging two is predicted cheaper."""

    device = "cpu"

    def __init__(self, name: str) -> None:
        self.name = name

    def cost(self, ctx):
        return 1e-5 if ctx.op == "matmul" and not ctx.constant else 0.0


@pytest.mark.parametrize(
    ("name", "device", "confirmed"),
    [("profile", "cpu", True), ("learned", "cpu", True), ("profile", "t4", False)],
)
def test_cpu_measured_cost_models_are_confirmed_by_default(monkeypatch, name, device, confirmed):
    calls = _stub(monkeypatch, 0.5)
    b = GraphBuilder()
    x = b.input((1, 64), "x")
    w1, w2 = b.weight((64, 64), "w1"), b.weight((64, 64), "w2")
    g = b.finish([b.matmul(x, w1), b.matmul(x, w2)])  # two matmuls sharing an input
    model = _Measured(name)
    model.device = device
    r = tensat_py.optimize(g, cost_model=model, verify=False, min_gain=0.0, k_multi=1)
    assert r.candidate_cost < r.cost_before  # the merge
    if confirmed:
        assert len(calls) == 1 and r.extraction_status == "fallback-not-faster" and r.graph is g
    else:
        assert calls == [] and r.graph is r.candidate


def test_measured_speedup_times_both_programs():
    b = GraphBuilder()
    x = b.input((1, 8, 16, 16), "x")
    g = b.finish(b.relu(b.relu(x)))
    c = measured_speedup(g, g, budget=0.05, min_rounds=5, max_rounds=7)
    assert 5 <= c.rounds <= 7 and math.isfinite(c.speedup) and c.speedup > 0
    assert c.input_ms > 0 and c.candidate_ms > 0
    with pytest.raises(ValueError, match="min_rounds"):
        measured_speedup(g, g, min_rounds=0)


def test_cli_confirm_shows_the_measured_speedup(monkeypatch):
    from click.testing import CliRunner
    from tensat_py.cli import main

    _stub(monkeypatch, 0.9)
    args = ["optimize", "squeezenet", "--confirm", "--no-verify", "--time-limit", "30"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "measured speedup (onnxruntime)" in r.output and "0.900x (5 rounds)" in r.output
    assert "fallback-not-faster" in r.output
    r = CliRunner().invoke(main, [*args[:2], "--no-verify", "--time-limit", "30"])
    assert r.exit_code == 0 and "measured speedup" not in r.output


class _FreeMerge(_Measured):
    """Prices a 64-wide matmul at 10 us and a wider one (two merged) at nothing, as the
    xla model once priced hloenv_BayesNewton_jit_matmul's candidate."""

    def cost(self, ctx):
        if ctx.op == "matmul" and not ctx.constant and ctx.output.shape[-1] == 64:
            return 1e-5
        return 0.0


def test_a_candidate_priced_at_nothing_and_measured_slower_says_so(monkeypatch):
    """A candidate priced at 0 s has no predicted ratio: confirmation that keeps the
    input says the prediction in seconds (hloenv_BayesNewton_jit_matmul raised a
    ZeroDivisionError in xla_bench.py)."""
    calls = _stub(monkeypatch, 0.5)
    b = GraphBuilder()
    x = b.input((1, 64), "x")
    w1, w2 = b.weight((64, 64), "w1"), b.weight((64, 64), "w2")
    g = b.finish([b.matmul(x, w1), b.matmul(x, w2)])
    r = tensat_py.optimize(g, cost_model=_FreeMerge("profile"), verify=False, k_multi=1)
    assert r.candidate_cost == 0.0 < r.cost_before and len(calls) == 1
    assert r.extraction_status == "fallback-not-faster" and r.graph is g
    assert "is predicted to take 0 s but measured 0.500x" in r.message
