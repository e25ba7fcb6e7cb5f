"""What a new user meets in the first hour (issue 44): honest labels on every figure, one
definition of "operators", errors that name what the user typed where they typed it, and
docs that list what the code offers."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import tensat_py
from click.testing import CliRunner
from tensat_py import options
from tensat_py.builder import GraphBuilder
from tensat_py.cli import main
from tensat_py.egraph import ExtractionProblem
from tensat_py.extract import extract

ROOT = Path(__file__).resolve().parents[1]
HLO_MODULES = ROOT / "bench" / "hlo_modules"


def _run(*args: str) -> tuple[int, str]:
    out = CliRunner().invoke(main, list(args))
    return out.exit_code, out.output


# -- 1. every figure names its cost model, device and unit, and a prediction says so ------
def test_json_names_cost_model_device_unit_and_the_predicted_speedup() -> None:
    code, out = _run("optimize", "squeezenet", "--extractor", "greedy", "--no-verify", "--json")
    assert code == 0, out
    d = json.loads(out)
    assert (d["cost_model"], d["device"], d["unit"]) == ("roofline", "t4", "seconds")
    assert d["speedup_kind"] == "predicted" and d["measured"] is None
    assert d["speedup"] == pytest.approx(d["cost_before"] / d["cost_after"])
    assert d["speedup"] > 1.0  # squeezenet's merges pay under the roofline model


def test_table_labels_the_speedup_predicted_with_model_and_device() -> None:
    code, out = _run("optimize", "squeezenet", "--extractor", "greedy", "--no-verify", "-q")
    assert code == 0, out
    assert "predicted speedup" in out and "cost-model speedup" not in out
    assert "roofline cost model, device t4 (NVIDIA T4 GPU)" in out
    assert "cost before (ms, predicted)" in out


def test_the_result_object_carries_its_basis() -> None:
    res = tensat_py.optimize("squeezenet", extractor="greedy", verify=False, device="a100")
    assert res.cost_model == "roofline" and res.device == "a100"
    assert res.basis == "roofline cost model, device a100 (NVIDIA A100 GPU)"


def test_knossos_json_names_rlo_units() -> None:
    from tensat_py.frontends.knossos import KsOptimizeResult

    d = KsOptimizeResult(program=None, defs=[]).to_json()  # type: ignore[arg-type]
    assert d["cost_model"] == "rlo" and d["unit"] == "RLO cost units"
    assert d["speedup_kind"] == "predicted"


# -- 2 and 10. one definition of "operators", said where it is shown ------------------------
def test_operators_count_live_nodes_less_leaves_and_literals() -> None:
    b = GraphBuilder()
    x = b.input((2, 4), name="x")
    b.relu(x)  # dead: no output depends on it
    y = b.matmul(x, b.weight((4, 3), name="w"))
    g = b.finish([b.relu(y)])
    assert g.operator_counts() == {"matmul": 1, "relu": 1}
    assert g.num_operators() == 2 and len(g) > 2


def test_table_explains_why_the_cheaper_bert_has_more_operators() -> None:
    code, out = _run("optimize", "bert", "--no-verify", "-q")
    assert code == 0, out
    row = next(line for line in out.splitlines() if "operators before / after" in line)
    before, after = (int(n) for n in re.findall(r"(\d+) / (\d+)", row)[0])
    assert before == tensat_py.load("bert").num_operators() and after > before
    assert "weight-only" in row
    change = next(line for line in out.splitlines() if "change in operators run" in line)
    assert "matmul -" in change and "split +" in change
    assert "operators: the nodes an output needs" in out


def test_bench_hlo_and_optimize_count_a_module_alike() -> None:
    from tensat_py.bench_hlo import bench_module

    path = str(HLO_MODULES / "jax_mlp_relu.hlo")
    row = bench_module(path, "greedy", 20.0, 2000, 0.05)
    assert row["status"] == "ok", row
    code, out = _run(
        "optimize",
        path,
        "--extractor",
        "greedy",
        "--node-limit",
        "2000",
        "--device",
        "t4",
        "--json",
    )  # the bench's device (its default); optimize's for .hlo is cpu
    assert code == 0, out
    ops = json.loads(out)["operators"]
    assert (ops["before"], ops["after"]) == (row["ops_before"], row["ops_after"])


# -- 3. the README's optimisation times say they leave verification out ---------------------
def test_readme_table1_says_verification_is_not_included() -> None:
    text = (ROOT / "README.md").read_text()
    table1 = text[text.index("### Table 1") :]
    table1 = table1[: table1.index("### Figure 6")]
    assert "verification is not included" in table1
    assert "verify (s)" in table1 and "predicted speedup" in table1


# -- 4. GPU device names, and what to do without CuPy ----------------------------------------
def test_gpu_and_cuda_are_device_names_the_docs_promise() -> None:
    doc = (ROOT / "docs" / "cost-models.md").read_text()
    for name in ("gpu", "cuda"):
        assert f'"{name}"' in doc and name in options.DEVICES


def test_roofline_on_gpu_says_it_needs_a_preset() -> None:
    with pytest.raises(ValueError, match=r"roofline: device 'gpu'.*t4, a100, h100"):
        tensat_py.optimize("squeezenet", device="gpu", verify=False)


@pytest.mark.parametrize("model", ["profile", "learned"])
def test_a_measured_model_on_a_gpu_without_cupy_names_itself_and_the_cpu_flag(model) -> None:
    pytest.importorskip("lightgbm")
    try:
        import cupy  # noqa: F401

        pytest.skip("CuPy is installed here: a GPU device is usable")
    except ImportError:
        pass
    code, out = _run("optimize", "squeezenet", "--cost-model", model, "--no-verify")
    assert code == 2 and out.startswith(f"error: {model}: device 't4'"), out
    assert "--device cpu" in out and len(out.strip().splitlines()) == 1
    with pytest.raises(ValueError, match=r"pass device='cpu'"):
        tensat_py.optimize("squeezenet", cost_model=model, verify=False)


# -- 5. an empty or foreign file ----------------------------------------------------------
def test_empty_onnx_file_says_it_is_empty(tmp_path) -> None:
    f = tmp_path / "empty.onnx"
    f.write_bytes(b"")
    code, out = _run("optimize", str(f))
    assert code == 2 and "the file is empty, not an ONNX model" in out, out
    assert "Assertion" not in out
    f.write_bytes(b"\x08\x01")  # a valid protobuf, but no model
    code, out = _run("optimize", str(f))
    assert code == 2 and "not an ONNX model" in out and "Assertion" not in out, out


# -- 6. a rule file with no rules is an error -------------------------------------------
@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_rules_check_refuses_a_file_without_rules(tmp_path, text) -> None:
    f = tmp_path / "empty.onnx"
    f.write_text(text)
    for cmd in (["rules", "check", str(f)], ["rules", "list", str(f)]):
        code, out = _run(*cmd)
        assert code == 2 and "no rules in this file" in out, out


# -- 7. symbolic input dimensions ---------------------------------------------------------
def _symbolic_onnx(path: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    g = helper.make_graph(nodes, "g", [x], [y], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_symbolic_dimension_error_names_the_flag_on_the_command_line(tmp_path) -> None:
    f = _symbolic_onnx(tmp_path / "sym.onnx")
    code, out = _run("optimize", str(f), "--device", "cpu")
    assert code == 2 and "--input-shape NAME=D0,D1,..." in out and "input_shapes=" not in out
    with pytest.raises(ValueError, match=r"input_shapes=\{\.\.\.\}"):
        tensat_py.load(str(f))
    assert options.spell("input_shapes") == "input_shapes={...}"  # the CLI's spelling ended


def test_fixed_symbolic_dimensions_are_reported(tmp_path) -> None:
    f = _symbolic_onnx(tmp_path / "sym.onnx")
    out_file = tmp_path / "out.onnx"
    code, out = _run(
        "optimize", str(f), "--device", "cpu", "--input-shape", "x=8,16", "-q", "-o", str(out_file)
    )
    assert code == 0, out
    assert "fixed by --input-shape: x[0] N=8" in " ".join(out.split())
    code, out = _run("optimize", str(f), "--device", "cpu", "--input-shape", "x=8,16", "--json")
    assert json.loads(out)["fixed_dims"] == {"x[0]": "N=8"}


# -- 8. limits under which nothing can happen ---------------------------------------------
@pytest.mark.parametrize("flag", ["--iter-limit", "--node-limit"])
def test_zero_exploration_limits_are_refused(flag) -> None:
    code, out = _run("optimize", "squeezenet", flag, "0")
    assert code == 2 and f"error: {flag}: must be at least 1, got 0" in out, out


# -- 9. tensat bench hlo never overwrites the shipped report by default -----------------------
def test_bench_hlo_writes_into_a_new_folder_by_default(tmp_path, monkeypatch) -> None:
    import tensat_py.bench_hlo as bench_hlo

    seen = []

    def fake_run(cfg, **_kw):  # type: ignore[no-untyped-def]
        seen.append(cfg.out)
        return []

    monkeypatch.setattr(bench_hlo, "run_hlo_bench", fake_run)
    monkeypatch.chdir(tmp_path)
    code, out = _run("bench", "hlo", str(HLO_MODULES), "--no-progress")
    assert code == 0, out
    (report,) = seen
    assert report.name == "hlo_bench.md" and report.parent.name.startswith("tensat-bench-")
    existing = tmp_path / "mine.md"
    existing.write_text("keep me")
    code, out = _run("bench", "hlo", str(HLO_MODULES), "--out", str(existing))
    assert code == 2 and "--force" in out and existing.read_text() == "keep me"


# -- 11. --help names every input format and explains every choice ----------------------------
def test_optimize_help_names_hlo_and_ks_and_explains_beam_and_rlo() -> None:
    code, out = _run("optimize", "--help")
    text = "".join(out.split())  # click wraps lines at spaces and after hyphens
    assert code == 0 and ".hlo" in text and ".ks" in text
    assert "beam(greedy-dagkeepingthe4bestsub-DAGsetspere-class" in text
    assert "rlo(RLO'sunitlesscosts,Knossos.ksprogramsonly)" in text


# -- 13. the docs list what the code offers ----------------------------------------------
def test_readme_lists_every_doc_page() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in readme, page.name


def test_design_map_names_every_module_and_package() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    pkg = ROOT / "python" / "tensat_py"
    names = [p.name for p in pkg.iterdir() if p.suffix == ".py" and p.name != "__init__.py"]
    names += [p.name + "/" for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    missing = [n for n in names if n.removesuffix(".py").removesuffix("/") not in design]
    assert not missing, f"docs/design.md does not name {missing}"
    for sub in ("cost", "frontends", "runtime", "policies", "extract"):
        for p in (pkg / sub).glob("*.py"):
            if p.name != "__init__.py":
                assert p.stem in design, f"docs/design.md does not name {sub}/{p.name}"


# -- 14. an interrupted phase says it was interrupted ---------------------------------------
def test_interrupted_phase_says_so() -> None:
    from io import StringIO

    from rich.console import Console
    from tensat_py.progress import PhaseDisplay

    buf = StringIO()
    display = PhaseDisplay(console=Console(file=buf, force_terminal=False), delay=10.0)
    with pytest.raises(KeyboardInterrupt), display.phase("extraction"):
        raise KeyboardInterrupt
    assert re.fullmatch(r"extraction: interrupted after \d+\.\d s\n", buf.getvalue())
    buf.truncate(0)
    buf.seek(0)
    with display.phase("extraction"):
        pass
    assert buf.getvalue() == ""  # a quick phase that ended normally prints nothing


# -- 15. negative costs (extraction-gym's maxsat family) -----------------------------------
def _signed_problem() -> ExtractionProblem:
    """Root class 0 = {plain (2), use(class 1) (1)}; class 1 = {bonus (-5), alt(class 0)
    (-10), far(class 2) (0)}; class 2 = {deep (-4)}; class 3 = {orphan (-100)}, needed by
    nothing. The best extraction is use -> bonus = -4 (far -> deep gives 1 + 0 - 4 = -3;
    alt would give -9 but closes a cycle); picking the orphan must not count."""
    return ExtractionProblem(
        node_op=["plain", "use", "bonus", "alt", "far", "deep", "orphan"],
        node_eclass=[0, 0, 1, 1, 1, 2, 3],
        node_children=[[], [1], [], [0], [2], [], []],
        node_cost=[2.0, 1.0, -5.0, -10.0, 0.0, -4.0, -100.0],
        num_classes=4,
        roots=[0],
    )


def _brute_force(p: ExtractionProblem) -> float:
    """Least DAG cost over every valid choice (tiny problems only)."""
    import itertools

    best = math.inf
    per_class = p.class_nodes()
    for pick in itertools.product(*[nodes or [None] for nodes in per_class]):
        choice = {c: n for c, n in enumerate(pick) if n is not None}
        if p.check_choice(choice) is None:
            best = min(best, p.dag_cost(p.reachable(choice)))
    return best


@pytest.mark.parametrize("solver", ["cbc", "highs"])
def test_ilp_extracts_the_optimum_under_negative_costs(solver) -> None:
    p = _signed_problem()
    res = extract(p, extractor="ilp", solver=solver, time_limit=20.0)
    assert res.status == "optimal" and res.cost == _brute_force(p) == -4.0
    assert res.choices == {0: 1, 1: 2}


@pytest.mark.parametrize("extractor", ["greedy", "greedy-dag", "beam"])
def test_greedy_extractors_take_negative_costs_and_say_their_answer_bounds_nothing(
    extractor,
) -> None:
    res = extract(_signed_problem(), extractor=extractor)
    assert res.status == "greedy" and "no bound on the optimum" in res.message
    assert res.cost == _signed_problem().dag_cost(res.choices) and res.lower_bound is None


def test_extract_command_accepts_negative_costs_and_refuses_nan(tmp_path) -> None:
    from tensat_py.egraph import save_json

    f = tmp_path / "maxsat.json"
    save_json(_signed_problem(), f)
    code, out = _run("extract", str(f), "--json")
    assert code == 0, out
    assert json.loads(out)["cost"] == -4.0
    f.write_text(f.read_text().replace('"cost": -5.0', '"cost": NaN'))
    code, out = _run("extract", str(f))
    assert code == 2 and "is not a finite number" in out, out
