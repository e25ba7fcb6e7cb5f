"""egraph-serialize JSON load/save for ExtractionProblem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_data import egraph_facts, fixture, param, shared
from tensat_py.egraph import ExtractionProblem, load_json, save_json


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    return path


SMALL = {
    "nodes": {
        "x": {"op": "x", "children": [], "eclass": "cx", "cost": 1.0},
        "f": {"op": "f", "children": ["x", "x"], "eclass": "cf", "cost": 2.0},
        "g": {"op": "g", "children": ["f"], "eclass": "cf", "cost": 0.5},
        "y": {"op": "y", "children": [], "eclass": "cx"},
    },
    "root_eclasses": ["cf"],
}


def test_load_small(tmp_path: Path) -> None:
    p = load_json(write(tmp_path, SMALL))
    assert p.num_classes == 2
    assert p.node_eclass == [0, 1, 1, 0]
    assert p.node_children == [[], [0, 0], [1], []]
    assert p.node_cost == [1.0, 2.0, 0.5, 1.0]  # missing cost defaults to 1.0
    assert p.roots == [1]
    assert p.node_names == ["x", "f", "g", "y"]
    assert p.class_names == ["cx", "cf"]


def test_round_trip(tmp_path: Path) -> None:
    p = load_json(write(tmp_path, SMALL))
    p.forbidden = {2}
    out = tmp_path / "out.json"
    save_json(p, out)
    q = load_json(out)
    for name in ("node_op", "node_eclass", "node_children", "node_cost", "roots", "num_classes"):
        assert getattr(q, name) == getattr(p, name), name
    assert q.forbidden_set() == {2}
    assert q.node_names == p.node_names and q.class_names == p.class_names
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".tmp")]


def test_save_without_names(tmp_path: Path) -> None:
    p = ExtractionProblem(
        node_op=["a", "b"],
        node_eclass=[0, 1],
        node_children=[[], [0]],
        node_cost=[1.0, 2.0],
        num_classes=2,
        roots=[1],
        forbidden=[False, False],
    )
    save_json(p, tmp_path / "p.json")
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["nodes"]["1"]["children"] == ["0"]
    assert data["root_eclasses"] == ["1"]
    assert load_json(tmp_path / "p.json").node_children == [[], [0]]


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d["nodes"]["f"]["children"].append("nope"), "child 'nope' is not a node"),
        (lambda d: d["nodes"]["g"].pop("eclass"), "node 'g': missing \"eclass\""),
        (lambda d: d["nodes"]["x"].update(cost=float("nan")), "node 'x': cost nan"),
        (lambda d: d["nodes"]["x"].update(cost=float("inf")), "node 'x': cost inf"),
        (lambda d: d["nodes"]["x"].update(cost="1"), "node 'x': cost '1'"),
        (lambda d: d.update(root_eclasses=["zz"]), "root class 'zz'"),
        (lambda d: d.pop("root_eclasses"), "root_eclasses"),
        (lambda d: d.update(nodes=[]), '"nodes" object'),
    ],
)
def test_malformed(tmp_path: Path, mutate, needle: str) -> None:
    data = json.loads(json.dumps(SMALL))
    mutate(data)
    path = write(tmp_path, data)
    with pytest.raises(ValueError) as err:
        load_json(path)
    assert str(path) in str(err.value)
    assert needle in str(err.value)


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{nodes")
    with pytest.raises(ValueError, match="not JSON"):
        load_json(path)


def test_validate_reports_node() -> None:
    p = ExtractionProblem(["a"], [0], [[3]], [1.0], 1, [0])
    with pytest.raises(ValueError, match="node 0: child class 3"):
        p.validate()


def real_files() -> list:
    """``(path, nodes, classes)``: our dumped fixture e-graphs (counts taken from the raw
    JSON by tests/fixtures/make_fixtures.py) and, beside a development checkout, Tensat's
    VGG e-graph from ../shared/data/egraphs."""
    facts = egraph_facts()
    cases = [
        param(fixture("egraphs", f"{name}.json"), facts[name]["nodes"], facts[name]["classes"])
        for name in ("conv_pairs2", "conv_pairs3_acyclic")
    ]
    if (path := shared("egraphs", "tensat_vgg_acyclic.json")) is not None:
        cases.append(param(path, 112, 96, source="shared"))
    return cases


@pytest.mark.parametrize(("path", "nodes", "classes"), real_files())
def test_real_file_round_trip(tmp_path: Path, path: Path, nodes: int, classes: int) -> None:
    p = load_json(path)
    assert p.num_nodes == nodes and p.num_classes == classes
    save_json(p, tmp_path / "again.json")
    q = load_json(tmp_path / "again.json")
    assert q.node_children == p.node_children and q.node_cost == p.node_cost
    assert q.node_op == p.node_op and q.roots == p.roots
    assert q.forbidden_set() == p.forbidden_set()


def test_nodes_the_cycle_filter_forbade_are_read_back() -> None:
    # Our optimiser's dump of an e-graph with the efficient cycle filter names the nodes it
    # filtered in "tensat_forbidden"; the loader marks exactly those.
    path = fixture("egraphs", "conv_pairs3_acyclic.json")
    raw = json.loads(path.read_text())
    p = load_json(path)
    assert raw["tensat_forbidden"]
    assert {p.node_names[i] for i in p.forbidden_set()} == set(raw["tensat_forbidden"])
