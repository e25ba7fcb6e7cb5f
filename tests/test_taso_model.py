"""TASO .model loader: the reference files load whole; malformed files fail clearly."""

from pathlib import Path

import numpy as np
import pytest
from tensat_py.frontends.taso_model import TasoModelError, load, loads
from tensat_py.runtime import random_feeds, run

DATA = Path(__file__).parents[1] / ".." / "shared" / "data" / "taso-models"
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason="reference data ../shared/data/taso-models is absent"
)

CONCATS = ("concat", "concat3", "concat4", "concat5")


def concats(counts):
    return sum(counts.get(op, 0) for op in CONCATS)


@needs_data
@pytest.mark.parametrize(
    "name,expect,out_shape",
    [
        ("inceptionv3", {"conv2d": 94, "concat": 30, "poolmax": 5, "poolavg": 9}, (1, 2048, 1, 1)),
        ("squeezenet", {"conv2d": 26, "concat": 8, "relu": 26}, (1, 1000)),
        ("vgg", {"conv2d": 16, "matmul": 3, "poolmax": 5}, (1, 1000)),
    ],
)
def test_reference_models_load_whole(name, expect, out_shape):
    g = load(DATA / f"{name}.model")
    counts = g.op_counts()
    for op, n in expect.items():
        assert (concats(counts) if op == "concat" else counts.get(op, 0)) == n, op
    assert [t.shape for t in g.output_types()] == [out_shape]
    assert g[g.inputs()[0]].type.shape[0] == 1
    # every operator of the file except pooling placeholders became a node
    lines = (DATA / f"{name}.model").read_text().split("\n")
    n_ops = len([k for k in range(0, len(lines) - 3, 4)])
    placeholders = counts.get("poolmax", 0) + counts.get("poolavg", 0)
    extra = sum(1 for n in g if n.name.endswith("_tail"))  # nested >5-way concats
    assert len(g) - extra == n_ops - placeholders


@needs_data
def test_squeezenet_runs():
    g = load(DATA / "squeezenet.model")
    (out,) = run(g, random_feeds(g))
    assert out.shape == (1, 1000) and np.isfinite(out).all()


@needs_data
def test_other_reference_models_load():
    g = load(DATA / "bts.model")  # BERT-like: transposes in the older format
    assert g.op_counts()["matmul"] == 48
    assert load(DATA / "mobilenetv2.model").op_counts()["batchnorm"] == 53


SMALL = """100
0
10:0
1,3,8,8
101
1
11:0
4,3,3,3
102
3
100:0,101:0
1,3,8,8,4,3,3,3,2,2,0,2,1,1
103
8
102:0
1,4,4,4
"""


def test_small_model_parameters():
    g = loads(SMALL, "small.model")
    conv = next(n for n in g if n.op == "conv2d")
    assert conv.params == {"stride_h": 2, "stride_w": 2, "pad": 0, "act": 2}
    assert conv.type.shape == (1, 4, 4, 4)
    assert [g[i].name for i in g.inputs()] == ["input_100"]
    assert g[g.outputs[0]].op == "relu"


def test_truncated_file():
    text = "\n".join(SMALL.split("\n")[:-3])
    with pytest.raises(TasoModelError, match="small.model: truncated"):
        loads(text, "small.model")


def test_missing_input_names_node():
    text = SMALL.replace("102:0\n1,4,4,4", "999:0\n1,4,4,4")
    with pytest.raises(TasoModelError, match=r"guid 103 \(Relu\) reads guid 999"):
        loads(text, "small.model")


def test_cycle_names_node():
    text = SMALL.replace("100:0,101:0", "103:0,101:0")
    with pytest.raises(TasoModelError, match="cycle"):
        loads(text, "small.model")


def test_untranslatable_operator_names_guid_op_and_file():
    text = SMALL + "104\n49\n103:0\n1,4,4,4\n"
    with pytest.raises(TasoModelError) as e:
        loads(text, "small.model")
    assert "small.model" in str(e.value) and "guid 104" in str(e.value)
    assert "Exp" in str(e.value)


def test_type_error_names_node():
    text = SMALL.replace("4,3,3,3\n102", "4,5,3,3\n102")
    with pytest.raises(TasoModelError, match="guid 102 .*conv2d"):
        loads(text, "small.model")


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        load("/nonexistent/x.model")


@needs_data
def test_inceptionv3_runs_in_float32():
    g = load(DATA / "inceptionv3.model")
    (out,) = run(g, random_feeds(g, dtype="float32"))
    assert out.shape == (1, 2048, 1, 1) and out.dtype == np.float32
    assert np.isfinite(out).all() and np.abs(out).max() > 0
