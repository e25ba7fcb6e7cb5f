"""Programs of real size (issue 42): regions explored once per class, one budget over the
whole command, weights held out of folding and written one at a time."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import tensat_py
from click.testing import CliRunner
from tensat_py.budget import Budget
from tensat_py.builder import GraphBuilder
from tensat_py.cli import main
from tensat_py.frontends.onnx.common import write_model
from tensat_py.frontends.onnx.importer import without_idle_weights
from tensat_py.regions import BOUNDARY, partition, stitch
from tensat_py.verify import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from gpt_stack import gpt_stack  # noqa: E402


def _stack(layers: int, width: int = 16) -> tensat_py.Graph:
    """``layers`` copies of a block whose two matmuls share their input (the merge Tensat
    finds): y = relu(x @ a_i) + relu(x @ b_i), x <- y."""
    b = GraphBuilder()
    x = b.input((8, width), name="x")
    for i in range(layers):
        u = b.relu(b.matmul(x, b.weight((width, width), name=f"a{i}")))
        v = b.relu(b.matmul(x, b.weight((width, width), name=f"b{i}")))
        x = b.ewadd(u, v)
    return b.finish([x])


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """GPT-2-style ONNX stacks (narrow: T=16, d=64) of 1 and 12 layers."""
    out = {}
    for n in (1, 12):
        path = tmp_path_factory.mktemp("gpt") / f"gpt{n}.onnx"
        onnx.save(gpt_stack(n, tokens=16, d_model=64, heads=4), path)
        out[n] = path
    return out


# ----------------------------------------------------------------------------- regions
def test_a_stack_of_equal_blocks_is_one_class() -> None:
    g = _stack(6)
    part = partition(g, min_operators=0)
    assert len(part.regions) == 6 and part.num_classes == 1
    st = part.stats(g)
    assert st["explored_operators"] * 6 == st["operators"]
    first, second = part.regions[0], part.regions[1]
    # the second block reads the first's value as a boundary input; its weights are its own
    sub = second.subgraph(g)
    assert any(n.name.startswith(BOUNDARY) for n in sub.nodes if n.op == "input")
    assert {n.name for n in sub.nodes if n.op == "weight"} == {"a1", "b1"}
    assert first.key == second.key


def test_stitching_each_region_back_gives_the_program_again() -> None:
    g = _stack(5)
    part = partition(g, min_operators=0)
    same = stitch(g, part, [part.regions[c[0]].subgraph(g) for c in part.classes])
    assert same.operator_counts() == g.operator_counts()
    report = verify(g, same, dtype="float64")
    assert report.passed and report.max_abs_error == 0.0


def test_regions_optimise_every_copy_like_the_first() -> None:
    g = _stack(8)
    res = tensat_py.optimize(g, regions=True, extractor="ilp")
    st = res.stats["regions"]
    assert (st["regions"], st["classes"]) == (8, 1)
    assert st["enodes_all_copies"] == 8 * st["enodes_explored"]
    assert not res.fell_back and res.verify is not None and res.verify.passed
    # every block's two matmuls were merged: one matmul per block at run time
    assert res.graph.operator_counts(weight_only=False)["matmul"] == 8
    # each copy got the rewrites of a one-block program
    one = tensat_py.optimize(_stack(1), verify=False)
    assert res.cost_after == pytest.approx(8 * one.cost_after, rel=1e-9)
    # what a cut gives up: explored whole, each block's sum folds into the next block's
    # (concatenated) weights
    whole = tensat_py.optimize(g, regions=False, verify=False)
    assert whole.cost_after < res.cost_after


def test_a_small_program_is_optimised_whole_by_default() -> None:
    res = tensat_py.optimize("bert", verify=False)
    assert "regions" not in res.stats


def test_a_gpt_stack_gets_the_one_layer_rewrites_in_every_layer(gpt: dict[int, Path]) -> None:
    one = tensat_py.optimize(str(gpt[1]), device="cpu", min_gain=0.0, verify=False)
    many = tensat_py.optimize(str(gpt[12]), device="cpu", min_gain=0.0, regions=True)
    st = many.stats["regions"]
    assert st["classes"] == 1 and st["regions"] == 12
    gain_one = 1 - one.candidate_cost / one.cost_before
    gain_many = 1 - many.candidate_cost / many.cost_before
    assert gain_one > 0 and gain_many == pytest.approx(gain_one, rel=0.05)
    assert many.verify is not None and many.verify.passed
    assert "checked in float64" in many.verify.message


# ----------------------------------------------------------------------------- budget
def test_the_command_s_budget_counts_load_and_save(tmp_path: Path) -> None:
    out = tmp_path / "o.onnx"
    r = CliRunner().invoke(
        main, ["optimize", "squeezenet", "--json", "--no-verify", "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)["stats"]
    assert st["phase_seconds"]["load"] > 0 and st["phase_seconds"]["save"] > 0
    assert abs(sum(st["phase_seconds"].values()) - st["total_seconds"]) < 0.1


def test_budget_phases_add_up() -> None:
    b = Budget(10.0)
    with b.phase("a"):
        pass
    with pytest.raises(RuntimeError), b.phase("a"):
        raise RuntimeError
    assert list(b.seconds) == ["a"] and b.left() <= 10.0


# ----------------------------------------------------------------------------- ONNX weights
def test_idle_weights_are_held_out_of_folding(gpt: dict[int, Path]) -> None:
    m = onnx.load(gpt[1])
    light, held = without_idle_weights(m)
    names = {t.name for t in held}
    assert "l0_wq" in names and "heads_shape" not in names  # shapes are folded
    assert light.ByteSize() < m.ByteSize() / 10
    assert all(t.name in {i.name for i in light.graph.input} for t in held)


def test_write_model_gives_the_bytes_of_serialise(gpt: dict[int, Path]) -> None:
    m = onnx.load(gpt[1])
    buf = io.BytesIO()
    write_model(m, buf)
    again = onnx.ModelProto()
    again.ParseFromString(buf.getvalue())
    assert again == m and len(buf.getvalue()) == m.ByteSize()


def test_a_written_stack_runs_alike_in_onnxruntime(gpt: dict[int, Path], tmp_path: Path) -> None:
    import onnxruntime as ort

    out = tmp_path / "o.onnx"
    r = CliRunner().invoke(main, ["optimize", str(gpt[12]), "--device", "cpu", "-o", str(out)])
    assert r.exit_code == 0, r.output
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    a = ort.InferenceSession(str(gpt[12])).run(None, {"x": x})[0]
    b = ort.InferenceSession(str(out)).run(None, {"x": x})[0]
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert out.stat().st_size <= 1.1 * gpt[12].stat().st_size


# ----------------------------------------------------------------------------- anytime
def test_a_bound_that_shows_no_gain_stops_the_ilp(gpt: dict[int, Path]) -> None:
    res = tensat_py.optimize(str(gpt[1]), device="cpu", min_gain=0.5, verify=False)
    assert res.candidate_status == "bound-stop"
    assert res.extraction_status == "fallback-not-cheaper"
    assert "critical-path lower bound" in res.message and res.graph is not None
    assert res.stats["extraction_solve_seconds"] == 0.0


def test_the_gap_option_reaches_the_solvers() -> None:
    from tensat_py.extract.highs import gap_tolerance, relative_gap

    assert relative_gap() == 1e-6
    with gap_tolerance(0.05):
        assert relative_gap() == 0.05
    res = tensat_py.optimize("nasrnn", gap=0.05, verify=False)
    assert res.candidate_cost < res.cost_before and res.candidate_status in ("optimal", "feasible")
    with pytest.raises(ValueError, match="gap: must be a number in"):
        tensat_py.optimize("nasrnn", gap=1.5)


# ----------------------------------------------------------------------------- parallel
def _two_kinds(n: int = 6, width: int = 16) -> tensat_py.Graph:
    """A prefix of one kind, then ``n`` equal blocks: two region classes."""
    b = GraphBuilder()
    x = b.input((8, width), name="x")
    x = b.tanh(b.relu(b.matmul(x, b.weight((width, width), name="p0"))))
    for i in range(n):
        u = b.relu(b.matmul(x, b.weight((width, width), name=f"a{i}")))
        v = b.relu(b.matmul(x, b.weight((width, width), name=f"b{i}")))
        x = b.ewadd(u, v)
    return b.finish([x])


@pytest.mark.parametrize("where", [{"jobs": 2}, {"ray": "local"}], ids=["processes", "ray"])
def test_region_classes_solved_elsewhere_give_the_same_program(where: dict) -> None:
    if "ray" in where:
        pytest.importorskip("ray", reason="the ray extra is not installed")
    g = _two_kinds()
    here = tensat_py.optimize(g, regions=True)
    there = tensat_py.optimize(g, regions=True, **where)
    assert here.stats["regions"]["classes"] == there.stats["regions"]["classes"] == 2
    assert there.cost_after == pytest.approx(here.cost_after, rel=1e-12)
    assert there.cost_after < there.cost_before and there.verify.passed
    assert there.graph.operator_counts() == here.graph.operator_counts()


def test_jobs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="jobs: must be a positive integer"):
        tensat_py.optimize("squeezenet", jobs=0)
    code = CliRunner().invoke(main, ["optimize", "squeezenet", "--jobs", "0"])
    assert code.exit_code == 2 and "--jobs: must be at least 1" in code.output


def test_a_class_that_fails_its_check_is_named_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensat_py import phases

    real = phases.verify_graphs

    def wrong(a, b, **kw):  # noqa: ANN001, ANN003, ANN202 - every check fails
        r = real(a, b, **kw)
        return type(r)(1.0, 1.0, False, r.tolerance, "made to fail", r.runner)

    monkeypatch.setattr(phases, "verify_graphs", wrong)
    res = tensat_py.optimize(_stack(6), regions=True)
    assert res.graph.operator_counts() == _stack(6).operator_counts()  # nothing changed
    assert "region class 0 (regions [0, 1, 2, 3, 4, 5]" in res.verify.message
    assert "made to fail" in res.verify.message
