"""Model zoo: every builder type-checks with its published shapes, and the networks that
Tensat ships as TASO ``.model`` files have the same main-operator counts as ours."""

from pathlib import Path

import pytest
from tensat_py import models
from tensat_py.frontends.taso_model import load as load_model

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


TASO_MODELS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "taso-models"


def _taso_dir() -> Path:
    # Relative to the checkout, not the installed package (CI installs a wheel).
    if TASO_MODELS.is_dir():
        return TASO_MODELS
    d = models.taso_model_dir()
    if d is None:
        pytest.skip(f"{TASO_MODELS} is absent: no TASO .model files to compare")
    return d


@pytest.mark.parametrize(
    "name,file", [("inceptionv3", "inceptionv3"), ("squeezenet", "squeezenet"), ("vgg19", "vgg")]
)
def test_same_main_ops_as_tensat_model(name, file):
    path = _taso_dir() / f"{file}.model"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    ours = models.get(name)
    theirs = load_model(path)
    assert main_counts(ours.op_counts()) == main_counts(theirs.op_counts())
    assert [t.shape for t in ours.output_types()] == [t.shape for t in theirs.output_types()]
    assert ours.inputs() and theirs.inputs()
    assert ours[ours.inputs()[0]].shape == theirs[theirs.inputs()[0]].shape
