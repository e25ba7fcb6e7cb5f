"""Weights on XLA CPU (issue 41): weight-only operators pre-computed once
(``tensat_py.runtime.xla_exec.freeze_weights``), in confirmation, in the ``xla`` cost
model's whole-program prices and in ``bench/xla_bench.py``; and weights priced cold, as a
program that cycles through more weights than the caches keep reads them.

No assertion depends on this machine's timings: where a figure's size matters, module
timings are made up from the module's text (``fake_clock``); XLA still compiles every
module.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from tensat_py.builder import GraphBuilder
from tensat_py.cost import xla
from tensat_py.cost.profile import Measurement
from tensat_py.frontends.hlo import dumps, entry_leaves, loads
from tensat_py.graph import Graph
from tensat_py.runtime import numpy_exec, xla_exec
from tensat_py.runtime.xla_exec import freeze_weights

pytest.importorskip("jax")


def _merged(n: int = 8, k: int = 16) -> Graph:
    """``x @ concat(w1, w2)`` cut back into its halves and added: the form a dot merge
    leaves, its concatenation of weights weight-only."""
    b = GraphBuilder()
    x = b.input((1, n), "x")
    w1, w2 = b.weight((n, k), "w1"), b.weight((n, k), "w2")
    p0, p1 = b.split(b.matmul(x, b.concat(1, [w1, w2])), 1, [k, k])
    return b.finish([b.ewadd(p0, p1)])


def _separate(n: int = 8, k: int = 16) -> Graph:
    b = GraphBuilder()
    x = b.input((1, n), "x")
    w1, w2 = b.weight((n, k), "w1"), b.weight((n, k), "w2")
    return b.finish([b.ewadd(b.matmul(x, w1), b.matmul(x, w2))])


# ---------------------------------------------------------------------------- freezing
def test_weight_only_operators_become_weights_holding_their_values() -> None:
    g = _merged()
    feeds = numpy_exec.random_feeds(g, seed=1)
    frozen, values = freeze_weights(g, feeds)
    counts = frozen.op_counts()
    assert "concat" not in counts and "split" not in counts, counts
    assert counts["weight"] == 1 and counts["slice"] == 2, counts
    (w,) = (frozen.nodes[i] for i in frozen.weights())
    assert w.name.startswith("frozen_") and w.shape == (8, 32)
    np.testing.assert_array_equal(values[w.name], np.concatenate([feeds["w1"], feeds["w2"]], 1))
    assert "w1" not in values and "w2" not in values  # read only by what was frozen
    # XLA runs the frozen program to the original's values
    text = dumps(frozen)
    assert "concatenate" not in text
    got = xla_exec.run_text(text, [values[n] for n in entry_leaves(frozen)])[0]
    np.testing.assert_allclose(got, numpy_exec.run(g, feeds)[0], rtol=1e-5, atol=1e-6)
    # the structure alone: the same program, no values
    shape_only, none = freeze_weights(g)
    assert none == {} and shape_only.op_counts() == counts


def test_programs_without_weight_only_operators_come_back_unchanged() -> None:
    g = _separate()
    feeds = numpy_exec.random_feeds(g, seed=1)
    same, values = freeze_weights(g, feeds)
    assert same is g and values == feeds


def test_literals_and_broadcasts_are_left_to_xla() -> None:
    """A literal constant's operators are XLA's own constant folding's; a broadcast of a
    weight stays a broadcast (fused into its reader, it costs no memory pass)."""
    text = """HloModule lit

