"""The ``xla`` cost model (tensat_py.cost.xla): XLA's CPU backend measured through jaxlib,
its loop fusions priced as one pass; the operator facts every cost model reads.

Small shapes and few repetitions (the module's defaults are lowered for each test); no
assertion depends on this machine's timings: where a figure's size matters, the module
timings are made up from the module's text (``fake_clock``) and only XLA's compilation
(which decides the fusions) is real.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner
from tensat_py import ops
from tensat_py.cli import main
from tensat_py.cost import get_cost_model, xla, xla_regions
from tensat_py.cost.base import make_context
from tensat_py.cost.database import ProfileDatabase
from tensat_py.cost.profile import canonical, signature
from tensat_py.cost.roofline import RooflineCostModel
from tensat_py.graph import Graph

pytest.importorskip("jax")

SMALL_HLO = """HloModule small

ENTRY main {
  x = f32[32,64]{1,0} parameter(0)
  w = f32[64,16]{1,0} parameter(1)
  d = f32[32,16]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[32,16]{1,0} exponential(d)
  ROOT a = f32[32,16]{1,0} add(e, d)
}
"""


@pytest.fixture
def quick(cache, monkeypatch):
    """A cache of its own and small, quick measurements for every XlaCostModel."""
    monkeypatch.setattr(xla, "ELEMENTS", 2048)
    monkeypatch.setattr(xla, "CHAIN", 2)
    monkeypatch.setattr(
        xla, "TIMING", {"warmup": 1, "min_reps": 3, "max_reps": 6, "target_seconds": 0.001}
    )
    monkeypatch.setattr(xla, "MAX_PASS_ELEMENTS", 1 << 16)
    return cache


@pytest.fixture
def fake_clock(quick, monkeypatch):
    """Module timings made up from the module's text (no clock, no load on the machine):
    5 us, plus 1 ns per parameter element, plus 0.01 ns per element per instruction. XLA
    still compiles every module (its fusion decides what a program's regions are)."""
    import re

    from tensat_py.cost.profile import Measurement
    from tensat_py.runtime import xla_exec

    def time_module(self, text, args, deadline=None):
        xla_exec.compile_text(text)
        elements = sum(a.size for a in args)
        body = text.split("ENTRY", 1)[1]
        instructions = len(re.findall(r"= [a-z0-9]+\[", body)) - len(args)
        t = 5e-6 + 1e-9 * elements + 1e-11 * instructions * max(elements, 1)
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)


def _sum_chain(k: int, shape: tuple[int, ...] = (64, 256)) -> Graph:
    """``x + s0 + s1 + ...``: k sums of a scalar input (broadcast) onto x."""
    g = Graph()
    y = g.add_input("x", shape, "float32")
    for i in range(k):
        y = g.add_node("add", {}, [y, g.add_input(f"s{i}", (), "float32")])
    g.outputs = [y]
    return g


def test_operator_facts_are_declared_with_the_operators() -> None:
    assert ops.kernel_of("ewadd") == ops.kernel_of("add") == "add"
    assert ops.kernel_of("ewmul") == "mul" and ops.kernel_of("conv2d") == "conv2d"
    assert ops.get("add").commutative and ops.get("ewmul").commutative
    assert not ops.get("sub").commutative
    assert {ops.get(o).fusion for o in ("matmul", "conv2d", "dot_general", "convolution")} == {
        "library"
    }
    assert ops.get("exp").fusion == "elementwise" and ops.get("reduce_sum").fusion == "reduce"
    assert ops.get("broadcast_in_dim").fusion == "broadcast"
    assert ops.get("transpose").fusion == "reshape"
    assert all(d.fusion in ops.FUSION_KINDS for d in ops.all_ops().values())
    # Declared, not attached afterwards by name: no dialect module keeps a table of them.
    import inspect

    for mod in ("taso", "tensor", "hlo"):
        src = inspect.getsource(__import__(f"tensat_py.ops.{mod}", fromlist=["_"]))
        assert "attach_facts" not in src and "attach_hlo" not in src
    bad = ops.OpDef("not_an_op", "tensor", lambda c, a: a[0], lambda c: (0.0, 0.0), None)
    with pytest.raises(ValueError, match="fusion 'fused' is not one of"):
        ops.register(dataclasses.replace(bad, fusion="fused"))
    # profile's canonical signature reads the same facts
    a = make_context("ewadd", {}, [(8, 8), (8, 8)], (8, 8))
    b = make_context("add", {}, [(8, 8), (8, 8)], (8, 8))
    assert canonical(a).op == "add" and signature(a) == signature(b)


