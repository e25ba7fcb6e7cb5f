"""Measured confirmation on XLA (issue 41, item 4): an HLO program's candidate is timed
beside its input on XLA's CPU client, with an A/A, through the same runtime protocol as
onnxruntime; the result and --json say which runtime measured what."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jax
import numpy as np
import pytest
import tensat_py
from click.testing import CliRunner
from tensat_py.builder import GraphBuilder
from tensat_py.cost import get_cost_model
from tensat_py.frontends.hlo import loads
from tensat_py.runtime.confirm import measured_speedup
from tensat_py.runtime.protocol import OnnxRuntimeCpu, Runtime, XlaCpu, runtime_for

ROOT = Path(__file__).resolve().parents[1]
LORA = ROOT / "bench" / "hlo_modules" / "jax_lora_dense.hlo"


def _lora_hlo() -> str:
    """A LoRA dense layer lowered by JAX: ``x @ (w + 2 (a @ b))``, which the optimiser
    turns into ``x @ w + 2 ((x @ a) @ b)`` (no 1024x1024 update): clearly faster."""

    def lora(x, w, a, b):
        return x @ (w + 2.0 * (a @ b))

    f32 = np.float32
    shapes = [(32, 1024), (1024, 1024), (1024, 8), (8, 1024)]
    args = [jax.ShapeDtypeStruct(s, f32) for s in shapes]
    return jax.jit(lora).lower(*args).as_text(dialect="hlo")


class FakeRuntime(Runtime):
    """Runs nothing: a run of the input advances the clock by ``input_seconds`` (1 s), the
    i-th run of any other program by ``candidate_seconds`` (its i-th entry, cyclically,
    for a list)."""

    name, version = "fake-cpu", "fake 1.0"

    def __init__(self, candidate_seconds: float | list[float], input_seconds: float = 1.0) -> None:
        steps = candidate_seconds if isinstance(candidate_seconds, list) else [candidate_seconds]
        self.now, self.steps, self.prepared = 0.0, steps, []
        self.input_seconds = input_seconds

    def clock(self) -> float:
        return self.now

    def inputs(self, graph, seed):
        return seed

    def prepare(self, program, inputs, *, source):
        self.prepared.append(program)
        runs = iter(range(10**9))

        def run() -> None:
            i = next(runs)
            self.now += self.input_seconds if program is source else self.steps[i % len(self.steps)]

        return run


def test_the_runtime_follows_the_front_end():
    assert isinstance(runtime_for(loads(_lora_hlo())), XlaCpu)
    b = GraphBuilder()
    built = b.finish(b.relu(b.input((2, 3), "x")))
    assert isinstance(runtime_for(built), OnnxRuntimeCpu)
    # A prediction of the xla cost model is confirmed on XLA, whatever the front end.
    assert isinstance(runtime_for(built, get_cost_model("xla", device="cpu")), XlaCpu)
    assert isinstance(runtime_for(built, get_cost_model("roofline")), OnnxRuntimeCpu)
    assert XlaCpu().version.startswith("jaxlib ") and XlaCpu().label.startswith("xla-cpu (")


def test_a_candidate_measured_slower_keeps_the_hlo_input_deterministically():
    g = loads(_lora_hlo())
    fake = FakeRuntime(candidate_seconds=1.25)
    r = tensat_py.optimize(g, cost_model="roofline", device="cpu", confirm=fake, time_limit=30)
    assert r.candidate_cost < r.cost_before  # predicted faster...
    assert r.extraction_status == "fallback-not-faster" and r.graph is g  # ...measured not
    # The input, its A/A copy and the candidate were prepared.
    assert [p is g for p in fake.prepared] == [True, True, False]
    assert fake.prepared[2] is r.candidate
    st = r.stats
    assert st["measured_speedup"] == pytest.approx(0.8) and st["measured_runtime"] == "fake-cpu"
    assert st["measured_aa"] == 1.0 and st["measured_aa_interval"] == [1.0, 1.0]
    assert "measured 0.800x [0.800, 0.800] on fake-cpu" in r.message
    assert "A/A 1.000x [1.000, 1.000]" in r.message
    m = r.to_json()["measured"]
    assert m["runtime_name"] == "fake-cpu" and m["runtime_version"] == "fake 1.0"
    assert m["speedup"] == pytest.approx(0.8) and m["aa"] == 1.0 and m["rounds"] >= 5


def test_a_candidate_measured_faster_is_kept_deterministically():
    g = loads(_lora_hlo())
    r = tensat_py.optimize(
        g, cost_model="roofline", device="cpu", confirm=FakeRuntime(0.5), time_limit=30
    )
    assert r.graph is r.candidate and not r.fell_back
    assert r.stats["measured_speedup"] == pytest.approx(2.0)
    assert r.stats["measured_speedup_interval"] == pytest.approx([2.0, 2.0])
    # the median run of each, in milliseconds: the input 1 s a run, the candidate 0.5 s
    assert r.stats["measured_input_ms"] == pytest.approx(1000.0)
    assert r.stats["measured_candidate_ms"] == pytest.approx(500.0)


def test_a_median_gain_whose_interval_reaches_below_1_is_not_kept():
    # The warm-up run takes the first step; then 5 rounds at 1.25x, 0.95x, 1.25x, 0.95x,
    # 1.25x: median 1.25x, but the interval [0.952, 1.25] does not clear 1.
    g = loads(_lora_hlo())
    fake = FakeRuntime([0.8, 0.8, 1.05])
    r = tensat_py.optimize(g, cost_model="roofline", device="cpu", confirm=fake, time_limit=30)
    st = r.stats
    assert st["measured_speedup"] == pytest.approx(1.25)
    assert st["measured_speedup_interval"][0] == pytest.approx(1 / 1.05)
    assert r.extraction_status == "fallback-not-faster" and r.graph is g
    assert "not measurably faster" in r.message


def test_a_steady_gain_in_noisy_rounds_of_a_short_program_is_kept_over_enough_rounds():
    # Runs of 1 ms (so each timed run follows a lead-in run of its own): the candidate
    # measures 1.25x in three rounds of five and 0.95x in two. The median's 95 % interval
    # clears 1 over confirm.MAX_ROUNDS (200) rounds; over 30 it reaches down to 0.95. The
    # made-up runs take no wall time, so the budget (10 s of the 60 s left) allows 200.
    from tensat_py.runtime.confirm import MAX_ROUNDS

    g = loads(_lora_hlo())
    steps = [0.8e-3, 0.8e-3, 0.8e-3, 1.05e-3, 1.05e-3]
    r = tensat_py.optimize(
        g,
        cost_model="roofline",
        device="cpu",
        time_limit=60,
        confirm=FakeRuntime(steps, input_seconds=1e-3),
    )
    st = r.stats
    assert st["confirm_rounds"] == MAX_ROUNDS == 200
    assert st["measured_speedup"] == pytest.approx(1.25)
    assert st["measured_speedup_interval"] == pytest.approx([1.25, 1.25])
    assert r.graph is r.candidate and not r.fell_back
    c = measured_speedup(g, r.candidate, runtime=FakeRuntime(steps, 1e-3), max_rounds=30)
    assert c.rounds == 30 and c.speedup_interval[0] == pytest.approx(1 / 1.05)


def test_an_hlo_candidate_is_confirmed_on_xla():
    g = loads(_lora_hlo())
    # Predicted 4x faster; measured about 1.4x (the 1024x1024 update is gone): kept. A
    # busy machine can blur one measurement, so up to three are made.
    for _ in range(3):
        r = tensat_py.optimize(g, cost_model="roofline", device="cpu", confirm=True, time_limit=60)
        st = r.stats
        assert st["measured_on"] == "xla" and st["measured_runtime"] == "xla-cpu"
        assert st["measured_runtime_version"].startswith("jaxlib ")
        assert math.isfinite(st["measured_speedup"]) and math.isfinite(st["measured_aa"])
        lo, hi = st["measured_aa_interval"]
        assert lo <= st["measured_aa"] <= hi
        if r.graph is r.candidate:
            break
    assert st["measured_speedup"] > 1.01 and st["measured_speedup_interval"][0] > 1.0
    assert r.graph is r.candidate
    # Each program's median run is reported; on a busy machine the two medians need not
    # order as the median per-round ratio does (their values: the deterministic test).
    assert st["measured_input_ms"] > 0 and st["measured_candidate_ms"] > 0


def test_measured_speedup_on_xla_times_a_copy_of_the_input():
    g = loads(_lora_hlo())
    c = measured_speedup(g, g, budget=0.05, min_rounds=5, max_rounds=6)
    assert c.runtime == "xla-cpu" and c.runtime_version.startswith("jaxlib ")
    assert 5 <= c.rounds <= 6 and c.speedup > 0 and c.aa > 0
    assert c.aa_interval[0] <= c.aa <= c.aa_interval[1]
    assert math.isnan(c.source_ms)  # XLA has no source model to time


def test_cli_confirm_json_names_the_xla_measurement(tmp_path):
    from tensat_py.cli import main

    out = tmp_path / "out.hlo"
    args = ["optimize", str(LORA), "-o", str(out), "--confirm", "--cost-model", "roofline"]
    r = CliRunner().invoke(main, [*args, "--json", "--time-limit", "60"])
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)["measured"]
    assert m["runtime"] == "xla" and m["runtime_name"] == "xla-cpu"
    assert m["runtime_version"].startswith("jaxlib ") and m["rounds"] >= 5
    assert m["speedup"] > 0 and len(m["aa_interval"]) == 2 and m["aa"] > 0
    assert out.read_text().startswith("HloModule")
    r = CliRunner().invoke(main, [*args, "--time-limit", "60"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "measured speedup (xla)" in text and "A/A (input vs its copy)" in text
    assert "xla-cpu (jaxlib" in text
