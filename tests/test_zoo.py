"""Model zoo: every builder type-checks with its published shapes, and the networks that
Tensat ships as TASO ``.model`` files have the same main-operator counts as ours."""

from pathlib import Path

import pytest
from reference_data import SHARED, fixture, skip_reason
from tensat_py import models
from tensat_py.builder import GraphBuilder
from tensat_py.frontends.taso_model import load as load_model
from tensat_py.graph import Graph

NAMES = ["bert", "nasrnn", "nasneta", "resnext50", "inceptionv3", "squeezenet", "vgg19", "resnet50"]

OUTPUT_SHAPES = {
    "bert": [(64, 1024)] * 9,
    "nasrnn": [(1, 512)],
    "nasneta": [(1, 5120, 7, 7)],
    "resnext50": [(1, 2048, 7, 7)],
    "inceptionv3": [(1, 2048, 1, 1)],
    "squeezenet": [(1, 1000)],
    "vgg19": [(1, 1000)],
    "resnet50": [(1, 1000)],
}

#: Operator families compared with Tensat's serialised graphs.
MAIN_OPS = {
    "conv2d": ("conv2d",),
    "concat": ("concat", "concat3", "concat4", "concat5"),
    "matmul": ("matmul",),
    "poolmax": ("poolmax",),
    "poolavg": ("poolavg",),
}


def main_counts(counts: dict[str, int]) -> dict[str, int]:
    return {fam: sum(counts.get(op, 0) for op in ops) for fam, ops in MAIN_OPS.items()}


def test_zoo_names():
    assert list(models.ZOO) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_builds_and_type_checks(name):
    g = models.get(name)
    assert [t.shape for t in g.output_types()] == OUTPUT_SHAPES[name]
    g.to_flat()  # every node enters the e-graph language
    assert all(g.live()[i] for i in g.outputs)


def test_published_structure():
    c = models.get("resnext50").op_counts()
    assert c["conv2d"] == 53 and c["ewadd"] == 16
    grouped = [n for n in models.get("resnext50") if n.op == "weight" and n.shape[2] == 3]
    assert {n.shape[0] // n.shape[1] for n in grouped} == {32}
    c = models.get("nasneta").op_counts()
    assert c["concat5"] == 18 and c["ewadd"] == 90
    assert models.get("resnet50").op_counts()["conv2d"] == 53


TASO_MODELS = SHARED / "taso-models"


def _taso_dir() -> Path | None:
    """Tensat's .model files: relative to the checkout, else where the installed package
    finds them (``TENSAT_TASO_MODELS``, or ../shared beside it; CI installs a wheel)."""
    if TASO_MODELS.is_dir():
        return TASO_MODELS
    return models.taso_model_dir()


def _tensat_models() -> list:
    """``(zoo name, Tensat's file)``; one skipped case where no .model files are found."""
    d = _taso_dir()
    if d is None:
        why = skip_reason("Tensat's TASO .model files", "taso-models", "taso")
        why += " (or set TENSAT_TASO_MODELS to a folder holding them)"
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=why), id="no-tensat-models")]
    files = [("inceptionv3", "inceptionv3"), ("squeezenet", "squeezenet"), ("vgg19", "vgg")]
    return [pytest.param(name, d / f"{file}.model", id=name) for name, file in files]


@pytest.mark.parametrize("name,path", _tensat_models())
def test_same_main_ops_as_tensat_model(name: str, path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    _same_main_ops(models.get(name), load_model(path))


def _same_main_ops(ours: Graph, theirs: Graph) -> None:
    """Equal main-operator counts, output shapes and first-input shape."""
    assert main_counts(ours.op_counts()) == main_counts(theirs.op_counts())
    assert [t.shape for t in ours.output_types()] == [t.shape for t in theirs.output_types()]
    assert ours.inputs() and theirs.inputs()
    assert ours[ours.inputs()[0]].shape == theirs[theirs.inputs()[0]].shape


def _mini_squeezenet() -> Graph:
    """tests/fixtures/taso/mini_squeezenet.model, built again with the GraphBuilder: a
    stride-2 stem, a max pool, two fire modules, a 1x1 classifier and a global average."""
    b = GraphBuilder()
    x = b.input((1, 3, 32, 32))
    h = b.conv2d(x, b.weight((16, 3, 3, 3)), stride=2, padding="same", act="relu")
    h = b.poolmax(h, (3, 3), (2, 2), padding="same")
    for _ in range(2):
        s = b.conv2d(h, b.weight((4, 16, 1, 1)), stride=1, padding="same", act="relu")
        e1 = b.conv2d(s, b.weight((8, 4, 1, 1)), stride=1, padding="same", act="relu")
        e3 = b.conv2d(s, b.weight((8, 4, 3, 3)), stride=1, padding="same", act="relu")
        h = b.concat(1, [e1, e3])
    h = b.conv2d(h, b.weight((10, 16, 1, 1)), stride=1, padding="same", act="relu")
    h = b.poolavg(h, (8, 8), (1, 1), padding="valid")
    return b.finish([b.reshape(h, (1, 10))])


def test_same_main_ops_as_a_hand_written_model() -> None:
    # The same comparison on a network we wrote both as a .model file and with the builder.
    _same_main_ops(_mini_squeezenet(), load_model(fixture("taso", "mini_squeezenet.model")))
