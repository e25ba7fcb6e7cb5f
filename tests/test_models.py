"""Model zoo: BERT and NasRNN structure as in Tensat, small runs, zoo lookup."""

import numpy as np
import pytest
from tensat_py import models
from tensat_py.models import bert, nasrnn
from tensat_py.runtime import random_feeds, run


def test_bert_structure_matches_tensat():
    g = bert()
    c = g.op_counts()
    assert c == {
        "input": 1,
        "relu": 1,
        "weight": 32,
        "matmul": 48,
        "reshape": 32,
        "transpose": 32,
    }
    assert [t.shape for t in g.output_types()] == [(64, 1024)] * 9
    flat = g.to_flat()
    assert flat[-1][0] == "noop" and sum(op == "noop" for op, _ in flat) == 8
    # q, k, v matmuls share the layer input (the paper's Figure 7 merge opportunity)
    first = [n for n in g if n.op == "matmul"][:3]
    assert len({n.inputs[0] for n in first}) == 1


def test_bert_small_runs_and_general_sizes():
    g = bert(seq=8, hidden=16, heads=2, layers=2)
    outs = run(g, random_feeds(g, dtype="float64"))
    assert [o.shape for o in outs] == [(8, 16)] * 3
    assert all(np.isfinite(o).all() for o in outs)
    with pytest.raises(ValueError):
        bert(hidden=10, heads=3)


def test_nasrnn_structure():
    g = nasrnn()
    c = g.op_counts()
    assert c["matmul"] == 80 and c["input"] == 5 and c["weight"] == 81
    assert c["ewadd"] == 5 * 11 and c["ewmul"] == 5 * 4
    assert [t.shape for t in g.output_types()] == [(1, 512)]
    small = nasrnn(steps=2, hidden=8)
    (out,) = run(small, random_feeds(small))
    assert out.shape == (1, 8) and np.all(np.abs(out) <= 1)


def test_zoo_lookup():
    assert {"bert", "nasrnn", "inceptionv3", "squeezenet", "vgg19"} <= set(models.ZOO)
    assert models.get("NasRNN").op_counts()["matmul"] == 80
    with pytest.raises(KeyError, match="known"):
        models.get("alexnet")
    assert models.get("vgg19").op_counts()["conv2d"] == 16