@pytest.mark.parametrize("programs", [True, False])
def test_a_chain_of_sums_is_one_pass_under_xla_and_k_under_roofline(fake_clock, programs) -> None:
    model = xla.XlaCostModel(programs=programs)
    roof = RooflineCostModel("cpu")
    x1, x8 = model.graph_cost(_sum_chain(1)), model.graph_cost(_sum_chain(8))
    r1, r8 = roof.graph_cost(_sum_chain(1)), roof.graph_cost(_sum_chain(8))
    assert x1 > 0 and r8 / r1 > 6
    assert x8 / x1 < 3, (x1, x8)  # one pass and 8 cheap sums, not 8 passes


def test_a_dot_is_measured_once_and_cached(quick) -> None:
    # 256 x 256 by 256 x 256 (34 MFLOP): well above the call overhead it is measured less
    # (a 32 x 64 by 64 x 16 dot once measured no slower than that overhead, so priced 0)
    ctx = make_context(
        "dot_general",
        {"lhs_batch": (), "rhs_batch": (), "lhs_contract": (1,), "rhs_contract": (0,)},
        [(256, 256), (256, 256)],
        (256, 256),
    )
    first = xla.XlaCostModel()
    c1 = first.cost(ctx)
    assert c1 > 0 and first.measured >= 2  # the call overhead and the dot
    second = xla.XlaCostModel()
    assert second.fingerprint == first.fingerprint
    assert second.cost(ctx) == c1 and second.measured == 0
    db = ProfileDatabase()
    info = db.devices()[first.fingerprint]
    assert info["runtime"] == "xla-cpu" and info["jaxlib"] != "absent"
    assert "dot_general" in {r.op for r in db.records(first.fingerprint)}


def test_ewadd_and_add_share_one_price(quick, monkeypatch) -> None:
    """ewadd and add run as one kernel (``OpDef.kernel``): one chain measured, one price.
    The chains' times are made up (an add 1 us, a multiply 3 us): on a 2-core machine
    whose pace moves by 1.3x in stretches of seconds, a real chain of 2 adds over 2,048
    elements once measured no slower than one add, and the price came out 0."""
    from tensat_py.cost.profile import Measurement

    timed: list[str] = []
    each = {"add": 1e-6, "mul": 3e-6}

    def time_graph(self, graph):
        ops_ = [node.op for node in graph.nodes]
        timed.append(ops_[-1])
        t = sum(each.get(op, 1e-6) for op in ops_ if op not in ("input", "weight"))
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_graph", time_graph)
    model = xla.XlaCostModel()
    shapes = [(64, 64), (64, 64)]
    ew = model.node_cost("ewadd", {}, shapes, (64, 64))
    add = model.node_cost("add", {}, shapes, (64, 64))
    assert ew == add > 0
    assert timed and "ewadd" not in timed  # add's chain measured, priced for both
    mul = model.node_cost("ewmul", {}, shapes, (64, 64))
    assert mul == model.node_cost("mul", {}, shapes, (64, 64)) > add


def test_constant_and_view_nodes_cost_nothing(quick) -> None:
    model = xla.XlaCostModel()
    assert model.node_cost("exp", {}, [(8, 8)], (8, 8), constant=True) == 0.0
    assert model.node_cost("reshape", {"shape": (64,)}, [(8, 8)], (64,)) == 0.0


def test_other_devices_are_refused() -> None:
    with pytest.raises(ValueError, match=r"xla: .*device='cpu'"):
        get_cost_model("xla", "t4")


