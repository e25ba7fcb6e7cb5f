# ruff: noqa: E501  (HLO text fixtures keep XLA's long instruction lines)
"""XLA HLO in and out: parser/printer, translation, the hlo dialect's NumPy semantics
against XLA, optimisation verified through XLA, the CLI, bad input and ``bench hlo``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensat_py
from reference_data import FIXTURES
from reference_data import SHARED as SHARED_DATA
from tensat_py.frontends.hlo import (
    HloParseError,
    HloTranslateError,
    dumps,
    graph_hash,
    loads,
    parse_file,
    parse_module,
    print_module,
    random_args,
)
from tensat_py.frontends.hlo.ir import ELEMENT_TYPES
from tensat_py.graph import Graph
from tensat_py.runtime.numpy_exec import run as np_run
from tensat_py.runtime.xla_exec import run_text

SHARED = SHARED_DATA / "hlo"  # beside a development checkout only
REPO = Path(__file__).resolve().parents[1]
JAX_MODULES = REPO / "bench" / "hlo_modules"
# Our own modules: written by hand (long `%name` form with layouts, metadata and tuples,
# as XLA prints them, and a short one) and one lowered by JAX (tests/fixtures/README.md).
HLO_FIXTURES = FIXTURES / "hlo"
BIG = "efficientnet"  # the whole EfficientNet forward pass (batch 250): bench only

LONG_FORM = """HloModule long_form, entry_computation_layout={(f32[2,3]{1,0}, (f32[3]{0}, s32[]))->(f32[2,3]{1,0}, f32[])}

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %a, f32[] %b), metadata={op_name="jit(f)/add" source_file="f.py"}
}

ENTRY %main (p: f32[2,3], t: (f32[3], s32[])) -> (f32[2,3], f32[]) {
  %p = f32[2,3]{1,0} parameter(0)
  %t = (f32[3]{0}, s32[]) parameter(1)
  %v = f32[3]{0} get-tuple-element((f32[3]{0}, s32[]) %t), index=0
  %b = f32[2,3]{1,0} broadcast(f32[3]{0} %v), dimensions={1}
  %m = f32[2,3]{1,0} multiply(f32[2,3]{1,0} %p, f32[2,3]{1,0} %b)
  %z = f32[] constant(0)
  %r = f32[] reduce(f32[2,3]{1,0} %m, f32[] %z), dimensions={0,1}, to_apply=%add_f32
  /* a comment */
  ROOT %out = (f32[2,3]{1,0}, f32[]) tuple(f32[2,3]{1,0} %m, f32[] %r)
}
"""

WITH_SORT = """HloModule sorter

cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}