ENTRY main {
  x = f32[4,8]{1,0} parameter(0)
  c = f32[8]{0} constant({1, 2, 3, 4, 5, 6, 7, 8})
  n = f32[8]{0} negate(c)
  b = f32[4,8]{1,0} broadcast(n), dimensions={1}
  ROOT a = f32[4,8]{1,0} add(x, b)
}
"""
    g = loads(text)
    assert freeze_weights(g)[0] is g
    b = GraphBuilder()
    x = b.input((4, 8), "x")
    w = b.weight((8,), "w")
    wide = b.op("broadcast_to", w, shape=(4, 8))
    g = b.finish([b.ewadd(x, wide)])
    assert freeze_weights(g, numpy_exec.random_feeds(g))[0] is g


# ---------------------------------------------------------------------------- confirmation
def test_confirmation_on_xla_times_the_frozen_programs() -> None:
    from tensat_py.runtime.confirm import measured_speedup
    from tensat_py.runtime.protocol import XlaCpu

    prepared: list[tuple[dict[str, int], int]] = []

    class Spy(XlaCpu):
        def prepare(self, program, inputs, *, source):  # type: ignore[override]
            prepared.append((program.op_counts(), len(inputs)))
            return super().prepare(program, inputs, source=source)

    g = _separate()
    c = measured_speedup(g, _merged(), runtime=Spy(), budget=0.1, min_rounds=1, max_rounds=1)
    assert c.runtime == "xla-cpu"
    (a, na), (a2, _), (cand, nc) = prepared
    assert a == a2 == g.op_counts() and na == 3  # x, w1, w2
    assert "concat" not in cand and cand["weight"] == 1 and nc == 2  # x, the frozen weight


# ---------------------------------------------------------------------------- the xla model
@pytest.fixture
def fake_clock(cache, monkeypatch):
    """Quick measurements and module timings made up from the module's text: 5 us, plus
    per parameter element 1 ns, or 10 ns when the module's parameters hold more than 64
    KiB (its weights no longer stay in the "cache"), plus 0.01 ns per element per
    instruction. XLA still compiles every module."""
    monkeypatch.setattr(xla, "ELEMENTS", 2048)
    monkeypatch.setattr(xla, "CHAIN", 2)
    monkeypatch.setattr(
        xla, "TIMING", {"warmup": 1, "min_reps": 3, "max_reps": 6, "target_seconds": 0.001}
    )
    monkeypatch.setattr(xla, "MAX_PASS_ELEMENTS", 1 << 16)

    def time_module(self, text, args, deadline=None):
        xla_exec.compile_text(text)
        elements = sum(a.size for a in args)
        per = 1e-8 if sum(a.nbytes for a in args) > 64 << 10 else 1e-9
        body = text.split("ENTRY", 1)[1]
        instructions = len(re.findall(r"= [a-z0-9]+\[", body)) - len(args)
        t = 5e-6 + per * elements + 1e-11 * instructions * max(elements, 1)
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)

    def time_cycled(self, text, arg_sets, deadline=None):
        # one call over every set: each set's made-up time, with the weights of all the
        # sets counted together (together they pass the "cache")
        xla_exec.compile_text(text)
        per = 1e-8 if sum(a.nbytes for args in arg_sets for a in args) > 64 << 10 else 1e-9
        body = text.split("ENTRY", 1)[1]
        t = 0.0
        for args in arg_sets:
            elements = sum(a.size for a in args)
            instructions = len(re.findall(r"= [a-z0-9]+\[", body)) - len(args)
            t += 5e-6 + per * elements + 1e-11 * instructions * max(elements, 1)
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_cycled", time_cycled)


def test_weight_only_operators_cost_nothing_in_a_whole_program(fake_clock) -> None:
    """The merged program is priced with its concatenation of weights made once: as the
    program whose weight is stored concatenated."""
    model = xla.XlaCostModel()
    merged = model.graph_cost(_merged())
    stored = model.graph_cost(freeze_weights(_merged())[0])
    assert model._whole is True  # priced whole, not node by node
    assert merged == pytest.approx(stored, rel=1e-9)
    # and node by node, the concatenation of weights is free
    by_node = xla.XlaCostModel(programs=False)
    ctxs = [c for c in by_node.program_contexts(_merged()) if c.op == "concat"]
    assert ctxs and by_node.costs(ctxs) == [0.0]


_ONE_DOT = """HloModule one