def test_tensat_profile_runtime_xla_fills_the_cache(quick, tmp_path) -> None:
    path = tmp_path / "small.hlo"
    path.write_text(SMALL_HLO)
    res = CliRunner().invoke(main, ["profile", str(path), "--runtime", "xla", "-q"])
    assert res.exit_code == 0, res.output
    assert "new measurements" in res.output and "xla-cpu" in res.output
    db = ProfileDatabase()
    fps = [fp for fp, info in db.devices().items() if info.get("runtime") == "xla-cpu"]
    assert len(fps) == 1
    ops_cached = {r.op for r in db.records(fps[0])}
    assert {"dot_general", "__xla_overhead__", "__xla_elementwise__"} <= ops_cached
    # a second run finds everything cached
    again = CliRunner().invoke(main, ["profile", str(path), "--runtime", "xla", "-q"])
    assert again.exit_code == 0 and ": 0 new measurements" in again.output, again.output


def test_hlo_on_cpu_defaults_to_xla(quick) -> None:
    import tensat_py
    from tensat_py.frontends.hlo import loads

    res = tensat_py.optimize(loads(SMALL_HLO), device="cpu", confirm=False, time_limit=30)
    assert res.cost_model == "xla" and res.device == "cpu"
    assert res.to_json()["cost_model"] == "xla"
    explicit = tensat_py.optimize(
        loads(SMALL_HLO), device="cpu", cost_model="roofline", confirm=False, time_limit=30
    )
    assert explicit.cost_model == "roofline"
    t4 = tensat_py.optimize(loads(SMALL_HLO), device="t4", confirm=False, time_limit=30)
    assert (t4.cost_model, t4.device) == ("roofline", "t4")


def test_hlo_input_is_priced_for_the_cpu_when_no_device_is_given(quick) -> None:
    """An HLO module runs on XLA's CPU client here: with no ``device`` it is priced by the
    xla cost model on ``cpu``; a graph no front end loaded keeps Tensat's ``t4``."""
    import tensat_py
    from tensat_py.frontends.hlo import loads

    res = tensat_py.optimize(loads(SMALL_HLO), confirm=False, time_limit=30)
    assert (res.cost_model, res.device) == ("xla", "cpu")
    assert res.to_json()["device"] == "cpu"
    built = tensat_py.optimize(tensat_py.load("squeezenet"), verify=False, time_limit=30)
    assert (built.cost_model, built.device) == ("roofline", "t4")


