"""TASO .model loader: whole files load (our hand-written ones in tests/fixtures/taso and,
beside a development checkout, Tensat's in ../shared/data/taso-models); malformed files
fail clearly."""

import numpy as np
import pytest
from reference_data import fixture, param, shared
from tensat_py.frontends.taso_model import TasoModelError, load, loads
from tensat_py.runtime import random_feeds, run

DATA = shared("taso-models")


def models(ours: list[tuple], theirs: list[tuple]) -> list:
    """Parameters ``(path, *values)``: our fixture models (``mini_<name>.model``), then
    Tensat's (``<name>.model``) where ../shared/data/taso-models is present."""
    cases = [param(fixture("taso", f"mini_{name}.model"), *v) for name, *v in ours]
    if DATA is not None:
        cases += [param(DATA / f"{name}.model", *v, source="shared") for name, *v in theirs]
    return cases


CONCATS = ("concat", "concat3", "concat4", "concat5")


def concats(counts):
    return sum(counts.get(op, 0) for op in CONCATS)


@pytest.mark.parametrize(
    "path,expect,out_shape,batch",
    models(
        [
            # a six-way concat: concat5 plus a two-way tail
            ("inception", {"conv2d": 10, "concat": 2, "poolmax": 1, "poolavg": 2}, (1, 10), 1),
            ("squeezenet", {"conv2d": 8, "concat": 2, "poolmax": 1, "poolavg": 1}, (1, 10), 1),
            ("bts", {"matmul": 3, "transpose": 2, "reshape": 2, "tanh": 1}, (16, 32), 16),
            ("mobile", {"conv2d": 3, "batchnorm": 3, "relu": 1}, (1, 8, 6, 6), 1),
        ],
        [
            (
                "inceptionv3",
                {"conv2d": 94, "concat": 30, "poolmax": 5, "poolavg": 9},
                (1, 2048, 1, 1),
                1,
            ),
            ("squeezenet", {"conv2d": 26, "concat": 8, "relu": 26}, (1, 1000), 1),
            ("vgg", {"conv2d": 16, "matmul": 3, "poolmax": 5}, (1, 1000), 1),
        ],
    ),
)
def test_reference_models_load_whole(path, expect, out_shape, batch):
    g = load(path)
    counts = g.op_counts()
    for op, n in expect.items():
        assert (concats(counts) if op == "concat" else counts.get(op, 0)) == n, op
    assert [t.shape for t in g.output_types()] == [out_shape]
    assert g[g.inputs()[0]].type.shape[0] == batch
    # every operator of the file except pooling placeholders became a node
    lines = path.read_text().split("\n")
    n_ops = len([k for k in range(0, len(lines) - 3, 4)])
    placeholders = counts.get("poolmax", 0) + counts.get("poolavg", 0)
    extra = sum(1 for n in g if n.name.endswith("_tail"))  # nested >5-way concats
    assert len(g) - extra == n_ops - placeholders


@pytest.mark.parametrize(
    "path,out_shape", models([("squeezenet", (1, 10))], [("squeezenet", (1, 1000))])
)
def test_squeezenet_runs(path, out_shape):
    g = load(path)
    (out,) = run(g, random_feeds(g))
    assert out.shape == out_shape and np.isfinite(out).all()


@pytest.mark.parametrize(
    "path,op,count",
    # BERT-like: transposes in the older format (and ours one in the newer); batch norms
    models(
        [("bts", "matmul", 3), ("mobile", "batchnorm", 3)],
        [("bts", "matmul", 48), ("mobilenetv2", "batchnorm", 53)],
    ),
)
def test_other_reference_models_load(path, op, count):
    assert load(path).op_counts()[op] == count


def test_both_transpose_layouts_give_the_permutation() -> None:
    # mini_bts.model: guid 204 in the older layout (permutation, shuffle), guid 207 in the
    # newer (ndim, permutation, shuffle); both swap the first two axes.
    g = load(fixture("taso", "mini_bts.model"))
    perms = {n.name: n.params["perm"] for n in g if n.op == "transpose"}
    assert perms == {"transpose_204": (1, 0, 2), "transpose_207": (1, 0, 2)}


def test_a_bias_nothing_reads_is_kept_as_a_dead_weight() -> None:
    g = load(fixture("taso", "mini_mobile.model"))
    live = g.live()
    dead = [n for i, n in enumerate(g.nodes) if n.op == "weight" and not live[i]]
    assert [n.name for n in dead] == ["w_423"]


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


@pytest.mark.parametrize(
    "path,out_shape", models([("inception", (1, 10))], [("inceptionv3", (1, 2048, 1, 1))])
)
def test_inceptionv3_runs_in_float32(path, out_shape):
    g = load(path)
    (out,) = run(g, random_feeds(g, dtype="float32"))
    assert out.shape == out_shape and out.dtype == np.float32
    assert np.isfinite(out).all() and np.abs(out).max() > 0