ENTRY main {
  x = f32[4,5] parameter(0)
  e = f32[4,5] exponential(x)
  s = f32[4,5] sort(e), dimensions={1}, to_apply=cmp
  ROOT n = f32[4,5] negate(s)
}
"""


def _fixture_files() -> list[Path]:
    """Our HLO fixtures (tests/fixtures/hlo)."""
    files = sorted(HLO_FIXTURES.glob("*.hlo"))
    assert files, f"no HLO fixtures in {HLO_FIXTURES}"
    return files


def _shared_files() -> list[Path]:
    """The reference modules in ../shared/data/hlo, beside a development checkout only."""
    if not SHARED.is_dir():
        return []
    return sorted(SHARED.glob("*.hlo"))


def _modules(*, big: bool = False) -> list[Path]:
    """Our fixtures and (where present) the reference modules; the whole EfficientNet only
    with ``big``."""
    return _fixture_files() + [p for p in _shared_files() if big or BIG not in p.name]


def _ids(p: Path) -> str:
    """``fixture:<name>``, ``shared:<name>`` or ``bench:<name>``."""
    source = {SHARED: "shared", JAX_MODULES: "bench"}.get(p.parent, "fixture")
    return f"{source}:{p.name}"


# ------------------------------------------------------------------ parser and printer
def test_long_form_parses_with_tuples_metadata_and_comments() -> None:
    m = parse_module(LONG_FORM, "long.hlo")
    assert [c.name for c in m.computations] == ["add_f32", "main"]
    assert m.entry.name == "main" and m.entry.root.name == "out"
    red = m.entry.by_name()["r"]
    assert red.attr("to_apply") == "%add_f32" and red.attr("dimensions") == "{0,1}"
    assert m.computation("add_f32").root.attr("metadata").startswith("{op_name=")


def test_print_then_parse_gives_the_same_module() -> None:
    m = parse_module(LONG_FORM)
    assert parse_module(print_module(m)) == m


@pytest.mark.parametrize("path", _modules(big=True), ids=_ids)
def test_shared_modules_round_trip_through_the_printer(path: Path) -> None:
    m = parse_file(path)
    again = parse_module(print_module(m))
    assert again == m
    assert sum(len(c.instructions) for c in again.computations) > 0


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(q)\n}\n",
            ":4:26:",
            "operand `q` of `n` is not defined",
        ),
        (
            "HloModule m\nENTRY e {\n  p = f99[2] parameter(0)\n}\n",
            ":3:7:",
            "unknown element type `f99`",
        ),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p\n}\n",
            ":4:25:",
            "unclosed `(`",
        ),
        ("ENTRY e {\n}\n", ":1:1:", "expected `HloModule name`"),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[] reduce(p, p), "
            "dimensions={0}, to_apply=nowhere\n}\n",
            ":4:3:",
            "calls computation `nowhere`",
        ),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  p = f32[2] parameter(1)\n}\n",
            ":4:3:",
            "defined twice",
        ),
    ],
)
def test_malformed_hlo_names_file_line_and_column(text: str, where: str, message: str) -> None:
    with pytest.raises(HloParseError) as e:
        parse_module(text, "bad.hlo")
    assert str(e.value).startswith("bad.hlo" + where), str(e.value)
    assert message in str(e.value)


def test_unsupported_element_type_is_an_error_at_the_instruction() -> None:
    text = "HloModule m\nENTRY e {\n  p = c64[2] parameter(0)\n  ROOT n = c64[2] negate(p)\n}\n"
    with pytest.raises(HloTranslateError, match=r"m.hlo:3:3: `p`: element type `c64`"):
        loads(text, "m.hlo")


@pytest.mark.parametrize("etype", ["u8", "s8", "s16", "u16", "u32", "u64"])
def test_small_and_unsigned_integer_modules_load_optimise_and_verify_through_xla(
    etype: str,
) -> None:
    text = (
        "HloModule m\nENTRY e {\n"
        f"  p = {etype}[4] parameter(0)\n  q = {etype}[4] parameter(1)\n"
        f"  a = {etype}[4] add(p, q)\n  c = f32[4] convert(a)\n"
        "  ROOT r = f32[4] multiply(c, c)\n}\n"
    )
    g = loads(text, "m.hlo")
    dtypes = {g.type_of(i).dtype for i in g.inputs()}
    assert dtypes == {ELEMENT_TYPES[etype]} and not g.opaque_nodes()
    result = tensat_py.optimize(g)
    assert result.verify is not None and result.verify.passed and result.verify.runner == "xla"
    assert f"{etype}[4]" in dumps(result.graph)


def test_cli_bad_input_exits_2_without_traceback_or_output(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT n = f32[2] negate(q)\n}\n")
    out = tmp_path / "out.hlo"
    r = subprocess.run(
        [sys.executable, "-m", "tensat_py.cli", "optimize", str(bad), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert f"{bad}:3:" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


# --------------------------------------------------------------------- translation
def test_translation_uses_the_general_and_hlo_operators_and_flattens_tuples() -> None:
    g = loads(LONG_FORM)
    assert g.op_counts() == {
        "input": 3,
        "broadcast_in_dim": 1,
        "mul": 1,
        "scalar": 1,
        "reduce_sum": 1,
    }
    assert [n.name for n in g.nodes if n.op == "input"] == ["p", "t.0", "t.1"]
    assert [t.shape for t in g.output_types()] == [(2, 3), ()]


def test_printed_graph_keeps_the_signature_and_computes_the_same_through_xla() -> None:
    g = loads(LONG_FORM)
    text = dumps(g)
    again = parse_module(text)
    assert [p.shape for p in again.entry.parameters()] == [
        p.shape for p in parse_module(LONG_FORM).entry.parameters()
    ]
    args = random_args(g)
    for a, b in zip(run_text(LONG_FORM, args), run_text(text, args), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # and the graph read back from the printed text is the same program
    assert loads(text).op_counts() == g.op_counts()


def test_unmodelled_instruction_is_opaque_with_its_computation_and_runs_in_numpy() -> None:
    g = loads(WITH_SORT)
    (oid,) = g.opaque_nodes()
    payload = g.opaque_payload(oid)
    assert payload.op_type == "sort"
    assert [c.name for c in payload.computations] == ["cmp"]
    assert "to_apply=cmp" in dumps(g) and "%cmp {" in dumps(g)
    args = random_args(g)
    want = run_text(WITH_SORT, args)[0]
    got = np_run(g, {"x": args[0]})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_declared_shape_that_disagrees_with_the_analysis_is_an_error() -> None:
    text = "HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n"
    text += "  ROOT t = f32[2,3] transpose(a), dimensions={1,0}\n}\n"
    with pytest.raises(HloTranslateError, match=r"t.hlo:4:3: `t`: .*\[3, 2\]"):
        loads(text, "t.hlo")


def test_call_is_inlined_and_bitcast_is_a_reshape() -> None:
    text = """HloModule m