def test_the_command_prices_an_hlo_file_for_the_cpu_by_default(quick, tmp_path) -> None:
    from tensat_py.cli import main

    path = tmp_path / "small.hlo"
    path.write_text(SMALL_HLO)
    out = CliRunner().invoke(main, ["optimize", str(path), "--json", "--no-confirm"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert (got["cost_model"], got["device"]) == ("xla", "cpu")


def test_a_program_is_priced_as_xla_compiles_it(fake_clock) -> None:
    """exp(x) + exp(x): XLA computes exp(x) once (CSE) in one fusion, one pass over x;
    priced operator by operator, each exp enters a region of its own (two passes)."""
    g = Graph()
    x = g.add_input("x", (64, 256), "float32")
    g.outputs = [g.add_node("add", {}, [g.add_node("exp", {}, [x]), g.add_node("exp", {}, [x])])]
    whole = xla.XlaCostModel().graph_cost(g)
    by_node = xla.XlaCostModel(programs=False).graph_cost(g)
    assert 0 < whole < 0.75 * by_node, (whole, by_node)
    # identical regions are measured once: a second model measures nothing
    again = xla.XlaCostModel()
    assert again.graph_cost(_sum_chain(3)) >= 0 and again.measured >= 0
    third = xla.XlaCostModel()
    assert third.graph_cost(_sum_chain(3)) == again.graph_cost(_sum_chain(3))
    assert third.measured == 0


def test_region_modules_run_alone(quick) -> None:
    from tensat_py.frontends.hlo.parser import parse_module
    from tensat_py.runtime import xla_exec

    exe = xla_exec.compile_text(SMALL_HLO)
    optimised = parse_module(exe.hlo_modules()[0].to_string())
    kernels = [i for i in optimised.entry.instructions if i.opcode not in ("parameter",)]
    assert kernels
    for ins in kernels:
        text = xla.region_module(optimised, ins)
        assert "ENTRY" in text
        sig, body = xla.region_signature(text)
        assert "metadata" not in body and json.loads(sig)["calibration"] == "xla region"
        xla_exec.compile_text(text)  # XLA takes it back


def test_past_the_measuring_deadline_figures_are_estimated(quick) -> None:
    import time

    model = xla.XlaCostModel()
    model.measure_until(time.monotonic() - 1.0)
    cost = model.node_cost("matmul", {"act": 0}, [(64, 128), (128, 32)], (64, 32))
    assert cost > 0 and model.measured == 0 and model.estimated >= 1


def test_pricing_says_how_the_programs_were_priced(quick) -> None:
    """``pricing()`` tells a program priced whole (its regions measured) from one priced
    operator by operator past the deadline, with its roofline estimates counted."""
    import time

    from tensat_py.frontends.hlo import loads

    whole = xla.XlaCostModel()
    whole.measure_until(None)
    whole.graph_cost(loads(SMALL_HLO))
    assert (whole.pricing().whole, whole.pricing().by_operator) == (1, 0)
    assert whole.pricing().estimated == 0 and whole.pricing().note() == ""

    late = xla.XlaCostModel()  # the cache is the test's own: nothing measured yet
    late.measure_until(time.monotonic() - 1.0)
    late.graph_cost(_sum_chain(2))  # its first program: too late to measure its regions
    p = late.pricing()
    assert (p.whole, p.by_operator) == (0, 1) and "deadline" in p.why
    assert p.estimated >= 1 and "roofline cpu" in p.describe() and "profile" in p.note()
    late.measure_until(None)  # a new optimisation starts a new account
    assert late.pricing() == type(p)()

    # An opaque operator (a sort kept as it is) cannot run alone: its price is a roofline
    # estimate that no measurement replaces, counted apart and not blamed on the deadline.
    sort = (
        "HloModule s\n\nless {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
        "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\nENTRY main {\n"
        "  x = f32[8,16]{1,0} parameter(0)\n"
        "  s = f32[8,16]{1,0} sort(x), dimensions={1}, to_apply=less\n"
        "  c = f32[] constant(2)\n  b = f32[8,16]{1,0} broadcast(c), dimensions={}\n"
        "  ROOT m = f32[8,16]{1,0} multiply(s, b)\n}\n"
    )
    by_op = xla.XlaCostModel(programs=False)
    by_op.measure_until(None)
    by_op.graph_cost(loads(sort))
    p = by_op.pricing()
    assert (p.unmeasurable, p.estimated, p.note()) == (1, 0, "") and "cannot run" in p.describe()


def test_optimize_says_when_its_prices_are_roofline_estimates(quick, monkeypatch) -> None:
    """With no time to measure, the xla model's prices are roofline estimates: the result
    says so (``stats["pricing"]``, the message) instead of passing them off as XLA's."""
    import tensat_py
    from tensat_py import pipeline
    from tensat_py.frontends.hlo import loads

    ok = tensat_py.optimize(loads(SMALL_HLO), confirm=False, time_limit=30)
    assert ok.stats["pricing"]["whole"] >= 1 and ok.stats["pricing"]["estimated"] == 0
    assert "estimate" not in ok.message
    monkeypatch.setattr(pipeline, "MEASURE_SHARE", 0.0)  # the measuring deadline: now
    big = SMALL_HLO.replace("32,", "48,").replace("[64,16]", "[64,24]").replace(",16]", ",24]")
    res = tensat_py.optimize(loads(big), confirm=False, time_limit=30)
    assert res.stats["pricing"]["by_operator"] >= 1 and res.stats["pricing"]["estimated"] >= 1
    assert "roofline cpu estimates, not measurements" in res.message
    assert "operator by operator" in res.to_json()["stats"]["pricing"]["described"]


def test_the_hlo_bench_marks_a_prediction_made_of_estimates(quick, monkeypatch, tmp_path) -> None:
    from tensat_py import pipeline
    from tensat_py.bench_hlo import HloRow, bench_module, markdown

    monkeypatch.setattr(pipeline, "MEASURE_SHARE", 0.0)  # the measuring deadline: now
    path = tmp_path / "small.hlo"
    path.write_text(SMALL_HLO)
    row = bench_module(str(path), "greedy", 20.0, 2000, 0.05, cost_model="xla", device="cpu")
    assert row["status"] == "ok" and row["estimated"] >= 1, row
    table = markdown([HloRow(**row)])
    assert f"predicted with {row['estimated']} roofline-estimated prices" in table


def test_measuring_the_input_s_regions_stops_at_the_deadline(fake_clock, monkeypatch) -> None:
    """A region can take far longer to measure than REGION_SECONDS (a large convolution):
    pricing the input whole stops once the deadline passes, and every program of that
    optimisation is priced operator by operator instead (a 60 s optimisation of an
    EfficientNet module once measured regions for 15 minutes)."""
    import time

    slow = xla.XlaBackend.time_module

    def slower(self, text, args, deadline=None):
        time.sleep(0.05)
        return slow(self, text, args)

    monkeypatch.setattr(xla.XlaBackend, "time_module", slower)
    monkeypatch.setattr(xla, "REGION_SECONDS", 0.0)  # the estimate lets it start
    model = xla.XlaCostModel()
    g = Graph()
    x, w = g.add_input("x", (64, 256), "float32"), g.add_input("w", (256, 8), "float32")
    contract = {"lhs_batch": [], "rhs_batch": [], "lhs_contract": [1], "rhs_contract": [0]}
    d = g.add_node("dot_general", contract, [g.add_node("exp", {}, [x]), w])
    g.outputs = [g.add_node("exp", {}, [d])]  # a fusion, a dot, a fusion
    from tensat_py.frontends.hlo import dumps
    from tensat_py.runtime import xla_exec

    xla_exec.compile_text(dumps(g))  # compiled (and cached) and calibrated before the clock
    model.overhead(), model.dispatch()
    model.measure_until(time.monotonic() + 0.03)
    t0 = time.monotonic()
    cost = model.graph_cost(g)
    assert cost > 0 and model._whole is False
    assert time.monotonic() - t0 < 5.0


def _which(text: str) -> str:
    """Which module of SMALL_HLO's pricing ``text`` is: the dot, the fusion after it, or
    the pair of them."""
    return "pair" if " call(" in text else "dot" if " dot(" in text else "fusion"


def test_a_region_s_figure_is_the_median_of_tries_made_in_rounds(quick, monkeypatch) -> None:
    """Each region of a program (and each pair of a region after its producer) is
    measured REGION_TRIES times, one measurement of every module per round (so one burst
    of load from another process does not decide a figure), and their median (not the
    lowest, nor the mean) is what the program is priced with."""
    from tensat_py.cost.profile import Measurement
    from tensat_py.frontends.hlo import parse_module
    from tensat_py.runtime import xla_exec

    calls: list[str] = []  # which module each timing was of
    base = {"dot": 1e-4, "fusion": 2e-4, "pair": 2.5e-4}

    def time_module(self, text, args, deadline=None):
        calls.append(_which(text))
        n = calls.count(calls[-1])
        # tries 1, 2, 9, 4, 3 times the base: the median 3, the lowest 1, the mean 3.8
        t = base[calls[-1]] * {1: 1, 2: 2, 3: 9, 4: 4, 5: 3}[n]
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)
    monkeypatch.setattr(xla.XlaCostModel, "overhead", lambda self: 0.0)
    monkeypatch.setattr(xla.XlaCostModel, "dispatch", lambda self: 0.0)
    model = xla.XlaCostModel()
    optimised = parse_module(xla_exec.compile_text(SMALL_HLO).hlo_modules()[0].to_string())
    regions = [i for i in optimised.entry.instructions if i.opcode not in xla_regions.FREE_OPCODES]
    assert len(regions) == 2  # the dot and the fusion after it
    cost = model.program_seconds(SMALL_HLO)
    assert model.measured == 3  # two regions, one pair
    assert xla.REGION_TRIES == 5 and len(calls) == 5 * 3
    # rounds: every module once before any module a second time
    assert sorted(calls[:3]) == ["dot", "fusion", "pair"]
    # the dot, then the fusion after it: the pair's median less the dot's median
    assert cost == pytest.approx(3 * 1e-4 + 3 * (2.5e-4 - 1e-4))
    # cached: priced again without a measurement
    assert model.program_seconds(SMALL_HLO) == pytest.approx(cost)
    assert len(calls) == xla.REGION_TRIES * 3


def _made_up(monkeypatch: pytest.MonkeyPatch, base: dict[str, float]) -> None:
    """SMALL_HLO's modules timed ``base[_which(text)]`` seconds (read when timed, so a test
    may change ``base`` between pricings), no call overhead, no dispatch."""
    from tensat_py.cost.profile import Measurement

    def time_module(self, text, args, deadline=None):
        t = base[_which(text)]
        return Measurement(t, 0.0, 1, t)

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)
    monkeypatch.setattr(xla.XlaCostModel, "overhead", lambda self: 0.0)
    monkeypatch.setattr(xla.XlaCostModel, "dispatch", lambda self: 0.0)


