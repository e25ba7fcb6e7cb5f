"""egraph-serialize JSON load/save for ExtractionProblem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensat_py.egraph import ExtractionProblem, load_json, save_json

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "egraphs"


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
        (lambda d: d["nodes"]["x"].update(cost=-1), "node 'x': cost -1"),
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


def test_real_file_round_trip(tmp_path: Path) -> None:
    path = DATA / "tensat_vgg_acyclic.json"
    if not path.exists():
        pytest.skip(f"reference e-graphs not present ({DATA})")
    p = load_json(path)
    assert p.num_nodes == 112 and p.num_classes == 96
    save_json(p, tmp_path / "vgg.json")
    q = load_json(tmp_path / "vgg.json")
    assert q.node_children == p.node_children and q.node_cost == p.node_cost