relu {
  a = f32[6] parameter(0)
  z = f32[] constant(0)
  zb = f32[6] broadcast(z), dimensions={}
  ROOT r = f32[6] maximum(a, zb)
}
ENTRY e {
  p = f32[2,3] parameter(0)
  q = f32[6] bitcast(p)
  ROOT c = f32[6] call(q), to_apply=relu
}
"""
    g = loads(text)
    assert "opaque" not in g.op_counts()
    assert g.op_counts()["reshape"] == 1 and g.op_counts()["max"] == 1


# ------------------------------------------- hlo dialect: NumPy semantics against XLA
HLO_CASES = {
    "dot_general": """HloModule m
ENTRY e {
  a = f32[3,4,5] parameter(0)
  b = f32[3,5,2] parameter(1)
  ROOT d = f32[3,4,2] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
""",
    "convolution": """HloModule m
ENTRY e {
  x = f32[2,9,9,4] parameter(0)
  w = f32[3,3,2,6] parameter(1)
  ROOT c = f32[2,5,3,6] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x0_1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f, feature_group_count=2
}
""",
    "convolution_nchw_lhs_dilation": """HloModule m
ENTRY e {
  x = f32[1,3,5,5] parameter(0)
  w = f32[4,3,2,2] parameter(1)
  ROOT c = f32[1,4,8,7] convolution(x, w), window={size=2x2 pad=0_0x-1_0 lhs_dilate=2x2}, dim_labels=bf01_oi01->bf01
}
""",
    "broadcast_in_dim": """HloModule m
ENTRY e {
  x = f32[3,1] parameter(0)
  ROOT b = f32[2,3,4] broadcast(x), dimensions={1,2}
}
""",
    "iota": """HloModule m
ENTRY e {
  x = s32[2,5] parameter(0)
  i = s32[2,5] iota(), iota_dimension=1
  ROOT a = s32[2,5] add(x, i)
}
""",
    "reduce_window": """HloModule m
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[2,7,7,3] parameter(0)
  init = f32[] constant(-inf)
  ROOT r = f32[2,4,4,3] reduce-window(x, init), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=mx
}
""",
    "select": """HloModule m