def test_a_region_is_priced_after_its_producer(quick, monkeypatch) -> None:
    """A region that reads another region's result is priced as the pair of them (the
    producer's result a temporary, still in the cache) less the producer alone: in
    jax_lora_dense, ``w + 2 (a b)`` took 0.33 ms alone and 0.16 ms after the dot that
    makes ``a b``. Where XLA does not compile the pair into the same two regions, the
    region is priced alone."""
    from tensat_py.cost.profile import Measurement

    _made_up(monkeypatch, {"dot": 1e-4, "fusion": 2e-4, "pair": 2.5e-4})
    assert xla.XlaCostModel().program_seconds(SMALL_HLO) == pytest.approx(2.5e-4)
    # a pair XLA compiles otherwise: the fusion is priced alone
    monkeypatch.setattr(
        xla.XlaCostModel,
        "_time_pair",
        lambda self, text, expected: Measurement(xla.NO_PAIR, 0.0, 0, xla.NO_PAIR),
    )
    db = ProfileDatabase(str(quick / "other.sqlite"))
    assert xla.XlaCostModel(db=db).program_seconds(SMALL_HLO) == pytest.approx(3e-4)


def test_a_region_after_a_much_longer_producer_keeps_its_figure_alone(quick, monkeypatch) -> None:
    """The pair less the producer is read only where it differs from the region alone by
    more than the producer's noise (PAIR_NOISE of it): after a 10 ms dot, a 0.2 ms fusion
    whose pair less the dot says 0.1 ms keeps its 0.2 ms (jax_gcn_layer's 0.2 ms dot after
    its 11 ms dot came out 0 ms)."""
    base = {"dot": 1e-2, "fusion": 2e-4, "pair": 1e-2 + 1e-4}
    _made_up(monkeypatch, base)
    assert xla.XlaCostModel().program_seconds(SMALL_HLO) == pytest.approx(1e-2 + 2e-4)
    # a difference past the producer's noise is read
    base["pair"] = 1e-2 + 1e-3
    db = ProfileDatabase(str(quick / "other.sqlite"))
    assert xla.XlaCostModel(db=db).program_seconds(SMALL_HLO) == pytest.approx(1e-2 + 1e-3)


