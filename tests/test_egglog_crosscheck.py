"""egglog as a second engine: each shipped rule file, exported with `tensat rules export`,
saturates small programs in egglog and in our engine; the same pairs of sub-terms must end
up equal. A difference is a bug in one of the engines and is reported with the terms."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from tensat_py.builder import GraphBuilder
from tensat_py.cli import main
from tensat_py.egglog_export import (
    egglog_equal_pairs,
    export_rules,
    tensat_equal_pairs,
)
from tensat_py.graph import Graph
from tensat_py.pipeline import RULES_DIR

pytest.importorskip("egglog", reason="egglog is in the test extra: pip install '.[test]'")

ITERATIONS = 2


def _matmuls() -> Graph:
    b = GraphBuilder()
    x = b.input((4, 8), name="x")
    w1, w2 = b.weight((8, 3), name="w1"), b.weight((8, 3), name="w2")
    m1, m2 = b.matmul(x, w1), b.matmul(x, w2)
    s1, s2 = b.ewadd(m1, m2), b.ewadd(m2, m1)
    return b.finish([b.relu(s1), s2, b.matmul(x, b.ewadd(w1, w2))])


def _elementwise() -> Graph:
    b = GraphBuilder()
    x, y, z = (b.input((4, 4), name=n) for n in "xyz")
    a = b.ewadd(b.ewadd(x, y), z)
    c = b.ewadd(x, b.ewadd(y, z))
    d = b.ewmul(x, b.ewadd(y, z))
    e = b.ewadd(b.ewmul(x, y), b.ewmul(x, z))
    return b.finish([a, c, d, e, b.relu(b.relu(x))])


def _convs() -> Graph:
    b = GraphBuilder()
    x = b.input((1, 4, 6, 6), name="x")
    c1 = b.conv2d(x, (4, 4, 3, 3))
    c2 = b.conv2d(x, (4, 4, 3, 3))
    r = b.relu(c1)
    return b.finish(
        [
            b.ewadd(c1, c2),
            b.ewadd(c2, c1),
            b.transpose(b.transpose(r, (1, 0, 2, 3)), (1, 0, 2, 3)),
            r,
        ]
    )


def _general() -> Graph:
    b = GraphBuilder()
    x, y = b.input((4, 4), name="x").id, b.input((4, 4), name="y").id
    g = b.graph
    outs = [g.add_node(op, {}, ins) for op in ("add", "mul") for ins in ([x, y], [y, x])]
    outs.append(g.add_node("ewadd", {}, [x, y]))
    g.outputs = outs
    return g


PROGRAMS = {"taso": [_matmuls, _elementwise, _convs], "tensor": [_general, _elementwise]}


def _describe(flat, i: int) -> str:
    def term(k: int) -> str:
        op, ch = flat[k]
        return op if not ch else f"({op} {' '.join(term(c) for c in ch)})"

    return term(i)


@pytest.mark.parametrize(
    "rules,build",
    [(r, b) for r, bs in PROGRAMS.items() for b in bs],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_both_engines_make_the_same_terms_equal(rules: str, build) -> None:
    exported = export_rules(rules)
    flat = build().to_flat()
    ours, stop = tensat_equal_pairs(exported, flat, ITERATIONS)
    theirs = egglog_equal_pairs(exported, flat, ITERATIONS)
    diff = [
        f"{'tensat' if p in ours else 'egglog'} only: {_describe(flat, p[0])} == "
        f"{_describe(flat, p[1])}"
        for p in sorted(ours ^ theirs)
    ]
    assert not diff, "\n".join(diff)
    assert ours, "the program should give the rules something to equate"


def test_conditional_rules_are_listed_with_the_reason() -> None:
    exported = export_rules("taso")
    reasons = dict(exported.skipped)
    assert any("reads the shape analysis" in r for r in reasons.values())
    assert set(reasons).isdisjoint(exported.rules)


def test_rules_export_command_writes_a_program_egglog_runs(tmp_path: Path) -> None:
    from egglog.bindings import EGraph

    out = tmp_path / "taso.egg"
    res = CliRunner().invoke(main, ["rules", "export", "taso", "--egglog", str(out)])
    assert res.exit_code == 0, res.output
    assert "not exported: " in res.output and "rules exported" in res.output
    eg = EGraph()
    eg.run_program(*eg.parse_program(out.read_text()))  # egglog accepts the whole program


def test_rules_export_reports_a_missing_file() -> None:
    res = CliRunner().invoke(main, ["rules", "export", "tasso", "--egglog", "x.egg"])
    assert res.exit_code == 2 and "did you mean 'taso'" in res.output


@pytest.mark.parametrize("path", sorted(RULES_DIR.glob("*.rules")), ids=lambda p: p.stem)
def test_every_shipped_rule_file_exports_to_a_program_egglog_accepts(path: Path) -> None:
    from egglog.bindings import EGraph

    exported = export_rules(path)
    assert len(exported.rules) + len(exported.skipped) >= len(exported.rules) > 0
    eg = EGraph()
    eg.run_program(*eg.parse_program(exported.program))