ENTRY main {
  x = f32[1,8]{1,0} parameter(0)
  w = f32[8,8]{1,0} parameter(1)
  ROOT d = f32[1,8]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_replicated_module_gives_each_copy_its_own_weights() -> None:
    rep = xla.replicated_module(_ONE_DOT, {1}, 3)
    entry = rep.split("ENTRY", 1)[1]
    assert len(re.findall(r"parameter\(", entry)) == 4  # x shared, three weights
    assert len(re.findall(r" call\(", entry)) == 3
    exe = xla_exec.compile_text(rep)  # XLA takes it back
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8)).astype(np.float32)
    ws = [rng.standard_normal((8, 8)).astype(np.float32) for _ in range(3)]
    outs = xla_exec._execute(exe, [x, *ws])
    for o, w in zip(outs, ws, strict=True):
        np.testing.assert_allclose(o, x @ w, rtol=1e-5, atol=1e-6)
    assert xla.replicas(1 << 20, 128 << 20) == 128 and xla.replicas(1, 1 << 40) == xla.MAX_REPLICAS


def test_weights_beyond_the_cache_are_priced_cold(fake_clock, monkeypatch) -> None:
    """A program with weights past COLD_MIN_BYTES: its dots are priced from copies with
    weights of their own (here the made-up clock reads them at a tenth of the speed);
    below it, and with cold weights off, from the dot run alone."""
    monkeypatch.setattr(xla, "COLD_MIN_BYTES", 16 << 10)
    monkeypatch.setattr(xla, "COLD_MAX_BYTES", 256 << 10)
    g = _separate(64, 64)  # two 16 KiB weights: 32 KiB
    cold = xla.XlaCostModel()
    hot = xla.XlaCostModel()
    hot.cold_weights = False
    c, h = cold.graph_cost(g), hot.graph_cost(g)
    assert c > 3 * h, (c, h)
    # ... from copies solo and side by side, each with weights of its own, not from a floor
    ops_measured = {r.op for r in cold.db.records(cold.fingerprint)}
    assert {"xla:cold-region", "xla:solo-region", "__xla_stream__"} <= ops_measured, ops_measured
    # node by node too: the dot's figure is the cold measurement
    by_node = xla.XlaCostModel(programs=False)
    by_node_hot = xla.XlaCostModel(programs=False)
    by_node_hot.cold_weights = False
    assert by_node.graph_cost(g) > 3 * by_node_hot.graph_cost(g)
    assert "__xla_cold__" in {r.op for r in by_node.db.records(by_node.fingerprint)}
    # a small program stays hot
    monkeypatch.setattr(xla, "COLD_MIN_BYTES", 1 << 20)
    assert xla.XlaCostModel().graph_cost(g) == pytest.approx(h, rel=1e-9)


def test_a_split_of_weights_is_weight_only_and_frozen() -> None:
    """A dot over one part of a split of concatenated weights is weight-only (the split's
    pair is constant, as its parts are), so freeze_weights pre-computes it: only the dot
    that reads the input runs (BERT under k_multi=2 left five such 1024 x 3072 dots at
    run time, 5x the input's price)."""
    b = GraphBuilder()
    x = b.input((2, 8), name="x")
    w1, w2, w3 = (b.weight((8, 8), name=f"w{i}") for i in range(3))
    _, right = b.split(b.concat(1, [w1, w2]), 1)
    y = b.matmul(x, b.matmul(w3, right))
    g = b.finish([y])
    split = next(n for n in g.nodes if n.op == "split")
    assert split.constant
    frozen, feeds = xla_exec.freeze_weights(g, numpy_exec.random_feeds(g, seed=0))
    assert [n.op for n in frozen.nodes if n.op not in ("input", "weight")] == ["matmul"]
    ref = numpy_exec.run(g, numpy_exec.random_feeds(g, seed=0))[0]
    np.testing.assert_allclose(numpy_exec.run(frozen, feeds)[0], ref, rtol=1e-6)


def _dots(n: int, k: int = 64) -> Graph:
    """``n`` independent dots ``x_i @ w_i``, each an output: regions XLA's thunk executor
    can run side by side."""
    b = GraphBuilder()
    outs = [b.matmul(b.input((1, k), f"x{i}"), b.weight((k, k), f"w{i}")) for i in range(n)]
    return b.finish(outs)