def test_a_pair_module_runs_the_producer_then_the_consumer(quick) -> None:
    """The pair of SMALL_HLO's dot and the fusion after it: XLA compiles it into the same
    two regions, the dot's result is not an output; expected regions that differ give
    NO_PAIR."""
    from tensat_py.frontends.hlo import parse_module
    from tensat_py.runtime import xla_exec

    optimised = parse_module(xla_exec.compile_text(SMALL_HLO).hlo_modules()[0].to_string())
    dot, fusion = [
        i for i in optimised.entry.instructions if i.opcode not in xla_regions.FREE_OPCODES
    ]
    text = xla.pair_module(optimised, dot, fusion)
    again = parse_module(xla_exec.compile_text(text).hlo_modules()[0].to_string())
    kinds = [xla.region_kind(i) for i in again.entry.instructions]
    assert [k for k in kinds if k[0] not in xla_regions.FREE_OPCODES] == [
        xla.region_kind(dot),
        xla.region_kind(fusion),
    ]
    assert again.entry.root.shape == fusion.shape  # the consumer's result alone
    model = xla.XlaCostModel()
    assert model._time_pair(text, [xla.region_kind(dot), xla.region_kind(fusion)]).low > 0
    assert model._time_pair(text, [xla.region_kind(fusion)]).low == xla.NO_PAIR


