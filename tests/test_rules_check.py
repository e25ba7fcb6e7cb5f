"""`tensat rules check`: every shipped rule holds numerically; wrong rules FAIL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tensat_py._core import RuleSet
from tensat_py.cli import main
from tensat_py.pipeline import RULES_DIR
from tensat_py.rules_check import TOLERANCE, check_files, check_rule

SHIPPED = sorted(RULES_DIR.glob("*.rules"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_rule_passes_or_is_untestable_with_a_reason(path: Path) -> None:
    report = check_files([path])
    fails = [(r.name, r.reason, r.shapes) for r in report.results if r.status == "FAIL"]
    assert not fails, fails
    for r in report.results:
        if r.status == "UNTESTABLE":
            assert r.reason, r.name
        else:
            assert r.instances >= 1 and r.max_rel_error <= TOLERANCE
    if path.stem == "taso":  # every Tensat rule is testable
        assert report.counts["PASS"] == len(report.results) == 156


WRONG = """\
swap-concat: (concat 1 2 ?a ?b) => (concat 1 2 ?b ?a)
add-is-mul: (ewadd ?a ?b) => (ewmul ?a ?b)
relu-fuse-wrong-code: (relu (matmul 0 ?a ?b)) => (matmul 3 ?a ?b)
good: (ewadd ?a ?b) => (ewadd ?b ?a)
# Stacking weights of a grouped convolution mixes the groups: needs dim(?x, 1) == dim(?w1, 1).
concat-conv-no-condition:
    (concat 1 4 (conv2d 1 1 0 0 ?x ?w1) (conv2d 1 1 0 0 ?x ?w2))
  => (conv2d 1 1 0 0 ?x (concat 0 4 ?w1 ?w2))
swapped-halves:
    (relu ?a), (relu ?b)
  => (split_1 (split 0 (relu (concat 0 2 ?a ?b)))),
     (split_0 (split 0 (relu (concat 0 2 ?a ?b))))
"""


def test_rules_whose_sides_differ_fail(tmp_path: Path) -> None:
    f = tmp_path / "wrong.rules"
    f.write_text(WRONG)
    report = check_files([f])
    status = {r.name: r.status for r in report.results}
    assert status == {
        "swap-concat": "FAIL",
        "add-is-mul": "FAIL",
        "relu-fuse-wrong-code": "FAIL",
        "good": "PASS",
        "concat-conv-no-condition": "FAIL",
        "swapped-halves": "FAIL",
    }
    bad = next(r for r in report.results if r.name == "concat-conv-no-condition")
    assert "relative error" in bad.reason and set(bad.shapes) == {"?x", "?w1", "?w2"}
    assert bad.line == 6 and bad.file == str(f)


def test_conditions_are_respected() -> None:
    # The same unsound rule with the shipped condition passes.
    rs = RuleSet.parse(
        "r: (concat 1 4 (conv2d 1 1 0 0 ?x ?w1) (conv2d 1 1 0 0 ?x ?w2))\n"
        "  => (conv2d 1 1 0 0 ?x (concat 0 4 ?w1 ?w2)) if dim(?x, 1) == dim(?w1, 1)\n",
        "c.rules",
    )
    assert check_rule(rs, 0).status == "PASS"


def test_untestable_has_a_reason() -> None:
    # A concat along axis 0 is never as long as one of its operands there.
    rs = RuleSet.parse("r: (ewadd (concat 0 2 ?a ?b) ?a) => ?a", "u.rules")
    r = check_rule(rs, 0, attempts=30)
    assert r.status == "UNTESTABLE" and "no valid instance" in r.reason


def test_cli_exit_status_and_json(tmp_path: Path) -> None:
    runner = CliRunner()
    good = tmp_path / "good.rules"
    good.write_text("comm: (ewadd ?a ?b) <=> (ewadd ?b ?a)\n")
    ok = runner.invoke(main, ["rules", "check", str(good)])
    assert ok.exit_code == 0, ok.output
    assert "2 rules: 2 PASS, 0 FAIL, 0 UNTESTABLE" in ok.output
    f = tmp_path / "wrong.rules"
    f.write_text(WRONG)
    bad = runner.invoke(main, ["rules", "check", str(f)])
    assert bad.exit_code == 1
    assert "FAIL        swap-concat" in bad.output
    js = runner.invoke(main, ["rules", "check", str(f), "--json"])
    assert js.exit_code == 1
    obj = json.loads(js.output)
    assert obj["counts"] == {"PASS": 1, "FAIL": 5, "UNTESTABLE": 0}
    assert obj["tolerance"] == TOLERANCE
    assert {r["name"] for r in obj["rules"]} >= {"good", "swap-concat"}