ENTRY e {
  a = f32[3,4] parameter(0)
  b = f32[3,4] parameter(1)
  lt = pred[3,4] compare(a, b), direction=LT
  ge = pred[3,4] compare(a, b), direction=GE
  s = f32[3,4] select(lt, a, b)
  c = f32[3,4] convert(ge)
  ROOT r = f32[3,4] add(s, c)
}
""",
    "concatenate": """HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,1] parameter(1)
  ROOT c = f32[2,4] concatenate(a, b), dimensions={1}
}
""",
}


@pytest.mark.parametrize("case", sorted(HLO_CASES))
def test_hlo_dialect_numpy_semantics_match_xla(case: str) -> None:
    text = HLO_CASES[case]
    g = loads(text)
    op = case.split("_nchw")[0]
    assert op in g.op_counts(), g.op_counts()
    args = random_args(g, seed=3)
    feeds = {n.name: a for n, a in zip([g.nodes[i] for i in g.inputs()], args, strict=True)}
    want = run_text(text, args)[0]
    got = np_run(g, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # printed back, XLA computes the same
    np.testing.assert_allclose(run_text(dumps(g), args)[0], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("path", _modules() + sorted(JAX_MODULES.glob("*.hlo")), ids=_ids)
def test_translation_is_exact_original_text_and_printed_graph_agree_in_xla(path: Path) -> None:
    g = tensat_py.load(str(path))
    args = random_args(g, seed=2)
    want = run_text(path.read_text(), args)
    got = run_text(dumps(g), args)
    assert len(got) == len(want)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------- optimisation through XLA
def test_optimize_simplifies_and_verifies_through_xla() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[8,16] parameter(0)
  one = f32[] constant(1)
  ob = f32[8,16] broadcast(one), dimensions={}
  m = f32[8,16] multiply(x, ob)
  zero = f32[] constant(0)
  zb = f32[8,16] broadcast(zero), dimensions={}
  ROOT a = f32[8,16] add(m, zb)
}
"""
    g = loads(text)
    # Priced for the T4: XLA's own simplifier makes this change, so the xla cost model
    # (HLO's default, on the CPU) rightly prices both programs alike.
    r = tensat_py.optimize(g, extractor="greedy", device="t4")
    assert r.verify is not None and r.verify.runner == "xla" and r.verify.passed
    assert r.graph.op_counts() == {"input": 1}
    assert "ROOT %x = f32[8,16] parameter(0)" in dumps(r.graph)


@pytest.mark.parametrize(
    ("module", "dropped"),
    [
        # (q k^T) v -> q (k^T v), and the row sums of q k^T -> q (sum of k's rows)
        ("jax_linear_attention.hlo", "f32[4,1024,1024]"),
        # x (W + 2 A B) -> x W + (x A) (2 B): the 1024x1024 product A B is never built
        ("jax_lora_dense.hlo", "f32[1024,1024] dot"),
        # (A X) W -> A (X W)
        ("jax_gcn_layer.hlo", "f32[2048,256] dot"),
    ],
)
def test_dot_chains_are_reassociated_when_the_cost_model_pays_and_verify(
    module: str, dropped: str
) -> None:
    src = (JAX_MODULES / module).read_text()
    assert dropped in src.replace("{2,1,0}", "").replace("{1,0}", "")
    # What the cost model chooses and verification passes, not the runtime's verdict: on a
    # shared 2-core machine confirmation once measured jax_lora_dense's candidate 1.227x
    # [0.922, 1.419] and kept the input (confirmation has tests of its own).
    r = tensat_py.optimize(loads(src), confirm=False)
    assert r.verify is not None and r.verify.runner == "xla" and r.verify.passed
    assert r.cost_after < 0.9 * r.cost_before
    assert dropped not in dumps(r.graph)