def test_a_slow_region_s_measurement_stops_at_the_deadline(quick, monkeypatch) -> None:
    """One run of a region can take seconds (an EfficientNet convolution region): pricing
    the input stops inside that region's measurement at the deadline, rather than after
    its warm-up and timed runs (an optimisation with a 60 s limit once took 82 s)."""
    import time

    from tensat_py.cost.profile import time_callable

    calls: list[float] = []

    def time_module(self, text, args, deadline=None):
        def run() -> None:
            calls.append(time.monotonic())
            time.sleep(0.04)

        return time_callable(
            run, warmup=2, min_reps=7, max_reps=7, target_seconds=0.0, deadline=deadline
        )

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)
    monkeypatch.setattr(xla.XlaCostModel, "overhead", lambda self: 0.0)
    monkeypatch.setattr(xla.XlaCostModel, "dispatch", lambda self: 0.0)
    monkeypatch.setattr(xla, "REGION_SECONDS", 0.0)  # the estimate lets it start
    from tensat_py.runtime import xla_exec

    xla_exec.compile_text(SMALL_HLO)  # compiled (and cached) before the clock
    model = xla.XlaCostModel()
    deadline = time.monotonic() + 0.1
    model.measure_until(deadline)
    with pytest.raises(ValueError, match="deadline"):
        model.program_seconds(SMALL_HLO, first=True)
    assert calls and all(t < deadline for t in calls)
    assert len(calls) < 2 + 7  # one region's warm-up and timed runs, without the deadline


def test_the_astar_policy_searches_hlo_with_the_pipeline_s_cost_model(quick, monkeypatch) -> None:
    """``policy="astar"`` compares its program's cost with the default pipeline's: both
    must come from one cost model (for HLO: xla on the cpu, not the roofline)."""
    import tensat_py
    from tensat_py.frontends.hlo import loads
    from tensat_py.policies import run

    seen = []
    real = run.astar_graph

    def spy(graph, ruleset, model, **kw):
        seen.append((model.name, model.device))
        return real(graph, ruleset, model, budget=20)

    monkeypatch.setattr(run, "astar_graph", spy)
    res = tensat_py.optimize(loads(SMALL_HLO), policy="astar", confirm=False, time_limit=30)
    assert seen == [("xla", "cpu")] and (res.cost_model, res.device) == ("xla", "cpu")


def test_a_top_k_module_is_priced_whole(quick) -> None:
    """XLA CPU runs top-k as a TopK custom call whose comparator it names in
    ``called_computations`` and prints with element-type bitcasts: its region must carry
    the comparator and compile again, or the program is priced operator by operator
    (EfficientNet's classifier head was, with the roofline's estimate for its sort)."""
    from tensat_py.frontends.hlo import loads

    text = (
        "HloModule topk\n\nENTRY main {\n  x = f32[64,256]{1,0} parameter(0)\n"
        "  ROOT t = (f32[64,5]{1,0}, s32[64,5]{1,0}) topk(x), k=5, largest=true\n}\n"
    )
    model = xla.XlaCostModel()
    model.measure_until(None)
    assert model.graph_cost(loads(text)) > 0
    assert (model.pricing().whole, model.pricing().by_operator) == (1, 0), model.pricing()


