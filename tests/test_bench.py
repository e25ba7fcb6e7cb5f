"""The benchmark harness on tiny stand-ins for zoo models: plan, tables, files, CLI."""

import csv

import pytest
from click.testing import CliRunner
from tensat_py import models
from tensat_py.bench import BenchConfig, RunSpec, plan_runs, run_bench
from tensat_py.cli import main


@pytest.fixture
def tiny_zoo(monkeypatch):
    monkeypatch.setitem(
        models.ZOO, "bert", lambda: models.bert(seq=8, hidden=16, heads=2, layers=2)
    )
    monkeypatch.setitem(models.ZOO, "nasrnn", lambda: models.nasrnn(steps=2, hidden=8))


def test_plan_shares_runs():
    cfg = BenchConfig(models=["bert"], k_multi=[0, 1, 2], solvers=["highs", "cbc"])
    specs = plan_runs(cfg)
    assert len(specs) == len(set(specs))
    assert RunSpec("bert", 1, solver="cbc") in specs
    assert RunSpec("bert", 2, "ilp", "none", "highs", "int") in specs
    assert RunSpec("bert", 2, "greedy", "vanilla", "-", "-") in specs
    assert not any(s.solver == "cbc" and s.k_multi != 1 for s in specs)


def test_run_bench_writes_everything(tiny_zoo, tmp_path):
    cfg = BenchConfig(
        models=["bert", "nasrnn"],
        k_multi=[0, 1],
        solvers=["highs"],
        time_cap=10.0,
        out=tmp_path,
        command="test",
    )
    report = run_bench(cfg, progress=False)
    text = report.read_text()
    for title in ("Table 1", "Figure 6", "Table 3", "Table 4", "Table 5", "Goals"):
        assert title in text
    assert f"all {len(cfg.runs)} runs verified" in text
    for name in ("runs", "table1", "figure6", "table3", "table4", "table5"):
        with open(tmp_path / f"{name}.csv") as f:
            assert len(list(csv.reader(f))) > 1, name
    assert (tmp_path / "figure6.png").stat().st_size > 1000
    assert (tmp_path / "table1.png").stat().st_size > 1000
    assert all(r.verified and r.status != "error" for r in cfg.runs)
    one = [r for r in cfg.runs if r.model == "nasrnn" and r.k_multi == 1 and r.extractor == "ilp"]
    assert one and one[0].speedup_pct > 0


def test_cli_bench(tiny_zoo, tmp_path):
    res = CliRunner().invoke(
        main,
        ["bench", "--models", "nasrnn", "--k-multi", "1", "--tables", "1", "--solver", "highs"]
        + ["--out", str(tmp_path)],
    )
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report.md").is_file() and "nasrnn" in res.output
    bad = CliRunner().invoke(main, ["bench", "--models", "alexnet", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown model" in bad.output