def test_cli_optimize_writes_hlo_and_json(tmp_path: Path) -> None:
    src = JAX_MODULES / "jax_mlp_relu.hlo"
    out = tmp_path / "out.hlo"
    r = subprocess.run(
        [sys.executable, "-m", "tensat_py.cli", "optimize", str(src), "-o", str(out), "--json"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["verify"]["runner"] == "xla" and data["verify"]["max_rel_error"] <= 1e-5
    assert data["cost_after"] <= data["cost_before"]
    g = tensat_py.load(str(src))
    args = random_args(g)
    want = run_text(src.read_text(), args)
    got = run_text(out.read_text(), args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", _modules(), ids=_ids)
def test_shared_modules_optimise_and_verify_through_xla(path: Path) -> None:
    g = tensat_py.load(str(path))
    r = tensat_py.optimize(g, extractor="greedy", time_limit=10)
    assert r.verify is not None and r.verify.runner == "xla"
    assert r.verify.passed, r.verify.message
    rep = tensat_py.verify(g, r.graph, runner="xla")
    assert rep.max_rel_error <= 1e-5


def _big_modules() -> list:
    """``(path, convolutions)``: our JAX-lowered CNN and, beside a development checkout,
    the whole EfficientNet forward pass from ../shared/data/hlo."""
    cases = [pytest.param(HLO_FIXTURES / "jax_small_cnn.hlo", 6, id="fixture:jax_small_cnn")]
    big = SHARED / "hloenv_efficientnet_forward_73conv_large.hlo"
    if big.is_file():
        cases.append(pytest.param(big, 73, id="shared:efficientnet"))
    return cases


@pytest.mark.parametrize(("path", "convolutions"), _big_modules())
def test_big_shared_module_loads_and_round_trips_to_the_same_graph(
    path: Path, convolutions: int
) -> None:
    g = tensat_py.load(str(path))
    # the module's own count, by its text: one `convolution(` per convolution instruction
    assert path.read_text().count(" convolution(") == convolutions
    assert g.op_counts()["convolution"] == convolutions
    again = loads(dumps(g))
    assert _live_ops(again) == _live_ops(g)


def _live_ops(g: Graph) -> dict[str, int]:
    """Operator counts over the nodes an output needs (scalar constants are shared when
    printed, so they are left out)."""
    from collections import Counter

    live = g.live()
    return dict(Counter(n.op for i, n in enumerate(g.nodes) if live[i] and n.op != "scalar"))


# ------------------------------------------------------------------------- bench
def _bench_folder(tmp_path: Path) -> Path:
    d = tmp_path / "mods"
    d.mkdir()
    sgd = (JAX_MODULES / "jax_sgd_step.hlo").read_text()
    (d / "a_sgd.hlo").write_text(sgd)
    (d / "b_sgd_renamed.hlo").write_text(sgd.replace("main", "other_main"))
    (d / "c_bad.hlo").write_text("HloModule m\nENTRY e {\n  ROOT n = f32[2] negate(q)\n}\n")
    (d / "d_c64.hlo").write_text("HloModule m\nENTRY e {\n  ROOT p = c64[2] parameter(0)\n}\n")
    return d


def test_graph_hash_ignores_names_but_not_structure() -> None:
    a = parse_module(HLO_CASES["concatenate"])
    b = parse_module(HLO_CASES["concatenate"].replace(" c ", " renamed "))
    c = parse_module(HLO_CASES["concatenate"].replace("dimensions={1}", "dimensions={1}, x=1"))
    assert graph_hash(a) == graph_hash(b) != graph_hash(c)


def test_bench_hlo_skips_duplicates_and_reports_failures(tmp_path: Path) -> None:
    from tensat_py.bench_hlo import HloBenchConfig, run_hlo_bench

    d = _bench_folder(tmp_path)
    cfg = HloBenchConfig(folder=d, out=tmp_path / "r.md", extractor="greedy", budget_s=0.2)
    rows = run_hlo_bench(cfg, progress=False)
    assert [r.status for r in rows] == ["ok", "duplicate", "failed", "failed"]
    assert "a_sgd.hlo" in rows[1].reason and "c_bad.hlo:3:" in rows[2].reason
    assert "element type `c64`" in rows[3].reason  # failed inside the worker
    ok = rows[0]
    assert ok.max_rel_err <= 1e-5 and ok.run_ms_orig > 0 and ok.run_ms_opt > 0
    assert ok.verify_s > 0 and ok.opt_s > 0  # verification is its own column
    assert ok.ops_after <= ok.ops_before
    assert "| a_sgd.hlo |" in (tmp_path / "r.md").read_text()


def test_bench_hlo_runs_on_a_local_ray_cluster(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from tensat_py.bench_hlo import HloBenchConfig, run_hlo_bench

    d = _bench_folder(tmp_path)
    (d / "c_bad.hlo").unlink()
    (d / "d_c64.hlo").unlink()
    cfg = HloBenchConfig(
        folder=d, out=tmp_path / "r.md", extractor="greedy", budget_s=0.2, ray_address="local"
    )
    rows = run_hlo_bench(cfg, progress=False)
    assert [r.status for r in rows] == ["ok", "duplicate"]
    assert rows[0].verify_runner == "xla"


def test_graph_without_hlo_source_prints_a_fresh_module() -> None:
    g = Graph()
    x = g.add_input("x", (2, 3))
    y = g.add_node("transpose", {"perm": (1, 0)}, [x])
    g.outputs = [y]
    text = dumps(g)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_text(text, [a])[0], a.T)


def test_an_unrewritten_graph_prints_as_its_source_module() -> None:
    text = (
        "HloModule m\n\n%mx {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
        "  ROOT %r = f32[] maximum(%a, %b)\n}\n\nENTRY %e {\n"
        "  %p = f32[8,3]{1,0} parameter(0)\n  %z = f32[] constant(-inf)\n"
        "  %m = f32[8]{0} reduce(%p, %z), dimensions={1}, to_apply=%mx\n"
        "  ROOT %n = f32[8]{0} negate(%m)\n}\n"
    )
    g = loads(text, "m.hlo")
    assert dumps(g) == print_module(parse_module(text, "m.hlo"))
    # A rewritten graph prints through the operators instead.
    neg = next(i for i, n in enumerate(g.nodes) if n.op == "neg")
    g.outputs = [g.add_node("neg", {}, [neg])]
    assert "negate" in dumps(g) and dumps(g) != print_module(parse_module(text, "m.hlo"))


@pytest.mark.skipif(
    not (SHARED / "hloenv_efficientnet_forward_73conv_large.hlo").is_file(),
    reason="needs hloenv_efficientnet_forward_73conv_large.hlo from ../shared/data/hlo "
    "(public reference data kept beside a development checkout, not in a clone); no fixture "
    "of ours is large enough to be cut into regions around called computations",
)
def test_a_module_cut_into_regions_around_called_computations_optimises() -> None:
    # The whole EfficientNet forward pass is cut into regions; a region's opaque
    # instructions call computations of the source module, so XLA cannot run the region
    # alone. Its check raised out of optimize ("xla cannot run the input program"); now
    # such a class is not checked, hence not kept, and the run ends within its limit.
    g = tensat_py.load(str(SHARED / "hloenv_efficientnet_forward_73conv_large.hlo"))
    r = tensat_py.optimize(g, time_limit=60)
    assert r.stats.get("regions") and r.verify is not None and r.verify.passed
    assert r.stats["total_seconds"] <= 60 * 1.2


def test_hlo_dot_merge_runs_two_dots_of_one_lhs_as_one_dot(tmp_path: Path) -> None:
    # Two dots of x (a q/k-style pair, as jax.jit lowers `(x @ a, x @ b)`): the multi-pattern
    # rule hlo-dot-merge adds one dot over concat(a, b) whose halves split takes back.
    import jax
    from tensat_py import _core
    from tensat_py.pipeline import load_rules

    args = [np.ones((4, 8), np.float32), np.ones((8, 16), np.float32)]
    text = jax.jit(lambda x, a, b: (x @ a, x @ b)).lower(args[0], args[1], args[1])
    src = tmp_path / "two_dots.hlo"
    src.write_text(text.as_text(dialect="hlo"))
    eg = _core.EGraph(tensat_py.load(src).to_flat())
    eg.saturate(load_rules("hlo"), k_multi=1, node_limit=5000, iter_limit=3, time_limit=5.0)
    ex = eg.export()
    ops = [op.split()[0] for op in ex["node_op"]]
    in_class: dict[int, set[str]] = {}
    for op, c in zip(ops, ex["node_eclass"], strict=True):
        in_class.setdefault(c, set()).add(op)
    merged = [
        i
        for i, op in enumerate(ops)
        if op == "dot_general" and "concat" in in_class[ex["node_children"][i][1]]
    ]
    assert merged and {"split_0", "split_1"} <= set(ops)
