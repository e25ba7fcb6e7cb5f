"""Cold weights: a hot-measured cost model prices a program whose weights outgrow the
last-level cache at memory bandwidth (tensat_py.cost.residency). A fake backend gives
fixed figures, so the assertions are exact and never depend on this machine's speed."""

import pytest
from tensat_py import _core
from tensat_py.builder import GraphBuilder
from tensat_py.cost.base import graph_contexts
from tensat_py.cost.profile import (
    BANDWIDTH_ROUNDS,
    BANDWIDTH_SIDES,
    Measurement,
    ProfileCostModel,
)
from tensat_py.cost.residency import (
    BandwidthCurve,
    cold_adjust,
    export_weight_bytes,
    graph_weight_bytes,
    streamed_bytes,
)

HOT = 26e-6  # seconds: every operator measured alone, its weight in the cache
STREAM = 1e-3  # seconds for the calibration chain


class FakeBackend:
    """Fixed figures: every operator HOT seconds; the weight chain STREAM seconds."""

    name = "fake"

    def __init__(self) -> None:
        self.streams: list[tuple[int, int]] = []

    def info(self) -> dict:
        return {"backend": "fake"}

    def measure(self, ctx) -> Measurement:
        return Measurement(HOT, 0.0, 1, HOT)

    def weight_stream(self, n: int, count: int) -> Measurement:
        self.streams.append((n, count))
        return Measurement(STREAM, 0.0, 1, STREAM)


def _matmul_graph():
    """``relu(x @ w)`` with a 512x512 float32 weight (1 MiB)."""
    b = GraphBuilder()
    x = b.input((1, 512), "x")
    w = b.weight((512, 512), "w")
    return b.finish(b.relu(b.matmul(x, w)))


def _model(tmp_path, llc: int) -> ProfileCostModel:
    m = ProfileCostModel("cpu", backend=FakeBackend(), db=tmp_path / "p.sqlite")
    m.llc = llc
    return m


def _bandwidth(m: ProfileCostModel) -> float:
    """The model's bandwidth at 1 MiB, which the fake calibration fixes exactly."""
    # calibrated once: every size once per round, the sizes interleaved
    assert [n for n, _ in m.backend.streams] == list(BANDWIDTH_SIDES) * BANDWIDTH_ROUNDS
    (count,) = {c for n, c in m.backend.streams if n == 512}
    bw = count * 512 * 512 * 4 / STREAM
    assert m.bandwidth()(1 << 20) == bw
    return bw


def test_weights_that_fit_in_the_cache_keep_the_measured_figures(tmp_path):
    m = _model(tmp_path, llc=2 << 20)
    assert m.graph_cost(_matmul_graph()) == 2 * HOT  # matmul and relu, as measured


def test_weights_outgrowing_the_cache_stream_at_the_measured_bandwidth(tmp_path):
    g = _matmul_graph()
    m = _model(tmp_path, llc=512 << 10)
    cost = m.graph_cost(g)
    bw = _bandwidth(m)
    assert all(c * n * n * 4 >= 4 * m.llc for n, c in m.backend.streams)  # chains outgrow it
    assert cost == (1 << 20) / bw + HOT  # matmul reads 1 MiB of weight; relu none
    assert (1 << 20) / bw > HOT  # so the weight term decided it
    # outside a program's pricing, the figures are as measured
    assert [c for c in m.costs(graph_contexts(g)) if c > 0] == [HOT, HOT]


def test_an_exported_egraph_is_priced_like_its_graph(tmp_path):
    g = _matmul_graph()
    export = _core.EGraph(g.to_flat()).export()
    assert export_weight_bytes(export) == graph_weight_bytes(g) == 1 << 20
    m = _model(tmp_path, llc=512 << 10)
    costs = m.costs_for_export(export)
    mm = [c for op, c in zip(export["node_op"], costs, strict=True) if op == "matmul"]
    assert mm == [(1 << 20) / _bandwidth(m)]
    hot = _model(tmp_path, llc=2 << 20).costs_for_export(export)
    assert [c for op, c in zip(export["node_op"], hot, strict=True) if op == "matmul"] == [HOT]


def test_the_bandwidth_is_calibrated_once_per_device_and_cached(tmp_path):
    a = _model(tmp_path, llc=512 << 10)
    a.graph_cost(_matmul_graph())
    b = _model(tmp_path, llc=512 << 10)  # another process, same cache file
    b.graph_cost(_matmul_graph())
    assert len(a.backend.streams) == len(BANDWIDTH_SIDES) * BANDWIDTH_ROUNDS
    assert b.backend.streams == []
    assert b.bandwidth().points == a.bandwidth().points


def test_cold_adjust_leaves_free_operators_free():
    ctxs = graph_contexts(_matmul_graph())
    weight_reads = [streamed_bytes(c) for c in ctxs]
    assert sorted(weight_reads)[-1] == 1 << 20
    assert cold_adjust([0.0] * len(ctxs), ctxs, 1e9) == [0.0] * len(ctxs)


def test_bigger_weights_stream_faster_where_the_calibration_says_so():
    curve = BandwidthCurve([(1 << 20, 10e9), (4 << 20, 20e9)])
    assert curve(2 << 20) == pytest.approx(15e9)  # halfway in log(bytes)
    assert curve(1) == 10e9 and curve(1 << 40) == 20e9  # constant beyond the points
    with pytest.raises(ValueError, match="positive"):
        BandwidthCurve([])


class NoisyBackend(FakeBackend):
    """The chain at 1 MiB (n = 512) and 4 MiB (n = 1024) timed in turn: one slow moment
    (the second round at 4 MiB takes 3x), and 4 MiB otherwise slower per byte than 1 MiB
    by a small margin (noise that would invert a merge's price)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = {n: 0 for n in BANDWIDTH_SIDES}

    def weight_stream(self, n: int, count: int) -> Measurement:
        self.streams.append((n, count))
        k = self.calls[n]
        self.calls[n] += 1
        rate = {256: 10e9, 512: 20e9, 1024: 19e9, 2048: 30e9}[n]
        if n == 1024 and k == 1:
            rate /= 3
        seconds = count * n * n * 4 / rate
        return Measurement(seconds, 0.0, 1, seconds)


def test_the_bandwidth_is_the_median_of_interleaved_rounds_and_never_falls_with_size(tmp_path):
    m = ProfileCostModel("cpu", backend=NoisyBackend(), db=tmp_path / "p.sqlite")
    m.llc = 512 << 10
    curve = m.bandwidth()
    assert [n for n, _ in m.backend.streams] == list(BANDWIDTH_SIDES) * BANDWIDTH_ROUNDS
    rates = [bw for _, bw in curve.points]
    # the slow round is outvoted; 19 GB/s at 4 MiB after 20 at 1 MiB is pooled to 19.5
    assert rates == pytest.approx([10e9, 19.5e9, 19.5e9, 30e9])
    assert rates == sorted(rates)


def test_the_environment_overrides_the_last_level_cache(monkeypatch):
    from tensat_py.cost.residency import last_level_cache_bytes

    monkeypatch.setenv("TENSAT_LLC_BYTES", str(3 << 20))
    assert last_level_cache_bytes() == 3 << 20
    monkeypatch.setenv("TENSAT_LLC_BYTES", "-1")
    with pytest.raises(ValueError, match="TENSAT_LLC_BYTES must be a positive"):
        last_level_cache_bytes()