def test_a_bitcast_that_moves_a_unit_dimension_is_priced_whole(quick) -> None:
    """XLA CPU writes a batched matrix-vector product's result through
    ``f64[125,3,1]{1,0,2} bitcast(f64[125,3]{1,0})`` and a copy (as in
    hloenv_BayesNewton_jit_matmul); compiled again as a region, that bitcast failed layout
    assignment and the program was priced operator by operator with estimates. Each
    region, alone and after its producer, must compile again, and the program be priced
    whole."""
    from tensat_py.frontends.hlo import loads
    from tensat_py.frontends.hlo.parser import parse_module
    from tensat_py.runtime import xla_exec

    text = (
        "HloModule matvec\n\nENTRY main {\n  a = f64[125,3,3]{2,1,0} parameter(0)\n"
        "  v = f64[125,3,1]{2,1,0} parameter(1)\n"
        "  ROOT d = f64[125,3,1]{2,1,0} dot(a, v), lhs_batch_dims={0}, "
        "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n"
    )
    optimised = parse_module(xla_exec.compile_text(text).hlo_modules()[0].to_string())
    regions = [i for i in optimised.entry.instructions if i.opcode not in xla.FREE_OPCODES]
    bodies = [c for c in optimised.computations if not c.entry]
    moved = [
        i
        for c in bodies
        for i in c.instructions
        if i.opcode == "bitcast" and not i.shape.default_layout()
    ]
    assert moved, "XLA no longer writes the bitcast this test is about"
    for ins in regions:
        xla_exec.compile_text(xla.region_module(optimised, ins))
    for producer, consumer in zip(regions, regions[1:], strict=False):
        xla_exec.compile_text(xla_regions.pair_module(optimised, producer, consumer))
    model = xla.XlaCostModel()
    model.measure_until(None)
    assert model.graph_cost(loads(text)) > 0
    assert (model.pricing().whole, model.pricing().by_operator) == (1, 0), model.pricing()


def test_a_long_region_is_tried_once(quick, monkeypatch) -> None:
    """A region whose first try's timed calls took LONG_REGION_SECONDS is not measured
    again in later rounds (EfficientNet's convolution regions take about a second a call);
    a short one still gets REGION_TRIES tries."""
    from tensat_py.cost.profile import Measurement

    calls: list[str] = []

    def time_module(self, text, args, deadline=None):
        calls.append(_which(text))
        t = 0.4 if calls[-1] == "dot" else 1e-4  # the dot: 3 calls of 0.4 s, 1.2 s
        return Measurement(t, 0.0, 3, t)

    monkeypatch.setattr(xla.XlaBackend, "time_module", time_module)
    monkeypatch.setattr(xla.XlaCostModel, "overhead", lambda self: 0.0)
    monkeypatch.setattr(xla.XlaCostModel, "dispatch", lambda self: 0.0)
    xla.XlaCostModel().program_seconds(SMALL_HLO)
    assert calls.count("dot") == 1
    assert calls.count("fusion") == calls.count("pair") == xla.REGION_TRIES


def test_the_decision_compares_prices_made_the_same_way() -> None:
    """When the input was priced whole and a later program only operator by operator
    (EfficientNet: a region piece without an HLO form), the input and the candidate are
    priced again, the same way, before they are compared (87.6 s whole against 109.9 s by
    operator for the same program, before)."""
    from types import SimpleNamespace

    from tensat_py import phases
    from tensat_py.cost.provenance import Pricing

    class Model:
        made = Pricing(whole=1, by_operator=1)

        def pricing(self):
            return self.made

        def graph_cost(self, g):
            return {"input": 3.0, "candidate": 2.5}[g]

    run = SimpleNamespace(
        model=Model(), graph="input", candidate="candidate", cost_before=1.0, candidate_cost=2.5
    )
    phases._same_pricing(run)
    assert (run.cost_before, run.candidate_cost) == (3.0, 2.5)
    run.model.made, run.cost_before = Pricing(whole=2), 1.0  # both whole: left as they are
    phases._same_pricing(run)
    assert run.cost_before == 1.0
