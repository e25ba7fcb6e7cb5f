"""Shrinking rules (a term made equal to one of its own sub-terms) simplify under every
cycle filter: the union is applied and the e-node it makes cyclic is filtered, so the
smaller program is extracted (docs/exploration.md, "Shrinking rules")."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensat_py
from tensat_py.builder import GraphBuilder

FILTERS = ("efficient", "vanilla", "none")
EXTRACTORS = ("greedy", "greedy-dag", "ilp")


def _rule_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "shrink.rules"
    path.write_text(text + "\n")
    return path


def _optimize(graph, rules: Path, cycle_filter: str, extractor: str):
    res = tensat_py.optimize(graph, rules=rules, cycle_filter=cycle_filter, extractor=extractor)
    assert not res.extraction_status.startswith("fallback"), res.message
    assert res.verify is not None and res.verify.passed
    assert res.stats["rejected_cycle"] == 0
    return res


@pytest.mark.parametrize("extractor", EXTRACTORS)
@pytest.mark.parametrize("cycle_filter", FILTERS)
def test_relu_of_relu_rule_leaves_one_relu(
    tmp_path: Path, cycle_filter: str, extractor: str
) -> None:
    rules = _rule_file(tmp_path, "relu-relu: (relu (relu ?x)) => (relu ?x)")
    b = GraphBuilder()
    g = b.finish(b.relu(b.relu(b.relu(b.input((4, 4), name="x")))))
    res = _optimize(g, rules, cycle_filter, extractor)
    assert res.graph.op_counts().get("relu", 0) == 1
    assert res.cost_after < res.cost_before
    if cycle_filter != "none":
        assert res.stats["filtered_enodes"] >= 1


@pytest.mark.parametrize("extractor", EXTRACTORS)
@pytest.mark.parametrize("cycle_filter", FILTERS)
def test_dropout_rule_removes_the_dropout(
    tmp_path: Path, cycle_filter: str, extractor: str
) -> None:
    rules = _rule_file(tmp_path, "dropout-id: (dropout ?x) => ?x")
    b = GraphBuilder()
    g = b.finish(b.tanh(b.dropout(b.relu(b.input((4, 4), name="x")))))
    res = _optimize(g, rules, cycle_filter, extractor)
    counts = res.graph.op_counts()
    assert counts.get("dropout", 0) == 0
    assert (counts.get("relu", 0), counts.get("tanh", 0)) == (1, 1)


@pytest.mark.parametrize("extractor", EXTRACTORS)
@pytest.mark.parametrize("cycle_filter", FILTERS)
def test_transpose_pair_rule_keeps_the_inner_transpose_output(
    tmp_path: Path, cycle_filter: str, extractor: str
) -> None:
    # t(x) and t(t(x)) are both outputs: the union of t(t(x)) with x must not cost t(x)
    # its only e-node.
    rules = _rule_file(tmp_path, "tt: (transpose (transpose ?x [1,0]) [1,0]) => ?x")
    b = GraphBuilder()
    x = b.relu(b.input((2, 3), name="x"))
    t = b.transpose(x, (1, 0))
    g = b.finish([t, b.transpose(t, (1, 0))])
    res = _optimize(g, rules, cycle_filter, extractor)
    assert res.graph.op_counts().get("transpose", 0) == 1
    assert res.cost_after < res.cost_before