@pytest.fixture
def cold_dots(cache, monkeypatch):
    """Weights from 64 KiB on are cold, quick measurements, no call overhead or dispatch,
    2 cores: for made-up cold timings of :func:`_dots`."""
    monkeypatch.setattr(xla, "COLD_MIN_BYTES", 64 << 10)
    monkeypatch.setattr(xla, "COLD_MAX_BYTES", 1 << 20)
    monkeypatch.setattr(
        xla, "TIMING", {"warmup": 1, "min_reps": 3, "max_reps": 6, "target_seconds": 0.001}
    )
    monkeypatch.setattr(xla.XlaCostModel, "overhead", lambda self: 0.0)
    monkeypatch.setattr(xla.XlaCostModel, "dispatch", lambda self: 0.0)
    monkeypatch.setattr(xla, "machine_cores", lambda: 2)


def test_independent_cold_regions_are_priced_side_by_side_as_xla_runs_them(
    cold_dots, monkeypatch
) -> None:
    """Each dot measured cold takes 100 us solo (copies one after another) and 50 us a copy
    side by side (two at a time on two cores): it keeps one core busy. Twelve such dots,
    all ready at the start, run six on the calling thread and six on a worker (XLA's
    executor splits a ready queue of more than eight), so the program costs six dots; eight
    run one after another; on one core, twelve run one after another."""
    solo, side = 1e-4, 5e-5

    def time_module(self, text, args, deadline=None):
        copies = len(re.findall(r" call\(", text.split("ENTRY", 1)[1]))
        t = copies * side if copies else 1e-9 * sum(a.size for a in args)
        return Measurement(t, 0.0, 1, t)

    def time_cycled(self, text, arg_sets, deadline=None):
        t = len(arg_sets) * xla.SOLO_COPIES * solo
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)
    monkeypatch.setattr(xla.XlaBackend, "time_cycled", time_cycled)
    assert xla.XlaCostModel().graph_cost(_dots(12)) == pytest.approx(6 * solo, rel=0.01)
    assert xla.XlaCostModel().graph_cost(_dots(8)) == pytest.approx(8 * solo, rel=0.01)
    monkeypatch.setattr(xla, "machine_cores", lambda: 1)
    assert xla.XlaCostModel().graph_cost(_dots(12)) == pytest.approx(12 * solo, rel=0.01)


def test_cold_figures_are_the_lowest_of_tries_made_in_rounds(cold_dots, monkeypatch) -> None:
    """A dot's cold figures (solo and side by side) are measured in rounds, one try of
    each a round, solo beside side by side, and the lowest try of each is kept: a slow
    phase of the machine that spans the first tries of each (here all but the fourth solo
    and the second side-by-side try, twice as slow) does not set the price. Eight dots
    run one after another, so the program costs eight fast solo dots."""
    solo, side = 1e-4, 5e-5
    calls: list[str] = []

    def time_module(self, text, args, deadline=None):
        copies = len(re.findall(r" call\(", text.split("ENTRY", 1)[1]))
        if not copies:  # the dot alone, hot
            t = 1e-9 * sum(a.size for a in args)
            return Measurement(t, 0.0, 1, t)
        calls.append("side")
        slow = 1.0 if calls.count("side") == 2 else 2.0
        t = copies * side * slow
        return Measurement(t, 0.0, 1, t)

    def time_cycled(self, text, arg_sets, deadline=None):
        calls.append("solo")
        slow = 1.0 if calls.count("solo") == 4 else 2.0
        t = len(arg_sets) * xla.SOLO_COPIES * solo * slow
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)
    monkeypatch.setattr(xla.XlaBackend, "time_cycled", time_cycled)
    assert xla.XlaCostModel().graph_cost(_dots(8)) == pytest.approx(8 * solo, rel=0.01)
    assert calls == ["side", "solo"] * xla.REGION_TRIES
